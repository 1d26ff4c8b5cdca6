/**
 * Runs the controller in-process against the test control plane, as the non-admin user
 * `controller` bound to the shipped RBAC rules (config/rbac/; so the list is exercised), and
 * creates our objects with the admin client.
 */
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import {
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { createLogger } from '../../src/log.ts';
import { Redactor } from '../../src/credential/redact.ts';
import { loadConfig } from '../../src/config.ts';
import { startController, type ControllerDeps, type ControllerHandle } from '../../src/controller.ts';
import type { Condition } from '../../src/api/meta.ts';
import { loadKubeConfig } from '../../src/kube/client.ts';
import { inject, onTestFailed } from 'vitest';
import { kubeConfig, waitFor } from './cluster.ts';

export const GROUP = 'notification.pko.dev';
export const VERSION = 'v1alpha1';

let bound: Promise<void> | undefined;

/**
 * Binds the shipped rules to the test user `controller` (once per worker): config/rbac/role.yaml's
 * ClusterRole, and config/rbac/leader_election_role.yaml's Lease rules. The shipped Role holds
 * those only in the controller's own namespace; test files put their Lease in their own
 * namespace, so the test user gets the same Lease rules in every namespace.
 */
export function bindControllerRole(): Promise<void> {
  bound ??= (async () => {
    const rbac = kubeConfig('admin').makeApiClient(RbacAuthorizationV1Api);
    const rulesOf = (file: string): V1PolicyRule[] =>
      (
        parse(readFileSync(new URL(`../../config/rbac/${file}`, import.meta.url), 'utf8')) as {
          rules: V1PolicyRule[];
        }
      ).rules;
    const roles: [string, V1PolicyRule[]][] = [
      ['pko-nc-test-controller', rulesOf('role.yaml')],
      ['pko-nc-test-controller-leases', rulesOf('leader_election_role.yaml')],
    ];
    for (const [name, rules] of roles) {
      await rbac.createClusterRole({ body: { metadata: { name }, rules } }).catch(() => undefined);
      await rbac
        .createClusterRoleBinding({
          body: {
            metadata: { name },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
            subjects: [{ kind: 'User', name: 'controller', apiGroup: 'rbac.authorization.k8s.io' }],
          },
        })
        .catch(() => undefined);
    }
  })();
  return bound;
}

/** Log lines captured from an in-process controller (raw JSON lines). */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    for (const l of chunk.toString('utf8').split('\n')) if (l !== '') this.lines.push(l);
    cb();
  }
  parsed(): Record<string, unknown>[] {
    return this.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  }
  /**
   * The last `n` lines, one per line as `time level msg {fields}` — what a failed test prints so
   * that a failure seen once in CI can be read afterwards (the lines are the redacted log).
   */
  tail(n = FAILURE_LOG_LINES): string {
    const skip = new Set(['level', 'time', 'controller', 'msg']);
    return this.lines
      .slice(-n)
      .map((l) => {
        try {
          const j = JSON.parse(l) as Record<string, unknown>;
          const rest = Object.fromEntries(Object.entries(j).filter(([k]) => !skip.has(k)));
          return `${String(j.time)} ${String(j.level)} ${String(j.msg)} ${JSON.stringify(rest)}`;
        } catch {
          return l;
        }
      })
      .join('\n');
  }
}

/** How many of the controller's last log lines a failed test prints. */
const FAILURE_LOG_LINES = 120;

/** Inside a test, prints the controller's last log lines if the test fails; elsewhere nothing. */
function printLogsOnFailure(logs: LogCapture, namespace: string): void {
  try {
    onTestFailed(() => {
      console.error(
        `controller logs (namespace ${namespace || '*'}, last ${FAILURE_LOG_LINES} lines):\n${logs.tail()}`,
      );
    });
  } catch {
    // Not inside a test (beforeAll): the file's tests report on their own.
  }
}

export interface InProcessController {
  handle: ControllerHandle;
  logs: LogCapture;
  stop(): Promise<void>;
}

/**
 * Starts the controller watching `namespace` (or all with `namespace: ''`, which needs a
 * `--watch-label-selector` flag: files run in parallel) as user `controller`.
 * Test receivers listen on 127.0.0.1, so the controller runs with `--egress-allow-loopback`
 * unless `allowLoopback: false` (the production default, which refuses them).
 */
