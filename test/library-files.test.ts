/**
 * src/undici.ts and src/kube/prom.ts load undici's and prom-client's parts from their own files
 * (less memory than the packages' indexes). Each value must be the very one the package's index
 * exports — an upgrade that moves or renames a file fails here — and undici's `request` stand-in
 * must send what undici's own would.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as prom from 'prom-client';
import * as undici from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as ourProm from '../src/kube/prom.ts';
import * as ours from '../src/undici.ts';

/** Each value loaded from a library's file, and the same value from the package's index. */
const FROM_FILES: readonly [string, unknown, unknown][] = [
  ['undici Agent', ours.Agent, undici.Agent],
  ['undici ProxyAgent', ours.ProxyAgent, undici.ProxyAgent],
  ['undici buildConnector', ours.buildConnector, undici.buildConnector],
  ['undici Response', ours.Response, undici.Response],
  ['prom-client Registry', ourProm.Registry, prom.Registry],
  ['prom-client Counter', ourProm.Counter, prom.Counter],
  ['prom-client Gauge', ourProm.Gauge, prom.Gauge],
  ['prom-client Histogram', ourProm.Histogram, prom.Histogram],
  ['prom-client collectDefaultMetrics', ourProm.collectDefaultMetrics, prom.collectDefaultMetrics],
];

it.each(FROM_FILES)("%s is the package index's own", (_name, fromFile, fromIndex) => {
  expect(fromFile).toBe(fromIndex);
});

describe('undici from its files', () => {
  it('gives every Dispatcher the API the index gives it (ProxyAgent tunnels with connect)', () => {
    const agent = new ours.Agent();
    expect(typeof (agent as unknown as { connect: unknown }).connect).toBe('function');
    expect((agent as unknown as { request: unknown }).request).toBe(
      (new undici.Agent() as unknown as { request: unknown }).request,
    );
  });

  describe('request and fetch', () => {
    const seen: { method: string; url: string; body: string }[] = [];
    const server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', body });
        res.writeHead(201, { 'content-type': 'text/plain', 'x-seen': String(seen.length) });
        res.end(`answer ${String(seen.length)}`);
      });
    });
    let origin = '';
    const agent = new ours.Agent();
    beforeAll(async () => {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      origin = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
    });
    afterAll(async () => {
      await agent.close();
      await new Promise((r) => server.close(r));
    });

    it('request sends the path with its query, GET without a body and PUT with one, as undici does', async () => {
      seen.length = 0;
      const a = await ours.request(`${origin}/a/b?x=1&y=%20`, { dispatcher: agent });
      expect(a.statusCode).toBe(201);
      expect(a.headers['x-seen']).toBe('1');
      expect(await a.body.text()).toBe('answer 1');
      const b = await ours.request(new URL(`${origin}/c`), { dispatcher: agent, body: 'hello' });
      await b.body.dump();
      const c = await ours.request(`${origin}/d`, { dispatcher: agent, method: 'POST', body: '{}' });
      await c.body.dump();
      // undici's own request, for the same three calls
      const u = [
        await undici.request(`${origin}/a/b?x=1&y=%20`, { dispatcher: agent }),
        await undici.request(new URL(`${origin}/c`), { dispatcher: agent, body: 'hello' }),
        await undici.request(`${origin}/d`, { dispatcher: agent, method: 'POST', body: '{}' }),
      ];
      for (const r of u) await r.body.dump();
      expect(seen).toEqual([
        { method: 'GET', url: '/a/b?x=1&y=%20', body: '' },
        { method: 'PUT', url: '/c', body: 'hello' },
        { method: 'POST', url: '/d', body: '{}' },
        { method: 'GET', url: '/a/b?x=1&y=%20', body: '' },
        { method: 'PUT', url: '/c', body: 'hello' },
        { method: 'POST', url: '/d', body: '{}' },
      ]);
    });

    it('request refuses a URL that is not absolute', async () => {
      await expect(ours.request('/relative', { dispatcher: agent })).rejects.toThrow(TypeError);
    });

    it('fetch goes through the given dispatcher', async () => {
      seen.length = 0;
      const res = await ours.fetch(`${origin}/f?q=2`, { dispatcher: agent });
      expect(res.status).toBe(201);
      expect(await res.text()).toBe('answer 1');
      expect(seen).toEqual([{ method: 'GET', url: '/f?q=2', body: '' }]);
    });
  });
});

describe('prom-client from its files', () => {
  it('default metrics register on a registry of ours', async () => {
    const r = new ourProm.Registry();
    ourProm.collectDefaultMetrics({ register: r });
    const text = await r.metrics();
    expect(text).toContain('process_cpu_seconds_total');
    expect(text).toContain('nodejs_heap_size_used_bytes');
  });
});
