/**
 * A real Pulumi Kubernetes Operator in the test loop (vitest project `real-pko`).
 *
 * - Binaries: built by scripts/realpko-build.sh into a cache folder (the project's globalSetup,
 *   test/setup/realpko.ts, runs it and provides the folder as `realPkoDir`).
 * - {@link startRealPkoPlane}: an etcd + kube-apiserver of its own per test file, with our CRDs
 *   and PKO's upstream CRDs read from `../shared/pko-crds` (never copied into the repository):
 *   for v1 only `Stack` and `Program` of v1.16.0 — a real v1 cluster has no `Update` CRD — and for
 *   v2 the four v2.9.0 CRDs.
 * - {@link startPkoV1}: PKO v1.16's manager as a local process watching one namespace. It binds
 *   its metrics on the fixed port 8383, so {@link operatorLock} keeps every real operator on the
 *   machine (also other checkouts' test runs) one at a time.
 * - {@link startPkoV2}: PKO v2.9's operator as a local process plus the workspace stand-in
 *   (test/support/workspace-standin.ts) that runs one real agent per workspace locally, behind
 *   the router (test/support/workspace-router.ts) at the operator's `WORKSPACE_LOCALHOST`.
 * - {@link StatusRecorder}: every stored version of a namespace's Stacks (and Updates), from a
 *   watch, for assertions and for the fixtures under test/fixtures/realpko/.
 *
 * Nothing is skipped: a missing binary, CRD folder or port fails the test with the reason.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  Watch,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { startControlPlane, type ControlPlane } from '../../src/envtest/controlplane.ts';
import { installCRDs, readCRDs, yamlFilesIn } from '../../src/kube/crds.ts';
import { KubeApiError, kubeRequest, objectPath } from '../../src/kube/client.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import { WorkspaceStandIn } from './workspace-standin.ts';
import { WorkspaceRouter } from './workspace-router.ts';
import type { KubeletStandIn } from './kubelet-standin.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Upstream PKO CRDs beside the repository (reference data, read at test time). */
export const SHARED_PKO_CRDS = path.resolve(ROOT, '..', 'shared', 'pko-crds');

/** Versions built by scripts/realpko-build.sh (keep in sync with it). */
export const REALPKO_VERSIONS = {
  pulumi: '3.276.0',
  pulumiYaml: '1.25.0',
  pkoV1: '1.16.0',
  pkoV2: '2.9.0',
  /** pulumi-resource-pkotest (test/realpko/provider/main.go `Version`): programs name it in `options.version`. */
  pkotest: '0.1.0',
} as const;

/** Where the built parts are, given the folder the build script printed. */
export interface RealPkoBinaries {
  dir: string;
  /**
   * Holds `pulumi`, `pulumi-language-yaml` and the test resource provider
   * `pulumi-resource-pkotest` (test/realpko/provider: cloud-free `pkotest:index:File` and
   * `pkotest:index:Value`, found on PATH as an ambient plugin).
   */
  pulumiBinDir: string;
  pkoV1Manager: string;
  pkoV2Manager: string;
  pkoV2Agent: string;
}

export function realPkoBinaries(dir: string): RealPkoBinaries {
  const b: RealPkoBinaries = {
    dir,
    pulumiBinDir: path.join(dir, 'bin'),
    pkoV1Manager: path.join(dir, 'pko-v1', 'manager'),
    pkoV2Manager: path.join(dir, 'pko-v2', 'manager'),
    pkoV2Agent: path.join(dir, 'pko-v2', 'agent'),
  };
  for (const f of [
    path.join(b.pulumiBinDir, 'pulumi'),
    path.join(b.pulumiBinDir, 'pulumi-language-yaml'),
    path.join(b.pulumiBinDir, 'pulumi-resource-pkotest'),
    b.pkoV1Manager,
    b.pkoV2Manager,
    b.pkoV2Agent,
  ]) {
    if (!existsSync(f)) throw new Error(`real PKO part missing: ${f} (run scripts/realpko-build.sh)`);
  }
  return b;
}

