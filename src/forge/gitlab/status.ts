/**
 * GitLab commit statuses: `POST /projects/{id}/statuses/{sha}` with states pending → `running`,
 * success → `success`, failure → `failed`; `name` = the context. When an open merge request of
 * the commit has its head pipeline on this commit, the status joins it: `pipeline_id` and that
 * pipeline's `ref` (case N09). Else `ref` is sent when known: `metadata.branch`, else the source
 * branch of the merge request the commit belongs to; when neither is known it is omitted and
 * GitLab picks the first branch containing the commit.
 *
 * Deduplication (cases F05/F06): on a cache miss the commit's statuses are listed filtered by
 * `name` (and `ref` when known), following every page; the newest one of our name decides. Same
 * state twice answers 400 "Cannot transition status via :run from :running" (or ":enqueue from
 * :pending"): the status is already in that state, so the send counts as done and is not retried
 * (F15).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { ProviderError } from '../../notifier/errors.ts';
import type { CommitState } from '../../template/rendered.ts';
import type { ForgeRepo } from '../address.ts';
import { field, str } from '../json.ts';
import { MAX_PAGES } from '../paging.ts';
import type { ForgeSendContext, StatusPart, StatusSnapshot } from '../types.ts';
import { PER_PAGE, type GitLabClient, type MergeRequest } from './client.ts';

/**
 * GitLab's answer when a status is posted while its status of that name and ref is already
 * pending/running (F15): `via :run from :running`, `via :enqueue from :pending` (or
 * `:enqueue from :running`, a pending posted after running). Terminal states never answer this:
 * GitLab starts a new status instead.
 */
const SAME_STATE = /Cannot transition status via :(?:run|enqueue) from :(?:running|pending)\b/;

const STATE: Record<CommitState, string> = { pending: 'running', success: 'success', failure: 'failed' };

/**
 * Where the status goes: the head pipeline of a merge request of the commit when it runs for this
 * very commit — `pipeline_id` with that pipeline's own `ref` (`refs/merge-requests/<iid>/head`;
 * GitLab refuses a `pipeline_id` with another ref, and with a branch `ref` alone it would attach
 * the status to a detached branch pipeline instead: case N09); else the branch —
 * `metadata.branch`, or a merge request's source branch.
 */
async function targetOf(
  ctx: ForgeSendContext<ForgeRepo, MergeRequest>,
): Promise<{ ref: string | undefined; pipelineId?: number }> {
  const mrs = await ctx.pullRequests();
  for (const mr of mrs) {
    const hp = mr.headPipeline;
    if (hp !== undefined && hp.sha === ctx.sha) return { ref: hp.ref, pipelineId: hp.id };
  }
  const b = ctx.ev.metadata.branch?.trim();
  if (b !== undefined && b !== '') return { ref: b };
  for (const mr of mrs) if (mr.sourceBranch !== undefined) return { ref: mr.sourceBranch };
  return { ref: undefined };
}

export function gitlabStatuses(c: GitLabClient): StatusPart<ForgeRepo, MergeRequest> {
  return {
    nativeState: (s) => STATE[s],
    readPolicy: 'perCommit',

    async readStatus(ctx, context) {
      const { ref } = await targetOf(ctx);
      const query = {
        name: context,
        perPage: PER_PAGE,
        maxPages: MAX_PAGES,
        ...(ref !== undefined ? { ref } : {}),
      };
      const list: unknown = await (
        await c.resources(ctx.repo, ctx.signal)
      ).commits.allStatuses(c.projectId(ctx.repo), ctx.sha, query);
      if (!Array.isArray(list)) return undefined;
      let newest: { id: number; snap: StatusSnapshot } | undefined;
      for (const s of list) {
        if (str(field(s, 'name')) !== context) continue;
        const id = Number(field(s, 'id'));
        const state = str(field(s, 'status'));
        if (state === undefined || !Number.isFinite(id)) continue;
        if (newest === undefined || id > newest.id) {
          newest = { id, snap: { state, description: str(field(s, 'description')) ?? '' } };
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      const { ref, pipelineId } = await targetOf(ctx);
      try {
        await (
          await c.resources(ctx.repo, ctx.signal)
        ).commits.editStatus(
          c.projectId(ctx.repo),
          ctx.sha,
          status.state as 'running' | 'success' | 'failed',
          {
            name: status.context,
            description: status.description,
            ...(status.targetURL !== undefined ? { targetUrl: status.targetURL } : {}),
            ...(ref !== undefined ? { ref } : {}),
            ...(pipelineId !== undefined ? { pipelineId } : {}),
          },
        );
      } catch (err) {
        // F15: already in that state — the status we want is the current one.
        if (err instanceof ProviderError && err.status === 400 && SAME_STATE.test(err.message)) return;
        throw err;
      }
    },
  };
}
