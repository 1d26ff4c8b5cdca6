/** Shared bits of the Provider and Alert reconcilers: keys, Ready conditions, status writes. */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { Condition, KubeObject } from '../api/meta.ts';
import { GROUP, VERSION } from '../api/v1alpha1.ts';
import { patchStatus, setCondition, findCondition } from '../kube/status.ts';
import { boundText } from '../text.ts';

/** Work-queue key of a namespaced object: `namespace/name`. */
export function keyOf(obj: KubeObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

/**
 * Whether an update needs a reconcile: the spec changed (`metadata.generation`) or the object has
 * never been reconciled (no `status.observedGeneration`). Status-only updates (our own writes) do not.
 */
export function specChanged(
  obj: { metadata: { generation?: number }; status?: { observedGeneration?: number } },
  old: { metadata: { generation?: number } },
): boolean {
  return obj.metadata.generation !== old.metadata.generation || !obj.status?.observedGeneration;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export interface ReadyState {
  ready: boolean;
  reason: string;
  message: string;
}

/** Condition messages are bounded: the API server accepts up to 32,768 bytes; we keep 1,024 characters. */
export function boundMessage(s: string): string {
  return boundText(s, 1024, 'utf16');
}

/**
 * Writes `observedGeneration` and the `Ready` condition (merge-patch on `/status`) unless they
 * already say the same; returns whether the Ready status changed (for Events on transitions).
 */
export async function writeReady(
  kc: KubeConfig,
  plural: 'providers' | 'alerts',
  obj: {
    metadata: { namespace?: string; name?: string; generation?: number };
    status?: { observedGeneration?: number; conditions?: Condition[] };
  },
  state: ReadyState,
  now: Date,
  extraStatus: Record<string, unknown> = {},
): Promise<{ changed: boolean; transitioned: boolean }> {
  const generation = obj.metadata.generation ?? 0;
  const previous = findCondition(obj.status?.conditions, 'Ready');
  const status = state.ready ? 'True' : 'False';
  const message = boundMessage(state.message);
  const same =
    obj.status?.observedGeneration === generation &&
    previous?.status === status &&
    previous.reason === state.reason &&
    previous.message === message &&
    previous.observedGeneration === generation &&
    Object.keys(extraStatus).length === 0;
  if (same) return { changed: false, transitioned: false };
  const conditions = setCondition(
    obj.status?.conditions,
    { type: 'Ready', status, reason: state.reason, message, observedGeneration: generation },
    now,
  );
  await patchStatus(
    kc,
    {
      group: GROUP,
      version: VERSION,
      plural,
      namespace: obj.metadata.namespace ?? '',
      name: obj.metadata.name ?? '',
    },
    { observedGeneration: generation, conditions, ...extraStatus },
  );
  return { changed: true, transitioned: previous?.status !== status || previous.reason !== state.reason };
}
