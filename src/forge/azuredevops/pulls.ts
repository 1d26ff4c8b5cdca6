/**
 * Azure DevOps pull-request discovery: `metadata.pullRequest` when set; else the active pull
 * requests (`searchCriteria.status=active`, `$top`/`$skip` pages) whose
 * `lastMergeSourceCommit.commitId` is the commit. The base Stack's deployment of a merge asks
 * `POST …/pullrequestquery` (`lastMergeCommit`) for the completed pull request that made it.
 */
import type { ForgeRepo } from '../address.ts';
import { field, idOf, str } from '../json.ts';
import type { PullRequestPart } from '../types.ts';
import { withQuery, type AzureClient, type AzurePullRequest } from './client.ts';

export function azurePulls(c: AzureClient): PullRequestPart<ForgeRepo, AzurePullRequest> {
  return {
    async pullRequest(ctx, id) {
      const { status } = await c.call('GET', withQuery(`${c.repoURL(ctx.repo)}/pullrequests/${id}`, {}), {
        acceptStatus: [404],
        signal: ctx.signal,
      });
      return status === 404 ? undefined : { id };
    },

    async pullRequestsForCommit(ctx) {
      const out: AzurePullRequest[] = [];
      const url = withQuery(`${c.repoURL(ctx.repo)}/pullrequests`, { 'searchCriteria.status': 'active' });
      for await (const page of c.skipPages(url, true, 'Azure DevOps pull requests', ctx.signal)) {
        for (const pr of page) {
          const id = idOf(field(pr, 'pullRequestId'));
          const head = str(field(field(pr, 'lastMergeSourceCommit'), 'commitId'))?.toLowerCase();
          if (id !== undefined && head === ctx.sha && str(field(pr, 'status')) !== 'completed')
            out.push({ id });
        }
      }
      return out;
    },

    // "Pull Request Query - Get" (Git REST 7.1): type `lastMergeCommit` finds the pull requests
    // that created the given merge commit; the answer maps each commit to its pull requests.
    async mergedPullRequests(ctx) {
      const { data } = await c.call('POST', withQuery(`${c.repoURL(ctx.repo)}/pullrequestquery`, {}), {
        body: { queries: [{ type: 'lastMergeCommit', items: [ctx.sha] }] },
        signal: ctx.signal,
      });
      const results = field(data, 'results');
      const out: AzurePullRequest[] = [];
      for (const r of Array.isArray(results) ? results : []) {
        const prs = field(r, ctx.sha);
        for (const pr of Array.isArray(prs) ? prs : []) {
          const id = idOf(field(pr, 'pullRequestId'));
          if (id !== undefined && str(field(pr, 'status')) === 'completed') out.push({ id });
        }
      }
      return out;
    },
  };
}
