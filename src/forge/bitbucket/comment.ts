/**
 * The Bitbucket Cloud sticky comment: `GET …/pullrequests/{id}/comments` (all pages via `next`),
 * ours = contains the marker, not deleted, AND written by the credentials' own account
 * (`GET /user`, compared by `uuid`): a human's comment quoting the marker is never edited (case
 * F16). Created with `POST`, edited with `PUT …/comments/{comment_id}`, `content.raw` = the
 * markdown body.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ForgeRepo } from '../address.ts';
import { createdId, callJson, field, idOf, str } from '../json.ts';
import type { CommentPart, ForgeComment } from '../types.ts';
import { valuesPages, type BitbucketClient, type BitbucketPullRequest } from './client.ts';

export function bitbucketComments(c: BitbucketClient): CommentPart<ForgeRepo, BitbucketPullRequest> {
  return {
    async *comments(ctx, pr) {
      const me = await c.myUUID(ctx.repo, ctx.signal);
      const url = `${c.repoURL(ctx.repo)}/pullrequests/${pr.id}/comments?pagelen=100`;
      for await (const page of valuesPages(c.http, url, c.headers, 'Bitbucket pull request comments', {
        signal: ctx.signal,
      })) {
        const out: ForgeComment[] = [];
        for (const cm of page) {
          const id = idOf(field(cm, 'id'));
          const body = str(field(field(cm, 'content'), 'raw'));
          if (id === undefined || body === undefined || field(cm, 'deleted') === true) continue;
          out.push({ ref: id, body, mine: str(field(field(cm, 'user'), 'uuid')) === me });
        }
        yield out;
      }
    },

    async createComment(ctx, pr, body) {
      const { data } = await callJson(c.http, {
        method: 'POST',
        url: `${c.repoURL(ctx.repo)}/pullrequests/${pr.id}/comments`,
        headers: c.headers,
        body: { content: { raw: body } },
        signal: ctx.signal,
      });
      return createdId(field(data, 'id'), 'Bitbucket', 'comment', c.secretValues);
    },

    async editComment(ctx, pr, ref, body) {
      await callJson(c.http, {
        method: 'PUT',
        url: `${c.repoURL(ctx.repo)}/pullrequests/${pr.id}/comments/${ref}`,
        headers: c.headers,
        body: { content: { raw: body } },
        signal: ctx.signal,
      });
      return ref;
    },
  };
}
