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
    const a = { pos: { run: 10, rank: 1, sub: 0 }, ids: [eventIdHash('x')] };
    const b = { pos: { run: 10, rank: 1, sub: 0 }, ids: [eventIdHash('y')] };
    const later = { pos: { run: 11, rank: 0, sub: 0 }, ids: [eventIdHash('z')] };
    expect(mergeEntries(a, b).ids).toEqual([eventIdHash('x'), eventIdHash('y')]);
    expect(mergeEntries(a, later)).toBe(later);
    expect(mergeEntries(later, a)).toBe(later);
    expect(parseEntry(formatEntry(mergeEntries(a, b)))).toEqual(mergeEntries(a, b));
    expect(parseEntry('10.1.0')).toEqual({ pos: { run: 10, rank: 1, sub: 0 }, ids: [] });
    expect(parseEntry('garbage')).toBeUndefined();
  });
});
