/**
 * What a failed HTTP call means, as a `ProviderError` whose message says what to do: the answer's
 * status (retryable or final, rate limits, redirects), or the transport failure underneath undici's
 * "fetch failed" (certificate verification, TLS handshake, proxy, timeout, network).
 *
 * Case ids (F08, F09) are described in docs/cases.md.
 */
import { STATUS_CODES } from 'node:http';
import type { Headers } from 'undici';
import { bodyExcerpt, isRetryableStatus, ProviderError, retryAfterFrom } from './errors.ts';

/** What the failure is judged against: the Provider's secrets, clock, timeout and proxy. */
export interface FailureContext {
  secretValues: readonly string[];
  now(): number;
  /** `spec.timeout`, ms. */
  timeoutMs: number;
  /** Whether the Provider sends through a proxy (`proxySecretRef`). */
  proxy: boolean;
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

/**
 * Failures of a connection that was open: the request may have been written and processed, and
 * only the answer lost (reset or closed by the peer, no headers or body in time). Failures to
 * connect (`CONNECT_CODES`, `UND_ERR_CONNECT_TIMEOUT`, TLS handshakes) are not among them.
 */
const AFTER_SEND_CODES = new Set([
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
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

export function httpError(
  c: FailureContext,
  method: string,
  target: string,
  status: number,
  headers: Headers,
  body: string,
): ProviderError {
  const secretValues = c.secretValues;
  const statusText = STATUS_CODES[status] ?? '';
  const excerpt = bodyExcerpt(body, secretValues);
  const tail = excerpt === '' ? '' : `. Response: ${excerpt}`;
  const what = `${method} ${target} answered ${status}${statusText === '' ? '' : ` ${statusText}`}`;

  if (status >= 300 && status <= 399) {
    const location = headers.get('location');
    return new ProviderError(
      `${what}: the endpoint redirects${location === null ? '' : ` to ${location}`}; set the Provider address to the final URL (redirects are not followed)`,
      { code: 'REDIRECT', status, retryable: false, secretValues },
    );
  }

  let retryable = isRetryableStatus(status);
  let retryAfterMs = retryable ? retryAfterFrom(headers, c.now()) : undefined;
  // GitHub's primary and secondary rate limits answer 403 (docs/providers/github.md).
  if (status === 403) {
    const fromHeaders = retryAfterFrom(headers, c.now());
    if (fromHeaders !== undefined) {
      retryable = true;
      retryAfterMs = fromHeaders;
    } else if (/rate limit/i.test(body)) {
      retryable = true;
      retryAfterMs = 60_000;
    }
  }

  let hint: string;
  if (status === 401) {
    hint =
      "check the credentials (key 'token', or 'username'/'password') in the Provider's Secret (spec.secretRef)";
  } else if (status === 403) {
    hint = retryable
      ? 'rate limited; will retry'
      : 'the credentials lack permission for this endpoint: check the token scopes or app permissions';
  } else if (status === 404 || status === 410) {
    hint =
      'check the Provider address: the endpoint or repository does not exist, or the credentials cannot see it';
  } else if (status === 407) {
    hint = "the proxy rejected its credentials: check 'username'/'password' in spec.proxySecretRef";
  } else if (status === 408 || status === 429) {
    hint = `the endpoint is throttling or slow; will retry${retryAfterMs !== undefined ? ` after ${formatMs(retryAfterMs)}` : ''}`;
  } else if (status >= 500) {
    hint = `the endpoint failed; will retry${retryAfterMs !== undefined ? ` after ${formatMs(retryAfterMs)}` : ''}`;
  } else if (status === 409) {
    hint = 'conflict; will retry';
  } else {
    hint = 'the endpoint rejected the request: check the Provider address and type';
  }
  return new ProviderError(`${what}: ${hint}${tail}`, {
    code: `HTTP_${status}`,
    status,
    retryable,
    retryAfterMs,
    secretValues,
  });
}

export function transportError(
  c: FailureContext,
  err: unknown,
  method: string,
  target: string,
  timeout: AbortSignal,
  callerSignal: AbortSignal | undefined,
): ProviderError {
  const secretValues = c.secretValues;
  if (callerSignal?.aborted === true) {
    return new ProviderError(`${method} ${target} was cancelled before it completed`, {
      code: 'ABORTED',
      retryable: true,
      secretValues,
    });
  }
  // The connection is opened within a shorter connect timeout (./http.ts), so running out of the
  // whole budget means the request was sent and no complete answer came: it may have arrived.
  const timedOut = (ambiguous: boolean): ProviderError =>
    new ProviderError(
      `${method} ${target} got no complete answer within ${formatMs(c.timeoutMs)} (spec.timeout): will retry; raise spec.timeout if the endpoint is slow`,
      { code: 'TIMEOUT', retryable: true, secretValues, ambiguous },
    );
  if (timeout.aborted) return timedOut(true);

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
    return timedOut(AFTER_SEND_CODES.has(code));
  }
  if (proxy && CONNECT_CODES.has(code)) return proxyError(detail, checkProxySecret, true);
  return new ProviderError(
    `${method} ${target} failed (${detail}): check that the address is right and reachable from the controller; will retry`,
    { code: 'NETWORK', retryable: true, secretValues, ambiguous: AFTER_SEND_CODES.has(code) },
  );
}
