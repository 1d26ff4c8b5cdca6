/**
 * Why an event is not sent: an ordered list of named pure checks, asked before anything is
 * rendered or sent (./deliver.ts). The first check that answers decides — `held` (nothing
 * recorded, tried again later) or a skip with its reason, recorded in the ledger and shown in the
 * Alert's `status.lastDelivery` (docs/delivery.md: `Suspended`, `BeforeAlert`, `NoCommit`, …). A
 * new rule is one entry here, in its place in the order.
 */
import type { NotificationEvent } from '../api/event.ts';
import { isGitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { DeliveryAlert, OfferedEvent } from './types.ts';

/** What the checks look at: the event as offered, and its Provider now. */
export interface SkipInput {
  offered: OfferedEvent;
  /** The lane's verdict at offer time: no entry existed and the run is older than the Alert. */
  beforeAlert: boolean;
  /** `namespace/name` of the Alert's Provider. */
  providerKey: string;
  /** Undefined while the Provider is missing or not Ready. */
  provider: ResolvedProvider | undefined;
}

/** A check's answer: hold the event, or skip it with a reason and a message for the user. */
export type SkipDecision = 'held' | { reason: string; message: string };

export interface SkipCheck {
  /** For logs and tests. */
  name: string;
  check(i: SkipInput): SkipDecision | undefined;
}

/** In order: the first that answers decides. */
export const SKIP_CHECKS: readonly SkipCheck[] = [
  {
    // A suspended Alert: its events move the ledger, so resuming does not replay them.
    name: 'offered-skip',
    check: (i) => i.offered.skip,
  },
  {
    // A new Alert does not replay history (case N16: decided by observation first, ./lanes.ts).
    name: 'before-alert',
    check: (i) =>
      i.beforeAlert
        ? {
            reason: 'BeforeAlert',
            message: `${i.offered.event.reason} of ${i.offered.event.timestamp} not sent: it happened before the Alert was created (a new Alert does not replay history)`,
          }
        : undefined,
  },
  {
    name: 'provider-not-ready',
    check: (i) => (i.provider === undefined ? 'held' : undefined),
  },
  {
    name: 'provider-suspended',
    check: (i) =>
      i.provider?.suspend ? { reason: 'Suspended', message: 'Provider is suspended' } : undefined,
  },
  {
    // Cases F03/F04: a commit status needs a real SHA. Explained once: the ledger then moves past it.
    name: 'no-commit',
    check: (i) => {
      const ev = i.offered.event;
      if (!i.provider || !isGitProviderType(i.provider.type) || ev.metadata.commit) return undefined;
      const why = ev.noCommitReason ?? 'the event has no git commit';
      return {
        reason: 'NoCommit',
        message: `not sent to ${i.provider.type} Provider ${i.providerKey}: ${why}`,
      };
    },
  },
];

/** The first answer of `checks` for `i`, or undefined: send it. */
export function skipDecision(
  i: SkipInput,
  checks: readonly SkipCheck[] = SKIP_CHECKS,
): SkipDecision | undefined {
  for (const c of checks) {
    const d = c.check(i);
    if (d !== undefined) return d;
  }
  return undefined;
}

/**
 * Whether an event happened before its Alert existed (a new Alert does not replay history), by
 * observation first (case N16): a run the controller first observed at a resourceVersion after
 * the Alert's ({@link DeliveryAlert.sinceRv}) is after it, whatever time PKO stamped on it — a
 * PKO clock minutes behind must not make the first run after a new Alert "older" than it. Only
 * when observation cannot tell (no resourceVersion, or one before the Alert's first-seen one,
 * which may be later than its creation after a restart) does the event's time decide, against
 * the Alert's `creationTimestamp`.
 */
export function beforeAlert(
  ev: NotificationEvent,
  observed: number | undefined,
  alert: Pick<DeliveryAlert, 'createdMs' | 'sinceRv'>,
): boolean {
  if (observed !== undefined && alert.sinceRv !== undefined && observed > alert.sinceRv) return false;
  return (Date.parse(ev.timestamp) || 0) < alert.createdMs;
}

/**
 * A run's Started still being retried when the run's result is waiting in the lane: only the
 * result is sent (`Superseded`). Asked before every retry (./deliver.ts).
 */
export function superseded(
  ev: NotificationEvent,
  runKey: string,
  waiting: Iterable<{ runKey: string; offered: OfferedEvent }>,
): SkipDecision | undefined {
  if (ev.identity.phase.kind !== 'started') return undefined;
  for (const o of waiting)
    if (o.runKey === runKey && o.offered.event.identity.phase.kind !== 'started')
      return { reason: 'Superseded', message: 'the run finished before its start was delivered' };
  return undefined;
}
