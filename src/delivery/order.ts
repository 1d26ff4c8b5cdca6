/**
 * Order of the events of one Stack, from our own observation (docs/events.md, "Order"; case B04):
 * never from Update names, PKO's timestamps (`lastResyncTime`, event times) or any other clock,
 * which a skewed clock or an unusual name would turn into a watermark in the future.
 *
 * An event's position is `(rv, rank, sub)`:
 * - `rv`: the resourceVersion at which its run was first observed — the smallest resourceVersion
 *   of the object snapshots (the Update, or the Stack for runs only the Stack shows) the event
 *   was derived from, as this process saw them, or the one the ledger recorded for the run.
 *   resourceVersions are etcd revisions: one counter for every object of the cluster's storage,
 *   comparable since Kubernetes 1.35 (KEP-5504) — which assumes Stacks and Updates share one
 *   etcd, as they do unless the API server overrides the storage of one of them.
 * - `rank`: Started 0, result 1, stall 2 — the phases of one run in order.
 * - `sub`: for a stall, the Stack generation (a later stall of the same run after an earlier one).
 */
import type { EventPhase, NotificationEvent } from '../api/event.ts';

export interface EventPosition {
  /** Observation resourceVersion of the run. */
  rv: number;
  rank: number;
  sub: number;
}

/** Rank of a run's Started. */
export const STARTED_RANK = 0;
/** Rank of a run's result (Succeeded or Failed). */
export const RESULT_RANK = 1;
/** Rank of a stall. */
export const STALLED_RANK = 2;

function rankOf(phase: EventPhase): number {
  return phase.kind === 'started' ? STARTED_RANK : phase.kind === 'stalled' ? STALLED_RANK : RESULT_RANK;
}

/** Position of `ev` when its run's observation resourceVersion is `rv`. */
export function positionOf(ev: NotificationEvent, rv: number): EventPosition {
  const { phase } = ev.identity;
  return { rv, rank: rankOf(phase), sub: phase.kind === 'stalled' ? phase.generation : 0 };
}

export function comparePositions(a: EventPosition, b: EventPosition): number {
  return a.rv - b.rv || a.rank - b.rank || a.sub - b.sub;
}

/**
 * A resourceVersion as a number: a decimal without leading zeros, within 2^53 (KEP-5504's
 * format); undefined for anything else (an API server whose versions are not comparable).
 */
export function parseResourceVersion(rv: string | undefined): number | undefined {
  if (rv === undefined || !/^[1-9]\d{0,15}$/.test(rv)) return undefined;
  const n = Number(rv);
  return Number.isSafeInteger(n) ? n : undefined;
}
