/**
 * B09 — the egress policy (src/notifier/egress.ts): every form of a refused address is refused,
 * private ranges stay allowed, operator lists confine further, and refusals happen before any
 * byte reaches the endpoint (checked against real sockets on 127.0.0.1: the loopback refusal
 * is the one a test can observe without leaving the machine).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { EgressPolicy } from '../../src/notifier/egress.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { startProxy } from '../support/proxy.ts';
import { resolved } from './fixtures.ts';

const none = { allowCIDRs: [], denyCIDRs: [], allowHosts: [], denyHosts: [] };
const production = new EgressPolicy({ allowLoopback: false, ...none });
const dev = new EgressPolicy({ allowLoopback: true, ...none });

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function receiver(): Promise<TestReceiver> {
  const r = await startReceiver();
  cleanups.push(() => r.close());
  return r;
}

function client(address: string, policy: EgressPolicy, extra: Parameters<typeof resolved>[0] = { address }) {
  const h = new ProviderHttp(resolved({ ...extra, address }), { egress: policy });
  cleanups.push(() => h.close());
  return h;
}

async function failure(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}

describe('B09: refused addresses, in every form', () => {
  it.each([
    ['169.254.169.254', /link-local/],
    ['169.254.170.2', /link-local/],
    ['100.100.100.200', /metadata/],
    ['fd00:ec2::254', /metadata/],
    ['fe80::1', /link-local/],
    ['::ffff:169.254.169.254', /link-local/],
    ['::ffff:a9fe:a9fe', /link-local/],
    ['64:ff9b::a9fe:a9fe', /link-local/],
    ['2002:a9fe:a9fe::1', /link-local/],
    ['::a9fe:a9fe', /link-local/],
    ['0.0.0.0', /this network/],
    ['::', /unspecified/],
    ['127.0.0.1', /loopback/],
    ['127.1.2.3', /loopback/],
    ['::1', /loopback/],
    ['::ffff:127.0.0.1', /loopback/],
    ['224.0.0.251', /multicast/],
    ['255.255.255.255', /reserved/],
  ])('%s is refused (%s)', (ip, why) => {
    expect(production.refuseAddress(ip)).toMatch(why);
  });

  it.each([
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254'],
    ['http://2852039166/latest/meta-data/', 'decimal'],
    ['http://0xa9fea9fe/', 'hex'],
    ['http://0251.0376.0251.0376/', 'octal'],
    ['http://0xa9.254.0251.0376/', 'mixed'],
    ['http://[::ffff:169.254.169.254]/', 'IPv4-mapped IPv6'],
    ['http://[::ffff:a9fe:a9fe]:80/', 'IPv4-mapped IPv6, hex'],
    ['http://[fd00:ec2::254]/', 'AWS IPv6 metadata'],
    ['http://metadata.google.internal/computeMetadata/v1/', 'GCP metadata name'],
    ['http://METADATA.GOOGLE.INTERNAL./', 'GCP metadata name, upper case, trailing dot'],
    ['http://127.0.0.1:8080/', 'loopback'],
    ['http://[::1]:8080/', 'IPv6 loopback'],
    ['http://0.0.0.0:8080/', 'this network'],
  ])('URL %s is refused (%s)', (url) => {
    expect(production.refuseURL(url)).toBeDefined();
  });

  it.each(['10.0.0.7', '172.16.4.4', '192.168.1.1', 'fd12:3456::1', '100.64.0.1', '8.8.8.8', '2001:db8::1'])(
    '%s (private, CGNAT or public) is allowed by default',
    (ip) => {
      expect(production.refuseAddress(ip)).toBeUndefined();
    },
  );

  it('--egress-allow-loopback allows loopback and nothing else', () => {
    expect(dev.refuseAddress('127.0.0.1')).toBeUndefined();
    expect(dev.refuseAddress('::1')).toBeUndefined();
    expect(dev.refuseAddress('169.254.169.254')).toMatch(/link-local/);
    expect(dev.refuseURL('http://metadata.google.internal/')).toBeDefined();
  });

  it('operator lists confine further and never re-open a default refusal', () => {
    const p = new EgressPolicy({
      allowLoopback: false,
      allowCIDRs: ['10.0.0.0/8', '169.254.0.0/16'],
      denyCIDRs: ['10.9.0.0/16'],
      allowHosts: ['*.example.com', '10.*'],
      denyHosts: ['secret.example.com'],
    });
    expect(p.refuseAddress('10.1.2.3')).toBeUndefined();
    expect(p.refuseAddress('10.9.0.1')).toMatch(/--egress-deny-cidrs/);
    expect(p.refuseAddress('192.168.1.1')).toMatch(/--egress-allow-cidrs/);
    expect(p.refuseAddress('169.254.169.254')).toMatch(/link-local/);
    expect(p.refuseHost('git.example.com')).toBeUndefined();
    expect(p.refuseHost('GIT.Example.com')).toBeUndefined();
    expect(p.refuseHost('secret.example.com')).toMatch(/--egress-deny-hosts/);
    expect(p.refuseHost('example.org')).toMatch(/--egress-allow-hosts/);
  });
});

describe('B09: refused before anything is sent', () => {
  it('a loopback receiver gets no request without --egress-allow-loopback (literal address)', async () => {
    const r = await receiver();
    const e = await failure(
      client(r.url, production).request(`${r.url}/hook`, { method: 'POST', body: '{}' }),
    );
    expect([e.code, e.retryable]).toEqual(['EGRESS_DENIED', false]);
    expect(e.message).toMatch(/127\.0\.0\.1 is loopback/);
    expect(e.message).toMatch(/egress policy/);
    expect(r.requests).toHaveLength(0);
  });

  it('a host name is checked on what it resolves to (localhost → loopback), at connect time', async () => {
    const r = await receiver();
    const url = r.url.replace('127.0.0.1', 'localhost');
    const e = await failure(client(url, production).request(`${url}/hook`, { method: 'POST', body: '{}' }));
    expect(e.code).toBe('EGRESS_DENIED');
    expect(e.message).toMatch(/localhost resolves to (127\.0\.0\.1|::1), which is loopback/);
    expect(r.requests).toHaveLength(0);
  });

  it('the fetch given to client libraries obeys the policy too', async () => {
    const r = await receiver();
    const e = await failure(client(r.url, production).fetch(`${r.url}/api`, { method: 'GET' }));
    expect(e.code).toBe('EGRESS_DENIED');
    expect(r.requests).toHaveLength(0);
  });

  it('with --egress-allow-loopback the same receiver is reached', async () => {
    const r = await receiver();
    const res = await client(r.url, dev).request(`${r.url}/hook`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(200);
    expect(r.requests).toHaveLength(1);
  });

  it('through a proxy: a refused target is not even handed to the proxy, nor is a refused proxy used', async () => {
    const proxy = await startProxy();
    cleanups.push(() => proxy.close());
    const viaProxy = (policy: EgressPolicy, address: string) =>
      client(address, policy, { address, proxy: { address: proxy.url } });
    const meta = await failure(
      viaProxy(dev, 'http://169.254.169.254/latest').request('http://169.254.169.254/latest', {
        method: 'GET',
      }),
    );
    expect(meta.code).toBe('EGRESS_DENIED');
    const name = await failure(
      viaProxy(dev, 'http://metadata.google.internal/').request('http://metadata.google.internal/', {
        method: 'GET',
      }),
    );
    expect(name.code).toBe('EGRESS_DENIED');
    // Without loopback, the proxy itself (on 127.0.0.1) is refused.
    const loopProxy = await failure(
      viaProxy(production, 'http://10.0.0.7/hook').request('http://10.0.0.7/hook', { method: 'GET' }),
    );
    expect(loopProxy.code).toBe('EGRESS_DENIED');
    expect(loopProxy.message).toMatch(/127\.0\.0\.1 is loopback/);
    expect(proxy.seen).toEqual([]);
  });
});
