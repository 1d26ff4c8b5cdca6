/**
 * GitHub commit statuses on `metadata.commit`: skipped when the newest status of our context has
 * the same state and description (case F05; the link is not compared, it changes with every run).
 * The first time a context is used in a repository after start, GitHub is asked
 * (`GET /repos/{o}/{r}/commits/{sha}/statuses`, newest first, 100 per page, paging until the
 * context is found, contexts compared case-insensitively: F06); after that, a commit this
 * notifier has not seen is posted without a read (`readPolicy: 'perContext'`): contexts are unique
 * to this controller (cluster, namespace, Stack), so only a previous process could have written
 * them, and what it left on the current commit was checked by that first read. Steady state: one
 * call per status that changes, none for one that does not. The 422 "maximum number of statuses"
 * (1,000 per commit and context) is final.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { StatusPart } from '../types.ts';
import { boundedPages, listing, requestOptions } from './client.ts';
import type { GitHubClient, GitHubRepo, PullRef } from './client.ts';

export function githubStatuses(c: GitHubClient): StatusPart<GitHubRepo, PullRef> {
  return {
    nativeState: (state) => state,
    readPolicy: 'perContext',

    async readStatus(ctx, context) {
      const want = context.toLowerCase();
      return c.call(async () => {
        const it = c.octokit.paginate.iterator('GET /repos/{owner}/{repo}/commits/{ref}/statuses', {
          ...listing(c, ctx),
          ref: ctx.sha,
        });
        const what = `${c.label}: listing the statuses of ${ctx.sha}`;
        for await (const statuses of boundedPages(it, what, c.secretValues)) {
          for (const s of statuses) {
            if (s.context.toLowerCase() === want) return { state: s.state, description: s.description ?? '' };
          }
        }
        return undefined;
      });
    },

    async writeStatus(ctx, status) {
      await c.call(() =>
        c.octokit.request('POST /repos/{owner}/{repo}/statuses/{sha}', {
          ...c.at(ctx.repo),
          sha: ctx.sha,
          state: status.state as 'pending' | 'success' | 'failure',
          context: status.context,
          description: status.description,
          ...(status.targetURL !== undefined && status.targetURL !== ''
            ? { target_url: status.targetURL }
            : {}),
          ...requestOptions(ctx.signal, true),
        }),
      );
    },
  };
}
