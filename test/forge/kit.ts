/**
 * Building blocks of the forge contract servers (test/forge/<name>/server.ts): a real HTTP(S) server
 * on 127.0.0.1 with a route table, a request log, a connection count (to prove that every
 * connection came through a proxy, F09) and JSON helpers.
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';

export interface ForgeRequest {
  method: string;
  /** Raw path as sent (percent-encoding preserved), without the query. */
  path: string;
  /** Path and query as sent. */
  url: string;
  query: URLSearchParams;
  /** Lower-case header names. */
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Parsed JSON body, or undefined. */
  json: unknown;
  /** Answer status (filled after routing). */
  status?: number;
  /** When the request's body had arrived, epoch ms (`performance.timeOrigin + performance.now()`). */
  at: number;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** Serialised as JSON with `Content-Type: application/json`. */
  json?: unknown;
  text?: string;
}

export type Handler = (req: ForgeRequest, match: RegExpExecArray) => Reply | Promise<Reply>;
export type Route = [method: string, pattern: RegExp, handler: Handler];

export interface KitServer {
  /** `http(s)://127.0.0.1:<port>` */
  url: string;
  requests: ForgeRequest[];
  /** TCP connections accepted so far. */
  connections: () => number;
  /**
   * The next `count` requests (after authentication) — only those `match` accepts, when given —
   * get `reply` instead of being routed.
   */
  failNext(reply: Reply, count?: number, match?: (req: ForgeRequest) => boolean): void;
  close(): Promise<void>;
}

export interface KitOptions {
  tls?: { certPem: string; keyPem: string };
  /** Returns a reply to refuse the request (e.g. 401), or undefined to go on. */
  authenticate?: (req: ForgeRequest) => Reply | undefined;
}

export const json = (status: number, body: unknown, headers?: Record<string, string>): Reply => ({
  status,
  json: body,
  ...(headers !== undefined ? { headers } : {}),
});

/** Starts a server answering from `routes` (first match of method and path wins; 404 otherwise). */
export async function startKitServer(routes: Route[], opts: KitOptions = {}): Promise<KitServer> {
  const requests: ForgeRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const faults: { reply: Reply; match: ((req: ForgeRequest) => boolean) | undefined }[] = [];
  const fault = (req: ForgeRequest): Reply | undefined => {
    const i = faults.findIndex((f) => f.match === undefined || f.match(req));
    return i < 0 ? undefined : faults.splice(i, 1)[0]?.reply;
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const raw = req.url ?? '/';
        const q = raw.indexOf('?');
        const body = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = body === '' ? undefined : JSON.parse(body);
        } catch {
          parsed = undefined;
        }
        const fr: ForgeRequest = {
          method: req.method ?? 'GET',
          path: q < 0 ? raw : raw.slice(0, q),
          url: raw,
          query: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)),
          headers: req.headers,
          body,
          json: parsed,
          at: performance.timeOrigin + performance.now(),
        };
        requests.push(fr);
        let reply: Reply;
        try {
          reply = opts.authenticate?.(fr) ?? fault(fr) ?? (await route(routes, fr));
        } catch (err) {
          reply = json(500, { message: err instanceof Error ? err.message : String(err) });
        }
        fr.status = reply.status;
        const headers: Record<string, string> = { ...reply.headers };
        let out = '';
        if (reply.json !== undefined) {
          headers['Content-Type'] = 'application/json';
          out = JSON.stringify(reply.json);
        } else if (reply.text !== undefined) {
          if (!Object.keys(headers).some((k) => k.toLowerCase() === 'content-type'))
            headers['Content-Type'] = 'text/plain; charset=utf-8';
          out = reply.text;
        }
        res.writeHead(reply.status, headers).end(out);
      })();
    });
  };

  const server = opts.tls
    ? createHttpsServer({ cert: opts.tls.certPem, key: opts.tls.keyPem }, handle)
    : createHttpServer(handle);
  const onConnection = (s: Socket): void => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  server.on(opts.tls ? 'secureConnection' : 'connection', onConnection);
  if (opts.tls) {
    // Failed handshakes never become secure connections; still close their sockets on shutdown.
    server.on('connection', (s: Socket) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    requests,
    connections: () => connections,
    failNext: (reply, count = 1, match) => {
      for (let i = 0; i < count; i++) faults.push({ reply, match });
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}

async function route(routes: Route[], req: ForgeRequest): Promise<Reply> {
  for (const [method, pattern, handler] of routes) {
    if (method !== req.method) continue;
    const m = pattern.exec(req.path);
    if (m) return handler(req, m);
  }
  return json(404, { message: `no route for ${req.method} ${req.path}` });
}

/** `Basic` credentials of a request, decoded, or undefined. */
export function basicCredentials(req: ForgeRequest): { username: string; password: string } | undefined {
  const h = req.headers.authorization;
  if (typeof h !== 'string' || !h.startsWith('Basic ')) return undefined;
  const text = Buffer.from(h.slice(6), 'base64').toString('utf8');
  const i = text.indexOf(':');
  return i < 0 ? undefined : { username: text.slice(0, i), password: text.slice(i + 1) };
}

/** Integer query parameter with a default and bounds. */
export function intParam(q: URLSearchParams, name: string, dflt: number, min: number, max: number): number {
  const v = q.get(name);
  const n = v === null ? Number.NaN : Number(v);
  if (!Number.isInteger(n)) return dflt;
  return Math.min(Math.max(n, min), max);
}

/** A 40-hex commit SHA made of one repeated digit, for readable tests. */
export const sha = (d: string): string => d.repeat(40);
