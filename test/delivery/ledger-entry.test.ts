/**
 * The ledger entry algebra: what is done, open runs, the floor, in-flight marks, notes, merging
 * (a join: commutative, associative, idempotent) and the text form.
 */
import fc from 'fast-check';
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

  it('PKO v1 outcomes replace each other, also through a merge with a stale copy: the outcome replaced since is not covered', () => {
    const v1 = (phase: 'failed' | 'succeeded'): EventRef => ({
      ...ref('s/v1:abc', 10, phase),
      latestOnly: true,
    });
    const stale = handle(v1('failed')); // an old leader's copy: the commit failed
    const current = handle(v1('failed'), v1('succeeded')); // then it succeeded (a retry worked)
    expect(current.runs[0]?.gen).toBe(1);
    for (const merged of [mergeEntries(stale, current), mergeEntries(current, stale)]) {
      expect(entryCovers(merged, v1('succeeded'))).toBe(true);
      // Failing again is news: the stale copy's "failed" must not cover it.
      expect(entryCovers(merged, v1('failed'))).toBe(false);
    }
    const again = recordHandled(mergeEntries(stale, current), v1('failed'));
    expect([
      again.runs[0]?.gen,
      entryCovers(again, v1('failed')),
      entryCovers(again, v1('succeeded')),
    ]).toEqual([2, true, false]);
    // The same outcome seen again changes nothing (no new generation).
    expect(formatEntry(recordHandled(again, v1('failed')))).toBe(formatEntry(again));
    // Still a join.
    const f = (x: Entry) => formatEntry(x);
    expect(f(mergeEntries(stale, again))).toBe(f(mergeEntries(again, stale)));
    expect(f(mergeEntries(mergeEntries(stale, current), again))).toBe(
      f(mergeEntries(stale, mergeEntries(current, again))),
    );
    expect(f(mergeEntries(again, again))).toBe(f(again));
    expect(parseEntry(formatEntry(again))).toEqual(again);
  });

  it('text form round-trips (notes of any characters, stalls, in-flight marks) and refuses garbage', () => {
    let e = handle(ref('s/a', 10, 'started'), ref('s/b', 12, 'stalled', { gen: 7, h: '0f0f' }));
    e = recordHandled(e, ref('s/a', 10, 'started'), 'thread=1 .~ ü');
    e = recordInFlight(e, ref('s/a', 10, 'succeeded'));
    expect(parseEntry(formatEntry(e))).toEqual(e);
    for (const bad of ['garbage', '', '1 zz.1.1', '1 0123abcd.1.9', '01 0123abcd.1.1', '1 0123abcd.1.1.q5'])
      expect(parseEntry(bad)).toBeUndefined();
  });

  it('property: copies built by any handling histories merge commutatively and idempotently, and the merge covers every event either copy covers (a merge never causes a repeat)', () => {
    const runs = ['s/a', 's/b', 's/v1:c', 's/d', 's/e'];
    const op = fc.record({
      run: fc.integer({ min: 0, max: runs.length - 1 }),
      phase: fc.constantFrom('started', 'succeeded', 'failed'),
      inflight: fc.boolean(),
    });
    const query = (i: number, phase: EventRef['phase']): EventRef => {
      const name = runs[i] ?? 's/a';
      return { ...ref(name, 10 * (i + 1), phase), ...(name.includes('v1:') ? { latestOnly: true } : {}) };
    };
    const build = (ops: { run: number; phase: EventRef['phase']; inflight: boolean }[]): Entry => {
      let e: Entry | undefined;
      for (const o of ops)
        e = o.inflight ? recordInFlight(e, query(o.run, o.phase)) : recordHandled(e, query(o.run, o.phase));
      return e ?? { floor: 0, runs: [] };
    };
    const history = fc.array(op, { maxLength: 12 });
    const f = (x: Entry) => formatEntry(x);
    fc.assert(
      fc.property(history, history, (ha, hb) => {
        // Two copies that share a past and went on separately (an old and a new leader).
        const a = build(ha);
        const b = build([...ha, ...hb]);
        const c = build(hb);
        for (const [x, y] of [
          [a, b],
          [a, c],
          [b, c],
        ] as const) {
          const m = mergeEntries(x, y);
          expect(f(m)).toBe(f(mergeEntries(y, x)));
          expect(f(mergeEntries(m, m))).toBe(f(m));
          expect(parseEntry(f(m))).toEqual(m);
          for (let i = 0; i < runs.length; i++) {
            for (const phase of ['started', 'succeeded', 'failed'] as const) {
              const q = query(i, phase);
              if (q.latestOnly === true && phase !== 'started') {
                // Outcomes that replace each other: the copy whose outcome changed more often is newer.
                const gen = (e: Entry) => e.runs.find((r) => r.h === q.run)?.gen ?? 0;
                const [gx, gy] = [gen(x), gen(y)];
                const newer =
                  gx === gy ? entryCovers(x, q) || entryCovers(y, q) : entryCovers(gx > gy ? x : y, q);
                if (newer) expect(entryCovers(m, q)).toBe(true);
                continue;
              }
              if (entryCovers(x, q) || entryCovers(y, q)) expect(entryCovers(m, q)).toBe(true);
            }
          }
        }
      }),
      { numRuns: 300, seed: 20261130 },
    );
  });
});
