/**
 * Delivery-ledger write cost (not part of `npm test`): `npm run bench:ledger`.
 *
 * Starts a local control plane with our CRDs and drives the real ledger store (src/delivery/ledger.ts)
 * as the dispatcher does — one Alert, `BENCH_LEDGER_STACKS` Stacks (default `1000,10000`: each
 * size in turn, on a namespace of its own) — then measures what is written to the API server per
 * delivered event:
 *  1. fill: every Stack gets one delivered run (Started + Succeeded) — the state after a burst;
 *  2. steady: `BENCH_LEDGER_EVENTS` (default 2,000) further events, Started and Succeeded of new
 *     runs on Stacks picked at random, about `BENCH_LEDGER_RATE` per second (default 50), each
 *     awaited as the dispatcher awaits it;
 *  3. burst: the same number of events at once across Stacks (batched flushes).
 * Bytes are the sizes of the objects as stored (the JSON the API server returns for each write,
 * `Ledger.bytesWritten`), and etcd's own growth (`etcd_mvcc_db_total_size_in_bytes` is the file;
 * `etcd_debugging_mvcc_total_put_size_in_bytes`, when etcd exposes it, the bytes put). CPU is this
 * process's (user + system, `process.cpuUsage`) per write: the store, our API client and undici.
 *
 * Then, as the floor of that CPU, `BENCH_LEDGER_PUTS` (default 2,000) sequential PUTs of one object
 * of the same size, in alternating rounds: through our `kubeRequest`, and through a bare undici
 * `request` over HTTP/2 (undici 8's default, as the controller connects) and over HTTP/1.1; then
 * a quarter as many paced at `BENCH_LEDGER_RATE` — what one durable write costs the client on this
 * machine whatever the store around it, back to back and with the process idle in between.
 */
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Ledger, type LedgerAlertRef } from '../src/delivery/ledger.ts';
import { runHash, type EventRef } from '../src/delivery/ledger-entry.ts';
import { startControlPlane } from '../src/envtest/controlplane.ts';
import { kubeRequest, loadKubeConfig, objectPath } from '../src/kube/client.ts';
import { installCRDs, readCRDs, yamlFilesIn } from '../src/kube/crds.ts';
import { createLogger } from '../src/log.ts';
import { Agent, request } from 'undici';
import { KubeConfig } from '@kubernetes/client-node';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SIZES = (process.env.BENCH_LEDGER_STACKS ?? '1000,10000').split(',').map(Number);
const EVENTS = Number(process.env.BENCH_LEDGER_EVENTS ?? 2000);
const RATE = Number(process.env.BENCH_LEDGER_RATE ?? 50);
const PUTS = Number(process.env.BENCH_LEDGER_PUTS ?? 2000);

/** CPU ms of this process since `c0` (user + system). */
const cpuMs = (c0: NodeJS.CpuUsage): number => {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
};

async function etcdPutBytes(etcdURL: string): Promise<{ put?: number; db?: number }> {
  const text = await (await fetch(`${etcdURL}/metrics`)).text();
  const get = (name: string): number | undefined => {
    const m = new RegExp(`^${name} (\\S+)`, 'm').exec(text);
    return m?.[1] !== undefined ? Number(m[1]) : undefined;
  };
  const put = get('etcd_debugging_mvcc_total_put_size_in_bytes');
  const db = get('etcd_mvcc_db_total_size_in_bytes');
  return { ...(put !== undefined ? { put } : {}), ...(db !== undefined ? { db } : {}) };
}

async function pool<T>(items: readonly T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await fn(items[i++] as T);
    }),
  );
}

const fmt = (n: number): string => n.toLocaleString('en-US', { maximumFractionDigits: 0 });

