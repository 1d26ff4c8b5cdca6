/**
 * GitHub's Octokit, assembled in one place: `@octokit/rest` with its plugins and auth strategy,
 * on the Provider's HTTP client. What the notifier does with it is elsewhere (./client.ts and the
 * parts beside it).
 *
 * - Transport: every request — API calls, the GitHub App token exchange, `GET /app` — goes through
 *   the Provider's `ProviderHttp.fetch`, so its CA (`certSecretRef`, case F08) and proxy
 *   (`proxySecretRef`, F09) apply and each request is bounded by `spec.timeout`. Redirects are not
 *   followed (a moved repository fails with code `REDIRECT`), and a request to an origin the
 *   Provider does not name (a next-page link elsewhere) is refused: credentials only go to the
 *   API origin(s) the Provider names.
 * - Auth: a token (`Authorization: token …`), or `authStrategy: createAppAuth` (`@octokit/auth-app`)
 *   with the App keys: the installation token is exchanged with a signed JWT, cached and renewed
 *   before its hour ends; App endpoints (`/app…`) get the JWT.
 * - `@octokit/plugin-throttling` paces writes per credential as GitHub asks (≥ 1 s between
 *   writes, comment creation 1 per 3 s; `throttle.id` = `credentialKey(p)`). Its rate-limit
 *   handlers never wait: they return false, the 403/429 surfaces as a retryable `ProviderError`
 *   with `retryAfterMs`, and the delivery layer's credential gate (src/delivery/gate.ts) holds
 *   every Provider using that credential until then — the one rate-limit mechanism.
 * - `@octokit/plugin-retry`: one quick retry (after 0.5 s) of an idempotent GET that failed with a
 *   5xx or a retryable transport error (a final one, such as an answer over the read limit, is
 *   not: {@link finalTransportErrors}). Writes are never retried here (a POST whose answer was lost may
 *   have taken effect), nor any 4xx; the dispatcher retries those with backoff and jitter.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { createAppAuth } from '@octokit/auth-app';
import { retry } from '@octokit/plugin-retry';
import { throttling } from '@octokit/plugin-throttling';
import { Octokit } from '@octokit/rest';
import { originOf } from './origin.ts';
import { credentialKey } from '../../credential/key.ts';
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { Logger } from '../../log.ts';
import { isHtml, isSignInPage } from '../../notifier/classify.ts';
import { ProviderError } from '../../notifier/errors.ts';
import { isSignInLocation } from '../../notifier/redirect.ts';
import { USER_AGENT, type ProviderHttp } from '../../notifier/http.ts';

/**
 * Octokit wraps anything its `fetch` throws in a `RequestError` with status 500, which
 * plugin-retry would send again. This plugin, applied before it (its error hook runs first),
 * hands a final `ProviderError` from the transport back as it is — not a `RequestError`, so it
 * is not retried: an answer over the read limit (case N17) is over it again, and a request to
 * another origin must not be repeated.
 */
function finalTransportErrors(octokit: Pick<Octokit, 'hook'>): Record<string, never> {
  octokit.hook.error('request', (err: unknown) => {
    const cause = (err as { cause?: unknown } | null)?.cause;
    throw cause instanceof ProviderError && !cause.retryable ? cause : err;
  });
  return {};
}

const GitHubOctokit = Octokit.plugin(finalTransportErrors, retry, throttling);
export type GitHubOctokit = InstanceType<typeof GitHubOctokit>;

