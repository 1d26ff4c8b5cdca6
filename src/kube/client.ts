/**
 * Kubernetes client plumbing: loading the kubeconfig, building REST paths, and one small JSON
 * request function (plus a streaming GET) that every piece of `src/` uses to talk to the API
 * server.
 *
 * Why not a generated client: the informer must LIST any resource by (group, version, plural) —
 * core and custom alike — with paging and an abort signal, and the leader elector needs a
 * per-request deadline shorter than its renew deadline; and `@kubernetes/client-node` costs
 * +80 MiB RSS per process (issue 21, see src/kube/kubeconfig.ts). `kubeRequest` authenticates
 * through `KubeConfig.applySecurityAuthentication` (TLS, tokens, exec plugins, proxy) and returns
 * short, secret-free errors carrying the HTTP code and the Status reason.
 */
import { existsSync } from 'node:fs';
import type { Dispatcher } from 'undici';
import { fetch, request } from '../undici.ts';
import { readBounded } from '../text.ts';
import {
  SERVICE_ACCOUNT_DIR,
  isLoadedKubeConfig,
  loadDefaultKubeConfig,
  loadInCluster,
  loadKubeConfigFile,
  type KubeConfig,
} from './kubeconfig.ts';

export type { KubeConfig } from './kubeconfig.ts';

/**
 * One connection pool per KubeConfig made elsewhere (tests pass client-node's, whose
 * `applySecurityAuthentication` builds a fresh undici Agent on every call — a new TLS handshake
 * per request). Only the TLS/proxy settings of the first call are kept; headers are applied per
 * request. Ours (src/kube/kubeconfig.ts) keep their own pool and renew it when a certificate
 * changes, so they are not cached here.
 */
const dispatchers = new WeakMap<KubeConfig, Dispatcher | undefined>();

/** Where the in-cluster loader reads the service-account token (fixed by Kubernetes). */
const SERVICE_ACCOUNT_TOKEN = `${SERVICE_ACCOUNT_DIR}/token`;

export interface LoadKubeConfigOptions {
  /** Explicit kubeconfig file (a `--kubeconfig` flag). Wins over everything else. */
  kubeconfig?: string | undefined;
  /**
   * Prefix for the service-account files (tests only). Default '' — the real
   * `/var/run/secrets/kubernetes.io/serviceaccount/`.
   */
  inClusterPathPrefix?: string;
  /** Environment for `KUBERNETES_SERVICE_HOST`/`_PORT` and `KUBECONFIG` (tests). Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Home directory holding `.kube/config` (tests). Default `os.homedir()`. */
  home?: string;
  /** Clock for credential-file refreshes and plugin credential expiry, ms (tests). */
  now?: () => number;
}

/**
 * Loads the client configuration (src/kube/kubeconfig.ts), trying in order:
 * 1. `opts.kubeconfig` (must exist and name a current cluster, else throws);
 * 2. in-cluster: the service-account token file exists → server from
 *    `KUBERNETES_SERVICE_HOST`/`_PORT`, the token re-read as it rotates;
 * 3. `KUBECONFIG` (files merged as kubectl does) or `~/.kube/config`.
 *
 * @throws Error naming every source tried, when none yields a current cluster.
 */
export function loadKubeConfig(opts: LoadKubeConfigOptions): KubeConfig {
  const loader = {
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.env ? { env: opts.env } : {}),
  };
  if (opts.kubeconfig !== undefined && opts.kubeconfig !== '') {
    const file = opts.kubeconfig;
    if (!existsSync(file)) throw new Error(`kubeconfig file ${file} does not exist`);
    let kc: KubeConfig | null;
    try {
      kc = loadKubeConfigFile(file, loader);
    } catch (err) {
      throw new Error(`cannot load kubeconfig file ${file}: ${errorMessage(err)}`, { cause: err });
    }
    if (kc === null) throw new Error(`kubeconfig file ${file} has no current context with a cluster`);
    return kc;
  }

  const tried: string[] = [];
  const prefix = opts.inClusterPathPrefix ?? '';
  const tokenFile = `${prefix}${SERVICE_ACCOUNT_TOKEN}`;
  if (existsSync(tokenFile)) {
    const kc = loadInCluster({ ...loader, prefix });
    if (kc !== null) return kc;
    tried.push(
      `in-cluster (${tokenFile} exists but KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are unset)`,
    );
  } else {
    tried.push(`in-cluster (no service-account token at ${tokenFile})`);
  }

  let kc: KubeConfig | null;
  try {
    kc = loadDefaultKubeConfig({ ...loader, ...(opts.home !== undefined ? { home: opts.home } : {}) });
  } catch (err) {
    throw new Error(
      `no Kubernetes configuration found: tried ${tried.join('; ')}; KUBECONFIG or ~/.kube/config failed to load: ${errorMessage(err)}`,
      { cause: err },
    );
  }
  if (kc === null) {
    tried.push('KUBECONFIG and ~/.kube/config (none found or no current context)');
    throw new Error(`no Kubernetes configuration found: tried --kubeconfig (not given); ${tried.join('; ')}`);
  }
  return kc;
}

