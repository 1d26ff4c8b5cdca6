/**
 * The shipped Alert sources admission policy (config/admission/alert_sources_policy.yaml, case
 * B14) on the test control plane: what the controller requires, with
 * `--no-cross-namespace-refs=false`, before it honours an Alert selecting another namespace
 * (src/reconcile/alert.ts).
 */
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { ALERT_SOURCES_POLICY_NAME } from '../../src/api/v1alpha1.ts';
import { POLICY_SETTLE_MS } from '../../src/preview/admission.ts';
import { installAdmission } from './admission.ts';
import { kubeConfig } from './cluster.ts';

const ADMISSION = { group: 'admissionregistration.k8s.io', version: 'v1' };

/**
 * Installs config/admission unless present (another test file may have already: it is
 * cluster-wide and fixed-name) and waits until {@link POLICY_SETTLE_MS} (plus 1 s) has passed
 * since the Alert sources policy and its binding were created: Alerts created after it returns
 * count as checked by the controller. Writers who may list Stacks everywhere (the admin) pass it.
 */
export async function installAlertSourcesPolicy(): Promise<void> {
  await installAdmission();
  const admin = kubeConfig('admin');
  const created = await Promise.all(
    ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'].map(async (plural) => {
      const o = await kubeRequest<{ metadata: { creationTimestamp: string } }>(admin, {
        method: 'GET',
        path: objectPath({ ...ADMISSION, plural, name: ALERT_SOURCES_POLICY_NAME }),
      });
      return Date.parse(o.metadata.creationTimestamp);
    }),
  );
  const wait = Math.max(...created) + POLICY_SETTLE_MS + 1_000 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
