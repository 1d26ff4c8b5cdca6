/**
 * What a failed HTTP call means, as a `ProviderError` whose message says what to do: the answer's
 * status (retryable or final, rate limits, redirects), or the transport failure underneath undici's
 * "fetch failed" (certificate verification, TLS handshake, proxy, timeout, network).
 *
 * Case ids (F08, F09) are described in docs/cases.md.
 */
import { STATUS_CODES } from '../node-http.ts';
import {
  classifyAnswer,
  isHtml,
  isSignInPage,
  verdictForCode,
  type AnswerKind,
  type HeaderReader,
  type Verdict,
} from './classify.ts';
import { ProviderError } from './errors.ts';
import { recognisedMessage } from './reflect.ts';
import { MAX_REDIRECTS, type RedirectRefusal } from './redirect.ts';

/** What the failure is judged against: the Provider's secrets, clock, timeout and proxy. */
export interface FailureContext {
  secretValues: readonly string[];
  now(): number;
  /** `spec.timeout`, ms. */
  timeoutMs: number;
  /** Whether the Provider sends through a proxy (`proxySecretRef`). */
  proxy: boolean;
  /**
   * Whether a recognised error message of the answer may be shown (./reflect.ts): forge and chat
   * APIs, not generic webhooks, whose answers are never shown.
   */
  reflect: boolean;
}

/** Certificate-verification failures: the endpoint's chain does not lead to a trusted CA (F08). */
const CERT_VERIFY_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
]);
const CERT_TIME_CODES = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
/** Failures to reach the first hop: with a proxy configured, that hop is the proxy. */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

