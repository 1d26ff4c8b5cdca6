/**
 * Bitbucket Cloud build statuses: `POST /repositories/{ws}/{repo}/commit/{sha}/statuses/build`
 * with `key` = the context fitted to 40 characters (prefix + hash: stable, never colliding),
 * `name` = the whole context (keys bounded, names whole), `state` INPROGRESS|SUCCESSFUL|FAILED, `description`, and `url`. Bitbucket
 * requires `url`: the rendered link (permalink) when there is one, else the commit's page
 * (`https://bitbucket.org/{ws}/{repo}/commits/{sha}`). The same key overwrites, so deduplication
 * (F05) reads that one status on a cache miss: `GET …/statuses/build/{key}` (404 = none).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { CommitState } from '../../template/rendered.ts';
import type { ForgeRepo } from '../address.ts';
import { callJson, isRecord, str } from '../json.ts';
import type { NativeStatus, StatusPart } from '../types.ts';
import type { BitbucketClient, BitbucketPullRequest } from './client.ts';

const STATE: Record<CommitState, string> = {
  pending: 'INPROGRESS',
  success: 'SUCCESSFUL',
  failure: 'FAILED',
};

/**
 * The body of a build status, Bitbucket Cloud's and Data Center's alike: `key` = the (fitted)
 * context, `name` = the whole one, and the `url` both require — `fallback` (the commit's page)
 * when the status has no link.
 */
export function buildStatus(
  status: NativeStatus,
  fallback: string,
): { key: string; state: string; name: string; description: string; url: string } {
  return {
    key: status.context,
    state: status.state,
    name: status.name,
    description: status.description,
    url: status.targetURL !== undefined && status.targetURL !== '' ? status.targetURL : fallback,
  };
}

export function bitbucketStatuses(c: BitbucketClient): StatusPart<ForgeRepo, BitbucketPullRequest> {
  return {
    nativeState: (s) => STATE[s],
    readPolicy: 'perCommit',

    async readStatus(ctx, context) {
      const { status, data } = await callJson(c.http, {
        method: 'GET',
        url: `${c.repoURL(ctx.repo)}/commit/${ctx.sha}/statuses/build/${encodeURIComponent(context)}`,
        headers: c.headers,
        acceptStatus: [404],
        signal: ctx.signal,
      });
      if (status === 404 || !isRecord(data)) return undefined;
      const state = str(data.state);
      return state === undefined ? undefined : { state, description: str(data.description) ?? '' };
    },

    async writeStatus(ctx, status) {
      const [ws, slug] = ctx.repo.path;
      const fallback = `${ctx.repo.webBase}/${encodeURIComponent(ws ?? '')}/${encodeURIComponent(slug ?? '')}/commits/${ctx.sha}`;
      await callJson(c.http, {
        method: 'POST',
        url: `${c.repoURL(ctx.repo)}/commit/${ctx.sha}/statuses/build`,
        headers: c.headers,
        body: buildStatus(status, fallback),
        signal: ctx.signal,
      });
    },
  };
}
