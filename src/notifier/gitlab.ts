/**
 * `gitlab` provider: commit statuses and the sticky merge-request note on GitLab.com or a
 * self-managed GitLab (REST v4), through `@gitbeaker/rest` 43 resources (`Commits`,
 * `MergeRequests`, `MergeRequestNotes`, `Users`).
 *
 * Transport: gitbeaker's own request handler is replaced (its `requesterFn` option) by one that
 * sends every call through the Provider's `ProviderHttp`, so the Provider CA (F08), proxy (F09),
 * timeout, redirect policy and redacted `ProviderError`s apply to GitLab exactly as to every
 * other provider. This also removes gitbeaker's built-in retry loop (10 tries within ~0.3 s,
 * ignoring `Retry-After`) and its in-process rate limiter: a failure surfaces at once as a
 * `ProviderError` carrying `retryable`/`retryAfterMs` (GitLab's `Retry-After` and
 * `RateLimit-Reset`), and the delivery layer's backoff decides when to try again.
 *
 * Behaviour (facts/forges.md "GitLab"):
 * - Project id: the URL-encoded full path (subgroups included, case F01), e.g.
 *   `POST /api/v4/projects/platform%2Finfra%2Fstacks%2Fapp/statuses/<sha>`.
 * - States: pending → `running`, success → `success`, failure → `failed`; `name` = the context.
 * - `ref` is always sent when known: `metadata.branch`, else the source branch of the merge
 *   request the commit belongs to. When neither is known it is omitted and GitLab picks the first
 *   branch containing the commit (documented GitLab behaviour; nothing better is known).
 * - Deduplication (F05/F06): on a cache miss the commit's statuses are listed filtered by
 *   `name` (and `ref` when known), following every page; the newest one of our name decides.
 * - Same state twice answers 400 "Cannot transition status via :run from :running" (or
 *   ":enqueue from :pending"): that means the status is already in that state, so the send
 *   counts as done and is not retried (F15).
 * - Merge requests: `metadata.pullRequest` (the MR iid) when set, else the open MRs whose head
 *   (`sha`) is the commit. Notes are listed oldest first across all pages; ours is the first
 *   non-system note containing the marker written by the token's own user (GET /user) — a human's
 *   note quoting the marker is never edited (F16). Notes ≤ 1,000,000 characters (bounded by the
 *   renderer, F14).
 * - Auth: `PRIVATE-TOKEN: <token>` (personal, project or group access token, scope `api`). The
 *   GitLab API has no password authentication: when the Secret has `username`/`password` but no
 *   `token`, the `password` is used as the access token (Git-over-HTTPS credential Secrets carry a
 *   token there); basic auth is never sent.
 */
import { Commits, MergeRequestNotes, MergeRequests, Users } from '@gitbeaker/rest';
import type { ResolvedProvider } from '../credential/provider.ts';
import { ProviderError } from './errors.ts';
import {
  field,
  forgeNotifier,
  idOf,
  isRecord,
  MAX_PAGES,
  parseJson,
  repositoryFor,
  str,
  type ForgeAdapter,
  type ForgeComment,
  type SendContext,
  type StatusSnapshot,
} from './forge-common.ts';
import type { ForgeRepo as ForgeRepository } from './address.ts';
import type { ProviderHttp } from './http.ts';
import type { CommitState, NotifierFactory } from './types.ts';

type ResourceOptions = ConstructorParameters<typeof Commits>[0];
type RequesterFn = NonNullable<ResourceOptions['requesterFn']>;
type Requester = ReturnType<RequesterFn>;

/** Page size used for every GitLab listing (the API's maximum). */
const PER_PAGE = 100;

/**
 * GitLab's answer when a status is posted while its status of that name and ref is already
 * pending/running (F15): `via :run from :running`, `via :enqueue from :pending` (or
 * `:enqueue from :running`, a pending posted after running). Terminal states never answer this:
 * GitLab starts a new status instead.
 */
const SAME_STATE = /Cannot transition status via :(?:run|enqueue) from :(?:running|pending)\b/;

const STATE: Record<CommitState, string> = { pending: 'running', success: 'success', failure: 'failed' };

/** camelCase → snake_case, as GitLab expects (gitbeaker's options are camelCase). */
function snake(k: string): string {
  return k.replace(/([a-z\d])([A-Z])/g, '$1_$2').toLowerCase();
}

function snakeKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(snakeKeys);
  if (isRecord(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[snake(k)] = snakeKeys(x);
    return out;
  }
  return v;
}

function appendQuery(url: URL, params: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    const key = snake(k);
    if (Array.isArray(v)) {
      for (const x of v) url.searchParams.append(`${key}[]`, String(x));
    } else if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') {
      url.searchParams.append(key, String(v));
    }
  }
}

/**
 * A gitbeaker `requesterFn` that sends through `http`: `apiBase` (e.g.
 * `https://gitlab.example.net/api/v4`) + `/` + gitbeaker's endpoint (path parameters already
 * URL-encoded by gitbeaker), query from `searchParams` (snake_cased), JSON body (snake_cased).
 * JSON answers are parsed, others returned as text; headers are a plain object with lower-case
 * names (gitbeaker reads `link` from it to follow pages).
 */
