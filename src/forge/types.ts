/**
 * What one git forge is, in types: its address rules, its limits, and the parts of its notifier
 * — repository, commit status, sticky comment, pull-request discovery — that the shared driver
 * (./notifier.ts) runs. A forge module that lacks a part does not compile: the driver takes all of
 * them (`ForgeAdapter`), and the forge table (./registry.ts) takes every `GitProviderType`.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { AuthorAssociation, GitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { ProviderHttp } from '../notifier/http.ts';
import type { NotifierFactory, Serialize } from '../notifier/types.ts';
import type { CommitState, ProviderLimits } from '../template/rendered.ts';
import type { AddressRules } from './url.ts';

/** A commit status as the forge holds it: the forge's own state word and the description ('' when none). */
export interface StatusSnapshot {
  state: string;
  description: string;
}

/** A commit status in the forge's terms, ready to post. */
export interface NativeStatus {
  state: string;
  /** The key (bounded to the forge's key limit). */
  context: string;
  /** The display name where the forge has one beside the key (Bitbucket): the whole context. */
  name: string;
  description: string;
  targetURL: string | undefined;
}

/**
 * One comment on a pull request as the forge lists it. `ref` is whatever the forge needs to edit
 * it (an id; Bitbucket Data Center adds the version; Azure DevOps the thread id). `mine` is true
 * when the Provider's own identity authored it.
 */
export interface ForgeComment {
  ref: string;
  body: string;
  mine: boolean;
}

/** Per-send state handed to the parts: the event, the repository, the commit, the signal, the memoised pull requests. */
export interface ForgeSendContext<R, P> {
  ev: NotificationEvent;
  repo: R;
  sha: string;
  /** Cancels every request of this send (shutdown past its deadline). */
  signal: AbortSignal | undefined;
  /** The pull requests to comment on (explicit one first, else the forge's query); memoised per send. */
  pullRequests(): Promise<P[]>;
}

/** Which repository an event goes to. `R` is the forge's repository type. */
export interface RepositoryPart<R> {
  /** Resolves the repository of this event (Provider address, or the Stack's repository). @throws ProviderError */
  repository(ev: NotificationEvent): R;
  /** Stable identity of `repo` for cache keys (e.g. its API URL). */
  repoKey(repo: R): string;
}

/** Commit statuses. */
export interface StatusPart<R, P> {
  /** The forge's state word for a neutral state. */
  nativeState(state: CommitState): string;
  /**
   * When the forge's current status is read on a cache miss: for every commit (`perCommit`), or
   * once per (repository, context) after start (`perContext`: contexts are unique to this
   * controller, so a commit this process has not written to has none of ours; GitHub).
   */
  readPolicy: 'perCommit' | 'perContext';
  /** The newest status of `context` on `ctx.sha`, reading all pages; undefined when none. */
  readStatus(ctx: ForgeSendContext<R, P>, context: string): Promise<StatusSnapshot | undefined>;
  /** Posts the status. */
  writeStatus(ctx: ForgeSendContext<R, P>, status: NativeStatus): Promise<void>;
}

/** The sticky pull-request comment. */
export interface CommentPart<R, P> {
  /** Every comment of `pr`, page by page, with `mine` filled from the Provider's identity. */
  comments(ctx: ForgeSendContext<R, P>, pr: P): AsyncIterable<readonly ForgeComment[]>;
  createComment(ctx: ForgeSendContext<R, P>, pr: P, body: string): Promise<string>;
  editComment(ctx: ForgeSendContext<R, P>, pr: P, ref: string, body: string): Promise<string>;
}

/**
 * Pull-request discovery: which pull requests an event's commit belongs to. (The preview
 * controller will list a repository's open pull requests here too.)
 */
export interface PullRequestPart<R, P> {
  /** Open pull requests whose head is `ctx.sha` (the explicit one, when named, is fetched by `pullRequest`). */
  pullRequestsForCommit(ctx: ForgeSendContext<R, P>): Promise<P[]>;
  /** The pull request named by `metadata.pullRequest`; undefined when the forge says it does not exist. */
  pullRequest(ctx: ForgeSendContext<R, P>, id: string): Promise<P | undefined>;
  /**
   * The merged pull requests whose merge (merge, squash or rebase commit, or a fast-forwarded
   * head) is `ctx.sha` — for the base Stack's deployment of a merge (docs/previews.md, "One comment
   * follows the change"). Absent: the forge cannot say, and the deployment edits no comment.
   */
  mergedPullRequests?(ctx: ForgeSendContext<R, P>): Promise<P[]>;
}

/** Everything the driver needs from one forge. `P` is a pull request as the forge describes it. */
export type ForgeAdapter<R, P extends { id: string }> = RepositoryPart<R> &
  StatusPart<R, P> &
  CommentPart<R, P> &
  PullRequestPart<R, P>;

