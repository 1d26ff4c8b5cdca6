/**
 * The dev cluster of `npm start` (src/envtest/controlplane.ts with `persistDir`): kept across
 * runs in one folder — same kubeconfig path, same server address, objects still there —
 * refused to a second process while one runs, and wiped by `fresh`. Starts control planes of
 * its own (not the suite's), one after the other.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../../src/envtest/controlplane.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'pko-nc-devcluster-'));
let running: ControlPlane | undefined;

afterAll(async () => {
  await running?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const core = (kubeconfig: string): CoreV1Api => {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc.makeApiClient(CoreV1Api);
};

describe('dev cluster kept in a folder', () => {
  it('keeps data, kubeconfig path and address across runs; refuses a second owner; --fresh wipes it', async () => {
    const lines: string[] = [];
    const first = await startControlPlane({ persistDir: dir, log: (l) => lines.push(l) });
    running = first;
    expect(first.kubeconfigPath).toBe(path.join(dir, 'kubeconfig'));
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^waiting for kube-apiserver on https:\/\/127\.0\.0\.1:\d+/),
      ]),
    );
    await core(first.kubeconfigPath).createNamespace({ body: { metadata: { name: 'kept' } } });

    // A second process (here: a second start in this one) may not use the folder meanwhile.
    await expect(startControlPlane({ persistDir: dir })).rejects.toThrow(
      new RegExp(`in use by process ${process.pid}`),
    );

    await first.stop();
    running = undefined;
    expect(readFileSync(path.join(dir, 'kubeconfig'), 'utf8')).toContain(first.server);

    const second = await startControlPlane({ persistDir: dir });
    running = second;
    expect(second.kubeconfigPath).toBe(first.kubeconfigPath);
    expect(second.server).toBe(first.server);
    const kept = await core(second.kubeconfigPath).readNamespace({ name: 'kept' });
    expect(kept.metadata?.name).toBe('kept');
    await second.stop();
    running = undefined;

    const fresh = await startControlPlane({ persistDir: dir, fresh: true });
    running = fresh;
    const err = await core(fresh.kubeconfigPath)
      .readNamespace({ name: 'kept' })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number },
      );
    expect(err?.code).toBe(404);
  }, 120_000);
});