async function main(): Promise<void> {
  const plane = await startControlPlane({});
  const kc = loadKubeConfig({ kubeconfig: plane.kubeconfigPath });
  const etcd = plane.etcdURL;
  try {
    await installCRDs(kc, await readCRDs(await yamlFilesIn(join(root, 'crds'))));
    const logger = createLogger({ level: 'warn' });
    console.log(`bench:ledger — Node ${process.version}, ${EVENTS} events per phase, steady at ~${RATE}/s`);
    console.log(
      'stacks | phase  | events | writes | bytes/event (stored objects) | etcd put bytes/event | objects | CPU ms/write',
    );
    for (const stacks of SIZES) {
      const ns = `bench-ledger-${stacks}`;
      await kubeRequest(kc, {
        method: 'POST',
        path: '/api/v1/namespaces',
        body: { metadata: { name: ns } },
      });
      const alertObj = await kubeRequest<{ metadata: { uid: string } }>(kc, {
        method: 'POST',
        path: objectPath({
          group: 'notification.pko.dev',
          version: 'v1alpha1',
          plural: 'alerts',
          namespace: ns,
        }),
        body: {
          apiVersion: 'notification.pko.dev/v1alpha1',
          kind: 'Alert',
          metadata: { name: 'all' },
          spec: { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] },
        },
      });
      const alert: LedgerAlertRef = { namespace: ns, name: 'all', uid: alertObj.metadata.uid };
      const ledger = new Ledger({ kubeConfig: kc, logger });
      await ledger.loadWithRetry(ns); // a new CRD's storage may still be initialising
      const uids = Array.from({ length: stacks }, () => randomUUID());
      let rv = 1000;
      const runOf = new Map<string, number>();
      /** The next run of `stack`: Started, then Succeeded, as a dispatcher records them. */
      const deliverRun = async (stack: string): Promise<void> => {
        const n = (runOf.get(stack) ?? 0) + 1;
        runOf.set(stack, n);
        const ref = (phase: EventRef['phase']): EventRef => ({
          run: runHash(`${stack}/app-${n}`),
          rv: rv++,
          phase,
        });
        const started = ref('started');
        await ledger.record(alert, stack, started);
        await ledger.record(alert, stack, { ...started, phase: 'succeeded' });
      };
      const phase = async (name: string, events: number, run: () => Promise<void>): Promise<void> => {
        const w0 = ledger.writes;
        const b0 = ledger.bytesWritten;
        const e0 = await etcdPutBytes(etcd);
        const c0 = process.cpuUsage();
        await run();
        const cpu = cpuMs(c0);
        await sleep(50);
        const e1 = await etcdPutBytes(etcd);
        const etcdPut =
          e0.put !== undefined && e1.put !== undefined ? fmt((e1.put - e0.put) / events) : 'n/a';
        console.log(
          `${fmt(stacks).padStart(6)} | ${name.padEnd(6)} | ${fmt(events).padStart(6)} | ${fmt(ledger.writes - w0).padStart(6)} | ${fmt((ledger.bytesWritten - b0) / events).padStart(28)} | ${etcdPut.padStart(20)} | ${String(ledger.objectCount).padStart(7)} | ${(cpu / Math.max(1, ledger.writes - w0)).toFixed(3).padStart(12)}`,
        );
      };
      await phase('fill', stacks * 2, () => pool(uids, 64, deliverRun));
      const pick = (): string => uids[Math.floor(Math.random() * uids.length)] as string;
      await phase('steady', EVENTS, async () => {
        const gap = 2000 / RATE; // one run = two events
        for (let i = 0; i < EVENTS / 2; i++) {
          const t = performance.now();
          await deliverRun(pick());
          const left = gap - (performance.now() - t);
          if (left > 0) await sleep(left);
        }
      });
      await phase('burst', EVENTS, async () => {
        const chosen = Array.from({ length: EVENTS / 2 }, pick);
        // One run per Stack at a time, as lanes do; many Stacks at once.
        const byStack = new Map<string, number>();
        for (const s of chosen) byStack.set(s, (byStack.get(s) ?? 0) + 1);
        await pool([...byStack], 256, async ([s, k]) => {
          for (let i = 0; i < k; i++) await deliverRun(s);
        });
      });
      await ledger.close();
    }
    await barePuts(kc, plane.kubeconfigPath);
    const db = await etcdPutBytes(etcd);
    if (db.db !== undefined) console.log(`etcd db file: ${(db.db / 1048576).toFixed(1)} MiB`);
  } finally {
    await plane.stop();
  }
}

