/**
 * The preview webhook receiver (src/preview/webhook.ts) over real HTTP on 127.0.0.1, one rule
 * per test:
 * - B11: the target is looked up before the body is read; an unknown target, a target without
 *   a secret and a wrong or missing signature answer alike (401 `unauthorized`), the first two
 *   and a GitLab token mismatch without reading the body; bounds on body size, on bytes read at
 *   once (over all and per namespace: one tenant's slow bodies leave room for another's
 *   deliveries; a streamed body reserves only what arrived), on bodies per target, on sockets and
 *   on time (shorter for a streamed body); refusals are counted in
 *   `pkonc_preview_webhook_requests_total{result}` and summed up in at most one log line per
 *   interval;
 * - B13/R08: the replay key is the SHA-256 of the verified body (new delivery ids change
 *   nothing; a repeat answers 200), handed to the callbacks; a failed callback forgets the body;
 *   each target has its own replay memory (one target's deliveries do not evict another's);
 *   a delivery for another repository is accepted as authentic and ignored (200);
 * - a push to the base branch asks for a base Stack run only with reconcileBaseOnPush, and only
 *   for a commit newer than the pushes acted on (an older push replayed later asks nothing).
 * Gitea's header shapes are the ones a real Gitea 1.27.3 sends (gitea.int.test.ts uses real
 * deliveries).
 */
import { createHash, createHmac } from 'node:crypto';
import { request, type ClientRequest } from 'node:http';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { sameRepository } from '../../src/forge/address.ts';
import { createLogger } from '../../src/log.ts';
import {
  startWebhookReceiver,
  type WebhookReceiver,
  type WebhookReceiverOptions,
  type WebhookTarget,
} from '../../src/preview/webhook.ts';

const SECRET = 'hook-secret-value';
const MAX = 4096;
const REPO = 'https://git.example.com/team/app.git';

let receiver: WebhookReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

class Lines extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    for (const l of chunk.toString('utf8').split('\n'))
      if (l !== '') this.lines.push(JSON.parse(l) as Record<string, unknown>);
    cb();
  }
}

interface Started {
  port: number;
  synced: { preview: string; key: string }[];
  pushed: { preview: string; key: string }[];
  /** Target lookups, in order, with whether the request's body had fully arrived. */
  lookups: string[];
  registry: Registry;
  logs: Lines;
}

async function start(
  target: Partial<WebhookTarget> | null = {},
  opts: Partial<WebhookReceiverOptions> = {},
): Promise<Started> {
  const s: Started = {
    port: 0,
    synced: [],
    pushed: [],
    lookups: [],
    registry: new Registry(),
    logs: new Lines(),
  };
  receiver = await startWebhookReceiver({
    bindAddress: '127.0.0.1:0',
    maxBodyBytes: MAX,
    logger: createLogger({ level: 'info', destination: s.logs }),
    registry: s.registry,
    target: (ns, name) => {
      s.lookups.push(`${ns}/${name}`);
      return Promise.resolve(
        ns === 'team' && name === 'previews' && target !== null
          ? {
              forge: 'gitea',
              secret: SECRET,
              branch: 'main',
              reconcileBaseOnPush: false,
              repository: REPO,
              ...target,
            }
          : undefined,
      );
    },
    onDelivery: (ns, name, key) => {
      s.synced.push({ preview: `${ns}/${name}`, key });
    },
    onPushToBase: (ns, name, key) => {
      s.pushed.push({ preview: `${ns}/${name}`, key });
      return Promise.resolve();
    },
    ...opts,
  });
  s.port = receiver.port;
  return s;
}

interface Answer {
  status: number;
  text: string;
  connection: string | undefined;
}

/** POSTs `body`; `chunked` sends it without Content-Length. -1: the connection was cut. */
function post(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: string,
  opts: { chunked?: boolean } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          ...headers,
          ...(opts.chunked ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, text: text.trim(), connection: res.headers.connection });
        });
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      // The receiver may close the connection after answering while we still write.
      if (err.code === 'EPIPE' || err.code === 'ECONNRESET')
        resolve({ status: -1, text: '', connection: undefined });
      else reject(err);
    });
    if (opts.chunked) {
      for (let i = 0; i < body.length; i += 1024) req.write(body.slice(i, i + 1024));
      req.end();
    } else req.end(body);
  });
}

