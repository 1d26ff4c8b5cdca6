/**
 * `npm run demo`: a first delivery on this machine, no cluster and no PKO needed.
 *
 * 1. Starts a throw-away local control plane (etcd + kube-apiserver; built from Go modules on
 *    the first run, cached afterwards) and installs the CRDs.
 * 2. Starts a webhook receiver on 127.0.0.1 and the controller (src/main.ts) as a process.
 * 3. Applies a Secret, a `generic` Provider pointing at the receiver and an Alert.
 * 4. Plays PKO with the simulator of the test suite (test/support/pko.ts: it writes Stack and
 *    Update objects and their status the way PKO v2 does; nothing runs Pulumi) — one preview,
 *    then one update — and prints what the receiver got. The Stacks' backend is Pulumi Cloud,
 *    played by the contract server of the test suite (test/support/pulumi-cloud.ts, answering as
 *    the documented REST API): the runs have no workspace log here (no workspace pod), so the
 *    controller reads their change sets from it with the Stack's own token, and each message
 *    says what the run would change (`Changes: +1 ~1`).
 * Everything started is stopped at the end. `--keep` leaves it running until Ctrl-C.
 *
 * `--real-pko` plays PKO with the real PKO v1 manager instead (built by scripts/realpko-build.sh
 * into the cache, with the Pulumi CLI and its YAML language host; the PKO v1 CRDs are read from
 * `../shared/pko-crds` beside the checkout, as the `real-pko` test project does): a control plane
 * with only PKO v1's CRDs, one Stack on a Pulumi YAML program in a local git repository with a
 * `file://` state backend; PKO runs `pulumi up` on a first commit (succeeds), then on a broken
 * one (fails). The parts come from test/support/realpko.ts and test/support/git-repo.ts. Without
 * the flag, when those parts are present, the demo says that this run is available.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, openSync, writeSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi, KubernetesObjectApi, KubeConfig, PatchStrategy } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { startControlPlane } from '../src/envtest/controlplane.ts';
import { installCRDs, readCRDs, yamlFilesIn } from '../src/kube/crds.ts';
import { GitRepo } from '../test/support/git-repo.ts';
import { PkoSimulator } from '../test/support/pko.ts';
import { PulumiCloudServer, step } from '../test/support/pulumi-cloud.ts';
import {
  REALPKO_VERSIONS,
  SHARED_PKO_CRDS,
  createStack,
  operatorLock,
  realPkoBinaries,
  realPkoCacheRoot,
  requestReconcile,
  stackSpecBase,
  startPkoV1,
  startRealPkoPlane,
  yamlProgram,
  type RealPkoBinaries,
} from '../test/support/realpko.ts';
import { startReceiver } from '../test/support/receiver.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NS = 'demo';
const COMMIT = '7c1f0e3a9b2d4c5e6f708192a3b4c5d6e7f80912';
const keep = process.argv.includes('--keep');
const realPko = process.argv.includes('--real-pko');
const V = REALPKO_VERSIONS;

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

/**
 * The real PKO v1 parts, or what is missing: the binaries scripts/realpko-build.sh builds into
 * `<cache>/pulumi-<v>-yaml-<v>-pko-<v1>-<v2>/` and PKO v1.16's CRDs in `../shared/pko-crds/v1.16.0`.
 */
function findRealPko(): { bins: RealPkoBinaries } | { missing: string } {
  const dir = path.join(
    realPkoCacheRoot(),
    `pulumi-${V.pulumi}-yaml-${V.pulumiYaml}-pko-${V.pkoV1}-${V.pkoV2}`,
  );
  let bins: RealPkoBinaries;
  try {
    bins = realPkoBinaries(dir);
  } catch (err) {
    return {
      missing: (err as Error).message.replace('scripts/realpko-build.sh', 'npm run realpko:build'),
    };
  }
  const crds = path.join(SHARED_PKO_CRDS, `v${V.pkoV1}`);
  if (!existsSync(crds))
    return { missing: `PKO v${V.pkoV1} CRDs not found in ${crds} (reference data kept beside the checkout)` };
  return { bins };
}

const cleanups: (() => Promise<void> | void)[] = [];

type DeliveredBy = (reason: string, timeoutMs?: number) => Promise<true>;
/** A real `pulumi up` by PKO v1 took 16 s here (first commit, measured); a loaded machine needs more. */
const REAL_RUN_TIMEOUT_MS = 300_000;

/** The Pulumi access token of the demo's Stacks (accepted by the simulated Pulumi Cloud). */
const DEMO_TOKEN = 'pul-demo0000000000000000000000000000000000';

