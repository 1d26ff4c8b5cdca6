/**
 * The test control plane itself (src/envtest/controlplane.ts via test/setup/global.ts): a real,
 * version-stamped kube-apiserver with RBAC on, and a restart that keeps etcd's data.
 */
import { describe, expect, inject, it } from 'vitest';
import { ApiException, CoreV1Api, VersionApi } from '@kubernetes/client-node';
import { createTestNamespace, kubeConfig, restartApiServer, waitFor } from '../support/cluster.ts';

describe('test control plane', () => {
  it('answers /version with the stamped release version, not v0.0.0', async () => {
    const info = await kubeConfig('admin').makeApiClient(VersionApi).getCode();
    expect(info.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
    expect(info.gitVersion).toBe(inject('kubeVersion'));
    expect(info.major).toBe('1');
    expect(inject('server')).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('enforces RBAC: a user without bindings gets 403 listing secrets, admin succeeds', async () => {
    const ns = await createTestNamespace('rbac');
    const asAdmin = await kubeConfig('admin')
      .makeApiClient(CoreV1Api)
      .listNamespacedSecret({ namespace: ns });
    expect(asAdmin.items).toEqual([]);

    for (const user of ['viewer', 'controller'] as const) {
      const err: unknown = await kubeConfig(user)
        .makeApiClient(CoreV1Api)
        .listNamespacedSecret({ namespace: ns })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err, user).toBeInstanceOf(ApiException);
      expect((err as ApiException<unknown>).code, user).toBe(403);
      const status = JSON.parse(String((err as ApiException<unknown>).body)) as {
        reason?: string;
        message?: string;
      };
      expect(status.reason, user).toBe('Forbidden');
      expect(status.message, user).toContain(`User "${user}" cannot list resource "secrets"`);
    }
  });

  // The restart first waits for the other running integration files (up to 300 s, test/setup/global.ts).
  it('restarts kube-apiserver on the same address with the data kept', { timeout: 420_000 }, async () => {
    const core = kubeConfig('admin').makeApiClient(CoreV1Api);
    const ns = await createTestNamespace('restart');
    const before = await core.readNamespace({ name: ns });

    await restartApiServer();

    // Ready again when the call resolves: no retry needed for a plain read.
    const after = await core.readNamespace({ name: ns });
    expect(after.metadata?.uid).toBe(before.metadata?.uid);
    // And the restarted server accepts writes and serves the same version.
    const again = await createTestNamespace('after-restart');
    await waitFor(async () => (await core.readNamespace({ name: again })).status?.phase === 'Active', {
      what: `namespace ${again} Active`,
    });
    expect((await kubeConfig('admin').makeApiClient(VersionApi).getCode()).gitVersion).toBe(
      inject('kubeVersion'),
    );
  });
});
