/**
 * The ledger entry algebra: what is done, open runs, the floor, in-flight marks, notes, merging
 * (a join: commutative, associative, idempotent) and the text form.
 */
import { describe, expect, it } from 'vitest';
import {
  entryCovers,
  formatEntry,
  isInFlight,
  KEEP_RECENT,
  mergeEntries,
  parseEntry,
  recordHandled,
  recordInFlight,
  runHash,
  type Entry,
  type EventRef,
} from '../../src/delivery/ledger-entry.ts';

const ref = (run: string, rv: number, phase: EventRef['phase'], stall?: EventRef['stall']): EventRef => ({
  run: runHash(run),
  rv,
  phase,
  ...(stall ? { stall } : {}),
});

function handle(...refs: EventRef[]): Entry {
  let e: Entry | undefined;
  for (const r of refs) e = recordHandled(e, r);
  if (!e) throw new Error('nothing handled');
  return e;
}

describe('ledger entries', () => {
  it('an event is done once handled; its siblings are not; a Started is moot once the result went out', () => {
    const e = handle(ref('s/a', 10, 'succeeded'));
    expect(entryCovers(e, ref('s/a', 10, 'succeeded'))).toBe(true);
    expect(entryCovers(e, ref('s/a', 10, 'failed'))).toBe(false);
    expect(entryCovers(e, ref('s/a', 10, 'started'))).toBe(true);
    expect(entryCovers(e, ref('s/b', 20, 'started'))).toBe(false);
    expect(entryCovers(undefined, ref('s/a', 10, 'succeeded'))).toBe(false);
  });

  it('keeps a run open (Started, no result) whatever came after it: its late result is still sent', () => {
    const e = handle(
      ref('s/a', 10, 'started'),
      ref('s/b', 20, 'started'),
      ref('s/c', 30, 'succeeded'),
      ref('s/d', 40, 'succeeded'),
      ref('s/e', 50, 'succeeded'),
    );
    expect(entryCovers(e, ref('s/a', 10, 'succeeded'))).toBe(false);
    expect(entryCovers(e, ref('s/b', 20, 'failed'))).toBe(false);
    const closed = recordHandled(e, ref('s/a', 10, 'succeeded'));
    expect(entryCovers(closed, ref('s/a', 10, 'succeeded'))).toBe(true);
  });

  it('folds old finished runs into the floor: a run observed at or below it is done, one above is not', () => {
    const e = handle(...[10, 20, 30, 40, 50].map((rv) => ref(`s/r${rv}`, rv, 'succeeded')));
    expect(e.runs).toHaveLength(KEEP_RECENT);
    expect(e.floor).toBe(29); // just below the oldest run kept (observed at 30)
    expect(entryCovers(e, ref('s/r10', 10, 'succeeded'))).toBe(true);
    expect(entryCovers(e, ref('s/gone', 15, 'failed'))).toBe(true);
    // A dropped run seen again later (it finished, its finalizer went) is still done.
    expect(entryCovers(e, ref('s/r20', 27, 'succeeded'))).toBe(true);
    expect(entryCovers(e, ref('s/new', 60, 'failed'))).toBe(false);
    // The newest runs seen again at a later resourceVersion (an object touched after the fact)
    // are still recognised by their record.
    expect(entryCovers(e, ref('s/r50', 99, 'succeeded'))).toBe(true);
  });

  it('stalls: done up to the highest generation handled; another reason at that generation is not', () => {
    const e = handle(ref('s/a', 10, 'stalled', { gen: 3, h: 'aaaa' }));
    expect(entryCovers(e, ref('s/a', 10, 'stalled', { gen: 3, h: 'aaaa' }))).toBe(true);
    expect(entryCovers(e, ref('s/a', 10, 'stalled', { gen: 2, h: 'bbbb' }))).toBe(true);
    expect(entryCovers(e, ref('s/a', 10, 'stalled', { gen: 3, h: 'bbbb' }))).toBe(false);
    expect(entryCovers(e, ref('s/a', 10, 'stalled', { gen: 4, h: 'aaaa' }))).toBe(false);
  });

  it('in-flight marks last until the event is handled; notes stay with the run', () => {
    let e = recordInFlight(undefined, ref('s/a', 10, 'started'));
    expect(isInFlight(e, ref('s/a', 10, 'started'))).toBe(true);
    expect(entryCovers(e, ref('s/a', 10, 'started'))).toBe(false);
    e = recordHandled(e, ref('s/a', 10, 'started'), 'thread 1700000000.000100');
    expect(isInFlight(e, ref('s/a', 10, 'started'))).toBe(false);
    e = recordInFlight(e, ref('s/a', 10, 'failed'));
    e = recordHandled(e, ref('s/a', 10, 'failed'));
    expect(e.runs[0]?.note).toBe('thread 1700000000.000100');
    expect(e.runs[0]?.inflight).toBeUndefined();
    expect(() => recordHandled(e, ref('s/a', 10, 'failed'), 'x'.repeat(129))).toThrow(RangeError);
  });

  it('merge is a join: commutative, associative, idempotent; a closed run is never reopened by a stale copy', () => {
    const stale = handle(ref('s/a', 10, 'started'));
    const later = handle(ref('s/a', 10, 'started'), ref('s/a', 10, 'succeeded'), ref('s/b', 20, 'started'));
    const other = handle(ref('s/c', 5, 'failed'), ref('s/x', 90, 'stalled', { gen: 2, h: 'abcd' }));
    const f = (x: Entry) => formatEntry(x);
    expect(f(mergeEntries(stale, later))).toBe(f(mergeEntries(later, stale)));
    expect(f(mergeEntries(mergeEntries(stale, later), other))).toBe(
      f(mergeEntries(stale, mergeEntries(later, other))),
    );
    expect(f(mergeEntries(later, later))).toBe(f(later));
    expect(entryCovers(mergeEntries(later, stale), ref('s/a', 10, 'succeeded'))).toBe(true);
  });

  it('text form round-trips (notes of any characters, stalls, in-flight marks) and refuses garbage', () => {
    let e = handle(ref('s/a', 10, 'started'), ref('s/b', 12, 'stalled', { gen: 7, h: '0f0f' }));
    e = recordHandled(e, ref('s/a', 10, 'started'), 'thread=1 .~ ü');
    e = recordInFlight(e, ref('s/a', 10, 'succeeded'));
    expect(parseEntry(formatEntry(e))).toEqual(e);
    for (const bad of ['garbage', '', '1 zz.1.1', '1 0123abcd.1.9', '01 0123abcd.1.1', '1 0123abcd.1.1.q5'])
      expect(parseEntry(bad)).toBeUndefined();
  });
});
