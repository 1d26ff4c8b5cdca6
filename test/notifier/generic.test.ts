import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { EVENT_ID_HEADER, genericPayload } from '../../src/notifier/generic.ts';
import { hmacSignature } from '../../src/notifier/generic-hmac.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { createNotifier } from '../../src/provider-types.ts';
import type { Notifier } from '../../src/notifier/types.ts';
import { makeTestPKI, type TestPKI } from '../support/pki.ts';
import { startProxy, type TestProxy } from '../support/proxy.ts';
import { startReceiver, type ReceivedRequest, type TestReceiver } from '../support/receiver.ts';
import { resolved, sampleEvent } from './fixtures.ts';

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
function notifier(p: ResolvedProvider): Notifier {
  const n = createNotifier(p, { http: new ProviderHttp(p) });
  cleanups.push(() => n.close());
  return n;
}
async function failure(fn: () => Promise<unknown>): Promise<ProviderError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError, got success');
}

/** What a receiver does with generic-hmac: recompute the HMAC over the raw bytes and compare in constant time. */
function verifies(req: ReceivedRequest, key: string): boolean {
  const header = req.headers['x-signature'];
  if (typeof header !== 'string' || !header.startsWith('sha256=')) return false;
  const got = Buffer.from(header.slice('sha256='.length), 'hex');
  const want = createHmac('sha256', key).update(req.raw).digest();
  return got.length === want.length && timingSafeEqual(got, want);
}

const rendered = { message: 'Update update-abc of team-a/web succeeded' };

describe('generic', () => {
  it("posts Flux's generic payload with the rendered message, JSON content type and the event id header", async () => {
    const r = await receiver();
    const n = notifier(resolved({ address: `${r.url}/events` }));
    await n.send(sampleEvent, rendered);
    expect(r.requests).toHaveLength(1);
    const req = r.requests[0]!;
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/events');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers[EVENT_ID_HEADER.toLowerCase()]).toBe(sampleEvent.id);
    expect(req.headers['x-signature']).toBeUndefined();
    expect(req.headers.authorization).toBeUndefined();
    expect(JSON.parse(req.body)).toEqual({
      involvedObject: {
        apiVersion: 'auto.pulumi.com/v1alpha1',
        kind: 'Update',
        namespace: 'team-a',
        name: 'update-abc',
        uid: '6f1c2d9e-0000-4000-8000-0000000000aa',
      },
      severity: 'info',
      timestamp: '2026-05-01T12:00:00Z',
      message: rendered.message,
      reason: 'UpdateSucceeded',
      metadata: {
        revision: 'main@sha1:0123456789abcdef0123456789abcdef01234567',
        commit: '0123456789abcdef0123456789abcdef01234567',
      },
      reportingController: 'pko-notification-controller',
      id: sampleEvent.id,
    });
    expect(req.body).toBe(genericPayload(sampleEvent, rendered));
  });

  it("sends the custom headers from the Provider's Secret", async () => {
    const r = await receiver();
    const n = notifier(
      resolved({
        address: r.url,
        headers: { 'X-Api-Key': 'k-123456', Authorization: 'Token abcdef' },
        secretValues: ['k-123456', 'Token abcdef'],
      }),
    );
    await n.send(sampleEvent, rendered);
    expect(r.requests[0]!.headers['x-api-key']).toBe('k-123456');
    expect(r.requests[0]!.headers.authorization).toBe('Token abcdef');
  });

  it('uses HTTP basic auth when the Secret has username and password', async () => {
    const r = await receiver();
    const n = notifier(
      resolved({ address: r.url, username: 'bot', password: 'hunter2-long', secretValues: ['hunter2-long'] }),
    );
    await n.send(sampleEvent, rendered);
    expect(r.requests[0]!.headers.authorization).toBe(
      `Basic ${Buffer.from('bot:hunter2-long').toString('base64')}`,
    );
  });

  it('surfaces endpoint failures as ProviderErrors (401 final, 503 retryable with Retry-After)', async () => {
    const r = await receiver();
    r.respondWith([{ status: 401 }, { status: 503, headers: { 'retry-after': '7' } }]);
    const n = notifier(resolved({ address: r.url }));
    const e1 = await failure(() => n.send(sampleEvent, rendered));
    expect([e1.status, e1.retryable]).toEqual([401, false]);
    const e2 = await failure(() => n.send(sampleEvent, rendered));
    expect([e2.status, e2.retryable, e2.retryAfterMs]).toEqual([503, true, 7000]);
  });

  it('close() closes its HTTP client', async () => {
    const r = await receiver();
    const p = resolved({ address: r.url });
    const n = createNotifier(p, { http: new ProviderHttp(p) });
    await n.close();
    const e = await failure(() => n.send(sampleEvent, rendered));
    expect(e.code).toBe('CLOSED');
    expect(r.requests).toHaveLength(0);
  });
});

