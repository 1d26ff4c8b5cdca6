/**
 * The preview webhook receiver (src/preview/webhook.ts) over real HTTP on 127.0.0.1: valid
 * signatures of GitHub, Gitea and GitLab trigger a sync; a wrong or missing one is refused (401);
 * a replayed delivery id is refused (409); an oversized body is refused (413) — declared or
 * streamed — before any signature work; a push to the base branch asks for a base Stack run only
 * when enabled. Gitea's header shapes are the ones a real Gitea 1.27.3 sends (the end-to-end
 * test in gitea.int.test.ts uses real deliveries).
 */
import { createHmac } from 'node:crypto';
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { startWebhookReceiver, type WebhookReceiver, type WebhookTarget } from '../../src/preview/webhook.ts';

const SECRET = 'hook-secret-value';
const MAX = 4096;

let receiver: WebhookReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

async function start(target: Partial<WebhookTarget> = {}) {
  const synced: string[] = [];
  const pushed: string[] = [];
  receiver = await startWebhookReceiver({
    bindAddress: '127.0.0.1:0',
    maxBodyBytes: MAX,
    logger: createLogger({ level: 'silent' }),
    target: (ns, name) =>
      Promise.resolve(
        ns === 'team' && name === 'previews'
          ? { forge: 'gitea', secret: SECRET, branch: 'main', reconcileBaseOnPush: false, ...target }
          : undefined,
      ),
    onDelivery: (ns, name) => synced.push(`${ns}/${name}`),
    onPushToBase: (ns, name) => {
      pushed.push(`${ns}/${name}`);
      return Promise.resolve();
    },
  });
  return { synced, pushed, port: receiver.port };
}

/** POSTs `body`; `chunked` sends it without Content-Length. */
function post(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: string,
  opts: { chunked?: boolean } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...headers,
          ...(opts.chunked ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          resolve(res.statusCode ?? 0);
        });
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      // The receiver may close the connection after answering 413 while we still write.
      if (err.code === 'EPIPE' || err.code === 'ECONNRESET') resolve(-1);
      else reject(err);
    });
    if (opts.chunked) {
      for (let i = 0; i < body.length; i += 1024) req.write(body.slice(i, i + 1024));
      req.end();
    } else req.end(body);
  });
}

const hmac = (body: string, secret = SECRET): string =>
  createHmac('sha256', secret).update(body).digest('hex');
const PATH = '/hooks/team/previews';
const body = JSON.stringify({ action: 'opened', number: 1 });
const gitea = (id: string, b = body, secret = SECRET): Record<string, string> => ({
  'x-gitea-event': 'pull_request',
  'x-gitea-delivery': id,
  'x-gitea-signature': hmac(b, secret),
});

