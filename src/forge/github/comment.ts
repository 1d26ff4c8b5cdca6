/**
 * The GitHub sticky pull-request comment: ours = body contains the marker AND authored by us —
 * the token's `GET /user` login, or `<app slug>[bot]` from `GET /app` for a GitHub App (an
 * installation token cannot call `GET /user`; if a plain token cannot either — a
 * GITHUB_TOKEN-like installation token — any Bot author counts). A human's comment that quotes the
 * marker is never edited (case F16). All pages are read until ours is found; edited in place when
 * the body differs.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { MAX_PAGES, tooManyPages } from '../paging.ts';
import type { CommentPart, ForgeComment } from '../types.ts';
import {
  GITHUB_PAGE_SIZE,
  requestOptions,
  type GitHubClient,
  type GitHubRepo,
  type Identity,
  type PullRef,
} from './client.ts';

function isMine(me: Identity, user: { login: string; type?: string } | null | undefined): boolean {
  if (user === null || user === undefined) return false;
  if (me.kind === 'anyBot') return user.type === 'Bot';
  return user.login.toLowerCase() === me.login.toLowerCase();
}

export function githubComments(c: GitHubClient): CommentPart<GitHubRepo, PullRef> {
  return {
    async *comments(ctx, pr): AsyncIterable<readonly ForgeComment[]> {
      const me = await c.identity(ctx.signal);
      const it = c.octokit.paginate.iterator('GET /repos/{owner}/{repo}/issues/{issue_number}/comments', {
        ...c.at(ctx.repo),
        issue_number: pr.number,
        per_page: GITHUB_PAGE_SIZE,
        ...requestOptions(ctx.signal),
      });
      const pages = it[Symbol.asyncIterator]();
      for (let n = 1; ; n++) {
        if (n > MAX_PAGES)
          throw tooManyPages(`${c.label}: listing the comments of #${pr.number}`, c.secretValues);
        const next = await c.call(() => pages.next());
        if (next.done === true) return;
        yield next.value.data.map((cm) => ({
          ref: String(cm.id),
          body: cm.body ?? '',
          mine: isMine(me, cm.user),
        }));
      }
    },

    async createComment(ctx, pr, body) {
      const res = await c.call(() =>
        c.octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
          ...c.at(ctx.repo),
          issue_number: pr.number,
          body,
          ...requestOptions(ctx.signal, true),
        }),
      );
      return String(res.data.id);
    },

    async editComment(ctx, _pr, ref, body) {
      await c.call(() =>
        c.octokit.request('PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', {
          ...c.at(ctx.repo),
          comment_id: Number(ref),
          body,
          ...requestOptions(ctx.signal, true),
        }),
      );
      return ref;
    },
  };
}
