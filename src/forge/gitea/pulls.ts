/**
 * Gitea pull-request discovery: `metadata.pullRequest` (the PR index) when set; else the open pull
 * requests (`GET /repos/{o}/{r}/pulls?state=open`, all pages) whose `head.sha` is the commit —
 * Gitea's "pull request of a commit" endpoint only returns merged ones, which is what the base
 * Stack's deployment of a merge asks (`GET /repos/{o}/{r}/commits/{sha}/pull`).
 */
import { LRUCache } from 'lru-cache';
import type { AuthorAssociation } from '../../api/v1alpha1.ts';
import type { ForgeRepo } from '../address.ts';
import { callJson, exists, field, idOf, str } from '../json.ts';
import { linkPages } from '../paging.ts';
import type { OpenPullRequest, PullRequestDiscovery, PullRequestPart, PullRequestState } from '../types.ts';
import { GITEA_PAGE_SIZE, type GiteaClient, type GiteaPullRequest } from './client.ts';

export function giteaPulls(c: GiteaClient): PullRequestPart<ForgeRepo, GiteaPullRequest> {
  return {
    pullRequest: async (ctx, index) =>
      (await exists(c.http, `${c.repoPath(ctx.repo)}/pulls/${index}`, c.headers, ctx.signal))
        ? { id: index }
        : undefined,

    async pullRequestsForCommit(ctx) {
      const base = c.repoPath(ctx.repo);
      const out: GiteaPullRequest[] = [];
      const url = `${base}/pulls?state=open&limit=${GITEA_PAGE_SIZE}&page=1`;
      for await (const page of linkPages(c.http, url, c.headers, 'Gitea pull requests', ctx.signal)) {
        for (const pr of page) {
          const n = idOf(field(pr, 'number'));
          if (n !== undefined && str(field(field(pr, 'head'), 'sha')) === ctx.sha) out.push({ id: n });
        }
      }
      return out;
    },

    // Gitea answers the pull request whose merge commit is `sha`, or 404 (routers/api/v1/repo/
    // pull.go `GetPullRequestByMergedCommit`; observed on Gitea 1.27.3: test/preview/gitea.int.test.ts).
    async mergedPullRequests(ctx) {
      const { status, data } = await callJson(c.http, {
        method: 'GET',
        url: `${c.repoPath(ctx.repo)}/commits/${ctx.sha}/pull`,
        headers: c.headers,
        acceptStatus: [404],
        signal: ctx.signal,
      });
      const n = status === 200 && field(data, 'merged') === true ? idOf(field(data, 'number')) : undefined;
      return n === undefined ? [] : [{ id: n }];
    },
  };
}

/**
 * Gitea open pull requests for the preview controller: `GET /repos/{o}/{r}/pulls?state=open&
 * base_branch=<base>` (all pages; the base is checked again on each item). Gitea answers no
 * `ETag` on JSON listings (observed on 1.27.3), so every poll is a full listing: poll rarely and
 * use the webhook. A fork is a head repository other than the base (`head.repo.id`); a head
 * whose repository was deleted (`head.repo` null) counts as a fork.
 *
 * Author association: the repository owner is OWNER; else `GET …/collaborators/{user}/permission`
 * (`owner`/`admin` → OWNER, `write` → COLLABORATOR, else NONE). Gitea lets only site admins,
 * repository admins and the user itself read it (403 otherwise: routers/api/v1/repo/
 * collaborators.go), so the Provider's token needs admin on the repository; a 403 counts as NONE
 * (fail closed: a plain collaborator may have read access only). Remembered per (repository,
 * user) for 5 minutes.
 */
export function giteaDiscovery(c: GiteaClient): PullRequestDiscovery<ForgeRepo> {
  const associations = new LRUCache<string, AuthorAssociation>({ max: 1_000, ttl: 5 * 60_000 });
  return {
    async listOpen(repo, baseRef, _etag, signal) {
      const base = c.repoPath(repo);
      {
        const pulls: OpenPullRequest[] = [];
        const url = `${base}/pulls?state=open&base_branch=${encodeURIComponent(baseRef)}&limit=${GITEA_PAGE_SIZE}&page=1`;
        for await (const page of linkPages(c.http, url, c.headers, 'Gitea pull requests', signal)) {
          for (const pr of page) {
            const number = Number(field(pr, 'number'));
            const head = field(pr, 'head');
            const headSHA = str(field(head, 'sha'))?.toLowerCase();
            const prBase = str(field(field(pr, 'base'), 'ref'));
            if (!Number.isSafeInteger(number) || headSHA === undefined || prBase !== baseRef) continue;
            const headRepo = idOf(field(field(head, 'repo'), 'id'));
            const baseRepo = idOf(field(field(field(pr, 'base'), 'repo'), 'id'));
            const labels = field(pr, 'labels');
            pulls.push({
              number,
              headSHA,
              headRef: str(field(head, 'ref')) ?? '',
              baseRef: prBase,
              fork: headRepo === undefined || headRepo !== baseRepo,
              author: str(field(field(pr, 'user'), 'login')) ?? '',
              association: undefined,
              labels: Array.isArray(labels)
                ? labels.map((l) => str(field(l, 'name'))).filter((l) => l !== undefined)
                : [],
              webURL: str(field(pr, 'html_url')) ?? '',
            });
          }
        }
        return { changed: true, pulls, etag: undefined };
      }
    },

    async association(repo, pull, signal) {
      const key = `${c.repoPath(repo).toLowerCase()}\u0000${pull.author.toLowerCase()}`;
      const known = associations.get(key);
      if (known !== undefined) return known;
      if (pull.author === '') return 'NONE';
      if (repo.path[0]?.toLowerCase() === pull.author.toLowerCase()) return 'OWNER';
      const user = encodeURIComponent(pull.author);
      const base = c.repoPath(repo);
      const found = await (async (): Promise<AuthorAssociation> => {
        const perm = await callJson(c.http, {
          method: 'GET',
          url: `${base}/collaborators/${user}/permission`,
          headers: c.headers,
          acceptStatus: [403, 404],
          signal,
        });
        // 403: the token may not read others' permissions. Fail closed: being a collaborator
        // (`GET …/collaborators/{user}`) does not say write access (read collaborators exist).
        if (perm.status !== 200) return 'NONE';
        const p = str(field(perm.data, 'permission'));
        return p === 'owner' || p === 'admin' ? 'OWNER' : p === 'write' ? 'COLLABORATOR' : 'NONE';
      })();
      associations.set(key, found);
      return found;
    },

    // `GET /repos/{o}/{r}/pulls/{index}`: `state` open/closed, `merged`, `base.ref`; 404 → none.
    async pullRequestState(repo, number, signal): Promise<PullRequestState | undefined> {
      const { status, data } = await callJson(c.http, {
        method: 'GET',
        url: `${c.repoPath(repo)}/pulls/${String(number)}`,
        headers: c.headers,
        acceptStatus: [404],
        signal,
      });
      if (status === 404) return undefined;
      const state =
        field(data, 'merged') === true ? 'merged' : str(field(data, 'state')) === 'open' ? 'open' : 'closed';
      return { state, baseRef: str(field(field(data, 'base'), 'ref')) ?? '' };
    },

    commentURL: (pullURL, ref) => `${pullURL}#issuecomment-${ref}`,
  };
}
