/**
 * GitHub pull-request discovery: `metadata.pullRequest` when set (no call to confirm it: a wrong
 * number fails on the comment listing with a 404), else
 * `GET /repos/{o}/{r}/commits/{sha}/pulls`, which lists every pull request CONTAINING the commit
 * (closed ones, forks, heads that moved on), of which only the open ones whose `head.sha` is the
 * commit count (case N04; 409/422 for an unknown commit → none), remembered per commit (10 min,
 * 2 min when none). The same listing names the merged pull request whose `merge_commit_sha` is
 * the commit (the base Stack's deployment of a merge: docs/previews.md).
 */
import { LRUCache } from 'lru-cache';
import { AUTHOR_ASSOCIATIONS, type AuthorAssociation } from '../../api/v1alpha1.ts';
import { MAX_PAGES, tooManyPages } from '../paging.ts';
import { FORGE_CACHE_ENTRIES } from '../status.ts';
import type {
  OpenPullRequest,
  PullRequestDiscovery,
  PullRequestPart,
  PullRequestState,
  ForgeSendContext,
} from '../types.ts';
import {
  boundedPages,
  GITHUB_PAGE_SIZE,
  listing,
  requestOptions,
  type GitHubClient,
  type GitHubRepo,
  type PullRef,
} from './client.ts';
import { statusOf } from './errors.ts';

/** How long the open pull requests of a commit are remembered: when there are some / none. */
export const PULLS_TTL_MS = 10 * 60_000;
export const NO_PULLS_TTL_MS = 2 * 60_000;

/** One pull request of "List pull requests associated with a commit", as far as it is read here. */
interface CommitPull {
  number: number;
  state: string;
  head: { sha: string };
  merged_at: string | null;
  merge_commit_sha: string | null;
}

/**
 * `GET /repos/{o}/{r}/commits/{sha}/pulls` (every page, at most `MAX_PAGES`), keeping the pull
 * requests `keep` accepts; 409/422 (a commit GitHub does not know, yet) → none.
 */
function commitPulls(
  c: GitHubClient,
  ctx: ForgeSendContext<GitHubRepo, PullRef>,
  keep: (pr: CommitPull) => boolean,
): Promise<PullRef[]> {
  return c.call(async () => {
    const out: PullRef[] = [];
    try {
      const it = c.octokit.paginate.iterator('GET /repos/{owner}/{repo}/commits/{commit_sha}/pulls', {
        ...listing(c, ctx),
        commit_sha: ctx.sha,
      });
      const what = `${c.label}: listing the pull requests of ${ctx.sha}`;
      for await (const prs of boundedPages(it, what, c.secretValues))
        for (const pr of prs) if (keep(pr)) out.push({ id: String(pr.number), number: pr.number });
    } catch (err) {
      const status = statusOf(err);
      if (status === 409 || status === 422) return [];
      throw err;
    }
    return out;
  });
}

export function githubPulls(c: GitHubClient): PullRequestPart<GitHubRepo, PullRef> {
  const cache = new LRUCache<string, { prs: PullRef[]; until: number }>({ max: FORGE_CACHE_ENTRIES });
  return {
    pullRequest: (_ctx, id) => Promise.resolve({ id, number: Number(id) }),

    async pullRequestsForCommit(ctx) {
      const key = `${c.repoKey(ctx.repo)}\u0000${ctx.sha}`;
      const cached = cache.get(key);
      if (cached !== undefined && cached.until > c.now()) return cached.prs;
      // GitHub lists every pull request CONTAINING the commit (closed ones, forks, heads that
      // moved on): only an open one whose head is the commit gets the comment (N04).
      const prs = await commitPulls(
        c,
        ctx,
        (pr) => pr.state === 'open' && pr.head.sha.toLowerCase() === ctx.sha,
      );
      cache.set(key, { prs, until: c.now() + (prs.length > 0 ? PULLS_TTL_MS : NO_PULLS_TTL_MS) });
      return prs;
    },

    // The same listing: "the merged pull request that introduced the commit" is among them (GitHub
    // REST docs, "List pull requests associated with a commit"); it is the one whose
    // `merge_commit_sha` is the commit (merge, squash or rebase alike). Not cached: asked once per
    // deployment result.
    mergedPullRequests: (ctx) =>
      commitPulls(c, ctx, (pr) => pr.merged_at !== null && pr.merge_commit_sha?.toLowerCase() === ctx.sha),
  };
}

/** Pages of one open-pull-request listing as last read, with the ETag of each. */
interface CachedPage {
  etag: string | undefined;
  pulls: OpenPullRequest[];
  /** Whether GitHub named a next page. */
  more: boolean;
}

