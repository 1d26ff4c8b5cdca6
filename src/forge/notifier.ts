/**
 * The git notifier every forge shares: given a forge's parts (./types.ts `ForgeAdapter`), `send`
 * sets the commit status and upserts the sticky comment, idempotently (docs/architecture.md,
 * "Forges"). Rendered fields are checked against the forge's limits before any request — the
 * renderer fits them; a field that does not fit is a bug, refused here, never cut again.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { GitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { assertFits, ProviderError } from '../notifier/errors.ts';
import type { ProviderHttp } from '../notifier/http.ts';
import type { Notifier, Serialize } from '../notifier/types.ts';
import { credentialKey } from '../credential/key.ts';
import type { ProviderLimits, RenderedNotification } from '../template/rendered.ts';
import type { FieldLimit } from '../text.ts';
import { resolveRepository, type ForgeRepo } from './address.ts';
import { commentKey, newCommentCache, upsertStickyComment } from './comment.ts';
import { newStatusCache, syncCommitStatus } from './status.ts';
import type { ForgeAdapter, NativeStatus, ForgeSendContext } from './types.ts';

/**
 * The repository an event goes to (`resolveRepository` from ./address.ts with the Provider's
 * address and apiURL and the Stack's repository, `metadata.repository`).
 * @throws ProviderError with `code` = the failure reason (`InvalidAddress`, `NoRepository`,
 *   `OutsideAddress`), not retryable: the Provider or the Stack must change.
 */
export function repositoryFor(
  type: GitProviderType,
  p: ResolvedProvider,
  ev: NotificationEvent,
  secretValues: readonly string[],
): ForgeRepo {
  const r = resolveRepository(type, p.address, p.apiURL, ev.metadata.repository);
  if (r.ok) return r.repo;
  throw new ProviderError(`Provider ${p.namespace}/${p.name}: ${r.message}`, {
    code: r.reason,
    retryable: false,
    secretValues,
  });
}

/**
 * Refusals that concern one pull request only and are final: a locked conversation or archived
 * repository (N02: the status is still posted, the Provider stays Ready), a pull request gone.
 */
const TARGET_REFUSALS = new Set(['locked', 'notFound']);

/**
 * A failure of the comment step as the send's error: when the commit status was set first, the
 * message says so and names the part that failed (kind, retry and status of `err` kept), so
 * neither an Event nor `lastDelivery` reads as if nothing had been done — or as "no pull request".
 * Anything that is not a `ProviderError` is returned unchanged.
 */
function commentStepFailed(err: unknown, statusSet: boolean, what: string): unknown {
  if (!(err instanceof ProviderError) || !statusSet) return err;
  // Conditions per capability: a permission refused for comments while the same credentials set
  // the status is about comments only. The Provider is not marked AuthenticationFailed (its
  // statuses work); the event's failure, Event and lastDelivery say what to grant.
  const commentsOnly = err.verdict.kind === 'permission';
  const message = commentsOnly
    ? `the commit status is set, but ${what} was refused: the credentials may set commit statuses but lack permission for pull requests (grant pull requests write, or turn spec.pullRequestComment off); final for this event: ${err.message}`
    : `the commit status is set, but ${what} failed: ${err.message}`;
  return new ProviderError(message, {
    code: err.code,
    status: err.status,
    retryable: err.retryable,
    retryAfterMs: err.retryAfterMs,
    secretValues: [],
    verdict: commentsOnly ? { kind: 'permission', retry: false } : err.verdict,
  });
}

/**
 * Whether the event reports a preview run: a PKO Stack with `spec.preview: true` (reasons
 * `PreviewStarted|PreviewSucceeded|PreviewFailed`), or a stall about a preview Update
 * (`metadata.updateType` `preview`). Only such runs — and events naming a pull request
 * (`metadata.pullRequest`) — comment on the open pull requests whose head is their commit.
 */
export function isPreviewRun(ev: NotificationEvent): boolean {
  return /^Preview(?:Started|Succeeded|Failed)$/.test(ev.reason) || ev.metadata.updateType === 'preview';
}

