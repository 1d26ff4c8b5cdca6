/**
 * The one HTTP client every notifier uses. Per Provider it holds ONE undici dispatcher that
 * carries the Provider's TLS trust (`certSecretRef`: `ca.crt`, optional client `tls.crt` /
 * `tls.key`, case F08) and proxy (`proxySecretRef`, case F09), so every call a notifier makes —
 * API calls, token exchanges, webhooks — is verified against the same CA and goes through the
 * same proxy. A `ca.crt` is the whole trust store for the Provider's endpoints (the public roots
 * are not added, as with `curl --cacert`). Requests use npm undici's own `fetch` (never the global one: mixing the global
 * fetch with npm undici dispatchers is unsupported).
 *
 * Every failure is a `ProviderError` (./errors.ts) whose message is redacted and says what to do.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import {
  Agent,
  ProxyAgent,
  fetch as undiciFetch,
  type Dispatcher,
  type Headers,
  type Response,
} from 'undici';
import type { ResolvedProvider } from '../credential/provider.ts';
import { ProviderError } from './errors.ts';
import { httpError, transportError, type FailureContext } from './http-errors.ts';

/** `pko-notification-controller/<version from package.json>` (`unknown` if unreadable). */
export const USER_AGENT = `pko-notification-controller/${packageVersion()}`;

/** Default bound of a successful response body, in bytes (a page of 100 forge comments fits easily). */
export const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;
/** How much of an error response body is read (only an excerpt is ever shown). */
const ERROR_BODY_BYTES = 64 * 1024;

/**
 * Time allowed to open a connection (TCP, TLS, proxy tunnel), ms: four fifths of `spec.timeout`
 * (at least 1 s, at most all of it). A connection that cannot be opened then fails as a connect
 * timeout — nothing was sent — before the whole budget runs out, so that running out of the
 * whole budget means the request went out and its outcome is unknown (`ambiguous`).
 */
export function connectTimeoutMs(timeoutMs: number): number {
  return Math.min(timeoutMs, Math.max(1000, Math.floor(timeoutMs * 0.8)));
}