export function gitlabRequester(
  http: ProviderHttp,
  apiBase: string,
  auth: Record<string, string>,
): RequesterFn {
  return (resource) => {
    // gitbeaker gives each resource `url` = `${host}/api/v4/${prefixUrl}` (e.g. `/projects` for
    // note resources); keep that prefix and put it under the real API base.
    const root = `${GITBEAKER_HOST}/api/v4`;
    const prefix = resource.url.startsWith(root)
      ? resource.url.slice(root.length).replace(/^\/+|\/+$/g, '')
      : '';
    const base = `${apiBase.replace(/\/+$/, '')}${prefix === '' ? '' : `/${prefix}`}`;
    return requesterFor(http, base, auth);
  };
}

/**
 * The `host` handed to gitbeaker resources: never contacted (the requester replaces it with the
 * API base); it only lets the requester find the resource's path prefix in `resource.url`.
 */
const GITBEAKER_HOST = 'http://gitbeaker.invalid';

function requesterFor(http: ProviderHttp, base: string, auth: Record<string, string>): Requester {
  const call =
    (method: string) =>
    async (
      endpoint: string,
      options?: { body?: unknown; searchParams?: Record<string, unknown>; signal?: AbortSignal },
    ): Promise<{ body: unknown; headers: Record<string, string>; status: number }> => {
      const url = new URL(`${base}/${endpoint.replace(/^\/+/, '')}`);
      if (options?.searchParams) appendQuery(url, options.searchParams);
      const body = options?.body;
      if (body instanceof FormData) {
        throw new ProviderError(`${method} ${url.origin}${url.pathname}: form uploads are not supported`, {
          code: 'UNSUPPORTED',
          retryable: false,
          secretValues: http.secretValues,
        });
      }
      const res = await http.request(url.toString(), {
        method,
        headers: {
          ...auth,
          Accept: 'application/json',
          ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(snakeKeys(body)) } : {}),
        ...(options?.signal !== undefined ? { signal: options.signal } : {}),
      });
      const type = (res.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      const parsed: unknown =
        res.status === 204
          ? null
          : type === 'application/json' || type.endsWith('+json')
            ? (parseJson(res, `${method} ${url.origin}${url.pathname}`, http.secretValues) ?? {})
            : res.text;
      return { body: parsed, headers: Object.fromEntries(res.headers.entries()), status: res.status };
    };
  const requester = {
    get: call('GET'),
    post: call('POST'),
    put: call('PUT'),
    patch: call('PATCH'),
    delete: call('DELETE'),
  };
  // gitbeaker declares each method generic in the body type it returns; the bodies above are the
  // parsed JSON GitLab sent, which is what gitbeaker's resources then hand back.
  return requester as unknown as Requester;
}

interface MergeRequest {
  id: string;
  sourceBranch: string | undefined;
}

interface GitLabClients {
  commits: InstanceType<typeof Commits>;
  mergeRequests: InstanceType<typeof MergeRequests>;
  notes: InstanceType<typeof MergeRequestNotes>;
  users: InstanceType<typeof Users>;
}

function gitlabAuth(p: ResolvedProvider): Record<string, string> {
  const token = p.token ?? p.password;
  if (token === undefined) {
    throw new Error(
      `Provider ${p.namespace}/${p.name}: type 'gitlab' needs an access token: set key 'token' in the Provider's Secret (a personal, project or group access token with scope 'api')`,
    );
  }
  return { 'PRIVATE-TOKEN': token };
}

