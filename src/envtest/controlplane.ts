/**
 * A real Kubernetes control plane (etcd + kube-apiserver): throw-away for integration tests, kept
 * in a folder across runs for `npm start` in dev mode (`persistDir`) — the controller-runtime
 * "envtest" convention, re-implemented.
 *
 * What it follows (binary lookup order, flags, readiness), as controller-runtime's envtest does:
 * - etcd listens on free loopback ports with `--unsafe-no-fsync`; ready when `GET /health` is 200.
 * - kube-apiserver serves HTTPS on a free loopback port with a self-signed certificate it writes
 *   into `--cert-dir` (`apiserver.crt`, which holds the leaf and its self-signed CA); RBAC is on;
 *   identities come from a static token file (admin in `system:masters`, plus `controller` and
 *   `viewer` with no groups and therefore no permissions until a test binds some).
 * - Ready when `/readyz` answers 200 to the admin token and the `default` namespace exists.
 *
 * Children run in their own process groups (`detached`) behind a tiny `sh` watchdog: when this
 * Node process dies for any reason — even SIGKILL — the watchdog's stdin pipe closes and it
 * SIGKILLs the binary, so no orphaned etcd/kube-apiserver survive a crashed test run. Normal
 * exits are also covered by a `process.on('exit')` handler that SIGKILLs every live group and
 * removes the temp dirs; dirs left by a killed process are swept by the next start.
 *
 * This module must stay usable outside vitest (dev mode): no test-framework imports here.
 * It is the only module in src/ besides src/config.ts that reads `process.env`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { constants as fsConstants, rmSync, writeFileSync } from 'node:fs';
import { access, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Options for {@link startControlPlane}. */
export interface ControlPlaneOptions {
  /** Receives lifecycle lines (no secrets). Child output is kept in a ring buffer instead. */
  log?: (line: string) => void;
  /** Parent folder for the temporary directory (default `os.tmpdir()`). */
  rootDir?: string;
  /** Budget for each of etcd and kube-apiserver to become ready, in ms (default 60000). */
  startTimeoutMs?: number;
  /**
   * Keep the control plane in this folder across runs (the dev cluster of `npm start`): etcd
   * data, certificates, tokens, service-account keys, the ports last used (taken again when free)
   * and the admin kubeconfig at `<dir>/kubeconfig`, so a `KUBECONFIG` exported once stays valid.
   * `stop()` keeps the folder. A second process using the same folder is refused (its pid is in
   * `<dir>/owner.pid`). Default: a fresh temp dir, removed on stop.
   */
  persistDir?: string;
  /** With `persistDir`: wipe the folder first (after making sure no live process owns it). */
  fresh?: boolean;
}

/** Token identities pre-created in the API server's static token file. */
export type ControlPlaneUser = 'admin' | 'controller' | 'viewer';

/** A running control plane. */
export interface ControlPlane {
  /**
   * Admin kubeconfig file: cluster `https://127.0.0.1:<port>` with the apiserver serving
   * certificate as CA, user `admin` (bearer token, group `system:masters`).
   */
  kubeconfigPath: string;
  /** `https://127.0.0.1:<port>`. */
  server: string;
  /** `gitVersion` from `GET /version`, e.g. `v1.35.4`. */
  serverVersion: string;
  /** `etcdserver` from etcd's `GET /version`, e.g. `3.6.16`. */
  etcdVersion: string;
  /** etcd's client URL, `http://127.0.0.1:<port>` (its `/metrics` for benchmarks). */
  etcdURL: string;
  /**
   * Writes (once) a kubeconfig for a pre-created token user and returns its path.
   * `controller` and `viewer` have no groups beyond `system:authenticated`, so RBAC denies
   * them everything until bindings are created.
   */
  kubeconfigFor(user: ControlPlaneUser): string;
  /**
   * SIGTERMs kube-apiserver (SIGKILL after 5 s), starts it again on the same port with the same
   * etcd, certificates and tokens, and resolves once it is ready again. Cuts every watch.
   * Calls are serialized. Rejects (with the child's output tail) if it does not come back.
   */
  restartApiServer(): Promise<void>;
  /** SIGTERMs both process groups, SIGKILLs after 5 s, removes the temp dir. Idempotent. */
  stop(): Promise<void>;
}

