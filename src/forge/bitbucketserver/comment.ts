/**
 * The Bitbucket Data Center sticky comment: general comments are read from the pull request's
 * activities (`GET …/pull-requests/{id}/activities`, all pages, `COMMENTED`/`ADDED`), ours =
 * contains the marker AND authored by the credentials' own user (`GET
 * /plugins/servlet/applinks/whoami`, compared with the author's `name`/`slug`): a human's comment
 * quoting the marker is never edited (case F16). Created with `POST …/comments {text}`, edited
 * with `PUT …/comments/{id} {text, version}`; a 409 (stale version) re-reads the comment's
 * version once and edits again.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { ProviderError } from '../../notifier/errors.ts';
import type { ForgeRepo } from '../address.ts';
import { createdId, callJson, field, idOf, str } from '../json.ts';
import type { CommentPart, ForgeComment } from '../types.ts';
import { pagedValues, type BitbucketServerClient, type BitbucketServerPullRequest } from './client.ts';

function commentURL(c: BitbucketServerClient, r: ForgeRepo, pr: BitbucketServerPullRequest): string {
  return `${c.repoURL(r)}/pull-requests/${pr.id}/comments`;
}

/** A comment's edit reference: `<id>:<version>`. */
function refOf(id: string, version: unknown): string {
  return `${id}:${typeof version === 'number' ? version : 0}`;
}

export function bitbucketServerComments(
  c: BitbucketServerClient,
): CommentPart<ForgeRepo, BitbucketServerPullRequest> {
  return {
    async *comments(ctx, pr) {
      const mine = await c.me(ctx.repo, ctx.signal);
      const url = `${c.repoURL(ctx.repo)}/pull-requests/${pr.id}/activities`;
      for await (const page of pagedValues(
        c.http,
        url,
        c.headers,
        'Bitbucket pull request activities',
        ctx.signal,
      )) {
        const out: ForgeComment[] = [];
        for (const a of page) {
          if (str(field(a, 'action')) !== 'COMMENTED' || str(field(a, 'commentAction')) !== 'ADDED') continue;
          const cm = field(a, 'comment');
          const id = idOf(field(cm, 'id'));
          const text = str(field(cm, 'text'));
          if (id === undefined || text === undefined) continue;
          const author = field(cm, 'author');
          const names = [str(field(author, 'name')), str(field(author, 'slug'))].map((n) => n?.toLowerCase());
          out.push({ ref: refOf(id, field(cm, 'version')), body: text, mine: names.includes(mine) });
        }
        yield out;
      }
    },

    async createComment(ctx, pr, body) {
      const { data } = await callJson(c.http, {
        method: 'POST',
        url: commentURL(c, ctx.repo, pr),
        headers: c.headers,
        body: { text: body },
        signal: ctx.signal,
      });
      const id = createdId(field(data, 'id'), 'Bitbucket Data Center', 'comment', c.secretValues);
      return refOf(id, field(data, 'version'));
    },

    async editComment(ctx, pr, ref, body) {
      const [id = '', v = '0'] = ref.split(':');
      const url = `${commentURL(c, ctx.repo, pr)}/${id}`;
      const put = (version: number): Promise<{ status: number; data: unknown }> =>
        callJson(c.http, {
          method: 'PUT',
          url,
          headers: c.headers,
          body: { text: body, version },
          acceptStatus: [409],
          signal: ctx.signal,
        });
      let res = await put(Number(v));
      if (res.status === 409) {
        // Someone (or an earlier attempt of ours) edited it since we read it: take the current version.
        const current = await callJson(c.http, {
          method: 'GET',
          url,
          headers: c.headers,
          signal: ctx.signal,
        });
        const version = field(current.data, 'version');
        res = await put(typeof version === 'number' ? version : 0);
        if (res.status === 409) {
          throw new ProviderError(`PUT ${url} answered 409 twice: the comment keeps changing; will retry`, {
            code: 'HTTP_409',
            status: 409,
            retryable: true,
            secretValues: c.secretValues,
          });
        }
      }
      return refOf(id, field(res.data, 'version'));
    },
  };
}
