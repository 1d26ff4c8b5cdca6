import { describe, expect, it } from 'vitest';
import {
  applyHandled,
  entriesEqual,
  entryCovers,
  eventIdHash,
  formatEntry,
  mergeEntries,
  parseEntry,
} from '../../src/delivery/ledger-entry.ts';

describe('ledger entries', () => {
  it('keeps the later watermark; at the same position, the union of event hashes', () => {
    const a = { pos: { run: 10, rank: 1, sub: 0 }, ids: [eventIdHash('x')], open: [] };
    const b = { pos: { run: 10, rank: 1, sub: 0 }, ids: [eventIdHash('y')], open: [] };
    const later = { pos: { run: 11, rank: 0, sub: 0 }, ids: [eventIdHash('z')], open: [] };
    expect(mergeEntries(a, b).ids).toEqual([eventIdHash('x'), eventIdHash('y')]);
    expect(mergeEntries(a, later)).toEqual(later);
    expect(mergeEntries(later, a)).toEqual(later);
    expect(parseEntry(formatEntry(mergeEntries(a, b)))).toEqual(mergeEntries(a, b));
    expect(parseEntry('10.1.0')).toEqual({ pos: { run: 10, rank: 1, sub: 0 }, ids: [], open: [] });
    expect(parseEntry('garbage')).toBeUndefined();
  });
});

describe('open runs (a result seen after the next run started)', () => {
  it("keeps run A's result deliverable after run B's Started moved the watermark past it", () => {
    const aStarted = { run: 100, rank: 0, sub: 0 };
    const aResult = { run: 100, rank: 1, sub: 0 };
    const bStarted = { run: 200, rank: 0, sub: 0 };
    let e = applyHandled(undefined, aStarted, 'u/a/started');
    e = applyHandled(e, bStarted, 'u/b/started');
    expect(e.pos).toEqual(bStarted);
    expect(entryCovers(e, aStarted, 'u/a/started')).toBe(true);
    expect(entryCovers(e, aResult, 'u/a/succeeded')).toBe(false); // still to send
    e = parseEntry(formatEntry(applyHandled(e, aResult, 'u/a/succeeded')))!;
    expect(e.pos).toEqual(bStarted); // the watermark did not move back
    expect(entryCovers(e, aResult, 'u/a/succeeded')).toBe(true); // and A is closed now
    expect(e.open).toEqual([200]);
  });
});

describe('entriesEqual', () => {
  it('compares position, event hashes and open runs', () => {
    const e = applyHandled(undefined, { run: 1, rank: 0, sub: 0 }, 'u/a/started');
    expect(entriesEqual(e, parseEntry(formatEntry(e)))).toBe(true);
    expect(entriesEqual(e, applyHandled(e, { run: 1, rank: 1, sub: 0 }, 'u/a/succeeded'))).toBe(false);
    expect(entriesEqual(e, { ...e, open: [] })).toBe(false);
    expect(entriesEqual(undefined, undefined)).toBe(true);
    expect(entriesEqual(e, undefined)).toBe(false);
  });
});
