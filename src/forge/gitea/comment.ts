/**
 * The Gitea sticky comment: issue comments (`GET /repos/{o}/{r}/issues/{index}/comments`,
 * following any `Link` rel="next"), ours = contains the marker AND `user.id` is the token's own
 * user (`GET /user`): a human's comment quoting the marker is never edited (case F16). Created with
 * `POST …/issues/{index}/comments`, edited with `PATCH /repos/{o}/{r}/issues/comments/{id}`.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ForgeRepo } from '../address.ts';
import { createdId, callJson, field, idOf, str } from '../json.ts';
import { collect, linkPages } from '../paging.ts';
import type { CommentPart, ForgeComment } from '../types.ts';
import type { GiteaClient, GiteaPullRequest } from './client.ts';

export function giteaComments(c: GiteaClient): CommentPart<ForgeRepo, GiteaPullRequest> {
  return {
    async *comments(ctx, pr) {
      const me = await c.myId(ctx.repo, ctx.signal);
      // Gitea returns every comment in one answer (`limit`/`page` ignored, no `Link`; observed on
      // Gitea 1.27.3), so collecting the pages costs nothing; a `Link` is still followed.
      const url = `${c.repoPath(ctx.repo)}/issues/${pr.id}/comments`;
      const all = await collect(linkPages(c.http, url, c.headers, 'Gitea issue comments', ctx.signal));
      const out: ForgeComment[] = [];
      for (const cm of all) {
        const id = idOf(field(cm, 'id'));
        const body = str(field(cm, 'body'));
        if (id === undefined || body === undefined) continue;
        out.push({ ref: id, body, mine: idOf(field(field(cm, 'user'), 'id')) === me });
      }
      yield out;
    },

    async createComment(ctx, pr, body) {
      const base = c.repoPath(ctx.repo);
      const { data } = await callJson(c.http, {
        method: 'POST',
        url: `${base}/issues/${pr.id}/comments`,
        headers: c.headers,
        body: { body },
        signal: ctx.signal,
      });
      return createdId(field(data, 'id'), 'Gitea', 'comment', c.secretValues);
    },

    async editComment(ctx, _pr, ref, body) {
      const base = c.repoPath(ctx.repo);
      await callJson(c.http, {
        method: 'PATCH',
        url: `${base}/issues/comments/${ref}`,
        headers: c.headers,
        body: { body },
        signal: ctx.signal,
      });
      return ref;
    },
  };
}