/** A run that creates `assets` and changes the ACL of `logs`, as Pulumi Cloud's engine events say it. */
function demoEvents(preview: boolean): Record<string, unknown>[] {
  return [
    {
      resourcePreEvent: {
        metadata: step('update', 'urn:pulumi:dev::demo-app::aws:s3/bucket:Bucket::logs', {
          old: { acl: 'private' },
          new: { acl: 'public-read' },
          detailedDiff: { acl: { diffKind: 'update', inputDiff: true } },
        }),
        planning: preview,
      },
    },
    {
      resourcePreEvent: {
        metadata: step('create', 'urn:pulumi:dev::demo-app::aws:s3/bucket:Bucket::assets', {
          new: { acl: 'private' },
        }),
        planning: preview,
      },
    },
    { summaryEvent: { resourceChanges: { create: 1, update: 1, same: 2 }, isPreview: preview } },
  ];
}

/**
 * One preview and one update of two Stacks, played by the PKO simulator (PKO v2's status), on a
 * Pulumi Cloud backend played by the contract server.
 */
async function simulatedRuns(kc: KubeConfig, deliveredBy: DeliveredBy): Promise<void> {
  const cloud = await PulumiCloudServer.start([DEMO_TOKEN]);
  cleanups.push(() => cloud.close());
  const previewId = cloud.addPreview('acme/demo-app-pr-42/dev', {
    result: 'succeeded',
    events: demoEvents(true),
  });
  const { version } = cloud.addUpdate('acme/demo-app/dev', {
    kind: 'update',
    result: 'succeeded',
    resourceChanges: { create: 1, update: 1, same: 2 },
    events: demoEvents(false),
  });
  await KubernetesObjectApi.makeApiClient(kc).create({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'pulumi-token', namespace: NS },
    stringData: { accessToken: DEMO_TOKEN },
  });
  say(
    `[simulated Pulumi Cloud] the Stacks' backend, answering the REST API at ${cloud.origin}; their token is in Secret pulumi-token`,
  );
  const sim = new PkoSimulator(kc, NS, { version: 'v2' });
  const spec = {
    backend: cloud.origin,
    envRefs: {
      PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi-token', key: 'accessToken' } },
    },
  };
  // PKO v2 previews run on a Stack of their own (`spec.preview: true`), e.g. one per pull request.
  const repo = 'https://github.com/acme/demo-app';
  await sim.createStack(
    'demo-app-pr-42',
    { git: { projectRepo: repo, branch: 'feature' } },
    { preview: true, spec },
  );
  await sim.createStack('demo-app', { git: { projectRepo: repo, branch: 'main' } }, { spec });
  say(
    `[simulated PKO] created Stacks demo-app-pr-42 (preview: true, branch feature) and demo-app (branch main) for ${repo}`,
  );
  for (const [stack, type, permalink] of [
    ['demo-app-pr-42', 'preview', `https://app.pulumi.com/acme/demo-app-pr-42/dev/previews/${previewId}`],
    ['demo-app', 'up', `https://app.pulumi.com/acme/demo-app/dev/updates/${String(version)}`],
  ] as const) {
    const label = type === 'up' ? 'update' : 'preview';
    const run = await sim.startRun(stack, { type, commit: COMMIT });
    say(`[simulated PKO] ${label} ${run.name} of Stack ${stack} started at ${COMMIT.slice(0, 7)}`);
    const tRun = performance.now();
    await deliveredBy(type === 'up' ? 'UpdateStarted' : 'PreviewStarted');
    await sim.finishRun(run, 'succeeded', { permalink });
    say(`[simulated PKO] ${label} ${run.name} succeeded (${permalink})`);
    await deliveredBy(type === 'up' ? 'UpdateSucceeded' : 'PreviewSucceeded');
    say(`delivered: ${label} started and succeeded (${secs(tRun)} after the run started)`);
  }
  const reads = cloud.requests.filter((r) => r.path.startsWith('/api/stacks/')).length;
  say(`[simulated Pulumi Cloud] the controller made ${String(reads)} API calls for the two change sets`);
}

/**
 * Real PKO v1: a git repository with a Pulumi YAML program (outputs only: no provider plugin
 * needed), a `file://` state backend, one Stack; PKO deploys the first commit (UpdateSucceeded),
 * then a broken commit, picked up at once through PKO's reconcile-request annotation (UpdateFailed
 * with the Pulumi CLI's error text; PKO v1 marks no run start, so there are no Started events).
 */
