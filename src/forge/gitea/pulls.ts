/**
 * Gitea pull-request discovery: `metadata.pullRequest` (the PR index) when set; else the open pull
 * requests (`GET /repos/{o}/{r}/pulls?state=open`, all pages) whose `head.sha` is the commit —
 * Gitea's "pull request of a commit" endpoint only returns merged ones.
 */
import type { ForgeRepo } from '../address.ts';
import { callJson, field, idOf, str } from '../json.ts';
import { linkPages } from '../paging.ts';
import type { PullRequestPart } from '../types.ts';
import { GITEA_PAGE_SIZE, type GiteaClient, type GiteaPullRequest } from './client.ts';

export function giteaPulls(c: GiteaClient): PullRequestPart<ForgeRepo, GiteaPullRequest> {
  return {
    async pullRequest(ctx, index) {
      const base = c.repoPath(ctx.repo);
      const { status } = await callJson(c.http, {
        method: 'GET',
        url: `${base}/pulls/${index}`,
        headers: c.headers,
        acceptStatus: [404],
        signal: ctx.signal,
      });
      return status === 404 ? undefined : { id: index };
    },

    async pullRequestsForCommit(ctx) {
      const base = c.repoPath(ctx.repo);
      const out: GiteaPullRequest[] = [];
      const url = `${base}/pulls?state=open&limit=${GITEA_PAGE_SIZE}&page=1`;
      for await (const page of linkPages(c.http, url, c.headers, 'Gitea pull requests', ctx.signal)) {
        for (const pr of page) {
          const n = idOf(field(pr, 'number'));
          if (n !== undefined && str(field(field(pr, 'head'), 'sha')) === ctx.sha) out.push({ id: n });
        }
      }
      return out;
    },
  };
}
