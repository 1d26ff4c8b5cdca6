/**
 * Azure DevOps pull-request discovery: `metadata.pullRequest` when set; else the active pull
 * requests (`searchCriteria.status=active`, `$top`/`$skip` pages) whose
 * `lastMergeSourceCommit.commitId` is the commit.
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
  };
}
