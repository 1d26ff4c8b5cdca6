/**
 * TypeScript shapes of this controller's own custom resources, group `notification.pko.dev`,
 * version `v1alpha1` (namespaced). The CRD schemas in `crds/` are the source of truth for
 * validation; `test/api/crd-enums.test.ts` keeps the value lists below equal to the CRD enums.
 */
import type { Condition, ObjectMeta } from './meta.ts';

export const GROUP = 'notification.pko.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Git forges: they receive commit statuses and PR/MR comments (docs/providers/README.md). */
export const GIT_PROVIDER_TYPES = [
  'github',
  'gitlab',
  'gitea',
  'bitbucket',
  'bitbucketserver',
  'azuredevops',
] as const;
/** Chat services and webhooks: they receive rendered messages. */
export const MESSAGE_PROVIDER_TYPES = [
  'slack',
  'msteams',
  'discord',
  'googlechat',
  'generic',
  'generic-hmac',
] as const;
/** Every `Provider.spec.type`, in CRD enum order. */
export const PROVIDER_TYPES = [...GIT_PROVIDER_TYPES, ...MESSAGE_PROVIDER_TYPES] as const;
export type GitProviderType = (typeof GIT_PROVIDER_TYPES)[number];
export type ProviderType = (typeof PROVIDER_TYPES)[number];

/** `Alert.spec.eventSeverity`: `info` routes everything, `error` only failures. */
export const SEVERITIES = ['info', 'error'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** `Alert.spec.eventSources[].kind`: the PKO objects events come from. */
export const SOURCE_KINDS = ['Stack', 'Update'] as const;
export type SourceKind = (typeof SOURCE_KINDS)[number];

/** Event reasons (docs/events.md). `Alert.spec.eventReasons` items are one of these. */
export const EVENT_REASONS = [
  'PreviewStarted',
  'PreviewSucceeded',
  'PreviewFailed',
  'UpdateStarted',
  'UpdateSucceeded',
  'UpdateFailed',
  'DestroyStarted',
  'DestroySucceeded',
  'DestroyFailed',
  'RefreshStarted',
  'RefreshSucceeded',
  'RefreshFailed',
  'StackStalled',
] as const;
export type EventReason = (typeof EVENT_REASONS)[number];

export function isGitProviderType(t: string): t is GitProviderType {
  return (GIT_PROVIDER_TYPES as readonly string[]).includes(t);
}

export interface LocalObjectReference {
  name: string;
}

export interface ProviderSpec {
  type: ProviderType;
  /** Forge repository or host/owner URL, or chat/webhook endpoint. Either this or Secret key `address`. */
  address?: string;
  /** API base override, e.g. GitHub Enterprise `https://host/api/v3`. */
  apiURL?: string;
  channel?: string;
  username?: string;
  secretRef?: LocalObjectReference;
  certSecretRef?: LocalObjectReference;
  proxySecretRef?: LocalObjectReference;
  /** Per-request timeout as a Go-style duration (`15s`, `1m30s`); CRD default `15s`. */
  timeout?: string;
  commitStatus?: { context?: string };
  /** Post one sticky comment per pull/merge request (git providers); default true. */
  pullRequestComment?: { enabled?: boolean };
  suspend?: boolean;
}

export interface ProviderStatus {
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface Provider {
  apiVersion: typeof API_VERSION;
  kind: 'Provider';
  metadata: ObjectMeta;
  spec: ProviderSpec;
  status?: ProviderStatus;
}

export interface EventSource {
  kind: SourceKind;
  /** Glob on the object name (`*`, `app-*`); default `*`. */
  name?: string;
  /** Default: the Alert's namespace. `*` = every namespace (only when cross-namespace is allowed). */
  namespace?: string;
  matchLabels?: Record<string, string>;
}

export interface AlertSpec {
  providerRef: LocalObjectReference;
  eventSources: EventSource[];
  eventSeverity?: Severity;
  eventReasons?: EventReason[];
  /** RE2 regular expressions matched against the event message. */
  inclusionList?: string[];
  exclusionList?: string[];
  eventMetadata?: Record<string, string>;
  templateRef?: LocalObjectReference;
  suspend?: boolean;
}

/** `status.lastDelivery[].result` (docs/delivery.md, "Outcomes"). */
export const DELIVERY_RESULTS = ['Delivered', 'Skipped', 'Failed', 'Unconfirmed', 'Retrying'] as const;

export interface DeliveryOutcome {
  /** Provider name. */
  provider: string;
  /** RFC 3339 time of the last attempt. */
  lastAttemptTime: string;
  /**
   * `Delivered`, `Skipped`, `Failed`, `Unconfirmed` (sent without an answer; not repeated), or
   * `Retrying` while a retryable failure waits for its next attempt.
   */
  result: (typeof DELIVERY_RESULTS)[number];
  reason?: string;
  /** Redacted, bounded message (≤ 1024 characters). */
  message?: string;
  /** The event: `<reason> <namespace>/<name>` of its Stack or Update. */
  event?: string;
  /** Attempts made for that event so far. */
  attempts?: number;
  /** `Retrying`: when the next attempt is due (RFC 3339). */
  nextAttemptTime?: string;
}

export interface AlertStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  lastDelivery?: DeliveryOutcome[];
}

export interface Alert {
  apiVersion: typeof API_VERSION;
  kind: 'Alert';
  metadata: ObjectMeta;
  spec: AlertSpec;
  status?: AlertStatus;
}
