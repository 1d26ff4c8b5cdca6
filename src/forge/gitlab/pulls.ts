/**
 * GitLab merge-request discovery: `metadata.pullRequest` (the MR iid) when set, else the open MRs
 * whose head (`sha`) is the commit — each read once more alone (`GET …/merge_requests/:iid`), the
 * only answer that carries its `head_pipeline`, which the commit status must join (case N09).
 */
import { ProviderError } from '../../notifier/errors.ts';
import type { ForgeRepo } from '../address.ts';
import { field, idOf, str } from '../json.ts';
import { MAX_PAGES } from '../paging.ts';
import type { PullRequestPart } from '../types.ts';
import { PER_PAGE, type GitLabClient, type MergeRequest } from './client.ts';

function toMR(v: unknown): MergeRequest | undefined {
  const iid = idOf(field(v, 'iid'));
  if (iid === undefined) return undefined;
  const hp = field(v, 'head_pipeline');
  const id = Number(field(hp, 'id'));
  const sha = str(field(hp, 'sha'));
  const ref = str(field(hp, 'ref'));
  return {
    id: iid,
    sourceBranch: str(field(v, 'source_branch')),
    headPipeline:
      Number.isSafeInteger(id) && sha !== undefined && ref !== undefined ? { id, sha, ref } : undefined,
  };
}

export function gitlabPulls(c: GitLabClient): PullRequestPart<ForgeRepo, MergeRequest> {
  const show: PullRequestPart<ForgeRepo, MergeRequest>['pullRequest'] = async (ctx, iid) => {
    try {
      return toMR(
        await c.resources(ctx.repo, ctx.signal).mergeRequests.show(c.projectId(ctx.repo), Number(iid)),
      );
    } catch (err) {
      if (err instanceof ProviderError && err.status === 404) return undefined;
      throw err;
    }
  };
  return {
    pullRequest: show,

    async pullRequestsForCommit(ctx) {
      const query = { perPage: PER_PAGE, maxPages: MAX_PAGES };
      const list: unknown = await c
        .resources(ctx.repo, ctx.signal)
        .commits.allMergeRequests(c.projectId(ctx.repo), ctx.sha, query);
      if (!Array.isArray(list)) return [];
      const out: MergeRequest[] = [];
      for (const mr of list) {
        if (str(field(mr, 'state')) !== 'opened' || str(field(mr, 'sha')) !== ctx.sha) continue;
        const iid = idOf(field(mr, 'iid'));
        if (iid === undefined) continue;
        // The list does not show head pipelines: read the merge request itself.
        const full = await show(ctx, iid);
        if (full !== undefined) out.push(full);
      }
      return out;
    },
  };
}