export async function startInProcess(
  namespace: string,
  opts: { flags?: string[]; deps?: Partial<ControllerDeps>; logLevel?: string; allowLoopback?: boolean } = {},
): Promise<InProcessController> {
  if (namespace === '' && !(opts.flags ?? []).some((f) => f.startsWith('--watch-label-selector='))) {
    // Test files run in parallel on one API server: a controller serving every namespace would
    // deliver the other files' events as well (a second sender: their receivers see duplicates).
    throw new Error(
      'startInProcess(""): pass --watch-label-selector so that only this test\'s objects are served',
    );
  }
  await bindControllerRole();
  const cfg = loadConfig(
    [
      `--watch-namespace=${namespace}`,
      '--metrics-bind-address=127.0.0.1:0',
      '--health-probe-bind-address=127.0.0.1:0',
      ...(opts.allowLoopback === false ? [] : ['--egress-allow-loopback']),
      // Simulated runs carry app.pulumi.com permalinks: the suite never reaches the real Pulumi
      // Cloud (a Stack with a token would be read there: src/enrich/pulumi-cloud.ts).
      '--egress-deny-hosts=*.pulumi.com',
      ...(opts.flags ?? []),
    ],
    {},
  );
  const logs = new LogCapture();
  if (process.env.PKO_NC_TEST_LOG) logs.on('finish', () => undefined);
  printLogsOnFailure(logs, namespace);
  const redactor = new Redactor();
  const handle = await startController(cfg, {
    // The controller's own loader (src/kube/kubeconfig.ts), as in production.
    kubeConfig: loadKubeConfig({ kubeconfig: inject('controllerKubeconfig') }),
    logger: createLogger({ level: (opts.logLevel ?? 'debug') as 'debug', destination: logs, redactor }),
    redactor,
    notReadyRetryMs: 300,
    retry: { initialMs: 200, maxMs: 2000 },
    ...opts.deps,
  });
  return {
    handle,
    logs,
    stop: async () => {
      await handle.stop();
      if (process.env.PKO_NC_TEST_LOG) {
        const { appendFileSync } = await import('node:fs');
        appendFileSync(process.env.PKO_NC_TEST_LOG, logs.lines.join('\n') + '\n');
      }
    },
  };
}

/** Admin helpers to create our objects and read their status. */
export class Objects {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  readonly namespace: string;
  constructor(namespace: string, kc: KubeConfig = kubeConfig('admin')) {
    this.namespace = namespace;
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  async secret(name: string, stringData: Record<string, string>): Promise<void> {
    await this.core.createNamespacedSecret({
      namespace: this.namespace,
      body: { metadata: { name }, stringData },
    });
  }

  /** Creates one of our objects (`plural`/`kind`) named `name` with `spec` as given and `labels`. */
  async #create(
    plural: string,
    kind: string,
    name: string,
    spec: object,
    labels?: Record<string, string>,
  ): Promise<void> {
    await this.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: this.namespace,
      plural,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind,
        metadata: { name, ...(labels ? { labels } : {}) },
        spec,
      },
    });
  }

  async provider(name: string, spec: object, labels?: Record<string, string>): Promise<void> {
    await this.#create('providers', 'Provider', name, spec, labels);
  }

  async alert(name: string, spec: object, labels?: Record<string, string>): Promise<void> {
    await this.#create('alerts', 'Alert', name, spec, labels);
  }

  async get(
    plural: 'providers' | 'alerts',
    name: string,
  ): Promise<{
    metadata: { generation?: number; uid?: string };
    status?: {
      observedGeneration?: number;
      conditions?: Condition[];
      lastDelivery?: { result: string; reason?: string; message?: string }[];
    };
  }> {
    return (await this.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: this.namespace,
      plural,
      name,
    })) as never;
  }

  /** Creates PullRequestPreview `name` with `spec` as given (no defaults) and `labels`. */
  async pullRequestPreview(name: string, spec: object, labels?: Record<string, string>): Promise<void> {
    await this.#create('pullrequestpreviews', 'PullRequestPreview', name, spec, labels);
  }

  /** PullRequestPreview `name` as stored, typed as the caller reads it. Throws as the API answers (404: none). */
  async getPullRequestPreview<T = { status?: { lastSyncTime?: string } }>(name: string): Promise<T> {
    return (await this.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: this.namespace,
      plural: 'pullrequestpreviews',
      name,
    })) as T;
  }

  /** Waits until the object's Ready condition has `status` (and `reason`) for its current generation. */
  async waitReady(
    plural: 'providers' | 'alerts',
    name: string,
    status: 'True' | 'False' = 'True',
    reason?: string,
  ): Promise<Condition> {
    return waitFor(
      async () => {
        const o = await this.get(plural, name);
        const c = o.status?.conditions?.find((x) => x.type === 'Ready');
        return c?.status === status &&
          (reason === undefined || c.reason === reason) &&
          o.status?.observedGeneration === o.metadata.generation
          ? c
          : undefined;
      },
      {
        timeoutMs: 20_000,
        intervalMs: 100,
        what: `${plural} ${this.namespace}/${name} Ready=${status}${reason ? ` (${reason})` : ''}`,
      },
    );
  }
}
