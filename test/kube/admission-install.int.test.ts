/**
 * The dev control plane's install of the shipped admission policy (src/kube/crds.ts
 * `installAdmissionObjects`, used by `npm start`): created when absent, left alone when equal,
 * deleted and created again (generation 1) when its spec differs. Copies of config/admission under
 * other names, so the policy other test files rely on is never touched.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { installAdmissionObjects, readAdmissionObjects, yamlFilesIn } from '../../src/kube/crds.ts';
import { kubeRequest } from '../../src/kube/client.ts';
import { kubeConfig } from '../support/cluster.ts';

const DIR = fileURLToPath(new URL('../../config/admission', import.meta.url));
const PATHS = {
  ValidatingAdmissionPolicy: '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies',
  ValidatingAdmissionPolicyBinding: '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings',
} as const;

interface Meta {
  metadata: { uid: string; generation: number };
  spec: { policyName?: string; failurePolicy?: string };
}

describe('installAdmissionObjects (npm start)', () => {
  it('creates the shipped policy and binding, keeps them when equal, recreates them at generation 1 when changed', async () => {
    const kc = kubeConfig('admin');
    const suffix = randomBytes(4).toString('hex');
    const name = `pko-nc-install-test-${suffix}`;
    const shipped = await readAdmissionObjects(await yamlFilesIn(DIR));
    expect(shipped.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ValidatingAdmissionPolicy/pko-notification-controller-alert-sources',
      'ValidatingAdmissionPolicy/pko-notification-controller-drift-remediation',
      'ValidatingAdmissionPolicy/pko-notification-controller-preview-overrides',
      'ValidatingAdmissionPolicyBinding/pko-notification-controller-alert-sources',
      'ValidatingAdmissionPolicyBinding/pko-notification-controller-drift-remediation',
      'ValidatingAdmissionPolicyBinding/pko-notification-controller-preview-overrides',
    ]);
    // Renamed copies of one pair; the binding's policyName follows, and it only warns (never
    // denies here).
    const pair = shipped.filter((o) => o.metadata.name === 'pko-notification-controller-preview-overrides');
    const objects = pair.map((o) => ({
      ...o,
      metadata: { name },
      spec:
        o.kind === 'ValidatingAdmissionPolicyBinding'
          ? { ...(o.spec as object), policyName: name, validationActions: ['Audit'] }
          : o.spec,
    }));
    const get = (kind: keyof typeof PATHS): Promise<Meta> =>
      kubeRequest<Meta>(kc, { method: 'GET', path: `${PATHS[kind]}/${name}` });
    onTestFinished(async () => {
      for (const p of Object.values(PATHS))
        await kubeRequest(kc, { method: 'DELETE', path: `${p}/${name}` }).catch(() => undefined);
    });

    await installAdmissionObjects(kc, objects);
    const policy = await get('ValidatingAdmissionPolicy');
    const binding = await get('ValidatingAdmissionPolicyBinding');
    expect(policy.metadata.generation).toBe(1);
    expect(binding.spec.policyName).toBe(name);

    await installAdmissionObjects(kc, objects);
    expect((await get('ValidatingAdmissionPolicy')).metadata.uid).toBe(policy.metadata.uid);
    expect((await get('ValidatingAdmissionPolicyBinding')).metadata.uid).toBe(binding.metadata.uid);

    // Someone weakened the policy: the next start puts the shipped one back as a new object.
    await kubeRequest(kc, {
      method: 'PATCH',
      path: `${PATHS.ValidatingAdmissionPolicy}/${name}`,
      body: { spec: { failurePolicy: 'Ignore' } },
      contentType: 'application/merge-patch+json',
    });
    expect((await get('ValidatingAdmissionPolicy')).metadata.generation).toBe(2);
    await installAdmissionObjects(kc, objects);
    const again = await get('ValidatingAdmissionPolicy');
    expect(again.metadata.uid).not.toBe(policy.metadata.uid);
    expect(again.metadata.generation).toBe(1);
    expect(again.spec.failurePolicy).toBe('Fail');
  });
});
