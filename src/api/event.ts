/**
 * The normalised notification event (docs/events.md). Not called `Event`: Node declares a global
 * of that name.
 */
import type { ChangeSet } from '../changes/types.ts';
import type { EventGate } from './gate.ts';
import type { EventReason, Severity } from './v1alpha1.ts';

/** Metadata keys the source fills when known (docs/events.md); Alerts may add their own. */
export const EVENT_METADATA_KEYS = [
  'revision',
  'commit',
  'repository',
  'branch',
  'stack',
  'updateName',
  'updateType',
  'permalink',
  'failures',
  'pullRequest',
] as const;
export type EventMetadataKey = (typeof EVENT_METADATA_KEYS)[number];

export interface InvolvedObject {
  apiVersion: string;
  kind: 'Stack' | 'Update';
  namespace: string;
  name: string;
  uid: string;
}

/** The phase of a run an event reports; a stall is told apart by its reason and the Stack generation. */
export type EventPhase =
  { kind: 'started' | 'succeeded' | 'failed' } | { kind: 'stalled'; reason: string; generation: number };

/** The run an event belongs to, as PKO's objects name it. */
export type RunRef =
  /** PKO v2: the Update object's `metadata.name` (also `status.lastUpdate.name` of the Stack). */
  | { kind: 'update'; name: string }
  /**
   * PKO v1 (no Update objects): the commit an outcome is about, and when, from
   * `status.lastUpdate.lastResyncTime` (or `g<observedGeneration>` when absent). v1 stamps that
   * time on every retry and resync, so `at` orders events but is not part of the id: a v1 event is
   * its commit and outcome (docs/events.md, "PKO v1").
   */
  | { kind: 'v1'; commit: string; at: string }
  /** A stall before any run. */
  | { kind: 'none' }
  /**
   * A drift check (docs/drift.md): the name of the check Stack a DriftDetection created for it.
   * Its one event (DriftDetected, DriftCheckFailed: phase `failed`; DriftResolved: `succeeded`)
   * is derived from the DriftDetection's status.
   */
  | { kind: 'drift'; check: string };

/**
 * What makes an event the same event whichever watch, relist or restart saw it: the Stack, the
 * run and the phase. {@link eventId} derives the string form; nothing parses it back.
 */
export interface EventIdentity {
  /**
   * The Stack's uid; `namespace/name` when the object carries none; for an Update with no Stack
   * owner, the Update's own uid.
   */
  stack: string;
  run: RunRef;
  phase: EventPhase;
}

/** The run segment of an id: the Update name, `v1:<commit>`, `drift:<check Stack>`, or `-`. */
export function runName(run: RunRef): string {
  switch (run.kind) {
    case 'update':
      return run.name;
    case 'v1':
      return `v1:${run.commit}`;
    case 'none':
      return '-';
    case 'drift':
      return `drift:${run.check}`;
  }
}

/** The phase segment of an id: `started|succeeded|failed` or `stalled:<reason>@<generation>`. */
export function phaseName(phase: EventPhase): string {
  return phase.kind === 'stalled' ? `stalled:${phase.reason}@${String(phase.generation)}` : phase.kind;
}

/**
 * Events of one run of one Stack share this key (`<stack>/<run>`): Started, Succeeded/Failed, and
 * a StackStalled caused by that run.
 */
export function runKey(identity: EventIdentity): string {
  return `${identity.stack}/${encodeURIComponent(runName(identity.run))}`;
}

/**
 * The string id of an identity: `<stack>/<run>/<phase>` (run URI-encoded; Update names are
 * DNS names, which encoding leaves unchanged). Receivers see it as `X-PKO-Event-Id`; the ledger
 * stores a hash of it.
 */
export function eventId(identity: EventIdentity): string {
  return `${runKey(identity)}/${phaseName(identity.phase)}`;
}

export interface NotificationEvent {
  /** The structured identity: the same run and phase always yield the same one. */
  identity: EventIdentity;
  /** `eventId(identity)`, kept beside it for payloads, logs and templates. */
  id: string;
  involvedObject: InvolvedObject;
  /** Labels of the involved object, for `eventSources[].matchLabels`. */
  labels: Record<string, string>;
  severity: Severity;
  reason: EventReason;
  /** Human-readable, ANSI-free, bounded. */
  message: string;
  /** RFC 3339. */
  timestamp: string;
  metadata: Partial<Record<string, string>>;
  reportingController: string;
  /**
   * Why `metadata.commit` is absent, worded from the revision PKO recorded (e.g. a Program source's
   * generation, an OCI digest); absent when the event has a commit.
   */
  noCommitReason?: string;
  /**
   * What the run changed (or would change): attached to a finished run's event before it is
   * routed (docs/previews.md, "What a preview would change"); absent when nobody looked (a
   * started or stalled event). Templates see it as `changes` (templates/README.md).
   */
  changes?: EventChanges;
  /**
   * The pull-request comment this event continues (docs/previews.md, "One comment follows the
   * change"); absent for a Stack that is neither a preview Stack nor the base Stack of a
   * PullRequestPreview.
   */
  previewThread?: PreviewThread;
  /**
   * A preview Stack's gate (its PullRequestPreview's `spec.gate`, from the annotation
   * `notification.pko.dev/gate`), on preview results only: the renderer fails the commit status
   * when the change set plans a gated change or is not known (docs/previews.md).
   */
  gate?: EventGate;
  /**
   * Case N18: a preview Stack's event for a commit that is no longer its pull request's head
   * (the Stack's `spec.commit`, which the PullRequestPreview controller moves on each push): the
   * newer head (40 hex). Its comment is not written — the pull request's comment keeps the newer
   * head's state — and a started one sets its commit's status to `failure` "superseded by <short
   * sha>" instead of pending; a result is set on its own commit as usual.
   */
  supersededBy?: string;
}

/**
 * How a preview Stack's comment and its base Stack's deployment share one pull-request comment:
 * both use the sticky-comment marker of the base Stack (`markerIdFor(cluster, namespace,
 * baseStack)`), and the base Stack's own up/destroy results look up the pull request their commit
 * merged and edit the comment found there (never create one).
 */
export interface PreviewThread {
  /** The base Stack, in the event's own namespace, whose marker the comment carries. */
  baseStack: string;
  /**
   * True for the base Stack's own finished up/destroy run: the forge is asked which pull request
   * merged the commit, and the comment of ours with the marker on it, if any, is edited.
   */
  merged: boolean;
}

/**
 * The change set of an event's run, or why there is none. `set` is already redacted (no value of a
 * Secret the Stack references); `unavailable` is one plain sentence (`no change details: …`).
 */
export type EventChanges =
  { set: ChangeSet; unavailable?: undefined } | { set?: undefined; unavailable: string };
