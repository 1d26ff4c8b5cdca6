/**
 * The controller as a real OS process (test/support/controller-process.ts) against the test
 * control plane: it starts, becomes ready, serves /metrics, exits 0 on SIGTERM within the
 * shutdown timeout logging `stopped`, and with `--leader-elect` takes the Lease. Prints the idle
 * resident memory (for the project notes).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { createTestNamespace, kubeConfig } from './cluster.ts';
import { startControllerProcess, stopAll } from './controller-process.ts';

const MiB = 1024 * 1024;

afterAll(async () => {
  await stopAll();
});

describe('controller process', () => {
  it('starts, is ready, serves /metrics, and on SIGTERM exits 0 within the shutdown timeout', async () => {
    // Watch only a namespace of its own: other test files run controllers and Alerts in parallel.
    const own = await createTestNamespace('proc-idle');
    const t0 = performance.now();
    const p = await startControllerProcess({
      kubeconfig: inject('kubeconfig'),
      args: ['--shutdown-timeout=5s', `--watch-namespace=${own}`],
    });
    expect(p.pid).toBeGreaterThan(0);
    expect(p.probePort).toBeGreaterThan(0);
    expect(p.metricsPort).toBeGreaterThan(0);
    expect(p.metricsPort).not.toBe(p.probePort);
    await p.waitReady(30_000);
    const readyMs = performance.now() - t0;

    const healthz = await fetch(`http://127.0.0.1:${p.probePort}/healthz`);
    expect(healthz.status).toBe(200);
    const metrics = await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await metrics.text();
    expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(text).toMatch(/^nodejs_version_info\{version="v24\./m);

    const rssReady = await p.rssBytes();
    await sleep(5_000);
    const rssIdle = await p.rssBytes();
    const idleMetrics = await (await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`)).text();
    const gauge = (name: string): number =>
      Number(new RegExp(`^${name} (\\d+(?:\\.\\d+)?)`, 'm').exec(idleMetrics)?.[1] ?? NaN);
    console.log(
      `controller process (Node ${process.version}, src/main.ts via type stripping, one watched namespace, admin): ` +
        `ready in ${Math.round(readyMs)} ms; RSS ${(rssReady / MiB).toFixed(1)} MiB after ready, ` +
        `${(rssIdle / MiB).toFixed(1)} MiB after 5 s idle (V8 heap used ${(gauge('nodejs_heap_size_used_bytes') / MiB).toFixed(1)} MiB, ` +
        `external ${(gauge('nodejs_external_memory_bytes') / MiB).toFixed(1)} MiB)`,
    );
    expect(rssIdle).toBeGreaterThan(10 * MiB);
    expect(rssIdle).toBeLessThan(300 * MiB);

    const tStop = performance.now();
    p.kill('SIGTERM');
    const exit = await p.exited;
    const stopMs = performance.now() - tStop;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(stopMs).toBeLessThan(5_000);
    const shutting = await p.waitForLog((r) => r['msg'] === 'shutting down: draining in-flight work', 0);
    expect(shutting['signal']).toBe('SIGTERM');
    const stopped = await p.waitForLog((r) => r['msg'] === 'stopped', 0);
    expect(stopped['level']).toBe('info');
    await expect(p.rssBytes()).rejects.toThrow(/exited/);
    p.kill('SIGTERM'); // no-op after exit
  });

  it('with --leader-elect takes the Lease in the given namespace, logs "became leader", releases it on SIGTERM', async () => {
    const ns = await createTestNamespace('proc-lease');
    const p = await startControllerProcess({
      kubeconfig: inject('kubeconfig'),
      args: [
        '--leader-elect',
        `--watch-namespace=${ns}`,
        `--leader-election-namespace=${ns}`,
        '--leader-election-id=pko-nc-proc',
        '--shutdown-timeout=5s',
      ],
      env: { POD_NAME: 'proc-test-1' },
    });
    const became = await p.waitForLog((r) => r['msg'] === 'became leader', 30_000);
    expect(became['identity']).toBe('proc-test-1');
    const leases = kubeConfig('admin').makeApiClient(CoordinationV1Api);
    const lease = await leases.readNamespacedLease({ name: 'pko-nc-proc', namespace: ns });
    expect(lease.spec?.holderIdentity).toBe('proc-test-1');
    await p.waitReady(30_000);

    p.kill('SIGTERM');
    const exit = await p.exited;
    expect(exit, `last log lines:\n${p.logs().slice(-8).join('\n')}`).toEqual({ code: 0, signal: null });
    expect(p.logs().some((l) => l.includes('"msg":"stopped"'))).toBe(true);
    const released = await leases.readNamespacedLease({ name: 'pko-nc-proc', namespace: ns });
    expect(released.spec?.holderIdentity ?? '').toBe('');
  });

  it('a usage error rejects the start with the process output', async () => {
    await expect(
      startControllerProcess({ kubeconfig: inject('kubeconfig'), args: ['--log-level=loud'] }),
    ).rejects.toThrow(/exited \(code 2\)[\s\S]*--log-level must be one of/);
  });
});
