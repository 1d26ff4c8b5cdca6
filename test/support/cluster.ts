/**
 * Helpers for integration tests (`*.int.test.ts`) against the real control plane that
 * test/setup/global.ts starts once per run. Values come from vitest's `inject` (see
 * test/setup/provided.d.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import {
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  V1Namespace,
  V1ObjectMeta,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';

/** Token users pre-created by the control plane. Only `admin` has any permissions. */
export type TestUser = 'admin' | 'controller' | 'viewer';

const KUBECONFIG_KEY = {
  admin: 'kubeconfig',
  controller: 'controllerKubeconfig',
  viewer: 'viewerKubeconfig',
} as const;

/**
 * A fresh KubeConfig for `user` (default `admin`), loaded from the kubeconfig file the
 * globalSetup wrote. `controller` and `viewer` have no RBAC bindings until a test adds some.
 */
export function kubeConfig(user: TestUser = 'admin'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(inject(KUBECONFIG_KEY[user]));
  return kc;
}

/**
 * A token for ServiceAccount `namespace/name` (TokenRequest as admin, valid 1 h, no audiences)
 * and a kubeconfig file (mode 0600, in a new temporary folder) that uses it on the test control
 * plane (server and CA from the admin's), also loaded as `kc`. `token` is empty when the API
 * server returned none.
 */
export async function serviceAccountKubeconfig(
  namespace: string,
  name: string,
): Promise<{ token: string; file: string; kc: KubeConfig }> {
  const tr = await kubeConfig('admin')
    .makeApiClient(CoreV1Api)
    .createNamespacedServiceAccountToken({
      name,
      namespace,
      body: { spec: { expirationSeconds: 3600, audiences: [] } },
    });
  const token = tr.status?.token ?? '';
  const admin = parse(readFileSync(inject('kubeconfig'), 'utf8')) as {
    clusters: { name: string; cluster: Record<string, string> }[];
  };
  const cluster = admin.clusters[0]!;
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'pko-nc-sa-')), 'kubeconfig');
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [cluster],
      users: [{ name: 'sa', user: { token } }],
      contexts: [{ name: 'sa', context: { cluster: cluster.name, user: 'sa' } }],
      'current-context': 'sa',
    }),
    { mode: 0o600 },
  );
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return { token, file, kc };
}

/**
 * Creates a namespace named `<prefix>-<6 hex>` (prefix lower-cased, non-DNS characters replaced
 * by `-`, cut to fit 63 characters) as admin and returns its name. Tests need not delete it:
 * the whole control plane is thrown away after the run.
 */
export async function createTestNamespace(prefix: string): Promise<string> {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 50) || 'test';
  const name = `${clean}-${randomBytes(3).toString('hex')}`;
  const body = new V1Namespace();
  body.metadata = new V1ObjectMeta();
  body.metadata.name = name;
  body.metadata.labels = { 'pko-nc.test/namespace': 'true' };
  await kubeConfig('admin').makeApiClient(CoreV1Api).createNamespace({ body });
  return name;
}

/** Options of {@link applyManifests}. */
export interface ApplyOptions {
  /** Namespace for namespaced objects that carry none (cluster-scoped ones are unaffected). */
  namespace?: string;
  /** Server-side-apply field manager (default `pko-nc-tests`). */
  fieldManager?: string;
}

/** Parses multi-document YAML into objects; empty documents are skipped. Throws on YAML errors. */
export function parseManifests(yamlText: string): KubernetesObject[] {
  const out: KubernetesObject[] = [];
  for (const doc of parseAllDocuments(yamlText)) {
    if (doc.errors.length > 0) throw new Error(`manifest YAML: ${doc.errors[0]?.message ?? 'error'}`);
    const obj = doc.toJS() as KubernetesObject | null;
    if (obj !== null) out.push(obj);
  }
  return out;
}

/**
 * Server-side applies (forced, so a test can take over fields) each object of `manifests` —
 * objects or multi-document YAML text — in order, and returns what the API server stored.
 * Works for any kind the server knows, CRDs included (resolved via discovery, fresh per call so
 * newly installed CRDs are found). `status` is ignored by the server for kinds with a status
 * subresource: write status with a `/status` request instead. Objects need `metadata.name`.
 */
