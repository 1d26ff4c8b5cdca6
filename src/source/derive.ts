/**
 * Level-based derivation of {@link NotificationEvent}s from PKO `Update` and `Stack` status
 * (docs/events.md). Pure: no Kubernetes calls, no clock — the same object always yields the same
 * events, so a relist or a restart recomputes exactly what a live watch would have seen.
 *
 * ## What the functions return
 * The CURRENT desired events implied by an object's status, not edges:
 * - An Update that is not done yields `<Type>Started`. A done Update (`Complete=True` and
 *   `metadata.generation == status.observedGeneration`) yields BOTH
 *   `<Type>Started` and `<Type>Succeeded` (`Failed=False`) or `<Type>Failed` (`Failed=True`), so a
 *   controller that never saw the running phase still knows the whole run. The delivery layer
 *   decides what to send: it may skip a Started whose run already has a terminal event in the
 *   same batch (same {@link runKeyOf}) and was never delivered.
 * - An aborted or canceled Update (`Failed=True` with reason `Aborted`/`Canceled`, or — older PKO
 *   v2 — `Complete` reason `Aborted`) yields nothing: it is not a failure of its commit and must
 *   not read as a success either (case F29). PKO starts a new Update for the same commit, whose
 *   events then drive the commit status.
 * - Type mapping: `preview`→Preview*, `up`→Update*, `destroy`→Destroy*, `refresh`→Refresh*; any
 *   other `spec.type` yields nothing.
 * - A Stack yields (a) `<Type>Succeeded|Failed` from `status.lastUpdate` {name, type, state} only
 *   when that Update object no longer exists (TTL, 24 h) and the controller never saw it
 *   (`DeriveContext.updateSeen`: a seen Update's run was derived from it, N20): same id as the
 *   Update-derived event;
 *   (b) `<Type>Started` from `status.currentUpdate` only when that Update object is not (yet)
 *   known and was never seen — PKO writes `currentUpdate` before it creates the Update; `currentUpdate` has no type,
 *   so it is inferred the way PKO's Stack controller chooses it: `destroy` when the Stack is being
 *   deleted, `preview` when `spec.preview`, else `up`; (c) for PKO v1 Stacks (`lastUpdate` without
 *   `name`/`type`) `UpdateSucceeded|UpdateFailed` (`Preview*` when `spec.preview`) — v1 has no
 *   run object and no in-flight marker, so no Started; (d) `StackStalled` while `Stalled=True`;
 *   (e) `StackStalled` (reason `UpdateMissing`) while `currentUpdate` names an Update the
 *   controller saw and that is gone (PKO #1292, N20); (f) with `DeriveContext.stuck`,
 *   `StackStalled` (reason `NoProgress`) while a PKO v2 Stack has been Reconciling with no run
 *   in progress for longer than the threshold ({@link stuckSince}; issue 22's "stuck Stack").
 *
 * ## Identity (`id`)
 * `<stack key>/<run>/<phase>`: stack key = the Stack's uid (from the Update's ownerReference of
 * kind Stack, else the Stack passed in, else the Update's own uid); run = the Update name, or for
 * PKO v1 `v1:<lastAttemptedCommit>@<lastResyncTime | g<observedGeneration>>` (URI-encoded; v1
 * stamps `lastResyncTime` on every run, so it tells runs of the same commit apart); phase =
 * `started|succeeded|failed`, or `stalled:<reason>@<observedGeneration>` with run = the
 * `lastUpdate.name` (`-` when none). The same run seen through its Update or through the Stack's
 * `lastUpdate` gets the same id.
 *
 * ## Involved object and Alert source kinds
 * Events are always about a Stack run: `involvedObject` is the Stack (from the Stack passed in or
 * the Update's ownerReference); only an Update with no Stack owner and no Stack given is its own
 * involved object (kind `Update`). An Alert source of kind `Update` matches the same events by the
 * Update name in `metadata.updateName` (see `src/alert/matcher.ts`). `labels` are the involved
 * object's labels when that object is at hand (the Stack passed in; the Update when it is the
 * involved object), `{}` when the Stack is known only by reference.
 *
 * ## Other fields
 * Metadata (absent keys omitted): `revision` (raw PKO commit field; for an Update the Stack's
 * `currentUpdate.commit` or `lastUpdate.lastAttemptedCommit` whose `name` is this Update, else
 * `New commit detected: "<rev>"` in its `spec.message`, else the commit remembered for it
 * (`DeriveContext.updateCommit`), else what PKO still records for it ({@link recordedRevisions});
 * without any, `noCommitReason` says that PKO named it only while the run was current or last),
 * `commit` ({@link parseRevision}), `repository` (`spec.projectRepo`, or for a Flux GitRepository
 * source `ctx.fluxRepositoryURL`), `branch` (`spec.branch` without `refs/heads/`, or the ref of a
 * Flux revision), `stack` (`spec.stack`), `updateName`, `updateType`, `permalink`, `failures`,
 * `pullRequest`. Messages start with a synthesized line (`Preview of stack acme/app/dev
 * succeeded`) followed by the PKO message (CLI output for failures) through {@link cleanMessage}.
 * Timestamps come from status (Update start/end time, `lastResyncTime`, condition transition
 * times) or `metadata.creationTimestamp`, never from the clock; `1970-01-01T00:00:00Z` if none.
 * The one use of a clock is `DeriveContext.stuck`, given by the caller (the NoProgress stall).
 * Severity: `*Failed` and `StackStalled` are `error`, the rest `info`.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import {
  eventId,
  type EventPhase,
  type InvolvedObject,
  type NotificationEvent,
  type RunRef,
} from '../api/event.ts';
import type { Condition } from '../api/meta.ts';
import {
  STACK_GROUP,
  STACK_VERSION,
  UPDATE_GROUP,
  UPDATE_VERSION,
  type Stack,
  type StackLastUpdate,
  type Update,
} from '../api/pko.ts';
import type { EventReason, Severity } from '../api/v1alpha1.ts';
import { parseRevision } from './revision.ts';
import {
  compareUpdates,
  currentContinuesLast,
  isContinuation,
  unquoteMessage,
  v1FailureText,
  v1Outcome,
} from './runs.ts';
import { cleanMessage } from '../text.ts';

/**
 * Annotation the leader writes on a finished PKO v2 Update whose commit PKO names only while the
 * run is the Stack's current or last one ({@link revisionsToRecord}): the revision the Stack named
 * for it (raw, as PKO wrote it). Read back by every replica, for the Update's whole life.
 */
