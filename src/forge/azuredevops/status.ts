/**
 * Azure DevOps commit statuses: `POST {org}/{project}/_apis/git/repositories/{repo}/commits/{sha}/statuses`
 * with `context: { genre: 'pko-notification-controller', name: <context> }`, `state`
 * pending|succeeded|failed, `description`, `targetUrl`. Deduplication (cases F05/F06): on a cache
 * miss the commit's statuses are read (`latestOnly=true`, `top`/`skip` pages until a short page)
 * and the newest (highest id) one of our genre and name decides.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { CommitState } from '../../template/rendered.ts';
import type { ForgeRepo } from '../address.ts';
import { field, str } from '../json.ts';
import type { StatusPart, StatusSnapshot } from '../types.ts';
import { AZURE_STATUS_GENRE, withQuery, type AzureClient, type AzurePullRequest } from './client.ts';

const STATE: Record<CommitState, string> = { pending: 'pending', success: 'succeeded', failure: 'failed' };

export function azureStatuses(c: AzureClient): StatusPart<ForgeRepo, AzurePullRequest> {
  return {
    nativeState: (s) => STATE[s],
    readPolicy: 'perCommit',

    async readStatus(ctx, context) {
      let newest: { id: number; snap: StatusSnapshot } | undefined;
      const url = withQuery(`${c.repoURL(ctx.repo)}/commits/${ctx.sha}/statuses`, { latestOnly: 'true' });
      for await (const page of c.skipPages(url, false, 'Azure DevOps commit statuses', ctx.signal)) {
        for (const s of page) {
          const c = field(s, 'context');
          if (str(field(c, 'name')) !== context || str(field(c, 'genre')) !== AZURE_STATUS_GENRE) continue;
          const id = Number(field(s, 'id'));
          const state = str(field(s, 'state'));
          if (state === undefined || !Number.isFinite(id)) continue;
          if (newest === undefined || id > newest.id) {
            newest = { id, snap: { state, description: str(field(s, 'description')) ?? '' } };
          }
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      await c.call('POST', withQuery(`${c.repoURL(ctx.repo)}/commits/${ctx.sha}/statuses`, {}), {
        body: {
          state: status.state,
          description: status.description,
          context: { genre: AZURE_STATUS_GENRE, name: status.context },
          ...(status.targetURL !== undefined && status.targetURL !== ''
            ? { targetUrl: status.targetURL }
            : {}),
        },
        signal: ctx.signal,
      });
    },
  };
}
