/**
 * Drift events from DriftDetection status (docs/drift.md, docs/events.md), level-based like every
 * other event: each selected Stack's entry keeps its last drift event (`lastEvent`), and the
 * router derives it again on every change, relist and restart; the ledger makes it go out once.
 *
 * - identity: the Stack's uid, run `{kind: 'drift', check: <check Stack name>}`, phase `failed`
 *   (DriftDetected, DriftCheckFailed) or `succeeded` (DriftResolved);
 * - involvedObject and labels: the checked Stack's;
 * - severity: `error` for DriftDetected and DriftCheckFailed, `info` for DriftResolved;
 * - metadata: `revision`/`commit` (the deployed commit checked: a forge Provider sets its commit
 *   status), `repository`, `branch`, `stack`, `driftDetection` (its name), `updateType: drift`;
 * - timestamp: when the check ended; message: the entry's (bounded, redacted by the controller):
 *   the drifted resources and their property lines. No `changes`: the check's change set mixes
 *   the refresh (what drifted) with the preview (what a run would change back); the message says
 *   which is which.
 */
import { eventId, type EventIdentity, type NotificationEvent } from '../api/event.ts';
import { STACK_GROUP, STACK_VERSION, type Stack } from '../api/pko.ts';
import type { DriftDetection, DriftEventRecord } from '../api/v1alpha1.ts';
import { parseRevision } from '../source/revision.ts';
import { cleanMessage } from '../text.ts';

/**
 * The drift events `detections` hold for `stack` (matched by uid), each with the
 * resourceVersion of the DriftDetection it was read from (the order delivery follows).
 */
export function driftEventsFor(
  stack: Stack,
  detections: Iterable<DriftDetection>,
  ctx: {
    reportingController: string;
    repository?: (stack: Stack) => string | undefined;
  },
): { event: NotificationEvent; observed?: number }[] {
  const uid = stack.metadata.uid ?? '';
  const out: { event: NotificationEvent; observed?: number }[] = [];
  for (const dd of detections) {
    if (dd.metadata.namespace !== stack.metadata.namespace) continue;
    for (const entry of dd.status?.stacks ?? []) {
      if (entry.uid !== uid || entry.lastEvent === undefined) continue;
      const event = driftEvent(stack, dd, entry.lastEvent, ctx);
      const rv = dd.metadata.resourceVersion;
      const observed = rv !== undefined && /^[1-9]\d{0,15}$/.test(rv) ? Number(rv) : undefined;
      out.push(observed !== undefined ? { event, observed } : { event });
    }
  }
  return out;
}

/** One drift event of `stack` from `rec` (see the module comment). */
export function driftEvent(
  stack: Stack,
  dd: DriftDetection,
  rec: DriftEventRecord,
  ctx: {
    reportingController: string;
    repository?: (stack: Stack) => string | undefined;
  },
): NotificationEvent {
  const identity: EventIdentity = {
    stack: stack.metadata.uid ?? `${stack.metadata.namespace ?? ''}/${stack.metadata.name ?? ''}`,
    run: { kind: 'drift', check: rec.check },
    phase: { kind: rec.reason === 'DriftResolved' ? 'succeeded' : 'failed' },
  };
  const metadata: Record<string, string> = {};
  const put = (k: string, v: string | null | undefined): void => {
    if (v !== undefined && v !== null && v !== '') metadata[k] = v;
  };
  const parsed = parseRevision(rec.commit);
  put('revision', parsed.revision);
  put('commit', parsed.commit);
  put('repository', stack.spec?.projectRepo ?? ctx.repository?.(stack));
  put('branch', stack.spec?.branch?.replace(/^refs\/heads\//, '') ?? parsed.branch);
  put('stack', stack.spec?.stack);
  put('driftDetection', dd.metadata.name);
  put('updateType', 'drift');
  const noCommit = metadata.commit === undefined ? (parsed.reason ?? undefined) : undefined;
  return {
    identity,
    id: eventId(identity),
    involvedObject: {
      apiVersion: stack.apiVersion ?? `${STACK_GROUP}/${STACK_VERSION}`,
      kind: 'Stack',
      namespace: stack.metadata.namespace ?? '',
      name: stack.metadata.name ?? '',
      uid: stack.metadata.uid ?? '',
    },
    labels: { ...stack.metadata.labels },
    severity: rec.reason === 'DriftResolved' ? 'info' : 'error',
    reason: rec.reason,
    message: cleanMessage(rec.message),
    timestamp: rec.time,
    metadata,
    reportingController: ctx.reportingController,
    ...(noCommit !== undefined ? { noCommitReason: noCommit } : {}),
  };
}