/** Paths of the two binaries; `dir` is the folder holding kube-apiserver. */
export interface ControlPlaneBinaries {
  etcd: string;
  kubeApiserver: string;
  dir: string;
}

const KILL_GRACE_MS = 5_000;
const RING_LINES = 200;

// ---------------------------------------------------------------------------------------------
// Binary lookup

/** Whether this process may access `file` as `mode` says (`fsConstants.X_OK`, `R_OK`). */
async function mayAccess(file: string, mode: number): Promise<boolean> {
  try {
    await access(file, mode);
    return true;
  } catch {
    return false;
  }
}

function isExecutable(file: string): Promise<boolean> {
  return mayAccess(file, fsConstants.X_OK);
}

function isReadable(file: string): Promise<boolean> {
  return mayAccess(file, fsConstants.R_OK);
}

/** Repository root, resolved from this file (works from src/ and from a dist/ build). */
function repoRoot(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
}

function tailLines(text: string, n: number): string {
  return text.trimEnd().split('\n').slice(-n).join('\n');
}

/** Runs `bash scripts/envtest-build.sh`; resolves to the folder it prints last on stdout. */
async function runBuildScript(log?: (line: string) => void): Promise<string> {
  const script = path.join(repoRoot(), 'scripts', 'envtest-build.sh');
  if (!(await isReadable(script))) {
    throw new Error(`envtest: build script ${script} not found`);
  }
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [script], { cwd: repoRoot(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let partial = '';
    // `go build` prints nothing for minutes: say what is being waited for every 30 s.
    let building: string | undefined;
    const t0 = Date.now();
    const heartbeat = setInterval(() => {
      if (log && building !== undefined) {
        log(
          `envtest-build: still ${building} (${Math.round((Date.now() - t0) / 1000)} s so far; cached once built)`,
        );
      }
    }, 30_000);
    heartbeat.unref();
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      if (stderr.length > 64_000) stderr = stderr.slice(-32_000);
      if (log) {
        partial += d;
        const lines = partial.split('\n');
        partial = lines.pop() ?? '';
        for (const l of lines) {
          if (!l.startsWith('envtest-build:')) continue;
          const m = /^envtest-build: (building [^(]+?)\s*(\(|$)/.exec(l);
          if (m) building = m[1];
          log(l);
        }
      }
    });
    child.on('error', (err) => {
      clearInterval(heartbeat);
      reject(new Error(`envtest: could not run ${script}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearInterval(heartbeat);
      const dir = stdout.trim().split('\n').pop()?.trim() ?? '';
      if (code === 0 && dir !== '') {
        resolve(dir);
        return;
      }
      const how = signal ? `signal ${signal}` : `exit code ${String(code)}`;
      reject(
        new Error(
          `envtest: ${script} failed (${how}) and printed no binaries folder.\n` +
            `--- stderr tail ---\n${tailLines(stderr, 30)}`,
        ),
      );
    });
  });
}

/**
 * Locates etcd and kube-apiserver. Order per binary: `TEST_ASSET_ETCD` /
 * `TEST_ASSET_KUBE_APISERVER` (must then be executable), then `$KUBEBUILDER_ASSETS/<name>`,
 * then the versioned cache filled by `bash scripts/envtest-build.sh` (which builds from Go
 * modules on first use — minutes cold — and prints the folder as its last stdout line).
 *
 * @param opts.log receives the build script's `envtest-build:` progress lines.
 * @throws Error naming every source tried and, if the build ran, its stderr tail. Never fakes.
 */
export async function findBinaries(
  opts: { log?: (line: string) => void } = {},
): Promise<ControlPlaneBinaries> {
  const tried: string[] = [];
  const fromEnv = async (envName: string, binName: string): Promise<string | undefined> => {
    const explicit = process.env[envName];
    if (explicit !== undefined && explicit !== '') {
      if (await isExecutable(explicit)) return explicit;
      throw new Error(`envtest: ${envName}=${explicit} is not an executable file`);
    }
    const assets = process.env['KUBEBUILDER_ASSETS'];
    if (assets !== undefined && assets !== '') {
      const candidate = path.join(assets, binName);
      if (await isExecutable(candidate)) return candidate;
      tried.push(`KUBEBUILDER_ASSETS=${assets} has no executable ${binName}`);
    }
    return undefined;
  };
  let etcd = await fromEnv('TEST_ASSET_ETCD', 'etcd');
  let kubeApiserver = await fromEnv('TEST_ASSET_KUBE_APISERVER', 'kube-apiserver');
  if (etcd === undefined || kubeApiserver === undefined) {
    let dir: string;
    try {
      dir = await runBuildScript(opts.log);
    } catch (err) {
      const prefix = tried.length > 0 ? `${tried.join('; ')}; ` : '';
      throw new Error(`${prefix}${(err as Error).message}`, { cause: err });
    }
    etcd ??= path.join(dir, 'etcd');
    kubeApiserver ??= path.join(dir, 'kube-apiserver');
    for (const bin of [etcd, kubeApiserver]) {
      if (!(await isExecutable(bin))) {
        throw new Error(`envtest: scripts/envtest-build.sh reported ${dir}, but ${bin} is not executable`);
      }
    }
  }
  return { etcd, kubeApiserver, dir: path.dirname(kubeApiserver) };
}

// ---------------------------------------------------------------------------------------------
// Child processes

/** Live process groups, SIGKILLed if this process exits without stopping them. */
const liveGroups = new Set<number>();
/** Temp dirs of running control planes, removed by the exit hook too. */
const liveTempDirs = new Set<string>();
/** `owner.pid` files of persistent dirs in use, removed by the exit hook (the data stays). */
const liveOwnerFiles = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pgid of liveGroups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const dir of liveTempDirs) rmSync(dir, { recursive: true, force: true });
    for (const file of liveOwnerFiles) rmSync(file, { force: true });
  });
}

const TEMP_PREFIX = 'pko-nc-envtest-';
const OWNER_FILE = 'owner.pid';

/**
 * Removes temp dirs left by control planes whose owning process died without cleaning up
 * (e.g. a test run killed by a signal): each dir records its owner's pid in `owner.pid`.
 * An etcd data dir is ~120 MB, so leaks add up. Dirs without that file are left alone.
 */
async function sweepStaleTempDirs(parent: string): Promise<void> {
  let names: string[];
  try {
    names = (await readdir(parent)).filter((n) => n.startsWith(TEMP_PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = path.join(parent, name);
    let pid: number;
    try {
      pid = Number((await readFile(path.join(dir, OWNER_FILE), 'utf8')).trim());
    } catch {
      continue;
    }
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
      continue; // owner still alive
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') continue;
    }
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * The binary runs in the background; a watchdog blocks reading stdin (a pipe whose only writer
 * is this Node process) and SIGKILLs the binary when it hits EOF, i.e. when Node has died.
 * `sh` ignores TERM so that a group SIGTERM reaches the binary, and `sh` exits only once the
 * binary has — the ChildProcess 'exit' event therefore means the binary is gone.
 */
const WATCHDOG = [
  // Background lists get stdin from /dev/null, so keep the lifeline on fd 3 instead.
  'exec 3<&0',
  '"$@" </dev/null 3<&- &',
  'c=$!',
  '( while read -r _ <&3; do :; done; kill -KILL "$c" 2>/dev/null ) &',
  'w=$!',
  "trap '' TERM INT HUP",
  'wait "$c"; st=$?',
  'kill -KILL "$w" 2>/dev/null',
  'exit "$st"',
].join('\n');

class Supervised {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  private readonly ring: string[] = [];
  private exitInfo: string | undefined;

  constructor(name: string, bin: string, args: readonly string[], cwd: string) {
    this.name = name;
    this.child = spawn('/bin/sh', ['-c', WATCHDOG, name, bin, ...args], {
      cwd,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const pid = this.child.pid;
    if (pid !== undefined) liveGroups.add(pid);
    installExitHook();
    // stdin is the watchdog's lifeline: never written, closed only by stop() or Node's death.
    this.child.stdin?.on('error', () => undefined);
    for (const stream of [this.child.stdout, this.child.stderr]) {
      let partial = '';
      stream?.setEncoding('utf8').on('data', (d: string) => {
        partial += d;
        const lines = partial.split('\n');
        partial = lines.pop() ?? '';
        for (const l of lines) this.push(l);
      });
    }
    this.exited = new Promise((resolve) => {
      this.child.on('error', (err) => {
        this.exitInfo = `spawn error: ${err.message}`;
        if (pid !== undefined) liveGroups.delete(pid);
        resolve();
      });
      this.child.on('exit', (code, signal) => {
        this.exitInfo = signal ? `killed by ${signal}` : `exited with code ${String(code)}`;
        if (pid !== undefined) liveGroups.delete(pid);
        resolve();
      });
    });
  }

  private push(line: string): void {
    this.ring.push(line);
    if (this.ring.length > RING_LINES) this.ring.shift();
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  /** Why the child is gone, or undefined while running. */
  get exitReason(): string | undefined {
    return this.exitInfo;
  }

  tail(n = 40): string {
    return this.ring.slice(-n).join('\n');
  }

  private signal(sig: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined || !this.running) return;
    try {
      process.kill(-pid, sig);
    } catch {
      // group already gone
    }
  }

  /** SIGTERM the group, SIGKILL after the grace period; resolves when the child has exited. */
  async stop(graceMs = KILL_GRACE_MS): Promise<void> {
    if (!this.running) return;
    this.signal('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => {
        resolve(true);
      }, graceMs);
    });
    const killed = await Promise.race([this.exited.then(() => false), timedOut]);
    clearTimeout(timer);
    if (killed) {
      this.signal('SIGKILL');
      await this.exited;
    }
    this.child.stdin?.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/** Reserves `n` distinct free loopback TCP ports (held together, then released). */
async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) {
      const srv = net.createServer();
      servers.push(srv);
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', () => {
          resolve();
        });
      });
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') throw new Error('envtest: could not reserve a port');
      ports.push(addr.port);
    }
    return ports;
  } finally {
    await Promise.all(
      servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => {
              resolve();
            });
          }),
      ),
    );
  }
}

interface SimpleResponse {
  status: number;
  body: string;
}

/** One GET with a short timeout. Rejects on connection errors. */
function get(url: string, opts: { ca?: string; token?: string } = {}): Promise<SimpleResponse> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`;
    const onResponse = (res: http.IncomingMessage): void => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    };
    const req =
      u.protocol === 'https:'
        ? https.get(
            u,
            { headers, ...(opts.ca !== undefined ? { ca: opts.ca } : {}), agent: false },
            onResponse,
          )
        : http.get(u, { headers, agent: false }, onResponse);
    req.setTimeout(5_000, () => req.destroy(new Error(`timeout after 5 s: GET ${url}`)));
    req.on('error', reject);
  });
}

const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms);
  });

