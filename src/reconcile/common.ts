/** Shared bits of the Provider and Alert reconcilers: keys, Ready conditions, status writes. */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { Condition, KubeObject, ObjectMeta } from '../api/meta.ts';
import { GROUP, VERSION } from '../api/v1alpha1.ts';
import type { EventRecorder } from '../kube/events.ts';
import { patchStatus, setCondition, findCondition, readyCondition, type ReadyState } from '../kube/status.ts';
import type { Logger } from '../log.ts';

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
  const ready = readyCondition(state, generation);
  const same =
    obj.status?.observedGeneration === generation &&
    previous?.status === ready.status &&
    previous.reason === ready.reason &&
    previous.message === ready.message &&
    previous.observedGeneration === generation &&
    Object.keys(extraStatus).length === 0;
  if (same) return { changed: false, transitioned: false };
  const conditions = setCondition(obj.status?.conditions, ready, now);
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
  return {
    changed: true,
    transitioned: previous?.status !== ready.status || previous.reason !== state.reason,
  };
}

/** What {@link settleReady} needs of a reconciler's dependencies. */
export interface ReadyReporting {
  kubeConfig: KubeConfig;
  recorder: EventRecorder;
  logger: Logger;
  now?: () => Date;
}

/**
 * Writes the `Ready` condition of a Provider or Alert ({@link writeReady}); when it turned not
 * ready, or changed its reason while not ready, also logs a warning (`logFields`, the reason and
 * the message) and records a Warning Event with the reason and message on the object.
 * @returns whether the condition changed status or reason.
 */
export async function settleReady(
  d: ReadyReporting,
  kind: 'Provider' | 'Alert',
  obj: {
    apiVersion: string;
    metadata: ObjectMeta;
    status?: { observedGeneration?: number; conditions?: Condition[] };
  },
  state: ReadyState,
  logFields: Record<string, string>,
): Promise<boolean> {
  const plural = kind === 'Provider' ? 'providers' : 'alerts';
  const { transitioned } = await writeReady(d.kubeConfig, plural, obj, state, d.now?.() ?? new Date());
  if (transitioned && !state.ready) {
    d.logger.warn({ ...logFields, reason: state.reason }, state.message);
    await d.recorder.event(
      { apiVersion: obj.apiVersion, kind, metadata: obj.metadata },
      'Warning',
      state.reason,
      state.message,
    );
  }
  return transitioned;
}
