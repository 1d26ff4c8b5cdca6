/**
 * The one HTTP client every notifier uses. Per Provider it holds ONE undici dispatcher that
 * carries the Provider's TLS trust (`certSecretRef`: `ca.crt`, optional client `tls.crt` /
 * `tls.key`, case F08) and proxy (`proxySecretRef`, case F09), so every call a notifier makes —
 * API calls, token exchanges, webhooks — is verified against the same CA and goes through the
 * same proxy. A `ca.crt` is the whole trust store for the Provider's endpoints (the public roots
 * are not added, as with `curl --cacert`). `request()` sends with npm undici's `request` (no
 * WHATWG Request/Response/stream objects per call: every delivered event makes at least one);
 * the `fetch` handed to client libraries is npm undici's own `fetch` (never the global one: mixing
 * the global fetch with npm undici dispatchers is unsupported).
 *
 * Every failure is a `ProviderError` (./errors.ts) whose message is redacted and says what to do.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { Dispatcher } from 'undici';
import { Agent, ProxyAgent, Response, fetch as undiciFetch, request as undiciRequest } from '../undici.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { discardBody, readAllBounded, readBounded, RESPONSE_CAPS } from './body.ts';
import type { HeaderReader } from './classify.ts';
import { egressDenial, egressMessage, type EgressDeniedError, type EgressPolicy } from './egress.ts';
import { ProviderError } from './errors.ts';
import { httpError, transportError, type FailureContext } from './http-errors.ts';
import { RedirectFollower, type RedirectInit } from './redirect.ts';
import { trackingDispatcher, type SendState } from './sent.ts';

/** `pko-notification-controller/<version from package.json>` (`unknown` if unreadable). */
export const USER_AGENT = `pko-notification-controller/${packageVersion()}`;

/** Default bound of a successful response body that is read, in bytes (./body.ts `RESPONSE_CAPS.apiPage`). */
export const DEFAULT_MAX_RESPONSE_BYTES = RESPONSE_CAPS.apiPage;

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
  /**
   * What the caller reads of the answer's body (./body.ts): `'discard'` — not read (`text` is
   * ''; a webhook's reply) — or at most this many bytes (default: the client's
   * `maxResponseBytes`); a longer body fails with `RESPONSE_TOO_LARGE` unread.
   */
  responseBody?: 'discard' | number;
  /**
   * The endpoint is an API that never answers a web page (chat webhooks): a 2xx with
   * `Content-Type: text/html` — a login portal or web page in front of it — fails with
   * `BAD_RESPONSE` and Provider condition `NotTheAPI` instead of counting as delivered (N13).
   * Say what URL to set in `fix`.
   */
  notHtml?: { fix: string };
}

export interface HttpResponse {
  status: number;
  /** The answer's headers, read as WHATWG `Headers` reads them ({@link ResponseHeaders}). */
  headers: HttpHeaders;
  /** Body decoded as UTF-8 ('' when the caller discarded it). */
  text: string;
}

/** The headers of an {@link HttpResponse}: the part of WHATWG `Headers` callers read. */
export interface HttpHeaders extends HeaderReader {
  /** The value of header `name` (any case); a repeated header's values joined with `, `; `null` when absent. */
  get(name: string): string | null;
  /** Every header as `[lower-case name, value]`, sorted by name, repeated ones joined with `, `. */
  entries(): IterableIterator<[string, string]>;
}

/** What `ProviderHttp.request` sends one hop with: the shape of undici's `request` it uses. */
export type RequestFunction = (
  url: string,
  opts: {
    method: string;
    headers: Record<string, string>;
    body?: string;
    signal: AbortSignal;
    dispatcher: Dispatcher;
  },
) => Promise<{
  statusCode: number;
  /** Lower-case names; a repeated header as an array (undici's `IncomingHttpHeaders`). */
  headers: Record<string, string | string[] | undefined>;
  /** Must be read to its end or stopped (destroyed): undici holds the connection until then. */
  body: AsyncIterable<Uint8Array>;
}>;

export interface ProviderHttpOptions {
  /**
   * undici's `fetch` or a compatible function, used by the `fetch` property only (client libraries:
   * Octokit); tests inject a recording wrapper. Default: undici's.
   */
  fetch?: typeof undiciFetch;
  /**
   * undici's `request` or a compatible function, used by `request()` for every hop; tests inject a
   * recording wrapper. Default: undici's.
   */
  request?: RequestFunction;
  /** Clock for HTTP-date `Retry-After` values, epoch milliseconds. Default `Date.now`. */
  now?: () => number;
  /** Bound of a successful response body in bytes; larger answers fail with code `RESPONSE_TOO_LARGE`. */
  maxResponseBytes?: number;
  /**
   * Where connections may go (./egress.ts); refused ones fail with code `EGRESS_DENIED`. The
   * controller always sets it; without it nothing is refused (unit tests of notifiers, tools).
   */
  egress?: EgressPolicy;
}