/**
 * Polls `probe` every 100 ms until it returns true (else a reason string). Fails fast if the child exits; on timeout
 * rejects with the last probe error and the child's output tail.
 */
async function waitReady(
  what: string,
  child: Supervised,
  timeoutMs: number,
  probe: () => Promise<true | string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!child.running) {
      throw new Error(
        `envtest: ${what} ${child.exitReason ?? 'exited'} before becoming ready.\n--- ${child.name} output tail ---\n${child.tail()}`,
      );
    }
    let last: string;
    try {
      const result = await probe();
      if (result === true) return;
      last = result;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `envtest: ${what} not ready after ${timeoutMs} ms (last: ${last}).\n--- ${child.name} output tail ---\n${child.tail()}`,
      );
    }
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------------------------
// Persistent folder (dev cluster)

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * Claims `dir` for this process by creating `owner.pid` exclusively. A file left by a dead
 * process is replaced; one of a live process makes this throw.
 */
async function claimDir(dir: string): Promise<void> {
  const file = path.join(dir, OWNER_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(file, `${process.pid}\n`, { flag: 'wx' });
      liveOwnerFiles.add(file);
      installExitHook();
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    // Our own pid counts as live only while this process holds the folder (else it is a file
    // left by an earlier process that had the same pid).
    const live =
      pid === process.pid ? liveOwnerFiles.has(file) : Number.isInteger(pid) && pid > 0 && processAlive(pid);
    if (live) {
      throw new Error(
        `envtest: the control plane in ${dir} is in use by process ${pid} (another \`npm start\`?). ` +
          `Stop it, or use another folder (--dev-cluster-dir). If no such process is yours, remove ${file}.`,
      );
    }
    await rm(file, { force: true });
  }
  throw new Error(`envtest: could not claim ${dir}`);
}

