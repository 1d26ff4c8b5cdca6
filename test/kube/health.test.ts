import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { parseBindAddress, startServers, type RunningServers } from '../../src/kube/health.ts';

let servers: RunningServers | undefined;
afterEach(async () => {
  await servers?.close();
  servers = undefined;
});

describe('startServers', () => {
  it('serves /healthz, /readyz and /metrics on their own ports', async () => {
    const registry = new Registry();
    new Counter({ name: 'pkonc_test_total', help: 'test', registers: [registry] }).inc(3);
    let ready = { ok: false, message: 'informer stacks: not synced' };
    servers = await startServers({
      metricsBindAddress: '127.0.0.1:0',
      healthProbeBindAddress: '127.0.0.1:0',
      registry,
      checks: { healthz: () => ({ ok: true, message: 'ok' }), readyz: () => ready },
    });
    expect(servers.metricsPort).toBeGreaterThan(0);
    expect(servers.probePort).toBeGreaterThan(0);
    expect(servers.probePort).not.toBe(servers.metricsPort);
    const probe = `http://127.0.0.1:${servers.probePort}`;

    const h = await fetch(`${probe}/healthz`);
    expect([h.status, await h.text()]).toEqual([200, 'ok\n']);
    const r1 = await fetch(`${probe}/readyz`);
    expect([r1.status, await r1.text()]).toEqual([503, 'informer stacks: not synced\n']);
    ready = { ok: true, message: 'ok' };
    const r2 = await fetch(`${probe}/readyz?verbose`);
    expect(r2.status).toBe(200);

    const m = await fetch(`http://127.0.0.1:${servers.metricsPort}/metrics`);
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toContain('text/plain');
    expect(await m.text()).toContain('pkonc_test_total 3');
    expect((await fetch(`${probe}/metrics`)).status).toBe(404);
    expect((await fetch(`${probe}/healthz`, { method: 'POST' })).status).toBe(405);
  });

  it('answers 503 "check failed" when a check throws', async () => {
    servers = await startServers({
      metricsBindAddress: '0',
      healthProbeBindAddress: '127.0.0.1:0',
      registry: new Registry(),
      checks: {
        healthz: () => {
          throw new Error('token=abc');
        },
        readyz: () => ({ ok: true, message: 'ok' }),
      },
    });
    expect(servers.metricsPort).toBe(0);
    const res = await fetch(`http://127.0.0.1:${servers.probePort}/healthz`);
    expect([res.status, await res.text()]).toEqual([503, 'check failed\n']);
  });

  it('fails when the port is taken', async () => {
    servers = await startServers({
      metricsBindAddress: '127.0.0.1:0',
      healthProbeBindAddress: '0',
      registry: new Registry(),
      checks: { healthz: () => ({ ok: true, message: 'ok' }), readyz: () => ({ ok: true, message: 'ok' }) },
    });
    await expect(
      startServers({
        metricsBindAddress: '0',
        healthProbeBindAddress: `127.0.0.1:${servers.metricsPort}`,
        registry: new Registry(),
        checks: { healthz: () => ({ ok: true, message: 'ok' }), readyz: () => ({ ok: true, message: 'ok' }) },
      }),
    ).rejects.toThrow(/EADDRINUSE/);
  });
});

describe('parseBindAddress', () => {
  it('parses host:port forms and rejects bad ones', () => {
    expect(parseBindAddress('0')).toBeUndefined();
    expect(parseBindAddress(':8080')).toEqual({ host: undefined, port: 8080 });
    expect(parseBindAddress('0.0.0.0:0')).toEqual({ host: '0.0.0.0', port: 0 });
    expect(parseBindAddress('[::1]:9440')).toEqual({ host: '::1', port: 9440 });
    expect(() => parseBindAddress('8080')).toThrow(/host:port/);
    expect(() => parseBindAddress('localhost:http')).toThrow(/invalid port/);
    expect(() => parseBindAddress('localhost:70000')).toThrow(/invalid port/);
  });
});
