import { describe, expect, it } from 'vitest';
import { eventId, type EventPhase, type NotificationEvent, type RunRef } from '../../src/api/event.ts';
import { comparePositions, formatPosition, parsePosition, positionOf } from '../../src/delivery/order.ts';

function ev(run: RunRef, phase: EventPhase, timestamp: string): NotificationEvent {
  const identity = { stack: 'u1', run, phase };
  return {
    identity,
    id: eventId(identity),
    involvedObject: { apiVersion: 'pulumi.com/v1', kind: 'Stack', namespace: 'ns', name: 'app', uid: 'u1' },
    labels: {},
    severity: 'info',
    reason: 'UpdateSucceeded',
    message: '',
    timestamp,
    metadata: run.kind === 'update' ? { updateName: run.name } : {},
    reportingController: 'x',
  };
}
const update = (name: string): RunRef => ({ kind: 'update', name });

describe('event positions', () => {
  it('orders runs by the hex millis in PKO Update names, phases within a run', () => {
    // Run A starts and ends in the same second as run B starts: names, not timestamps, decide.
    const aStart = positionOf(ev(update('app-198c70e4c21'), { kind: 'started' }, '2026-08-20T11:00:00Z'));
    const aEnd = positionOf(ev(update('app-198c70e4c21'), { kind: 'succeeded' }, '2026-08-20T11:00:05Z'));
    const bStart = positionOf(ev(update('app-198c70e5000'), { kind: 'started' }, '2026-08-20T11:00:05Z'));
    expect(aStart.run).toBe(0x198c70e4c21);
    expect(comparePositions(aStart, aEnd)).toBeLessThan(0);
    expect(comparePositions(aEnd, bStart)).toBeLessThan(0);
  });

  it('puts a stall after the run it belongs to, later stalls after earlier ones', () => {
    const run = update('app-198c70e4c21');
    const end = positionOf(ev(run, { kind: 'failed' }, '2026-08-20T11:00:05Z'));
    const stall3 = positionOf(
      ev(run, { kind: 'stalled', reason: 'UpdateFailed', generation: 3 }, '2026-08-20T11:10:00Z'),
    );
    const stall4 = positionOf(
      ev(run, { kind: 'stalled', reason: 'SourceUnavailable', generation: 4 }, '2026-08-20T11:20:00Z'),
    );
    expect(stall3).toEqual({ run: 0x198c70e4c21, rank: 2, sub: 3 });
    expect(comparePositions(end, stall3)).toBeLessThan(0);
    expect(comparePositions(stall3, stall4)).toBeLessThan(0);
  });

  it('orders PKO v1 runs by lastResyncTime', () => {
    const r1 = positionOf(
      ev(
        { kind: 'v1', commit: 'abc', at: '2026-08-20T11:00:00Z' },
        { kind: 'succeeded' },
        '2026-08-20T11:00:00Z',
      ),
    );
    const r2 = positionOf(
      ev(
        { kind: 'v1', commit: 'abc', at: '2026-08-20T11:01:00Z' },
        { kind: 'succeeded' },
        '2026-08-20T11:01:00Z',
      ),
    );
    expect(r1.run).toBe(Date.parse('2026-08-20T11:00:00Z'));
    expect(comparePositions(r1, r2)).toBeLessThan(0);
  });

  it('falls back to the event timestamp when the run carries no time (a stall before any run, a v1 generation)', () => {
    const none = positionOf(
      ev({ kind: 'none' }, { kind: 'stalled', reason: 'SpecInvalid', generation: 2 }, '2026-08-20T11:00:00Z'),
    );
    const v1g = positionOf(
      ev({ kind: 'v1', commit: 'abc', at: 'g3' }, { kind: 'failed' }, '2026-08-20T12:00:00Z'),
    );
    expect(none).toEqual({ run: Date.parse('2026-08-20T11:00:00Z'), rank: 2, sub: 2 });
    expect(v1g.run).toBe(Date.parse('2026-08-20T12:00:00Z'));
  });

  it('derives the id from the identity, run URI-encoded', () => {
    expect(ev(update('app-1'), { kind: 'started' }, '').id).toBe('u1/app-1/started');
    // A PKO v1 outcome is its commit: the time orders it but is not part of the id.
    expect(ev({ kind: 'v1', commit: 'abc', at: '2026-08-20T11:00:00Z' }, { kind: 'failed' }, '').id).toBe(
      `u1/${encodeURIComponent('v1:abc')}/failed`,
    );
    expect(ev({ kind: 'none' }, { kind: 'stalled', reason: 'SpecInvalid', generation: 2 }, '').id).toBe(
      'u1/-/stalled:SpecInvalid@2',
    );
  });

  it('round-trips the stored form and rejects garbage', () => {
    const p = { run: 1755687600123, rank: 1, sub: 0 };
    expect(formatPosition(p)).toBe('1755687600123.1.0');
    expect(parsePosition(formatPosition(p))).toEqual(p);
    expect(parsePosition('x.1.0')).toBeUndefined();
  });
});
