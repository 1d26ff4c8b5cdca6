/**
 * The shipped admission policy of PullRequestPreviews (config/admission) on the test control plane:
 * what the controller requires before it honours Secret envRefs and `reconcileBaseOnPush`
 * (src/preview/admission.ts).
 */
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
