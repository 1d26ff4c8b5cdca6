/**
 * TypeScript shapes of this controller's own custom resources, group `notification.pko.dev`,
 * version `v1alpha1` (namespaced). The CRD schemas in `crds/` are the source of truth for
 * validation; `test/api/crd-enums.test.ts` keeps the value lists below equal to the CRD enums.
 */
import type { PreviewGate } from './gate.ts';
import type { Condition, ObjectMeta } from './meta.ts';

export const GROUP = 'notification.pko.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/**
 * Name of the ValidatingAdmissionPolicy and binding that admit an Alert selecting other
 * namespaces only from a writer who may list Stacks there
 * (config/admission/alert_sources_policy.yaml).
 */
export const ALERT_SOURCES_POLICY_NAME = 'pko-notification-controller-alert-sources';

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
  'DriftDetected',
  'DriftResolved',
  'DriftCheckFailed',
] as const;
export type EventReason = (typeof EVENT_REASONS)[number];

export function isGitProviderType(t: string): t is GitProviderType {
  return (GIT_PROVIDER_TYPES as readonly string[]).includes(t);
}

/** `Provider.spec.threading` values, in CRD enum order. */
export const THREADING_MODES = ['thread', 'update', 'none'] as const;
export type Threading = (typeof THREADING_MODES)[number];
/** Provider types that read `spec.threading` (CEL refuses it on the others). */
export const THREADING_PROVIDER_TYPES = ['slack', 'googlechat'] as const;

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
  /**
   * Chat types that keep a run together (slack with a bot token, googlechat): `thread` (default)
   * replies to the run's first message, `update` (slack) edits it, `none` posts one message per event.
   */
  threading?: Threading;
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

/**
 * `PullRequestPreview.spec.trust.authorAssociations` items: GitHub's `author_association` words.
 * Gitea and GitLab have no such field; their permission levels are mapped onto these words
 * (docs/previews.md, "Trust").
 */
export const AUTHOR_ASSOCIATIONS = [
  'OWNER',
  'MEMBER',
  'COLLABORATOR',
  'CONTRIBUTOR',
  'FIRST_TIME_CONTRIBUTOR',
  'FIRST_TIMER',
  'NONE',
] as const;
export type AuthorAssociation = (typeof AUTHOR_ASSOCIATIONS)[number];

/** Who gets a preview (docs/previews.md, "Trust"). */
export interface PreviewTrust {
  /** Pull requests whose head is in another repository (a fork); default false. */
  allowForks?: boolean;
  /** Author associations that get a preview; default OWNER, MEMBER, COLLABORATOR (write access). */
  authorAssociations?: AuthorAssociation[];
  /** Labels every previewed pull request must carry (all of them); default none. */
  requiredLabels?: string[];
}

export interface PullRequestPreviewSpec {
  /** The base Stack (same namespace): its spec is copied into every preview Stack. */
  stackRef: LocalObjectReference;
  /** A git forge Provider (same namespace): where pull requests are listed and notices posted. */
  providerRef: LocalObjectReference;
  /** Target branch of the previewed pull requests; default the base Stack's `spec.branch`. */
  branch?: string;
  /** Polling interval (Go duration, 10s to 24h; CRD default `5m`). A stored value above 24h is used as 24h, and the Ready condition says so. */
  interval?: string;
  trust?: PreviewTrust;
  /** Most preview Stacks at a time; CRD default 5. Further pull requests wait (their PR says so). */
  maxPreviews?: number;
  /**
   * Applied to each preview Stack: labels, annotations (no reserved keys), and a JSON merge patch
   * of its spec limited to `OVERRIDABLE_SPEC_FIELDS` (src/preview/stack.ts; case B10).
   */
  stackOverrides?: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    spec?: Record<string, unknown>;
  };
  /** The webhook receiver: Secret key `token` is the HMAC key (GitHub, Gitea) or token (GitLab). */
  webhook?: {
    secretRef?: LocalObjectReference;
    /** On a push to the base branch, set `pulumi.com/reconciliation-request` on the base Stack. */
    reconcileBaseOnPush?: boolean;
  };
  suspend?: boolean;
  /**
   * The approval primitive (docs/previews.md, "A gate reviewers can require"): a preview whose
   * change set plans one of these operations on one of these resource types gets a `failure`
   * commit status (branch protection can require it); so does one whose change set is not known.
   */
  gate?: PreviewGate;
  /**
   * How long a preview Stack may wait for PKO to run its commit (e.g. a workspace that never
   * becomes ready) before the pull request is told, with PKO's reason (Go duration; CRD default
   * `10m`, from `1m` to `24h`; a stored value above 24h is used as 24h, and the condition says so).
   */
  startTimeout?: string;
}

/**
 * `PullRequestPreview.status.previews[].state`: `Active` (preview Stack exists), `Waiting`
 * (maxPreviews reached), `Untrusted` (trust rules), `Blocked` (a Stack of the preview's name exists
 * and is not this PullRequestPreview's: the name is taken, that Stack is left alone).
 */
export const PREVIEW_STATES = ['Active', 'Waiting', 'Untrusted', 'Blocked'] as const;

/** One pull request the PullRequestPreview knows of. */
export interface PreviewEntry {
  number: number;
  headSHA: string;
  /** One of {@link PREVIEW_STATES}. */
  state: (typeof PREVIEW_STATES)[number];
  stackName?: string;
  /** The preview Stack's last result (`succeeded`/`failed`), when one is known. */
  lastResult?: string;
  /** Web URL of the controller's notice comment on the pull request, when one was posted. */
  commentURL?: string;
  /** Why it has no preview (Untrusted/Waiting/Blocked). */
  reason?: string;
}

