/**
 * The one address PKO v2's operator dials for every workspace (`WORKSPACE_LOCALHOST`), routed to
 * each workspace's own agent: a small HTTP/2 cleartext (h2c) server that forwards every gRPC call
 * — request headers and messages, response headers, messages and trailers (gRPC puts its
 * `grpc-status` there) — to the agent of the workspace the call is for.
 *
 * Which workspace a call is for (read in PKO v2.9.0's source): the operator's ConnectionManager
 * (`operator/internal/controller/auto/connect.go`) gives each workspace's gRPC client per-RPC
 * credentials from a TokenRequest for the operator's ServiceAccount with the audience
 * `<workspace>.<namespace>` (`audienceForWorkspace`), sent as `authorization: Bearer <JWT>` on
 * every call; the agent (`--auth-mode kube --kube-audience <workspace>.<namespace>`) checks it
 * with a TokenReview. Nothing else in a call names the workspace (the `:authority` is the shared
 * address, the `:path` a method name). So the router decodes the JWT's payload (base64url JSON)
 * WITHOUT verifying it — the agent verifies — and looks its `aud` up among the routes the
 * workspace stand-in registers. A call without a token, with a token it cannot read, or for an
 * audience with no agent is answered with gRPC status 14 UNAVAILABLE (trailers-only), as an
 * unreachable Service would make the operator see, and counted in {@link unrouted}.
 */
import {
  connect,
  constants,
  createServer,
  type ClientHttp2Session,
  type Http2Server,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';

/** gRPC status code UNAVAILABLE. */
const GRPC_UNAVAILABLE = '14';
/** gRPC status code INTERNAL (an agent's answer ended without trailers). */
const GRPC_INTERNAL = '13';

/** HTTP/2 headers a proxy must not forward (connection-specific, RFC 9113 §8.2.2). */
const CONNECTION_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** The audiences (`aud`, a string or a list) of a bearer JWT, read without verification; [] if unreadable. */
export function tokenAudiences(authorization: string | undefined): string[] {
  const m = /^Bearer\s+([^.\s]+)\.([^.\s]+)\.[^.\s]*$/i.exec(authorization ?? '');
  if (!m) return [];
  try {
    const payload = JSON.parse(Buffer.from(m[2] ?? '', 'base64url').toString('utf8')) as { aud?: unknown };
    const aud = payload.aud;
    if (typeof aud === 'string') return [aud];
    if (Array.isArray(aud)) return aud.filter((a): a is string => typeof a === 'string');
    return [];
  } catch {
    return [];
  }
}

function forwardable(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || CONNECTION_HEADERS.has(k)) continue;
    out[k] = v;
  }
  return out;
}

export class WorkspaceRouter {
  /** `127.0.0.1:<port>`: the operator's `WORKSPACE_LOCALHOST`. */
  readonly address: string;
  /** Calls answered UNAVAILABLE, with the audiences they carried (for assertions and logs). */
  readonly unrouted: string[][] = [];
  /** Calls forwarded, per audience. */
  readonly forwarded = new Map<string, number>();
  readonly #server: Http2Server;
  readonly #routes = new Map<string, number>();
  readonly #sessions = new Map<number, ClientHttp2Session>();
  readonly #incoming = new Set<ServerHttp2Session>();
  readonly #log: (line: string) => void;

  private constructor(server: Http2Server, log: (line: string) => void) {
    this.#server = server;
    this.#log = log;
    const addr = server.address() as AddressInfo;
    this.address = `127.0.0.1:${String(addr.port)}`;
    server.on('session', (s) => {
      this.#incoming.add(s);
      s.on('close', () => this.#incoming.delete(s));
    });
    server.on('stream', (stream, headers) => {
      this.#forward(stream, headers);
    });
  }

  /** Listens on a free loopback port. */
  static async start(log: (line: string) => void): Promise<WorkspaceRouter> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new WorkspaceRouter(server, log);
  }

  /** Sends calls whose token has audience `audience` (`<workspace>.<namespace>`) to 127.0.0.1:`port`. */
  set(audience: string, port: number): void {
    this.#routes.set(audience, port);
  }

