/** Narrow Kubernetes metadata shapes shared by our types and the PKO types. */

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string | Date;
  deletionTimestamp?: string | Date;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
}

/**
 * The owner reference that makes `owner` (of `kind`, served as `apiVersion`) the controller of an
 * object it creates: garbage-collected with it, and told apart from any other owner.
 */
export function controllerReference(
  apiVersion: string,
  kind: string,
  owner: { metadata: ObjectMeta },
): OwnerReference {
  return {
    apiVersion,
    kind,
    name: owner.metadata.name ?? '',
    uid: owner.metadata.uid ?? '',
    controller: true,
  };
}

/**
 * Whether `meta` names the object of `kind` with `uid` as its controller (an owner reference with
 * `controller: true`). Labels alone prove nothing: anyone who may write the object can set them.
 * An empty `uid` matches nothing.
 */
export function controlledBy(meta: ObjectMeta, kind: string, uid: string): boolean {
  return (
    uid !== '' &&
    meta.ownerReferences?.some((r) => r.kind === kind && r.uid === uid && r.controller === true) === true
  );
}

/** A Kubernetes `metav1.Condition`. `lastTransitionTime` is RFC 3339. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

/** Any object with metadata, as the informers and the status patcher see it. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}