/** Cache root of the real-PKO parts (also holds the operator lock file). */
export function realPkoCacheRoot(): string {
  return (
    process.env['PKO_NC_REALPKO_CACHE'] ??
    path.join(
      process.env['XDG_CACHE_HOME'] ?? path.join(homedir(), '.cache'),
      'pko-notification-controller',
      'realpko',
    )
  );
}

// ---------------------------------------------------------------------------------------------
// One real operator at a time on this machine

/**
 * Takes the machine-wide real-operator lock (`flock` on `<cache>/operator.lock`, held by a
 * child process so it is released even if this process dies) and resolves to its release.
 * Logs while it waits for another run.
 */
export async function operatorLock(log: (line: string) => void): Promise<() => Promise<void>> {
  const root = realPkoCacheRoot();
  await mkdir(root, { recursive: true });
  const file = path.join(root, 'operator.lock');
  const child = spawn('flock', ['-x', file, '-c', 'echo locked; exec cat'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => {
    stderr += b.toString('utf8');
  });
  const waiting = setTimeout(() => {
    log(`waiting for ${file}: another real-PKO test run holds it`);
  }, 2000);
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => {
        if (b.toString('utf8').includes('locked')) resolve();
      });
      child.on('error', (err) => {
        reject(new Error(`cannot run flock for ${file}: ${err.message}`));
      });
      child.on('exit', (code) => {
        reject(new Error(`flock ${file} exited ${String(code)}: ${stderr}`));
      });
    });
  } finally {
    clearTimeout(waiting);
  }
  return async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.stdin.end();
    await exited;
  };
}

/** Rejects with the reason when `port` on 0.0.0.0 cannot be bound. */
async function assertPortFree(port: number, what: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const s = createServer();
    s.once('error', (err) => {
      reject(new Error(`${what} needs port ${port}, which is in use: ${err.message}`));
    });
    s.listen(port, '0.0.0.0', () => {
      s.close(() => {
        resolve();
      });
    });
  });
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => {
        resolve(port);
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Control plane

export type PkoMajor = 'v1' | 'v2';

export interface RealPkoPlane {
  cp: ControlPlane;
  admin: KubeConfig;
  /** Token user `controller`, bound to deploy/rbac.yaml's ClusterRole. */
  controller: KubeConfig;
  /** CRD names installed (ours and PKO's). */
  crds: string[];
  stop(): Promise<void>;
}

/** Upstream CRD files for a PKO major version (v1: Stack + Program of v1.16.0; v2: all of v2.9.0). */
export async function pkoCrdFiles(major: PkoMajor): Promise<string[]> {
  const dir = major === 'v1' ? path.join(SHARED_PKO_CRDS, `v${REALPKO_VERSIONS.pkoV1}`) : SHARED_PKO_CRDS;
  const files = await yamlFilesIn(dir);
  if (files.length === 0)
    throw new Error(`no PKO CRDs in ${dir}: the real-PKO tests need ../shared/pko-crds`);
  return files;
}

function kubeConfigFrom(file: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return kc;
}

/** Starts a control plane with our CRDs and PKO's `major` CRDs and binds the controller's role. */
export async function startRealPkoPlane(major: PkoMajor, log: (line: string) => void): Promise<RealPkoPlane> {
  const cp = await startControlPlane({ log });
  try {
    const admin = kubeConfigFrom(cp.kubeconfigPath);
    const crds = await readCRDs([
      ...(await yamlFilesIn(path.join(ROOT, 'crds'))),
      ...(await pkoCrdFiles(major)),
    ]);
    await installCRDs(admin, crds);
    const controller = kubeConfigFrom(cp.kubeconfigFor('controller'));
    await bindRole(admin, 'User', 'controller');
    return {
      cp,
      admin,
      controller,
      crds: crds.map((c) => c.metadata?.name ?? ''),
      stop: () => cp.stop(),
    };
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

/**
 * Binds the shipped rules (config/rbac/role.yaml's ClusterRole and leader_election_role.yaml's
 * Lease rules) to a user, as test/support/controller.ts does on the shared control plane.
 */
async function bindRole(admin: KubeConfig, kind: 'User', name: string): Promise<void> {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const rulesOf = (file: string): V1PolicyRule[] =>
    (parse(readFileSync(path.join(ROOT, 'config', 'rbac', file), 'utf8')) as { rules: V1PolicyRule[] }).rules;
  for (const [roleName, rules] of [
    ['pko-nc-test-controller', rulesOf('role.yaml')],
    ['pko-nc-test-controller-leases', rulesOf('leader_election_role.yaml')],
  ] as const) {
    await rbac.createClusterRole({ body: { metadata: { name: roleName }, rules } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: roleName },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
        subjects: [{ kind, name, apiGroup: 'rbac.authorization.k8s.io' }],
      },
    });
  }
}

/** Creates namespace `name` (and, as no controller-manager runs here, its `default` ServiceAccount). */
export async function createNamespace(admin: KubeConfig, name: string): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name } } });
  await core.createNamespacedServiceAccount({ namespace: name, body: { metadata: { name: 'default' } } });
}