/**
 * Starts a POST that declares `declared` bytes (undefined: streamed, chunked without
 * Content-Length) but sends only `sent` bytes and waits: resolves with the answer that comes
 * while the body is still incomplete (status -1: cut without one).
 */
function partial(
  port: number,
  path: string,
  headers: Record<string, string>,
  declared: number | undefined,
  sent: number,
): { answer: Promise<Answer>; req: ClientRequest } {
  let req!: ClientRequest;
  const answer = new Promise<Answer>((resolve, reject) => {
    req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          ...headers,
          ...(declared === undefined ? {} : { 'content-length': String(declared) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, text: text.trim(), connection: res.headers.connection });
        });
        res.on('error', () => {
          resolve({ status: res.statusCode ?? 0, text: text.trim(), connection: res.headers.connection });
        });
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE' || err.code === 'ECONNRESET' || err.message === 'socket hang up')
        resolve({ status: -1, text: '', connection: undefined });
      else reject(err);
    });
    req.flushHeaders();
    if (sent > 0) req.write('x'.repeat(sent));
  });
  return { answer, req };
}

const hmac = (body: string, secret = SECRET): string =>
  createHmac('sha256', secret).update(body).digest('hex');
const sha256 = (body: string): string => createHash('sha256').update(body).digest('hex');
const PATH = '/hooks/team/previews';
const pr = (n: number, repo: Record<string, string> = { clone_url: REPO }): string =>
  JSON.stringify({ action: 'opened', number: n, repository: repo });
const body = pr(1);
const gitea = (id: string, b = body, secret = SECRET): Record<string, string> => ({
  'x-gitea-event': 'pull_request',
  'x-gitea-delivery': id,
  'x-gitea-signature': hmac(b, secret),
});
const ghHeaders = (id: string, b: string): Record<string, string> => ({
  'x-github-event': 'pull_request',
  'x-github-delivery': id,
  'x-hub-signature-256': `sha256=${hmac(b)}`,
});

/** Value of `pkonc_preview_webhook_requests_total{result}`. */
async function counted(r: Started, result: string): Promise<number> {
  const m = await r.registry.getSingleMetric('pkonc_preview_webhook_requests_total')?.get();
  return m?.values.find((v) => v.labels['result'] === result)?.value ?? 0;
}

