/**
 * The cluster name of this controller (`--cluster-name`), part of every default commit-status
 * context (`pko/<cluster>/<namespace>/<stack>`): two clusters sharing one name overwrite each
 * other's statuses, silently (case N15). An explicit `--cluster-name` wins; without one the name
 * is derived from the cluster's own identity — the UID of its `kube-system` namespace, which the
 * API server creates once per cluster and never changes — so two clusters installed from the
 * same manifests never share a context. Reading it needs `get` on `namespaces/kube-system`
 * (config/rbac/role.yaml); when that is refused the controller does not start.
 */
import type { KubeConfig } from './kubeconfig.ts';
import { errorMessage, errorStatusCode, kubeRequest } from './client.ts';

/** Hex digits of the `kube-system` UID kept in a derived name (32 bits: a fleet of clusters does not collide). */
const UID_HEX_DIGITS = 8;

/** A cluster name and where it came from. */
export interface ClusterName {
  name: string;
  /** `flag`: `--cluster-name`; `kube-system`: derived from the `kube-system` namespace UID. */
  source: 'flag' | 'kube-system';
  /** The `kube-system` namespace UID, when derived from it. */
  uid?: string;
}

/** Why no cluster name could be derived; the controller refuses to start with this message. */
export class ClusterNameError extends Error {
  override name = 'ClusterNameError';
}

/**
 * The name derived from a `kube-system` namespace UID: `cluster-` and the UID's first 8 hex
 * digits, e.g. `cluster-3f9e1c2a` for `3f9e1c2a-77b0-4d4e-9c52-0c6d2f1b8e11`. Stable for the
 * cluster's life; a DNS label, as `--cluster-name` requires.
 * @throws ClusterNameError when `uid` has fewer than 8 hex digits.
 */
export function clusterNameFromUID(uid: string): string {
  const hex = uid.toLowerCase().replace(/[^0-9a-f]/g, '');
  if (hex.length < UID_HEX_DIGITS)
    throw new ClusterNameError(`the kube-system namespace UID "${uid}" is not a UID`);
  return `cluster-${hex.slice(0, UID_HEX_DIGITS)}`;
}

/**
 * `explicit` when set (`--cluster-name`), else the name derived from the `kube-system` namespace
 * UID ({@link clusterNameFromUID}), read with `GET /api/v1/namespaces/kube-system`.
 * @throws ClusterNameError saying to set `--cluster-name` when the read is refused (403), finds
 *   no `kube-system` namespace, or fails otherwise.
 */
export async function resolveClusterName(kc: KubeConfig, explicit: string): Promise<ClusterName> {
  if (explicit !== '') return { name: explicit, source: 'flag' };
  const fix =
    'set --cluster-name=NAME (a name unique among the clusters that report to the same repositories), or allow get on namespaces/kube-system (config/rbac/role.yaml)';
  let ns: { metadata?: { uid?: string } };
  try {
    ns = await kubeRequest(kc, { method: 'GET', path: '/api/v1/namespaces/kube-system' });
  } catch (err) {
    const code = errorStatusCode(err);
    const why =
      code === 403
        ? 'reading namespace kube-system was refused (403)'
        : code === 404
          ? 'the cluster has no kube-system namespace'
          : `reading namespace kube-system failed: ${errorMessage(err)}`;
    throw new ClusterNameError(`cannot derive a cluster name: ${why}; ${fix}`, { cause: err });
  }
  const uid = ns.metadata?.uid ?? '';
  if (uid === '')
    throw new ClusterNameError(`cannot derive a cluster name: namespace kube-system has no UID; ${fix}`);
  return { name: clusterNameFromUID(uid), source: 'kube-system', uid };
}
