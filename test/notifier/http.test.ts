import { createServer as createHttpServer, type RequestListener } from 'node:http';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { fetch as undiciFetch, request as undiciRequest } from 'undici';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { ProviderHttp, USER_AGENT, type RequestFunction } from '../../src/notifier/http.ts';
import { makeTestPKI, type TestPKI } from '../support/pki.ts';
import { startProxy, type TestProxy } from '../support/proxy.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { resolved } from './fixtures.ts';

let pki: TestPKI;
beforeAll(async () => {
  pki = await makeTestPKI();
});

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function receiver(opts?: Parameters<typeof startReceiver>[0]): Promise<TestReceiver> {
  const r = await startReceiver(opts);
  cleanups.push(() => r.close());
  return r;
}
async function proxy(opts?: Parameters<typeof startProxy>[0]): Promise<TestProxy> {
  const p = await startProxy(opts);
  cleanups.push(() => p.close());
  return p;
}
function client(p: ResolvedProvider, opts?: ConstructorParameters<typeof ProviderHttp>[1]): ProviderHttp {
  const h = new ProviderHttp(p, opts);
  cleanups.push(() => h.close());
  return h;
}

/** Runs `fn`, expecting a ProviderError, and returns it. */
async function failure(fn: () => Promise<unknown>): Promise<ProviderError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError, got success');
}

/** A port on 127.0.0.1 that refuses connections (bound then released). */
async function closedPort(): Promise<number> {
  const s: Server = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) =>
    s.close(() => {
      r();
    }),
  );
  return port;
}

describe('ProviderHttp: requests', () => {
  it('sends User-Agent, the Secret headers, then the caller headers (which win), and returns the answer', async () => {
    const r = await receiver();
    r.respondWith([{ status: 201, headers: { 'x-answer': 'yes' }, body: '{"ok":true}' }]);
    const h = client(
      resolved({ address: r.url, headers: { 'X-Team': 'infra', 'x-override': 'from-secret' } }),
    );
    const res = await h.request(`${r.url}/hook`, {
      method: 'post',
      headers: { 'X-Override': 'from-caller', 'Content-Type': 'application/json' },
      body: '{"a":1}',
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-answer')).toBe('yes');
    expect(res.text).toBe('{"ok":true}');
    const got = r.requests[0]!;
    expect(got.method).toBe('POST');
    expect(got.path).toBe('/hook');
    expect(got.body).toBe('{"a":1}');
    expect(got.headers['user-agent']).toBe(USER_AGENT);
    expect(USER_AGENT).toMatch(/^pko-notification-controller\/\d+\.\d+\.\d+/);
    expect(got.headers['x-team']).toBe('infra');
    expect(got.headers['x-override']).toBe('from-caller');
    expect(got.headers['content-type']).toBe('application/json');
  });

  it('reuses one connection pool across requests', async () => {
    const r = await receiver();
    const h = client(resolved({ address: r.url }));
    for (let i = 0; i < 6; i++) await h.request(r.url, { method: 'GET' });
    expect(r.requests).toHaveLength(6);
    // Sequential requests on one pooled dispatcher reuse kept-alive connections (undici may
    // open a second one while the first is being released); one dispatcher per request would
    // open six.
    expect(new Set(r.requests.map((q) => q.remotePort)).size).toBeLessThanOrEqual(2);
  });

  it('returns statuses listed in acceptStatus instead of throwing', async () => {
    const r = await receiver();
    r.respondWith([
      { status: 304 },
      { status: 400, body: 'Cannot transition status via :run from :running' },
    ]);
    const h = client(resolved({ address: r.url }));
    expect((await h.request(r.url, { method: 'GET', acceptStatus: [304] })).status).toBe(304);
    const res = await h.request(r.url, { method: 'POST', body: '{}', acceptStatus: [400] });
    expect([res.status, res.text]).toEqual([400, 'Cannot transition status via :run from :running']);
  });

  it('does not follow a redirect to another origin (credentials stay with the configured host)', async () => {
    const r = await receiver();
    const other = await receiver();
    r.respondWith([{ status: 302, headers: { location: `${other.url}/elsewhere?sig=abc` } }]);
    const h = client(
      resolved({
        address: r.url,
        headers: { Authorization: 'Bearer abcdefgh' },
        secretValues: ['Bearer abcdefgh'],
      }),
    );
    const e = await failure(() => h.request(r.url, { method: 'POST', body: '{}' }));
    expect(e.code).toBe('REDIRECT');
    expect(e.retryable).toBe(false);
    expect(e.verdict).toEqual({ kind: 'redirect', retry: false });
    expect(e.message).toContain(`redirects to another origin (${other.url})`);
    expect(e.message).toContain('set the Provider address');
    expect(other.requests).toHaveLength(0);
  });

  it('refuses a successful answer larger than maxResponseBytes', async () => {
    const r = await receiver();
    r.respondWith([{ status: 200, body: 'x'.repeat(5000) }]);
    const h = client(resolved({ address: r.url }), { maxResponseBytes: 1000 });
    const e = await failure(() => h.request(r.url, { method: 'GET' }));
    expect([e.code, e.retryable]).toEqual(['RESPONSE_TOO_LARGE', false]);
  });

  it('fails with CLOSED after close()', async () => {
    const r = await receiver();
    const h = new ProviderHttp(resolved({ address: r.url }));
    await h.close();
    await h.close();
    const e = await failure(() => h.request(r.url, { method: 'GET' }));
    expect(e.code).toBe('CLOSED');
  });
});

/** An HTTP server answering with `handler` on 127.0.0.1; its base URL. */
async function httpServer(handler: RequestListener): Promise<string> {
  const s = createHttpServer(handler);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        s.closeAllConnections();
        s.close(() => {
          r();
        });
      }),
  );
  return `http://127.0.0.1:${String((s.address() as AddressInfo).port)}`;
}

