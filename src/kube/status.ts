/**
 * Writing `status` of our objects, and `metav1.Condition` list helpers.
 */
import type { KubeConfig } from './kubeconfig.ts';
import type { Condition } from '../api/meta.ts';
import { boundText } from '../text.ts';
import { kubeRequest, objectPath } from './client.ts';

export interface StatusRef {
  group: string;
  version: string;
  plural: string;
  namespace: string;
  name: string;
}

/**
 * JSON merge patch (RFC 7386, `application/merge-patch+json`) of `{ status }` on the object's
 * `/status` subresource. Fields absent from `status` are left alone; arrays (conditions) are
 * replaced whole, which is what we want for `conditions`. Send `null` to delete a field.
 * Needs RBAC `patch` on `<plural>/status`.
 * @throws KubeApiError (404 when the object is gone, 422 when the schema rejects the status).
 */
export async function patchStatus(kc: KubeConfig, ref: StatusRef, status: object): Promise<void> {
  await kubeRequest<unknown>(kc, {
    method: 'PATCH',
    path: `${objectPath(ref)}/status`,
    body: { status },
    contentType: 'application/merge-patch+json',
  });
}

/** RFC 3339 at second precision, as Kubernetes writes `metav1.Time`. */
export function kubeTime(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Returns a new condition list with `c` set: replaces the condition of the same `type` (or
 * appends). `lastTransitionTime` is kept when `status` did not change, else set to `now`
 * (RFC 3339, seconds). The input array is not modified.
 */
export function setCondition(
  conds: Condition[] | undefined,
  c: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const list = conds ?? [];
  const old = list.find((x) => x.type === c.type);
  const lastTransitionTime =
    old !== undefined && old.status === c.status && old.lastTransitionTime !== undefined
      ? old.lastTransitionTime
      : kubeTime(now);
  const next: Condition = { ...c, lastTransitionTime };
  return old === undefined ? [...list, next] : list.map((x) => (x === old ? next : x));
}

/** What an object's `Ready` condition says: ready or not, a CamelCase reason, a message for people. */
export interface ReadyState {
  ready: boolean;
  reason: string;
  message: string;
}

/**
 * The `Ready` condition for `state` at `generation` (without `lastTransitionTime`: {@link setCondition}
 * sets it). The message is bounded to 1,024 UTF-16 units (the API server accepts 32,768 bytes).
 */
export function readyCondition(state: ReadyState, generation: number): Omit<Condition, 'lastTransitionTime'> {
  return {
    type: 'Ready',
    status: state.ready ? 'True' : 'False',
    reason: state.reason,
    message: boundText(state.message, 1024, 'utf16'),
    observedGeneration: generation,
  };
}

/** The condition of `type`, if present. */
export function findCondition(conds: Condition[] | undefined, type: string): Condition | undefined {
  return conds?.find((x) => x.type === type);
}
