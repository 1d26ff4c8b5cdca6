/**
 * What the real-PKO scenario files share: a control plane with one PKO major version's CRDs,
 * the controller under test running in-process as the RBAC-bound user `controller`, a generic
 * webhook receiver and the GitHub contract server, each with a Provider and an Alert for all
 * Stacks of the namespace ({@link startKit}). Delivered events are read back in the order they
 * arrived. Also: the controller's in-process start ({@link controllerLauncher}); real PKO v2
 * with the kubelet stand-in and the workspace-logs grant ({@link startPkoV2Scene}); a bounded
 * wait for a pull request comment ({@link commentWaiter}); the scenario files' bookkeeping
 * ({@link ScenarioBook}).
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadConfig } from '../../src/config.ts';
import { startController, type ControllerDeps, type ControllerHandle } from '../../src/controller.ts';
import { Redactor } from '../../src/credential/redact.ts';
import { createLogger } from '../../src/log.ts';
import { kubeRequest, loadKubeConfig, objectPath } from '../../src/kube/client.ts';
import type { Stack } from '../../src/api/pko.ts';
import { LogCapture, Objects } from '../support/controller.ts';
import type { GitRepo } from '../support/git-repo.ts';
import { KubeletStandIn } from '../support/kubelet-standin.ts';
import { makeTestPKI, type TestPKI } from '../support/pki.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { createWorkspaceLogsRole, grantWorkspaceLogs } from '../support/workspace-logs.ts';
import { startGitHubServer, type GitHubContractServer, type StoredStatus } from '../forge/github/server.ts';
import {
  createNamespace,
  operatorLock,
  realPkoBinaries,
  startPkoV2,
  startRealPkoPlane,
  writeCaFile,
  type PkoMajor,
  type PkoV2,
  type StatusRecorder,
  type RealPkoBinaries,
  type RealPkoPlane,
} from '../support/realpko.ts';

export const GH_TOKEN = 'ghp_realPkoToken0123456789';
export const GH_REPO = 'acme/app';
export const CLUSTER = 'realpko';

/**
 * Everything the operators, the agent, the stand-in and the control plane say, with seconds
 * since the start, written to a file in the temporary folder (named in failure messages) and
 * kept in memory for tails.
 */
export class RunLog {
  readonly lines: string[] = [];
  readonly file: string;
  readonly #t0 = Date.now();
  constructor(name: string) {
    this.file = path.join(tmpdir(), `pko-nc-${name}-${process.pid}.log`);
    writeFileSync(this.file, '');
  }
  add = (line: string): void => {
    const l = `${((Date.now() - this.#t0) / 1000).toFixed(1).padStart(7)} ${line}`;
    this.lines.push(l);
    if (this.lines.length > 20_000) this.lines.splice(0, 5000);
    appendFileSync(this.file, `${l}\n`);
    if (process.env['PKO_NC_REALPKO_VERBOSE']) console.error(l);
  };
  /** The last `n` lines, then where the whole log is. */
  tail(n = 60): string {
    return `${this.lines.slice(-n).join('\n')}\n(whole log: ${this.file})`;
  }
}

/** A delivered generic-webhook event (the fields the scenarios look at). */
export interface Delivered {
  id: string;
  reason: string;
  severity: string;
  message: string;
  commit: string | undefined;
  metadata: Record<string, string>;
  stack: string;
}

export interface Kit {
  bins: RealPkoBinaries;
  plane: RealPkoPlane;
  namespace: string;
  admin: KubeConfig;
  obj: Objects;
  receiver: TestReceiver;
  gh: GitHubContractServer;
  readonly controller: ControllerHandle;
  /** Stops the controller and starts a new one (same flags, same ledger in the cluster). */
  restartController(): Promise<void>;
  controllerLogs: LogCapture;
  /** Milliseconds from starting the controller until its /readyz answered 200. */
  readyzMs: number;
  log: RunLog;
  /** Events the generic receiver got, in arrival order. */
  delivered(): Delivered[];
  /** Statuses GitHub holds for `sha` under our context, oldest first. */
  statuses(sha: string): StoredStatus[];
  close(): Promise<void>;
}

/**
 * Takes the operator lock, starts a control plane with `major`'s CRDs, a namespace, the
 * receivers and the controller, and creates Providers `hook` (generic) and `gh` (github, the
 * repository `acme/app` on the contract server) with Alerts for every Stack of the namespace.
 * Resolves once both Alerts are Ready.
 */
