/**
 * The Azure DevOps sticky comment: a thread whose first comment carries the marker AND was written
 * by the credentials' own identity (`GET {org}/_apis/connectionData` → `authenticatedUser.id`): a
 * human's comment quoting the marker is never edited (case F16). Threads are listed with
 * `x-ms-continuationtoken` paging when the server uses it; deleted threads and comments are
 * skipped. Created as a new thread without a status (so it never blocks a "comments must be
 * resolved" policy); edited with `PATCH …/threads/{threadId}/comments/{commentId}`.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ForgeRepo } from '../address.ts';
import { createdId, field, idOf, isRecord, str } from '../json.ts';
import type { CommentPart, ForgeComment } from '../types.ts';
import { withQuery, type AzureClient, type AzurePullRequest } from './client.ts';

export function azureComments(c: AzureClient): CommentPart<ForgeRepo, AzurePullRequest> {
  return {
    async *comments(ctx, pr) {
      const mine = await c.me(ctx.repo, ctx.signal);
      const url = `${c.repoURL(ctx.repo)}/pullRequests/${pr.id}/threads`;
      for await (const page of c.continuationPages(url, 'Azure DevOps pull request threads', ctx.signal)) {
        const out: ForgeComment[] = [];
        for (const t of page) {
          const threadId = idOf(field(t, 'id'));
          const comments = field(t, 'comments');
          if (threadId === undefined || field(t, 'isDeleted') === true || !Array.isArray(comments)) continue;
          const first = (comments as unknown[]).find(
            (c) => isRecord(c) && (c.parentCommentId === 0 || c.parentCommentId === undefined),
          );
          const commentId = idOf(field(first, 'id'));
          const content = str(field(first, 'content'));
          if (commentId === undefined || content === undefined || field(first, 'isDeleted') === true)
            continue;
          const author = str(field(field(first, 'author'), 'id'))?.toLowerCase();
          out.push({ ref: `${threadId}/${commentId}`, body: content, mine: author === mine });
        }
        yield out;
      }
    },

    async createComment(ctx, pr, body) {
      const { data } = await c.call(
        'POST',
        withQuery(`${c.repoURL(ctx.repo)}/pullRequests/${pr.id}/threads`, {}),
        {
          body: { comments: [{ parentCommentId: 0, content: body, commentType: 1 }] },
          signal: ctx.signal,
        },
      );
      const threadId = createdId(field(data, 'id'), 'Azure DevOps', 'thread', c.secretValues);
      const comments = field(data, 'comments');
      const commentId = Array.isArray(comments) ? idOf(field(comments[0], 'id')) : undefined;
      return `${threadId}/${commentId ?? '1'}`;
    },

    async editComment(ctx, pr, ref, body) {
      const [threadId = '', commentId = '1'] = ref.split('/');
      await c.call(
        'PATCH',
        withQuery(
          `${c.repoURL(ctx.repo)}/pullRequests/${pr.id}/threads/${threadId}/comments/${commentId}`,
          {},
        ),
        { body: { content: body }, signal: ctx.signal },
      );
      return ref;
    },
  };
}
