/**
 * Case N15 on the real control plane: two clusters installed from the same manifests never share
 * a commit-status context by default. Without `--cluster-name` the controller derives its name
 * from the `kube-system` namespace UID (src/kube/cluster-name.ts), logs it at start and uses it in
 * the default context; an explicit `--cluster-name` wins; a controller that may not read
 * `kube-system` (the `viewer` token user: no RBAC bindings) refuses to start, saying to set
 * `--cluster-name`.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ClusterNameError, clusterNameFromUID, resolveClusterName } from '../../src/kube/cluster-name.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { startControllerProcess, stopAll } from '../support/controller-process.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startGitHubServer } from '../forge/github/server.ts';

const SHA = '7a6b5c4d3e2f10987a6b5c4d3e2f10987a6b5c4d';
const TOKEN = 'ghp_clusterName0123456789';

afterAll(async () => {
  await stopAll();
});

async function kubeSystemUID(): Promise<string> {
  const ns = await kubeConfig('admin').makeApiClient(CoreV1Api).readNamespace({ name: 'kube-system' });
  const uid = ns.metadata?.uid ?? '';
  expect(uid).toMatch(/^[0-9a-f-]{36}$/);
  return uid;
}

describe('N15: cluster identity', () => {
  it('derived names are stable per UID and differ between clusters', () => {
    const a = clusterNameFromUID('3f9e1c2a-77b0-4d4e-9c52-0c6d2f1b8e11');
    expect(a).toBe('cluster-3f9e1c2a');
    expect(clusterNameFromUID('3F9E1C2A-77B0-4D4E-9C52-0C6D2F1B8E11')).toBe(a);
    expect(clusterNameFromUID('9b0d44e7-1c1f-4f0e-8a43-2d6a1f0c9e55')).not.toBe(a);
    expect(() => clusterNameFromUID('x')).toThrow(ClusterNameError);
  });

  it('no --cluster-name: the name comes from the kube-system UID, is logged at start and names the commit status context', async () => {
    const expected = clusterNameFromUID(await kubeSystemUID());
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { [TOKEN]: 'bot' },
    });
    const ns = await createTestNamespace('cluster-name');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns);
    try {
      expect(ctl.handle.clusterName).toBe(expected);
      const line = ctl.logs.lines.find((l) => l.includes('derived from the kube-system namespace UID'));
      expect(line).toContain(expected);
      await obj.secret('gh', { token: TOKEN });
      await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
      await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
      await obj.waitReady('alerts', 'gh');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('web', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
      await sim.startRun('web', { type: 'up', commit: SHA });
      const status = await waitFor(() => Promise.resolve(gh.statuses('acme/app', SHA)[0]), {
        timeoutMs: 20_000,
        what: 'the pending commit status',
      });
      expect(status.context).toBe(`pko/${expected}/${ns}/web`);
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 60_000);

  it('an explicit --cluster-name wins (no kube-system read needed)', async () => {
    expect(await resolveClusterName(kubeConfig('viewer'), 'prod-eu-1')).toEqual({
      name: 'prod-eu-1',
      source: 'flag',
    });
    const ns = await createTestNamespace('cluster-name-flag');
    const ctl = await startInProcess(ns, { flags: ['--cluster-name=prod-eu-1'] });
    try {
      expect(ctl.handle.clusterName).toBe('prod-eu-1');
    } finally {
      await ctl.stop();
    }
  }, 30_000);

  it('kube-system not readable: the controller refuses to start, saying to set --cluster-name', async () => {
    const refused = await resolveClusterName(kubeConfig('viewer'), '').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ClusterNameError);
    expect((refused as Error).message).toMatch(/refused \(403\).*set --cluster-name=NAME/);
    // The real process: exits before "controller started", with that message as its fatal line.
    const err = await startControllerProcess({ kubeconfig: inject('viewerKubeconfig') }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/cannot derive a cluster name.*set --cluster-name=NAME/);
  }, 60_000);
});