/** Identifies a resource collection or one object of it. `group` '' is the core group. */
export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  namespace?: string | undefined;
  name?: string;
}

/**
 * REST path of a collection or object:
 * `/api/v1[/namespaces/{ns}]/{plural}[/{name}]` for the core group, else
 * `/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}]`. Segments are URI-encoded.
 */
export function objectPath(r: ResourceRef): string {
  const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns =
    r.namespace !== undefined && r.namespace !== '' ? `/namespaces/${encodeURIComponent(r.namespace)}` : '';
  const name = r.name !== undefined && r.name !== '' ? `/${encodeURIComponent(r.name)}` : '';
  return `${base}${ns}/${encodeURIComponent(r.plural)}${name}`;
}

/**
 * A failed API call. `statusCode` is the HTTP status, or 0 when no response arrived (network
 * error, timeout, abort). `reason` is the `Status.reason` the API server sent (`NotFound`,
 * `Conflict`, `Expired`, …) when there was one. The message names method, path, code and the
 * server's Status message; it never contains request headers or bodies.
 */
export class KubeApiError extends Error {
  readonly statusCode: number;
  readonly reason: string | undefined;
  constructor(message: string, statusCode: number, reason?: string) {
    super(message);
    this.name = 'KubeApiError';
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

export interface KubeRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path from `objectPath` (plus `/status` etc.). */
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** Serialised as JSON. */
  body?: unknown;
  /** Default `application/json`; use `application/merge-patch+json` for merge patches. */
  contentType?: string;
  signal?: AbortSignal | undefined;
  /** Whole-request deadline in ms (headers and body). Default 30 000. */
  timeoutMs?: number;
  /**
   * `Accept` header. Default `application/json`; e.g.
   * `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` for an object's metadata only.
   */
  accept?: string;
  /** Told the UTF-8 length of a 2xx answer's body, bytes (e.g. to count what a write stored). */
  onAnswerBytes?: (bytes: number) => void;
}

/** URL and authenticated headers of a request to the current cluster of `kc`. */
async function prepare(
  kc: KubeConfig,
  req: Pick<KubeRequest, 'method' | 'path' | 'query' | 'body' | 'contentType' | 'accept'>,
  what: string,
): Promise<{ url: URL; headers: Record<string, string>; dispatcher: Dispatcher | undefined }> {
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new KubeApiError(`${what}: no current cluster in kubeconfig`, 0);
  const url = new URL(cluster.server.replace(/\/+$/, '') + req.path);
  for (const [k, v] of Object.entries(req.query ?? {})) {
    if (v !== undefined) url.searchParams.set(k, String(v));
  }
  const headers: Record<string, string> = {};
  let dispatcher: Dispatcher | undefined;
  try {
    await kc.applySecurityAuthentication({
      setHeaderParam(key, value) {
        headers[key] = value;
      },
      setDispatcher(d) {
        dispatcher = d;
      },
    });
  } catch (err) {
    // A credential file that cannot be read, a failing credential plugin: no request was sent.
    throw new KubeApiError(`${what}: credentials: ${errorMessage(err)}`, 0);
  }
  headers.Accept = req.accept ?? 'application/json';
  if (req.body !== undefined) headers['Content-Type'] = req.contentType ?? 'application/json';
  if (isLoadedKubeConfig(kc)) return { url, headers, dispatcher };
  if (!dispatchers.has(kc)) dispatchers.set(kc, dispatcher);
  return { url, headers, dispatcher: dispatchers.get(kc) };
}

/** The `KubeApiError` for a non-2xx answer whose body is `text` (a `Status`, or anything). */
function statusError(what: string, status: number, text: string): KubeApiError {
  let reason: string | undefined;
  let message = '';
  try {
    const st = JSON.parse(text) as { reason?: unknown; message?: unknown };
    if (typeof st.reason === 'string') reason = st.reason;
    if (typeof st.message === 'string') message = st.message;
  } catch {
    message = text.slice(0, 200);
  }
  return new KubeApiError(
    `${what}: HTTP ${status}${reason !== undefined ? ` ${reason}` : ''}${message !== '' ? `: ${message}` : ''}`,
    status,
    reason,
  );
}

/**
 * Sends one request to the current cluster of `kc` and returns the parsed JSON body
 * (undefined for an empty body).
 * @throws KubeApiError for non-2xx answers, network errors, timeouts and aborts.
 */
export async function kubeRequest<T>(kc: KubeConfig, req: KubeRequest): Promise<T> {
  const what = `${req.method} ${req.path}`;
  const { url, headers, dispatcher } = await prepare(kc, req, what);

  // A timer cleared when the request ends, not AbortSignal.timeout: that one fires after every
  // finished request too and builds a DOMException each time (~1 % of a busy controller's CPU).
  const timeoutMs = req.timeoutMs ?? 30_000;
  const deadline = new AbortController();
  const timer = setTimeout(() => {
    deadline.abort();
  }, timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, deadline.signal]) : deadline.signal;
  let status: number;
  let text: string;
  try {
    // undici's `request`, not `fetch`: no WHATWG Request/Response/stream objects per call (the
    // ledger writes once per delivered event; fetch's objects were a visible share of the GC).
    const res = await request(url, {
      method: req.method,
      headers,
      body: req.body === undefined ? null : JSON.stringify(req.body),
      signal,
      ...(dispatcher ? { dispatcher } : {}),
    });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    if (deadline.signal.aborted) throw new KubeApiError(`${what}: timed out after ${timeoutMs} ms`, 0);
    if (req.signal?.aborted === true) throw new KubeApiError(`${what}: aborted`, 0, 'Aborted');
    throw new KubeApiError(`${what}: ${errorMessage(err)}`, 0);
  } finally {
    clearTimeout(timer);
  }
  if (status >= 200 && status < 300) {
    req.onAnswerBytes?.(Buffer.byteLength(text, 'utf8'));
    if (text === '') return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new KubeApiError(`${what}: HTTP ${status} with a body that is not JSON`, status);
    }
  }
  throw statusError(what, status, text);
}

