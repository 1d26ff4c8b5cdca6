/**
 * The shipped admission policy of PullRequestPreviews (config/admission) on the test control plane:
 * what the controller requires before it honours Secret envRefs and `reconcileBaseOnPush`
 * (src/preview/admission.ts).
 */
import { inject } from 'vitest';
import type { PullRequestPreview } from '../../src/api/v1alpha1.ts';
import { kubeRequest, errorStatusCode, objectPath } from '../../src/kube/client.ts';
import { ADMISSION_POLICY_NAME, POLICY_SETTLE_MS } from '../../src/preview/admission.ts';
import { createTestNamespace, kubeConfig, waitFor } from './cluster.ts';
import { GROUP, VERSION } from './controller.ts';
import { kustomize } from './kubectl.ts';

const ADMISSION = { group: 'admissionregistration.k8s.io', version: 'v1' };

/**
 * Installs the shipped policy and binding unless present (another test file may have applied
 * them already), and waits until the API server enforces them and {@link POLICY_SETTLE_MS} has
 * passed since they were created (the controller's rule for trusting what only admission checks).
 * PullRequestPreviews created after it returns count as checked.
 */
export async function installAdmission(): Promise<void> {
  const admin = kubeConfig('admin');
  for (const o of (await kustomize('config/admission')) as { kind: string; metadata: { name: string } }[]) {
    const plural =
      o.kind === 'ValidatingAdmissionPolicy'
        ? 'validatingadmissionpolicies'
        : 'validatingadmissionpolicybindings';
    await kubeRequest(admin, { method: 'POST', path: objectPath({ ...ADMISSION, plural }), body: o }).catch(
      (err: unknown) => {
        if (errorStatusCode(err) !== 409) throw err;
      },
    );
  }
  const probeNs = await createTestNamespace('admission-probe');
  await waitFor(
    async () => {
      const code = await kubeRequest(admin, {
        method: 'POST',
        path: objectPath({
          group: GROUP,
          version: VERSION,
          plural: 'pullrequestpreviews',
          namespace: probeNs,
        }),
        query: { dryRun: 'All' },
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'PullRequestPreview',
          metadata: { name: 'probe' },
          spec: {
            stackRef: { name: 'app' },
            providerRef: { name: 'gh' },
            stackOverrides: { spec: { serviceAccountName: 'admin' } },
          },
        },
      }).then(
        () => 200,
        (err: unknown) => errorStatusCode(err),
      );
      return code === 403 ? true : undefined;
    },
    { timeoutMs: 30_000, what: 'the admission policy enforced' },
  );
  const created = await Promise.all(
    ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'].map(async (plural) => {
      const o = await kubeRequest<{ metadata: { creationTimestamp: string } }>(admin, {
        method: 'GET',
        path: objectPath({ ...ADMISSION, plural, name: ADMISSION_POLICY_NAME }),
      });
      return Date.parse(o.metadata.creationTimestamp);
    }),
  );
  const wait = Math.max(...created) + POLICY_SETTLE_MS + 1_000 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}

/**
 * Rewrites the stored object `<plural>.notification.pko.dev` `namespace/name` in etcd, as an
 * API server before the CRD rules and the admission policies would have stored it, or as an
 * object stored long ago (compare-and-swap on the revision, so a concurrent status write is not
 * lost; retried for up to 30 s). The generation is raised as the API server does for a spec
 * change.
 */
// T carries the caller's kind to `edit` (Alert, PullRequestPreview, …).
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters
export async function rewriteStoredObject<T extends { metadata: { generation?: number } }>(
  plural: string,
  namespace: string,
  name: string,
  edit: (o: T) => void,
): Promise<void> {
  const etcd = inject('etcdUrl');
  const key = Buffer.from(`/registry/${GROUP}/${plural}/${namespace}/${name}`).toString('base64');
  const call = async <R>(path: string, body: unknown): Promise<R> => {
    const res = await fetch(`${etcd}${path}`, { method: 'POST', body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`etcd ${path}: HTTP ${String(res.status)}`);
    return (await res.json()) as R;
  };
  await waitFor(
    async () => {
      const got = await call<{ kvs?: { value: string; mod_revision: string }[] }>('/v3/kv/range', { key });
      const kv = got.kvs?.[0];
      if (kv === undefined) throw new Error(`${name} is not in etcd`);
      const obj = JSON.parse(Buffer.from(kv.value, 'base64').toString('utf8')) as T;
      edit(obj);
      obj.metadata.generation = (obj.metadata.generation ?? 1) + 1;
      const txn = await call<{ succeeded?: boolean }>('/v3/kv/txn', {
        compare: [{ key, target: 'MOD', result: 'EQUAL', mod_revision: kv.mod_revision }],
        success: [{ requestPut: { key, value: Buffer.from(JSON.stringify(obj)).toString('base64') } }],
      });
      return txn.succeeded === true;
    },
    { timeoutMs: 30_000, what: `${name} rewritten in etcd` },
  );
}

/** {@link rewriteStoredObject} for a PullRequestPreview. */
export async function rewriteStoredPreview(
  namespace: string,
  name: string,
  edit: (o: PullRequestPreview) => void,
): Promise<void> {
  await rewriteStoredObject('pullrequestpreviews', namespace, name, edit);
}
