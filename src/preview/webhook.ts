/**
 * The preview webhook receiver (flag `--preview-webhook-bind-address`): `POST
 * /hooks/<namespace>/<name>` from a forge triggers an immediate sync of that PullRequestPreview
 * (docs/previews.md, "Webhook"). Everything in a request is hostile until verified, and a
 * stranger gets no work and no memory (case B11):
 * - the target is looked up (`target`: informer cache and a cached Secret read) BEFORE any body
 *   byte is read; an unknown target, one without a webhook secret and a wrong or missing
 *   signature all answer the same `401 unauthorized` — an unknown target with `Connection:
 *   close` and its body never read; a GitHub/Gitea request without a signature header and a
 *   GitLab request with a wrong `X-Gitlab-Token` (a header) are refused before the body too;
 *   `100 Continue` is sent only once the body will be read;
 * - bounds: `maxBodyBytes` per body (`Content-Length` over it → 413 unread; a streamed body is
 *   cut at it → 413); bytes of bodies being read at once, `maxInflightBodyBytes` over all and
 *   `maxInflightBodyBytesPerNamespace` per namespace (a quarter of the former by default, so one
 *   tenant cannot take the room another's deliveries need): a body with `Content-Length`
 *   reserves that length before it is read (no room → 503 unread), a streamed (chunked) body
 *   reserves what has arrived, chunk by chunk (no room for the next chunk → 503, connection
 *   closed); bodies read at once, `maxRequestsPerTarget` per PullRequestPreview and
 *   `maxRequestsPerNamespace` per namespace (→ 503 unread); `maxConnections` sockets (more are
 *   dropped at accept); headers within `headersTimeoutMs`, the whole request within
 *   `requestTimeoutMs` and a streamed one within `streamedBodyTimeoutMs` (a slow body is cut:
 *   the socket is destroyed);
 * - the signature is checked against the PullRequestPreview's Secret (key `token`) in constant
 *   time: GitHub `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, Gitea
 *   `X-Gitea-Signature: <hex HMAC-SHA256 of the body>`, GitLab `X-Gitlab-Token: <the secret>`
 *   (compared as SHA-256 digests so lengths leak nothing);
 * - the replay key is the SHA-256 of the verified body (per target), not the unsigned delivery-id
 *   header: the same body again within `replayWindowMs` answers `200 already received` and
 *   causes nothing (case B13/R08). Each target has its own memory (`replayEntriesPerTarget`
 *   bodies, for at most `replayTargets` targets, the least recently delivered one forgotten
 *   first), so one tenant's deliveries cannot push another's out. The key is handed to
 *   `onDelivery`/`onPushToBase`, which write it (not a timestamp) into annotations, so the same
 *   delivery at another replica or after a restart writes the same value and changes nothing;
 * - a push asks for a base Stack run (`onPushToBase`) only when its new commit (GitHub/Gitea
 *   `after`, GitLab `after` or `checkout_sha`) is newer than every push this replica acted on for
 *   the target: a push whose `after` is the `before` or `after` of one acted on (the last
 *   `pushCommitsPerTarget` commits remembered) is older or the same and asks for nothing, so an
 *   older push replayed after a newer one does not move the base Stack's annotation back (one
 *   more PKO run). A push without `after`, or deleting the branch (all zeros), asks for nothing;
 * - only a verified body is parsed: a delivery whose repository (GitHub/Gitea
 *   `repository.clone_url`/`html_url`/`ssh_url`, GitLab `project.git_http_url`/`web_url`/
 *   `git_ssh_url`) is not the target's `repository` (compared with `sameRepository` of
 *   src/forge/address.ts) answers `200 ignored` and causes nothing (case B13);
 * - nothing from a request reaches a log line: each request is counted in
 *   `pkonc_preview_webhook_requests_total{result}` (fixed results, no names), and refusals are
 *   summed up in at most one log line per `summaryIntervalMs`.
 * A new delivery for the target's repository answers 202 after `onDelivery` (and, for a push to
 * the base branch with `reconcileBaseOnPush`, `onPushToBase`) succeeded; when one of them fails
 * the body is forgotten again and the answer is 503, so a redelivery is not taken for a replay.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from '../node-http.ts';
import type { AddressInfo } from 'node:net';
import { LRUCache } from 'lru-cache';
import type { Registry } from 'prom-client';
import { sameRepository } from '../forge/address.ts';
import { parseBindAddress } from '../kube/health.ts';
import { counter } from '../kube/metrics.ts';
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
  /**
   * The repository previewed (the base Stack's `spec.projectRepo`); a delivery naming another
   * one is ignored, and so is every delivery while it is unknown.
   */
  repository: string | undefined;
}

