/**
 * The Azure DevOps client of one Provider (Services and Server, Git REST API 7.1): auth, calls,
 * `top`/`skip` and continuation-token paging, repository URLs and the credentials' own identity,
 * over the Provider's `ProviderHttp` (CA and proxy apply: cases F08/F09).
 *
 * Auth: HTTP basic with an empty user name and the PAT (key `token`); with a username
 * (spec.username or key `username`), basic with it and `password` (or the token). Azure DevOps
 * answers an unauthenticated or badly authenticated call with 203 and a sign-in page: that is
 * an authentication failure (verdict `auth`: the Provider shows `Ready=False/AuthenticationFailed`,
 * case N11).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import { classifyAnswer } from '../../notifier/classify.ts';
import { ProviderError } from '../../notifier/errors.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { ForgeRepo } from '../address.ts';
import { basicAuth, identityOf, LazyPerKey } from '../auth.ts';
import { badShape, describeURL, field, parseJson, str } from '../json.ts';
import { pages } from '../paging.ts';

/** REST API version sent with every call. */
export const AZURE_API_VERSION = '7.1';
/** `context.genre` of every status this controller posts. */
export const AZURE_STATUS_GENRE = 'pko-notification-controller';
/** Page size (`top` / `$top`). */
export const AZURE_PAGE_SIZE = 100;

export interface AzurePullRequest {
  id: string;
}

function azureAuth(p: ResolvedProvider): Record<string, string> {
  const secret = p.password ?? p.token;
  if (p.username !== undefined && secret !== undefined)
    return { Authorization: basicAuth(p.username, secret) };
  if (p.token !== undefined) return { Authorization: basicAuth('', p.token) };
  throw new Error(
    `Provider ${p.namespace}/${p.name}: type 'azuredevops' needs a personal access token: set key 'token' in the Provider's Secret`,
  );
}

/** `url` with `api-version` (and more query parameters) appended. */
export function withQuery(url: string, params: Record<string, string | number>): string {
  const u = new URL(url);
  u.searchParams.set('api-version', AZURE_API_VERSION);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, String(v));
  return u.toString();
}

export interface AzureCall {
  status: number;
  data: unknown;
  continuation: string | null;
}

export interface AzureClient {
  secretValues: readonly string[];
  /** One call; 203 (sign-in page) is a credentials error; JSON parsed for 2xx. */
  call(
    method: string,
    url: string,
    opts?: { body?: unknown; acceptStatus?: readonly number[]; signal?: AbortSignal | undefined },
  ): Promise<AzureCall>;
  /** `top`/`skip` listing (`$top`/`$skip` when `dollar`), until a page shorter than `top`. */
  skipPages(
    url: string,
    dollar: boolean,
    what: string,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<unknown[], void, undefined>;
  /** Listing paged by the `x-ms-continuationtoken` header (one page when the server sends none). */
  continuationPages(
    url: string,
    what: string,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<unknown[], void, undefined>;
  /** `<api>/git/repositories/<repo>` */
  repoURL(r: ForgeRepo): string;
  /** The credentials' identity (`GET {org}/_apis/connectionData` → `authenticatedUser.id`), lower-case. */
  me(r: ForgeRepo, signal: AbortSignal | undefined): Promise<string>;
}

/** @throws Error when the Provider has no PAT. */
export function azureClient(p: ResolvedProvider, http: ProviderHttp): AzureClient {
  const headers = azureAuth(p);
  const secretValues = http.secretValues;
  const call: AzureClient['call'] = async (method, url, opts = {}) => {
    const { body, acceptStatus, signal } = opts;
    const res = await http.request(url, {
      method,
      headers: {
        ...headers,
        Accept: 'application/json',
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(acceptStatus !== undefined ? { acceptStatus } : {}),
      ...(signal !== undefined ? { signal } : {}),
    });
    // Azure DevOps answers expired or revoked credentials with 203 and its sign-in page (N11).
    const signIn = classifyAnswer(
      { status: res.status, headers: res.headers, body: res.text, expectJson: true },
      Date.now(),
    );
    if (signIn?.verdict.kind === 'auth') {
      throw new ProviderError(
        `${method} ${describeURL(url)} answered ${res.status} with a sign-in page: Azure DevOps did not accept the credentials (expired or revoked?); check key 'token' (a PAT with Code read & write and Code status scopes) in the Provider's Secret`,
        {
          code: `HTTP_${res.status}`,
          status: res.status,
          retryable: false,
          secretValues,
          verdict: signIn.verdict,
        },
      );
    }
    const ok = res.status >= 200 && res.status <= 299;
    return {
      status: res.status,
      data: ok ? parseJson(res, `${method} ${describeURL(url)}`, secretValues) : null,
      continuation: res.headers.get('x-ms-continuationtoken'),
    };
  };
  const values = (data: unknown, url: string): unknown[] => {
    const v = field(data, 'value');
    if (!Array.isArray(v)) throw badShape(`GET ${describeURL(url)}`, secretValues);
    return v as unknown[];
  };
  const repoURL = (r: ForgeRepo): string =>
    `${r.apiBase}/git/repositories/${encodeURIComponent(r.path[2] ?? '')}`;
  /** Organisation/collection-level API base: the project segment removed from `apiBase`. */
  const orgApi = (r: ForgeRepo): string => {
    const project = r.path[1];
    const suffix = project === undefined ? '' : `/${encodeURIComponent(project)}/_apis`;
    return suffix !== '' && r.apiBase.endsWith(suffix)
      ? `${r.apiBase.slice(0, -suffix.length)}/_apis`
      : r.apiBase;
  };
  const identities = new LazyPerKey<string>();
  return {
    secretValues,
    call,
    skipPages: (url, dollar, what, signal) =>
      pages<unknown, number>(
        0,
        async (skip) => {
          const u = withQuery(url, {
            [dollar ? '$top' : 'top']: AZURE_PAGE_SIZE,
            [dollar ? '$skip' : 'skip']: skip,
          });
          const items = values((await call('GET', u, { signal })).data, u);
          return { items, next: items.length < AZURE_PAGE_SIZE ? undefined : skip + items.length };
        },
        what,
        secretValues,
      ),
    continuationPages: (url, what, signal) =>
      pages<unknown, { token: string | undefined }>(
        { token: undefined },
        async ({ token }) => {
          const u = withQuery(url, token === undefined ? {} : { continuationToken: token });
          const res = await call('GET', u, { signal });
          const next =
            res.continuation !== null && res.continuation !== '' && res.continuation !== token
              ? res.continuation
              : undefined;
          return { items: values(res.data, u), next: next === undefined ? undefined : { token: next } };
        },
        what,
        secretValues,
      ),
    repoURL,
    me(r, signal) {
      const base = orgApi(r);
      return identities.get(base, async () => {
        const url = `${base}/connectionData`;
        const { data } = await call('GET', url, { signal });
        const id = str(field(field(data, 'authenticatedUser'), 'id'));
        const message = `GET ${url} answered without the authenticated user: check the credentials`;
        return identityOf(id, message, secretValues).toLowerCase();
      });
    },
  };
}
