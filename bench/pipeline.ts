/**
 * End-to-end pipeline benchmark (not part of `npm test`): `npm run bench:pipeline`.
 *
 * Starts a local control plane, our CRDs and the minimal PKO CRDs, a webhook receiver, and the
 * controller as its own process (so its RSS is its own), then measures:
 *  1. throughput: 1,000 Stacks each get a finished run written as fast as the API server takes
 *     it; events/s from the first status write to the last delivery;
 *  2. latency at a steady 50 events/s: status write (response received) → receiver request, p50/p99;
 *  3. RSS with 10,000 Stacks watched (9,000 more, each with a finished run, all delivered);
 *  4. restart: SIGTERM, start again, time to /readyz 200, and deliveries the restart caused (target 0);
 *  5. backlog (with phase 4, unless BENCH_BACKLOG=0): SIGTERM, a finished run written to every Stack
 *     while the controller is down, start again: time to drain, peak RSS (sampled every 50 ms) and
 *     the V8 heap at that peak (from /metrics, sampled every 250 ms); with BENCH_SNAPSHOT_MIB and
 *     `--heapsnapshot-signal=SIGUSR2` in BENCH_NODE_FLAGS, one SIGUSR2 when RSS first passes that
 *     many MiB (Node writes Heap.*.heapsnapshot into the controller's working directory).
 * With BENCH_ALLOC=<file>, phase 1 also measures what the controller allocates (./alloc.ts: the
 * controller runs with `--inspect` on the port after the health port; the sampling heap profile of
 * the burst, garbage included, is written to <file> for DevTools): KiB allocated per event and the
 * sites that allocate most.
 * The controller's CPU (user + system, /proc/<pid>/stat) per 1,000 events is given for phases 1 and 2.
 * Env: BENCH_PORT (metrics port, health the next; default 18080), BENCH_STACKS (default 10000), BENCH_BURST (1000), BENCH_RATE (50), BENCH_RATE_SECONDS (20), BENCH_RESTART (0: skip phase 4),
 * BENCH_MAIN (default src/main.ts), BENCH_NODE_FLAGS (Node flags before the script; default the shipped ones, ./shipped.ts:
 * the Dockerfile's ENTRYPOINT flags and the Deployment's NODE_OPTIONS; set, NODE_OPTIONS is cleared — "" for Node's defaults).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startControlPlane } from '../src/envtest/controlplane.ts';
import { loadKubeConfig, kubeRequest, objectPath } from '../src/kube/client.ts';
import { installCRDs, readCRDs, yamlFilesIn } from '../src/kube/crds.ts';
import { shippedNode } from './shipped.ts';
import { startAllocationSampling, summarize, type AllocationSampler } from './alloc.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const STACKS = Number(process.env.BENCH_STACKS ?? 10_000);
const BURST = Number(process.env.BENCH_BURST ?? 1_000);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const RATE_SECONDS = Number(process.env.BENCH_RATE_SECONDS ?? 20);
const NS = 'bench';
/** Metrics port; the health port is the next one (BENCH_PORT, default 18080). */
const PORT = Number(process.env.BENCH_PORT ?? 18080);

/** Set on SIGINT/SIGTERM: requests failing while the control plane stops are expected then. */
let interrupted = false;

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

async function pool<T>(items: readonly T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) {
        const x = items[i++] as T;
        await fn(x);
      }
    }),
  );
}

/** Successful delivery-ledger object writes so far (`pkonc_ledger_writes_total{result="success"}`). */
async function ledgerWrites(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${PORT}/metrics`)).text();
  return Number(/^pkonc_ledger_writes_total\{result="success"\} (\S+)/m.exec(text)?.[1] ?? 0);
}

/** V8 heap and external memory from the controller's /metrics (prom-client default metrics), MiB. */
async function heapMiB(): Promise<string> {
  const text = await (await fetch(`http://127.0.0.1:${PORT}/metrics`)).text();
  const get = (name: string): number =>
    Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 1048576;
  return `heap used ${get('nodejs_heap_size_used_bytes').toFixed(1)} of ${get('nodejs_heap_size_total_bytes').toFixed(1)} MiB, external ${get('nodejs_external_memory_bytes').toFixed(1)} MiB`;
}

