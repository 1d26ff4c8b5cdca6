/**
 * GitHub pull-request discovery: `metadata.pullRequest` when set (no call to confirm it: a wrong
 * number fails on the comment listing with a 404), else
 * `GET /repos/{o}/{r}/commits/{sha}/pulls`, which lists every pull request CONTAINING the commit
 * (closed ones, forks, heads that moved on), of which only the open ones whose `head.sha` is the
 * commit count (case N04; 409/422 for an unknown commit → none), remembered per commit (10 min,
 * 2 min when none).
 */
import { LRUCache } from 'lru-cache';
import { MAX_PAGES, tooManyPages } from '../paging.ts';
import { FORGE_CACHE_ENTRIES } from '../status.ts';
import type { PullRequestPart } from '../types.ts';
import {
  GITHUB_PAGE_SIZE,
  requestOptions,
  type GitHubClient,
  type GitHubRepo,
  type PullRef,
} from './client.ts';
import { statusOf } from './errors.ts';

/** How long the open pull requests of a commit are remembered: when there are some / none. */
export const PULLS_TTL_MS = 10 * 60_000;
export const NO_PULLS_TTL_MS = 2 * 60_000;

export function githubPulls(c: GitHubClient): PullRequestPart<GitHubRepo, PullRef> {
  const cache = new LRUCache<string, { prs: PullRef[]; until: number }>({ max: FORGE_CACHE_ENTRIES });
  return {
    pullRequest: (_ctx, id) => Promise.resolve({ id, number: Number(id) }),

    async pullRequestsForCommit(ctx) {
      const key = `${c.repoKey(ctx.repo)}\u0000${ctx.sha}`;
      const cached = cache.get(key);
      if (cached !== undefined && cached.until > c.now()) return cached.prs;
      const prs = await c.call(async () => {
        const out: PullRef[] = [];
        try {
          const it = c.octokit.paginate.iterator('GET /repos/{owner}/{repo}/commits/{commit_sha}/pulls', {
            ...c.at(ctx.repo),
            commit_sha: ctx.sha,
            per_page: GITHUB_PAGE_SIZE,
            ...requestOptions(ctx.signal),
          });
          let n = 0;
          for await (const page of it) {
            if (++n > MAX_PAGES)
              throw tooManyPages(`${c.label}: listing the pull requests of ${ctx.sha}`, c.secretValues);
            // GitHub lists every pull request CONTAINING the commit (closed ones, forks, heads
            // that moved on): only an open one whose head is the commit gets the comment (N04).
            for (const pr of page.data)
              if (pr.state === 'open' && pr.head.sha.toLowerCase() === ctx.sha)
                out.push({ id: String(pr.number), number: pr.number });
          }
        } catch (err) {
          // GitHub answers 409/422 for a commit it does not know (yet): no pull request.
          const status = statusOf(err);
          if (status === 409 || status === 422) return [];
          throw err;
        }
        return out;
      });
      cache.set(key, { prs, until: c.now() + (prs.length > 0 ? PULLS_TTL_MS : NO_PULLS_TTL_MS) });
      return prs;
    },
  };
}
