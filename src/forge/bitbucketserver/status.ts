/**
 * Bitbucket Data Center build statuses: `POST /rest/api/latest/projects/{key}/repos/{slug}/commits/{sha}/builds`
 * with `key` = the context fitted to 40 characters (prefix + hash), `name` = the whole context
 * (keys bounded, names whole), `state` INPROGRESS|SUCCESSFUL|FAILED, `description` and `url` (required: the rendered
 * link, else the commit's page `…/projects/{key}/repos/{slug}/commits/{sha}`).
 *
 * Deduplication (cases F05/F06): on a cache miss, every page of the build statuses of the commit
 * (`GET /rest/build-status/1.0/commits/{sha}`, `start`/`limit`/`isLastPage`, available on every
 * Data Center version) is read; the newest (`dateAdded`) one with our key decides. That listing
 * is per commit, not per repository: a fork sharing the commit and our key would be taken as ours
 * (contexts name the cluster, namespace and Stack, so this needs the same Stack posting to both).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { CommitState } from '../../template/rendered.ts';
import type { ForgeRepo } from '../address.ts';
import { callJson, field, str } from '../json.ts';
import type { StatusPart, StatusSnapshot } from '../types.ts';
import { buildStatus } from '../bitbucket/status.ts';
import { pagedValues, type BitbucketServerClient, type BitbucketServerPullRequest } from './client.ts';

const STATE: Record<CommitState, string> = {
  pending: 'INPROGRESS',
  success: 'SUCCESSFUL',
  failure: 'FAILED',
};

export function bitbucketServerStatuses(
  c: BitbucketServerClient,
): StatusPart<ForgeRepo, BitbucketServerPullRequest> {
  return {
    nativeState: (s) => STATE[s],
    readPolicy: 'perCommit',

    async readStatus(ctx, context) {
      const key = context;
      let newest: { at: number; snap: StatusSnapshot } | undefined;
      const url = `${ctx.repo.apiBase}/build-status/1.0/commits/${ctx.sha}`;
      for await (const page of pagedValues(c.http, url, c.headers, 'Bitbucket build statuses', ctx.signal)) {
        for (const s of page) {
          if (str(field(s, 'key')) !== key) continue;
          const state = str(field(s, 'state'));
          if (state === undefined) continue;
          const added = field(s, 'dateAdded');
          const at = typeof added === 'number' ? added : 0;
          if (newest === undefined || at >= newest.at) {
            newest = { at, snap: { state, description: str(field(s, 'description')) ?? '' } };
          }
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      const [key, slug] = ctx.repo.path;
      const fallback = `${c.webRoot(ctx.repo)}/projects/${encodeURIComponent(key ?? '')}/repos/${encodeURIComponent(slug ?? '')}/commits/${ctx.sha}`;
      await callJson(c.http, {
        method: 'POST',
        url: `${c.repoURL(ctx.repo)}/commits/${ctx.sha}/builds`,
        headers: c.headers,
        body: buildStatus(status, fallback),
        signal: ctx.signal,
      });
    },
  };
}
