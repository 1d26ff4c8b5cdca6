/**
 * Bitbucket Cloud pull-request discovery: `metadata.pullRequest` when set; else
 * `GET …/commit/{sha}/pullrequests` (all pages), keeping OPEN ones whose source commit is the
 * commit (Bitbucket gives a 12-digit prefix). When that endpoint is unavailable (404: pull-request
 * commit links not enabled, or 202: still indexing) the OPEN pull requests are listed and matched
 * the same way.
 */
import type { ForgeRepo } from '../address.ts';
import { callJson, field, idOf, str } from '../json.ts';
import type { PullRequestPart } from '../types.ts';
import {
  BITBUCKET_PAGE_LEN,
  valuesPages,
  type BitbucketClient,
  type BitbucketPullRequest,
} from './client.ts';

/** Whether a pull request (Bitbucket JSON) is OPEN with `sha` as its source commit (full or abbreviated hash). */
function openWithHead(pr: unknown, sha: string): boolean {
  if (str(field(pr, 'state')) !== 'OPEN') return false;
  const hash = str(field(field(field(pr, 'source'), 'commit'), 'hash'))?.toLowerCase();
  return hash !== undefined && hash.length >= 7 && sha.startsWith(hash);
}

export function bitbucketPulls(c: BitbucketClient): PullRequestPart<ForgeRepo, BitbucketPullRequest> {
  return {
    async pullRequest(ctx, id) {
      const { status } = await callJson(c.http, {
        method: 'GET',
        url: `${c.repoURL(ctx.repo)}/pullrequests/${id}`,
        headers: c.headers,
        acceptStatus: [404],
        signal: ctx.signal,
      });
      return status === 404 ? undefined : { id };
    },

    async pullRequestsForCommit(ctx) {
      const out: BitbucketPullRequest[] = [];
      const byCommit = `${c.repoURL(ctx.repo)}/commit/${ctx.sha}/pullrequests?pagelen=${BITBUCKET_PAGE_LEN}`;
      const probe = await callJson(c.http, {
        method: 'GET',
        url: byCommit,
        headers: c.headers,
        acceptStatus: [202, 404],
        signal: ctx.signal,
      });
      const source =
        probe.status === 200
          ? valuesPages(c.http, byCommit, c.headers, 'Bitbucket pull requests of a commit', {
              first: probe.data,
              signal: ctx.signal,
            })
          : valuesPages(
              c.http,
              `${c.repoURL(ctx.repo)}/pullrequests?state=OPEN&pagelen=${BITBUCKET_PAGE_LEN}`,
              c.headers,
              'Bitbucket open pull requests',
              { signal: ctx.signal },
            );
      for await (const page of source) {
        for (const pr of page) {
          const id = idOf(field(pr, 'id'));
          if (id !== undefined && openWithHead(pr, ctx.sha)) out.push({ id });
        }
      }
      return out;
    },
  };
}