describe('ProviderHttp: answers read through undici request, as fetch read them', () => {
  it('headers: any case, a repeated header joined with ", ", absent (or an Object name) null, entries as fetch', async () => {
    const url = await httpServer((_req, res) => {
      res.sendDate = false;
      res.setHeader('X-Multi', ['a', 'b c']);
      res.setHeader('Link', '<https://x.example/?page=2>; rel="next"');
      res.setHeader('Content-Type', 'application/json');
      res.end('{}');
    });
    const h = client(resolved({ address: url }));
    const res = await h.request(`${url}/x`, { method: 'GET' });
    const viaFetch = await undiciFetch(`${url}/x`);
    await viaFetch.text();
    for (const name of [
      'x-multi',
      'X-MULTI',
      'link',
      'content-type',
      'x-absent',
      'constructor',
      '__proto__',
    ]) {
      expect([name, res.headers.get(name)]).toEqual([name, viaFetch.headers.get(name)]);
    }
    expect(res.headers.get('x-multi')).toBe('a, b c');
    expect(res.headers.get('constructor')).toBeNull();
    expect([...res.headers.entries()]).toEqual([...viaFetch.headers.entries()]);
  });

  it('sends Accept: */* and a string body as text/plain unless the Secret or the caller name them', async () => {
    const r = await receiver();
    const h = client(resolved({ address: r.url }));
    await h.request(r.url, { method: 'POST', body: 'hi' });
    await h.request(r.url, { method: 'GET' });
    await h.request(r.url, {
      method: 'POST',
      body: '{}',
      headers: { accept: 'application/json', 'content-type': 'application/json' },
    });
    expect(r.requests.map((q) => [q.headers.accept, q.headers['content-type']])).toEqual([
      ['*/*', 'text/plain;charset=UTF-8'],
      ['*/*', undefined],
      ['application/json', 'application/json'],
    ]);
  });

  it('the timeout covers reading the body: headers then a stalled body fail with TIMEOUT, sent', async () => {
    const url = await httpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"ok":');
      // ...and nothing more.
    });
    const h = client(resolved({ address: url, timeoutMs: 300 }));
    const started = Date.now();
    const e = await failure(() => h.request(`${url}/hook`, { method: 'POST', body: '{}' }));
    expect(Date.now() - started).toBeLessThan(4000);
    expect([e.code, e.retryable]).toEqual(['TIMEOUT', true]);
    expect(e.verdict).toEqual({ kind: 'ambiguous', retry: true });
    expect(e.message).toMatch(/within 300ms \(spec\.timeout\) \(the request was sent/);
  });

  it('sends every hop through the injected request function; a permanent move is remembered', async () => {
    const r = await receiver();
    r.respondWith([{ status: 308, headers: { location: '/new/hook' } }, { status: 204 }, { status: 204 }]);
    const hops: { url: string; method: string; body: string | undefined }[] = [];
    const request: RequestFunction = (url, opts) => {
      hops.push({ url, method: opts.method, body: opts.body });
      return undiciRequest(url, opts);
    };
    const h = client(resolved({ address: r.url }), { request });
    expect((await h.request(`${r.url}/old/hook`, { method: 'POST', body: '{"n":1}' })).status).toBe(204);
    expect((await h.request(`${r.url}/old/hook`, { method: 'POST', body: '{"n":2}' })).status).toBe(204);
    expect(hops).toEqual([
      { url: `${r.url}/old/hook`, method: 'POST', body: '{"n":1}' },
      { url: `${r.url}/new/hook`, method: 'POST', body: '{"n":1}' },
      { url: `${r.url}/new/hook`, method: 'POST', body: '{"n":2}' },
    ]);
    expect(r.requests.map((q) => q.path)).toEqual(['/old/hook', '/new/hook', '/new/hook']);
  });
});

