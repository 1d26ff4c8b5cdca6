/**
 * `gitea` provider (Gitea and Forgejo, API `/api/v1`): commit statuses and the sticky
 * pull-request comment, with plain `ProviderHttp` calls (so the Provider CA, proxy and timeout
 * apply: F08/F09).
 *
 * Behaviour (facts/forges.md "Gitea / Forgejo"):
 * - Status: `POST /repos/{o}/{r}/statuses/{sha}` with `state` (pending|success|failure), `context`,
 *   `description`, `target_url`. Deduplication (F05/F06): on a cache miss, every page of
 *   `GET /repos/{o}/{r}/commits/{sha}/statuses` (`page`/`limit`, `Link` rel="next") is read and the
 *   newest (highest id) status of our context decides; Gitea keeps every posted status, so an
 *   identical one is not posted again.
 * - Pull requests: `metadata.pullRequest` (the PR index) when set; else the open pull requests
 *   (`GET /repos/{o}/{r}/pulls?state=open`, all pages) whose `head.sha` is the commit — Gitea's
 *   "pull request of a commit" endpoint only returns merged ones.
 * - Sticky comment: issue comments (`GET /repos/{o}/{r}/issues/{index}/comments`, following any
 *   `Link` rel="next"), ours = contains the marker AND `user.id` is the token's own user
 *   (`GET /user`): a human's comment quoting the marker is never edited (F16). Created with
 *   `POST …/issues/{index}/comments`, edited with `PATCH /repos/{o}/{r}/issues/comments/{id}`.
 * - Auth: `Authorization: token <token>`; with a username (spec.username or key `username`) and
 *   `password` (or the token as password) HTTP basic auth (F10a). Values arrive trimmed (F10c).
 * - Renamed or transferred repositories (N07): Gitea keeps the old path as a redirect and answers
 *   `301 Moved Permanently` with `Location: /api/v1/repos/<new owner>/<new name>/…` for EVERY
 *   method, writes included (observed on Gitea 1.27.3; `RedirectToRepo` in Gitea's
 *   services/context/repo.go). A client following a 301 the browser way would turn the status
 *   POST into a GET of the status list and report success with nothing stored. So a redirect is
 *   not followed blindly: the repository's current path is looked up once (`GET /repos/{o}/{r}`,
 *   same origin and API base only, at most {@link MAX_MOVES} hops), remembered, and the call is
 *   made again, with the same method and body, at the new path.
 */
import type { ForgeRepo } from './address.ts';
import {
  authHeaders,
  callJson,
  collect,
  field,
  forgeNotifier,
  idOf,
  Lazy,
  linkPages,
  LruCache,
  repositoryFor,
  str,
  type ForgeAdapter,
  type ForgeComment,
  type StatusSnapshot,
} from './forge-common.ts';
import { ProviderError } from './errors.ts';
import type { NotifierFactory } from './types.ts';

/** Page size of Gitea listings (Gitea's default maximum `MAX_RESPONSE_ITEMS` is 50). */
export const GITEA_PAGE_SIZE = 50;

/** Bound of redirects followed when looking up where a repository moved (a rename of a rename). */
export const MAX_MOVES = 3;

interface PullRequest {
  id: string;
}