/** Reads a JSON file, or undefined when it does not exist or does not parse. */
async function readJson<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

/** True when every port can be bound on 127.0.0.1 right now. */
async function portsFree(ports: readonly number[]): Promise<boolean> {
  for (const port of ports) {
    const free = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => {
        resolve(false);
      });
      srv.listen(port, '127.0.0.1', () => {
        srv.close(() => {
          resolve(true);
        });
      });
    });
    if (!free) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Start

interface TokenUser {
  name: ControlPlaneUser;
  token: string;
  groups: string[];
}

/**
 * Starts etcd and kube-apiserver (binaries from {@link findBinaries}) in a fresh temp dir and
 * resolves once the API server is ready for the admin token and `default` exists.
 *
 * Typical warm start: a few seconds. On failure everything started is stopped and removed,
 * and the Error carries the failing child's output tail. Tokens never appear in errors/logs.
 */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const log = opts.log ?? ((): void => undefined);
  const timeoutMs = opts.startTimeoutMs ?? 60_000;
  const bins = await findBinaries({ log });

  const persistent = opts.persistDir !== undefined;
  let tmp: string;
  if (opts.persistDir !== undefined) {
    tmp = path.resolve(opts.persistDir);
    await mkdir(tmp, { recursive: true, mode: 0o700 });
    await claimDir(tmp);
    if (opts.fresh === true) {
      for (const name of await readdir(tmp)) {
        if (name !== OWNER_FILE) await rm(path.join(tmp, name), { recursive: true, force: true });
      }
      log(`wiped ${tmp} (--fresh)`);
    }
  } else {
    const parent = opts.rootDir ?? os.tmpdir();
    await sweepStaleTempDirs(parent);
    tmp = await mkdtemp(path.join(parent, TEMP_PREFIX));
    liveTempDirs.add(tmp);
    installExitHook();
    await writeFile(path.join(tmp, OWNER_FILE), `${process.pid}\n`);
  }
  const etcdDir = path.join(tmp, 'etcd');
  const certDir = path.join(tmp, 'certs');
  await mkdir(certDir, { recursive: true });

  let etcd: Supervised | undefined;
  let apiserver: Supervised | undefined;
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // kube-apiserver first: it keeps etcd connections open until it is gone.
    const t0 = Date.now();
    await apiserver?.stop();
    const t1 = Date.now();
    await etcd?.stop();
    log(`stopped kube-apiserver in ${t1 - t0} ms, etcd in ${Date.now() - t1} ms`);
    if (persistent) {
      const owner = path.join(tmp, OWNER_FILE);
      await rm(owner, { force: true });
      liveOwnerFiles.delete(owner);
      log(`control plane stopped; its data stays in ${tmp}`);
      return;
    }
    await rm(tmp, { recursive: true, force: true });
    liveTempDirs.delete(tmp);
    log('control plane stopped');
  };

  try {
    // A persistent control plane takes its last ports again when they are free, so the server
    // URL in its kubeconfig (and tokens issued for it) stay valid across runs.
    interface Ports {
      etcdClient: number;
      etcdPeer: number;
      api: number;
    }
    const portsFile = path.join(tmp, 'ports.json');
    const last = persistent ? await readJson<Ports>(portsFile) : undefined;
    let ports: Ports;
    if (last !== undefined && (await portsFree([last.etcdClient, last.etcdPeer, last.api]))) {
      ports = last;
    } else {
      const [etcdClient, etcdPeer, api] = (await freePorts(3)) as [number, number, number];
      ports = { etcdClient, etcdPeer, api };
      if (last !== undefined) log(`ports of the last run are taken: kube-apiserver moves to ${api}`);
      if (persistent) await writeFile(portsFile, JSON.stringify(ports));
    }
    const { etcdClient: etcdClientPort, etcdPeer: etcdPeerPort, api: apiPort } = ports;

    // --- etcd -------------------------------------------------------------------------------
    const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
    const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
    etcd = new Supervised(
      'etcd',
      bins.etcd,
      [
        '--name=envtest',
        `--data-dir=${etcdDir}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=envtest=${peerUrl}`,
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ],
      tmp,
    );
    const etcdStarted = Date.now();
    log(`waiting for etcd on ${etcdUrl} (GET /health)`);
    await waitReady('etcd', etcd, timeoutMs, async () => {
      const res = await get(`${etcdUrl}/health`);
      return res.status === 200 || `/health answered ${res.status}`;
    });
    const etcdVersion = (JSON.parse((await get(`${etcdUrl}/version`)).body) as { etcdserver?: string })
      .etcdserver;
    log(`etcd ${etcdVersion ?? '?'} ready on ${etcdUrl} in ${Date.now() - etcdStarted} ms`);

    // --- credentials ------------------------------------------------------------------------
    const usersFile = path.join(tmp, 'users.json');
    const kept = persistent ? await readJson<TokenUser[]>(usersFile) : undefined;
    const users: TokenUser[] = kept ?? [
      { name: 'admin', token: randomBytes(32).toString('hex'), groups: ['system:masters'] },
      { name: 'controller', token: randomBytes(32).toString('hex'), groups: [] },
      { name: 'viewer', token: randomBytes(32).toString('hex'), groups: [] },
    ];
    if (persistent && kept === undefined) await writeFile(usersFile, JSON.stringify(users), { mode: 0o600 });
    const tokenFile = path.join(tmp, 'tokens.csv');
    await writeFile(
      tokenFile,
      users
        .map((u) => {
          const base = `${u.token},${u.name},${randomUUID()}`;
          return u.groups.length > 0 ? `${base},"${u.groups.join(',')}"` : base;
        })
        .join('\n') + '\n',
      { mode: 0o600 },
    );
    const saKey = path.join(tmp, 'sa.key');
    const saPub = path.join(tmp, 'sa.pub');
    if (!(persistent && (await isReadable(saKey)) && (await isReadable(saPub)))) {
      const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      await writeFile(saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
      await writeFile(saPub, publicKey.export({ type: 'spki', format: 'pem' }));
    }

    // --- kube-apiserver -----------------------------------------------------------------------
    const server = `https://127.0.0.1:${apiPort}`;
    const apiArgs = [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${certDir}`,
      `--secure-port=${apiPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      '--authorization-mode=RBAC',
      '--disable-admission-plugins=ServiceAccount',
      `--token-auth-file=${tokenFile}`,
      `--service-account-issuer=${server}/`,
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
    ];
    const admin = users[0] as TokenUser;
    const certFile = path.join(certDir, 'apiserver.crt');
    let ca = '';

    const startApiServer = async (): Promise<void> => {
      const proc = new Supervised('kube-apiserver', bins.kubeApiserver, apiArgs, tmp);
      apiserver = proc;
      const t0 = Date.now();
      log(`waiting for kube-apiserver on ${server} (GET /readyz, then namespace default)`);
      await waitReady('kube-apiserver', proc, timeoutMs, async () => {
        if (ca === '') {
          // Written by kube-apiserver itself on first start (self-signed leaf + its CA).
          try {
            ca = await readFile(certFile, 'utf8');
          } catch {
            return `${certFile} not written yet`;
          }
        }
        const readyz = await get(`${server}/readyz`, { ca, token: admin.token });
        if (readyz.status !== 200) return `/readyz answered ${readyz.status}`;
        const ns = await get(`${server}/api/v1/namespaces/default`, { ca, token: admin.token });
        return ns.status === 200 || `namespace default: ${ns.status}`;
      });
      log(`kube-apiserver ready on ${server} in ${Date.now() - t0} ms`);
    };
    await startApiServer();

    const versionRes = await get(`${server}/version`, { ca, token: admin.token });
    const serverVersion = (JSON.parse(versionRes.body) as { gitVersion?: string }).gitVersion ?? 'unknown';

    // --- kubeconfigs --------------------------------------------------------------------------
    const written = new Map<ControlPlaneUser, string>();
    const kubeconfigFor = (name: ControlPlaneUser): string => {
      const existing = written.get(name);
      if (existing !== undefined) return existing;
      const user = users.find((u) => u.name === name);
      if (user === undefined) throw new Error(`envtest: unknown user ${name as string}`);
      const file = path.join(tmp, persistent && name === 'admin' ? 'kubeconfig' : `kubeconfig-${name}.yaml`);
      const doc = {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'envtest',
            cluster: { server, 'certificate-authority-data': Buffer.from(ca).toString('base64') },
          },
        ],
        users: [{ name, user: { token: user.token } }],
        contexts: [
          { name: `${name}@envtest`, context: { cluster: 'envtest', user: name, namespace: 'default' } },
        ],
        'current-context': `${name}@envtest`,
      };
      // Synchronous so the API stays a plain function; the file is tiny. JSON (a kubeconfig may
      // be, as YAML's subset): a controller reading it loads no YAML parser (src/text.ts `yaml`), like
      // one in a cluster, which reads no kubeconfig at all.
      writeFileSyncPrivate(file, `${JSON.stringify(doc, null, 2)}\n`);
      written.set(name, file);
      return file;
    };
    const kubeconfigPath = kubeconfigFor('admin');

    let restartChain: Promise<void> = Promise.resolve();
    const restartApiServer = (): Promise<void> => {
      const run = async (): Promise<void> => {
        if (stopped) throw new Error('envtest: control plane already stopped');
        log('restarting kube-apiserver');
        await apiserver?.stop();
        await startApiServer();
      };
      const next = restartChain.then(run, run);
      restartChain = next.catch(() => undefined);
      return next;
    };

    return {
      kubeconfigPath,
      etcdURL: etcdUrl,
      server,
      serverVersion,
      etcdVersion: etcdVersion ?? 'unknown',
      kubeconfigFor,
      restartApiServer,
      stop,
    };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

function writeFileSyncPrivate(file: string, content: string): void {
  writeFileSync(file, content, { mode: 0o600 });
}
