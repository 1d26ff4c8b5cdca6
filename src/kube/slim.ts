/** Informer transforms that keep the cache small: drop the fields the controller never reads. */
import type { KubeObject } from '../api/meta.ts';

/**
 * Removes `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
 * annotation (they dominate the size of small objects in a cache of thousands). Mutates and
 * returns `obj`.
 */
export function slim<T extends KubeObject>(obj: T): T {
  if (obj.metadata) {
    const m = obj.metadata as Record<string, unknown>;
    delete m.managedFields;
    if (obj.metadata.annotations)
      delete obj.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'];
  }
  return obj;
}