export const RUN_COMMIT_ANNOTATION = 'notification.pko.dev/commit';
/**
 * Written with {@link RUN_COMMIT_ANNOTATION}: the Update's `metadata.resourceVersion` just before
 * that write (PKO's last one). The write itself changes the resourceVersion, which is the run's
 * place in the delivery order and how the ledger tells a folded (done) run from a new one
 * (docs/delivery.md, "Order", "The ledger"): a process started later takes the run as observed at
 * this value, as it would have without the annotation ({@link updateObservedAt}).
 */
export const RUN_OBSERVED_ANNOTATION = 'notification.pko.dev/observed-resource-version';
/** Longest {@link RUN_COMMIT_ANNOTATION} value read; a longer one is ignored (anyone may write it). */
const MAX_ANNOTATED_REVISION = 256;

/** The revision in an Update's {@link RUN_COMMIT_ANNOTATION}, if usable. */
export function annotatedRevision(u: Update): string | undefined {
  const v = u.metadata.annotations?.[RUN_COMMIT_ANNOTATION];
  return v !== undefined && v !== '' && v.length <= MAX_ANNOTATED_REVISION ? v : undefined;
}

/**
 * The resourceVersion at which an Update counts as observed: its own, or the smaller
 * {@link RUN_OBSERVED_ANNOTATION} when set (a decimal etcd revision; anything else is ignored).
 */
export function updateObservedAt(u: Update): string | undefined {
  const own = u.metadata.resourceVersion;
  const before = u.metadata.annotations?.[RUN_OBSERVED_ANNOTATION];
  if (before === undefined || !/^[1-9][0-9]{0,19}$/.test(before)) return own;
  if (own === undefined || !/^[0-9]+$/.test(own)) return before;
  return BigInt(before) < BigInt(own) ? before : own;
}

/** The revision PKO writes into an Update's `spec.message` (`New commit detected: "<rev>"`), if any. */
export function revisionFromUpdateMessage(message: string | undefined): string | undefined {
  return message === undefined ? undefined : /New commit detected: "([^"]+)"/.exec(message)?.[1];
}

/**
 * Whether `stack`, as read, predates its run `u` and so cannot name the run's commit yet: PKO v2
 * saves `status.currentUpdate` {name, commit} and only then creates the Update (stack
 * controller, "Step 5"), but the Stack and Update informers watch separately, so an Update can be
 * seen before the Stack version that names it. True when all of these hold: `u` is owned by
 * `stack` (ownerReference uid); the Stack names it neither in `currentUpdate` nor in `lastUpdate`;
 * nothing else names its commit (`New commit detected: "<rev>"` in `spec.message`,
 * {@link RUN_COMMIT_ANNOTATION}); and both resourceVersions are decimals with the Stack's the
 * smaller. A run's events derived then would go out without a commit (no commit status, `-` in
 * messages) although PKO recorded one; the caller waits for the Stack's next version (bounded:
 * src/alert/router.ts). Pure.
 */
export function stackPredatesRun(stack: Stack, u: Update): boolean {
  const name = u.metadata.name;
  const uid = stack.metadata.uid;
  if (name === undefined || uid === undefined) return false;
  if (!u.metadata.ownerReferences?.some((r) => r.kind === 'Stack' && r.uid === uid)) return false;
  const status = stack.status;
  if (status?.currentUpdate?.name === name || status?.lastUpdate?.name === name) return false;
  if (revisionFromUpdateMessage(u.spec?.message) !== undefined || annotatedRevision(u) !== undefined)
    return false;
  const decimal = /^[1-9][0-9]{0,19}$/;
  const s = stack.metadata.resourceVersion;
  const r = u.metadata.resourceVersion;
  if (s === undefined || r === undefined || !decimal.test(s) || !decimal.test(r)) return false;
  return BigInt(s) < BigInt(r);
}

export interface DeriveContext {
  /** `reportingController` of every event, e.g. `pko-notification-controller`. */
  reportingController: string;
  /** Repo URL of a Flux GitRepository referenced by a Stack, when known. */
  fluxRepositoryURL?: (namespace: string, name: string) => string | undefined;
  /** Pull request number for a Stack when known (preview Stacks created for a pull request). */
  pullRequest?: (namespace: string, stackName: string) => number | string | undefined;
  /**
   * PKO v1: the CLI error text last seen for a failing commit of the Stack with this uid
   * (`V1FailureTexts` in src/source/runs.ts), used when the Stack's current status no longer
   * shows it.
   */
  v1FailureText?: (stackUid: string, commit: string) => string | undefined;
  /**
   * PKO v2: the commit the Stack with this uid named for Update `updateName` when it was its
   * current or last run (`RunCommits` in src/source/runs.ts), used when the Stack has moved on.
   */
  updateCommit?: (stackUid: string, updateName: string) => string | undefined;
  /**
   * PKO v2: whether the controller has seen Update `updateName` of the Stack with this uid
   * (`SeenUpdates` in src/source/runs.ts). The Stack's `lastUpdate` yields no event for an Update
   * that was seen and is gone: its run was derived from the Update itself (case N20).
   */
  updateSeen?: (stackUid: string, updateName: string) => boolean;
  /**
   * PKO v2: the `lastUpdate` fallback is held for this Update name (the router found it still
   * exists with an API read; its informer has not delivered it yet): no fallback event, since
   * the Update itself decides whether its run is new (a retry repeating its result is not).
   */
  fallbackHeld?: (stackUid: string, updateName: string) => boolean;
  /**
   * PKO v2: a Stack `Reconciling=True` for at least `afterMs` (since the condition's
   * `lastTransitionTime`) with no run in progress is stuck at `nowMs` (`StackStalled`, reason
   * `NoProgress`; see {@link stuckSince}). Absent: no such event (the rest stays clock-free).
   */
  stuck?: { nowMs: number; afterMs: number };
}