async function realPkoV1Runs(
  kc: KubeConfig,
  bins: RealPkoBinaries,
  kubeconfigPath: string,
  logDir: string,
  deliveredBy: DeliveredBy,
): Promise<void> {
  const pkoLog = path.join(logDir, 'pko-v1.log');
  const pko = await startPkoV1({
    bins,
    kubeconfigPath,
    namespace: NS,
    log: (line) => {
      appendFileSync(pkoLog, `${line}\n`);
    },
  });
  cleanups.push(() => pko.stop());
  say(`[real PKO] PKO v${V.pkoV1} manager started, watching namespace ${NS} (its log: ${pkoLog})`);
  const work = mkdtempSync(path.join(tmpdir(), 'pko-nc-demo-pko-'));
  const repo = await GitRepo.create(path.join(work, 'repo'));
  const first = await repo.commit('first commit', yamlProgram(1));
  const backend = path.join(work, 'state');
  await mkdir(backend, { recursive: true });
  await createStack(kc, NS, 'demo-app', { ...stackSpecBase(backend), projectRepo: `file://${repo.dir}` });
  say(
    `[real PKO] created Stack demo-app: branch main of file://${repo.dir} (a Pulumi YAML program), state in file://${backend}`,
  );
  const tUp = performance.now();
  say(`[real PKO] waiting for PKO to run \`pulumi up\` on ${first.slice(0, 7)} (16 s measured here)`);
  await deliveredBy('UpdateSucceeded', REAL_RUN_TIMEOUT_MS);
  say(`delivered: update succeeded (${secs(tUp)} after the Stack was created)`);
  const broken = await repo.commit('broken commit', yamlProgram(2, { broken: true }));
  await requestReconcile(kc, NS, 'demo-app');
  const tFail = performance.now();
  say(
    `[real PKO] pushed ${broken.slice(0, 7)} (the program references an undefined variable) and requested a reconcile`,
  );
  await deliveredBy('UpdateFailed', REAL_RUN_TIMEOUT_MS);
  say(`delivered: update failed (${secs(tFail)} after the commit; PKO keeps retrying it, one notification)`);
}

async function cleanup(): Promise<void> {
  for (const c of cleanups.reverse()) await c();
}

try {
  const found = findRealPko();
  let bins: RealPkoBinaries | undefined;
  if (realPko) {
    if ('missing' in found)
      throw new Error(
        `--real-pko needs the real PKO parts, and ${found.missing}. Without --real-pko the demo simulates PKO.`,
      );
    bins = found.bins;
    say(
      `real PKO run: PKO v${V.pkoV1} manager, Pulumi CLI v${V.pulumi}, pulumi-language-yaml v${V.pulumiYaml} (${bins.dir})`,
    );
  } else if ('bins' in found) {
    say(
      `real PKO parts found (${found.bins.dir}): \`npm run demo -- --real-pko\` runs real PKO v${V.pkoV1} instead of the simulator`,
    );
  }

  // The PKO v1 manager binds port 8383 and writes work folders: one real operator at a time on
  // this machine (the lock the real-PKO tests take too).
  if (bins !== undefined) cleanups.push(await operatorLock(say));
  say('starting a local control plane (etcd + kube-apiserver; the first run builds them from Go modules)');
  const tPlane = performance.now();
  const onPlaneLine = (line: string): void => {
    if (line.startsWith('envtest-build:')) say(line);
  };
  let kubeconfigPath: string;
  let serverVersion: string;
  if (bins === undefined) {
    const plane = await startControlPlane({ log: onPlaneLine });
    cleanups.push(() => plane.stop());
    kubeconfigPath = plane.kubeconfigPath;
    serverVersion = plane.serverVersion;
    const kc0 = new KubeConfig();
    kc0.loadFromFile(kubeconfigPath);
    const crds = [
      ...(await yamlFilesIn(path.join(ROOT, 'crds'))),
      ...(await yamlFilesIn(path.join(ROOT, 'test', 'crds'))),
    ];
    await installCRDs(kc0, await readCRDs(crds));
  } else {
    // Our CRDs and only PKO v1.16's Stack and Program CRDs, as on a real PKO v1 cluster.
    const plane = await startRealPkoPlane('v1', onPlaneLine);
    cleanups.push(() => plane.stop());
    kubeconfigPath = plane.cp.kubeconfigPath;
    serverVersion = plane.cp.serverVersion;
  }
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  say(`control plane ${serverVersion} ready in ${secs(tPlane)}; CRDs installed`);

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
      `--kubeconfig=${kubeconfigPath}`,
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
  const deliveredBy = (reason: string, timeoutMs = 30_000): Promise<true> =>
    waitFor(`a delivery of ${reason}`, timeoutMs, () =>
      Promise.resolve(received().includes(reason) ? true : undefined),
    );

  const logDir = path.dirname(logFile);
  if (bins === undefined) {
    await simulatedRuns(kc, deliveredBy);
  } else {
    await realPkoV1Runs(kc, bins, kubeconfigPath, logDir, deliveredBy);
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
    bins === undefined
      ? `\nThe PKO side was simulated (test/support/pko.ts writes Stack/Update status as PKO v2 does), ` +
          `and so was Pulumi Cloud (test/support/pulumi-cloud.ts answers as its REST API documents). ` +
          `Demo done in ${secs()}.`
      : `\nThe PKO side was real: PKO v${V.pkoV1}'s manager ran \`pulumi up\` (Pulumi CLI v${V.pulumi}) on both commits (it retries the broken one until stopped: one notification). ` +
          `Demo done in ${secs()}.`,
  );
  if (keep) {
    console.log(
      `\nStill running (--keep): export KUBECONFIG=${kubeconfigPath}; npm run kubectl -- get pko-notification -n ${NS}\nCtrl-C stops everything.`,
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
