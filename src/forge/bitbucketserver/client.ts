/**
 * The Bitbucket Data Center client of one Provider (REST under `https://HOST[/context]/rest`):
 * auth headers, repository URLs, `{values, isLastPage, nextPageStart}` paging and the credentials'
 * own user, over the Provider's `ProviderHttp` — every call is verified against the Provider CA
 * (`certSecretRef`, case F08: private CAs are the norm here) and goes through its proxy (F09).
 *
 * Auth: HTTP basic with the username (spec.username or key `username`) and `password` (or the
 * token as password) (F10a); without a username, `Authorization: Bearer <token>` (HTTP access
 * token).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { ForgeRepo } from '../address.ts';
import { authHeaders, identityOf, LazyPerKey } from '../auth.ts';
import { callJson, field } from '../json.ts';
import { pageItems, pages } from '../paging.ts';

/** Page size (`limit`) of every listing. */
export const BITBUCKET_SERVER_PAGE_SIZE = 100;

export interface BitbucketServerPullRequest {
  id: string;
}

/**
 * Pages of a Bitbucket Data Center paged API (`{ values, isLastPage, nextPageStart }`):
 * `start`/`limit` query parameters, until `isLastPage`.
 * @throws ProviderError from the calls; `BAD_RESPONSE` for a page without `values`.
 */
export function pagedValues(
  http: ProviderHttp,
  url: string,
  headers: Record<string, string>,
  what: string,
  signal?: AbortSignal,
): AsyncGenerator<unknown[], void, undefined> {
  const sep = url.includes('?') ? '&' : '?';
  return pages<unknown, number>(
    0,
    async (start) => {
      const u = `${url}${sep}start=${start}&limit=${BITBUCKET_SERVER_PAGE_SIZE}`;
      const { data } = await callJson(http, { method: 'GET', url: u, headers, signal });
      const values = pageItems(data, u, http.secretValues, 'values');
      const next = field(data, 'nextPageStart');
      const last = field(data, 'isLastPage') !== false || typeof next !== 'number' || next <= start;
      return { items: values, next: last ? undefined : next };
    },
    what,
    http.secretValues,
  );
}

export interface BitbucketServerClient {
  http: ProviderHttp;
  headers: Record<string, string>;
  secretValues: readonly string[];
  /** `<rest>/api/latest/projects/<key>/repos/<slug>` */
  repoURL(r: ForgeRepo): string;
  /** `https://HOST[/context]`: the API base without its `/rest`. */
  webRoot(r: ForgeRepo): string;
  /** The credentials' own user name (`GET /plugins/servlet/applinks/whoami`, else the username), lower-case. */
  me(r: ForgeRepo, signal: AbortSignal | undefined): Promise<string>;
}

/** @throws Error when the Provider has no credentials. */
export function bitbucketServerClient(p: ResolvedProvider, http: ProviderHttp): BitbucketServerClient {
  const headers = authHeaders(p, 'Bearer', 'bitbucketserver');
  const secretValues = http.secretValues;
  const webRoot = (r: ForgeRepo): string => r.apiBase.replace(/\/rest$/, '');
  const identities = new LazyPerKey<string>();
  return {
    http,
    headers,
    secretValues,
    repoURL(r) {
      const [key, slug] = r.path;
      return `${r.apiBase}/api/latest/projects/${encodeURIComponent(key ?? '')}/repos/${encodeURIComponent(slug ?? '')}`;
    },
    webRoot,
    me: (r, signal) =>
      identities.get(r.apiBase, async () => {
        const res = await http.request(`${webRoot(r)}/plugins/servlet/applinks/whoami`, {
          method: 'GET',
          headers: { ...headers, Accept: 'text/plain' },
          acceptStatus: [404],
          ...(signal !== undefined ? { signal } : {}),
        });
        const message =
          'Bitbucket Data Center did not say who the credentials belong to (GET /plugins/servlet/applinks/whoami answered no user): check the credentials';
        return identityOf(
          res.status === 404 ? p.username : res.text.trim(),
          message,
          secretValues,
        ).toLowerCase();
      }),
  };
}