describe('preview webhook receiver', () => {
  it('Gitea: a valid signature triggers a sync (202)', async () => {
    const r = await start();
    expect(await post(r.port, PATH, gitea('d-1'), body)).toBe(202);
    expect(r.synced).toEqual(['team/previews']);
  });

  it('Gitea: a wrong signature, one over another body, or none is refused (401) and syncs nothing', async () => {
    const r = await start();
    expect(await post(r.port, PATH, gitea('d-1', body, 'another-secret'), body)).toBe(401);
    expect(await post(r.port, PATH, gitea('d-2', '{"other":1}'), body)).toBe(401);
    const { 'x-gitea-signature': _sig, ...unsigned } = gitea('d-3');
    expect(await post(r.port, PATH, unsigned, body)).toBe(401);
    expect(r.synced).toEqual([]);
  });

  it('a replayed delivery (same id) is refused (409); a refused signature does not burn the id', async () => {
    const r = await start();
    expect(await post(r.port, PATH, gitea('d-1', body, 'wrong'), body)).toBe(401);
    expect(await post(r.port, PATH, gitea('d-1'), body)).toBe(202);
    expect(await post(r.port, PATH, gitea('d-1'), body)).toBe(409);
    expect(await post(r.port, PATH, gitea('d-2'), body)).toBe(202);
    expect(r.synced).toEqual(['team/previews', 'team/previews']);
  });

  it('a signed delivery without a delivery id is refused (400)', async () => {
    const r = await start();
    const { 'x-gitea-delivery': _id, ...noId } = gitea('x');
    expect(await post(r.port, PATH, noId, body)).toBe(400);
    expect(r.synced).toEqual([]);
  });

  it('an oversized body is refused (413), declared by Content-Length or streamed chunked', async () => {
    const r = await start();
    const big = JSON.stringify({ pad: 'x'.repeat(MAX) });
    expect(await post(r.port, PATH, gitea('big-1', big), big)).toBe(413);
    const streamed = await post(r.port, PATH, gitea('big-2', big), big, { chunked: true });
    expect(streamed).toBe(413);
    expect(r.synced).toEqual([]);
    // The receiver still serves after refusing.
    expect(await post(r.port, PATH, gitea('ok'), body)).toBe(202);
  });

  it('GitHub: X-Hub-Signature-256 sha256=<hmac>; GitLab: X-Gitlab-Token, both verified', async () => {
    const gh = await start({ forge: 'github' });
    const ghHeaders = {
      'x-github-event': 'pull_request',
      'x-github-delivery': 'g-1',
      'x-hub-signature-256': `sha256=${hmac(body)}`,
    };
    expect(await post(gh.port, PATH, ghHeaders, body)).toBe(202);
    expect(
      await post(
        gh.port,
        PATH,
        { ...ghHeaders, 'x-github-delivery': 'g-2', 'x-hub-signature-256': hmac(body) },
        body,
      ),
    ).toBe(401);
    await receiver?.close();
    const gl = await start({ forge: 'gitlab' });
    const glHeaders = {
      'x-gitlab-event': 'Merge Request Hook',
      'x-gitlab-event-uuid': 'l-1',
      'x-gitlab-token': SECRET,
    };
    expect(await post(gl.port, PATH, glHeaders, body)).toBe(202);
    expect(
      await post(
        gl.port,
        PATH,
        { ...glHeaders, 'x-gitlab-event-uuid': 'l-2', 'x-gitlab-token': `${SECRET}x` },
        body,
      ),
    ).toBe(401);
    expect(await post(gl.port, PATH, glHeaders, body)).toBe(409);
  });

  it('unknown PullRequestPreviews and other paths are 404, other methods 405', async () => {
    const r = await start();
    expect(await post(r.port, '/hooks/team/other', gitea('u-1'), body)).toBe(404);
    expect(await post(r.port, '/hooks/../x', gitea('u-2'), body)).toBe(404);
    const status = await new Promise<number>((resolve) => {
      request({ host: '127.0.0.1', port: r.port, path: PATH, method: 'GET' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      }).end();
    });
    expect(status).toBe(405);
  });

  it('a push to the base branch asks for a base Stack run only with reconcileBaseOnPush', async () => {
    const push = (ref: string): string => JSON.stringify({ ref });
    const pushHeaders = (id: string, b: string): Record<string, string> => ({
      ...gitea(id, b),
      'x-gitea-event': 'push',
    });
    const off = await start();
    expect(
      await post(off.port, PATH, pushHeaders('p-1', push('refs/heads/main')), push('refs/heads/main')),
    ).toBe(202);
    expect(off.pushed).toEqual([]);
    await receiver?.close();
    const on = await start({ reconcileBaseOnPush: true });
    expect(
      await post(on.port, PATH, pushHeaders('p-2', push('refs/heads/feature')), push('refs/heads/feature')),
    ).toBe(202);
    expect(on.pushed).toEqual([]);
    expect(
      await post(on.port, PATH, pushHeaders('p-3', push('refs/heads/main')), push('refs/heads/main')),
    ).toBe(202);
    expect(on.pushed).toEqual(['team/previews']);
    expect(on.synced).toHaveLength(2);
  });
});
