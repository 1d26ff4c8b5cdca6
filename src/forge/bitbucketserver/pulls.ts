/**
 * Bitbucket Data Center pull-request discovery: `metadata.pullRequest` when set; else
 * `GET …/repos/{slug}/commits/{sha}/pull-requests` (all pages), OPEN ones whose
 * `fromRef.latestCommit` is the commit. The base Stack's deployment of a merge looks among the 50
 * pull requests merged last for the one whose merge commit it is.
 */
import type { ForgeRepo } from '../address.ts';
import { callJson, exists, field, idOf, idsWhere, str } from '../json.ts';
import type { PullRequestPart } from '../types.ts';
import { pagedValues, type BitbucketServerClient, type BitbucketServerPullRequest } from './client.ts';

export function bitbucketServerPulls(
  c: BitbucketServerClient,
): PullRequestPart<ForgeRepo, BitbucketServerPullRequest> {
  return {
    pullRequest: async (ctx, id) =>
      (await exists(c.http, `${c.repoURL(ctx.repo)}/pull-requests/${id}`, c.headers, ctx.signal))
        ? { id }
        : undefined,

    async pullRequestsForCommit(ctx) {
      const out: BitbucketServerPullRequest[] = [];
      const url = `${c.repoURL(ctx.repo)}/commits/${ctx.sha}/pull-requests`;
      for await (const page of pagedValues(
        c.http,
        url,
        c.headers,
        'Bitbucket pull requests of a commit',
        ctx.signal,
      )) {
        for (const pr of page) {
          const id = idOf(field(pr, 'id'));
          if (
            id !== undefined &&
            str(field(pr, 'state')) === 'OPEN' &&
            str(field(field(pr, 'fromRef'), 'latestCommit')) === ctx.sha
          ) {
            out.push({ id });
          }
        }
      }
      return out;
    },

    // The pull requests merged last (`state=MERGED&order=NEWEST`, one page of 50), the one whose
    // `properties.mergeCommit.id` is the commit (Bitbucket Data Center's pull request JSON of a
    // merged pull request; `PullRequestMergedEvent` carries the same commit). A deployment that
    // runs after 50 more merges finds nothing and edits no comment.
    async mergedPullRequests(ctx) {
      const { data } = await callJson(c.http, {
        method: 'GET',
        url: `${c.repoURL(ctx.repo)}/pull-requests?state=MERGED&order=NEWEST&limit=50`,
        headers: c.headers,
        signal: ctx.signal,
      });
      return idsWhere(
        field(data, 'values'),
        (pr) => str(field(field(field(pr, 'properties'), 'mergeCommit'), 'id'))?.toLowerCase() === ctx.sha,
      );
    },
  };
}
