/**
 * The parts of undici the controller uses, loaded from their own files instead of the package's
 * index. `import 'undici'` also loads undici's WebSocket, CacheStorage, SQLite cache store, mock
 * agents, interceptors and cookie helpers, none of which run here: in a fresh Node 24
 * (`--max-semi-space-size=2`) 26 MiB of resident memory at start against 17 MiB for these — less
 * inside the controller, which loads much of the same anyway (docs/benchmarks.md, issue 21's
 * seventh pass: with src/node-http.ts and ./kube/prom.ts, idle RSS 91.3 → 87.4 MiB).
 *
 * Values come from undici's files (undici 8 has no `exports` map: its files are reachable);
 * types from the package's declarations, so callers see the same API. undici is pinned to one
 * version in package.json, and test/library-files.test.ts checks that every value here is the one the
 * package's index exports: an upgrade that moves a file fails that test, not the controller.
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const load = createRequire(import.meta.url);

/** undici's `lib/api`: what its index adds to every Dispatcher (`request`, `connect`, …). */
const api = load('undici/lib/api/index.js') as Record<string, unknown> & {
  request: (
    this: Undici.Dispatcher,
    opts: Undici.Dispatcher.RequestOptions,
  ) => Promise<Undici.Dispatcher.ResponseData>;
};
const Dispatcher = load('undici/lib/dispatcher/dispatcher.js') as { prototype: object };
// As undici's index does on load: a Dispatcher has `request`, `connect`, … of its own (ProxyAgent
// opens its tunnel with its Client's `connect`). The same functions if the index is loaded too.
Object.assign(Dispatcher.prototype, api);
const global = load('undici/lib/global.js') as { getGlobalDispatcher: typeof Undici.getGlobalDispatcher };

export const Agent = load('undici/lib/dispatcher/agent.js') as typeof Undici.Agent;
export type Agent = Undici.Agent;
export const ProxyAgent = load('undici/lib/dispatcher/proxy-agent.js') as typeof Undici.ProxyAgent;
export type ProxyAgent = Undici.ProxyAgent;
export const buildConnector = load('undici/lib/core/connect.js') as typeof Undici.buildConnector;
// eslint-disable-next-line @typescript-eslint/no-namespace -- undici's own shape: a function and its types
export declare namespace buildConnector {
  type BuildOptions = Undici.buildConnector.BuildOptions;
  type connector = Undici.buildConnector.connector;
}
export const fetch = (load('undici/lib/web/fetch/index.js') as { fetch: typeof Undici.fetch }).fetch;
export const Response = (load('undici/lib/web/fetch/response.js') as { Response: typeof Undici.Response })
  .Response;
export type Response = Undici.Response;

/** The options of {@link request}: undici's, with the Dispatcher to send through. */
export type RequestOptions = Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & {
  method?: Undici.Dispatcher.HttpMethod;
  dispatcher?: Undici.Dispatcher;
};

/**
 * undici's `request(url, options)` for an absolute URL: the Dispatcher's `request` with the
 * URL's origin and path (query included), GET unless a body makes it PUT, as undici's own.
 * Errors: undici's (`UND_ERR_*`), and a TypeError for a URL that is not absolute.
 */
export async function request(
  url: string | URL,
  opts: RequestOptions = {},
): Promise<Undici.Dispatcher.ResponseData> {
  const u = typeof url === 'string' ? new URL(url) : url;
  const { dispatcher = global.getGlobalDispatcher(), method, ...rest } = opts;
  return await api.request.call(dispatcher, {
    ...rest,
    origin: u.origin,
    path: u.search ? `${u.pathname}${u.search}` : u.pathname,
    method: method ?? (opts.body ? 'PUT' : 'GET'),
  });
}
