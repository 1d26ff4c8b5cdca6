/**
 * patchStatus against a real API server, on a throwaway CRD with a status subresource.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Condition } from '../../src/api/meta.ts';
import { KubeApiError, errorStatusCode } from '../../src/kube/client.ts';
import { patchStatus, setCondition } from '../../src/kube/status.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { rest } from './rest.ts';

const group = 'kubetest.pko.dev';
const ref = { group, version: 'v1', plural: 'widgets' };

const crd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `widgets.${group}` },
  spec: {
    group,
    scope: 'Namespaced',
    names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: { type: 'object', properties: { size: { type: 'integer' } } },
              status: {
                type: 'object',
                properties: {
                  observedGeneration: { type: 'integer' },
                  note: { type: 'string' },
                  conditions: {
                    type: 'array',
                    items: {
                      type: 'object',
                      required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
                      properties: {
                        type: { type: 'string' },
                        status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
                        reason: { type: 'string' },
                        message: { type: 'string' },
                        lastTransitionTime: { type: 'string', format: 'date-time' },
                        observedGeneration: { type: 'integer' },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    ],
  },
};

interface Widget {
  metadata: { name: string; generation?: number };
  spec?: { size?: number };
  status?: { observedGeneration?: number; note?: string; conditions?: Condition[] };
}

const crdRef = { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions' };

beforeAll(async () => {
  const admin = rest(kubeConfig('admin'));
  await admin.create(crdRef, crd).catch((err: unknown) => {
    if (errorStatusCode(err) !== 409) throw err;
  });
  await waitFor(
    async () => {
      const got = await admin.get<{ status?: { conditions?: Condition[] } }>({
        ...crdRef,
        name: crd.metadata.name,
      });
      return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    },
    { what: 'CRD established', timeoutMs: 30_000 },
  );
});

async function createWidget(ns: string): Promise<void> {
  await rest(kubeConfig('admin')).create(
    { ...ref, namespace: ns },
    { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'w' }, spec: { size: 1 } },
  );
}

const getWidget = (ns: string): Promise<Widget> =>
  rest(kubeConfig('admin')).get<Widget>({ ...ref, namespace: ns, name: 'w' });

describe('patchStatus', () => {
  it('merge-patches the status subresource: fields kept, conditions replaced whole, spec untouched', async () => {
    const ns = await createTestNamespace('status');
    const kc = kubeConfig('admin');
    await createWidget(ns);
    const now = new Date('2026-03-04T05:06:07Z');
    const two = setCondition(
      setCondition(undefined, { type: 'Ready', status: 'False', reason: 'Init', message: 'starting' }, now),
      { type: 'Stalled', status: 'False', reason: 'No', message: '' },
      now,
    );
    await patchStatus(
      kc,
      { ...ref, namespace: ns, name: 'w' },
      { observedGeneration: 1, note: 'n1', conditions: two },
    );
    const ready = setCondition(
      undefined,
      { type: 'Ready', status: 'True', reason: 'Ok', message: 'fine' },
      now,
    );
    await patchStatus(kc, { ...ref, namespace: ns, name: 'w' }, { conditions: ready });

    const got = await getWidget(ns);
    expect(got.spec).toEqual({ size: 1 });
    expect(got.status).toEqual({
      observedGeneration: 1,
      note: 'n1',
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'Ok',
          message: 'fine',
          lastTransitionTime: '2026-03-04T05:06:07Z',
        },
      ],
    });

    await patchStatus(kc, { ...ref, namespace: ns, name: 'w' }, { note: null });
    const cleared = await getWidget(ns);
    expect(cleared.status?.note).toBeUndefined();
    expect(cleared.status?.observedGeneration).toBe(1);
  });

  it('errors carry the HTTP code and Status reason (404, 422, 403)', async () => {
    const ns = await createTestNamespace('status-errors');
    const kc = kubeConfig('admin');
    await createWidget(ns);
    const missing = await patchStatus(kc, { ...ref, namespace: ns, name: 'nope' }, { note: 'x' }).catch(
      (e: unknown) => e,
    );
    expect(missing).toBeInstanceOf(KubeApiError);
    expect((missing as KubeApiError).statusCode).toBe(404);
    expect((missing as KubeApiError).reason).toBe('NotFound');

    const invalid = await patchStatus(
      kc,
      { ...ref, namespace: ns, name: 'w' },
      {
        conditions: [{ type: 'Ready', status: 'Maybe' }],
      },
    ).catch((e: unknown) => e);
    expect((invalid as KubeApiError).statusCode).toBe(422);
    expect((invalid as KubeApiError).message).toContain('PATCH /apis/kubetest.pko.dev/v1/namespaces/');

    const denied = await patchStatus(
      kubeConfig('viewer'),
      { ...ref, namespace: ns, name: 'w' },
      { note: 'x' },
    ).catch((e: unknown) => e);
    expect((denied as KubeApiError).statusCode).toBe(403);
  });
});
