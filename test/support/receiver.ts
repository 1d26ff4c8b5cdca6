/**
 * A real HTTP(S) endpoint on 127.0.0.1 for notifier tests: records every request and answers
 * from a programmable queue (then 200 `ok`). With `tls.clientCaPem` it demands a client
 * certificate signed by that CA (mutual TLS).
 */
import {
  createServer as createHttpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  /** Lower-case header names, as Node parses them. */
  headers: IncomingHttpHeaders;
  /** Raw body bytes (to verify signatures over the exact bytes) and their UTF-8 text. */
  raw: Buffer;
  body: string;
  /** `Date.now()` when the request finished arriving. */
  time: number;
  /** Client's source port: equal ports on sequential requests mean a reused connection. */
  remotePort: number | undefined;
}

export interface QueuedResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long (ms) before answering. */
  delayMs?: number;
}

export interface TestReceiver {
  /** `http(s)://127.0.0.1:<port>` (no trailing slash). */
  url: string;
  requests: ReceivedRequest[];
  /** Appends answers for the next requests, in order; when the queue is empty the answer is 200 `ok`. */
  respondWith(responses: QueuedResponse[]): void;
  close(): Promise<void>;
}

export interface ReceiverOptions {
  /** Listen on this port (default: a free one). Lets a test bring an endpoint up where a Provider already points. */
  port?: number;
  tls?: { certPem: string; keyPem: string; clientCaPem?: string };
}

export async function startReceiver(opts: ReceiverOptions = {}): Promise<TestReceiver> {
  const requests: ReceivedRequest[] = [];
  const queue: QueuedResponse[] = [];
  const timers = new Set<NodeJS.Timeout>();

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      requests.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        raw,
        body: raw.toString('utf8'),
        time: Date.now(),
        remotePort: req.socket.remotePort,
      });
      const next = queue.shift() ?? { status: 200, body: 'ok' };
      const answer = (): void => {
        res.writeHead(next.status, next.headers).end(next.body ?? '');
      };
      if (next.delayMs !== undefined) {
        const t = setTimeout(() => {
          timers.delete(t);
          if (!res.destroyed) answer();
        }, next.delayMs);
        timers.add(t);
      } else {
        answer();
      }
    });
  };

  const server: Server = opts.tls
    ? createHttpsServer(
        {
          cert: opts.tls.certPem,
          key: opts.tls.keyPem,
          ...(opts.tls.clientCaPem !== undefined
            ? { ca: opts.tls.clientCaPem, requestCert: true, rejectUnauthorized: true }
            : {}),
        },
        handler,
      )
    : createHttpServer(handler);

  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    requests,
    respondWith(responses) {
      queue.push(...responses);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
