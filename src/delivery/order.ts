/**
 * Total order of the events of one Stack, used by the delivery ledger's watermark.
 *
 * An event's position is `(run, rank, sub)`:
 * - `run`: when the run was created, in epoch milliseconds. PKO v2 names Updates
 *   `<stack>-<hex millis>` (shared/facts/pko.md), so the name suffix gives the exact creation
 *   order of runs, and a run's Started and Succeeded share it even though their timestamps
 *   differ. PKO v1 events (`v1:<commit>`) use their timestamp, the run's `lastResyncTime`, as does
 *   anything else.
 * - `rank`: started 0, succeeded/failed 1, stalled 2 — the phases of one run in order.
 * - `sub`: for StackStalled, the Stack's observedGeneration (a later stall of the same run
 *   comes after an earlier one); 0 otherwise.
 *
 * Events of one Stack are delivered in this order, and the ledger keeps, per (Alert, Stack),
 * the position of the last event handled: everything at or before it is done.
 */
import type { NotificationEvent } from '../api/event.ts';

export interface EventPosition {
  run: number;
  rank: number;
  sub: number;
}

const HEX_MILLIS = /-([0-9a-f]{9,13})$/;

function runMillisFromUpdateName(name: string | undefined): number | undefined {
  if (name === undefined) return undefined;
  const m = HEX_MILLIS.exec(name);
  if (!m?.[1]) return undefined;
  const n = Number.parseInt(m[1], 16);
  return Number.isSafeInteger(n) ? n : undefined;
}

function phaseOf(ev: NotificationEvent): string {
  return ev.id.slice(ev.id.lastIndexOf('/') + 1);
}

function runSegmentOf(ev: NotificationEvent): string {
  const withoutPhase = ev.id.slice(0, ev.id.lastIndexOf('/'));
  return decodeURIComponent(withoutPhase.slice(withoutPhase.indexOf('/') + 1));
}

/** Position of `ev` among its Stack's events (see the file header). */
export function positionOf(ev: NotificationEvent): EventPosition {
  const phase = phaseOf(ev);
  const stalled = phase.startsWith('stalled:');
  const rank = phase === 'started' ? 0 : stalled ? 2 : 1;
  const sub = stalled ? Number(phase.slice(phase.lastIndexOf('@') + 1)) || 0 : 0;
  const segment = runSegmentOf(ev);
  // PKO v1 ids (`v1:<commit>`) carry no time: their events are ordered by their timestamp, the
  // run's lastResyncTime.
  let run = runMillisFromUpdateName(ev.metadata.updateName) ?? runMillisFromUpdateName(segment);
  run ??= Date.parse(ev.timestamp) || 0;
  return { run, rank, sub };
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
