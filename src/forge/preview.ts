/**
 * The preview controller's view of a forge (`PreviewForge`, ./types.ts), built from the same
 * parts the notifier runs (`ForgeAdapter`: repository, statuses, comments, pull requests) plus
 * the forge's `PullRequestDiscovery` (listing open pull requests, author association). Notices
 * use the sticky-comment rules of ./comment.ts (ours AND marked, edited in place, never
 * duplicated); pending statuses are resolved with the forge's own status part.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { ProviderHttp } from '../notifier/http.ts';
import { newCommentCache, commentKey, upsertStickyComment } from './comment.ts';
import type { ForgeNotifierOptions } from './notifier.ts';
import type { ForgeAdapter, PreviewForge, PullRequestDiscovery, ForgeSendContext } from './types.ts';
import { ProviderError } from '../notifier/errors.ts';

/** A stand-in event that carries only the repository (the adapter resolves repositories from events). */
function repositoryEvent(repoURL: string): NotificationEvent {
  return {
    identity: { stack: 'preview', run: { kind: 'none' }, phase: { kind: 'started' } },
    id: 'preview',
    involvedObject: { apiVersion: '', kind: 'Stack', namespace: '', name: '', uid: '' },
    labels: {},
    severity: 'info',
    reason: 'PreviewStarted',
    message: '',
    timestamp: '1970-01-01T00:00:00Z',
    metadata: { repository: repoURL },
    reportingController: 'preview',
  };
}

export function previewForge<R, P extends { id: string }>(
  http: ProviderHttp,
  label: string,
  adapter: ForgeAdapter<R, P>,
  discovery: PullRequestDiscovery<R>,
  ordering: Pick<ForgeNotifierOptions, 'serialize' | 'credential'> = {},
): PreviewForge {
  const serialize = ordering.serialize ?? (<T>(_key: string, fn: () => Promise<T>) => fn());
  const who = ordering.credential ?? '';
  const comments = newCommentCache(1_000);
  /** Leader fencing right before a write: `mayWrite` false → nothing is written. */
  const fence = (mayWrite: (() => boolean) | undefined, what: string): void => {
    if (mayWrite === undefined || mayWrite()) return;
    throw new ProviderError(`${label}: not holding the leader Lease: ${what} not written`, {
      code: 'NOT_LEADER',
      retryable: true,
      secretValues: http.secretValues,
    });
  };
  const ctxFor = (repoURL: string, sha: string, signal: AbortSignal | undefined): ForgeSendContext<R, P> => {
    const ev = repositoryEvent(repoURL);
    const repo = adapter.repository(ev);
    return { ev, repo, sha, signal, pullRequests: () => Promise.resolve([]) };
  };
  return {
    listOpen: (repoURL, base, etag, signal) =>
      discovery.listOpen(ctxFor(repoURL, '', signal).repo, base, etag, signal),

    association: (repoURL, pull, signal) =>
      pull.association !== undefined
        ? Promise.resolve(pull.association)
        : discovery.association(ctxFor(repoURL, '', signal).repo, pull, signal),

    pullRequestState: (repoURL, number, signal) =>
      discovery.pullRequestState(ctxFor(repoURL, '', signal).repo, number, signal),

    async upsertNotice(repoURL, pull, marker, body, signal, mayWrite, onlyEdit) {
      const ctx = ctxFor(repoURL, '', signal);
      const pr = await adapter.pullRequest(ctx, String(pull.number));
      if (pr === undefined) {
        throw new ProviderError(`${label}: pull request #${pull.number} not found`, {
          code: 'HTTP_404',
          status: 404,
          retryable: false,
          secretValues: http.secretValues,
        });
      }
      const key = commentKey(adapter.repoKey(ctx.repo), pr.id, marker);
      const done = await upsertStickyComment({
        cache: comments,
        ...(onlyEdit === true ? { onlyEdit } : {}),
        key,
        marker,
        body,
        pages: () => adapter.comments(ctx, pr),
        create: (b) => {
          fence(mayWrite, 'the notice');
          return adapter.createComment(ctx, pr, b);
        },
        edit: (ref, b) => {
          fence(mayWrite, 'the notice');
          return adapter.editComment(ctx, pr, ref, b);
        },
      });
      if (done === 'absent') return undefined;
      const ref = comments.get(key)?.ref;
      return ref === undefined ? pull.webURL : discovery.commentURL(pull.webURL, ref);
    },

    resolvePending(repoURL, sha, context, description, signal, mayWrite, whenNone) {
      const ctx = ctxFor(repoURL, sha, signal);
      // Under the notifiers' lock of this status (the same key as src/forge/notifier.ts): a
      // delivery's write to it comes wholly before or after this read and write (case N18).
      const key = `status\u0000${who}\u0000${adapter.repoKey(ctx.repo)}\u0000${sha}\u0000${context.toLowerCase()}`;
      return serialize(key, async () => {
        const current = await adapter.readStatus(ctx, context);
        const open =
          current === undefined ? whenNone === true : current.state === adapter.nativeState('pending');
        if (!open) return false;
        fence(mayWrite, 'the commit status');
        await adapter.writeStatus(ctx, {
          state: adapter.nativeState('failure'),
          context,
          name: context,
          description,
          targetURL: undefined,
        });
        return true;
      });
    },

    close: () => http.close(),
  };
}