// ---------------------------------------------------------------------------------------------
// Processes

/** A child process with its output kept (last 2,000 lines) and optionally mirrored to a file. */
export class OperatorProcess {
  readonly name: string;
  readonly lines: string[] = [];
  readonly #child: ChildProcess;
  readonly #cleanup: () => Promise<void>;
  #exited = false;

  constructor(name: string, child: ChildProcess, cleanup: () => Promise<void>, log: (line: string) => void) {
    this.name = name;
    this.#child = child;
    this.#cleanup = cleanup;
    const keep = (b: Buffer): void => {
      for (const line of b.toString('utf8').split('\n')) {
        if (line === '') continue;
        this.lines.push(line);
        if (this.lines.length > 2000) this.lines.shift();
        log(`${name}: ${line}`);
      }
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    child.on('exit', () => {
      this.#exited = true;
    });
  }

  get exited(): boolean {
    return this.#exited;
  }

  /** The last `n` output lines (for failure messages). */
  tail(n = 40): string {
    return this.lines.slice(-n).join('\n');
  }

  /** SIGTERM, SIGKILL after 10 s; then removes its folders. Idempotent. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (!this.#exited && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    }
    await this.#cleanup();
  }
}

/** Environment PKO and the Pulumi CLI get in every test (see ../shared facts: offline Pulumi). */
function pulumiEnv(bins: RealPkoBinaries, home: string, tmp: string): NodeJS.ProcessEnv {
  return {
    PATH: `${bins.pulumiBinDir}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
    HOME: home,
    // The Pulumi CLI takes its home from the passwd entry, not HOME (see workspace-standin.ts).
    PULUMI_HOME: path.join(home, '.pulumi'),
    TMPDIR: tmp,
    PULUMI_SKIP_UPDATE_CHECK: 'true',
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: 'true',
  };
}

/**
 * Starts PKO v1.16's manager for `namespace` (`WATCH_NAMESPACE`), as the admin of `kubeconfigPath`.
 * Env as PKO's v1 docs for local runs: `OSDK_FORCE_RUN_MODE=local` (no in-cluster metrics
 * Service), private `HOME`/`TMPDIR` (work dirs go to `$TMPDIR/pulumi-working/<ns>/<stack>`).
 * Resolves once the manager logs that its Stack controller started.
 */
export async function startPkoV1(opts: {
  bins: RealPkoBinaries;
  kubeconfigPath: string;
  namespace: string;
  log: (line: string) => void;
}): Promise<OperatorProcess> {
  await assertPortFree(8383, `PKO v${REALPKO_VERSIONS.pkoV1}'s metrics server`);
  const root = await mkdtemp(path.join(tmpdir(), 'pko-nc-pko-v1-'));
  const home = path.join(root, 'home');
  const tmp = path.join(root, 'tmp');
  await mkdir(home, { recursive: true });
  await mkdir(tmp, { recursive: true });
  const child = spawn(opts.bins.pkoV1Manager, [], {
    env: {
      ...pulumiEnv(opts.bins, home, tmp),
      KUBECONFIG: opts.kubeconfigPath,
      WATCH_NAMESPACE: opts.namespace,
      OSDK_FORCE_RUN_MODE: 'local',
      OPERATOR_NAME: 'pulumi-kubernetes-operator',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc = new OperatorProcess(
    'pko-v1',
    child,
    () => rm(root, { recursive: true, force: true }),
    opts.log,
  );
  await waitForLine(proc, /Starting workers|starting control loop|Starting Controller/i, 60_000);
  return proc;
}

async function waitForLine(proc: OperatorProcess, re: RegExp, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.lines.some((l) => re.test(l))) return;
    if (proc.exited) throw new Error(`${proc.name} exited during start-up:\n${proc.tail()}`);
    if (Date.now() > deadline)
      throw new Error(`${proc.name} did not log ${String(re)} within ${timeoutMs} ms:\n${proc.tail()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Namespace and ServiceAccount PKO v2's operator presents to workspace agents. */
const V2_OPERATOR_NS = 'pulumi-kubernetes-operator';
const V2_OPERATOR_SA = 'controller-manager';

export interface PkoV2 {
  operator: OperatorProcess;
  standIn: WorkspaceStandIn;
  /** The operator's `WORKSPACE_LOCALHOST`, routing each call to its workspace's agent. */
  router: WorkspaceRouter;
  stop(): Promise<void>;
}

/**
 * Starts PKO v2.9's operator (all namespaces, leader election off, no metrics/health ports, its
 * program file server on a free loopback port) and the workspace stand-in for `namespace`.
 * Creates what the operator's Helm chart would: its namespace and ServiceAccount, and the RBAC
 * that lets that ServiceAccount `use` `workspaces/rpc` (checked by the agent in `--auth-mode
 * kube`). `caFile` is trusted by operator and agent (`SSL_CERT_FILE`), for the HTTPS git server.
 */
export async function startPkoV2(opts: {
  bins: RealPkoBinaries;
  plane: RealPkoPlane;
  namespace: string;
  caFile: string;
  log: (line: string) => void;
  /** Serve the agent's output as the workspace pod's log (WorkspaceStandInOptions.kubelet). */
  kubelet?: KubeletStandIn;
}): Promise<PkoV2> {
  const { admin } = opts.plane;
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const exists = await core
    .readNamespace({ name: V2_OPERATOR_NS })
    .then(() => true)
    .catch(() => false);
  if (!exists) {
    await core.createNamespace({ body: { metadata: { name: V2_OPERATOR_NS } } });
    await core.createNamespacedServiceAccount({
      namespace: V2_OPERATOR_NS,
      body: { metadata: { name: V2_OPERATOR_SA } },
    });
    await rbac.createClusterRole({
      body: {
        metadata: { name: 'pko-workspace-rpc' },
        rules: [{ apiGroups: ['auto.pulumi.com'], resources: ['workspaces/rpc'], verbs: ['use'] }],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'pko-workspace-rpc' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pko-workspace-rpc' },
        subjects: [{ kind: 'ServiceAccount', name: V2_OPERATOR_SA, namespace: V2_OPERATOR_NS }],
      },
    });
  }
  const root = await mkdtemp(path.join(tmpdir(), 'pko-nc-pko-v2-'));
  const home = path.join(root, 'home');
  const tmp = path.join(root, 'tmp');
  await mkdir(home, { recursive: true });
  await mkdir(tmp, { recursive: true });
  // The test provider in a plugin cache, at the version programs name (`options: version`).
  const plugins = path.join(root, 'plugins');
  const pkotestDir = path.join(plugins, `resource-pkotest-v${REALPKO_VERSIONS.pkotest}`);
  await mkdir(pkotestDir, { recursive: true });
  await symlink(
    path.join(opts.bins.pulumiBinDir, 'pulumi-resource-pkotest'),
    path.join(pkotestDir, 'pulumi-resource-pkotest'),
  );
  const router = await WorkspaceRouter.start(opts.log);
  const fsPort = await freePort();
  const child = spawn(
    opts.bins.pkoV2Manager,
    [
      '--metrics-bind-address=0',
      '--health-probe-bind-address=0',
      `--program-fs-addr=127.0.0.1:${fsPort}`,
      `--program-fs-adv-addr=127.0.0.1:${fsPort}`,
    ],
    {
      env: {
        ...pulumiEnv(opts.bins, home, tmp),
        KUBECONFIG: opts.plane.cp.kubeconfigPath,
        WORKSPACE_LOCALHOST: router.address,
        POD_NAMESPACE: V2_OPERATOR_NS,
        POD_SA_NAME: V2_OPERATOR_SA,
        SSL_CERT_FILE: opts.caFile,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const standIn = new WorkspaceStandIn({
    kubeConfig: admin,
    kubeconfigPath: opts.plane.cp.kubeconfigPath,
    namespace: opts.namespace,
    agent: opts.bins.pkoV2Agent,
    pulumiBinDir: opts.bins.pulumiBinDir,
    router,
    pulumiPlugins: plugins,
    caFile: opts.caFile,
    workRoot: path.join(root, 'pods'),
    log: opts.log,
    ...(opts.kubelet ? { kubelet: opts.kubelet } : {}),
  });
  const operator = new OperatorProcess('pko-v2', child, () => Promise.resolve(), opts.log);
  try {
    await waitForLine(operator, /Starting workers/i, 60_000);
  } catch (err) {
    await operator.stop();
    await router.close();
    await rm(root, { recursive: true, force: true });
    throw err;
  }
  standIn.start();
  return {
    operator,
    standIn,
    router,
    stop: async () => {
      await operator.stop();
      await standIn.stop();
      await router.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** Writes `pem` to a temporary file and returns its path (for `SSL_CERT_FILE`). */
export async function writeCaFile(pem: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'pko-nc-ca-'));
  const file = path.join(dir, 'ca.crt');
  await writeFile(file, pem);
  return file;
}

// ---------------------------------------------------------------------------------------------
// Stacks

/** Creates a Stack `pulumi.com/v1` with `spec`. */
export async function createStack(
  kc: KubeConfig,
  namespace: string,
  name: string,
  spec: Record<string, unknown>,
): Promise<Stack> {
  return kubeRequest<Stack>(kc, {
    method: 'POST',
    path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace }),
    body: { apiVersion: 'pulumi.com/v1', kind: 'Stack', metadata: { name }, spec },
  });
}

/** Sets `pulumi.com/reconciliation-request` (PKO v1 and v2 reconcile at once when it changes). */
export async function requestReconcile(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  await kubeRequest(kc, {
    method: 'PATCH',
    path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace, name }),
    contentType: 'application/merge-patch+json',
    body: { metadata: { annotations: { 'pulumi.com/reconciliation-request': new Date().toISOString() } } },
  });
}

// ---------------------------------------------------------------------------------------------
// Programs

/**
 * A Pulumi YAML program with outputs only (no resource plugins needed). `broken` references an
 * undefined variable, which makes `pulumi up` and `pulumi preview` fail with a program error.
 */
export function yamlProgram(n: number, opts: { broken?: boolean } = {}): Record<string, string> {
  return {
    'Pulumi.yaml': [
      'name: demo-app',
      'runtime: yaml',
      'outputs:',
      opts.broken === true ? '  greeting: ${doesNotExist}' : `  greeting: hello-${n}`,
      `  number: ${n}`,
      '',
    ].join('\n'),
  };
}

/** Passphrase of the test backends (a Literal env ref: not a secret worth protecting). */
export const PASSPHRASE = 'pko-nc-test-passphrase';

/** `spec` fields every test Stack shares: file backend, passphrase, branch `main`, 60 s poll. */
export function stackSpecBase(backendDir: string): Record<string, unknown> {
  return {
    stack: 'dev',
    branch: 'main',
    backend: `file://${backendDir}`,
    envRefs: { PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: PASSPHRASE } } },
    resyncFrequencySeconds: 60,
  };
}

// ---------------------------------------------------------------------------------------------
// Recording

/** One stored version of a Stack or Update, as a watch delivered it. */
export interface RecordedObject {
  /** ms since the recorder started. */
  at: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: 'Stack' | 'Update';
  object: Stack | Update;
}

interface WatchedKind {
  kind: 'Stack' | 'Update';
  group: string;
  version: string;
  plural: string;
}

/**
 * Watches Stacks (and, when `updates`, Updates) of a namespace and keeps every version
 * delivered, in order. Re-establishes a watch that ends, from the last resourceVersion seen.
 */
export class StatusRecorder {
  readonly items: RecordedObject[] = [];
  readonly #kc: KubeConfig;
  readonly #namespace: string;
  readonly #kinds: WatchedKind[];
  readonly #aborts: AbortController[] = [];
  readonly #t0 = Date.now();
  #stopped = false;

  constructor(kc: KubeConfig, namespace: string, opts: { updates: boolean }) {
    this.#kc = kc;
    this.#namespace = namespace;
    this.#kinds = [
      { kind: 'Stack', group: 'pulumi.com', version: 'v1', plural: 'stacks' },
      ...(opts.updates
        ? [{ kind: 'Update' as const, group: 'auto.pulumi.com', version: 'v1alpha1', plural: 'updates' }]
        : []),
    ];
  }

  async start(): Promise<void> {
    for (const k of this.#kinds) await this.#watch(k, undefined);
  }

  async #watch(k: WatchedKind, rv: string | undefined): Promise<void> {
    if (this.#stopped) return;
    let last = rv;
    if (last === undefined) {
      const path = objectPath({
        group: k.group,
        version: k.version,
        plural: k.plural,
        namespace: this.#namespace,
      });
      // A CRD just (re)created answers 429 "storage is (re)initializing" (Retry-After: 1) until its
      // watch cache is ready: wait for it, as a client should, for up to 30 s.
      for (let attempt = 0; ; attempt++) {
        try {
          const list = await kubeRequest<{ metadata: { resourceVersion: string } }>(this.#kc, {
            method: 'GET',
            path,
          });
          last = list.metadata.resourceVersion;
          break;
        } catch (err) {
          if (!(err instanceof KubeApiError && err.statusCode === 429) || attempt >= 30) throw err;
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
    }
    const watch = new Watch(this.#kc);
    const abort = await watch.watch(
      `/apis/${k.group}/${k.version}/namespaces/${this.#namespace}/${k.plural}`,
      { resourceVersion: last, allowWatchBookmarks: true },
      (type: string, obj: Stack | Update) => {
        const objRv = obj.metadata.resourceVersion;
        if (objRv !== undefined) last = objRv;
        if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') {
          this.items.push({ at: Date.now() - this.#t0, type, kind: k.kind, object: structuredClone(obj) });
        }
      },
      () => {
        if (!this.#stopped) void this.#watch(k, last).catch(() => undefined);
      },
    );
    this.#aborts.push(abort);
  }

  /** Versions of Stack `name` in order. */
  stacks(name: string): Stack[] {
    return this.items
      .filter((i) => i.kind === 'Stack' && i.object.metadata.name === name)
      .map((i) => i.object);
  }

  stop(): void {
    this.#stopped = true;
    for (const a of this.#aborts) a.abort();
  }
}
