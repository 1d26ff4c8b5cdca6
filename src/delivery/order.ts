/**
 * Total order of the events of one Stack, used by the delivery ledger's watermark (see
 * docs/events.md, "Order").
 *
 * An event's position is `(run, rank, sub)`, read from its structured identity:
 * - `run`: when the run was created, in epoch milliseconds. PKO v2 names Updates
 *   `<stack>-<hex millis>`, so the name suffix gives the exact creation order of runs, and a
 *   run's Started and Succeeded share it even though their timestamps differ. PKO v1 runs use the
 *   run's `lastResyncTime` (which orders them but is not part of their id: see
 *   src/delivery/ledger-entry.ts for how a v1 outcome seen again is recognised). Anything else falls
 *   back to the event timestamp.
 * - `rank`: started 0, succeeded/failed 1, stalled 2 — the phases of one run in order.
 * - `sub`: for StackStalled, the Stack's observedGeneration (a later stall of the same run comes
 *   after an earlier one); 0 otherwise.
 *
 * Events of one Stack are delivered in this order, and the ledger keeps, per (Alert, Stack),
 * the position of the last event handled: everything at or before it is done.
 */
import type { EventPhase, NotificationEvent, RunRef } from '../api/event.ts';

export interface EventPosition {
  run: number;
  rank: number;
  sub: number;
}

/** Rank of a run's Started. */
export const STARTED_RANK = 0;
/** Rank of a run's result (Succeeded or Failed). */
export const RESULT_RANK = 1;
/** Rank of a stall. */
export const STALLED_RANK = 2;

const HEX_MILLIS = /-([0-9a-f]{9,13})$/;

/** Creation time (epoch ms) encoded in a PKO v2 Update name (`<stack>-<hex millis>`), if any. */
export function runMillisFromUpdateName(name: string): number | undefined {
  const m = HEX_MILLIS.exec(name);
  if (!m?.[1]) return undefined;
  const n = Number.parseInt(m[1], 16);
  return Number.isSafeInteger(n) ? n : undefined;
}

function runMillis(run: RunRef): number | undefined {
  switch (run.kind) {
    case 'update':
      return runMillisFromUpdateName(run.name);
    case 'v1': {
      const t = Date.parse(run.at);
      return Number.isFinite(t) ? t : undefined;
    }
    case 'none':
      return undefined;
  }
}

function rankOf(phase: EventPhase): number {
  return phase.kind === 'started' ? STARTED_RANK : phase.kind === 'stalled' ? STALLED_RANK : RESULT_RANK;
}

/** Position of `ev` among its Stack's events (see the file header). */
export function positionOf(ev: NotificationEvent): EventPosition {
  const { run, phase } = ev.identity;
  return {
    run: runMillis(run) ?? (Date.parse(ev.timestamp) || 0),
    rank: rankOf(phase),
    sub: phase.kind === 'stalled' ? phase.generation : 0,
  };
}

export function comparePositions(a: EventPosition, b: EventPosition): number {
  return a.run - b.run || a.rank - b.rank || a.sub - b.sub;
}

/** Compact text form stored in the ledger: `<run>.<rank>.<sub>` (base 10). */
export function formatPosition(p: EventPosition): string {
  return `${p.run}.${p.rank}.${p.sub}`;
}

export function parsePosition(s: string): EventPosition | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(s);
  if (!m) return undefined;
  return { run: Number(m[1]), rank: Number(m[2]), sub: Number(m[3]) };
}
