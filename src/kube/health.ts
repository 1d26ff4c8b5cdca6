/**
 * The two small HTTP servers every controller has (controller-runtime's `--metrics-bind-address`
 * and `--health-probe-bind-address`): `/metrics` (Prometheus text from prom-client) on one,
 * `/healthz` and `/readyz` on the other. Plain `node:http`, GET/HEAD only.
 */
import { createServer, type Server, type ServerResponse } from '../node-http.ts';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface Check {
  ok: boolean;
  message: string;
}

export interface ServerOptions {
  /** 'host:port' ('[::1]:8080', ':8080' = all interfaces); port 0 picks a free port; '0' disables. */
  metricsBindAddress: string;
  /** Same format as `metricsBindAddress`. */
  healthProbeBindAddress: string;
  registry: Registry;
  checks: { healthz: () => Check; readyz: () => Check };
}

export interface RunningServers {
  /** Bound port, 0 when disabled. */
  metricsPort: number;
  /** Bound port, 0 when disabled. */
  probePort: number;
  close(): Promise<void>;
}

/**
 * Parses 'host:port' into listen arguments; undefined for '0' (disabled).
 * @throws Error on a malformed address or port.
 */
export function parseBindAddress(addr: string): { host: string | undefined; port: number } | undefined {
  if (addr === '0') return undefined;
  const i = addr.lastIndexOf(':');
  if (i < 0) throw new Error(`bind address '${addr}' must be host:port, :port or '0'`);
  let host = addr.slice(0, i);
  const portText = addr.slice(i + 1);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  const port = Number(portText);
  if (portText === '' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new Error(`bind address '${addr}' has an invalid port`);
  }
  return { host: host === '' ? undefined : host, port };
}

function send(
  res: ServerResponse,
  status: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

function runCheck(check: () => Check): Check {
  try {
    return check();
  } catch {
    return { ok: false, message: 'check failed' };
  }
}

async function listen(
  addr: string,
  routes: Record<string, (res: ServerResponse) => void | Promise<void>>,
): Promise<{ server: Server | undefined; port: number }> {
  const bind = parseBindAddress(addr);
  if (bind === undefined) return { server: undefined, port: 0 };
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const route = routes[path];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'method not allowed\n');
    } else if (route === undefined) {
      send(res, 404, 'not found\n');
    } else {
      Promise.resolve(route(res)).catch(() => {
        if (!res.headersSent) send(res, 500, 'internal error\n');
      });
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(bind.port, bind.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

function close(server: Server | undefined): Promise<void> {
  if (server === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
    server.closeAllConnections();
  });
}

/**
 * Starts the metrics and probe servers. `/healthz` and `/readyz` answer 200 'ok' or 503 with the
 * failing check's message (a check that throws reads 'check failed'); `/metrics` answers the
 * registry's text exposition. Resolves once both listen.
 * @throws Error when an address is malformed or cannot be bound (e.g. EADDRINUSE).
 */
export async function startServers(opts: ServerOptions): Promise<RunningServers> {
  const probe = (check: () => Check) => (res: ServerResponse) => {
    const r = runCheck(check);
    send(res, r.ok ? 200 : 503, r.ok ? 'ok\n' : `${r.message}\n`);
  };
  const metrics = await listen(opts.metricsBindAddress, {
    '/metrics': async (res) => {
      send(res, 200, await opts.registry.metrics(), opts.registry.contentType);
    },
  });
  let probes: { server: Server | undefined; port: number };
  try {
    probes = await listen(opts.healthProbeBindAddress, {
      '/healthz': probe(opts.checks.healthz),
      '/readyz': probe(opts.checks.readyz),
    });
  } catch (err) {
    await close(metrics.server);
    throw err;
  }
  return {
    metricsPort: metrics.port,
    probePort: probes.port,
    close: async () => {
      await Promise.all([close(metrics.server), close(probes.server)]);
    },
  };
}