/**
 * HTTP client bound to one `ResolvedProvider`. Create one per Provider generation and `close()`
 * it when the Provider changes or the controller stops; it pools connections across requests.
 */
export class ProviderHttp {
  readonly #p: ResolvedProvider;
  readonly #dispatcher: Dispatcher;
  readonly #fetch: typeof undiciFetch;
  readonly #request: RequestFunction;
  readonly #now: () => number;
  readonly #maxResponseBytes: number;
  readonly #secretValues: readonly string[];
  readonly #redirects = new RedirectFollower();
  readonly #egress: EgressPolicy | undefined;
  #closing: Promise<void> | undefined;

  constructor(p: ResolvedProvider, opts: ProviderHttpOptions = {}) {
    this.#p = p;
    this.#fetch = opts.fetch ?? undiciFetch;
    this.#request = opts.request ?? undiciRequest;
    this.#now = opts.now ?? Date.now;
    this.#maxResponseBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.#secretValues = secretValuesOf(p);
    const egress = opts.egress;
    this.#egress = egress;
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
        // ...and, on top of the public roots, to an https:// proxy itself. The connection to
        // the proxy obeys the egress policy too.
        ...(p.tls || egress
          ? {
              proxyTls: {
                ...(p.tls ? { ca: [...rootCertificates, p.tls.ca] } : {}),
                ...(egress ? { lookup: egress.lookup } : {}),
              },
            }
          : {}),
        connectTimeout: p.timeoutMs,
      });
    } else {
      const connect = { ...tls, timeout: p.timeoutMs };
      this.#dispatcher = new Agent({ connect: egress ? egress.connector(connect) : connect });
    }
  }

  /**
   * Sends one request and reads the whole answer.
   * Headers, in increasing precedence: `User-Agent`, the Provider's Secret `headers`, `init.headers`.
   * The Provider timeout (`timeoutMs`) covers connecting, sending and reading the body.
   * Same-origin redirects are followed with the method and body kept, at most 5 hops, and
   * permanent moves remembered (./redirect.ts, case N07); a redirect to another origin fails
   * with code `REDIRECT`: credentials never travel to a host the Provider does not name.
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
    // What undici's fetch added by itself, kept for endpoints that look at it: `Accept: */*`, and
    // a string body's `Content-Type: text/plain;charset=UTF-8` (every caller names its own).
    put({ 'User-Agent': USER_AGENT, Accept: '*/*' });
    if (init.body !== undefined) put({ 'Content-Type': 'text/plain;charset=UTF-8' });
    put(this.#p.headers);
    if (init.headers) put(init.headers);

    await this.#checkProxied(url, method, target);
    // A timer of our own, cleared when the request ends (AbortSignal.timeout's would fire after
    // every finished request and build a DOMException: measured ~1 % of busy time).
    const timer = new RequestTimer(this.#p.timeoutMs, init.signal);
    // Aborts on the caller's signal too; transportError looks at the caller's first.
    const signal = timer.signal;
    const state: SendState = { sent: false };
    try {
      const {
        res,
        refused,
        url: at,
      } = await this.#redirects.send(
        url,
        { method, headers, body: init.body },
        (u, i) => this.#sendHop(u, i, signal, state),
        (r) => discardBody(r.body),
      );
      const ok =
        (res.status >= 200 && res.status <= 299) || (init.acceptStatus?.includes(res.status) ?? false);
      if (ok) {
        if (init.notHtml !== undefined && /^\s*text\/html\b/i.test(res.headers.get('content-type') ?? '')) {
          await discardBody(res.body);
          throw new ProviderError(
            `${method} ${target} answered ${res.status} with an HTML page, not the API: ${init.notHtml.fix}`,
            {
              code: 'BAD_RESPONSE',
              status: res.status,
              retryable: false,
              secretValues,
              verdict: { kind: 'badResponse', retry: false, condition: 'NotTheAPI' },
            },
          );
        }
        if (init.responseBody === 'discard') {
          await discardBody(res.body);
          return { status: res.status, headers: res.headers, text: '' };
        }
        const max = init.responseBody ?? this.#maxResponseBytes;
        const body = await readBounded(res.body, max);
        if (body.truncated) throw this.#tooLarge(method, target, res.status, max);
        return { status: res.status, headers: res.headers, text: body.text };
      }
      const { text } = await readBounded(res.body, RESPONSE_CAPS.error);
      throw httpError(this.#failure(), method, target, res.status, res.headers, text, {
        redirect: refused,
        url: at,
      });
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      const denied = egressDenial(err);
      if (denied) throw this.#egressError(method, target, denied);
      throw transportError(this.#failure(), err, method, target, signal, init.signal, state.sent);
    } finally {
      timer.clear();
    }
  }

  /**
   * One hop of `request()`: undici's `request` through the Provider's dispatcher, recording
   * whether it was sent. No redirect is followed here (./redirect.ts does).
   */
  async #sendHop(url: string, init: RedirectInit, signal: AbortSignal, state: SendState): Promise<Answer> {
    state.sent = false;
    const res = await this.#request(url, {
      method: init.method,
      headers: init.headers,
      ...(init.body !== undefined ? { body: init.body } : {}),
      signal,
      dispatcher: trackingDispatcher(this.#dispatcher, state),
    });
    return { status: res.statusCode, headers: new ResponseHeaders(res.headers), body: res.body };
  }

  /** One hop of `fetch`: undici's fetch through the Provider's dispatcher, recording whether it was sent. */
  #fetchHop(url: string, init: RedirectInit, signal: AbortSignal, state: SendState): Promise<Response> {
    state.sent = false;
    return this.#fetch(url, {
      method: init.method,
      headers: init.headers,
      ...(init.body !== undefined ? { body: init.body } : {}),
      signal,
      redirect: 'manual',
      dispatcher: trackingDispatcher(this.#dispatcher, state),
    });
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
   * `headers` under the caller's own, follows same-origin redirects only (./redirect.ts; another
   * origin's 3xx is returned as it is), and is bounded by `timeoutMs` (combined with the caller's
   * `signal`). Any HTTP answer is returned for the library to read, its body read here first, up
   * to `maxResponseBytes`: a longer body fails the call with `RESPONSE_TOO_LARGE` (never handed
   * over, so no library can take it for an empty answer: case N17); transport failures throw
   * the same `ProviderError`s as `request` (`TLS`, `PROXY`, `TIMEOUT`, `NETWORK`, `ABORTED`,
   * `CLOSED`, `EGRESS_DENIED`).
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
    await this.#checkProxied(url, method, target);
    const callerSignal = init.signal ?? undefined;
    // Aborts on the caller's signal too; transportError looks at the caller's first.
    const timer = new RequestTimer(this.#p.timeoutMs, callerSignal);
    const signal = timer.signal;
    try {
      const state: SendState = { sent: false };
      let res: Response;
      try {
        const body = init.body ?? undefined;
        res = (
          await this.#redirects.send(
            url,
            { method, headers, body },
            (u, i) => this.#fetchHop(u, i, signal, state),
            async (r) => {
              await r.body?.cancel();
            },
          )
        ).res;
      } catch (err) {
        const denied = egressDenial(err);
        if (denied) throw this.#egressError(method, target, denied);
        throw transportError(this.#failure(), err, method, target, signal, callerSignal, state.sent);
      }
      if (res.body === null) return res;
      const max = this.#maxResponseBytes;
      const status = res.status;
      // Read here, whole, before the library sees it: a body over the cap must fail the call, and
      // Octokit would take a body that fails mid-read for "" (case N17; ./body.ts readAllBounded).
      let read;
      try {
        read = await readAllBounded(res.body, max);
      } catch (err) {
        const denied = egressDenial(err);
        if (denied) throw this.#egressError(method, target, denied);
        throw transportError(this.#failure(), err, method, target, signal, callerSignal, true);
      }
      if (read.truncated) throw this.#tooLarge(method, target, status, max);
      const capped = new Response(status === 204 || status === 304 ? null : read.bytes, {
        status,
        statusText: res.statusText,
        headers: res.headers,
      });
      // A constructed Response has no URL; libraries report the one that was fetched.
      Object.defineProperty(capped, 'url', { value: res.url });
      return capped;
    } finally {
      timer.clear();
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

  /** The client's clock (epoch ms; `ProviderHttpOptions.now`), for callers reading `Retry-After` dates. */
  now(): number {
    return this.#now();
  }

  /** Closes the dispatcher and its pooled connections. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#dispatcher.close();
    return this.#closing;
  }

  /** Through a proxy, the proxy resolves the target: check it here first (./egress.ts). */
  async #checkProxied(url: string, method: string, target: string): Promise<void> {
    const egress = this.#egress;
    const proxy = this.#p.proxy;
    if (egress === undefined || proxy === undefined) return;
    const denied = egress.refuseURL(proxy.address) ?? (await egress.checkThroughProxy(url));
    if (denied) throw this.#egressError(method, target, denied);
  }

  /**
   * An answer over the read limit: an error, never an empty or partial answer (case N17), so a
   * listing that is too long fails its step instead of reading as "none".
   */
  #tooLarge(method: string, target: string, status: number, max: number): ProviderError {
    return new ProviderError(
      `${method} ${target} answered ${status} with a body over ${formatBytes(max)} (the controller's read limit for one answer): not read, and not taken for an empty answer (final for this event)`,
      { code: 'RESPONSE_TOO_LARGE', status, retryable: false, secretValues: this.#secretValues },
    );
  }

  #egressError(method: string, target: string, denied: EgressDeniedError): ProviderError {
    return new ProviderError(egressMessage(method, target, denied), {
      code: 'EGRESS_DENIED',
      retryable: false,
      secretValues: this.#secretValues,
    });
  }

  #failure(): FailureContext {
    return {
      secretValues: this.#secretValues,
      now: this.#now,
      timeoutMs: this.#p.timeoutMs,
      proxy: this.#p.proxy !== undefined,
      reflect: this.#p.type !== 'generic' && this.#p.type !== 'generic-hmac',
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

/** One answer of `request()`'s hops, before its body is read. */
interface Answer {
  status: number;
  headers: ResponseHeaders;
  body: AsyncIterable<Uint8Array>;
}

/**
 * The headers of an answer to undici's `request` (lower-case names, a repeated header as an
 * array), read as WHATWG `Headers` reads them — and so as they read under `fetch`: by
 * case-insensitive name, a repeated header's values joined with `, `, `null` when absent;
 * `entries()` sorted by name.
 */
export class ResponseHeaders implements HttpHeaders {
  readonly #h: Readonly<Record<string, string | string[] | undefined>>;

  constructor(headers: Readonly<Record<string, string | string[] | undefined>>) {
    this.#h = headers;
  }

  get(name: string): string | null {
    const key = name.toLowerCase();
    // Own names only: `constructor` or `__proto__` is no header unless the answer sent one.
    if (!Object.hasOwn(this.#h, key)) return null;
    const v = this.#h[key];
    if (v === undefined) return null;
    return typeof v === 'string' ? v : v.join(', ');
  }

  entries(): IterableIterator<[string, string]> {
    const all: [string, string][] = [];
    for (const key of Object.keys(this.#h).sort()) {
      const v = this.get(key);
      if (v !== null) all.push([key, v]);
    }
    return all[Symbol.iterator]();
  }
}

/**
 * The Provider timeout of one request: `signal` aborts (reason a `TimeoutError` DOMException, as
 * `AbortSignal.timeout`'s) after `ms` unless `clear()` was called first.
 */
class RequestTimer {
  readonly #ac = new AbortController();
  readonly #timer: NodeJS.Timeout;
  readonly #caller: AbortSignal | undefined;
  readonly #onCaller = (): void => {
    this.#ac.abort(this.#caller?.reason);
  };

  /**
   * @param ms the Provider timeout.
   * @param caller the caller's signal, if any: `signal` aborts with it too. A listener, not
   *   `AbortSignal.any`: a composite registers with its sources until collected (measured: ~3 % of
   *   the busy time of a burst, with the collector's share on top).
   */
  constructor(ms: number, caller?: AbortSignal) {
    this.#caller = caller;
    this.#timer = setTimeout(() => {
      this.#ac.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
    }, ms);
    if (caller) {
      if (caller.aborted) this.#ac.abort(caller.reason);
      else caller.addEventListener('abort', this.#onCaller, { once: true });
    }
  }

  /** Aborted when the timeout passes or the caller's signal aborts. */
  get signal(): AbortSignal {
    return this.#ac.signal;
  }

  clear(): void {
    clearTimeout(this.#timer);
    this.#caller?.removeEventListener('abort', this.#onCaller);
  }
}

/** `8 MiB`, `64 KiB`, `512 bytes`: a byte count as limits are stated. */
function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${String(n / (1024 * 1024))} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${String(n / 1024)} KiB`;
  return `${String(n)} bytes`;
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
