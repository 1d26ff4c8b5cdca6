/**
 * Bitbucket Data Center pull-request discovery: `metadata.pullRequest` when set; else
 * `GET …/repos/{slug}/commits/{sha}/pull-requests` (all pages), OPEN ones whose
 * `fromRef.latestCommit` is the commit.
 */
import type { ForgeRepo } from '../address.ts';
import { callJson, field, idOf, str } from '../json.ts';
import type { PullRequestPart } from '../types.ts';
import { pagedValues, type BitbucketServerClient, type BitbucketServerPullRequest } from './client.ts';

export function bitbucketServerPulls(
  c: BitbucketServerClient,
): PullRequestPart<ForgeRepo, BitbucketServerPullRequest> {
  return {
    async pullRequest(ctx, id) {
      const { status } = await callJson(c.http, {
        method: 'GET',
        url: `${c.repoURL(ctx.repo)}/pull-requests/${id}`,
        headers: c.headers,
        acceptStatus: [404],
        signal: ctx.signal,
      });
      return status === 404 ? undefined : { id };
    },

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
  };
}