export interface PullRequestPreviewStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  previews?: PreviewEntry[];
  /** Number of preview Stacks. */
  activePreviews?: number;
  /** RFC 3339 time of the last successful sync with the forge. */
  lastSyncTime?: string;
}

/**
 * Label on the preview Stacks a PullRequestPreview creates: the pull request number. Events of a
 * Stack owned by a PullRequestPreview carry it as `metadata.pullRequest` (docs/previews.md).
 */
export const PULL_REQUEST_LABEL = `${GROUP}/pull-request`;
/** Label on the preview Stacks a PullRequestPreview creates: its name. */
export const PREVIEW_LABEL = `${GROUP}/pull-request-preview`;
/**
 * Annotation on the preview Stacks a PullRequestPreview creates: the base Stack's name (same
 * namespace). Honoured only on a Stack a PullRequestPreview controls: its events' pull-request
 * comment carries the base Stack's marker, so the base Stack's deployment of the merge edits the
 * same comment (docs/previews.md, "One comment follows the change").
 */
export const BASE_STACK_ANNOTATION = `${GROUP}/base-stack`;

export interface PullRequestPreview {
  apiVersion: typeof API_VERSION;
  kind: 'PullRequestPreview';
  metadata: ObjectMeta;
  spec: PullRequestPreviewSpec;
  status?: PullRequestPreviewStatus;
}

/** `DriftDetection.status.stacks[].result` (docs/drift.md). */
export const DRIFT_RESULTS = ['Clean', 'Drifted', 'Failed', 'Deferred'] as const;
export type DriftResult = (typeof DRIFT_RESULTS)[number];

/** A Kubernetes label selector (`metav1.LabelSelector`). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: {
    key: string;
    operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
    values?: string[];
  }[];
}

export interface DriftDetectionSpec {
  /** Stacks of the namespace by name (at most 100). With `selector`, a Stack matching either is selected. */
  stackNames?: string[];
  /** Stacks of the namespace by label. */
  selector?: LabelSelector;
  /**
   * Go duration between two checks of one Stack, 10m to 720h (CRD default `1h`); each check is
   * jittered by up to +10 %. A stored value above 720h is used as 720h, and the condition says so.
   */
  interval?: string;
  /** After drift, ask PKO to run the Stack (`pulumi.com/reconciliation-request`); default false. Needs the admission policy (docs/drift.md). */
  remediate?: boolean;
  suspend?: boolean;
}

/** The last drift event of one Stack (what the router derives `Drift*` events from). */
export interface DriftEventRecord {
  /** `DriftDetected`, `DriftResolved` or `DriftCheckFailed`. */
  reason: 'DriftDetected' | 'DriftResolved' | 'DriftCheckFailed';
  /** Name of the check Stack whose result it reports: the event's run. */
  check: string;
  /** RFC 3339: when the check ended. */
  time: string;
  /** The event message (redacted, at most 4 KiB). */
  message: string;
  /** The commit checked (`status.lastUpdate.lastSuccessfulCommit` of the Stack). */
  commit?: string;
}

/** One selected Stack's drift checks. */
export interface DriftStackStatus {
  name: string;
  uid: string;
  /** The Stack's deployed commit of the last check. */
  commit?: string;
  /** RFC 3339. */
  lastCheckTime?: string;
  result?: DriftResult;
  /** Resources that drifted in the last check (Drifted only). */
  changedResources?: number;
  /** Why the last check failed or was deferred, or what drifted (bounded). */
  message?: string;
  /** RFC 3339: when the next check is due. */
  nextCheckTime?: string;
  /** The check in flight: its Stack's name and uid and when it was created. */
  check?: { name: string; uid: string; startTime: string };
  /** The last drift event (absent before the first one). */
  lastEvent?: DriftEventRecord;
  /** Fingerprint of the drift last reported (resources and properties): a new DriftDetected only when it changes. */
  driftFingerprint?: string;
}

export interface DriftDetectionStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  /** Selected Stacks (at most `MAX_DRIFT_STATUS_STACKS`, by name). */
  stacks?: DriftStackStatus[];
  /** Selected Stacks beyond that bound (checked all the same; not listed). */
  stacksOmitted?: number;
}

export interface DriftDetection {
  apiVersion: typeof API_VERSION;
  kind: 'DriftDetection';
  metadata: ObjectMeta;
  spec: DriftDetectionSpec;
  status?: DriftDetectionStatus;
}

/** Label on a drift check Stack: the name of the DriftDetection that made it. */
export const DRIFT_CHECK_LABEL = `${GROUP}/drift-detection`;
/** Label on a drift check Stack: the name of the Stack it checks. */
export const DRIFT_BASE_LABEL = `${GROUP}/drift-base`;

/**
 * Whether `s` is a drift check Stack: labelled {@link DRIFT_CHECK_LABEL} and controlled (owner
 * reference with `controller: true`) by a DriftDetection. Its runs are the controller's own and
 * yield no events of their own (src/alert/router.ts); they are reported as drift events of the
 * Stack it checks (docs/drift.md).
 */
export function isDriftCheck(s: { metadata: Pick<ObjectMeta, 'labels' | 'ownerReferences'> }): boolean {
  return (
    s.metadata.labels?.[DRIFT_CHECK_LABEL] !== undefined &&
    s.metadata.ownerReferences?.some((r) => r.kind === 'DriftDetection' && r.controller === true) === true
  );
}
