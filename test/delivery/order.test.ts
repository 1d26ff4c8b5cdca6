import { describe, expect, it } from 'vitest';
import { eventId, type EventPhase, type NotificationEvent, type RunRef } from '../../src/api/event.ts';
import { comparePositions, parseResourceVersion, positionOf } from '../../src/delivery/order.ts';

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

describe('event positions (B04: from observation, never names or clocks)', () => {
  it('orders runs by the resourceVersion they were observed at, phases within a run', () => {
    // Names and timestamps say the opposite; only the observation counts.
    const aStart = positionOf(
      ev(update('app-fffffffffff'), { kind: 'started' }, '2030-01-01T00:00:00Z'),
      100,
    );
    const aEnd = positionOf(
      ev(update('app-fffffffffff'), { kind: 'succeeded' }, '2030-01-01T00:00:05Z'),
      100,
    );
    const bStart = positionOf(
      ev(update('app-manual-refresh-000000001'), { kind: 'started' }, '2001-01-01T00:00:00Z'),
      140,
    );
    expect(comparePositions(aStart, aEnd)).toBeLessThan(0);
    expect(comparePositions(aEnd, bStart)).toBeLessThan(0);
  });

  it('a stall comes after its run’s result, and a later stall (higher generation) after an earlier one', () => {
    const run = update('app-198c70e4c21');
    const end = positionOf(ev(run, { kind: 'failed' }, '2026-08-20T11:00:05Z'), 7);
    const stall3 = positionOf(ev(run, { kind: 'stalled', reason: 'UpdateFailed', generation: 3 }, 'x'), 7);
    const stall4 = positionOf(ev(run, { kind: 'stalled', reason: 'UpdateFailed', generation: 4 }, 'x'), 7);
    expect(comparePositions(end, stall3)).toBeLessThan(0);
    expect(comparePositions(stall3, stall4)).toBeLessThan(0);
  });

  it('v1 runs whose lastResyncTime moves backwards are ordered by observation too', () => {
    const first = positionOf(
      ev(
        { kind: 'v1', commit: 'c1', at: '2026-08-20T12:00:00Z' },
        { kind: 'failed' },
        '2026-08-20T12:00:00Z',
      ),
      50,
    );
    const second = positionOf(
      ev(
        { kind: 'v1', commit: 'c2', at: '2026-08-20T11:00:00Z' },
        { kind: 'failed' },
        '2026-08-20T11:00:00Z',
      ),
      60,
    );
    expect(comparePositions(first, second)).toBeLessThan(0);
  });

  it('reads resourceVersions as KEP-5504 defines them (positive decimal, no leading zeros)', () => {
    expect(parseResourceVersion('12345')).toBe(12345);
    expect(parseResourceVersion('0')).toBeUndefined();
    expect(parseResourceVersion('0123')).toBeUndefined();
    expect(parseResourceVersion('abc')).toBeUndefined();
    expect(parseResourceVersion(undefined)).toBeUndefined();
    expect(parseResourceVersion('99999999999999999999')).toBeUndefined();
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
});