describe('ProviderHttp: HTTP errors', () => {
  it('401 is final and tells to check the Secret; a forge API error message is shown, bounded', async () => {
    const r = await receiver();
    r.respondWith([{ status: 401, body: '{"message":"Bad credentials"}' }]);
    const h = client(resolved({ type: 'gitea', address: r.url }));
    const e = await failure(() => h.request(`${r.url}/api`, { method: 'POST', body: '{}' }));
    expect([e.code, e.status, e.retryable, e.retryAfterMs]).toEqual(['HTTP_401', 401, false, undefined]);
    expect(e.message).toContain(`POST ${r.url}/api answered 401 Unauthorized: check the credentials`);
    expect(e.message).toContain("Provider's Secret (spec.secretRef)");
    expect(e.message).toContain('The endpoint said: Bad credentials');
    expect(e.message).not.toContain('{');
  });

  it('B09: a generic webhook answer is never shown; an unrecognised forge answer neither', async () => {
    const r = await receiver();
    const metadata =
      '{"AccessKeyId":"ASIAB09EXAMPLE","SecretAccessKey":"b09-secret-key","Token":"IQoJb3JpZ2luX2VjEHAa"}';
    r.respondWith([
      { status: 403, body: '{"message":"internal detail from a generic receiver"}' },
      { status: 403, body: metadata },
      { status: 500, body: '<html><body>internal dashboard: db=10.0.0.7 user=admin</body></html>' },
      { status: 403, body: `{"message":"${'x'.repeat(5_000)}"}` },
    ]);
    const generic = client(resolved({ address: r.url }));
    const forge = client(resolved({ type: 'gitea', address: r.url }));
    const e1 = await failure(() => generic.request(r.url, { method: 'POST', body: '{}' }));
    expect(e1.message).not.toContain('internal detail');
    expect(e1.message).toMatch(/answered 403 Forbidden: [^.]+$/);
    const e2 = await failure(() => forge.request(r.url, { method: 'GET' }));
    for (const leak of ['ASIAB09EXAMPLE', 'b09-secret-key', 'IQoJb3JpZ2luX2VjEHAa'])
      expect(e2.message).not.toContain(leak);
    const e3 = await failure(() => forge.request(r.url, { method: 'GET' }));
    expect(e3.message).not.toMatch(/dashboard|10\.0\.0\.7|admin/);
    const e4 = await failure(() => forge.request(r.url, { method: 'GET' }));
    const said = /The endpoint said: (.*)$/.exec(e4.message)?.[1] ?? '';
    expect(said.length).toBeLessThanOrEqual(200);
    expect(said.endsWith('…')).toBe(true);
  });

  it('other 4xx are final; 408, 409, 429 and 5xx are retryable', async () => {
    const r = await receiver();
    const statuses = [400, 403, 404, 422, 408, 409, 429, 500, 502, 503];
    r.respondWith(statuses.map((status) => ({ status })));
    const h = client(resolved({ address: r.url }));
    const got: [number | undefined, boolean][] = [];
    for (const _ of statuses) {
      const e = await failure(() => h.request(r.url, { method: 'POST', body: '{}' }));
      got.push([e.status, e.retryable]);
    }
    expect(got).toEqual([
      [400, false],
      [403, false],
      [404, false],
      [422, false],
      [408, true],
      [409, true],
      [429, true],
      [500, true],
      [502, true],
      [503, true],
    ]);
  });

  it('reads Retry-After in seconds and as an HTTP-date, and x-ratelimit-reset', async () => {
    const r = await receiver();
    const now = Date.parse('2026-05-01T12:00:00Z');
    r.respondWith([
      { status: 429, headers: { 'retry-after': '7' } },
      { status: 503, headers: { 'retry-after': new Date(now + 20_000).toUTCString() } },
      {
        status: 429,
        headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(now / 1000 + 30) },
      },
      {
        status: 403,
        headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(now / 1000 + 45) },
      },
      { status: 403, body: '{"message":"You have exceeded a secondary rate limit."}' },
    ]);
    const h = client(resolved({ address: r.url }), { now: () => now });
    const send = (): Promise<ProviderError> =>
      failure(() => h.request(r.url, { method: 'POST', body: '{}' }));
    const e1 = await send();
    expect([e1.code, e1.retryable, e1.retryAfterMs]).toEqual(['HTTP_429', true, 7000]);
    expect(e1.message).toContain('will retry after 7s');
    expect((await send()).retryAfterMs).toBe(20_000);
    expect((await send()).retryAfterMs).toBe(30_000);
    const e4 = await send();
    expect([e4.status, e4.retryable, e4.retryAfterMs]).toEqual([403, true, 45_000]);
    const e5 = await send();
    expect([e5.status, e5.retryable, e5.retryAfterMs]).toEqual([403, true, 60_000]);
  });

  it('a slow endpoint fails with TIMEOUT after timeoutMs, retryable', async () => {
    const r = await receiver();
    r.respondWith([{ status: 200, delayMs: 3000 }]);
    const h = client(resolved({ address: r.url, timeoutMs: 300 }));
    const started = Date.now();
    const e = await failure(() => h.request(r.url, { method: 'POST', body: '{}' }));
    expect(Date.now() - started).toBeLessThan(2500);
    expect([e.code, e.retryable, e.status]).toEqual(['TIMEOUT', true, undefined]);
    expect(e.message).toContain('within 300ms (spec.timeout)');
  });

  it('a cancelled request fails with ABORTED', async () => {
    const r = await receiver();
    r.respondWith([{ status: 200, delayMs: 3000 }]);
    const h = client(resolved({ address: r.url }));
    const ac = new AbortController();
    setTimeout(() => {
      ac.abort();
    }, 100);
    const e = await failure(() => h.request(r.url, { method: 'GET', signal: ac.signal }));
    expect([e.code, e.retryable]).toEqual(['ABORTED', true]);
  });

  it('a refused connection fails with NETWORK, retryable', async () => {
    const port = await closedPort();
    const h = client(resolved({ address: `http://127.0.0.1:${port}` }));
    const e = await failure(() => h.request(`http://127.0.0.1:${port}/x`, { method: 'POST', body: '{}' }));
    expect([e.code, e.retryable]).toEqual(['NETWORK', true]);
    expect(e.message).toContain('ECONNREFUSED');
  });
});