function packageVersion(): string {
  try {
    // src/notifier/http.ts and dist/notifier/http.js both sit two levels below package.json.
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

export interface HttpRequestInit {
  method: string;
  /** Applied after the Provider's own headers (Secret key `headers`), so these win on a clash. */
  headers?: Record<string, string>;
  body?: string;
  /** Caller's cancellation (e.g. shutdown); combined with the per-request timeout. */
  signal?: AbortSignal;
  /**
   * Non-2xx statuses returned to the caller instead of thrown, e.g. `[304]` for conditional
   * requests or `[400]` when the caller must read the body (GitLab state transitions, F15).
   */
  acceptStatus?: readonly number[];
}

export interface HttpResponse {
  status: number;
  headers: Headers;
  /** Body decoded as UTF-8. */
  text: string;
}

export interface ProviderHttpOptions {
  /** undici's `fetch` or a compatible function (tests inject a recording wrapper). Default: undici's. */
  fetch?: typeof undiciFetch;
  /** Clock for HTTP-date `Retry-After` values, epoch milliseconds. Default `Date.now`. */
  now?: () => number;
  /** Bound of a successful response body in bytes; larger answers fail with code `RESPONSE_TOO_LARGE`. */
  maxResponseBytes?: number;
}

/**
 * HTTP client bound to one `ResolvedProvider`. Create one per Provider generation and `close()`
 * it when the Provider changes or the controller stops; it pools connections across requests.
 */
export class ProviderHttp {
  readonly #p: ResolvedProvider;
  readonly #dispatcher: Dispatcher;
  readonly #fetch: typeof undiciFetch;
  readonly #now: () => number;
  readonly #maxResponseBytes: number;
  readonly #secretValues: readonly string[];
  #closing: Promise<void> | undefined;

  constructor(p: ResolvedProvider, opts: ProviderHttpOptions = {}) {
    this.#p = p;
    this.#fetch = opts.fetch ?? undiciFetch;
    this.#now = opts.now ?? Date.now;
    this.#maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.#secretValues = secretValuesOf(p);
    const tls = p.tls
      ? {
          ca: p.tls.ca,
          ...(p.tls.cert !== undefined && p.tls.key !== undefined
            ? { cert: p.tls.cert, key: p.tls.key }
            : {}),
        }
      : {};
    if (p.proxy) {
      const { username, password } = p.proxy;
      this.#dispatcher = new ProxyAgent({
        uri: p.proxy.address,
        ...(username !== undefined && password !== undefined
          ? { token: `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}` }
          : {}),
        // The Provider's CA applies to the origin, inside the CONNECT tunnel...
        requestTls: tls,
        // ...and, on top of the public roots, to an https:// proxy itself.
        ...(p.tls ? { proxyTls: { ca: [...rootCertificates, p.tls.ca] } } : {}),
        connectTimeout: connectTimeoutMs(p.timeoutMs),
      });
    } else {
      this.#dispatcher = new Agent({ connect: { ...tls, timeout: connectTimeoutMs(p.timeoutMs) } });
    }
  }

  /**
   * Sends one request and reads the whole answer.
   * Headers, in increasing precedence: `User-Agent`, the Provider's Secret `headers`, `init.headers`.
   * The Provider timeout (`timeoutMs`) covers connecting, sending and reading the body.
   * Redirects are not followed (a 3xx fails with code `REDIRECT`): credentials never travel
   * to a host the Provider does not name.
   * @returns status, headers and UTF-8 body of a 2xx answer (or of a status in `init.acceptStatus`).
   * @throws ProviderError — `HTTP_<status>` (retryable per `isRetryableStatus`, or a 403 that
   *   carries rate-limit headers), `REDIRECT`, `TLS`, `PROXY`, `TIMEOUT`, `NETWORK`, `ABORTED`,
   *   `RESPONSE_TOO_LARGE`, `INVALID_URL`, `CLOSED`.
   */
  async request(url: string, init: HttpRequestInit): Promise<HttpResponse> {
    const method = init.method.toUpperCase();
    const target = this.#describe(url);
    const secretValues = this.#secretValues;
    if (this.#closing) {
      throw new ProviderError(`${method} ${target} not sent: the Provider's HTTP client is closed`, {
        code: 'CLOSED',
        retryable: true,
        secretValues,
      });
    }
    try {
      new URL(url);
    } catch {
      throw new ProviderError(`${method} ${target} not sent: not a valid URL; check the Provider address`, {
        code: 'INVALID_URL',
        retryable: false,
        secretValues,
      });
    }

    const headers: Record<string, string> = {};
    const put = (src: Record<string, string>): void => {
      for (const [k, v] of Object.entries(src)) {
        for (const existing of Object.keys(headers)) {
          if (existing.toLowerCase() === k.toLowerCase()) Reflect.deleteProperty(headers, existing);
        }
        headers[k] = v;
      }
    };
    put({ 'User-Agent': USER_AGENT });
    put(this.#p.headers);
    if (init.headers) put(init.headers);

    const timeout = AbortSignal.timeout(this.#p.timeoutMs);
    const signal = init.signal ? AbortSignal.any([timeout, init.signal]) : timeout;

    try {
      const res = await this.#fetch(url, {
        method,
        headers,
        ...(init.body !== undefined ? { body: init.body } : {}),
        signal,
        redirect: 'manual',
        dispatcher: this.#dispatcher,
      });
      const ok =
        (res.status >= 200 && res.status <= 299) || (init.acceptStatus?.includes(res.status) ?? false);
      if (ok) {
        const body = await readBounded(res.body, this.#maxResponseBytes);
        if (body.truncated) {
          throw new ProviderError(
            `${method} ${target} answered ${res.status} with a body over ${this.#maxResponseBytes} bytes: refusing to read it`,
            { code: 'RESPONSE_TOO_LARGE', status: res.status, retryable: false, secretValues },
          );
        }
        return { status: res.status, headers: res.headers, text: body.text };
      }
      const { text } = await readBounded(res.body, ERROR_BODY_BYTES);
      throw httpError(this.#failure(), method, target, res.status, res.headers, text);
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw transportError(this.#failure(), err, method, target, timeout, init.signal);
    }
  }

  /**
   * The Provider's undici dispatcher (TLS trust + proxy), for client libraries that take one
   * (e.g. gitbeaker's `agent`). Owned by this object: never close it directly.
   */
  get dispatcher(): Dispatcher {
    return this.#dispatcher;
  }

  /**
   * A `fetch` for client libraries that take one (Octokit's `request.fetch`): every call goes
   * through this Provider's dispatcher (CA + proxy, F08/F09), carries the Provider's Secret
   * `headers` under the caller's own, follows no redirects, and is bounded by `timeoutMs`
   * (combined with the caller's `signal`). Any HTTP answer is returned as it is, for the library
   * to read; transport failures throw the same `ProviderError`s as `request` (`TLS`, `PROXY`,
   * `TIMEOUT`, `NETWORK`, `ABORTED`, `CLOSED`).
   */
  readonly fetch = async (
    input: string | URL,
    init: {
      method?: string;
      headers?: Record<string, string>;
      body?: string | null;
      signal?: AbortSignal | null;
      redirect?: string;
    } = {},
  ): Promise<Response> => {
    const url = String(input);
    const method = (init.method ?? 'GET').toUpperCase();
    const target = this.#describe(url);
    if (this.#closing) {
      throw new ProviderError(`${method} ${target} not sent: the Provider's HTTP client is closed`, {
        code: 'CLOSED',
        retryable: true,
        secretValues: this.#secretValues,
      });
    }
    const headers: Record<string, string> = { 'User-Agent': USER_AGENT, ...this.#p.headers };
    for (const [k, v] of Object.entries(init.headers ?? {})) {
      for (const existing of Object.keys(headers)) {
        if (existing.toLowerCase() === k.toLowerCase()) Reflect.deleteProperty(headers, existing);
      }
      headers[k] = v;
    }
    const timeout = AbortSignal.timeout(this.#p.timeoutMs);
    const callerSignal = init.signal ?? undefined;
    const signal = callerSignal ? AbortSignal.any([timeout, callerSignal]) : timeout;
    try {
      return await this.#fetch(url, {
        method,
        headers,
        ...(init.body !== undefined && init.body !== null ? { body: init.body } : {}),
        signal,
        redirect: 'manual',
        dispatcher: this.#dispatcher,
      });
    } catch (err) {
      throw transportError(this.#failure(), err, method, target, timeout, callerSignal);
    }
  };

  /**
   * What must never appear in messages about this Provider: `p.secretValues`, plus — when the
   * address came from a Secret — its path and query on their own (an endpoint may echo the
   * path of a webhook URL without its origin). Notifiers building their own `ProviderError`s
   * pass this list.
   */
  get secretValues(): readonly string[] {
    return this.#secretValues;
  }

  /** Closes the dispatcher and its pooled connections. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#dispatcher.close();
    return this.#closing;
  }

  #failure(): FailureContext {
    return {
      secretValues: this.#secretValues,
      now: this.#now,
      timeoutMs: this.#p.timeoutMs,
      proxy: this.#p.proxy !== undefined,
    };
  }

  /** How the target is named in messages: a Secret-held address is never shown (F23). */
  #describe(url: string): string {
    if (this.#p.addressFromSecret && url.startsWith(this.#p.address)) {
      return "the Provider address (key 'address' of its Secret)";
    }
    return url;
  }
}

function secretValuesOf(p: ResolvedProvider): readonly string[] {
  const values = [...p.secretValues];
  if (p.addressFromSecret) {
    try {
      const u = new URL(p.address);
      if (u.pathname.length > 1) values.push(u.pathname);
      if (u.search.length > 1) values.push(u.search.slice(1));
      for (const v of u.searchParams.values()) values.push(v);
    } catch {
      // Not a URL (an ssh forge address): the whole value is already in p.secretValues.
    }
  }
  return values;
}

/** Reads at most `max` bytes of a body as UTF-8; the rest is cancelled (which frees the connection). */
async function readBounded(
  body: ReadableStream<Uint8Array> | null,
  max: number,
): Promise<{ text: string; truncated: boolean }> {
  if (body === null) return { text: '', truncated: false };
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let seen = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (seen + value.byteLength > max) {
      text += decoder.decode(value.subarray(0, max - seen), { stream: true });
      await reader.cancel();
      return { text: text + decoder.decode(), truncated: true };
    }
    seen += value.byteLength;
    text += decoder.decode(value, { stream: true });
  }
  return { text: text + decoder.decode(), truncated: false };
}