/**
 * When a PKO v2 Stack started waiting with no run in progress, ms since the epoch, or undefined
 * when it is not waiting so: `Reconciling=True` (its `lastTransitionTime`), not `Stalled`, not a
 * PKO v1 Stack (whose `lastUpdate` has no `name`: v1 shows no Update to tell a run by), not
 * waiting out a retry backoff (`RetryingAfterFailure`), and no
 * current run — `status.currentUpdate` empty, or naming an Update that does not exist
 * (`updateExists`), e.g. after a restart of this controller PKO #1292's wedge on a missing
 * Update that was never seen (the seen case is `UpdateMissing`).
 */
export function stuckSince(
  stack: Stack,
  updateExists: (namespace: string, name: string) => boolean,
): number | undefined {
  const status = stack.status ?? {};
  const conds = status.conditions;
  const reconciling = condition(conds, 'Reconciling');
  if (reconciling?.status !== 'True' || condition(conds, 'Stalled')?.status === 'True') return undefined;
  // Waiting out the backoff after a failed run is PKO's retry, reported by the run's Failed.
  if (reconciling.reason === 'RetryingAfterFailure') return undefined;
  const last = status.lastUpdate;
  if (last !== undefined && (last.name === undefined || last.name === '') && last.state !== undefined)
    return undefined;
  const current = status.currentUpdate?.name;
  if (current !== undefined && current !== '' && updateExists(stack.metadata.namespace ?? '', current))
    return undefined;
  const since = Date.parse(reconciling.lastTransitionTime ?? '');
  return Number.isNaN(since) ? undefined : since;
}

const STACK_API_VERSION = `${STACK_GROUP}/${STACK_VERSION}`;
const UPDATE_API_VERSION = `${UPDATE_GROUP}/${UPDATE_VERSION}`;
const NO_TIME = '1970-01-01T00:00:00Z';

const RUN_TYPES = { preview: 'Preview', up: 'Update', destroy: 'Destroy', refresh: 'Refresh' } as const;
type RunType = keyof typeof RUN_TYPES;
const PHASES = { started: 'Started', succeeded: 'Succeeded', failed: 'Failed' } as const;
type Phase = keyof typeof PHASES;
/** `Failed` condition reasons (and older PKO's `Complete` reason) that mean "aborted, not failed". */
const ABORT_REASONS: ReadonlySet<string> = new Set(['Aborted', 'Canceled']);

function isRunType(t: string | undefined): t is RunType {
  return t !== undefined && Object.hasOwn(RUN_TYPES, t);
}

function reasonOf(type: RunType, phase: Phase): EventReason {
  return `${RUN_TYPES[type]}${PHASES[phase]}`;
}

function condition(conds: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conds?.find((c) => c.type === type);
}

/** First candidate that is a usable RFC 3339 time (Date values are converted), else {@link NO_TIME}. */
function timeOf(...candidates: (string | Date | undefined)[]): string {
  for (const c of candidates) {
    if (c instanceof Date) {
      if (!Number.isNaN(c.getTime())) return c.toISOString();
    } else if (c !== undefined && c !== '') {
      return c;
    }
  }
  return NO_TIME;
}

function stackKey(uid: string | undefined, namespace: string, name: string): string {
  return uid !== undefined && uid !== '' ? uid : `${namespace}/${name}`;
}

function stackInvolved(stack: Stack): InvolvedObject {
  return {
    apiVersion: stack.apiVersion ?? STACK_API_VERSION,
    kind: 'Stack',
    namespace: stack.metadata.namespace ?? '',
    name: stack.metadata.name ?? '',
    uid: stack.metadata.uid ?? '',
  };
}

/** "acme/app/dev" (Pulumi stack name) or "namespace/name" of the Stack object. */
function stackLabel(stack: Stack | undefined, fallback: string): string {
  return stack?.spec?.stack ?? fallback;
}

function put(meta: Record<string, string>, key: string, value: string | number | null | undefined): void {
  if (value !== undefined && value !== null && value !== '') meta[key] = String(value);
}