/** A streaming GET: {@link kubeStream}. */
export interface KubeStreamRequest {
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  /** `Accept` header. Default: any media type (pods/log answers `text/plain`). */
  accept?: string;
  /** Ends the request (headers or body) at any time; the body stream then errors. */
  signal?: AbortSignal | undefined;
  /** Deadline for the response headers in ms. Default 30 000. The body has none: use `signal`. */
  headersTimeoutMs?: number;
}

/**
 * Sends a GET to the current cluster of `kc` and resolves with the response body as a stream of
 * bytes once a 2xx answer's headers arrived — for bodies that must not be held whole (`pods/log`,
 * possibly followed). The caller reads the body (or cancels it) and bounds it in time with
 * `signal`; aborting `signal` ends the request and the connection.
 * @throws KubeApiError for non-2xx answers (the error body read up to 64 KiB), network errors, the
 *   headers deadline and aborts — the same codes and messages as {@link kubeRequest}.
 */
export async function kubeStream(
  kc: KubeConfig,
  req: KubeStreamRequest,
): Promise<ReadableStream<Uint8Array>> {
  const what = `GET ${req.path}`;
  const { url, headers, dispatcher } = await prepare(
    kc,
    { method: 'GET', path: req.path, query: req.query ?? {}, accept: req.accept ?? '*/*' },
    what,
  );
  const timeoutMs = req.headersTimeoutMs ?? 30_000;
  const headersDeadline = new AbortController();
  const timer = setTimeout(() => {
    headersDeadline.abort();
  }, timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, headersDeadline.signal]) : headersDeadline.signal;
  let res: Awaited<ReturnType<typeof fetch>>;
  try {
    res = await fetch(url, {
      method: 'GET',
      headers,
      signal,
      ...(dispatcher ? { dispatcher } : {}),
    });
  } catch (err) {
    if (headersDeadline.signal.aborted) throw new KubeApiError(`${what}: timed out after ${timeoutMs} ms`, 0);
    if (req.signal?.aborted === true) throw new KubeApiError(`${what}: aborted`, 0, 'Aborted');
    throw new KubeApiError(`${what}: ${errorMessage(err)}`, 0);
  } finally {
    clearTimeout(timer);
  }
  const body = res.body;
  if (res.status >= 200 && res.status < 300 && body !== null) return body as ReadableStream<Uint8Array>;
  const text = await readBounded(body, 64 * 1024).then(
    (r) => r.text,
    () => '',
  );
  throw statusError(what, res.status, text);
}

/** HTTP status of a failed call (`KubeApiError`; `code` of other clients' errors), else 0. */
export function errorStatusCode(err: unknown): number {
  if (typeof err !== 'object' || err === null) return 0;
  const e = err as { statusCode?: unknown; code?: unknown };
  if (typeof e.statusCode === 'number') return e.statusCode;
  if (typeof e.code === 'number') return e.code;
  return 0;
}

/**
 * One-line description of any thrown value for logs and conditions: the message plus the
 * message of its `cause` (undici hides `ECONNREFUSED` there). Never includes headers.
 */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof Error && cause.message !== '' && !err.message.includes(cause.message)) {
      return `${err.message}: ${cause.message}`;
    }
    return err.message;
  }
  return String(err);
}
