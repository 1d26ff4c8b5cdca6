/**
 * TLS in front of a plain-HTTP loopback server: every connection to `https://127.0.0.1:<port>`
 * is decrypted and piped byte for byte to the target. PKO v2 accepts only `https` (and `ssh`)
 * repository URLs, while the test Gitea serves plain HTTP: the workspace's git clone goes through
 * this front (trusting the test CA through `SSL_CERT_FILE`), everything else talks to Gitea
 * directly.
 */
import { connect, type Socket } from 'node:net';
import { createServer, type TLSSocket } from 'node:tls';

export interface TlsFront {
  /** `https://127.0.0.1:<port>` (no trailing slash). */
  url: string;
  close(): Promise<void>;
}

/** Starts the front on a free loopback port for `target` (`http://127.0.0.1:<port>`). */
export async function startTlsFront(
  target: string,
  tls: { certPem: string; keyPem: string },
): Promise<TlsFront> {
  const t = new URL(target);
  const sockets = new Set<Socket>();
  const server = createServer({ cert: tls.certPem, key: tls.keyPem }, (client: TLSSocket) => {
    const upstream = connect({ host: t.hostname, port: Number(t.port) });
    sockets.add(client);
    sockets.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return {
    url: `https://127.0.0.1:${String(port)}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    },
  };
}
