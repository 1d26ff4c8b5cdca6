/**
 * An informer for an optional kind (PKO v2's Update, absent on PKO v1 clusters) against the real
 * kube-apiserver: while the kind is not served it counts as synced, healthy and empty, re-checks
 * on its own, starts when the CRD appears and goes idle again when the CRD is removed — without a
 * restart. A required informer for the same missing kind is neither synced nor healthy.
 */
import { randomBytes } from 'node:crypto';
import { ApiextensionsV1Api, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { KubeObject } from '../../src/api/meta.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { installCRDs } from '../../src/kube/crds.ts';
import { Informer } from '../../src/kube/informer.ts';
import { createLogger } from '../../src/log.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';

const informers: Informer<KubeObject>[] = [];
afterEach(async () => {
  await Promise.all(informers.splice(0).map((i) => i.stop()));
});

/** A namespaced CRD in a group of its own, so that this file can install and remove it freely. */
function widgetCRD(): { crd: V1CustomResourceDefinition; group: string } {
  const group = `opt${randomBytes(4).toString('hex')}.pko-nc.test`;
  return {
    group,
    crd: {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `widgets.${group}` },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
          },
        ],
      },
    },
  };
}

function widgetInformer(
  group: string,
  namespace: string,
  optional: boolean,
): { inf: Informer<KubeObject>; seen: string[] } {
  const inf = new Informer<KubeObject>({
    name: 'widgets',
    kubeConfig: kubeConfig('admin'),
    group,
    version: 'v1',
    plural: 'widgets',
    namespace,
    logger: createLogger({ level: 'silent' }),
    backoff: { initialMs: 200, maxMs: 1_000 },
    ...(optional ? { optional: { recheckMs: 300 } } : {}),
  });
  const seen: string[] = [];
  inf.on('add', (o) => seen.push(`add ${o.metadata?.name ?? ''}`));
  inf.on('delete', (o) => seen.push(`delete ${o.metadata?.name ?? ''}`));
  informers.push(inf);
  return { inf, seen };
}

describe('Informer for an optional kind', () => {
  it('is synced, healthy and empty while the CRD is missing, and starts once it is installed', async () => {
    const ns = await createTestNamespace('informer-optional');
    const { crd, group } = widgetCRD();
    const { inf, seen } = widgetInformer(group, ns, true);
    const t0 = performance.now();
    inf.start();
    await inf.waitForSync(AbortSignal.timeout(5_000));
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(inf.health().ok).toBe(true);
    expect(inf.health().message).toMatch(/not served|not installed/);
    expect(inf.absent()).toBe(true);
    expect(inf.list()).toEqual([]);

    await installCRDs(kubeConfig('admin'), [crd]);
    const path = objectPath({ group, version: 'v1', plural: 'widgets', namespace: ns });
    await waitFor(
      () =>
        kubeRequest(kubeConfig('admin'), {
          method: 'POST',
          path,
          body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'w1' } },
        }).then(() => true),
      { what: 'widget w1 created', timeoutMs: 15_000 },
    );
    await waitFor(() => Promise.resolve(seen.includes('add w1')), {
      what: 'informer sees w1',
      timeoutMs: 10_000,
    });
    expect(inf.absent()).toBe(false);
    expect(inf.health()).toEqual({ ok: true, message: 'ok' });

    // The CRD goes away (PKO v2 uninstalled): its objects are gone and the informer idles again.
    await kubeConfig('admin')
      .makeApiClient(ApiextensionsV1Api)
      .deleteCustomResourceDefinition({ name: crd.metadata?.name ?? '' });
    await waitFor(() => Promise.resolve(seen.includes('delete w1') && inf.absent()), {
      what: 'informer idle after the CRD was removed',
      timeoutMs: 30_000,
    });
    expect(inf.hasSynced()).toBe(true);
    expect(inf.health().ok).toBe(true);
  });

  it('a required informer for a missing kind is not synced and reports the 404', async () => {
    const ns = await createTestNamespace('informer-required');
    const { group } = widgetCRD();
    const { inf } = widgetInformer(group, ns, false);
    inf.start();
    await waitFor(() => Promise.resolve(!inf.health().ok), { what: 'unhealthy informer', timeoutMs: 10_000 });
    expect(inf.hasSynced()).toBe(false);
    expect(inf.health().message).toMatch(/404/);
    expect(inf.absent()).toBe(false);
  });
});