/** Factory of the `gitlab` provider type. @throws Error when the Provider has no token (or password). */
export const gitlab: NotifierFactory = (p, { http }) => {
  const auth = gitlabAuth(p);
  const secretValues = http.secretValues;
  const clientsByBase = new Map<string, GitLabClients>();
  const clients = (repo: ForgeRepository): GitLabClients => {
    let c = clientsByBase.get(repo.apiBase);
    if (c === undefined) {
      const opts = {
        host: GITBEAKER_HOST,
        requesterFn: gitlabRequester(http, repo.apiBase, auth),
        queryTimeout: null,
      };
      c = {
        commits: new Commits(opts),
        mergeRequests: new MergeRequests(opts),
        notes: new MergeRequestNotes(opts),
        users: new Users(opts),
      };
      clientsByBase.set(repo.apiBase, c);
    }
    return c;
  };
  const me = new Map<string, Promise<string>>();
  const myUserId = (repo: ForgeRepository): Promise<string> => {
    let v = me.get(repo.apiBase);
    if (v === undefined) {
      v = clients(repo)
        .users.showCurrentUser()
        .then((u: unknown) => {
          const id = idOf(field(u, 'id'));
          if (id === undefined) throw badUser(secretValues);
          return id;
        });
      me.set(repo.apiBase, v);
      v.catch(() => me.delete(repo.apiBase));
    }
    return v;
  };
  /** GitLab project id for gitbeaker, which URL-encodes it itself: the decoded full path. */
  const projectId = (repo: ForgeRepository): string => decodeURIComponent(repo.id);
  const branchOf = async (ctx: SendContext<ForgeRepository, MergeRequest>): Promise<string | undefined> => {
    const b = ctx.ev.metadata.branch?.trim();
    if (b !== undefined && b !== '') return b;
    for (const mr of await ctx.pullRequests()) if (mr.sourceBranch !== undefined) return mr.sourceBranch;
    return undefined;
  };
  const toMR = (v: unknown): MergeRequest | undefined => {
    const iid = idOf(field(v, 'iid'));
    return iid === undefined ? undefined : { id: iid, sourceBranch: str(field(v, 'source_branch')) };
  };

  const adapter: ForgeAdapter<ForgeRepository, MergeRequest> = {
    repository: (ev) => repositoryFor('gitlab', p, ev, secretValues),
    repoKey: (repo) => `${repo.apiBase}\u0000${repo.id}`,
    nativeState: (s) => STATE[s],

    async readStatus(ctx, context) {
      const ref = await branchOf(ctx);
      const query = {
        name: context,
        perPage: PER_PAGE,
        maxPages: MAX_PAGES,
        ...(ref !== undefined ? { ref } : {}),
      };
      const list: unknown = await clients(ctx.repo).commits.allStatuses(projectId(ctx.repo), ctx.sha, query);
      if (!Array.isArray(list)) return undefined;
      let newest: { id: number; snap: StatusSnapshot } | undefined;
      for (const s of list) {
        if (str(field(s, 'name')) !== context) continue;
        const id = Number(field(s, 'id'));
        const state = str(field(s, 'status'));
        if (state === undefined || !Number.isFinite(id)) continue;
        if (newest === undefined || id > newest.id) {
          newest = { id, snap: { state, description: str(field(s, 'description')) ?? '' } };
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      const ref = await branchOf(ctx);
      try {
        await clients(ctx.repo).commits.editStatus(
          projectId(ctx.repo),
          ctx.sha,
          status.state as 'running' | 'success' | 'failed',
          {
            name: status.context,
            description: status.description,
            ...(status.targetURL !== undefined ? { targetUrl: status.targetURL } : {}),
            ...(ref !== undefined ? { ref } : {}),
          },
        );
      } catch (err) {
        // F15: already in that state — the status we want is the current one.
        if (err instanceof ProviderError && err.status === 400 && SAME_STATE.test(err.message)) return;
        throw err;
      }
    },

    async pullRequest(ctx, iid) {
      try {
        return toMR(await clients(ctx.repo).mergeRequests.show(projectId(ctx.repo), Number(iid)));
      } catch (err) {
        if (err instanceof ProviderError && err.status === 404) return undefined;
        throw err;
      }
    },

    async pullRequestsForCommit(ctx) {
      const query = { perPage: PER_PAGE, maxPages: MAX_PAGES };
      const list: unknown = await clients(ctx.repo).commits.allMergeRequests(
        projectId(ctx.repo),
        ctx.sha,
        query,
      );
      if (!Array.isArray(list)) return [];
      const out: MergeRequest[] = [];
      for (const mr of list) {
        if (str(field(mr, 'state')) !== 'opened' || str(field(mr, 'sha')) !== ctx.sha) continue;
        const m = toMR(mr);
        if (m !== undefined) out.push(m);
      }
      return out;
    },

    async *comments(ctx, mr) {
      const mine = await myUserId(ctx.repo);
      const query = {
        sort: 'asc' as const,
        orderBy: 'created_at' as const,
        perPage: PER_PAGE,
        maxPages: MAX_PAGES,
      };
      const notes: unknown = await clients(ctx.repo).notes.all(projectId(ctx.repo), Number(mr.id), query);
      if (!Array.isArray(notes)) return;
      const page: ForgeComment[] = [];
      for (const n of notes) {
        const id = idOf(field(n, 'id'));
        const body = str(field(n, 'body'));
        if (id === undefined || body === undefined) continue;
        page.push({
          ref: id,
          body,
          mine: field(n, 'system') !== true && idOf(field(field(n, 'author'), 'id')) === mine,
        });
      }
      yield page;
    },

    async createComment(ctx, mr, body) {
      const note: unknown = await clients(ctx.repo).notes.create(projectId(ctx.repo), Number(mr.id), body);
      const id = idOf(field(note, 'id'));
      if (id === undefined) throw badNote(secretValues);
      return id;
    },

    async editComment(ctx, mr, ref, body) {
      await clients(ctx.repo).notes.edit(projectId(ctx.repo), Number(mr.id), Number(ref), { body });
      return ref;
    },
  };
  return forgeNotifier(http, { pullRequestComment: p.pullRequestComment, label: 'gitlab' }, adapter);
};

function badUser(secretValues: readonly string[]): ProviderError {
  return new ProviderError(
    'GitLab GET /user answered without a user id: check the Provider address and token',
    {
      code: 'BAD_RESPONSE',
      retryable: false,
      secretValues,
    },
  );
}

function badNote(secretValues: readonly string[]): ProviderError {
  return new ProviderError('GitLab answered a note creation without a note id', {
    code: 'BAD_RESPONSE',
    retryable: false,
    secretValues,
  });
}