export interface OctokitOptions {
  /** The default API base (`https://api.github.com` or `https://HOST/api/v3`). */
  baseUrl: string;
  /** Origins credentials may be sent to; the caller adds repository API origins as it resolves them. */
  allowedOrigins: Set<string>;
  /** Where Octokit's own warnings go (deprecations, auth retries). Default: nowhere. */
  logger?: Logger | undefined;
  /** Write pacing by plugin-throttling (default true; tests that write a lot turn it off). */
  pacing: boolean;
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

/**
 * Which URL to set when the one called does not answer as GitHub's API: the App's token
 * endpoint and `GET /app` use `githubAppBaseURL` from the Secret when set, everything else
 * `spec.apiURL` (or the API guessed from the address: `https://HOST/api/v3` on GitHub Enterprise).
 */
function apiURLHint(url: string, fallbackBase: string): string {
  const app = /\/app(?:\/installations\/[^/]+\/access_tokens)?$/.test(pathOf(url));
  // The base the call was made under (the App's calls may use githubAppBaseURL).
  const m = /^(.*?)\/(?:app|repos|user|users|orgs|installation)(?:\/|$)/.exec(url.split('?')[0] ?? url);
  const base = m?.[1] ?? fallbackBase;
  return `the API base URL ${base} does not answer as GitHub's API (a login or SSO page in front of it?); set ${
    app ? "githubAppBaseURL in the Provider's Secret (for the App's token) or " : ''
  }spec.apiURL to GitHub's API URL (GitHub Enterprise Server: https://HOST/api/v3)`;
}

/** Builds the Octokit of Provider `p` (token or GitHub App) on `http`. */
export function buildOctokit(p: ResolvedProvider, http: ProviderHttp, opts: OctokitOptions): GitHubOctokit {
  const secretValues = http.secretValues;
  const fetchForOctokit = async (
    url: string,
    init: {
      method?: string;
      headers?: Record<string, string>;
      body?: string | null;
      signal?: AbortSignal | null;
    },
  ): ReturnType<ProviderHttp['fetch']> => {
    const method = (init.method ?? 'GET').toUpperCase();
    const origin = originOf(url);
    if (!opts.allowedOrigins.has(origin)) {
      throw new ProviderError(
        `${method} ${url} not sent: GitHub pointed at another origin (${origin}) than the Provider's API; refusing to send credentials there`,
        { code: 'BAD_RESPONSE', retryable: false, secretValues },
      );
    }
    const res = await http.fetch(url, init);
    const notTheAPI = (what: string, code: string): ProviderError =>
      new ProviderError(`${method} ${url} answered ${res.status} ${what}: ${apiURLHint(url, opts.baseUrl)}`, {
        code,
        status: res.status,
        retryable: false,
        secretValues,
        verdict: {
          kind: code === 'REDIRECT' ? 'redirect' : 'badResponse',
          retry: false,
          condition: 'NotTheAPI',
        },
      });
    if (res.status >= 300 && res.status <= 399 && res.status !== 304) {
      const location = res.headers.get('location');
      await res.body?.cancel();
      let to: URL | undefined;
      try {
        to = location === null ? undefined : new URL(location, url);
      } catch {
        to = undefined;
      }
      const shown = to === undefined ? '' : `${to.origin}${to.pathname}`;
      // A login or SSO page (N13): not the API, whatever the method or origin — never "moved".
      if (to !== undefined && isSignInLocation(new URL(url), to))
        throw notTheAPI(
          `with a redirect to a sign-in page (${shown}), not GitHub's API; not followed`,
          'REDIRECT',
        );
      const write = method !== 'GET' && method !== 'HEAD';
      if (write && (res.status === 302 || res.status === 303))
        throw notTheAPI(
          `with a redirect to ${shown} (for a ${method}: "look at this page", not GitHub's API); not followed`,
          'REDIRECT',
        );
      if (!/\/repos\//.test(pathOf(url)))
        throw notTheAPI(
          `with a redirect to ${to?.origin ?? 'nowhere'} (credentials only go where the Provider points); not followed`,
          'REDIRECT',
        );
      throw new ProviderError(
        `${method} ${url} answered ${res.status}: the repository moved${to === undefined ? '' : ` to ${to.origin}`}; set the Provider address to its new location (redirects to another host are not followed)`,
        { code: 'REDIRECT', status: res.status, retryable: false, secretValues },
      );
    }
    // GitHub's REST API answers JSON: an HTML page (a login or SSO portal answering 200 in its
    // place) is never handed to Octokit, which would take it for an answer — an installation
    // token `undefined`, then `Authorization: token undefined` on every call (N13).
    const type = res.headers.get('content-type') ?? '';
    if (
      res.status >= 200 &&
      res.status <= 299 &&
      res.status !== 204 &&
      type !== '' &&
      !/\bjson\b/i.test(type)
    ) {
      const page = await res.text();
      throw notTheAPI(
        `with ${isHtml(page, type) ? (isSignInPage(page) ? 'a sign-in page' : 'an HTML page') : `'${type.split(';')[0] ?? type}'`}, not GitHub's API (JSON)`,
        'BAD_RESPONSE',
      );
    }
    return res;
  };
  const provider = { provider: `${p.namespace}/${p.name}` };
  const log = opts.logger;
  const token = p.token ?? p.password;
  const app = p.githubApp;
  const auth =
    app !== undefined
      ? {
          authStrategy: createAppAuth,
          auth: { appId: app.appID, privateKey: app.privateKey, installationId: app.installationID },
        }
      : token !== undefined
        ? { auth: token }
        : {};
  return new GitHubOctokit({
    baseUrl: opts.baseUrl,
    userAgent: USER_AGENT,
    ...auth,
    request: { fetch: fetchForOctokit },
    log: {
      debug: () => undefined,
      info: () => undefined,
      warn: (message: string) => log?.warn(provider, message),
      // Failed requests are reported by the caller as ProviderErrors; plugin-request-log's error lines are noise.
      error: (message: string) => log?.debug(provider, message),
    },
    retry: {
      retries: 1,
      retryAfterBaseValue: 500,
      // Every 4xx is final or handled by the dispatcher (429: rate limits must not be re-sent early).
      doNotRetry: Array.from({ length: 100 }, (_, i) => 400 + i),
    },
    throttle: {
      enabled: opts.pacing,
      id: credentialKey(p),
      onRateLimit: () => false,
      onSecondaryRateLimit: () => false,
    },
  });
}
