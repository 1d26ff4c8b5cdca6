/**
 * Plain-JSON REST calls for the kube tests' fixtures (creating ConfigMaps, Roles, Leases, a CRD).
 * Built on src/kube/client.ts's `kubeRequest` so test objects stay plain literals.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeObject } from '../../src/api/meta.ts';
import { kubeRequest, objectPath, type ResourceRef } from '../../src/kube/client.ts';

export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

export interface KubeListOf<T> {
  items: T[];
}

export const configMaps = (namespace: string, name?: string): ResourceRef => ({
  group: '',
  version: 'v1',
  plural: 'configmaps',
  namespace,
  ...(name !== undefined ? { name } : {}),
});

export function rest(kc: KubeConfig) {
  return {
    get: <T>(r: ResourceRef, query?: Record<string, string>): Promise<T> =>
      kubeRequest<T>(kc, { method: 'GET', path: objectPath(r), ...(query ? { query } : {}) }),
    create: <T>(r: ResourceRef, body: object): Promise<T> =>
      kubeRequest<T>(kc, { method: 'POST', path: objectPath(r), body }),
    replace: <T>(r: ResourceRef, body: object): Promise<T> =>
      kubeRequest<T>(kc, { method: 'PUT', path: objectPath(r), body }),
    delete: (r: ResourceRef): Promise<unknown> =>
      kubeRequest<unknown>(kc, { method: 'DELETE', path: objectPath(r) }),
  };
}
