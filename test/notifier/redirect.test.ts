/**
 * Redirects in the shared HTTP client (src/notifier/redirect.ts), case N07: a repository renamed
 * or transferred answers its old path with a redirect — GitHub 301 on GET and 307 on POST to
 * `/repositories/<id>/…` (docs.github.com "Repository redirects"), Gitea 301 for every method.
 * Same-origin redirects are followed, bounded, with the method and body kept for 307/308 (and
 * 301/302); credentials are never sent to another origin. And the transport's verdicts:
 * nothing sent (`unreachable`) versus sent without an answer (`ambiguous`).
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/notifier/errors.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { MAX_REDIRECTS } from '../../src/notifier/redirect.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { resolved } from './fixtures.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function receiver(): Promise<TestReceiver> {
  const r = await startReceiver();
  cleanups.push(() => r.close());
  return r;
}
function client(address: string, timeoutMs = 5_000): ProviderHttp {
  const h = new ProviderHttp(
    resolved({
      address,
      timeoutMs,
      headers: { Authorization: 'token s3cret-token' },
      secretValues: ['s3cret-token'],
    }),
  );
  cleanups.push(() => h.close());
  return h;
}
async function failure(fn: () => Promise<unknown>): Promise<ProviderError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

describe('N07: redirects from renamed or transferred repositories', () => {
  it('status GET answers 301, status POST answers 307, both to the same origin: followed, method and body kept, the status lands', async () => {
    const r = await receiver();
    const sha = 'a'.repeat(40);
    r.respondWith([
      { status: 307, headers: { location: `/repositories/42/statuses/${sha}` } },
      { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":1}' },
      { status: 301, headers: { location: `${r.url}/repositories/42/commits/${sha}/statuses` } },
      { status: 200, headers: { 'content-type': 'application/json' }, body: '[]' },
    ]);
    const h = client(r.url);
    const body = JSON.stringify({ state: 'success', context: 'pko/x' });
    const posted = await h.request(`${r.url}/repos/acme/app/statuses/${sha}`, { method: 'POST', body });
    expect(posted.status).toBe(201);
    const listed = await h.request(`${r.url}/repos/acme/app/commits/${sha}/statuses`, { method: 'GET' });
    expect(listed.status).toBe(200);
    expect(r.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      `POST /repos/acme/app/statuses/${sha}`,
      `POST /repositories/42/statuses/${sha}`,
      `GET /repos/acme/app/commits/${sha}/statuses`,
      `GET /repositories/42/commits/${sha}/statuses`,
    ]);
    const landed = r.requests[1];
    expect(landed?.body).toBe(body);
    expect(landed?.headers.authorization).toBe('token s3cret-token');
  });

  it('a permanent move (301/308) is remembered: later calls under the old path go to the new one', async () => {
    const r = await receiver();
    r.respondWith([{ status: 308, headers: { location: '/api/v1/repos/platform/app2/statuses/x' } }]);
    const h = client(r.url);
    await h.request(`${r.url}/api/v1/repos/acme/app/statuses/x`, { method: 'POST', body: '{}' });
    await h.request(`${r.url}/api/v1/repos/acme/app/pulls?state=open`, { method: 'GET' });
    await h.request(`${r.url}/api/v1/repos/acme/other/pulls`, { method: 'GET' });
    expect(r.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'POST /api/v1/repos/acme/app/statuses/x',
      'POST /api/v1/repos/platform/app2/statuses/x',
      'GET /api/v1/repos/platform/app2/pulls?state=open',
      'GET /api/v1/repos/acme/other/pulls',
    ]);
  });

  it('a temporary redirect (307) is not remembered; a 302/303 after a write is not followed (N13)', async () => {
    const r = await receiver();
    r.respondWith([
      { status: 307, headers: { location: '/b' } },
      { status: 200 },
      { status: 303, headers: { location: '/done' } },
      { status: 302, headers: { location: '/next' } },
      { status: 302, headers: { location: '/moved' } },
      { status: 200 },
    ]);
    const h = client(r.url);
    await h.request(`${r.url}/a`, { method: 'PATCH', body: '{"x":1}' });
    for (const code of [303, 302]) {
      const e = await failure(() =>
        h.request(`${r.url}/a`, {
          method: 'POST',
          body: '{"x":2}',
          headers: { 'Content-Type': 'application/json' },
        }),
      );
      expect([e.code, e.status, e.retryable, e.verdict.condition]).toEqual([
        'REDIRECT',
        code,
        false,
        'NotTheAPI',
      ]);
      expect(e.message).toMatch(
        /"look at this page".*not followed; set the Provider address \(or spec\.apiURL\)/,
      );
    }
    // A GET still follows a same-origin 302.
    await h.request(`${r.url}/c`, { method: 'GET' });
    expect(r.requests.map((q) => `${q.method} ${q.path} ${q.body}`)).toEqual([
      'PATCH /a {"x":1}',
      'PATCH /b {"x":1}',
      'POST /a {"x":2}',
      'POST /a {"x":2}',
      'GET /c ',
      'GET /moved ',
    ]);
  });

  it('N13: a redirect to a sign-in page is never followed, on the same host or another', async () => {
    const r = await receiver();
    r.respondWith([
      { status: 302, headers: { location: '/login?return_to=%2Fapi' } },
      { status: 302, headers: { location: 'https://sso.example.net/saml/login' } },
      { status: 301, headers: { location: '/users/sign_in' } },
    ]);
    const h = client(r.url);
    for (const method of ['POST', 'GET', 'GET'] as const) {
      const e = await failure(() =>
        h.request(`${r.url}/api/v3/x`, method === 'POST' ? { method, body: '{}' } : { method }),
      );
      expect([e.code, e.verdict.kind, e.verdict.condition]).toEqual([
        'REDIRECT',
        'auth',
        'AuthenticationFailed',
      ]);
      expect(e.message).toMatch(/redirects to a sign-in page \(.*\): not followed/);
      expect(e.message).not.toContain('return_to');
    }
    expect(r.requests.map((q) => q.path)).toEqual(['/api/v3/x', '/api/v3/x', '/api/v3/x']);
  });

  it('a repository named login (or sso, sessions, authorize, saml) that moved is followed, not taken for a sign-in page', async () => {
    const r = await receiver();
    const names = ['login', 'sso', 'sessions', 'authorize', 'saml'];
    r.respondWith(
      names.flatMap((n) => [
        { status: 301, headers: { location: `/api/v3/repos/platform/${n}/statuses/abc` } },
        { status: 200, headers: { 'content-type': 'application/json' }, body: '[]' },
      ]),
    );
    const h = client(r.url);
    for (const n of names) {
      const res = await h.request(`${r.url}/api/v3/repos/acme-${n}/${n}/statuses/abc`, { method: 'GET' });
      expect(res.status, n).toBe(200);
    }
    expect(r.requests.map((q) => q.path)).toEqual(
      names.flatMap((n) => [
        `/api/v3/repos/acme-${n}/${n}/statuses/abc`,
        `/api/v3/repos/platform/${n}/statuses/abc`,
      ]),
    );
  });

  it(`bounded: more than ${String(MAX_REDIRECTS)} hops is a final REDIRECT error`, async () => {
    const r = await receiver();
    r.respondWith(
      Array.from({ length: 10 }, (_, i) => ({ status: 302, headers: { location: `/hop/${String(i)}` } })),
    );
    const e = await failure(() => client(r.url).request(`${r.url}/start`, { method: 'GET' }));
    expect([e.code, e.retryable, e.verdict.kind]).toEqual(['REDIRECT', false, 'redirect']);
    expect(e.message).toMatch(/more than 5 times/);
    expect(r.requests).toHaveLength(1 + MAX_REDIRECTS);
  });

  it('credentials are never sent to another origin, nor to another scheme or port on the same host', async () => {
    const r = await receiver();
    const other = await receiver();
    r.respondWith([{ status: 307, headers: { location: `${other.url}/repositories/42/statuses/x` } }]);
    const h = client(r.url);
    const e = await failure(() =>
      h.request(`${r.url}/repos/acme/app/statuses/x`, { method: 'POST', body: '{}' }),
    );
    expect(e.code).toBe('REDIRECT');
    expect(other.requests).toHaveLength(0);
    // The fetch handed to client libraries (Octokit) returns the 3xx as it is.
    r.respondWith([{ status: 301, headers: { location: `${other.url}/x` } }]);
    const res = await h.fetch(`${r.url}/y`, { method: 'GET' });
    expect(res.status).toBe(301);
    await res.body?.cancel();
    expect(other.requests).toHaveLength(0);
  });
});

describe('answers that never came: unreachable (nothing sent) or ambiguous (sent)', () => {
  it('a refused connection is unreachable: nothing was sent', async () => {
    const s: Server = createServer();
    await new Promise<void>((res) => s.listen(0, '127.0.0.1', res));
    const { port } = s.address() as AddressInfo;
    await new Promise<void>((res) =>
      s.close(() => {
        res();
      }),
    );
    const e = await failure(() =>
      client(`http://127.0.0.1:${String(port)}`).request(`http://127.0.0.1:${String(port)}/x`, {
        method: 'POST',
        body: '{}',
      }),
    );
    expect(e.verdict).toEqual({ kind: 'unreachable', retry: true });
  });

  it('a request sent but never answered is ambiguous: the endpoint may have acted on it', async () => {
    const sockets = new Set<Socket>();
    const got: string[] = [];
    const s: Server = createServer((sock) => {
      sockets.add(sock);
      sock.on('data', (d: Buffer) => got.push(d.toString('utf8')));
    });
    await new Promise<void>((res) => s.listen(0, '127.0.0.1', res));
    cleanups.push(
      () =>
        new Promise<void>((res) => {
          for (const x of sockets) x.destroy();
          s.close(() => {
            res();
          });
        }),
    );
    const url = `http://127.0.0.1:${String((s.address() as AddressInfo).port)}`;
    const e = await failure(() =>
      client(url, 300).request(`${url}/chat.postMessage`, { method: 'POST', body: '{"text":"hi"}' }),
    );
    expect(e.code).toBe('TIMEOUT');
    expect(e.verdict).toEqual({ kind: 'ambiguous', retry: true });
    expect(e.message).toMatch(/the request was sent/);
    expect(got.join('')).toContain('{"text":"hi"}');
  });

  it('a connection reset after the request was written is ambiguous', async () => {
    const s: Server = createServer((sock) => {
      sock.once('data', () => sock.resetAndDestroy());
    });
    await new Promise<void>((res) => s.listen(0, '127.0.0.1', res));
    cleanups.push(
      () =>
        new Promise<void>((res) =>
          s.close(() => {
            res();
          }),
        ),
    );
    const url = `http://127.0.0.1:${String((s.address() as AddressInfo).port)}`;
    const e = await failure(() => client(url).request(`${url}/hook`, { method: 'POST', body: '{}' }));
    expect(e.code).toBe('NETWORK');
    expect(e.verdict.kind).toBe('ambiguous');
  });
});