describe('ProviderHttp: TLS (F08)', () => {
  it('without certSecretRef a private-CA endpoint fails with TLS, retryable, naming certSecretRef and ca.crt', async () => {
    const r = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    const h = client(resolved({ address: r.url }));
    const e = await failure(() => h.request(`${r.url}/hook`, { method: 'POST', body: '{}' }));
    expect([e.code, e.retryable, e.status]).toEqual(['TLS', true, undefined]);
    expect(e.message).toContain('spec.certSecretRef');
    expect(e.message).toContain("'ca.crt'");
    expect(e.message).toMatch(
      /UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY/,
    );
    expect(r.requests).toHaveLength(0);
  });

  it('with tls.ca the same endpoint is verified and answers', async () => {
    const r = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    const h = client(resolved({ address: r.url, tls: { ca: pki.caPem } }));
    expect((await h.request(`${r.url}/hook`, { method: 'POST', body: '{}' })).status).toBe(200);
    // localhost is in the certificate too
    const local = r.url.replace('127.0.0.1', 'localhost');
    expect((await h.request(local, { method: 'GET' })).status).toBe(200);
    expect(r.requests).toHaveLength(2);
  });

  it('a different CA does not verify the endpoint', async () => {
    const r = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    const h = client(resolved({ address: r.url, tls: { ca: pki.otherCaPem } }));
    const e = await failure(() => h.request(r.url, { method: 'GET' }));
    expect(e.code).toBe('TLS');
    expect(r.requests).toHaveLength(0);
  });

  it('presents the client certificate (tls.crt/tls.key) to an endpoint that demands one', async () => {
    const r = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem, clientCaPem: pki.caPem } });
    const without = client(resolved({ address: r.url, tls: { ca: pki.caPem } }));
    const e = await failure(() => without.request(r.url, { method: 'GET' }));
    expect(['TLS', 'NETWORK']).toContain(e.code);
    expect(e.retryable).toBe(true);
    const withCert = client(
      resolved({
        address: r.url,
        tls: { ca: pki.caPem, cert: pki.clientCertPem, key: pki.clientKeyPem },
        secretValues: [pki.clientKeyPem],
      }),
    );
    expect((await withCert.request(r.url, { method: 'GET' })).status).toBe(200);
    expect(r.requests).toHaveLength(1);
  });
});

