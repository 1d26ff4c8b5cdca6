import { describe, expect, it } from 'vitest';
import type { NotificationEvent } from '../../src/api/event.ts';
import { comparePositions, formatPosition, parsePosition, positionOf } from '../../src/delivery/order.ts';

function ev(id: string, timestamp: string, updateName?: string): NotificationEvent {
  return {
    id,
    involvedObject: { apiVersion: 'pulumi.com/v1', kind: 'Stack', namespace: 'ns', name: 'app', uid: 'u1' },
    labels: {},
    severity: 'info',
    reason: 'UpdateSucceeded',
    message: '',
    timestamp,
    metadata: updateName === undefined ? {} : { updateName },
    reportingController: 'x',
  };
}

describe('event positions', () => {
  it('orders runs by the hex millis in PKO Update names, phases within a run', () => {
    // Run A starts and ends in the same second as run B starts: names, not timestamps, decide.
    const aStart = positionOf(ev('u1/app-198c70e4c21/started', '2026-08-20T11:00:00Z', 'app-198c70e4c21'));
    const aEnd = positionOf(ev('u1/app-198c70e4c21/succeeded', '2026-08-20T11:00:05Z', 'app-198c70e4c21'));
    const bStart = positionOf(ev('u1/app-198c70e5000/started', '2026-08-20T11:00:05Z', 'app-198c70e5000'));
    expect(aStart.run).toBe(0x198c70e4c21);
    expect(comparePositions(aStart, aEnd)).toBeLessThan(0);
    expect(comparePositions(aEnd, bStart)).toBeLessThan(0);
  });

  it('puts a stall after the run it belongs to, later stalls after earlier ones', () => {
    const end = positionOf(ev('u1/app-198c70e4c21/failed', '2026-08-20T11:00:05Z', 'app-198c70e4c21'));
    const stall3 = positionOf(ev('u1/app-198c70e4c21/stalled:UpdateFailed@3', '2026-08-20T11:10:00Z'));
    const stall4 = positionOf(ev('u1/app-198c70e4c21/stalled:SourceUnavailable@4', '2026-08-20T11:20:00Z'));
    expect(stall3).toEqual({ run: 0x198c70e4c21, rank: 2, sub: 3 });
    expect(comparePositions(end, stall3)).toBeLessThan(0);
    expect(comparePositions(stall3, stall4)).toBeLessThan(0);
  });

  it('orders PKO v1 runs by lastResyncTime', () => {
    const r1 = positionOf(
      ev(`u1/${encodeURIComponent('v1:abc@2026-08-20T11:00:00Z')}/succeeded`, '2026-08-20T11:00:00Z'),
    );
    const r2 = positionOf(
      ev(`u1/${encodeURIComponent('v1:abc@2026-08-20T11:01:00Z')}/succeeded`, '2026-08-20T11:01:00Z'),
    );
    expect(r1.run).toBe(Date.parse('2026-08-20T11:00:00Z'));
    expect(comparePositions(r1, r2)).toBeLessThan(0);
  });

  it('round-trips the stored form and rejects garbage', () => {
    const p = { run: 1755687600123, rank: 1, sub: 0 };
    expect(formatPosition(p)).toBe('1755687600123.1.0');
    expect(parsePosition(formatPosition(p))).toEqual(p);
    expect(parsePosition('x.1.0')).toBeUndefined();
  });
});

describe('ledger entries', () => {
  it('keeps the later watermark; at the same position, the union of event hashes', async () => {
    const { mergeEntries, parseEntry, formatEntry, eventIdHash } =
      await import('../../src/delivery/ledger.ts');
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
  it("keeps run A's result deliverable after run B's Started moved the watermark past it", async () => {
    const { applyHandled, entryCovers, formatEntry, parseEntry } = await import('../../src/delivery/ledger.ts');
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