export async function startKit(major: PkoMajor, log: RunLog): Promise<Kit> {
  const release = await operatorLock(log.add);
  const cleanups: (() => Promise<void>)[] = [release];
  const close = async (): Promise<void> => {
    for (const fn of cleanups.reverse())
      await fn().catch((err: unknown) => {
        log.add(`cleanup: ${(err as Error).message}`);
      });
  };
  try {
    const bins = realPkoBinaries(inject('realPkoDir'));
    const plane = await startRealPkoPlane(major, (l) => {
      log.add(`control plane: ${l}`);
    });
    cleanups.push(() => plane.stop());
    const namespace = `realpko-${major}`;
    await createNamespace(plane.admin, namespace);
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    // A non-github.com host is GitHub Enterprise Server to the notifier: API under /api/v3.
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: [GH_REPO],
      tokens: { [GH_TOKEN]: 'pko-bot' },
    });
    cleanups.push(() => gh.close());

    // The receiver and the GitHub contract server listen on 127.0.0.1 (allowed by the launcher).
    const { launch, logs: controllerLogs } = controllerLauncher(plane, namespace, log);
    const startedAt = performance.now();
    let controller = await launch();
    cleanups.push(() => controller.stop());
    // How long until /readyz answers 200 (the Deployment's readiness probe).
    const readyzMs = await until(
      '/readyz 200',
      async () => {
        const res = await fetch(`http://127.0.0.1:${controller.probePort}/readyz`);
        return res.status === 200 ? performance.now() - startedAt : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50, log },
    );

    const obj = new Objects(namespace, plane.admin);
    await obj.provider('hook', { type: 'generic', address: `${receiver.url}/hook` });
    await obj.secret('gh', { token: GH_TOKEN });
    await obj.provider('gh', {
      type: 'github',
      address: `${gh.origin}/${GH_REPO}`,
      secretRef: { name: 'gh' },
    });
    await obj.alert('hook', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack', name: '*' }] });
    await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack', name: '*' }] });
    await obj.waitReady('alerts', 'hook');
    await obj.waitReady('alerts', 'gh');

    const delivered = (): Delivered[] =>
      receiver.requests
        .filter((r) => r.path === '/hook')
        .map((r) => {
          const b = JSON.parse(r.body) as {
            id: string;
            reason: string;
            severity: string;
            message: string;
            metadata: Record<string, string>;
            involvedObject: { name: string };
          };
          return {
            id: b.id,
            reason: b.reason,
            severity: b.severity,
            message: b.message,
            commit: b.metadata['commit'],
            metadata: b.metadata,
            stack: b.involvedObject.name,
          };
        });
    const statuses = (sha: string): StoredStatus[] => gh.statuses(GH_REPO, sha).slice().reverse();
    return {
      bins,
      plane,
      namespace,
      admin: plane.admin,
      obj,
      receiver,
      gh,
      get controller() {
        return controller;
      },
      restartController: async () => {
        await controller.stop();
        controller = await launch();
      },
      controllerLogs,
      readyzMs,
      log,
      delivered,
      statuses,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The Stack as stored. */
export function getStack(kc: KubeConfig, namespace: string, name: string): Promise<Stack> {
  return kubeRequest<Stack>(kc, {
    method: 'GET',
    path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace, name }),
  });
}

// Shared with `npm run demo -- --real-pko` (scripts/demo.ts).
export { createStack, requestReconcile } from '../support/realpko.ts';

export async function deleteStack(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  await kubeRequest(kc, {
    method: 'DELETE',
    path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace, name }),
  });
}

