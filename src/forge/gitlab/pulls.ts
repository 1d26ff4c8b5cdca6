/**
 * GitLab merge-request discovery: `metadata.pullRequest` (the MR iid) when set, else the open MRs
 * whose head (`sha`) is the commit.
 */
import { ProviderError } from '../../notifier/errors.ts';
import type { ForgeRepo } from '../address.ts';
import { field, idOf, str } from '../json.ts';
import { MAX_PAGES } from '../paging.ts';
import type { PullRequestPart } from '../types.ts';
import { PER_PAGE, type GitLabClient, type MergeRequest } from './client.ts';

function toMR(v: unknown): MergeRequest | undefined {
  const iid = idOf(field(v, 'iid'));
  return iid === undefined ? undefined : { id: iid, sourceBranch: str(field(v, 'source_branch')) };
}

export function gitlabPulls(c: GitLabClient): PullRequestPart<ForgeRepo, MergeRequest> {
  return {
    async pullRequest(ctx, iid) {
      try {
        return toMR(
          await c.resources(ctx.repo, ctx.signal).mergeRequests.show(c.projectId(ctx.repo), Number(iid)),
        );
      } catch (err) {
        if (err instanceof ProviderError && err.status === 404) return undefined;
        throw err;
      }
    },

    async pullRequestsForCommit(ctx) {
      const query = { perPage: PER_PAGE, maxPages: MAX_PAGES };
      const list: unknown = await c
        .resources(ctx.repo, ctx.signal)
        .commits.allMergeRequests(c.projectId(ctx.repo), ctx.sha, query);
      if (!Array.isArray(list)) return [];
      const out: MergeRequest[] = [];
      for (const mr of list) {
        if (str(field(mr, 'state')) !== 'opened' || str(field(mr, 'sha')) !== ctx.sha) continue;
        const m = toMR(mr);
        if (m !== undefined) out.push(m);
      }
      return out;
    },
  };
}