/** Factory of the `gitea` provider type. @throws Error when the Provider has no credentials. */
export const gitea: NotifierFactory = (p, { http }) => {
  const headers = authHeaders(p, 'token', 'gitea');
  const secretValues = http.secretValues;
  const originalPath = (r: ForgeRepo): string =>
    `${r.apiBase}/repos/${r.path.map((s) => encodeURIComponent(s)).join('/')}`;
  /** Current API path of repositories that moved, by original path (lower case). */
  const moved = new LruCache<string>(1_000);
  const repoPath = (r: ForgeRepo): string => {
    const original = originalPath(r);
    return moved.get(original.toLowerCase()) ?? original;
  };

  /**
   * Where Gitea says the repository now lives, following its redirects from `from` (the
   * repository's API path) within the same origin and API base; undefined when it does not
   * redirect (any more). @throws ProviderError for a redirect elsewhere or too many hops.
   */
  const locate = async (r: ForgeRepo, from: string): Promise<string | undefined> => {
    const apiPrefix = `${r.apiBase}/repos/`;
    let at = from;
    for (let hop = 0; hop <= MAX_MOVES; hop++) {
      const { status, headers: h } = await callJson(http, {
        method: 'GET',
        url: at,
        headers,
        acceptStatus: [301, 302, 307, 308],
      });
      if (status < 300) return at === from ? undefined : at;
      const location = h.get('location');
      const next = location === null ? undefined : new URL(location, at);
      const target = next === undefined ? '' : `${next.origin}${next.pathname}`.replace(/\/+$/, '');
      const rest = target.startsWith(apiPrefix) ? target.slice(apiPrefix.length).split('/') : [];
      if (next === undefined || rest.length !== 2 || rest.some((seg) => seg === '')) {
        throw new ProviderError(
          `Gitea moved repository ${r.path.join('/')} to ${location ?? 'nowhere (no Location)'}, which is not a repository of the same Gitea: refusing to follow; set the Stack's repository (or the Provider address) to its new location`,
          { code: 'REDIRECT', status, retryable: false, secretValues },
        );
      }
      at = target;
    }
    throw new ProviderError(
      `Gitea redirected repository ${r.path.join('/')} more than ${MAX_MOVES} times: set the Stack's repository (or the Provider address) to its new location`,
      { code: 'REDIRECT', retryable: false, secretValues },
    );
  };

  /**
   * Runs `op` against the repository's API path; when Gitea answers that the repository moved
   * (a REDIRECT error), finds its new path, remembers it and runs `op` once more there.
   */
  const onRepo = async <T>(r: ForgeRepo, op: (base: string) => Promise<T>): Promise<T> => {
    const base = repoPath(r);
    try {
      return await op(base);
    } catch (err) {
      if (!(err instanceof ProviderError) || err.code !== 'REDIRECT') throw err;
      const to = await locate(r, base);
      if (to === undefined) throw err;
      moved.set(originalPath(r).toLowerCase(), to);
      return op(to);
    }
  };
  const identities = new Map<string, Lazy<string>>();
  const myId = (r: ForgeRepo): Promise<string> => {
    let l = identities.get(r.apiBase);
    if (l === undefined) {
      l = new Lazy(async () => {
        const { data } = await callJson(http, { method: 'GET', url: `${r.apiBase}/user`, headers });
        const id = idOf(field(data, 'id'));
        if (id === undefined) {
          throw new ProviderError(
            'Gitea GET /user answered without a user id: check the Provider address and token',
            {
              code: 'BAD_RESPONSE',
              retryable: false,
              secretValues,
            },
          );
        }
        return id;
      });
      identities.set(r.apiBase, l);
    }
    return l.get();
  };

  const adapter: ForgeAdapter<ForgeRepo, PullRequest> = {
    repository: (ev) => repositoryFor('gitea', p, ev, secretValues),
    repoKey: (r) => originalPath(r).toLowerCase(),
    nativeState: (s) => s,

    readStatus: (ctx, context) =>
      onRepo(ctx.repo, async (base) => {
        let newest: { id: number; snap: StatusSnapshot } | undefined;
        const url = `${base}/commits/${ctx.sha}/statuses?limit=${GITEA_PAGE_SIZE}&page=1`;
        for await (const page of linkPages(http, url, headers, 'Gitea commit statuses')) {
          for (const s of page) {
            if (str(field(s, 'context')) !== context) continue;
            const id = Number(field(s, 'id'));
            // Gitea answers `status`; older versions also `state`.
            const state = str(field(s, 'status')) ?? str(field(s, 'state'));
            if (state === undefined || !Number.isFinite(id)) continue;
            // Highest id, not listing order: Gitea 1.27.3 sorts by `created_unix DESC` (whole
            // seconds), so statuses created in the same second come back in any order.
            if (newest === undefined || id > newest.id) {
              newest = { id, snap: { state, description: str(field(s, 'description')) ?? '' } };
            }
          }
        }
        return newest?.snap;
      }),

    writeStatus: (ctx, status) =>
      onRepo(ctx.repo, async (base) => {
        await callJson(http, {
          method: 'POST',
          url: `${base}/statuses/${ctx.sha}`,
          headers,
          body: {
            state: status.state,
            context: status.context,
            description: status.description,
            ...(status.targetURL !== undefined ? { target_url: status.targetURL } : {}),
          },
        });
      }),

    pullRequest: (ctx, index) =>
      onRepo(ctx.repo, async (base) => {
        const { status } = await callJson(http, {
          method: 'GET',
          url: `${base}/pulls/${index}`,
          headers,
          acceptStatus: [404],
        });
        return status === 404 ? undefined : { id: index };
      }),

    pullRequestsForCommit: (ctx) =>
      onRepo(ctx.repo, async (base) => {
        const out: PullRequest[] = [];
        const url = `${base}/pulls?state=open&limit=${GITEA_PAGE_SIZE}&page=1`;
        for await (const page of linkPages(http, url, headers, 'Gitea pull requests')) {
          for (const pr of page) {
            const n = idOf(field(pr, 'number'));
            if (n !== undefined && str(field(field(pr, 'head'), 'sha')) === ctx.sha) out.push({ id: n });
          }
        }
        return out;
      }),

    async *comments(ctx, pr) {
      const me = await myId(ctx.repo);
      // Read inside onRepo (a moved repository answers the first request with a redirect). Gitea
      // returns every comment in one answer (`limit`/`page` ignored, no `Link`; observed on
      // Gitea 1.27.3), so collecting the pages costs nothing; a `Link` is still followed.
      const pages = await onRepo(ctx.repo, (base) =>
        collect(linkPages(http, `${base}/issues/${pr.id}/comments`, headers, 'Gitea issue comments')),
      );
      const out: ForgeComment[] = [];
      for (const c of pages) {
        const id = idOf(field(c, 'id'));
        const body = str(field(c, 'body'));
        if (id === undefined || body === undefined) continue;
        out.push({ ref: id, body, mine: idOf(field(field(c, 'user'), 'id')) === me });
      }
      yield out;
    },

    createComment: (ctx, pr, body) =>
      onRepo(ctx.repo, async (base) => {
        const { data } = await callJson(http, {
          method: 'POST',
          url: `${base}/issues/${pr.id}/comments`,
          headers,
          body: { body },
        });
        const id = idOf(field(data, 'id'));
        if (id === undefined) {
          throw new ProviderError('Gitea answered a comment creation without a comment id', {
            code: 'BAD_RESPONSE',
            retryable: false,
            secretValues,
          });
        }
        return id;
      }),

    editComment: (ctx, _pr, ref, body) =>
      onRepo(ctx.repo, async (base) => {
        await callJson(http, {
          method: 'PATCH',
          url: `${base}/issues/comments/${ref}`,
          headers,
          body: { body },
        });
        return ref;
      }),
  };
  return forgeNotifier(http, { pullRequestComment: p.pullRequestComment, label: 'gitea' }, adapter);
};
