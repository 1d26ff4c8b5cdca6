/**
 * The preview webhook receiver (flag `--preview-webhook-bind-address`): `POST
 * /hooks/<namespace>/<name>` from a forge triggers an immediate sync of that PullRequestPreview
 * (docs/previews.md, "Webhook"). Everything in a request is hostile until verified:
 * - the body is bounded (`Content-Length` over the bound → 413 before reading; a chunked body
 *   is counted while read and cut off at the bound → 413);
 * - the signature is checked against the PullRequestPreview's Secret (key `token`) in constant
 *   time: GitHub `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, Gitea
 *   `X-Gitea-Signature: <hex HMAC-SHA256 of the body>`, GitLab `X-Gitlab-Token: <the secret>`
 *   (compared as SHA-256 digests so lengths leak nothing) → 401 when wrong or missing;
 * - a delivery id (`X-GitHub-Delivery`, `X-Gitea-Delivery`, `X-Gitlab-Event-UUID`) is required
 *   (400) and remembered for `replayWindowMs`: the same id again → 409 (replay). Ids are stored
 *   only after the signature verified, so unsigned requests cannot fill the memory;
 * - nothing from the body reaches logs; the only field read is `ref` of a push.
 * A valid delivery answers 202 and queues the sync; with `spec.webhook.reconcileBaseOnPush`, a
 * push to the base branch also asks PKO to run the base Stack now (`onPushToBase`).
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LRUCache } from 'lru-cache';
import { parseBindAddress } from '../kube/health.ts';
import type { Logger } from '../log.ts';

/** Forge types the receiver verifies. */
export type WebhookForge = 'github' | 'gitea' | 'gitlab';

/** What the receiver needs to know about one PullRequestPreview. */
export interface WebhookTarget {
  forge: WebhookForge;
  /** The webhook secret (Secret key `token`). */
  secret: string;
  /** The previewed base branch (for push detection). */
  branch: string | undefined;
  reconcileBaseOnPush: boolean;
}

export interface WebhookReceiverOptions {
  /** `host:port`; port 0 picks a free port. */
  bindAddress: string;
  /** Largest body accepted, bytes. */
  maxBodyBytes: number;
  /** The target of `/hooks/<namespace>/<name>`; undefined when unknown or it has no webhook secret (404). */
  target(namespace: string, name: string): Promise<WebhookTarget | undefined>;
  /** A verified delivery: sync this PullRequestPreview now. */
  onDelivery(namespace: string, name: string): void;
  /** A verified push to the base branch with `reconcileBaseOnPush`. */
  onPushToBase(namespace: string, name: string): Promise<void>;
  logger: Logger;
  /** How long delivery ids are remembered, ms (default 24 h). */
  replayWindowMs?: number;
  /** How many delivery ids are remembered (default 10 000; the oldest go first). */
  replayEntries?: number;
}

export interface WebhookReceiver {
  port: number;
  close(): Promise<void>;
}

const PATH = /^\/hooks\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/;

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Constant-time equality of two strings (compared as SHA-256 digests: equal lengths always). */
export function safeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a, 'utf8').digest();
  const db = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(da, db);
}

/** Whether `req`'s signature headers prove `body` was sent with `secret` by `forge`. */
export function verifySignature(
  forge: WebhookForge,
  headers: (name: string) => string | undefined,
  body: Buffer,
  secret: string,
): boolean {
  const hmac = (): string => createHmac('sha256', secret).update(body).digest('hex');
  switch (forge) {
    case 'github': {
      const sig = headers('x-hub-signature-256');
      return sig !== undefined && safeEqual(sig.toLowerCase(), `sha256=${hmac()}`);
    }
    case 'gitea': {
      const sig = headers('x-gitea-signature');
      return sig !== undefined && safeEqual(sig.toLowerCase(), hmac());
    }
    case 'gitlab': {
      const token = headers('x-gitlab-token');
      return token !== undefined && safeEqual(token, secret);
    }
  }
}