describe('preview webhook receiver: authentication before work (B11)', () => {
  it('Gitea: a valid signature triggers a sync (202) with the SHA-256 of the body as its key', async () => {
    const r = await start();
    expect(await post(r.port, PATH, gitea('d-1'), body)).toMatchObject({ status: 202, text: 'accepted' });
    expect(r.synced).toEqual([{ preview: 'team/previews', key: sha256(body) }]);
    expect(await counted(r, 'accepted')).toBe(1);
  });

  it('a wrong signature, one over another body, none, an unknown target and a target without a secret all answer 401 "unauthorized"', async () => {
    const r = await start();
    const { 'x-gitea-signature': _sig, ...unsigned } = gitea('d-3');
    const answers = [
      await post(r.port, PATH, gitea('d-1', body, 'another-secret'), body),
      await post(r.port, PATH, gitea('d-2', '{"other":1}'), body),
      await post(r.port, PATH, unsigned, body),
      await post(r.port, '/hooks/team/other', gitea('d-4'), body),
      await post(r.port, '/hooks/no-such-ns/no-such-name', gitea('d-5'), body),
    ];
    await receiver?.close();
    // A PullRequestPreview without spec.webhook.secretRef (or an empty token): target undefined.
    const noSecret = await start(null);
    answers.push(await post(noSecret.port, PATH, gitea('d-6'), body));
    for (const a of answers) expect(a).toEqual({ status: 401, text: 'unauthorized', connection: 'close' });
    expect([...r.synced, ...noSecret.synced]).toEqual([]);
    expect(await counted(r, 'bad_signature')).toBe(3);
    expect(await counted(r, 'unknown_target')).toBe(2);
    expect(await counted(noSecret, 'unknown_target')).toBe(1);
  });

  it('an unknown target is refused before its body is read: the answer comes while the body is incomplete', async () => {
    const r = await start();
    const { answer, req } = partial(r.port, '/hooks/no-such-ns/no-such-name', gitea('x'), MAX, 100);
    const a = await answer;
    req.destroy();
    expect(a).toEqual({ status: 401, text: 'unauthorized', connection: 'close' });
    expect(r.lookups).toEqual(['no-such-ns/no-such-name']);
  });

  it('GitHub/Gitea without a signature header and GitLab with a wrong token are refused before the body is read', async () => {
    const gh = await start({ forge: 'github' });
    const { 'x-hub-signature-256': _s, ...unsignedGh } = ghHeaders('g', body);
    const a = partial(gh.port, PATH, unsignedGh, MAX, 100);
    expect(await a.answer).toMatchObject({ status: 401, text: 'unauthorized' });
    a.req.destroy();
    await receiver?.close();
    const gl = await start({ forge: 'gitlab' });
    const b = partial(gl.port, PATH, { 'x-gitlab-event': 'Push Hook', 'x-gitlab-token': 'wrong' }, MAX, 100);
    expect(await b.answer).toMatchObject({ status: 401, text: 'unauthorized' });
    b.req.destroy();
    expect([...gh.synced, ...gl.synced]).toEqual([]);
  });

  it('Expect: 100-continue: a refused request is answered without inviting the body; an accepted one gets 100 Continue', async () => {
    const r = await start();
    const withExpect = (path: string): Promise<{ status: number; continued: boolean }> =>
      new Promise((resolve, reject) => {
        let continued = false;
        const req = request(
          {
            host: '127.0.0.1',
            port: r.port,
            path,
            method: 'POST',
            agent: false,
            headers: {
              ...gitea('e'),
              'content-type': 'application/json',
              'content-length': String(Buffer.byteLength(body)),
              expect: '100-continue',
            },
          },
          (res) => {
            res.resume();
            res.on('end', () => {
              resolve({ status: res.statusCode ?? 0, continued });
            });
          },
        );
        req.on('continue', () => {
          continued = true;
          req.end(body);
        });
        req.on('error', reject);
        req.flushHeaders();
      });
    expect(await withExpect('/hooks/no-such-ns/no-such-name')).toEqual({ status: 401, continued: false });
    expect(await withExpect(PATH)).toEqual({ status: 202, continued: true });
    expect(r.synced).toHaveLength(1);
  });

  it('GitHub: X-Hub-Signature-256 sha256=<hmac>; GitLab: X-Gitlab-Token; both verified', async () => {
    const gh = await start({ forge: 'github', repository: 'git@github.com:Acme/App.git' });
    const ghBody = pr(1, {
      clone_url: 'https://github.com/acme/app.git',
      html_url: 'https://github.com/acme/app',
    });
    expect((await post(gh.port, PATH, ghHeaders('g-1', ghBody), ghBody)).status).toBe(202);
    const noPrefix = { ...ghHeaders('g-2', pr(2)), 'x-hub-signature-256': hmac(pr(2)) };
    expect((await post(gh.port, PATH, noPrefix, pr(2))).status).toBe(401);
    expect(gh.synced).toHaveLength(1);
    await receiver?.close();
    const gl = await start({
      forge: 'gitlab',
      repository: 'https://gitlab.example.com/platform/infra/app.git',
    });
    const glBody = JSON.stringify({
      object_kind: 'merge_request',
      project: { git_http_url: 'https://gitlab.example.com/platform/infra/app.git' },
    });
    const glHeaders = { 'x-gitlab-event': 'Merge Request Hook', 'x-gitlab-token': SECRET };
    expect((await post(gl.port, PATH, glHeaders, glBody)).status).toBe(202);
    expect(gl.synced).toEqual([{ preview: 'team/previews', key: sha256(glBody) }]);
  });

  it('GitHub form-encoded deliveries (payload=<json>) are read like JSON ones', async () => {
    const r = await start({ forge: 'github', repository: 'https://github.com/acme/app' });
    const form = new URLSearchParams({
      payload: pr(3, { clone_url: 'https://github.com/acme/app.git' }),
    }).toString();
    const a = await post(
      r.port,
      PATH,
      { ...ghHeaders('f-1', form), 'content-type': 'application/x-www-form-urlencoded' },
      form,
    );
    expect(a.status).toBe(202);
    expect(r.synced).toHaveLength(1);
  });

  it('an oversized body is refused (413), declared by Content-Length (unread) or streamed chunked', async () => {
    const r = await start();
    const big = JSON.stringify({ pad: 'x'.repeat(MAX) });
    const declared = partial(r.port, PATH, gitea('big-1', big), MAX + 1, 10);
    expect(await declared.answer).toMatchObject({ status: 413, connection: 'close' });
    declared.req.destroy();
    const streamed = await post(r.port, PATH, gitea('big-2', big), big, { chunked: true });
    expect([413, -1]).toContain(streamed.status);
    expect(r.synced).toEqual([]);
    // The receiver still serves after refusing.
    expect((await post(r.port, PATH, gitea('ok'), body)).status).toBe(202);
    expect(await counted(r, 'too_large')).toBe(2);
  });

  it('bytes read at once are capped over all requests: no room → 503 before reading; room again once a body is done', async () => {
    const r = await start(
      {},
      { maxInflightBodyBytes: 2 * MAX, maxInflightBodyBytesPerNamespace: 2 * MAX, maxRequestsPerTarget: 10 },
    );
    const slow = [partial(r.port, PATH, gitea('s-1'), MAX, 10), partial(r.port, PATH, gitea('s-2'), MAX, 10)];
    // Wait until both hold their reservation (both looked up).
    await expect.poll(() => r.lookups.length, { timeout: 5_000 }).toBe(2);
    expect(await post(r.port, PATH, gitea('s-3'), body)).toMatchObject({ status: 503, connection: 'close' });
    for (const s of slow) s.req.destroy();
    await Promise.all(slow.map((s) => s.answer));
    await expect
      .poll(async () => (await post(r.port, PATH, gitea('s-4', pr(4)), pr(4))).status, { timeout: 5_000 })
      .toBe(202);
    expect(await counted(r, 'overloaded')).toBeGreaterThanOrEqual(1);
  });

  it('one namespace cannot starve another: slow bodies on two targets of namespace A leave room for a delivery to namespace B', async () => {
    const known = new Set(['tenant-a/one', 'tenant-a/two', 'tenant-b/previews']);
    const lookups: string[] = [];
    const synced: string[] = [];
    const r = await start(
      {},
      {
        maxInflightBodyBytes: 8 * MAX,
        target: (ns, name) => {
          lookups.push(`${ns}/${name}`);
          return known.has(`${ns}/${name}`)
            ? { forge: 'gitea', secret: SECRET, branch: 'main', reconcileBaseOnPush: false, repository: REPO }
            : undefined;
        },
        onDelivery: (ns, name) => {
          synced.push(`${ns}/${name}`);
        },
      },
    );
    // Four slow bodies of the largest size on each of A's two targets: what filled all 8 × MAX.
    const slow = ['one', 'two'].flatMap((t) =>
      [1, 2, 3, 4].map((i) => partial(r.port, `/hooks/tenant-a/${t}`, gitea(`a-${t}-${String(i)}`), MAX, 10)),
    );
    await expect.poll(() => lookups.length, { timeout: 5_000 }).toBe(8);
    // A holds at most its share (a quarter: 2 × MAX); the rest of its bodies were refused unread.
    const statuses: number[] = [];
    for (const s of slow) void s.answer.then((a) => statuses.push(a.status));
    await expect.poll(() => statuses.filter((x) => x === 503).length, { timeout: 10_000 }).toBe(6);
    expect(await post(r.port, '/hooks/tenant-b/previews', gitea('b-1'), body)).toMatchObject({
      status: 202,
      text: 'accepted',
    });
    expect(synced).toEqual(['tenant-b/previews']);
    expect(statuses).toHaveLength(6);
    for (const s of slow) s.req.destroy();
    await Promise.all(slow.map((s) => s.answer));
  });

  it('a streamed body (no Content-Length) reserves what has arrived, not the whole cap, and has a shorter deadline', async () => {
    const r = await start(
      {},
      {
        maxInflightBodyBytes: 2 * MAX,
        maxInflightBodyBytesPerNamespace: 2 * MAX,
        maxRequestsPerTarget: 10,
        requestTimeoutMs: 60_000,
        streamedBodyTimeoutMs: 3_000,
      },
    );
    const t0 = Date.now();
    const slow = [
      partial(r.port, PATH, gitea('c-1'), undefined, 10),
      partial(r.port, PATH, gitea('c-2'), undefined, 10),
    ];
    await expect.poll(() => r.lookups.length, { timeout: 5_000 }).toBe(2);
    // Two streamed bodies would have reserved 2 × MAX; a body of almost MAX still fits.
    const large = JSON.stringify({ pad: 'x'.repeat(MAX - 200), repository: { clone_url: REPO } });
    expect(await post(r.port, PATH, gitea('c-3', large), large)).toMatchObject({ status: 202 });
    // The streamed ones are cut at their own deadline, long before the request timeout.
    for (const a of await Promise.all(slow.map((s) => s.answer))) expect(a.status).toBe(-1);
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(await counted(r, 'timeout')).toBe(2);
    expect(r.synced).toHaveLength(1);
  });

  it('a streamed body that outgrows the room left is refused (503) when its next chunk does not fit', async () => {
    const r = await start({}, { maxInflightBodyBytes: 2 * MAX, maxInflightBodyBytesPerNamespace: MAX + 100 });
    const held = partial(r.port, PATH, gitea('g-1'), MAX, 10);
    await expect.poll(() => r.lookups.length, { timeout: 5_000 }).toBe(1);
    const big = JSON.stringify({ pad: 'x'.repeat(MAX - 500), repository: { clone_url: REPO } });
    const streamed = await post(r.port, PATH, gitea('g-2', big), big, { chunked: true });
    expect([503, -1]).toContain(streamed.status);
    expect(await counted(r, 'overloaded')).toBe(1);
    held.req.destroy();
    await held.answer;
    expect(r.synced).toEqual([]);
  });

  it('bodies read at once are capped per target: a second while one is read → 503', async () => {
    const r = await start({}, { maxRequestsPerTarget: 1 });
    const slow = partial(r.port, PATH, gitea('t-1'), MAX, 10);
    await expect.poll(() => r.lookups.length, { timeout: 5_000 }).toBe(1);
    expect((await post(r.port, PATH, gitea('t-2'), body)).status).toBe(503);
    slow.req.destroy();
    await slow.answer;
    await expect
      .poll(async () => (await post(r.port, PATH, gitea('t-3'), body)).status, { timeout: 5_000 })
      .toBe(202);
  });

  it('a slow body is cut at the request deadline (the socket is closed, nothing synced)', async () => {
    const r = await start({}, { requestTimeoutMs: 500 });
    const t0 = Date.now();
    const slow = partial(r.port, PATH, gitea('slow'), MAX, 10);
    const a = await slow.answer;
    expect(a.status).toBe(-1); // cut: no answer
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(r.synced).toEqual([]);
    expect(await counted(r, 'timeout')).toBe(1);
  });

  it('sockets are capped: one over maxConnections is closed at once', async () => {
    const r = await start({}, { maxConnections: 2 });
    const open = await Promise.all(
      [1, 2].map(
        () =>
          new Promise<ReturnType<typeof connect>>((resolve) => {
            const s = connect(r.port, '127.0.0.1', () => {
              resolve(s);
            });
          }),
      ),
    );
    await expect.poll(() => counted(r, 'overloaded'), { timeout: 2_000 }).toBe(0);
    const third = connect(r.port, '127.0.0.1');
    third.on('error', () => undefined);
    await new Promise<void>((resolve) => {
      third.on('close', () => {
        resolve();
      });
    });
    expect(await counted(r, 'overloaded')).toBe(1);
    for (const s of open) s.destroy();
  });

  it('refusals are counted and summed up in at most one log line per interval, naming no target', async () => {
    const r = await start({}, { summaryIntervalMs: 300 });
    const t0 = Date.now();
    for (let i = 0; i < 30; i++)
      await post(r.port, `/hooks/probe-${String(i)}/x`, gitea(`p-${String(i)}`), body);
    for (let i = 0; i < 5; i++) await post(r.port, PATH, gitea(`w-${String(i)}`, body, 'wrong'), body);
    const summed = (): Record<string, number> => {
      const out: Record<string, number> = {};
      for (const l of r.logs.lines)
        for (const [k, v] of Object.entries(l['refused'] as Record<string, number>))
          out[k] = (out[k] ?? 0) + v;
      return out;
    };
    await expect.poll(summed, { timeout: 5_000 }).toEqual({ unknown_target: 30, bad_signature: 5 });
    // One line per interval at most (35 refusals → a line or a few, never 35).
    expect(r.logs.lines.length).toBeLessThanOrEqual(Math.ceil((Date.now() - t0) / 300) + 1);
    expect(r.logs.lines.length).toBeLessThan(35);
    const text = JSON.stringify(r.logs.lines);
    expect(text).not.toContain('probe-');
    expect(text).not.toContain('previews');
    expect(await counted(r, 'unknown_target')).toBe(30);
    // Labels: only `result`.
    const m = await r.registry.getSingleMetric('pkonc_preview_webhook_requests_total')?.get();
    for (const v of m?.values ?? []) expect(Object.keys(v.labels)).toEqual(['result']);
  });

  it('unknown paths are 404, other methods 405', async () => {
    const r = await start();
    expect((await post(r.port, '/hooks/../x', gitea('u-2'), body)).status).toBe(404);
    expect((await post(r.port, '/other', gitea('u-3'), body)).status).toBe(404);
    const status = await new Promise<number>((resolve) => {
      request({ host: '127.0.0.1', port: r.port, path: PATH, method: 'GET' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      }).end();
    });
    expect(status).toBe(405);
    expect(r.lookups).toEqual([]);
  });
});

