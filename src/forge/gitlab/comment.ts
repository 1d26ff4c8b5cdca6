/**
 * The GitLab sticky merge-request note: notes are listed oldest first across all pages; ours is
 * the first non-system note containing the marker written by the token's own user (`GET /user`) —
 * a human's note quoting the marker is never edited (case F16).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ForgeRepo } from '../address.ts';
import { createdId, field, idOf, str } from '../json.ts';
import { MAX_PAGES } from '../paging.ts';
import type { CommentPart, ForgeComment } from '../types.ts';
import { PER_PAGE, type GitLabClient, type MergeRequest } from './client.ts';

export function gitlabComments(c: GitLabClient): CommentPart<ForgeRepo, MergeRequest> {
  return {
    async *comments(ctx, mr) {
      const mine = await c.myUserId(ctx.repo, ctx.signal);
      const query = {
        sort: 'asc' as const,
        orderBy: 'created_at' as const,
        perPage: PER_PAGE,
        maxPages: MAX_PAGES,
      };
      const notes: unknown = await (
        await c.resources(ctx.repo, ctx.signal)
      ).notes.all(c.projectId(ctx.repo), Number(mr.id), query);
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
      const note: unknown = await (
        await c.resources(ctx.repo, ctx.signal)
      ).notes.create(c.projectId(ctx.repo), Number(mr.id), body);
      return createdId(field(note, 'id'), 'GitLab', 'note', c.secretValues);
    },

    async editComment(ctx, mr, ref, body) {
      await (
        await c.resources(ctx.repo, ctx.signal)
      ).notes.edit(c.projectId(ctx.repo), Number(mr.id), Number(ref), { body });
      return ref;
    },
  };
}
