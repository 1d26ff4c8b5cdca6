/**
 * The informer survives a kube-apiserver restart: it reconnects on its own, relists, and sees a
 * change made after the restart. (Own file: a restart waits for other files to finish.)
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Informer } from '../../src/kube/informer.ts';
import { createLogger } from '../../src/log.ts';
import { createTestNamespace, kubeConfig, restartApiServer, waitFor } from '../support/cluster.ts';
import { configMaps, rest, type ConfigMap } from './rest.ts';

describe('Informer across an API server restart', () => {
  it('recovers after restartApiServer() and sees a change made after it', { timeout: 420_000 }, async () => {
    const ns = await createTestNamespace('informer-restart');
    const admin = rest(kubeConfig('admin'));
    await admin.create(configMaps(ns), { metadata: { name: 'before' }, data: { a: '1' } });
    const registry = new Registry();
    const inf = new Informer<ConfigMap>({
      name: 'restart',
      kubeConfig: kubeConfig('admin'),
      group: '',
      version: 'v1',
      plural: 'configmaps',
      namespace: ns,
      logger: createLogger({ level: 'silent' }),
      backoff: { initialMs: 200, maxMs: 2_000 },
      registry,
    });
    const added: string[] = [];
    const updated: string[] = [];
    let relists = 0;
    inf.on('add', (o) => added.push(o.metadata?.name ?? ''));
    inf.on('update', (o) => updated.push(`${o.metadata?.name ?? ''}=${o.data?.['a'] ?? ''}`));
    inf.on('relist', () => relists++);
    const health: boolean[] = [];
    const sampler = setInterval(() => health.push(inf.health().ok), 50);
    try {
      inf.start();
      await inf.waitForSync(AbortSignal.timeout(20_000));
      expect(added).toEqual(['before']);

      await restartApiServer();

      await admin.create(configMaps(ns), { metadata: { name: 'after' }, data: { a: '1' } });
      await admin.replace(configMaps(ns, 'before'), { metadata: { name: 'before' }, data: { a: '2' } });
      await waitFor(() => Promise.resolve(added.includes('after') && updated.includes('before=2')), {
        what: 'add of "after" and update of "before" seen after the restart',
        timeoutMs: 30_000,
      });
      await waitFor(() => Promise.resolve(inf.health().ok), {
        what: 'informer healthy again',
        timeoutMs: 10_000,
      });
      expect(added).toEqual(['before', 'after']);
      // The outage was noticed (a failed reconnect) and followed by a relist.
      expect(health).toContain(false);
      expect(relists).toBeGreaterThanOrEqual(2);
      expect(await registry.metrics()).toMatch(/pkonc_informer_restarts_total\{informer="restart"\} [1-9]/);
    } finally {
      clearInterval(sampler);
      await inf.stop();
    }
  });
});