/** Polls `fn` every `intervalMs` until it returns a value other than undefined/false. */
export async function until<T>(
  what: string,
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  opts: { timeoutMs: number; intervalMs?: number; log?: RunLog },
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  let lastErr = '';
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastErr = ` (last error: ${(err as Error).message})`;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${opts.timeoutMs / 1000} s waiting for ${what}${lastErr}` +
          (opts.log ? `\n--- log tail ---\n${opts.log.tail()}` : ''),
      );
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 250));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A temporary folder (for backends). */
export function tempDir(prefix: string): Promise<string> {
  return mkdtemp(path.join(tmpdir(), `pko-nc-${prefix}-`));
}

/**
 * Appends one scenario's outcome to the file named by `PKO_NC_REALPKO_REPORT` (JSON lines), for
 * the closing report: name, seconds, and what reached the receiver and the forge.
 */
export async function report(entry: Record<string, unknown>): Promise<void> {
  const file = process.env['PKO_NC_REALPKO_REPORT'];
  if (file === undefined || file === '') return;
  const { appendFile } = await import('node:fs/promises');
  await appendFile(file, `${JSON.stringify(entry)}\n`);
}

/**
 * Writes a recording to `test/fixtures/realpko/<name>.json` (when `PKO_NC_RECORD_FIXTURES` is
 * set): every stored version of the Stacks/Updates PKO wrote, in order, without
 * `managedFields`, and what the generic receiver got. test/source/replay.test.ts replays it.
 */
export async function writeFixture(name: string, pko: string, rec: StatusRecorder, k: Kit): Promise<void> {
  if (!process.env['PKO_NC_RECORD_FIXTURES']) return;
  const objects = rec.items.map((i) => {
    const o = structuredClone(i.object) as { metadata: Record<string, unknown> };
    delete o.metadata['managedFields'];
    return { ...i, object: o };
  });
  const file = path.resolve(import.meta.dirname, '..', 'fixtures', 'realpko', `${name}.json`);
  await writeFile(
    file,
    `${JSON.stringify({ pko, recordedAt: new Date().toISOString(), objects, delivered: k.delivered() }, null, 1)}\n`,
  );
}

/**
 * How the scenario files start the controller in-process on a real-PKO plane: watching
 * `namespace`, as the plane's user `controller`, metrics and probes on free loopback ports,
 * `--cluster-name=realpko`, `--egress-allow-loopback` (the receivers, the contract servers and
 * Gitea listen on 127.0.0.1), then `o.flags`; `o.deps` are merged into its dependencies. Its
 * debug log lines go to `logs` and to `log`. Every `launch` starts a new controller with the
 * same configuration and log.
 */
export function controllerLauncher(
  plane: RealPkoPlane,
  namespace: string,
  log: RunLog,
  o: { flags?: string[]; deps?: Partial<ControllerDeps> } = {},
): { launch: () => Promise<ControllerHandle>; logs: LogCapture } {
  const cfg = loadConfig(
    [
      `--watch-namespace=${namespace}`,
      '--metrics-bind-address=127.0.0.1:0',
      '--health-probe-bind-address=127.0.0.1:0',
      `--cluster-name=${CLUSTER}`,
      '--egress-allow-loopback',
      ...(o.flags ?? []),
    ],
    {},
  );
  const logs = new (class extends LogCapture {
    override _write(chunk: Buffer, enc: BufferEncoding, cb: () => void): void {
      for (const l of chunk.toString('utf8').split('\n')) if (l !== '') log.add(`controller: ${l}`);
      super._write(chunk, enc, cb);
    }
  })();
  const redactor = new Redactor();
  const launch = (): Promise<ControllerHandle> =>
    startController(cfg, {
      // The controller's own kubeconfig loader (src/kube/kubeconfig.ts), as in production.
      kubeConfig: loadKubeConfig({ kubeconfig: plane.cp.kubeconfigFor('controller') }),
      logger: createLogger({ level: 'debug', destination: logs, redactor }),
      redactor,
      notReadyRetryMs: 300,
      retry: { initialMs: 200, maxMs: 2000 },
      ...o.deps,
    });
  return { launch, logs };
}

/** What {@link startPkoV2Scene} started. */
export interface PkoV2Scene {
  plane: RealPkoPlane;
  /** Serves the real agent's output as the workspace pods' `pulumi` log. */
  kubelet: KubeletStandIn;
  /** Its CA is trusted by the operator and the agents: HTTPS git servers serve its certificate. */
  pki: TestPKI;
  pko: PkoV2;
}

/**
 * The ground of the real-PKO v2 scenario files: takes the operator lock, starts a control plane
 * with PKO v2.9.0's CRDs, creates namespace `namespace`, starts a kubelet stand-in and real PKO
 * v2 for that namespace (its workspace pods on the stand-in's Node, its agents trusting a new test
 * PKI's CA), and binds the shipped workspace-logs ClusterRole to the user `controller` there —
 * in force when this resolves (test/support/workspace-logs.ts). Pushes the stop of each part onto
 * `cleanups` as it starts (the caller runs them newest first, also when this throws).
 */
export async function startPkoV2Scene(
  namespace: string,
  log: RunLog,
  cleanups: (() => Promise<void>)[],
): Promise<PkoV2Scene> {
  cleanups.push(await operatorLock(log.add));
  const plane = await startRealPkoPlane('v2', log.add);
  cleanups.push(() => plane.stop());
  await createNamespace(plane.admin, namespace);
  const kubelet = await KubeletStandIn.start({ kubeConfig: plane.admin });
  cleanups.push(() => kubelet.close());
  const pki = await makeTestPKI();
  const pko = await startPkoV2({
    bins: realPkoBinaries(inject('realPkoDir')),
    plane,
    namespace,
    caFile: await writeCaFile(pki.caPem),
    log: log.add,
    kubelet,
  });
  cleanups.push(() => pko.stop());
  await createWorkspaceLogsRole(plane.admin);
  await grantWorkspaceLogs(namespace, { plane });
  return { plane, kubelet, pki, pko };
}

/**
 * `waitForComment(pr, predicate, what)`: waits (at most `o.timeoutMs`, polling every 250 ms)
 * for a comment among `comments(pr)` — the comments of pull request `pr` the caller looks at,
 * e.g. the bot's — that `predicate` accepts, and resolves to it; times out naming `what`, with
 * the tail of `o.log`.
 */
export function commentWaiter<C>(
  comments: (pr: number) => Promise<C[]>,
  o: { timeoutMs: number; log: RunLog },
): (pr: number, predicate: (c: C) => boolean, what: string) => Promise<C> {
  return (pr, predicate, what) =>
    until(what, async () => (await comments(pr)).find(predicate), { timeoutMs: o.timeoutMs, log: o.log });
}

/** `<reason> <first 8 of the commit>` of each delivered event (`-` without a commit). */
export const summary = (ds: Delivered[]): string[] =>
  ds.map((d) => `${d.reason} ${d.commit?.slice(0, 8) ?? '-'}`);

/** What a scenario reports: the events expected and observed, and the forge's states per commit. */
export interface ScenarioOutcome {
  expected: string[];
  observed: string[];
  forge?: Record<string, string[]>;
}

/**
 * The bookkeeping of the PKO scenario files (pko-v1, pko-v2): their git repositories and
 * commits by name (`app`, `app-1`, …), what reached the receiver per Stack and the forge per
 * commit, and each scenario's outcome and seconds {@link report}ed under the PKO version `pko`.
 * `kit` is read when asked (the files start it in `beforeAll`).
 */
export class ScenarioBook {
  readonly repos = new Map<string, GitRepo>();
  readonly shas = new Map<string, string>();
  readonly #kit: () => Kit;
  readonly #pko: string;
  constructor(kit: () => Kit, pko: string) {
    this.#kit = kit;
    this.#pko = pko;
  }
  /** SHA of the commit named `name`; throws while there is none. */
  sha = (name: string): string => {
    const s = this.shas.get(name);
    if (s === undefined) throw new Error(`no commit ${name} yet`);
    return s;
  };
  /** The repository named `name`; throws while there is none. */
  repo = (name: string): GitRepo => {
    const r = this.repos.get(name);
    if (r === undefined) throw new Error(`no repository ${name}`);
    return r;
  };
  /** Events the generic receiver got for Stack `stack`, in arrival order. */
  forStack = (stack: string): Delivered[] =>
    this.#kit()
      .delivered()
      .filter((d) => d.stack === stack);
  /** `success`/`failure`/… states GitHub holds for each named commit, oldest first. */
  forge = (...names: string[]): Record<string, string[]> =>
    Object.fromEntries(
      names.map((n) => [
        n,
        this.#kit()
          .statuses(this.sha(n))
          .map((s) => s.state),
      ]),
    );
  /** Runs `body` and reports its outcome and duration as scenario `name`. */
  scenario = async (name: string, body: () => Promise<ScenarioOutcome>): Promise<void> => {
    const t0 = performance.now();
    const r = await body();
    await report({
      pko: this.#pko,
      scenario: name,
      seconds: Math.round((performance.now() - t0) / 100) / 10,
      ...r,
    });
  };
}