describe('generic-hmac', () => {
  const key = 'hmac-key-0123456789abcdef';

  it('signs the exact body bytes with HMAC-SHA256 keyed by the token (X-Signature: sha256=<hex>)', async () => {
    const r = await receiver();
    const n = notifier(resolved({ type: 'generic-hmac', address: r.url, token: key, secretValues: [key] }));
    await n.send(sampleEvent, rendered);
    await n.send(sampleEvent, { message: 'a different message: ünïcödé ✓' });
    const [a, b] = r.requests as [ReceivedRequest, ReceivedRequest];
    expect(a.headers['x-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verifies(a, key)).toBe(true);
    expect(verifies(b, key)).toBe(true);
    expect(verifies(a, 'another-key-000')).toBe(false);
    expect(b.headers['x-signature']).not.toBe(a.headers['x-signature']);
    expect(a.headers['x-signature']).toBe(hmacSignature(key, a.body));
    // same payload and event id header as generic
    expect(a.body).toBe(genericPayload(sampleEvent, rendered));
    expect(a.headers['x-pko-event-id']).toBe(sampleEvent.id);
    expect(a.headers['content-type']).toBe('application/json');
    // a tampered body no longer verifies
    expect(verifies({ ...a, raw: Buffer.from(a.body.replace('succeeded', 'failed')) }, key)).toBe(false);
  });

  it('refuses a Provider without a token', () => {
    const p = resolved({ type: 'generic-hmac', address: 'http://127.0.0.1:9/x' });
    expect(() => createNotifier(p)).toThrow(/has no key 'token'/);
  });

  it('a 401 echoing the HMAC key, on a Secret-held address, leaks neither (F23)', async () => {
    const r = await receiver();
    const address = `${r.url}/hooks/T000/B000/XXXXSECRET`;
    r.respondWith([{ status: 401, body: `bad signature for key ${key} at ${address}` }]);
    const n = notifier(
      resolved({
        type: 'generic-hmac',
        address,
        addressFromSecret: true,
        token: key,
        secretValues: [address, key],
      }),
    );
    const e = await failure(() => n.send(sampleEvent, rendered));
    expect(e.status).toBe(401);
    expect(e.retryable).toBe(false);
    for (const text of [e.message, e.stack ?? '']) {
      expect(text).not.toContain(key);
      expect(text).not.toContain('XXXXSECRET');
    }
  });
});

describe('generic and generic-hmac over TLS and proxies (F08, F09)', () => {
  const key = 'hmac-key-0123456789abcdef';
  const auth = { username: 'proxyuser', password: 'proxy-Pa55word' };

  it('a private-CA endpoint fails with TLS naming certSecretRef until tls.ca is set, then succeeds', async () => {
    const r = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    for (const type of ['generic', 'generic-hmac'] as const) {
      const base = { type, address: `${r.url}/hook`, token: key, secretValues: [key] };
      const e = await failure(() => notifier(resolved(base)).send(sampleEvent, rendered));
      expect([e.code, e.retryable]).toEqual(['TLS', true]);
      expect(e.message).toContain('spec.certSecretRef');
      await notifier(resolved({ ...base, tls: { ca: pki.caPem } })).send(sampleEvent, rendered);
    }
    expect(r.requests.map((q) => q.headers['x-signature'] === undefined)).toEqual([true, false]);
    expect(verifies(r.requests[1]!, key)).toBe(true);
  });

  it('every request goes through the proxy, for http and https endpoints', async () => {
    const plain = await receiver();
    const secure = await receiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    const px = await proxy({ auth });
    for (const type of ['generic', 'generic-hmac'] as const) {
      for (const target of [plain, secure]) {
        await notifier(
          resolved({
            type,
            address: `${target.url}/hook`,
            token: key,
            tls: { ca: pki.caPem },
            proxy: { address: px.url, ...auth },
            secretValues: [key, auth.password, px.url],
          }),
        ).send(sampleEvent, rendered);
      }
    }
    expect(px.seen).toEqual([
      `POST ${plain.url}/hook`,
      `CONNECT ${new URL(secure.url).host}`,
      `POST ${plain.url}/hook`,
      `CONNECT ${new URL(secure.url).host}`,
    ]);
    expect(px.rejected()).toBe(0);
    expect(plain.requests).toHaveLength(2);
    expect(secure.requests).toHaveLength(2);
    expect(verifies(plain.requests[1]!, key)).toBe(true);
    expect(verifies(secure.requests[1]!, key)).toBe(true);
  });
});
