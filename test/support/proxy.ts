/**
 * A real forward HTTP proxy on 127.0.0.1 for tests (case F09): `CONNECT host:port` tunnels
 * (https targets) and absolute-form requests (`POST http://host/path`, http targets), with an
 * optional `Proxy-Authorization: Basic` check (407 otherwise). It records what it saw.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export interface TestProxy {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /**
   * Every request in arrival order, as `CONNECT host:port` or `<METHOD> <absolute URL>`,
   * including those refused with 407.
   */
  seen: string[];
  /** How many requests were refused for missing or wrong credentials. */
  rejected: () => number;
  close(): Promise<void>;
}

export interface ProxyOptions {
  auth?: { username: string; password: string };
}

const HOP_BY_HOP = new Set([
  'proxy-authorization',
  'proxy-connection',
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export async function startProxy(opts: ProxyOptions = {}): Promise<TestProxy> {
  const seen: string[] = [];
  let rejected = 0;
  const sockets = new Set<Socket>();
  const expected = opts.auth
    ? `Basic ${Buffer.from(`${opts.auth.username}:${opts.auth.password}`).toString('base64')}`
    : undefined;
  const authorized = (req: IncomingMessage): boolean =>
    expected === undefined || req.headers['proxy-authorization'] === expected;

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const target = req.url ?? '';
    seen.push(`${req.method ?? 'GET'} ${target}`);
    if (!authorized(req)) {
      rejected++;
      res.writeHead(407, { 'Proxy-Authenticate': 'Basic realm="test"' }).end();
      return;
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      res.writeHead(400).end('absolute-form request expected');
      return;
    }
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    }
    const upstream = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: req.method,
        headers,
        agent: false,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end('upstream failed');
      else res.destroy();
    });
    req.pipe(upstream);
  });

  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    const target = req.url ?? '';
    seen.push(`CONNECT ${target}`);
    if (!authorized(req)) {
      rejected++;
      client.end(
        'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n',
      );
      return;
    }
    const i = target.lastIndexOf(':');
    const host = target.slice(0, i).replace(/^\[|\]$/g, '');
    const port = Number(target.slice(i + 1));
    const upstream = connect(port, host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => {
      if (client.writable) client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
    });
    client.on('error', () => upstream.destroy());
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    rejected: () => rejected,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}