describe('ProviderHttp: proxy (F09)', () => {
  const auth = { username: 'proxyuser', password: 'proxy-Pa55word' };

  it('sends http targets through the proxy as absolute-form requests, with proxy auth', async () => {
    const r = await receiver();
    const px = await proxy({ auth });
    const h = client(
      resolved({
        address: r.url,
        proxy: { address: px.url, ...auth },
        secretValues: [auth.password, px.url],
      }),
    );
    const res = await h.request(`${r.url}/hook`, { method: 'POST', body: '{"x":1}' });
    expect(res.status).toBe(200);
    expect(px.seen).toContain(`POST ${r.url}/hook`);
    expect(px.rejected()).toBe(0);
    expect(r.requests[0]!.body).toBe('{"x":1}');
    // the proxy credentials never reach the origin
    expect(r.requests[0]!.headers['proxy-authorization']).toBeUndefined();
  });

  it('tunnels https targets with CONNECT and verifies the origin against tls.ca inside the tunnel', async () => {
    const r = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    const px = await proxy({ auth });
    const h = client(
      resolved({
        address: r.url,
        tls: { ca: pki.caPem },
        proxy: { address: px.url, ...auth },
        secretValues: [auth.password, px.url],
      }),
    );
    expect((await h.request(`${r.url}/hook`, { method: 'POST', body: '{}' })).status).toBe(200);
    expect(px.seen).toEqual([`CONNECT ${new URL(r.url).host}`]);
    expect(r.requests).toHaveLength(1);

    // Without the CA the tunnel is made but the origin is not trusted.
    const noCa = client(
      resolved({ address: r.url, proxy: { address: px.url, ...auth }, secretValues: [auth.password] }),
    );
    const e = await failure(() => noCa.request(r.url, { method: 'GET' }));
    expect(e.code).toBe('TLS');
    expect(e.message).toContain('spec.certSecretRef');
  });

  it('wrong proxy credentials fail with PROXY (final), never reaching the origin or leaking the password', async () => {
    const r = await receiver();
    const rs = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    const px = await proxy({ auth });
    const bad = { username: 'proxyuser', password: 'wrong-Passw0rd' };
    for (const target of [r.url, rs.url]) {
      const h = client(
        resolved({
          address: target,
          tls: { ca: pki.caPem },
          proxy: { address: px.url, ...bad },
          secretValues: [bad.password, px.url],
        }),
      );
      const e = await failure(() => h.request(target, { method: 'POST', body: '{}' }));
      expect([e.code, e.retryable], target).toEqual(['PROXY', false]);
      expect(e.message).toContain('407');
      expect(e.message).toContain('spec.proxySecretRef');
      expect(e.message).not.toContain(bad.password);
    }
    expect(px.rejected()).toBe(2);
    expect(r.requests).toHaveLength(0);
    expect(rs.requests).toHaveLength(0);
  });

  it('an unreachable proxy fails with PROXY, retryable', async () => {
    const r = await receiver();
    const port = await closedPort();
    const h = client(resolved({ address: r.url, proxy: { address: `http://127.0.0.1:${port}` } }));
    const e = await failure(() => h.request(r.url, { method: 'POST', body: '{}' }));
    expect([e.code, e.retryable]).toEqual(['PROXY', true]);
    expect(r.requests).toHaveLength(0);
  });
});