/** How a request ended: the `result` label of `pkonc_preview_webhook_requests_total`. */
export type WebhookResult =
  | 'accepted'
  | 'duplicate'
  | 'ignored'
  | 'unknown_target'
  | 'bad_signature'
  | 'too_large'
  | 'overloaded'
  | 'timeout'
  | 'bad_request'
  | 'error';

export interface WebhookReceiverOptions {
  /** `host:port`; port 0 picks a free port. */
  bindAddress: string;
  /** Largest body accepted, bytes. */
  maxBodyBytes: number;
  /**
   * The target of `/hooks/<namespace>/<name>`; undefined when unknown or without a webhook
   * secret (401, like a bad signature). Called before any body byte is read.
   * @throws when the target cannot be read now (503).
   */
  target(namespace: string, name: string): WebhookTarget | undefined | Promise<WebhookTarget | undefined>;
  /**
   * A new verified delivery for the target's repository: sync this PullRequestPreview.
   * `key` is the hex SHA-256 of the body (64 characters): equal for the same delivery anywhere.
   * @throws when the sync could not be requested (the request answers 503 and the body is forgotten).
   */
  onDelivery(namespace: string, name: string, key: string): void | Promise<void>;
  /** A new verified push to the base branch with `reconcileBaseOnPush` (`key` as for `onDelivery`). */
  onPushToBase(namespace: string, name: string, key: string): Promise<void>;
  logger: Logger;
  /** Where `pkonc_preview_webhook_requests_total` is registered. */
  registry?: Registry;
  /** Bytes of bodies being read at once, over all requests (default 8 MiB). */
  maxInflightBodyBytes?: number;
  /**
   * Bytes of bodies being read at once for the targets of one namespace (default a quarter of
   * `maxInflightBodyBytes`, at least `maxBodyBytes`).
   */
  maxInflightBodyBytesPerNamespace?: number;
  /** Bodies read at once per target (default 4). */
  maxRequestsPerTarget?: number;
  /** Bodies read at once for the targets of one namespace (default 16). */
  maxRequestsPerNamespace?: number;
  /** Open sockets (default 256; more are dropped when accepted). */
  maxConnections?: number;
  /** Time to receive the request headers, ms (default 5 000). */
  headersTimeoutMs?: number;
  /** Time to receive the whole request, ms (default 15 000). */
  requestTimeoutMs?: number;
  /** Time to receive a request whose body has no `Content-Length` (streamed), ms (default 5 000). */
  streamedBodyTimeoutMs?: number;
  /** How long bodies are remembered, ms (default 24 h). */
  replayWindowMs?: number;
  /** How many bodies are remembered per target (default 128; the oldest go first). */
  replayEntriesPerTarget?: number;
  /** For how many targets bodies and push commits are remembered (default 1 000; the least recently delivered goes first). */
  replayTargets?: number;
  /** How many push commits (`before`/`after` SHAs acted on) are remembered per target (default 64). */
  pushCommitsPerTarget?: number;
  /** At most one summary line of refused requests per this many ms (default 60 000). */
  summaryIntervalMs?: number;
}

export interface WebhookReceiver {
  port: number;
  close(): Promise<void>;
}

const PATH = /^\/hooks\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/;
const UNAUTHORIZED = 'unauthorized';

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

/**
 * Whether the request can be refused before its body is read: GitHub/Gitea without their
 * signature header, GitLab with a wrong token (the token is a header).
 */
function refusedByHeaders(
  forge: WebhookForge,
  headers: (name: string) => string | undefined,
  secret: string,
): boolean {
  switch (forge) {
    case 'github':
      return headers('x-hub-signature-256') === undefined;
    case 'gitea':
      return headers('x-gitea-signature') === undefined;
    case 'gitlab':
      return !verifySignature('gitlab', headers, Buffer.alloc(0), secret);
  }
}

/** Whether the delivery is a push (GitHub/Gitea `push`, GitLab `Push Hook`). */
function isPush(forge: WebhookForge, headers: (name: string) => string | undefined): boolean {
  if (forge === 'gitlab') return headers('x-gitlab-event') === 'Push Hook';
  return headers(forge === 'github' ? 'x-github-event' : 'x-gitea-event') === 'push';
}