  /** Stops routing `audience` if it still goes to `port` (calls already forwarded go on). */
  delete(audience: string, port: number): void {
    if (this.#routes.get(audience) === port) this.#routes.delete(audience);
    const s = this.#sessions.get(port);
    if (s && ![...this.#routes.values()].includes(port)) {
      this.#sessions.delete(port);
      s.close();
    }
  }

  #session(port: number): ClientHttp2Session {
    const cur = this.#sessions.get(port);
    if (cur && !cur.closed && !cur.destroyed) return cur;
    const s = connect(`http://127.0.0.1:${String(port)}`);
    s.on('error', (err: Error) => {
      this.#log(`workspace router: agent 127.0.0.1:${String(port)}: ${err.message}`);
    });
    s.on('close', () => {
      if (this.#sessions.get(port) === s) this.#sessions.delete(port);
    });
    this.#sessions.set(port, s);
    return s;
  }

  #unavailable(stream: ServerHttp2Stream, message: string): void {
    if (stream.destroyed || stream.closed) return;
    if (stream.headersSent) {
      stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    stream.respond(
      {
        ':status': 200,
        'content-type': 'application/grpc',
        'grpc-status': GRPC_UNAVAILABLE,
        'grpc-message': encodeURIComponent(message),
      },
      { endStream: true },
    );
  }

  #forward(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', () => undefined);
    const audiences = tokenAudiences(headers.authorization);
    const audience = audiences.find((a) => this.#routes.has(a));
    const port = audience === undefined ? undefined : this.#routes.get(audience);
    if (audience === undefined || port === undefined) {
      this.unrouted.push(audiences);
      const what = audiences.length === 0 ? 'no readable bearer token' : `audience ${audiences.join(', ')}`;
      this.#log(`workspace router: ${String(headers[':path'])}: no workspace agent for ${what}`);
      stream.resume();
      this.#unavailable(stream, `workspace router: no workspace agent for ${what}`);
      return;
    }
    this.forwarded.set(audience, (this.forwarded.get(audience) ?? 0) + 1);
    let up;
    try {
      up = this.#session(port).request(forwardable(headers), { endStream: false });
    } catch (err) {
      this.#unavailable(stream, `workspace router: agent of ${audience}: ${(err as Error).message}`);
      return;
    }
    let trailers: OutgoingHttpHeaders | undefined;
    up.on('response', (h, flags) => {
      if (stream.destroyed || stream.closed) return;
      // Trailers-only answer (a gRPC error before any message): one HEADERS frame that ends the stream.
      if ((flags & constants.NGHTTP2_FLAG_END_STREAM) !== 0) {
        stream.respond(forwardable(h), { endStream: true });
        return;
      }
      stream.respond(forwardable(h), { waitForTrailers: true });
      up.pipe(stream);
    });
    up.on('trailers', (t: IncomingHttpHeaders) => {
      trailers = forwardable(t);
    });
    stream.on('wantTrailers', () => {
      stream.sendTrailers(
        trailers ?? { 'grpc-status': GRPC_INTERNAL, 'grpc-message': 'no trailers from agent' },
      );
    });
    up.on('error', (err: Error) => {
      this.#unavailable(stream, `workspace router: agent of ${audience}: ${err.message}`);
    });
    up.on('close', () => {
      // The agent reset the stream: pass the reset on (a normal end has rstCode NO_ERROR).
      if (up.rstCode !== constants.NGHTTP2_NO_ERROR && !stream.closed) {
        if (stream.headersSent) stream.close(up.rstCode);
        else
          this.#unavailable(
            stream,
            `workspace router: agent of ${audience} reset the call (${String(up.rstCode)})`,
          );
      }
    });
    stream.on('close', () => {
      // The operator cancelled (e.g. its context ended): cancel the call at the agent too.
      if (!up.closed)
        up.close(stream.rstCode === constants.NGHTTP2_NO_ERROR ? constants.NGHTTP2_CANCEL : stream.rstCode);
    });
    stream.pipe(up);
  }

  async close(): Promise<void> {
    for (const s of this.#sessions.values()) s.destroy();
    this.#sessions.clear();
    const closed = new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
    // Open operator connections would keep close() waiting.
    for (const s of this.#incoming) s.destroy();
    await closed;
  }
}