/** Metadata that comes from the Stack's spec and the run's revision. */
function sourceMetadata(
  meta: Record<string, string>,
  stack: Stack | undefined,
  rawRevision: string | undefined,
  ctx: DeriveContext,
): void {
  const parsed = parseRevision(rawRevision);
  put(meta, 'revision', parsed.revision);
  put(meta, 'commit', parsed.commit);
  if (!stack) return;
  const spec = stack.spec ?? {};
  const namespace = stack.metadata.namespace ?? '';
  let repository = spec.projectRepo;
  const sourceRef = spec.fluxSource?.sourceRef;
  if (repository === undefined && sourceRef?.kind === 'GitRepository' && sourceRef.name !== undefined) {
    repository = ctx.fluxRepositoryURL?.(namespace, sourceRef.name);
  }
  put(meta, 'repository', repository);
  const branch = spec.branch?.replace(/^refs\/heads\//, '') ?? parsed.branch;
  put(meta, 'branch', branch);
  put(meta, 'stack', spec.stack);
  const name = stack.metadata.name;
  if (name !== undefined) put(meta, 'pullRequest', ctx.pullRequest?.(namespace, name));
}

/** Metadata of a run recorded in `status.lastUpdate` (v2 shape). */
function lastUpdateMetadata(meta: Record<string, string>, last: StackLastUpdate): void {
  put(meta, 'updateName', last.name);
  put(meta, 'updateType', last.type);
  put(meta, 'permalink', last.permalink);
  put(meta, 'failures', last.failures);
}

/** An empty `stderr:` block at the end of the CLI output (every PKO v1 failure has one: case N19). */
const EMPTY_STDERR = /\n[ \t]*stderr:\s*$/;

function runMessage(type: RunType, label: string, phase: Phase, raw: string | undefined): string {
  const head = `${RUN_TYPES[type]} of stack ${label} ${phase}`;
  const detail = raw?.replace(EMPTY_STDERR, '');
  if (detail === undefined || detail.trim() === '') return cleanMessage(head);
  return cleanMessage(detail.includes('\n') ? `${head}:\n${detail}` : `${head}: ${detail}`);
}

function severityOf(reason: EventReason): Severity {
  return reason.endsWith('Failed') || reason === 'StackStalled' ? 'error' : 'info';
}

interface Subject {
  involvedObject: InvolvedObject;
  labels: Record<string, string>;
  key: string;
}

function makeEvent(
  subject: Subject,
  ctx: DeriveContext,
  fields: { run: RunRef; phase: EventPhase; reason: EventReason; message: string; timestamp: string },
  metadata: Record<string, string>,
  /** Why there is no commit when no revision is known at all (default: parseRevision's reason). */
  unrecorded?: string,
): NotificationEvent {
  const identity = { stack: subject.key, run: fields.run, phase: fields.phase };
  const noCommit =
    metadata.commit === undefined
      ? metadata.revision === undefined && unrecorded !== undefined
        ? unrecorded
        : parseRevision(metadata.revision).reason
      : undefined;
  return {
    identity,
    id: eventId(identity),
    involvedObject: { ...subject.involvedObject },
    labels: { ...subject.labels },
    severity: severityOf(fields.reason),
    reason: fields.reason,
    message: fields.message,
    timestamp: fields.timestamp,
    metadata,
    reportingController: ctx.reportingController,
    ...(noCommit !== undefined ? { noCommitReason: noCommit } : {}),
  };
}

/**
 * Events implied by an `auto.pulumi.com/v1alpha1` Update's current status (see the file header).
 *
 * @param update the Update as read from the API server.
 * @param stack the Update's Stack when at hand; ignored if the Update's Stack ownerReference names
 *   another uid (a Stack re-created under the same name).
 * @returns `[]` (unknown type, unnamed, aborted), `[Started]`, or `[Started, Succeeded|Failed]`.
 */
export function eventsFromUpdate(
  update: Update,
  stack: Stack | undefined,
  ctx: DeriveContext,
): NotificationEvent[] {
  const type = update.spec?.type;
  const updateName = update.metadata.name;
  if (!isRunType(type) || updateName === undefined || updateName === '') return [];
  const namespace = update.metadata.namespace ?? '';

  const owner = update.metadata.ownerReferences?.find(
    (r) => r.kind === 'Stack' && r.apiVersion.startsWith(`${STACK_GROUP}/`),
  );
  const theStack =
    stack !== undefined && (owner === undefined || stack.metadata.uid === owner.uid) ? stack : undefined;
  let subject: Subject;
  if (theStack) {
    const involvedObject = stackInvolved(theStack);
    subject = {
      involvedObject,
      labels: theStack.metadata.labels ?? {},
      key: stackKey(involvedObject.uid, involvedObject.namespace, involvedObject.name),
    };
  } else if (owner) {
    subject = {
      involvedObject: {
        apiVersion: owner.apiVersion,
        kind: 'Stack',
        namespace,
        name: owner.name,
        uid: owner.uid,
      },
      labels: {},
      key: stackKey(owner.uid, namespace, owner.name),
    };
  } else {
    const uid = update.metadata.uid ?? '';
    subject = {
      involvedObject: {
        apiVersion: update.apiVersion ?? UPDATE_API_VERSION,
        kind: 'Update',
        namespace,
        name: updateName,
        uid,
      },
      labels: update.metadata.labels ?? {},
      key: stackKey(uid, namespace, updateName),
    };
  }

  const status = update.status ?? {};
  const conds = status.conditions;
  const complete = condition(conds, 'Complete');
  const failed = condition(conds, 'Failed');
  const generation = update.metadata.generation;
  const done =
    complete?.status === 'True' && (generation === undefined || generation === status.observedGeneration);
  if (done) {
    const aborted =
      (failed?.status === 'True' && ABORT_REASONS.has(failed.reason)) || complete.reason === 'Aborted';
    if (aborted) return [];
  }

  // Run facts the Stack recorded under this Update's name.
  const current = theStack?.status?.currentUpdate;
  const last = theStack?.status?.lastUpdate;
  const lastIsThis = last !== undefined && last.name === updateName;
  // The Stack names this run's commit only while the run is its current or last one; later
  // (the next run already started) PKO's Update message still says `New commit detected: "<rev>"`.
  const revision =
    current?.name === updateName
      ? current.commit
      : lastIsThis
        ? last.lastAttemptedCommit
        : (revisionFromUpdateMessage(update.spec?.message) ??
          annotatedRevision(update) ??
          (theStack?.metadata.uid !== undefined
            ? ctx.updateCommit?.(theStack.metadata.uid, updateName)
            : undefined));

  const metadata: Record<string, string> = {};
  sourceMetadata(metadata, theStack, revision, ctx);
  // No commit for a run whose Update message does not name one ("Initial stack update", "New
  // stack generation: N", "Sync request: …", a retry or resync of such a run): PKO v2 names it only
  // while the run is the Stack's current or last one. Say so instead of "no revision recorded".
  const unrecorded =
    revision === undefined && theStack !== undefined
      ? `PKO names the commit of run ${updateName} (${JSON.stringify(update.spec?.message ?? '')}) only while it is the Stack's current or last run, and this controller did not see it then`
      : undefined;
  put(metadata, 'stack', theStack?.spec?.stack ?? update.spec?.stackName);
  put(metadata, 'updateName', updateName);
  put(metadata, 'updateType', type);
  put(metadata, 'permalink', status.permalink ?? (lastIsThis ? last.permalink : undefined));
  if (lastIsThis) put(metadata, 'failures', last.failures);

  const label = stackLabel(theStack, update.spec?.stackName ?? `${namespace}/${subject.involvedObject.name}`);
  const created = update.metadata.creationTimestamp;
  const events = [
    makeEvent(
      subject,
      ctx,
      {
        run: { kind: 'update', name: updateName },
        phase: { kind: 'started' },
        reason: reasonOf(type, 'started'),
        message: runMessage(type, label, 'started', update.spec?.message),
        timestamp: timeOf(created, status.startTime, condition(conds, 'Progressing')?.lastTransitionTime),
      },
      { ...metadata },
      unrecorded,
    ),
  ];
  if (done && (failed?.status === 'True' || failed?.status === 'False')) {
    const phase: Phase = failed.status === 'True' ? 'failed' : 'succeeded';
    events.push(
      makeEvent(
        subject,
        ctx,
        {
          run: { kind: 'update', name: updateName },
          phase: { kind: phase },
          reason: reasonOf(type, phase),
          message: runMessage(
            type,
            label,
            phase,
            unquoteMessage(status.message ?? (lastIsThis ? last.message : undefined)),
          ),
          timestamp: timeOf(status.endTime, complete.lastTransitionTime, created),
        },
        metadata,
        unrecorded,
      ),
    );
  }
  return events;
}

/**
 * Events implied by a `pulumi.com/v1` Stack's current status (see the file header): the
 * `lastUpdate` fallback (v2: only when its Update is gone; v1: always), a `currentUpdate`
 * Started (only when its Update is not known) and `StackStalled`.
 *
 * @param opts.updateExists whether an Update `namespace/name` is currently known (informer cache).
 */
export function eventsFromStack(
  stack: Stack,
  ctx: DeriveContext,
  opts: { updateExists: (namespace: string, name: string) => boolean },
): NotificationEvent[] {
  const namespace = stack.metadata.namespace ?? '';
  const name = stack.metadata.name ?? '';
  const involvedObject = stackInvolved(stack);
  const subject: Subject = {
    involvedObject,
    labels: stack.metadata.labels ?? {},
    key: stackKey(involvedObject.uid, namespace, name),
  };
  const status = stack.status ?? {};
  const conds = status.conditions;
  const label = stackLabel(stack, `${namespace}/${name}`);
  const events: NotificationEvent[] = [];

  const last = status.lastUpdate;
  const phase: Phase | undefined =
    last?.state === 'succeeded' ? 'succeeded' : last?.state === 'failed' ? 'failed' : undefined;
  if (last && phase) {
    const metadata: Record<string, string> = {};
    sourceMetadata(metadata, stack, last.lastAttemptedCommit, ctx);
    const timestamp = timeOf(
      last.lastResyncTime,
      condition(conds, 'Ready')?.lastTransitionTime,
      stack.metadata.creationTimestamp,
    );
    if (last.name !== undefined && last.name !== '') {
      // PKO v2: the Update-derived event has this id; this is the fallback once the Update is gone.
      // An Update seen earlier was derived while it existed (a resync continuation that repeated
      // its run's result yielded nothing then, and must not come back now: case N20).
      if (isRunType(last.type) && lastUpdateFallback(stack, ctx, opts) !== undefined) {
        lastUpdateMetadata(metadata, last);
        events.push(
          makeEvent(
            subject,
            ctx,
            {
              run: { kind: 'update', name: last.name },
              phase: { kind: phase },
              reason: reasonOf(last.type, phase),
              message: runMessage(last.type, label, phase, unquoteMessage(last.message)),
              timestamp,
            },
            metadata,
          ),
        );
      }
    } else if (last.type === undefined) {
      // PKO v1: no Update objects. A run is its commit and outcome (see v1Outcome): retries of a
      // failing commit and resyncs of a deployed one are the same event again, which the ledger
      // treats as done; a branch reset that ran nothing is no event. lastResyncTime orders the
      // events (RunRef `at`) but is not part of their id.
      const outcome = v1Outcome(stack);
      if (outcome) {
        const type: RunType = stack.spec?.preview === true ? 'preview' : 'up';
        const when =
          last.lastResyncTime ?? `g${String(status.observedGeneration ?? stack.metadata.generation ?? 0)}`;
        const v1Metadata: Record<string, string> = {};
        sourceMetadata(v1Metadata, stack, outcome.commit, ctx);
        put(v1Metadata, 'updateType', type);
        put(v1Metadata, 'permalink', last.permalink);
        const detail =
          outcome.phase === 'failed'
            ? (v1FailureText(conds) ?? ctx.v1FailureText?.(stack.metadata.uid ?? '', outcome.commit))
            : undefined;
        events.push(
          makeEvent(
            subject,
            ctx,
            {
              run: { kind: 'v1', commit: outcome.commit, at: when },
              phase: { kind: outcome.phase },
              reason: reasonOf(type, outcome.phase),
              message: runMessage(type, label, outcome.phase, detail),
              timestamp,
            },
            v1Metadata,
          ),
        );
      }
    }
  }

  const current = status.currentUpdate;
  if (
    current?.name !== undefined &&
    current.name !== '' &&
    !opts.updateExists(namespace, current.name) &&
    // Seen and gone: its Started was derived from it (a Stack wedged on a missing Update, PKO #1292).
    ctx.updateSeen?.(stack.metadata.uid ?? '', current.name) !== true &&
    !currentContinuesLast(stack)
  ) {
    // Same choice as PKO's Stack controller when it creates the Update.
    const type: RunType =
      stack.metadata.deletionTimestamp !== undefined
        ? 'destroy'
        : stack.spec?.preview === true
          ? 'preview'
          : 'up';
    const metadata: Record<string, string> = {};
    sourceMetadata(metadata, stack, current.commit, ctx);
    put(metadata, 'updateName', current.name);
    put(metadata, 'updateType', type);
    events.push(
      makeEvent(
        subject,
        ctx,
        {
          run: { kind: 'update', name: current.name },
          phase: { kind: 'started' },
          reason: reasonOf(type, 'started'),
          message: runMessage(type, label, 'started', undefined),
          timestamp: timeOf(
            condition(conds, 'Reconciling')?.lastTransitionTime,
            stack.metadata.creationTimestamp,
          ),
        },
        metadata,
      ),
    );
  }

  // A Stack wedged on a missing Update (pulumi-kubernetes-operator#1292): `currentUpdate` names
  // an Update the controller saw and that is gone. PKO starts no other run while it does, and
  // sets no Stalled condition: one StackStalled (reason UpdateMissing) per wedge — its id names
  // the Update and generation, so it is not repeated, and it is no longer implied (cleared) once
  // the Stack moves on (case N20).
  if (
    current?.name !== undefined &&
    current.name !== '' &&
    !opts.updateExists(namespace, current.name) &&
    ctx.updateSeen?.(stack.metadata.uid ?? '', current.name) === true
  ) {
    const metadata: Record<string, string> = {};
    sourceMetadata(metadata, stack, undefined, ctx);
    put(metadata, 'updateName', current.name);
    events.push(
      makeEvent(
        subject,
        ctx,
        {
          run: { kind: 'update', name: current.name },
          phase: {
            kind: 'stalled',
            reason: 'UpdateMissing',
            generation: status.observedGeneration ?? stack.metadata.generation ?? 0,
          },
          reason: 'StackStalled',
          message: cleanMessage(
            `Stack ${label} stalled (UpdateMissing): status.currentUpdate names Update ${current.name}, which no longer exists; PKO starts no other run while it does (pulumi-kubernetes-operator#1292)`,
          ),
          timestamp: timeOf(
            condition(conds, 'Reconciling')?.lastTransitionTime,
            stack.metadata.creationTimestamp,
          ),
        },
        metadata,
      ),
    );
  }

  // A Stack reconciling with no run for longer than the threshold (PKO waiting on a workspace
  // that never gets ready, or wedged on a missing Update it was never seen to create): one
  // StackStalled (reason NoProgress) per wait — its id names the current run (or none) and the
  // generation — no longer implied once the Stack moves.
  const wedgedOnSeen = events.some(
    (e) => e.identity.phase.kind === 'stalled' && e.identity.phase.reason === 'UpdateMissing',
  );
  const since = ctx.stuck !== undefined && !wedgedOnSeen ? stuckSince(stack, opts.updateExists) : undefined;
  if (ctx.stuck !== undefined && since !== undefined && ctx.stuck.nowMs - since >= ctx.stuck.afterMs) {
    const metadata: Record<string, string> = {};
    sourceMetadata(metadata, stack, undefined, ctx);
    const name = current?.name;
    if (name !== undefined && name !== '') put(metadata, 'updateName', name);
    const minutes = Math.floor((ctx.stuck.nowMs - since) / 60_000);
    const waiting =
      name !== undefined && name !== ''
        ? `status.currentUpdate names Update ${name}, which does not exist`
        : 'no run has started';
    events.push(
      makeEvent(
        subject,
        ctx,
        {
          run: name !== undefined && name !== '' ? { kind: 'update', name } : { kind: 'none' },
          phase: {
            kind: 'stalled',
            reason: 'NoProgress',
            generation: status.observedGeneration ?? stack.metadata.generation ?? 0,
          },
          reason: 'StackStalled',
          message: cleanMessage(
            `Stack ${label} stalled (NoProgress): Reconciling since ${new Date(since).toISOString()} (${String(minutes)} min) and ${waiting}`,
          ),
          // When it became stuck (the threshold reached), not when the wait began: an Alert
          // created during the wait still gets it (src/delivery/dispatcher.ts beforeAlert).
          timestamp: new Date(since + ctx.stuck.afterMs).toISOString(),
        },
        metadata,
      ),
    );
  }

  const stalled = condition(conds, 'Stalled');
  if (stalled?.status === 'True') {
    const metadata: Record<string, string> = {};
    // Only an UpdateFailed stall is about the last run's commit; other stalls (SourceUnavailable,
    // SpecInvalid, …) must not mark a commit that may well have succeeded.
    const aboutLastRun = stalled.reason === 'UpdateFailed' && last !== undefined;
    sourceMetadata(metadata, stack, aboutLastRun ? last.lastAttemptedCommit : undefined, ctx);
    if (aboutLastRun) lastUpdateMetadata(metadata, last);
    const generation =
      status.observedGeneration ?? stalled.observedGeneration ?? stack.metadata.generation ?? 0;
    const detail = stalled.message === '' ? '' : `: ${stalled.message}`;
    events.push(
      makeEvent(
        subject,
        ctx,
        {
          run:
            last?.name !== undefined && last.name !== ''
              ? { kind: 'update', name: last.name }
              : { kind: 'none' },
          phase: { kind: 'stalled', reason: stalled.reason, generation },
          reason: 'StackStalled',
          message: cleanMessage(`Stack ${label} stalled (${stalled.reason})${detail}`),
          timestamp: timeOf(
            stalled.lastTransitionTime,
            last?.lastResyncTime,
            stack.metadata.creationTimestamp,
          ),
        },
        metadata,
      ),
    );
  }
  return events;
}

/** `succeeded`, `failed` or `aborted` once an Update is done, else undefined (as {@link eventsFromUpdate} reads it). */
function outcomeOf(u: Update): 'succeeded' | 'failed' | 'aborted' | undefined {
  const conds = u.status?.conditions;
  const complete = condition(conds, 'Complete');
  const generation = u.metadata.generation;
  if (
    complete?.status !== 'True' ||
    (generation !== undefined && generation !== u.status?.observedGeneration)
  )
    return undefined;
  const failed = condition(conds, 'Failed');
  if ((failed?.status === 'True' && ABORT_REASONS.has(failed.reason)) || complete.reason === 'Aborted')
    return 'aborted';
  if (failed?.status === 'True') return 'failed';
  if (failed?.status === 'False') return 'succeeded';
  return undefined;
}

/**
 * The revisions PKO v2 still records somewhere durable for the Stack's Updates (`sorted`: the
 * Stack's Updates in creation order, {@link compareUpdates}), by Update name — also for runs the
 * Stack no longer names:
 * - the Stack's `currentUpdate.commit` / `lastUpdate.lastAttemptedCommit` for its current and last
 *   run, and an Update's `spec.message` `New commit detected: "<rev>"`;
 * - a retry or resync (`Backoff time elapsed` after a failed run, `Resync time elapsed` after a
 *   succeeded one) runs the same commit as the Update before it: PKO's stack controller starts one
 *   only when the last run's `lastAttemptedCommit` (failed) or `lastSuccessfulCommit` (succeeded)
 *   is the source's current commit. Known on either side, the revision holds for both;
 * - when the last run failed, `lastUpdate.lastSuccessfulCommit` is the commit of the newest
 *   succeeded Update before it (PKO carries it over from the last success; Updates disappear
 *   oldest first, 24 h after they finish, so the newest succeeded one still listed is that run).
 * Only Updates owned by this Stack (ownerReference uid) take part. A run that none of these
 * reaches (a first run, "Initial stack update", followed by a run of a new commit; a run of a new
 * generation or sync request likewise) has no revision recorded by PKO once the Stack moved on.
 */
export function recordedRevisions(stack: Stack, sorted: readonly Update[]): Map<string, string> {
  const uid = stack.metadata.uid;
  const own = sorted.filter((u) =>
    u.metadata.ownerReferences?.some((r) => r.kind === 'Stack' && r.uid === uid),
  );
  const cur = stack.status?.currentUpdate;
  const last = stack.status?.lastUpdate;
  const revs = new Map<string, string>();
  const nameOf = (u: Update): string => u.metadata.name ?? '';
  for (const u of own) {
    const name = nameOf(u);
    const r =
      cur?.name === name && cur.commit
        ? cur.commit
        : last?.name === name && last.lastAttemptedCommit
          ? last.lastAttemptedCommit
          : (revisionFromUpdateMessage(u.spec?.message) ?? annotatedRevision(u));
    if (r !== undefined && r !== '') revs.set(name, r);
  }
  if (last?.state === 'failed' && last.lastSuccessfulCommit && last.name) {
    const k = own.findIndex((u) => nameOf(u) === last.name);
    for (let j = k - 1; j >= 0; j--) {
      const u = own[j];
      if (u === undefined || outcomeOf(u) !== 'succeeded') continue;
      if (!revs.has(nameOf(u))) revs.set(nameOf(u), last.lastSuccessfulCommit);
      break;
    }
  }
  // Pairs (previous, continuation) that PKO ran on the same commit.
  const links: [string, string][] = [];
  for (let i = 1; i < own.length; i++) {
    const prev = own[i - 1];
    const u = own[i];
    if (prev === undefined || u === undefined) continue;
    const m = u.spec?.message ?? '';
    const outcome = outcomeOf(prev);
    if (
      (m.startsWith('Backoff time elapsed') && outcome === 'failed') ||
      (m.startsWith('Resync time elapsed') && outcome === 'succeeded')
    )
      links.push([nameOf(prev), nameOf(u)]);
  }
  for (let changed = true; changed;) {
    changed = false;
    for (const [a, b] of links) {
      const ra = revs.get(a);
      const rb = revs.get(b);
      if (ra !== undefined && rb === undefined) revs.set(b, ra);
      else if (rb !== undefined && ra === undefined) revs.set(a, rb);
      else continue;
      changed = true;
    }
  }
  return revs;
}

/**
 * The finished Updates of `stack` whose revision the leader should record in
 * {@link RUN_COMMIT_ANNOTATION}: owned by the Stack, done with a result (succeeded or failed —
 * an aborted run yields no event), not annotated yet, with a `spec.message` that does not name the
 * commit, and whose revision is known now — from the Stack (current or last run), from what this
 * process remembers (`ctx.updateCommit`), or from {@link recordedRevisions}. Running Updates are
 * never chosen: PKO still writes their status.
 */
export function revisionsToRecord(
  stack: Stack,
  updates: readonly Update[],
  ctx: DeriveContext,
): { name: string; revision: string; resourceVersion: string }[] {
  const uid = stack.metadata.uid;
  if (uid === undefined || uid === '') return [];
  const sorted = updates.filter((u) => (u.metadata.name ?? '') !== '').sort(compareUpdates);
  const recorded = recordedRevisions(stack, sorted);
  const out: { name: string; revision: string; resourceVersion: string }[] = [];
  for (const u of sorted) {
    const name = u.metadata.name ?? '';
    const outcome = outcomeOf(u);
    if (outcome !== 'succeeded' && outcome !== 'failed') continue;
    if (!u.metadata.ownerReferences?.some((r) => r.kind === 'Stack' && r.uid === uid)) continue;
    if (annotatedRevision(u) !== undefined || revisionFromUpdateMessage(u.spec?.message) !== undefined)
      continue;
    const revision = ctx.updateCommit?.(uid, name) ?? recorded.get(name);
    const resourceVersion = u.metadata.resourceVersion ?? '';
    if (
      revision !== undefined &&
      revision !== '' &&
      revision.length <= MAX_ANNOTATED_REVISION &&
      resourceVersion !== ''
    )
      out.push({ name, revision, resourceVersion });
  }
  return out;
}

/**
 * The Update named by a PKO v2 Stack's finished `lastUpdate` when the event of its run must come
 * from the Stack (the fallback in {@link eventsFromStack}): the Update is not in `updateExists`,
 * was never seen by this process, and its fallback is not held (`ctx.fallbackHeld`). Otherwise
 * undefined. The router reads the Update once from the API server before trusting this: an
 * Update informer behind the Stack informer looks the same as an Update that is gone.
 */
export function lastUpdateFallback(
  stack: Stack,
  ctx: DeriveContext,
  opts: { updateExists: (namespace: string, name: string) => boolean },
): string | undefined {
  const last = stack.status?.lastUpdate;
  if (last === undefined) return undefined;
  const name = last.name;
  if (name === undefined || name === '' || !isRunType(last.type)) return undefined;
  if (last.state !== 'succeeded' && last.state !== 'failed') return undefined;
  const uid = stack.metadata.uid ?? '';
  if (opts.updateExists(stack.metadata.namespace ?? '', name)) return undefined;
  if (ctx.updateSeen?.(uid, name) === true || ctx.fallbackHeld?.(uid, name) === true) return undefined;
  return name;
}

/**
 * Every event a Stack and its Updates imply, as users count runs (src/source/runs.ts; README,
 * "Event model: PKO v1 and v2"):
 * - each Update that starts a run yields its Started and its result ({@link eventsFromUpdate});
 * - an Update PKO started only to retry or resync the previous one (same commit and spec) yields
 *   no Started, and its result only when it differs from the previous Update's (a retry that
 *   succeeds, a resync that fails); a repeated result refreshes the message of the result already
 *   reported for that streak (so it carries the latest error text) and is not a new event;
 * - then the Stack's own events ({@link eventsFromStack}): the `lastUpdate` fallback, the
 *   `currentUpdate` Started (not for a retry or resync), PKO v1 results, `StackStalled`.
 * Events with the same id are given once (the Update-derived one wins).
 *
 * @param updates the Stack's Updates (any order; others are ignored by name only if passed).
 */
export function eventsForStack(
  stack: Stack,
  updates: readonly Update[],
  ctx: DeriveContext,
): NotificationEvent[] {
  const byId = new Map<string, NotificationEvent>();
  const sorted = updates
    .filter((u) => u.metadata.name !== undefined && u.metadata.name !== '')
    .slice()
    .sort(compareUpdates);
  // A run the Stack has moved past: the commit remembered from the Stack (ctx), else the one PKO
  // still records elsewhere (recordedRevisions).
  const recorded = recordedRevisions(stack, sorted);
  const stackUid = stack.metadata.uid;
  const runCtx: DeriveContext = {
    ...ctx,
    updateCommit: (uid, name) =>
      ctx.updateCommit?.(uid, name) ?? (uid === stackUid ? recorded.get(name) : undefined),
  };
  let prev: Update | undefined;
  /** Outcome of the current run's latest finished attempt, and the result event reported for it. */
  let streak: { outcome: 'succeeded' | 'failed'; event: NotificationEvent | undefined } | undefined;
  for (const u of sorted) {
    const outcome = outcomeOf(u);
    const done = outcome === 'succeeded' || outcome === 'failed' ? outcome : undefined;
    // A retry after an aborted attempt whose run reported no result is that run's real attempt;
    // an Update of another type than the one before it starts a run of its own.
    const afterAbort = prev !== undefined && outcomeOf(prev) === 'aborted' && streak === undefined;
    const otherType = prev !== undefined && prev.spec?.type !== u.spec?.type;
    if (isContinuation(u) && !afterAbort && !otherType) {
      // A retry or resync of the previous Update. When that one is gone (TTL: 24 h after it
      // finished), the run was reported while it existed: nothing new here.
      const joined = prev !== undefined;
      for (const ev of joined ? eventsFromUpdate(u, stack, runCtx) : []) {
        if (ev.identity.phase.kind === 'started') continue;
        if (streak !== undefined && streak.outcome === done) {
          // The same result again: one event for the streak, carrying the latest message.
          if (streak.event) streak.event.message = ev.message;
          continue;
        }
        byId.set(ev.id, ev);
        if (done) streak = { outcome: done, event: ev };
      }
      if (!joined && done) streak = { outcome: done, event: undefined };
    } else {
      streak = undefined;
      for (const ev of eventsFromUpdate(u, stack, runCtx)) {
        byId.set(ev.id, ev);
        if (done && ev.identity.phase.kind !== 'started') streak = { outcome: done, event: ev };
      }
    }
    prev = u;
  }
  const known = new Set(sorted.map((u) => `${u.metadata.namespace ?? ''}/${u.metadata.name ?? ''}`));
  const updateExists = (namespace: string, name: string): boolean => known.has(`${namespace}/${name}`);
  for (const ev of eventsFromStack(stack, runCtx, { updateExists }))
    if (!byId.has(ev.id)) byId.set(ev.id, ev);
  return [...byId.values()];
}
