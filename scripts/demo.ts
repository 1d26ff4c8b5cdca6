/**
 * `npm run demo`: a first delivery on this machine, no cluster and no PKO needed.
 *
 * 1. Starts a throw-away local control plane (etcd + kube-apiserver; built from Go modules on
 *    the first run, cached afterwards) and installs the CRDs.
 * 2. Starts a webhook receiver on 127.0.0.1 and the controller (src/main.ts) as a process.
 * 3. Applies a Secret, a `generic` Provider pointing at the receiver and an Alert.
 * 4. Plays PKO with the simulator of the test suite (test/support/pko.ts: it writes Stack and
 *    Update objects and their status the way PKO v2 does; nothing runs Pulumi) — one preview,
 *    then one update — and prints what the receiver got.
 * Everything started is stopped at the end. `--keep` leaves it running until Ctrl-C.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi, KubernetesObjectApi, KubeConfig, PatchStrategy } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { startControlPlane } from '../src/envtest/controlplane.ts';
import { installCRDs, readCRDs, yamlFilesIn } from '../src/kube/crds.ts';
import { PkoSimulator } from '../test/support/pko.ts';
import { startReceiver } from '../test/support/receiver.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NS = 'demo';
const COMMIT = '7c1f0e3a9b2d4c5e6f708192a3b4c5d6e7f80912';
const keep = process.argv.includes('--keep');

const t0 = performance.now();
const secs = (from = t0): string => `${((performance.now() - from) / 1000).toFixed(1)} s`;
const say = (line: string): void => {
  console.log(`[${secs().padStart(7)}] ${line}`);
};

async function waitFor<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}${last ? ` (${last})` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
async function cleanup(): Promise<void> {
  for (const c of cleanups.reverse()) await c();
}

try {
  say('starting a local control plane (etcd + kube-apiserver; the first run builds them from Go modules)');
  const tPlane = performance.now();
  const plane = await startControlPlane({
    log: (line) => {
      if (line.startsWith('envtest-build:')) say(line);
    },
  });
  cleanups.push(() => plane.stop());
  const kc = new KubeConfig();
  kc.loadFromFile(plane.kubeconfigPath);
  const crds = [
    ...(await yamlFilesIn(path.join(ROOT, 'crds'))),
    ...(await yamlFilesIn(path.join(ROOT, 'test', 'crds'))),
  ];
  await installCRDs(kc, await readCRDs(crds));
  say(`control plane ${plane.serverVersion} ready in ${secs(tPlane)}; CRDs installed`);

  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());
  say(`webhook receiver listening on ${receiver.url}/hook`);

  // The controller, as `npm start` runs it, against this control plane. Its JSON log goes to a file.
  const logFile = path.join(mkdtempSync(path.join(tmpdir(), 'pko-nc-demo-')), 'controller.log');
  const fd = openSync(logFile, 'w');
  const controller: ChildProcess = spawn(
    process.execPath,
    [
      path.join(ROOT, 'src', 'main.ts'),
      `--kubeconfig=${plane.kubeconfigPath}`,
      '--dev-cluster=never',
      '--metrics-bind-address=127.0.0.1:0',
      '--health-probe-bind-address=127.0.0.1:0',
      '--cluster-name=demo',
      // The demo's receiver listens on 127.0.0.1, which the egress policy refuses by default.
      '--egress-allow-loopback',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', fd] },
  );
  const exited = new Promise<void>((resolve) =>
    controller.once('exit', () => {
      resolve();
    }),
  );
  cleanups.push(async () => {
    controller.kill('SIGTERM');
    await exited;
  });
  const started = new Promise<void>((resolve, reject) => {
    controller.once('exit', (code) => {
      reject(new Error(`the controller exited (code ${String(code)}) before it started; log: ${logFile}`));
    });
    createInterface({ input: controller.stdout! }).on('line', (line) => {
      writeSync(fd, `${line}\n`);
      if (line.includes('"msg":"controller started"')) resolve();
    });
  });
  await started;
  say(`controller started (node src/main.ts; its log: ${logFile})`);

  // Provider + Alert, as a user would `kubectl apply` them.
  const manifests = `
apiVersion: v1
kind: Namespace
metadata: { name: ${NS} }
---
apiVersion: v1
kind: Secret
metadata: { name: webhook-endpoint, namespace: ${NS} }
stringData:
  address: ${receiver.url}/hook
---
apiVersion: notification.pko.dev/v1alpha1
kind: Provider
metadata: { name: webhook, namespace: ${NS} }
spec:
  type: generic
  secretRef: { name: webhook-endpoint }
---
apiVersion: notification.pko.dev/v1alpha1
kind: Alert
metadata: { name: all-stacks, namespace: ${NS} }
spec:
  providerRef: { name: webhook }
  eventSources: [{ kind: Stack, name: '*' }]
`;
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const doc of parseAllDocuments(manifests)) {
    await api.patch(doc.toJS(), undefined, undefined, 'pko-nc-demo', true, PatchStrategy.ServerSideApply);
  }
  say(
    `applied Secret, Provider "webhook" (type generic → the receiver) and Alert "all-stacks" in namespace ${NS}`,
  );
  const custom = kc.makeApiClient(CustomObjectsApi);
  for (const plural of ['providers', 'alerts']) {
    const name = plural === 'providers' ? 'webhook' : 'all-stacks';
    await waitFor(`${plural} ${name} Ready`, 30_000, async () => {
      const o = (await custom.getNamespacedCustomObject({
        group: 'notification.pko.dev',
        version: 'v1alpha1',
        namespace: NS,
        plural,
        name,
      })) as { status?: { conditions?: { type: string; status: string }[] } };
      return o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true
        ? true
        : undefined;
    });
  }
  say('Provider and Alert are Ready=True');

  const received = (): string[] =>
    receiver.requests.map((r) => (JSON.parse(r.body) as { reason: string }).reason);
  const deliveredBy = (reason: string): Promise<true> =>
    waitFor(`a delivery of ${reason}`, 30_000, () =>
      Promise.resolve(received().includes(reason) ? true : undefined),
    );

  const sim = new PkoSimulator(kc, NS, { version: 'v2' });
  // PKO v2 previews run on a Stack of their own (`spec.preview: true`), e.g. one per pull request.
  const repo = 'https://github.com/acme/demo-app';
  await sim.createStack(
    'demo-app-pr-42',
    { git: { projectRepo: repo, branch: 'feature' } },
    { preview: true },
  );
  await sim.createStack('demo-app', { git: { projectRepo: repo, branch: 'main' } });
  say(
    `[simulated PKO] created Stacks demo-app-pr-42 (preview: true, branch feature) and demo-app (branch main) for ${repo}`,
  );
  for (const [stack, type] of [
    ['demo-app-pr-42', 'preview'],
    ['demo-app', 'up'],
  ] as const) {
    const label = type === 'up' ? 'update' : 'preview';
    const run = await sim.startRun(stack, { type, commit: COMMIT });
    say(`[simulated PKO] ${label} ${run.name} of Stack ${stack} started at ${COMMIT.slice(0, 7)}`);
    const tRun = performance.now();
    await deliveredBy(type === 'up' ? 'UpdateStarted' : 'PreviewStarted');
    await sim.finishRun(run, 'succeeded');
    say(`[simulated PKO] ${label} ${run.name} succeeded`);
    await deliveredBy(type === 'up' ? 'UpdateSucceeded' : 'PreviewSucceeded');
    say(`delivered: ${label} started and succeeded (${secs(tRun)} after the run started)`);
  }

  console.log("\nWhat the receiver got (POST /hook, the generic Provider's JSON):");
  for (const r of receiver.requests) {
    const body = JSON.parse(r.body) as {
      reason: string;
      severity: string;
      message: string;
      metadata: Record<string, string>;
      involvedObject: { kind: string; namespace: string; name: string };
    };
    const meta = Object.entries(body.metadata)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    console.log(
      `  ${body.reason.padEnd(17)} ${body.severity.padEnd(5)} ${body.involvedObject.kind} ${body.involvedObject.namespace}/${body.involvedObject.name}`,
    );
    console.log(`      message:  ${body.message.replace(/\n/g, '\n                ')}`);
    console.log(`      metadata: ${meta}`);
    console.log(`      X-PKO-Event-Id: ${String(r.headers['x-pko-event-id'])}`);
  }
  console.log(
    `\nThe PKO side was simulated (test/support/pko.ts writes Stack/Update status as PKO v2 does). ` +
      `Demo done in ${secs()}.`,
  );
  if (keep) {
    console.log(
      `\nStill running (--keep): export KUBECONFIG=${plane.kubeconfigPath}; npm run kubectl -- get pko-notification -n ${NS}\nCtrl-C stops everything.`,
    );
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
  }
  await cleanup();
} catch (err) {
  console.error(`\ndemo failed: ${err instanceof Error ? err.message : String(err)}`);
  await cleanup().catch(() => undefined);
  process.exit(1);
}
