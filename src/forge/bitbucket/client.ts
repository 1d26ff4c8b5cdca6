/**
 * The Bitbucket Cloud client of one Provider (API `https://api.bitbucket.org/2.0`): auth headers,
 * repository URLs, `{values, next}` paging and the credentials' own account (for recognising our
 * comments), over the Provider's `ProviderHttp` (CA and proxy apply: cases F08/F09).
 *
 * Auth: with a username (spec.username or key `username`) HTTP basic with `password` (an app
 * password or Atlassian API token; or `token` when there is no password); without one,
 * `Authorization: Bearer <token>` (repository/workspace access token). Identifying our own
 * comments needs `GET /2.0/user`; credentials that cannot read it fail the comment step with that
 * call's error (the status is already set by then).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { ForgeRepo } from '../address.ts';
import { authHeaders, identityOf, LazyPerKey } from '../auth.ts';
import { callJson, field, str } from '../json.ts';
import { pages, pageItems, pageWithNext } from '../paging.ts';

/** Page size for listings (`pagelen`; Bitbucket's maximum for these endpoints is 50–100). */
export const BITBUCKET_PAGE_LEN = 50;

export interface BitbucketPullRequest {
  id: string;
}

/**
 * Pages of a Bitbucket Cloud listing (`{ values: [...], next?: url }`), following `next` on the
 * same origin. With `first`, the first page was already fetched from `url` (its JSON).
 * @throws ProviderError from the calls; `BAD_RESPONSE` for a page without `values`.
 */
export function valuesPages(
  http: ProviderHttp,
  url: string,
  headers: Record<string, string>,
  what: string,
  opts: { first?: unknown; signal?: AbortSignal | undefined } = {},
): AsyncGenerator<unknown[], void, undefined> {
  let prefetched = opts.first;
  return pages<unknown, string>(
    url,
    async (u) => {
      const data =
        prefetched ?? (await callJson(http, { method: 'GET', url: u, headers, signal: opts.signal })).data;
      prefetched = undefined;
      const values = pageItems(data, u, http.secretValues, 'values');
      return pageWithNext(values, str(field(data, 'next')), u, http.secretValues);
    },
    what,
    http.secretValues,
  );
}

export interface BitbucketClient {
  http: ProviderHttp;
  headers: Record<string, string>;
  secretValues: readonly string[];
  /** `<api>/repositories/<workspace>/<repo>` */
  repoURL(r: ForgeRepo): string;
  /** The credentials' own account uuid (`GET /user`), once per API base. */
  myUUID(r: ForgeRepo, signal: AbortSignal | undefined): Promise<string>;
}

/** @throws Error when the Provider has no credentials. */
export function bitbucketClient(p: ResolvedProvider, http: ProviderHttp): BitbucketClient {
  const headers = authHeaders(p, 'Bearer', 'bitbucket');
  const secretValues = http.secretValues;
  const identities = new LazyPerKey<string>();
  return {
    http,
    headers,
    secretValues,
    repoURL: (r) => `${r.apiBase}/repositories/${r.path.map((s) => encodeURIComponent(s)).join('/')}`,
    myUUID: (r, signal) =>
      identities.get(r.apiBase, async () => {
        const { data } = await callJson(http, { method: 'GET', url: `${r.apiBase}/user`, headers, signal });
        const message = 'Bitbucket GET /user answered without a uuid: check the Provider address';
        return identityOf(str(field(data, 'uuid')), message, secretValues);
      }),
  };
}
