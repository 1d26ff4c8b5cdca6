/**
 * Narrow, read-only shapes of the Pulumi Kubernetes Operator objects this controller watches.
 * Fields and meanings: docs/events.md (PKO v1.16 and v2.x). Every field is optional
 * because v1 and v2 objects differ and we must tolerate either.
 */
import type { Condition, ObjectMeta } from './meta.ts';

export const STACK_GROUP = 'pulumi.com';
export const STACK_VERSION = 'v1';
export const STACK_PLURAL = 'stacks';

/**
 * The Stacks of `namespace`, or its Stack `name`, as the resource reference the API client makes
 * a REST path of (src/kube/client.ts `objectPath`).
 */
export function stackRef(
  namespace: string,
  name?: string,
): { group: string; version: string; plural: string; namespace: string; name?: string } {
  return {
    group: STACK_GROUP,
    version: STACK_VERSION,
    plural: STACK_PLURAL,
    namespace,
    ...(name !== undefined ? { name } : {}),
  };
}

export const UPDATE_GROUP = 'auto.pulumi.com';
export const UPDATE_VERSION = 'v1alpha1';
export const UPDATE_PLURAL = 'updates';

/** `Stack.status.lastUpdate` (v1: state/commits/permalink only; v2 adds name/type/message/failures). */
export interface StackLastUpdate {
  generation?: number;
  reconcileRequest?: string;
  name?: string;
  type?: string;
  state?: string;
  message?: string;
  lastAttemptedCommit?: string;
  lastSuccessfulCommit?: string;
  permalink?: string;
  lastResyncTime?: string;
  failures?: number;
}

export interface StackCurrentUpdate {
  generation?: number;
  reconcileRequest?: string;
  name?: string;
  commit?: string;
}

export interface StackSpec {
  stack?: string;
  projectRepo?: string;
  branch?: string;
  commit?: string;
  repoDir?: string;
  preview?: boolean;
  fluxSource?: { sourceRef?: { apiVersion?: string; kind?: string; name?: string }; dir?: string };
  programRef?: { name?: string };
  [key: string]: unknown;
}

export interface StackStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  lastUpdate?: StackLastUpdate;
  currentUpdate?: StackCurrentUpdate;
  [key: string]: unknown;
}

export interface Stack {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec?: StackSpec;
  status?: StackStatus;
}

export interface UpdateSpec {
  workspaceName?: string;
  stackName?: string;
  type?: string;
  message?: string;
  [key: string]: unknown;
}

export interface UpdateStatus {
  observedGeneration?: number;
  startTime?: string;
  endTime?: string;
  permalink?: string;
  message?: string;
  outputs?: string;
  conditions?: Condition[];
  [key: string]: unknown;
}

export interface Update {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec?: UpdateSpec;
  status?: UpdateStatus;
}
