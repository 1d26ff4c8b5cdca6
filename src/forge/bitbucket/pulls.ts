/**
 * Bitbucket Cloud pull-request discovery: `metadata.pullRequest` when set; else
 * `GET …/commit/{sha}/pullrequests` (all pages), keeping OPEN ones whose source commit is the
 * commit (Bitbucket gives a 12-digit prefix). When that endpoint is unavailable (404: pull-request
 * commit links not enabled, or 202: still indexing) the OPEN pull requests are listed and matched
 * the same way. The base Stack's deployment of a merge looks among the 50 pull requests merged
 * last for the one whose merge commit it is.
 */
import type { ForgeRepo } from '../address.ts';
import { callJson, exists, field, idOf, idsWhere, str } from '../json.ts';
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
    pullRequest: async (ctx, id) =>
      (await exists(c.http, `${c.repoURL(ctx.repo)}/pullrequests/${id}`, c.headers, ctx.signal))
        ? { id }
        : undefined,

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

    // A merge commit is not "a commit of" the pull request (Bitbucket lists the pull requests in
    // which a commit was reviewed), so the merged pull requests changed last are read instead —
    // one page of {@link MERGED_PAGE_LEN}, newest first — and the one whose `merge_commit.hash`
    // (abbreviated to 12) starts the commit is taken. A deployment that runs after 50 more merges
    // finds nothing and edits no comment.
    async mergedPullRequests(ctx) {
      const { data } = await callJson(c.http, {
        method: 'GET',
        url: `${c.repoURL(ctx.repo)}/pullrequests?state=MERGED&sort=-updated_on&pagelen=${MERGED_PAGE_LEN}`,
        headers: c.headers,
        signal: ctx.signal,
      });
      return idsWhere(field(data, 'values'), (pr) => {
        const hash = str(field(field(pr, 'merge_commit'), 'hash'))?.toLowerCase();
        return hash !== undefined && hash.length >= 7 && ctx.sha.startsWith(hash);
      });
    },
  };
}

/** Merged pull requests read for the deployment of a merge (Bitbucket's largest page). */
export const MERGED_PAGE_LEN = 50;