function toOpenPull(pr: {
  number: number;
  html_url: string;
  head: { sha: string; ref: string; repo: { full_name: string } | null };
  base: { ref: string; repo: { full_name: string } };
  user: { login: string } | null;
  labels: ({ name?: string } | string)[];
  author_association: string;
}): OpenPullRequest {
  const assoc = pr.author_association;
  return {
    number: pr.number,
    headSHA: pr.head.sha.toLowerCase(),
    headRef: pr.head.ref,
    baseRef: pr.base.ref,
    // A deleted head repository (`head.repo` null) counts as a fork.
    fork: pr.head.repo?.full_name.toLowerCase() !== pr.base.repo.full_name.toLowerCase(),
    author: pr.user?.login ?? '',
    association: (AUTHOR_ASSOCIATIONS as readonly string[]).includes(assoc)
      ? (assoc as AuthorAssociation)
      : 'NONE',
    labels: pr.labels.map((l) => (typeof l === 'string' ? l : (l.name ?? ''))).filter((l) => l !== ''),
    webURL: pr.html_url,
  };
}

/**
 * GitHub open pull requests for the preview controller: `GET /repos/{o}/{r}/pulls?state=open&
 * base=<branch>&per_page=100`, every page, each page a conditional request with the `ETag` GitHub
 * gave it last time (`If-None-Match`): an unchanged page answers `304 Not Modified`, which does
 * not count against the rate limit (GitHub REST docs, "Use conditional requests if
 * appropriate"). Every page is asked (a pull request closed on page 2 changes only page 2). The
 * listing is `changed: false` when every page answered 304 (and the caller holds a listing);
 * pages are remembered per (repository, branch). Association: GitHub's `author_association`.
 */
export function githubDiscovery(c: GitHubClient): PullRequestDiscovery<GitHubRepo> {
  const cache = new LRUCache<string, CachedPage[]>({ max: 1_000 });
  return {
    async listOpen(repo, base, etag, signal) {
      const key = `${c.repoKey(repo)}\u0000${base}`;
      const before = cache.get(key) ?? [];
      const pages: CachedPage[] = [];
      let changed = etag === undefined || before.length === 0;
      for (let page = 1; ; page++) {
        if (page > MAX_PAGES) throw tooManyPages(`${c.label}: listing open pull requests`, c.secretValues);
        const old = before[page - 1];
        const got = await c.call(async () => {
          try {
            const res = await c.octokit.request('GET /repos/{owner}/{repo}/pulls', {
              ...c.at(repo),
              state: 'open',
              base,
              per_page: GITHUB_PAGE_SIZE,
              page,
              ...(old?.etag !== undefined ? { headers: { 'if-none-match': old.etag } } : {}),
              ...requestOptions(signal),
            });
            return {
              etag: res.headers.etag,
              pulls: res.data.filter((pr) => pr.base.ref === base).map(toOpenPull),
              more: /rel="next"/.test(res.headers.link ?? ''),
            };
          } catch (err) {
            if (statusOf(err) === 304 && old !== undefined) return undefined;
            throw err;
          }
        });
        if (got === undefined && old !== undefined) pages.push(old);
        else if (got !== undefined) {
          pages.push(got);
          changed = true;
        }
        if (!(pages.at(-1)?.more ?? false)) break;
      }
      if (pages.length !== before.length) changed = true;
      cache.set(key, pages);
      if (!changed) return { changed: false };
      return {
        changed: true,
        pulls: pages.flatMap((p) => p.pulls),
        etag: pages.map((p) => p.etag ?? '').join(','),
      };
    },
    // `GET /repos/{o}/{r}/pulls/{n}`: `state` open/closed, `merged`, `base.ref`; 404 → none.
    pullRequestState: (repo, number, signal) =>
      c.call(async (): Promise<PullRequestState | undefined> => {
        try {
          const { data } = await c.octokit.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', {
            ...c.at(repo),
            pull_number: number,
            ...requestOptions(signal),
          });
          const state = data.merged ? 'merged' : data.state === 'open' ? 'open' : 'closed';
          return { state, baseRef: data.base.ref };
        } catch (err) {
          if (statusOf(err) === 404) return undefined;
          throw err;
        }
      }),
    // GitHub lists the association with each pull request.
    association: (_repo, pull) => Promise.resolve(pull.association ?? 'NONE'),
    commentURL: (pullURL, ref) => `${pullURL}#issuecomment-${ref}`,
  };
}