interface CodedError {
  code?: unknown;
  message?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/**
 * Walks a `cause` chain (and AggregateError members): the innermost error that has a string
 * `code`, and the innermost message (undici's fetch wraps everything in "fetch failed").
 */
function rootCause(err: unknown): { code: string; message: string } {
  let code = '';
  let message = err instanceof Error ? err.message : String(err);
  let cur: unknown = err;
  for (let depth = 0; depth < 8 && cur !== null && typeof cur === 'object'; depth++) {
    const e = cur as CodedError;
    if (typeof e.message === 'string' && e.message !== '') message = e.message;
    if (typeof e.code === 'string') code = e.code;
    if (e.cause !== undefined) cur = e.cause;
    else if (Array.isArray(e.errors) && e.errors.length > 0) cur = e.errors[0];
    else break;
  }
  // Node's advice to use --use-system-ca does not apply to a controller: drop it.
  message = message.replace(/;\s*if the root CA is installed locally.*$/i, '');
  return { code, message };
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** What to do about each kind of answer, for the Provider's owner. */
function hintFor(kind: AnswerKind, status: number, retryAfterMs: number | undefined): string {
  const after = retryAfterMs !== undefined ? ` after ${formatMs(retryAfterMs)}` : '';
  switch (kind) {
    case 'rateLimited':
      return `rate limited; will retry${after}`;
    case 'auth':
      return status === 407
        ? "the proxy rejected its credentials: check 'username'/'password' in spec.proxySecretRef"
        : status >= 200 && status <= 299
          ? "the endpoint answered with a sign-in page: the credentials were not accepted (expired or revoked?); check the Provider's Secret (spec.secretRef)"
          : "check the credentials (key 'token', or 'username'/'password') in the Provider's Secret (spec.secretRef)";
    case 'permission':
      return 'the credentials lack permission for this endpoint: check the token scopes or app permissions';
    case 'locked':
      return 'the target is locked, archived or read-only: nothing will change that on our side (final for this event)';
    case 'notFound':
      return 'check the Provider address: the endpoint or repository does not exist, or the credentials cannot see it';
    case 'server':
      return status === 408
        ? `the endpoint is slow; will retry${after}`
        : `the endpoint failed; will retry${after}`;
    case 'conflict':
      return 'conflict; will retry';
    case 'badResponse':
      return "the answer is not the API's (an HTML page?): set the Provider address (or spec.apiURL) to the API's own URL";
    default:
      return 'the endpoint rejected the request: check the Provider address and type';
  }
}

/**
 * A `ProviderError` for an HTTP answer that is not a success, classified by ./classify.ts
 * (status, headers and body); the message says what failed and what to do.
 */
export function httpError(
  c: FailureContext,
  method: string,
  target: string,
  status: number,
  headers: HeaderReader,
  body: string,
  opts: { expectJson?: boolean; redirect?: RedirectRefusal | undefined; url?: string } = {},
): ProviderError {
  const secretValues = c.secretValues;
  const statusText = STATUS_CODES[status] ?? '';
  // Never the raw body: only a recognised error message, bounded (./reflect.ts, case B09) —
  // HTML pages (a sign-in page answering 203, N11) and plain text are not shown at all.
  const shown = c.reflect ? recognisedMessage(body) : undefined;
  const tail = shown === undefined ? '' : `. The endpoint said: ${shown}`;
  const what = `${method} ${target} answered ${status}${statusText === '' ? '' : ` ${statusText}`}`;
  const classified = classifyAnswer(
    {
      status,
      headers,
      body,
      ...(opts.expectJson !== undefined ? { expectJson: opts.expectJson } : {}),
      ...(opts.url !== undefined ? { url: opts.url } : {}),
    },
    c.now(),
  ) ?? {
    verdict: { kind: 'badResponse', retry: false } satisfies Verdict,
    said: '',
  };
  const { verdict } = classified;

  const r0 = opts.redirect;
  if (r0?.reason === 'signIn' || r0?.reason === 'write') {
    const why =
      r0.reason === 'signIn'
        ? `to a sign-in page (${r0.location}): not followed. The credentials were not accepted, or the address is not the API (a login or SSO page in front of it): check the Provider's Secret and set the Provider address (or spec.apiURL) to the API's own URL`
        : `with ${status} to ${r0.location}, which for a ${method} means "look at this page" (a login form?), not "send it there": not followed; set the Provider address (or spec.apiURL) to the API's own URL`;
    return new ProviderError(`${what}: the endpoint redirects ${why}`, {
      code: 'REDIRECT',
      status,
      retryable: false,
      secretValues,
      verdict:
        r0.reason === 'signIn'
          ? { kind: 'auth', retry: false, condition: 'AuthenticationFailed' }
          : { kind: 'redirect', retry: false, condition: 'NotTheAPI' },
    });
  }
  if (verdict.kind === 'redirect') {
    const r = opts.redirect;
    const why =
      r?.reason === 'otherOrigin'
        ? `to another origin (${r.location}): not followed, credentials are only sent where the Provider points`
        : r?.reason === 'tooMany'
          ? `more than ${MAX_REDIRECTS} times`
          : r?.reason === 'noLocation'
            ? 'without a location'
            : `with ${status}, which is not followed`;
    return new ProviderError(
      `${what}: the endpoint redirects ${why}; set the Provider address (or the Stack's repository) to the new location`,
      { code: 'REDIRECT', status, retryable: false, secretValues, verdict },
    );
  }
  return new ProviderError(`${what}: ${hintFor(verdict.kind, status, verdict.retryAfterMs)}${tail}`, {
    code: `HTTP_${status}`,
    status,
    retryable: verdict.retry,
    retryAfterMs: verdict.retryAfterMs,
    secretValues,
    verdict,
  });
}

/**
 * A `ProviderError` for a failure to get an answer. `sent` says whether the request reached the
 * wire (./sent.ts): a timeout or reset after that is `ambiguous` — the endpoint may have acted on
 * it — while before it nothing happened (`unreachable`); ./classify.ts `verdictForCode`.
 */
export function transportError(
  c: FailureContext,
  err: unknown,
  method: string,
  target: string,
  timeout: AbortSignal,
  callerSignal: AbortSignal | undefined,
  sent = false,
): ProviderError {
  const secretValues = c.secretValues;
  const verdict = (code: string, retryable: boolean): Verdict => verdictForCode(code, { retryable, sent });
  if (callerSignal?.aborted === true) {
    return new ProviderError(`${method} ${target} was cancelled before it completed`, {
      code: 'ABORTED',
      retryable: true,
      secretValues,
    });
  }
  const sentNote = sent ? ' (the request was sent: the endpoint may have acted on it)' : '';
  const timedOut = (): ProviderError =>
    new ProviderError(
      `${method} ${target} got no complete answer within ${formatMs(c.timeoutMs)} (spec.timeout)${sentNote}: will retry; raise spec.timeout if the endpoint is slow`,
      { code: 'TIMEOUT', retryable: true, secretValues, verdict: verdict('TIMEOUT', true) },
    );
  if (timeout.aborted) return timedOut();

  const cause = rootCause(err);
  const code = cause.code;
  const detail = code === '' ? cause.message : `${code}: ${cause.message}`;
  const proxy = c.proxy;
  const proxyError = (what: string, hint: string, retryable: boolean): ProviderError =>
    new ProviderError(
      `${method} ${target} via the proxy failed (${what}): ${hint}${retryable ? '; will retry' : ''}`,
      {
        code: 'PROXY',
        retryable,
        secretValues,
      },
    );
  const checkProxySecret =
    "check key 'address' of spec.proxySecretRef and that the proxy is reachable from the controller";

  if (proxy) {
    const m = /Proxy response \((\d{3})\)|Proxy Authentication Required \((\d{3})\)/.exec(cause.message);
    const proxyStatus = m ? Number(m[1] ?? m[2]) : undefined;
    if (proxyStatus !== undefined) {
      const text = STATUS_CODES[proxyStatus] ?? '';
      const what = `the proxy answered ${proxyStatus}${text === '' ? '' : ` ${text}`}`;
      return proxyStatus === 407
        ? proxyError(what, "check 'username'/'password' in spec.proxySecretRef", false)
        : proxyError(
            what,
            "the proxy could not or would not connect to the endpoint: check the Provider address and the proxy's rules",
            true,
          );
    }
    if (code === 'UND_ERR_PRX_TLS' || code === 'UND_ERR_PRX_CONN')
      return proxyError(detail, checkProxySecret, true);
  }
  if (CERT_VERIFY_CODES.has(code)) {
    return new ProviderError(
      `${method} ${target} failed TLS verification (${detail}): if the endpoint uses a private or self-signed CA, set spec.certSecretRef to a Secret whose key 'ca.crt' holds that CA (PEM); will retry`,
      { code: 'TLS', retryable: true, secretValues },
    );
  }
  if (CERT_TIME_CODES.has(code)) {
    return new ProviderError(
      `${method} ${target} failed TLS verification (${detail}): the endpoint's certificate is outside its validity period; renew it; will retry`,
      { code: 'TLS', retryable: true, secretValues },
    );
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return new ProviderError(
      `${method} ${target} failed TLS verification (${detail}): the certificate does not name this host; use a host name it covers in the Provider address; will retry`,
      { code: 'TLS', retryable: true, secretValues },
    );
  }
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || code === 'EPROTO') {
    return new ProviderError(
      `${method} ${target} failed the TLS handshake (${detail}): check that the endpoint speaks HTTPS on this port, and the client certificate ('tls.crt'/'tls.key' in spec.certSecretRef) if it requires one; will retry`,
      { code: 'TLS', retryable: true, secretValues },
    );
  }
  if (TIMEOUT_CODES.has(code) || (err instanceof Error && err.name === 'TimeoutError')) {
    if (proxy && code === 'UND_ERR_CONNECT_TIMEOUT') return proxyError(detail, checkProxySecret, true);
    return timedOut();
  }
  if (proxy && CONNECT_CODES.has(code)) return proxyError(detail, checkProxySecret, true);
  return new ProviderError(
    `${method} ${target} failed (${detail})${sentNote}: check that the address is right and reachable from the controller; will retry`,
    { code: 'NETWORK', retryable: true, secretValues, verdict: verdict('NETWORK', true) },
  );
}

/**
 * A 2xx answer that is not the JSON the API sends, for chat clients that read their own answers:
 * a sign-in page is `auth` (AuthenticationFailed), any other HTML page means the address is not
 * the API (`NotTheAPI`: a portal or web page in front of it, case N13), anything else is
 * `badResponse`, retried as `retryable` says. The message names what to set.
 */
export function notApiAnswer(
  what: string,
  res: { status: number; headers: { get(name: string): string | null }; text: string },
  secretValues: readonly string[],
  opts: { retryable: boolean; fix: string },
): ProviderError {
  const page = isHtml(res.text, res.headers.get('content-type'));
  if (page && isSignInPage(res.text)) {
    return new ProviderError(
      `${what} answered ${res.status} with a sign-in page: the credentials were not accepted, or the address is a login page in front of the API; ${opts.fix}`,
      {
        code: 'BAD_RESPONSE',
        status: res.status,
        retryable: false,
        secretValues,
        verdict: { kind: 'auth', retry: false, condition: 'AuthenticationFailed' },
      },
    );
  }
  if (page) {
    return new ProviderError(`${what} answered ${res.status} with an HTML page, not the API: ${opts.fix}`, {
      code: 'BAD_RESPONSE',
      status: res.status,
      retryable: false,
      secretValues,
      verdict: { kind: 'badResponse', retry: false, condition: 'NotTheAPI' },
    });
  }
  return new ProviderError(
    `${what} answered ${res.status} with a body that is not the API's answer: ${opts.fix}`,
    {
      code: 'BAD_RESPONSE',
      status: res.status,
      retryable: opts.retryable,
      secretValues,
    },
  );
}
