/**
 * Gitea commit statuses: `POST /repos/{o}/{r}/statuses/{sha}` with `state`
 * (pending|success|failure), `context`, `description`, `target_url`. Deduplication (cases
 * F05/F06): on a cache miss every page of `GET /repos/{o}/{r}/commits/{sha}/statuses`
 * (`page`/`limit`, `Link` rel="next") is read and the newest (highest id) status of our context
 * decides; Gitea keeps every posted status, so an identical one is not posted again.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ForgeRepo } from '../address.ts';
import { callJson, field, str } from '../json.ts';
import { linkPages } from '../paging.ts';
import type { StatusPart, StatusSnapshot } from '../types.ts';
import { GITEA_PAGE_SIZE, type GiteaClient, type GiteaPullRequest } from './client.ts';

export function giteaStatuses(c: GiteaClient): StatusPart<ForgeRepo, GiteaPullRequest> {
  return {
    nativeState: (s) => s,
    readPolicy: 'perCommit',

    async readStatus(ctx, context) {
      const base = c.repoPath(ctx.repo);
      let newest: { id: number; snap: StatusSnapshot } | undefined;
      const url = `${base}/commits/${ctx.sha}/statuses?sort=leastindex&limit=${GITEA_PAGE_SIZE}&page=1`;
      for await (const page of linkPages(c.http, url, c.headers, 'Gitea commit statuses', ctx.signal)) {
        for (const s of page) {
          if (str(field(s, 'context')) !== context) continue;
          const id = Number(field(s, 'id'));
          // Gitea answers `status`; older versions also `state`.
          const state = str(field(s, 'status')) ?? str(field(s, 'state'));
          if (state === undefined || !Number.isFinite(id)) continue;
          // Highest id, not listing order. Gitea's default order is `created_unix DESC` (whole
          // seconds, no tie-break: models/git/commit_status.go ToOrders), so statuses created in
          // the same second come back in any order — and a page boundary inside such a tie can
          // repeat one status and skip another (observed on 1.27.3: 124 listed for 122). Hence
          // `sort=leastindex` (`index` DESC: unique per commit, a stable order for paging).
          if (newest === undefined || id > newest.id) {
            newest = { id, snap: { state, description: str(field(s, 'description')) ?? '' } };
          }
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      const base = c.repoPath(ctx.repo);
      await callJson(c.http, {
        method: 'POST',
        url: `${base}/statuses/${ctx.sha}`,
        headers: c.headers,
        body: {
          state: status.state,
          context: status.context,
          description: status.description,
          ...(status.targetURL !== undefined ? { target_url: status.targetURL } : {}),
        },
        signal: ctx.signal,
      });
    },
  };
}