/** One git forge: registered in ./registry.ts. */
export interface ForgeDefinition<T extends GitProviderType = GitProviderType> {
  readonly type: T;
  /** How Provider addresses and Stack repositories name a repository (./<name>/address.ts). */
  readonly address: AddressRules<T>;
  /** Field limits the renderer fits and the driver asserts (./<name>/limits.ts). */
  readonly limits: ProviderLimits;
  /** Builds the notifier (client + parts, run by ./notifier.ts). */
  readonly notifier: NotifierFactory;
  /** Pull-request discovery for the preview controller (src/preview/); absent: previews unsupported. */
  readonly previews?: PreviewForgeFactory;
}

/** An open pull (merge) request as the preview controller sees it (docs/previews.md). */
export interface OpenPullRequest {
  number: number;
  /** 40-hex head commit. */
  headSHA: string;
  /** Head branch name (in the head repository: for a fork, not a branch of the base repository). */
  headRef: string;
  /** Target branch. */
  baseRef: string;
  /** The head lives in another repository than the base. */
  fork: boolean;
  /** The author's login. */
  author: string;
  /** The author's numeric id where the forge looks users up by id (GitLab). */
  authorId?: string;
  /** GitHub's `author_association`; undefined when the forge needs a lookup ({@link PreviewForge.association}). */
  association: AuthorAssociation | undefined;
  labels: string[];
  /** Web URL of the pull request. */
  webURL: string;
}

/**
 * What became of a pull request, read by number ({@link PreviewForge.pullRequestState}):
 * `merged` (into `baseRef`), `closed` without merging, or still `open` (then `baseRef` tells
 * whether it was retargeted). `baseRef` is the target branch name.
 */
export interface PullRequestState {
  state: 'open' | 'closed' | 'merged';
  baseRef: string;
}

/**
 * A listing of open pull requests: `changed: false` when the forge answered a conditional request
 * with 304 Not Modified (the previous listing still holds).
 */
export type OpenPullsResult =
  { changed: false } | { changed: true; pulls: OpenPullRequest[]; etag: string | undefined };

/**
 * What the preview controller asks of a forge, for the repository named by a Stack's repository
 * URL (`repoURL`, resolved against the Provider's address like an event's `metadata.repository`).
 * Every method throws `ProviderError` (src/notifier/errors.ts) on forge errors.
 */
export interface PreviewForge {
  /** Open pull requests targeting `base` (all pages); `etag` of the previous listing for a conditional request. */
  listOpen(
    repoURL: string,
    base: string,
    etag: string | undefined,
    signal?: AbortSignal,
  ): Promise<OpenPullsResult>;
  /** The author's association with the repository (for forges whose listing has none). */
  association(repoURL: string, pull: OpenPullRequest, signal?: AbortSignal): Promise<AuthorAssociation>;
  /**
   * Creates or edits in place the one comment of ours on pull request `number` that carries
   * `marker` (same rules as the sticky comment: ours AND marked). `mayWrite` is asked right
   * before the write (leader fencing; false → `ProviderError` code `NOT_LEADER`, nothing
   * written). With `onlyEdit`, a pull request without that comment gets none.
   * @returns the comment's web URL; undefined when `onlyEdit` found none.
   */
  upsertNotice(
    repoURL: string,
    pull: { number: number; webURL: string },
    marker: string,
    body: string,
    signal?: AbortSignal,
    mayWrite?: () => boolean,
    onlyEdit?: boolean,
  ): Promise<string | undefined>;
  /**
   * Pull request `number` read alone (one request: whether it was merged, closed or retargeted);
   * undefined when the forge has none of that number (404).
   */
  pullRequestState(
    repoURL: string,
    number: number,
    signal?: AbortSignal,
  ): Promise<PullRequestState | undefined>;
  /**
   * When the newest status of `context` on `sha` is pending — or, with `whenNone`, when there is
   * none — sets it to failure with `description` (`mayWrite` asked right before, as for
   * {@link upsertNotice}). @returns whether a status was written.
   */
  resolvePending(
    repoURL: string,
    sha: string,
    context: string,
    description: string,
    signal?: AbortSignal,
    mayWrite?: () => boolean,
    whenNone?: boolean,
  ): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Builds the {@link PreviewForge} of a Provider; it owns `deps.http` and closes it in `close()`.
 * `deps.serialize` orders its status resolutions with the deliveries' writes to the same status
 * (the notifiers' `NotifierDeps.serialize`).
 */
export type PreviewForgeFactory = (
  p: ResolvedProvider,
  deps: { http: ProviderHttp; serialize?: Serialize | undefined },
) => PreviewForge;

/** The forge-specific half of a {@link PreviewForge}; the rest is built from the {@link ForgeAdapter}. */
export interface PullRequestDiscovery<R> {
  listOpen(repo: R, base: string, etag: string | undefined, signal?: AbortSignal): Promise<OpenPullsResult>;
  association(repo: R, pull: OpenPullRequest, signal?: AbortSignal): Promise<AuthorAssociation>;
  /** {@link PreviewForge.pullRequestState}. */
  pullRequestState(repo: R, number: number, signal?: AbortSignal): Promise<PullRequestState | undefined>;
  /** Web URL of comment `ref` on the pull request at `pullURL`. */
  commentURL(pullURL: string, ref: string): string;
}