/** The delivery id header of `forge`. */
function deliveryId(forge: WebhookForge, headers: (name: string) => string | undefined): string | undefined {
  const v =
    forge === 'github'
      ? headers('x-github-delivery')
      : forge === 'gitea'
        ? headers('x-gitea-delivery')
        : (headers('x-gitlab-event-uuid') ?? headers('idempotency-key'));
  return v !== undefined && v !== '' && v.length <= 200 ? v : undefined;
}

/** Whether the delivery is a push (GitHub/Gitea `push`, GitLab `Push Hook`). */
function isPush(forge: WebhookForge, headers: (name: string) => string | undefined): boolean {
  if (forge === 'gitlab') return headers('x-gitlab-event') === 'Push Hook';
  return headers(forge === 'github' ? 'x-github-event' : 'x-gitea-event') === 'push';
}

/** Answers the request; returns the status sent (so handlers can `return reply(…)`). */
function reply(res: ServerResponse, status: number, text: string): number {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(`${text}\n`);
  return status;
}

/** Reads the body up to `max` bytes; undefined when it is larger (the rest is not read). */
function readBounded(req: IncomingMessage, max: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        req.removeAllListeners('data');
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
}

/** Starts the receiver. @throws Error when the address is malformed or cannot be bound. */
export async function startWebhookReceiver(opts: WebhookReceiverOptions): Promise<WebhookReceiver> {
  const bind = parseBindAddress(opts.bindAddress);
  if (bind === undefined) throw new Error('the webhook receiver needs a bind address');
  const seen = new LRUCache<string, true>({
    max: opts.replayEntries ?? 10_000,
    ttl: opts.replayWindowMs ?? 24 * 60 * 60_000,
  });
  const log = opts.logger.child({ component: 'preview-webhook' });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<number> => {
    const m = PATH.exec((req.url ?? '').split('?')[0] ?? '');
    if (m === null) return reply(res, 404, 'not found');
    if (req.method !== 'POST') return reply(res, 405, 'method not allowed');
    const length = Number(header(req, 'content-length') ?? '0');
    if (Number.isFinite(length) && length > opts.maxBodyBytes) {
      res.setHeader('Connection', 'close');
      return reply(res, 413, 'payload too large');
    }
    const body = await readBounded(req, opts.maxBodyBytes);
    if (body === undefined) {
      res.setHeader('Connection', 'close');
      return reply(res, 413, 'payload too large');
    }
    const namespace = m[1] ?? '';
    const name = m[3] ?? '';
    const target = await opts.target(namespace, name);
    if (target === undefined) return reply(res, 404, 'not found');
    const headers = (n: string): string | undefined => header(req, n);
    if (!verifySignature(target.forge, headers, body, target.secret)) {
      log.warn(
        { preview: `${namespace}/${name}` },
        'webhook delivery with a wrong or missing signature refused',
      );
      return reply(res, 401, 'invalid signature');
    }
    const id = deliveryId(target.forge, headers);
    if (id === undefined) return reply(res, 400, 'missing delivery id');
    const seenKey = `${namespace}/${name}\u0000${id}`;
    if (seen.has(seenKey)) {
      log.warn({ preview: `${namespace}/${name}` }, 'webhook delivery replayed: refused');
      return reply(res, 409, 'delivery already received');
    }
    seen.set(seenKey, true);
    opts.onDelivery(namespace, name);
    if (target.reconcileBaseOnPush && target.branch !== undefined && isPush(target.forge, headers)) {
      let ref: unknown;
      try {
        ref = (JSON.parse(body.toString('utf8')) as { ref?: unknown }).ref;
      } catch {
        ref = undefined;
      }
      if (ref === `refs/heads/${target.branch}`) await opts.onPushToBase(namespace, name);
    }
    return reply(res, 202, 'accepted');
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'webhook delivery failed');
      if (!res.headersSent) void reply(res, 500, 'internal error');
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(bind.port, bind.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