/** Pull request ids named explicitly by the event (`metadata.pullRequest`, a positive integer), or undefined. */
export function explicitPullRequest(ev: NotificationEvent): string | undefined {
  const v = ev.metadata.pullRequest?.trim();
  return v !== undefined && /^[1-9]\d*$/.test(v) ? v : undefined;
}

export interface ForgeNotifierOptions {
  /** Provider `pullRequestComment.enabled`. */
  pullRequestComment: boolean;
  /** How the Provider is named in messages. */
  label: string;
  /** The forge's limits (./<name>/limits.ts), asserted before sending. */
  limits: ProviderLimits;
  /**
   * Orders read-modify-write on one commit status context and one pull request's comment across
   * every notifier of the process (case N03); with {@link credential} in the key, so that only
   * Providers acting as the same account wait for each other. Default: no ordering.
   */
  serialize?: Serialize;
  /** `credentialKey(p)`: who writes (the sticky comment is ours per author). */
  credential?: string;
}

/**
 * The {@link ForgeNotifierOptions} that order writes to one target, from a notifier's or a
 * preview forge's deps (the preview forge's status resolutions share the deliveries' order).
 */
export function targetOrdering(
  p: ResolvedProvider,
  deps: { serialize?: Serialize | undefined },
): Pick<ForgeNotifierOptions, 'serialize' | 'credential'> {
  return deps.serialize ? { serialize: deps.serialize, credential: credentialKey(p) } : {};
}

const runNow: Serialize = (_key, fn) => fn();

/**
 * Builds a `Notifier` from a forge's parts. `send`:
 * 1. requires `metadata.commit` (40 hex digits; the dispatcher never calls a git notifier without it);
 * 2. asserts that the rendered status and comment fit the forge's limits;
 * 3. resolves the repository;
 * 4. with `rendered.commitStatus`: `syncCommitStatus` (skip when identical to the newest);
 * 5. with `rendered.comment` and `pullRequestComment` on: for each pull request (explicit
 *    `metadata.pullRequest`, else — for a preview run only ({@link isPreviewRun}) — open ones
 *    whose head is the commit) `upsertStickyComment`; for the base Stack's deployment of a merge
 *    (`previewThread.merged`), the pull requests the commit merged (`mergedPullRequests`), where
 *    only an existing comment is edited. A deploy run with neither writes no comment and looks
 *    up no pull request for one (a comment belongs to a preview: docs/previews.md). A pull
 *    request that refuses for good (locked, archived, gone: case N02) is reported after the
 *    others got theirs, as a final error whose verdict says so.
 * A retried send repeats nothing that already took effect (both steps are idempotent).
 * @throws ProviderError
 */