/**
 * The floor of a ledger write's CPU: {@link PUTS} sequential PUTs of one ~1.8 KB DeliveryLedger
 * (the size the store writes), through our client and through bare undici over HTTP/2 and
 * HTTP/1.1, in two alternating rounds back to back and one round paced at {@link RATE} per second.
 */
async function barePuts(kc: ReturnType<typeof loadKubeConfig>, kubeconfigPath: string): Promise<void> {
  const ns = 'bench-ledger-puts';
  await kubeRequest(kc, { method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name: ns } } });
  const path = objectPath({
    group: 'notification.pko.dev',
    version: 'v1alpha1',
    plural: 'deliveryledgers',
    namespace: ns,
  });
  // The bare requests are handed the admin's token and CA as the bench:flux bare watcher is: read
  // by client-node (our KubeConfig keeps them to itself).
  const file = new KubeConfig();
  file.loadFromFile(kubeconfigPath);
  const cluster = file.getCurrentCluster();
  if (!cluster?.caData) throw new Error('the control plane kubeconfig has no cluster CA');
  const ca = Buffer.from(cluster.caData, 'base64').toString('utf8');
  const headers = {
    authorization: `Bearer ${file.getCurrentUser()?.token ?? ''}`,
    accept: 'application/json',
    'content-type': 'application/json',
  };
  const agents = { h2: new Agent({ connect: { ca } }), h1: new Agent({ connect: { ca }, allowH2: false }) };
  const body = (name: string, rv?: string): object => ({
    apiVersion: 'notification.pko.dev/v1alpha1',
    kind: 'DeliveryLedger',
    metadata: { name, ...(rv !== undefined ? { resourceVersion: rv } : {}) },
    spec: { alert: 'bench', shard: '0', entries: 'x'.repeat(1500) },
  });
  console.log(
    'one ~1.8 KB DeliveryLedger PUT at a time: client CPU ms per PUT (user + system), wall ms per PUT',
  );
  // Back to back twice, then paced at RATE/s (a wake-up per write, as a controller at that rate).
  for (const [round, paced] of [
    [1, false],
    [2, false],
    [3, true],
  ] as const) {
    const n = paced ? Math.ceil(PUTS / 4) : PUTS;
    for (const via of ['ours', 'undici HTTP/2', 'undici HTTP/1.1'] as const) {
      const name = `puts-${round}-${via.replace(/\W+/g, '-').toLowerCase()}`;
      const made = await kubeRequest<{ metadata: { resourceVersion: string } }>(kc, {
        method: 'POST',
        path,
        body: body(name),
      });
      let rv = made.metadata.resourceVersion;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        if (via === 'ours') {
          const r = await kubeRequest<{ metadata: { resourceVersion: string } }>(kc, {
            method: 'PUT',
            path: `${path}/${name}`,
            body: body(name, rv),
          });
          rv = r.metadata.resourceVersion;
        } else {
          const res = await request(`${cluster.server}${path}/${name}`, {
            method: 'PUT',
            headers,
            body: JSON.stringify(body(name, rv)),
            dispatcher: via === 'undici HTTP/2' ? agents.h2 : agents.h1,
          });
          const j = (await res.body.json()) as { metadata: { resourceVersion: string } };
          if (res.statusCode !== 200) throw new Error(`PUT answered ${res.statusCode}`);
          rv = j.metadata.resourceVersion;
        }
        const left = 1000 / RATE - (performance.now() - t);
        if (paced && left > 0) await sleep(left);
      }
      const cpu = cpuMs(c0);
      const how = paced ? `${fmt(n)} at ${RATE}/s` : `${fmt(n)} in a row`;
      console.log(
        `  ${how.padEnd(14)} ${via.padEnd(15)}: ${(cpu / n).toFixed(3)} CPU ms, ${((performance.now() - t0) / n).toFixed(2)} wall ms`,
      );
    }
  }
  await Promise.all([agents.h2.close(), agents.h1.close()]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