describe('preview webhook receiver: replays and other repositories (B13, R08)', () => {
  it('the same signed body with 20 new delivery ids syncs once; every repeat answers 200 "already received"', async () => {
    const r = await start();
    expect((await post(r.port, PATH, gitea('r-0'), body)).status).toBe(202);
    for (let i = 1; i <= 20; i++)
      expect(await post(r.port, PATH, gitea(`r-${String(i)}`), body)).toMatchObject({
        status: 200,
        text: 'already received',
      });
    // Without a delivery id at all: still the same body.
    const { 'x-gitea-delivery': _id, ...noId } = gitea('x');
    expect((await post(r.port, PATH, noId, body)).status).toBe(200);
    expect(r.synced).toHaveLength(1);
    expect(await counted(r, 'duplicate')).toBe(21);
    // Another body is another delivery, with or without a delivery id.
    const { 'x-gitea-delivery': _id2, ...noId2 } = gitea('y', pr(2));
    expect((await post(r.port, PATH, noId2, pr(2))).status).toBe(202);
    expect(r.synced.map((s) => s.key)).toEqual([sha256(body), sha256(pr(2))]);
  });

  it('a refused signature does not burn the body; a failed sync request forgets it (503, then accepted)', async () => {
    let fail = true;
    const synced: string[] = [];
    const r = await start(
      {},
      {
        onDelivery: (_ns, _name, key) => {
          if (fail) return Promise.reject(new Error('API down'));
          synced.push(key);
          return Promise.resolve();
        },
      },
    );
    expect((await post(r.port, PATH, gitea('a', body, 'wrong'), body)).status).toBe(401);
    expect((await post(r.port, PATH, gitea('b'), body)).status).toBe(503);
    fail = false;
    expect((await post(r.port, PATH, gitea('c'), body)).status).toBe(202);
    expect((await post(r.port, PATH, gitea('d'), body)).status).toBe(200);
    expect(synced).toEqual([sha256(body)]);
  });

  it('a signed delivery for another repository (or naming none) is accepted as authentic and ignored: 200, no sync, no base run', async () => {
    const r = await start({ reconcileBaseOnPush: true });
    const other = JSON.stringify({
      ref: 'refs/heads/main',
      repository: { clone_url: 'https://git.example.com/team/other.git' },
    });
    const push = (b: string): Record<string, string> => ({ ...gitea('o', b), 'x-gitea-event': 'push' });
    const a = await post(r.port, PATH, push(other), other);
    expect(a.status).toBe(200);
    expect(a.text).toContain('ignored');
    const otherHost = JSON.stringify({
      ref: 'refs/heads/main',
      repository: { clone_url: 'https://elsewhere.example.com/team/app.git' },
    });
    expect((await post(r.port, PATH, push(otherHost), otherHost)).status).toBe(200);
    const none = JSON.stringify({ zen: 'ping' });
    expect((await post(r.port, PATH, gitea('n', none), none)).status).toBe(200);
    expect(r.synced).toEqual([]);
    expect(r.pushed).toEqual([]);
    expect(await counted(r, 'ignored')).toBe(3);
    await receiver?.close();
    // While the base Stack (its repository) is unknown, nothing is done either.
    const unknown = await start({ repository: undefined });
    expect((await post(unknown.port, PATH, gitea('u'), body)).status).toBe(200);
    expect(unknown.synced).toEqual([]);
  });

  it('a push to the base branch asks for a base Stack run (keyed by the body) only with reconcileBaseOnPush; a repeat asks nothing more', async () => {
    const push = (ref: string, after: string): string =>
      JSON.stringify({ ref, after: after.repeat(20), repository: { clone_url: REPO } });
    const pushHeaders = (id: string, b: string): Record<string, string> => ({
      ...gitea(id, b),
      'x-gitea-event': 'push',
    });
    const off = await start();
    const main1 = push('refs/heads/main', 'a1');
    expect((await post(off.port, PATH, pushHeaders('p-1', main1), main1)).status).toBe(202);
    expect(off.pushed).toEqual([]);
    await receiver?.close();
    const on = await start({ reconcileBaseOnPush: true });
    const feature = push('refs/heads/feature', 'b1');
    expect((await post(on.port, PATH, pushHeaders('p-2', feature), feature)).status).toBe(202);
    expect(on.pushed).toEqual([]);
    expect((await post(on.port, PATH, pushHeaders('p-3', main1), main1)).status).toBe(202);
    expect((await post(on.port, PATH, pushHeaders('p-4', main1), main1)).status).toBe(200);
    expect(on.pushed).toEqual([{ preview: 'team/previews', key: sha256(main1) }]);
    expect(on.synced).toHaveLength(2);
  });

  it('an older push replayed after a newer one (forgotten as a body) syncs but asks for no base Stack run; so does a branch deletion', async () => {
    const commit = (c: string): string => c.repeat(40);
    const push = (before: string, after: string, extra: Record<string, unknown> = {}): string =>
      JSON.stringify({ ref: 'refs/heads/main', before, after, ...extra, repository: { clone_url: REPO } });
    const pushHeaders = (id: string, b: string): Record<string, string> => ({
      ...gitea(id, b),
      'x-gitea-event': 'push',
    });
    // One body remembered: the replay of the first push is not caught as a repeat.
    const r = await start({ reconcileBaseOnPush: true }, { replayEntriesPerTarget: 1 });
    const first = push(commit('1'), commit('a'));
    const second = push(commit('a'), commit('b'));
    expect((await post(r.port, PATH, pushHeaders('q-1', first), first)).status).toBe(202);
    expect((await post(r.port, PATH, pushHeaders('q-2', second), second)).status).toBe(202);
    expect((await post(r.port, PATH, pushHeaders('q-3', first), first)).status).toBe(202);
    // The same commit pushed again in another body (e.g. another pusher field) asks nothing either.
    const sameAgain = push(commit('a'), commit('b'), { pusher: { login: 'other' } });
    expect((await post(r.port, PATH, pushHeaders('q-4', sameAgain), sameAgain)).status).toBe(202);
    const deleted = push(commit('b'), commit('0'));
    expect((await post(r.port, PATH, pushHeaders('q-5', deleted), deleted)).status).toBe(202);
    expect(r.pushed.map((p) => p.key)).toEqual([sha256(first), sha256(second)]);
    expect(r.synced).toHaveLength(5);
    // A newer push still asks.
    const third = push(commit('b'), commit('c'));
    expect((await post(r.port, PATH, pushHeaders('q-6', third), third)).status).toBe(202);
    expect(r.pushed.map((p) => p.key)).toEqual([sha256(first), sha256(second), sha256(third)]);
  });

  it('GitLab: a push is ordered by `after`, or `checkout_sha` without it', async () => {
    const r = await start(
      { forge: 'gitlab', reconcileBaseOnPush: true, repository: REPO },
      { replayEntriesPerTarget: 1 },
    );
    const push = (fields: Record<string, unknown>): string =>
      JSON.stringify({
        object_kind: 'push',
        ref: 'refs/heads/main',
        ...fields,
        project: { git_http_url: REPO },
      });
    const headers = { 'x-gitlab-event': 'Push Hook', 'x-gitlab-token': SECRET };
    const first = push({ before: '1'.repeat(40), checkout_sha: 'a'.repeat(40) });
    const second = push({ before: 'a'.repeat(40), after: 'b'.repeat(40) });
    for (const b of [first, second, first]) expect((await post(r.port, PATH, headers, b)).status).toBe(202);
    expect(r.pushed.map((p) => p.key)).toEqual([sha256(first), sha256(second)]);
  });

  it('each target has its own replay memory: many deliveries to one do not evict those of another', async () => {
    const targets = new Set(['team/previews', 'team/other']);
    const r = await start(
      {},
      {
        replayEntriesPerTarget: 3,
        target: (ns, name) =>
          targets.has(`${ns}/${name}`)
            ? { forge: 'gitea', secret: SECRET, branch: 'main', reconcileBaseOnPush: false, repository: REPO }
            : undefined,
      },
    );
    expect((await post(r.port, '/hooks/team/other', gitea('v-0'), body)).status).toBe(202);
    for (let i = 2; i < 12; i++)
      expect((await post(r.port, PATH, gitea(`v-${String(i)}`, pr(i)), pr(i))).status).toBe(202);
    expect(await post(r.port, '/hooks/team/other', gitea('v-1'), body)).toMatchObject({
      status: 200,
      text: 'already received',
    });
    // The busy target's own memory is bounded: its oldest body is forgotten.
    expect((await post(r.port, PATH, gitea('v-12', pr(2)), pr(2))).status).toBe(202);
    expect((await post(r.port, PATH, gitea('v-13', pr(11)), pr(11))).status).toBe(200);
  });
});

describe('sameRepository (src/forge/address.ts)', () => {
  it.each([
    ['https://github.com/acme/app.git', 'git@github.com:Acme/App', true],
    ['https://github.com/acme/app', 'ssh://git@ssh.github.com:443/acme/app.git', true],
    ['http://127.0.0.1:3000/org/repo.git', 'http://127.0.0.1:3000/ORG/repo', true],
    ['https://h.example.com/gitea/org/repo.git', 'https://h.example.com/gitea/org/repo', true],
    ['https://github.com/acme/app', 'https://github.com/acme/app2', false],
    ['https://github.com/acme/app', 'https://github.com/other/app', false],
    ['https://github.com/acme/app', 'https://ghe.example.com/acme/app', false],
    ['https://gitlab.com/g/sub/app', 'https://gitlab.com/g/app', false],
    ['https://github.com/acme/app', 'not a url', false],
    ['https://github.com', 'https://github.com/', false],
  ])('%s vs %s → %s', (a, b, same) => {
    expect(sameRepository('github', a, b)).toBe(same);
  });
});