/** User + system CPU seconds of process `pid` so far (/proc/<pid>/stat, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function main(): Promise<void> {
  console.log(
    `bench: Node ${process.version}, ${STACKS} Stacks, burst ${BURST}, ${RATE} events/s for ${RATE_SECONDS} s`,
  );
  const plane = await startControlPlane({});
  const kc = loadKubeConfig({ kubeconfig: plane.kubeconfigPath });
  let controller: ChildProcess | undefined;
  // Interrupted (Ctrl-C, a timeout's SIGTERM): the controller and the control plane go too, not
  // left running to hold the ports of the next run.
  for (const sig of ['SIGINT', 'SIGTERM'] as const)
    process.once(sig, () => {
      interrupted = true;
      process.on('unhandledRejection', () => undefined); // writes still in flight fail now
      controller?.kill('SIGKILL');
      void plane.stop().finally(() => process.exit(128 + (sig === 'SIGINT' ? 2 : 15)));
    });
  const received = new Map<string, number>(); // updateName → arrival time (ms)
  let deliveries = 0;
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      deliveries++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        metadata: { updateName?: string };
      };
      if (body.metadata.updateName) received.set(body.metadata.updateName, performance.now());
      res.end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as { port: number }).port;

  try {
    await installCRDs(
      kc,
      await readCRDs([
        ...(await yamlFilesIn(join(root, 'crds'))),
        ...(await yamlFilesIn(join(root, 'test', 'crds'))),
      ]),
    );
    await kubeRequest(kc, { method: 'POST', path: '/api/v1/namespaces', body: { metadata: { name: NS } } });
    const nsPath = (plural: string, group = 'notification.pko.dev', version = 'v1alpha1'): string =>
      objectPath({ group, version, plural, namespace: NS });
    await kubeRequest(kc, {
      method: 'POST',
      path: nsPath('providers'),
      body: {
        apiVersion: 'notification.pko.dev/v1alpha1',
        kind: 'Provider',
        metadata: { name: 'hook' },
        spec: { type: 'generic', address: `http://127.0.0.1:${port}/hook` },
      },
    });
    await kubeRequest(kc, {
      method: 'POST',
      path: nsPath('alerts'),
      body: {
        apiVersion: 'notification.pko.dev/v1alpha1',
        kind: 'Alert',
        metadata: { name: 'all' },
        spec: {
          providerRef: { name: 'hook' },
          eventSources: [{ kind: 'Stack' }],
          eventReasons: ['UpdateSucceeded'],
        },
      },
    });
    await sleep(1100); // events must be newer than the Alert (second resolution)

    const stacksPath = nsPath('stacks', 'pulumi.com', 'v1');
    const createStacks = async (from: number, to: number): Promise<void> => {
      const names = Array.from({ length: to - from }, (_, i) => `s${from + i}`);
      await pool(names, 16, async (name) => {
        await kubeRequest(kc, {
          method: 'POST',
          path: stacksPath,
          body: {
            apiVersion: 'pulumi.com/v1',
            kind: 'Stack',
            metadata: { name },
            spec: {
              stack: `acme/bench/${name}`,
              projectRepo: 'https://github.com/acme/bench',
              branch: 'main',
            },
          },
        });
      });
    };
    let millis = Date.now();
    const finishRun = async (name: string): Promise<{ update: string; writtenAt: number }> => {
      millis += 1;
      const update = `${name}-${millis.toString(16)}`;
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      await kubeRequest(kc, {
        method: 'PATCH',
        path: `${stacksPath}/${name}/status`,
        contentType: 'application/merge-patch+json',
        body: {
          status: {
            observedGeneration: 1,
            lastUpdate: {
              generation: 1,
              name: update,
              type: 'up',
              state: 'succeeded',
              lastAttemptedCommit: 'a'.repeat(40),
              lastSuccessfulCommit: 'a'.repeat(40),
              lastResyncTime: now,
              message: 'bench',
            },
            conditions: [
              {
                type: 'Ready',
                status: 'True',
                reason: 'ProcessingCompleted',
                message: 'ok',
                lastTransitionTime: now,
              },
            ],
          },
        },
      });
      return { update, writtenAt: performance.now() };
    };
    const waitDelivered = async (names: string[], timeoutMs: number): Promise<void> => {
      const deadline = Date.now() + timeoutMs;
      while (names.some((n) => !received.has(n))) {
        if (Date.now() > deadline)
          throw new Error(
            `timed out: ${names.filter((n) => !received.has(n)).length} of ${names.length} not delivered`,
          );
        await sleep(20);
      }
    };

    console.log(`creating ${BURST} Stacks…`);
    await createStacks(0, BURST);

    const startController = async (): Promise<{ child: ChildProcess; readyMs: number }> => {
      const t0 = performance.now();
      const shipped = process.env.BENCH_NODE_FLAGS === undefined ? shippedNode(root) : undefined;
      const nodeFlags =
        shipped?.flags ?? (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter((f) => f !== '');
      const inspect = process.env.BENCH_ALLOC ? [`--inspect=127.0.0.1:${PORT + 2}`] : [];
      const child = spawn(
        process.execPath,
        [
          ...nodeFlags,
          ...inspect,
          join(root, process.env.BENCH_MAIN ?? 'src/main.ts'),
          `--kubeconfig=${plane.kubeconfigPath}`,
          `--watch-namespace=${NS}`,
          '--log-level=warn',
          `--metrics-bind-address=127.0.0.1:${PORT}`,
          `--health-probe-bind-address=127.0.0.1:${PORT + 1}`,
          '--egress-allow-loopback', // the receiver is on 127.0.0.1
        ],
        {
          stdio: ['ignore', 'inherit', 'inherit'],
          env: { ...process.env, NODE_OPTIONS: shipped?.nodeOptions ?? '' },
        },
      );
      for (;;) {
        try {
          const r = await fetch(`http://127.0.0.1:${PORT + 1}/readyz`);
          if (r.status === 200) break;
        } catch {
          // not listening yet
        }
        if (child.exitCode !== null) throw new Error(`controller exited with ${child.exitCode}`);
        await sleep(25);
      }
      return { child, readyMs: performance.now() - t0 };
    };
    const first = await startController();
    controller = first.child;
    console.log(`controller ready in ${first.readyMs.toFixed(0)} ms with ${BURST} Stacks`);

    // 1. Throughput.
    const names = Array.from({ length: BURST }, (_, i) => `s${i}`);
    const burstUpdates: string[] = [];
    const allocFile = process.env.BENCH_ALLOC;
    const sampler: AllocationSampler | undefined = allocFile
      ? await startAllocationSampling(PORT + 2)
      : undefined;
    const w0 = await ledgerWrites();
    const cpu0 = cpuSeconds(controller.pid ?? 0);
    const t0 = performance.now();
    await pool(names, 32, async (n) => {
      burstUpdates.push((await finishRun(n)).update);
    });
    const writesDone = performance.now();
    await waitDelivered(burstUpdates, 120_000);
    const t1 = Math.max(...burstUpdates.map((u) => received.get(u) ?? 0));
    console.log(
      `throughput: ${BURST} events in ${((t1 - t0) / 1000).toFixed(2)} s = ${(BURST / ((t1 - t0) / 1000)).toFixed(0)} events/s end to end (status writes alone: ${(BURST / ((writesDone - t0) / 1000)).toFixed(0)}/s); controller CPU-s per 1,000 events: ${(((cpuSeconds(controller.pid ?? 0) - cpu0) * 1000) / BURST).toFixed(3)}; ledger writes per event: ${((await ledgerWrites()) - w0) / BURST}`,
    );
    if (sampler !== undefined && allocFile !== undefined) {
      const profile = await sampler.stop();
      writeFileSync(allocFile, JSON.stringify(profile));
      const { totalBytes, sites } = summarize(profile);
      console.log(
        `allocated during the burst: ${(totalBytes / 1024 / BURST).toFixed(1)} KiB per event (sampled; profile in ${allocFile}); largest sites, KiB per event:`,
      );
      for (const { site, bytes } of sites.slice(0, 25))
        console.log(`  ${(bytes / 1024 / BURST).toFixed(2).padStart(7)}  ${site}`);
    }

    // 2. Latency at a steady rate.
    const lat: number[] = [];
    const paced: Promise<void>[] = [];
    const total = RATE * RATE_SECONDS;
    const cpu1 = cpuSeconds(controller.pid ?? 0);
    const start = performance.now();
    for (let i = 0; i < total; i++) {
      const due = start + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const name = `s${i % BURST}`;
      const sentAt = performance.now();
      paced.push(
        finishRun(name).then(async ({ update }) => {
          const deadline = Date.now() + 30_000;
          while (!received.has(update) && Date.now() < deadline) await sleep(2);
          // From sending the status write (the watch event may even beat the write's response).
          lat.push((received.get(update) ?? NaN) - sentAt);
        }),
      );
    }
    await Promise.all(paced);
    console.log(
      `latency (status write sent → receiver request) at ${RATE} events/s (${total} events): p50 ${pct(lat, 50).toFixed(1)} ms, p99 ${pct(lat, 99).toFixed(1)} ms, max ${Math.max(...lat).toFixed(1)} ms; controller CPU-s per 1,000 events: ${(((cpuSeconds(controller.pid ?? 0) - cpu1) * 1000) / total).toFixed(3)}`,
    );

    // 3. Scale to STACKS, each with a delivered run.
    if (STACKS > BURST) {
      console.log(`creating ${STACKS - BURST} more Stacks with finished runs…`);
      await createStacks(BURST, STACKS);
      const more = Array.from({ length: STACKS - BURST }, (_, i) => `s${BURST + i}`);
      const ups: string[] = [];
      const tm = performance.now();
      await pool(more, 32, async (n) => {
        ups.push((await finishRun(n)).update);
      });
      await waitDelivered(ups, 600_000);
      console.log(
        `${STACKS - BURST} more events delivered at ${((STACKS - BURST) / ((performance.now() - tm) / 1000)).toFixed(0)} events/s`,
      );
    }
    await sleep(3000);
    const rssBefore = rssMiB(controller.pid ?? 0);
    console.log(`RSS with ${STACKS} Stacks watched: ${rssBefore.toFixed(1)} MiB (${await heapMiB()})`);

    // 4. Restart.
    if (process.env.BENCH_RESTART === '0') return;
    const before = deliveries;
    controller.kill('SIGTERM');
    await new Promise((r) => controller?.once('exit', r));
    const second = await startController();
    controller = second.child;
    await sleep(5000);
    console.log(
      `restart with ${STACKS} Stacks: ready in ${second.readyMs.toFixed(0)} ms; deliveries caused by the restart: ${deliveries - before}`,
    );
    console.log(
      `RSS after restart + 5 s: ${rssMiB(controller.pid ?? 0).toFixed(1)} MiB (${await heapMiB()})`,
    );

    // 5. Backlog: every Stack's next run finished while the controller is down.
    if (process.env.BENCH_BACKLOG === '0') return;
    controller.kill('SIGTERM');
    await new Promise((r) => controller?.once('exit', r));
    const all = Array.from({ length: Math.max(STACKS, BURST) }, (_, i) => `s${i}`);
    const backlog: string[] = [];
    await pool(all, 32, async (n) => {
      backlog.push((await finishRun(n)).update);
    });
    const snapshotMiB = Number(process.env.BENCH_SNAPSHOT_MIB ?? NaN);
    const tb = performance.now();
    const third = await startController();
    controller = third.child;
    const pid = controller.pid ?? 0;
    let peak = 0;
    let heapAtPeak = '';
    let lastHeap = '';
    let snapped = false;
    const rssTimer = setInterval(() => {
      const r = rssMiB(pid);
      if (r > peak) {
        peak = r;
        heapAtPeak = lastHeap;
      }
      if (!snapped && r >= snapshotMiB) {
        snapped = true;
        process.kill(pid, 'SIGUSR2');
        console.log(`backlog: RSS ${r.toFixed(1)} MiB, SIGUSR2 sent (heap snapshot)`);
      }
    }, 50);
    const heapTimer = setInterval(() => {
      heapMiB().then(
        (h) => (lastHeap = h),
        () => undefined,
      );
    }, 250);
    try {
      await waitDelivered(backlog, 600_000);
    } finally {
      clearInterval(rssTimer);
      clearInterval(heapTimer);
    }
    const drainS = (performance.now() - tb) / 1000;
    console.log(
      `backlog of ${backlog.length} events written while down: drained ${drainS.toFixed(1)} s from start (${(backlog.length / drainS).toFixed(0)}/s, ready in ${third.readyMs.toFixed(0)} ms); peak RSS ${peak.toFixed(1)} MiB (last heap sample before it: ${heapAtPeak || '—'}); now ${rssMiB(pid).toFixed(1)} MiB`,
    );
  } finally {
    controller?.kill('SIGTERM');
    receiver.close();
    await plane.stop();
  }
}

await main().catch((err: unknown) => {
  if (!interrupted) throw err;
});
