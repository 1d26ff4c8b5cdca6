/**
 * `node bench/idle.ts <dist-dir> [<dist-dir> …]`: idle RSS of the controller with 0 Stacks, the
 * way bench:flux measures it (shipped node flags and NODE_OPTIONS, `--log-level=warn`, RSS from
 * /proc/<pid>/smaps_rollup 5 s after /readyz), for each build folder given (each holding
 * `main.js`: `npm run build` writes dist/), alternating, `BENCH_IDLE_RUNS` rounds (default 3).
 * One control plane for all. Prints each run and the median per build, MiB.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startControlPlane } from '../src/envtest/controlplane.ts';
import { installCRDs, readCRDs, yamlFilesIn } from '../src/kube/crds.ts';
import { loadKubeConfig } from '../src/kube/client.ts';
import { shippedNode } from './shipped.ts';

const root = resolve(import.meta.dirname, '..');
const builds = process.argv.slice(2).map((d) => resolve(d));
if (builds.length === 0) throw new Error('usage: node bench/idle.ts <dist-dir> [<dist-dir> …]');
const runs = Number(process.env.BENCH_IDLE_RUNS ?? 3);
const SHIPPED = shippedNode(root);

function rssMiB(pid: number): number {
  const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  return Number(/^Rss:\s+(\d+) kB/m.exec(t)?.[1] ?? NaN) / 1024;
}

async function ready(url: string, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`controller exited with ${String(child.exitCode)}`);
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error('controller not ready after 60 s');
}

const plane = await startControlPlane({});
try {
  const kc = loadKubeConfig({ kubeconfig: plane.kubeconfigPath });
  await installCRDs(
    kc,
    await readCRDs([
      ...(await yamlFilesIn(join(root, 'crds'))),
      ...(await yamlFilesIn(join(root, 'test', 'crds'))),
    ]),
  );
  const results = new Map<string, number[]>(builds.map((b) => [b, []]));
  for (let r = 0; r < runs; r++) {
    for (const b of builds) {
      const child = spawn(
        process.execPath,
        [
          ...SHIPPED.flags,
          join(b, 'main.js'),
          `--kubeconfig=${plane.kubeconfigPath}`,
          '--log-level=warn',
          '--metrics-bind-address=127.0.0.1:18090',
          '--health-probe-bind-address=127.0.0.1:18091',
        ],
        {
          env: { ...process.env, NODE_OPTIONS: SHIPPED.nodeOptions },
          stdio: ['ignore', 'inherit', 'inherit'],
        },
      );
      try {
        await ready('http://127.0.0.1:18091/readyz', child);
        await sleep(5000);
        const mib = rssMiB(child.pid ?? 0);
        results.get(b)?.push(mib);
        console.log(`${b}: run ${String(r + 1)} idle RSS ${mib.toFixed(1)} MiB`);
      } finally {
        child.kill('SIGTERM');
        await new Promise((res) => child.once('exit', res));
      }
    }
  }
  for (const [b, xs] of results) {
    const s = [...xs].sort((x, y) => x - y);
    console.log(
      `${b}: median ${(s[Math.floor(s.length / 2)] ?? NaN).toFixed(1)} MiB of ${xs.map((x) => x.toFixed(1)).join(', ')}`,
    );
  }
} finally {
  await plane.stop();
}