export function forgeNotifier<R, P extends { id: string }>(
  http: ProviderHttp,
  opts: ForgeNotifierOptions,
  adapter: ForgeAdapter<R, P>,
): Notifier {
  const statuses = newStatusCache();
  const comments = newCommentCache();
  const secretValues = http.secretValues;
  const { limits } = opts;
  const serialize = opts.serialize ?? runNow;
  const who = opts.credential ?? '';

  const check = (rendered: RenderedNotification): void => {
    const cs = rendered.commitStatus;
    const fields: [string | undefined, FieldLimit | undefined, string][] = [
      [cs?.context, limits.statusContext, 'the commit status context'],
      [cs?.name, limits.statusName, 'the commit status name'],
      [cs?.description, limits.statusDescription, 'the commit status description'],
      [cs?.targetURL, limits.statusTargetURL, 'the commit status link'],
      [rendered.comment?.body, limits.comment, 'the pull request comment'],
    ];
    for (const [value, limit, what] of fields)
      if (value !== undefined) assertFits(value, limit, `${opts.label}: ${what}`, secretValues);
  };

  return {
    async send(ev: NotificationEvent, rendered: RenderedNotification, signal?: AbortSignal): Promise<void> {
      const sha = ev.metadata.commit?.trim().toLowerCase();
      if (sha === undefined || !/^[0-9a-f]{40}$/.test(sha)) {
        throw new ProviderError(
          `${opts.label}: the event has no commit SHA (metadata.commit), so there is nothing to set a status on`,
          { code: 'NO_COMMIT', retryable: false, secretValues },
        );
      }
      check(rendered);
      const repo = adapter.repository(ev);
      const repoKey = adapter.repoKey(repo);
      let prs: Promise<P[]> | undefined;
      const ctx: ForgeSendContext<R, P> = {
        ev,
        repo,
        sha,
        signal,
        pullRequests: () => {
          prs ??= (async () => {
            const explicit = explicitPullRequest(ev);
            if (explicit !== undefined) {
              const pr = await adapter.pullRequest(ctx, explicit);
              return pr === undefined ? [] : [pr];
            }
            return adapter.pullRequestsForCommit(ctx);
          })();
          return prs;
        },
      };

      const cs = rendered.commitStatus;
      if (cs !== undefined) {
        const native: NativeStatus = {
          state: adapter.nativeState(cs.state),
          context: cs.context,
          name: cs.name ?? cs.context,
          description: cs.description,
          targetURL: cs.targetURL,
        };
        await serialize(
          `status\u0000${who}\u0000${repoKey}\u0000${sha}\u0000${cs.context.toLowerCase()}`,
          () =>
            syncCommitStatus({
              cache: statuses,
              repoKey,
              sha,
              context: cs.context,
              want: { state: native.state, description: native.description },
              readPolicy: adapter.readPolicy,
              readCurrent: () => adapter.readStatus(ctx, cs.context),
              write: () => adapter.writeStatus(ctx, native),
            }),
        );
      }

      const comment = rendered.comment;
      if (comment !== undefined && opts.pullRequestComment) {
        const refused: { pr: string; err: ProviderError }[] = [];
        // A comment belongs to a preview (or to the pull request an event names): a deploy run of
        // a Stack that follows a pull request's branch comments nowhere, and costs no lookup.
        // A failure to find the pull requests (an answer over the read limit, N17) fails the
        // comment step, saying so: it is never "no pull request".
        const found =
          explicitPullRequest(ev) !== undefined || isPreviewRun(ev)
            ? await ctx.pullRequests().catch((err: unknown) => {
                throw commentStepFailed(err, cs !== undefined, `finding the pull requests of ${sha}`);
              })
            : [];
        // The base Stack's deployment of a merge: the merged pull request's comment of its
        // preview (same marker) is edited; one without such a comment gets none.
        const merged =
          ev.previewThread?.merged === true && adapter.mergedPullRequests !== undefined
            ? await adapter.mergedPullRequests(ctx).catch((err: unknown) => {
                throw commentStepFailed(err, cs !== undefined, `finding the pull request ${sha} merged`);
              })
            : [];
        const targets = [
          ...found.map((pr) => ({ pr, onlyEdit: false })),
          ...merged.filter((m) => !found.some((f) => f.id === m.id)).map((pr) => ({ pr, onlyEdit: true })),
        ];
        for (const { pr, onlyEdit } of targets) {
          try {
            await serialize(`comment\u0000${who}\u0000${repoKey}\u0000${pr.id}\u0000${comment.marker}`, () =>
              upsertStickyComment({
                cache: comments,
                key: commentKey(repoKey, pr.id, comment.marker),
                marker: comment.marker,
                body: comment.body,
                pages: () => adapter.comments(ctx, pr),
                create: (body) => adapter.createComment(ctx, pr, body),
                edit: (ref, body) => adapter.editComment(ctx, pr, ref, body),
                onlyEdit,
              }),
            );
          } catch (err) {
            // One pull request refusing for good (locked, gone) does not keep the comment from
            // the others; anything else (retryable, or about the Provider) fails the send now.
            if (!(err instanceof ProviderError) || !TARGET_REFUSALS.has(err.verdict.kind))
              throw commentStepFailed(err, cs !== undefined, `the comment on pull request #${pr.id}`);
            refused.push({ pr: pr.id, err });
          }
        }
        const first = refused[0];
        if (first !== undefined) {
          const which = refused.map((r) => `#${r.pr}`).join(', ');
          throw new ProviderError(
            `${opts.label}: the commit status is set, but the comment on pull request ${which} was refused (final for this event): ${first.err.message}`,
            {
              code: first.err.code,
              status: first.err.status,
              retryable: false,
              secretValues,
              verdict: first.err.verdict,
            },
          );
        }
      }
    },
    close: () => http.close(),
  };
}
