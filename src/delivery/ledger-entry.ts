/**
 * Ledger entries (see src/delivery/ledger.ts for the store): the watermark of one (Alert, Stack)
 * pair and the pure operations on it — handling an event, checking whether an event is covered,
 * merging two copies, and the compact text form kept in the ConfigMaps.
 */
import { createHash } from 'node:crypto';
import { comparePositions, formatPosition, parsePosition, type EventPosition } from './order.ts';

/**
 * A ledger entry: the watermark position, the hashes of the events handled exactly there, and
 * the runs still open — whose Started was handled but whose result was not. An open run's result
 * is not done even when it sorts before the watermark: the next run's Started can be handled
 * before the previous run's result is seen (Stack and Update are watched separately), and that
 * result must still go out.
 */
export interface Entry {
  pos: EventPosition;
  ids: string[];
  /** `run` of each open run (bounded; the oldest is forgotten first). */
  open: number[];
}

const MAX_OPEN_RUNS = 8;

const MAX_TIED_IDS = 8;

/** 8 hex characters of SHA-1 of an event id: enough to tell apart the few events sharing a position. */
export function eventIdHash(id: string): string {
  return createHash('sha1').update(id).digest('hex').slice(0, 8);
}

/** Parses `<run>.<rank>.<sub>[~<h>,…][!<open run>,…]`. */
export function parseEntry(s: string): Entry | undefined {
  const [main = '', openPart] = s.split('!', 2);
  const [p, ids] = main.split('~', 2);
  const pos = parsePosition(p ?? '');
  if (!pos) return undefined;
  const open =
    openPart === undefined || openPart === ''
      ? []
      : openPart.split(',').map(Number).filter(Number.isSafeInteger);
  return { pos, ids: ids === undefined || ids === '' ? [] : ids.split(','), open };
}

export function formatEntry(e: Entry): string {
  const ids = e.ids.length === 0 ? '' : `~${e.ids.join(',')}`;
  const open = e.open.length === 0 ? '' : `!${e.open.join(',')}`;
  return `${formatPosition(e.pos)}${ids}${open}`;
}

/** `e` after handling event `eventId` at `pos`: the watermark never moves back; Started opens its run, a result closes it. */
export function applyHandled(e: Entry | undefined, pos: EventPosition, eventId: string): Entry {
  const h = eventIdHash(eventId);
  let next: Entry;
  if (!e) next = { pos, ids: [h], open: [] };
  else {
    const c = comparePositions(pos, e.pos);
    next =
      c > 0
        ? { pos, ids: [h], open: [...e.open] }
        : c === 0
          ? { pos: e.pos, ids: [...new Set([...e.ids, h])].slice(-MAX_TIED_IDS), open: [...e.open] }
          : { pos: e.pos, ids: [...e.ids], open: [...e.open] };
  }
  if (pos.rank === 0 && !next.open.includes(pos.run))
    next.open = [...next.open, pos.run].slice(-MAX_OPEN_RUNS);
  if (pos.rank === 1) next.open = next.open.filter((r) => r !== pos.run);
  return next;
}

/**
 * Whether the event `eventId` at `pos` is covered by entry `e`: it sorts before the watermark, or
 * it is one of the events handled at the watermark — even when it now sorts later. The latter is
 * a PKO v1 outcome seen again (a retry of a failing commit, a resync of a deployed one): v1 stamps
 * every run with a new `lastResyncTime`, which orders events but is not part of their id, so the
 * same event reappears at a later position (docs/events.md, "PKO v1").
 */
export function entryCovers(e: Entry | undefined, pos: EventPosition, eventId: string): boolean {
  if (!e) return false;
  if (pos.rank === 1 && e.open.includes(pos.run)) return false;
  const c = comparePositions(pos, e.pos);
  return c < 0 || (c === 0 && e.ids.length === 0) || e.ids.includes(eventIdHash(eventId));
}

/** The later of two entries; at the same position, the union of their event hashes. */
export function mergeEntries(a: Entry | undefined, b: Entry): Entry {
  if (!a) return b;
  const c = comparePositions(a.pos, b.pos);
  const open = [...new Set([...a.open, ...b.open])].slice(-MAX_OPEN_RUNS);
  if (c > 0) return { ...a, open };
  if (c < 0) return { ...b, open };
  const ids = [...new Set([...a.ids, ...b.ids])].slice(-MAX_TIED_IDS);
  return { pos: a.pos, ids, open };
}

/** Whether two entries are the same (position, tied event hashes and open runs, in order). */
export function entriesEqual(a: Entry | undefined, b: Entry | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  return (
    comparePositions(a.pos, b.pos) === 0 &&
    a.ids.length === b.ids.length &&
    a.ids.every((x, i) => x === b.ids[i]) &&
    a.open.length === b.open.length &&
    a.open.every((x, i) => x === b.open[i])
  );
}