/** The JSON payload of a verified body: JSON, or GitHub's form encoding (`payload=<json>`). */
function payloadOf(body: Buffer, contentType: string | undefined): Record<string, unknown> | undefined {
  let text = body.toString('utf8');
  if (contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded') === true)
    text = new URLSearchParams(text).get('payload') ?? '';
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The repository URLs a payload names: GitHub/Gitea `repository.{clone_url,html_url,ssh_url}`,
 * GitLab `project.{git_http_url,web_url,git_ssh_url}` (also `repository.{git_http_url,homepage}`
 * of older GitLab payloads).
 */
export function repositoryURLs(forge: WebhookForge, payload: Record<string, unknown>): string[] {
  const pick = (obj: unknown, keys: string[]): string[] => {
    if (typeof obj !== 'object' || obj === null) return [];
    const rec = obj as Record<string, unknown>;
    return keys.map((k) => rec[k]).filter((v): v is string => typeof v === 'string' && v !== '');
  };
  if (forge === 'gitlab')
    return [
      ...pick(payload['project'], ['git_http_url', 'web_url', 'git_ssh_url']),
      ...pick(payload['repository'], ['git_http_url', 'homepage', 'git_ssh_url']),
    ];
  return pick(payload['repository'], ['clone_url', 'html_url', 'ssh_url']);
}

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
const ZERO = /^0+$/;

/**
 * The commits a push moves the branch between: `before` and `after` (GitLab: `checkout_sha`
 * when `after` is missing), lower-case hex SHAs (40, or 64 for SHA-256 repositories);
 * undefined when malformed or missing.
 */
export function pushCommits(
  forge: WebhookForge,
  payload: Record<string, unknown>,
): { before: string | undefined; after: string | undefined } {
  const sha = (v: unknown): string | undefined =>
    typeof v === 'string' && SHA.test(v.toLowerCase()) ? v.toLowerCase() : undefined;
  const after = sha(payload['after']) ?? (forge === 'gitlab' ? sha(payload['checkout_sha']) : undefined);
  return { before: sha(payload['before']), after };
}

/** Answers the request; `close` ends the connection after the answer (the body is not read). */
function reply(res: ServerResponse, status: number, text: string, close = false): void {
  if (res.headersSent) return;
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Cache-Control': 'no-store',
    ...(close ? { Connection: 'close' } : {}),
  });
  res.end(`${text}\n`);
}

type ReadResult =
  | { kind: 'ok'; body: Buffer }
  | { kind: 'too_large' }
  | { kind: 'timeout' }
  | { kind: 'aborted' }
  | { kind: 'overloaded' };

/**
 * Reads the body up to `max` bytes, or until `deadline` (ms since the epoch). `grow`, when
 * given, is asked for room for each chunk before it is kept (false: `overloaded`).
 */
function readBounded(
  req: IncomingMessage,
  max: number,
  deadline: number,
  grow?: (bytes: number) => boolean,
): Promise<ReadResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (r: ReadResult): void => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onError);
      if (r.kind !== 'ok') chunks.length = 0;
      resolve(r);
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > max) {
        req.pause();
        done({ kind: 'too_large' });
        return;
      }
      if (grow !== undefined && !grow(c.length)) {
        req.pause();
        done({ kind: 'overloaded' });
        return;
      }
      chunks.push(c);
    };
    const onEnd = (): void => {
      done({ kind: 'ok', body: Buffer.concat(chunks, size) });
    };
    const onError = (): void => {
      done({ kind: 'aborted' });
    };
    const timer = setTimeout(
      () => {
        req.pause();
        done({ kind: 'timeout' });
      },
      Math.max(0, deadline - Date.now()),
    );
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onError);
  });
}