describe('ProviderHttp: secret hygiene (F23)', () => {
  it('a 401 whose body echoes the token, on a Secret-held webhook address, leaks neither', async () => {
    const r = await receiver();
    const token = 'xoxb-SECRET-token-0123456789';
    const address = `${r.url}/hooks/T000/B000/XXXXSECRET`;
    r.respondWith([
      {
        status: 401,
        body: `invalid token "${token}" for ${address} (basic ${Buffer.from(token).toString('base64')})`,
      },
      {
        status: 500,
        body: `upstream failed at /hooks/T000/B000/XXXXSECRET with token=${encodeURIComponent(token)}`,
      },
    ]);
    const h = client(resolved({ address, addressFromSecret: true, token, secretValues: [address, token] }));
    for (const want of [401, 500]) {
      const e = await failure(() =>
        h.request(address, { method: 'POST', body: '{}', headers: { Authorization: `Bearer ${token}` } }),
      );
      expect(e.status).toBe(want);
      for (const text of [e.message, e.stack ?? '', JSON.stringify(e)]) {
        expect(text).not.toContain(token);
        expect(text).not.toContain(Buffer.from(token).toString('base64'));
        expect(text).not.toContain(encodeURIComponent(token));
        expect(text).not.toContain('/hooks/T000/B000/XXXXSECRET');
      }
      expect(e.message).toContain("the Provider address (key 'address' of its Secret)");
      expect(e.message.length).toBeLessThanOrEqual(512);
    }
  });

  it('a timeout or refused connection on a Secret-held address does not name it', async () => {
    const port = await closedPort();
    const address = `http://127.0.0.1:${port}/hooks/T000/B000/XXXXSECRET`;
    const h = client(resolved({ address, addressFromSecret: true, secretValues: [address] }));
    const e = await failure(() => h.request(`${address}?wait=true`, { method: 'POST', body: '{}' }));
    expect(e.code).toBe('NETWORK');
    expect(e.message).not.toContain('XXXXSECRET');
  });
});