export async function applyManifests(
  kc: KubeConfig,
  manifests: string | KubernetesObject | readonly KubernetesObject[],
  opts: ApplyOptions = {},
): Promise<KubernetesObject[]> {
  const objects =
    typeof manifests === 'string'
      ? parseManifests(manifests)
      : Array.isArray(manifests)
        ? manifests
        : [manifests];
  const api = KubernetesObjectApi.makeApiClient(kc);
  const applied: KubernetesObject[] = [];
  for (const obj of objects as readonly KubernetesObject[]) {
    const spec = structuredClone(obj);
    if (opts.namespace !== undefined && spec.metadata?.namespace === undefined) {
      spec.metadata ??= new V1ObjectMeta();
      spec.metadata.namespace = opts.namespace;
    }
    try {
      applied.push(
        await api.patch(
          spec,
          undefined,
          undefined,
          opts.fieldManager ?? 'pko-nc-tests',
          true,
          PatchStrategy.ServerSideApply,
        ),
      );
    } catch (err) {
      const what = `${spec.kind ?? '?'} ${spec.metadata?.namespace ?? ''}/${spec.metadata?.name ?? '?'}`;
      throw new Error(`applying ${what}: ${(err as Error).message}`, { cause: err });
    }
  }
  return applied;
}

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Total budget in ms (default 10000). */
  timeoutMs?: number;
  /** Pause between attempts in ms (default 100). */
  intervalMs?: number;
  /** What is awaited, for the timeout message ("Provider p Ready=True"). */
  what: string;
  /**
   * What the test saw instead, appended to the timeout message (a CI log shows only the failure
   * summary): e.g. the statuses a fake forge holds and the controller's skip reasons.
   */
  state?: () => string;
}

/**
 * Calls `fn` until it returns something other than `undefined`/`false` and resolves to it.
 * A throw counts as "not yet" (the API server may be restarting); on timeout rejects with
 * `timed out after <ms> ms waiting for <what>` plus the last error or last value seen.
 */
export async function waitFor<T>(fn: () => Promise<T | undefined | false>, opts: WaitForOptions): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 100;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let last: string;
    try {
      const value = await fn();
      if (value !== undefined && value !== false) return value;
      last = `last result: ${String(value)}`;
    } catch (err) {
      last = `last error: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (Date.now() >= deadline) {
      const seen = opts.state === undefined ? '' : `; seen: ${opts.state()}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what} (${last})${seen}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

// ---------------------------------------------------------------------------------------------
// Control endpoint of the globalSetup process (file leases, API server restart).

let currentLease: string | undefined;

async function control(method: string, pathAndQuery: string, body?: unknown): Promise<Response> {
  const res = await fetch(`${inject('controlUrl')}${pathAndQuery}`, {
    method,
    headers: {
      authorization: `Bearer ${inject('controlToken')}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  if (!res.ok)
    throw new Error(`control endpoint ${method} ${pathAndQuery}: ${res.status} ${await res.text()}`);
  return res;
}

/**
 * Takes this test file's shared lease (waits while an API server restart is in progress).
 * Called by test/setup/cluster-lease.ts before each integration test file; not for tests.
 */
export async function acquireFileLease(file: string): Promise<void> {
  if (currentLease !== undefined) return;
  const res = await control('POST', '/leases', { file });
  currentLease = ((await res.json()) as { id: string }).id;
}

/** Releases the lease taken by {@link acquireFileLease}. */
export async function releaseFileLease(): Promise<void> {
  const id = currentLease;
  if (id === undefined) return;
  currentLease = undefined;
  await control('DELETE', `/leases/${id}`);
}

/**
 * Restarts kube-apiserver (same port, etcd, certificates and tokens) and resolves once it is
 * ready again — every watch is cut. Waits first until all *other* integration files running
 * at that moment have finished (they cannot see the outage); allow for that in the test's
 * timeout. Rejects with the control plane's reason if the server does not come back.
 */
export async function restartApiServer(): Promise<void> {
  const query = currentLease !== undefined ? `?lease=${encodeURIComponent(currentLease)}` : '';
  await control('POST', `/restart-apiserver${query}`);
}
