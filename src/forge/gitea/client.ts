/**
 * The Gitea client of one Provider: auth headers, repository URLs and the credentials' own user
 * (for recognising our comments), over the Provider's `ProviderHttp` (CA, proxy, timeout: cases
 * F08/F09). Auth: `Authorization: token <token>`; with a username (spec.username or key
 * `username`) and `password` (or the token as password) HTTP basic auth (F10a). Values arrive
 * trimmed (F10c).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { LRUCache } from 'lru-cache';
import type { ResolvedProvider } from '../../credential/provider.ts';
import { ProviderError } from '../../notifier/errors.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { ForgeRepo } from '../address.ts';
import { authHeaders, Lazy } from '../auth.ts';
import { callJson, field, idOf } from '../json.ts';

/** Page size of Gitea listings (Gitea's default maximum `MAX_RESPONSE_ITEMS` is 50). */
export const GITEA_PAGE_SIZE = 50;

/** Bound of redirects followed when looking up where a repository moved (a rename of a rename). */
export const MAX_MOVES = 3;

export interface GiteaPullRequest {
  id: string;
}

export interface GiteaClient {
  http: ProviderHttp;
  headers: Record<string, string>;
  secretValues: readonly string[];
  /** `<api>/repos/<owner>/<repo>` as configured (before any move); stable key of the repository. */
  repoPath(r: ForgeRepo): string;
  /**
   * Runs `op` with the repository's current API path. When Gitea answers that the repository moved
   * (a `REDIRECT` error: Gitea 1.27.3 answers an old path with `301` for every method, writes
   * included — observed; `RedirectToRepo` in its services/context/repo.go), the new path is looked
   * up with `GET /repos/{o}/{r}` (same origin and API base only, at most {@link MAX_MOVES} hops),
   * remembered, and `op` runs once more there with the same method and body. Following a 301 the
   * browser way would turn a status POST into a GET and report success with nothing stored.
   * @throws ProviderError `REDIRECT` (final) for a move to another host or too many hops.
   */
  onRepo<T>(r: ForgeRepo, signal: AbortSignal | undefined, op: (base: string) => Promise<T>): Promise<T>;
  /** The credentials' own user id (`GET /user`), once per API base. */
  myId(r: ForgeRepo, signal: AbortSignal | undefined): Promise<string>;
}

/** @throws Error when the Provider has no credentials. */
export function giteaClient(p: ResolvedProvider, http: ProviderHttp): GiteaClient {
  const headers = authHeaders(p, 'token', 'gitea');
  const secretValues = http.secretValues;
  const identities = new Map<string, Lazy<string>>();
  const originalPath = (r: ForgeRepo): string =>
    `${r.apiBase}/repos/${r.path.map((s) => encodeURIComponent(s)).join('/')}`;
  /** Current API path of repositories that moved, by original path (lower case). */
  const moved = new LRUCache<string, string>({ max: 1_000 });

  /** Where Gitea says the repository now lives, from `from`; undefined when it does not redirect. */
  const locate = async (
    r: ForgeRepo,
    from: string,
    signal: AbortSignal | undefined,
  ): Promise<string | undefined> => {
    const apiPrefix = `${r.apiBase}/repos/`;
    let at = from;
    for (let hop = 0; hop <= MAX_MOVES; hop++) {
      const { status, headers: h } = await callJson(http, {
        method: 'GET',
        url: at,
        headers,
        acceptStatus: [301, 302, 307, 308],
        signal,
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

  return {
    http,
    headers,
    secretValues,
    repoPath: originalPath,
    async onRepo(r, signal, op) {
      const original = originalPath(r);
      const base = moved.get(original.toLowerCase()) ?? original;
      try {
        return await op(base);
      } catch (err) {
        if (!(err instanceof ProviderError) || err.code !== 'REDIRECT') throw err;
        const to = await locate(r, base, signal);
        if (to === undefined) throw err;
        moved.set(original.toLowerCase(), to);
        return op(to);
      }
    },
    myId(r, signal) {
      let l = identities.get(r.apiBase);
      if (l === undefined) {
        l = new Lazy(async () => {
          const { data } = await callJson(http, { method: 'GET', url: `${r.apiBase}/user`, headers, signal });
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
    },
  };
}