/** Starts the receiver. @throws Error when the address is malformed or cannot be bound. */
export async function startWebhookReceiver(opts: WebhookReceiverOptions): Promise<WebhookReceiver> {
  const bind = parseBindAddress(opts.bindAddress);
  if (bind === undefined) throw new Error('the webhook receiver needs a bind address');
  const maxInflight = opts.maxInflightBodyBytes ?? 8 * 1024 * 1024;
  const maxInflightPerNamespace =
    opts.maxInflightBodyBytesPerNamespace ?? Math.max(opts.maxBodyBytes, Math.floor(maxInflight / 4));
  const perTarget = opts.maxRequestsPerTarget ?? 4;
  const perNamespace = opts.maxRequestsPerNamespace ?? 16;
  const requestTimeoutMs = opts.requestTimeoutMs ?? 15_000;
  const streamedTimeoutMs = Math.min(opts.streamedBodyTimeoutMs ?? 5_000, requestTimeoutMs);
  const replayEntries = opts.replayEntriesPerTarget ?? 128;
  const replayWindowMs = opts.replayWindowMs ?? 24 * 60 * 60_000;
  const pushCommitsPerTarget = opts.pushCommitsPerTarget ?? 64;
  /**
   * What is remembered per target (`namespace/name`): the digests of its verified bodies and
   * the commits of the pushes acted on. Only verified deliveries create an entry.
   */
  interface Memory {
    bodies: LRUCache<string, true>;
    commits: LRUCache<string, true>;
  }
  const memory = new LRUCache<string, Memory>({ max: opts.replayTargets ?? 1_000 });
  const memoryOf = (key: string): Memory => {
    let m = memory.get(key);
    if (m === undefined) {
      m = {
        bodies: new LRUCache({ max: replayEntries, ttl: replayWindowMs }),
        commits: new LRUCache({ max: pushCommitsPerTarget }),
      };
      memory.set(key, m);
    }
    return m;
  };
  const log = opts.logger.child({ component: 'preview-webhook' });
  const requests = counter(
    opts.registry,
    'pkonc_preview_webhook_requests_total',
    'Requests to the preview webhook receiver, by how they ended.',
    ['result'],
  );
  /** Bytes reserved by bodies being read: over all, and per namespace. */
  let inflightBytes = 0;
  const inflightBytesPerNamespace = new Map<string, number>();
  /** Bodies being read, per target and per namespace. */
  const inflightPerTarget = new Map<string, number>();
  const inflightPerNamespace = new Map<string, number>();
  const add = (m: Map<string, number>, key: string, n: number): void => {
    const v = (m.get(key) ?? 0) + n;
    if (v <= 0) m.delete(key);
    else m.set(key, v);
  };
  /** Reserves `bytes` for a body of `namespace` when both budgets have room. */
  const reserve = (namespace: string, bytes: number): boolean => {
    if (
      inflightBytes + bytes > maxInflight ||
      (inflightBytesPerNamespace.get(namespace) ?? 0) + bytes > maxInflightPerNamespace
    )
      return false;
    inflightBytes += bytes;
    add(inflightBytesPerNamespace, namespace, bytes);
    return true;
  };
  /** Refusals since the last summary line. */
  let refused = new Map<WebhookResult, number>();
  const count = (result: WebhookResult): void => {
    requests.labels(result).inc();
    if (result !== 'accepted' && result !== 'duplicate' && result !== 'ignored')
      refused.set(result, (refused.get(result) ?? 0) + 1);
  };
  const summary = setInterval(() => {
    if (refused.size === 0) return;
    log.warn(
      { refused: Object.fromEntries(refused) },
      'preview webhook requests refused since the last summary (counts by result; see pkonc_preview_webhook_requests_total)',
    );
    refused = new Map();
  }, opts.summaryIntervalMs ?? 60_000);
  summary.unref();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<WebhookResult> => {
    const started = Date.now();
    const m = PATH.exec((req.url ?? '').split('?')[0] ?? '');
    if (m === null) {
      reply(res, 404, 'not found', true);
      return 'bad_request';
    }
    if (req.method !== 'POST') {
      reply(res, 405, 'method not allowed', true);
      return 'bad_request';
    }
    const namespace = m[1] ?? '';
    const name = m[3] ?? '';
    const key = `${namespace}/${name}`;
    const headers = (n: string): string | undefined => header(req, n);

    // Who is it for, before reading anything.
    let target: WebhookTarget | undefined;
    try {
      target = await opts.target(namespace, name);
    } catch {
      reply(res, 503, 'temporarily unavailable', true);
      return 'error';
    }
    if (target === undefined) {
      reply(res, 401, UNAUTHORIZED, true);
      return 'unknown_target';
    }
    if (refusedByHeaders(target.forge, headers, target.secret)) {
      reply(res, 401, UNAUTHORIZED, true);
      return 'bad_signature';
    }
    const declared = header(req, 'content-length');
    const length = declared === undefined ? undefined : Number(declared);
    if (length !== undefined && !(Number.isSafeInteger(length) && length >= 0)) {
      reply(res, 400, 'bad request', true);
      return 'bad_request';
    }
    if (length !== undefined && length > opts.maxBodyBytes) {
      reply(res, 413, 'payload too large', true);
      return 'too_large';
    }
    const busy = (): WebhookResult => {
      res.setHeader('Retry-After', '5');
      reply(res, 503, 'busy: retry later', true);
      return 'overloaded';
    };
    // A declared length is reserved before reading; a streamed body reserves what arrives.
    let reserved = length ?? 0;
    if (
      (inflightPerTarget.get(key) ?? 0) >= perTarget ||
      (inflightPerNamespace.get(namespace) ?? 0) >= perNamespace ||
      !reserve(namespace, reserved)
    )
      return busy();

    // Read the body within the bounds. A client that waits for `100 Continue` (curl does for
    // bodies over 1 KiB) sends it only now.
    if (header(req, 'expect')?.toLowerCase() === '100-continue') res.writeContinue();
    add(inflightPerTarget, key, 1);
    add(inflightPerNamespace, namespace, 1);
    let read: ReadResult;
    try {
      read =
        length !== undefined
          ? await readBounded(req, opts.maxBodyBytes, started + requestTimeoutMs)
          : await readBounded(req, opts.maxBodyBytes, started + streamedTimeoutMs, (bytes) => {
              if (!reserve(namespace, bytes)) return false;
              reserved += bytes;
              return true;
            });
    } finally {
      inflightBytes -= reserved;
      add(inflightBytesPerNamespace, namespace, -reserved);
      add(inflightPerTarget, key, -1);
      add(inflightPerNamespace, namespace, -1);
    }
    if (read.kind === 'too_large') {
      reply(res, 413, 'payload too large', true);
      return 'too_large';
    }
    if (read.kind === 'overloaded') return busy();
    if (read.kind === 'timeout' || read.kind === 'aborted') {
      req.socket.destroy();
      return read.kind === 'timeout' ? 'timeout' : 'bad_request';
    }
    const body = read.body;
    if (!verifySignature(target.forge, headers, body, target.secret)) {
      reply(res, 401, UNAUTHORIZED, true);
      return 'bad_signature';
    }

    // Verified: the body itself is the replay key.
    const digest = createHash('sha256').update(body).digest('hex');
    if (memory.get(key)?.bodies.has(digest) === true) {
      reply(res, 200, 'already received');
      return 'duplicate';
    }
    const remembered = memoryOf(key);
    remembered.bodies.set(digest, true);
    const payload = payloadOf(body, header(req, 'content-type'));
    const repository = target.repository;
    const forge = target.forge;
    const urls = payload === undefined ? [] : repositoryURLs(forge, payload);
    if (repository === undefined || !urls.some((u) => sameRepository(forge, u, repository))) {
      log.debug(
        { preview: key },
        'webhook delivery ignored: it names another repository than the base Stack',
      );
      reply(res, 200, "ignored: the delivery is not for the base Stack's repository (spec.projectRepo)");
      return 'ignored';
    }
    // A push to the base branch asks for a base Stack run only when its commit is new here.
    const commits =
      target.reconcileBaseOnPush &&
      target.branch !== undefined &&
      isPush(forge, headers) &&
      payload?.['ref'] === `refs/heads/${target.branch}`
        ? pushCommits(forge, payload)
        : undefined;
    const after = commits?.after;
    const before = commits?.before;
    const newPush = after !== undefined && !ZERO.test(after) && !remembered.commits.has(after);
    try {
      await opts.onDelivery(namespace, name, digest);
      if (newPush) await opts.onPushToBase(namespace, name, digest);
    } catch (err) {
      remembered.bodies.delete(digest);
      throw err;
    }
    if (newPush) {
      // Remembered once acted on: a push back to either commit is older (or the same).
      if (before !== undefined && !ZERO.test(before)) remembered.commits.set(before, true);
      remembered.commits.set(after, true);
    }
    reply(res, 202, 'accepted');
    return 'accepted';
  };

  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).then(count, (err: unknown) => {
      log.error(
        { err: err instanceof Error ? err.message : String(err) },
        'webhook delivery verified, but the sync could not be requested',
      );
      reply(res, 503, 'temporarily unavailable', true);
      count('error');
    });
  };
  const server: Server = createServer(
    {
      headersTimeout: Math.min(opts.headersTimeoutMs ?? 5_000, requestTimeoutMs + 1_000),
      // A backstop only: the body's own deadline (readBounded) ends the request first.
      requestTimeout: requestTimeoutMs + 1_000,
      // How often Node checks the two timeouts above (default 30 s: too coarse for a slow sender).
      connectionsCheckingInterval: 1_000,
      keepAliveTimeout: 5_000,
    },
    listener,
  );
  // `Expect: 100-continue` reaches the handler without Node's automatic `100 Continue`: a
  // refused request is answered before its client sends the body.
  server.on('checkContinue', listener);
  server.maxConnections = opts.maxConnections ?? 256;
  server.on('drop', () => {
    count('overloaded');
  });
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
        clearInterval(summary);
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
