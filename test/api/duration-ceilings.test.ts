/**
 * B17, in the code: every duration a tenant or an operator writes has a ceiling where it is
 * parsed. A value above it (stored before the CRD rule) is lowered to the ceiling and the object's
 * condition says so; a flag above it is refused at start.
 */
import { describe, expect, it } from 'vitest';
import { boundedDuration } from '../../src/api/duration.ts';
import type { DriftDetection } from '../../src/api/v1alpha1.ts';
import { UsageError, loadConfig } from '../../src/config.ts';
import { MAX_INTERVAL_MS, intervalNote, intervalOf, latestDue } from '../../src/drift/plan.ts';

const HOUR = 3_600_000;

function dd(interval: string): DriftDetection {
  return {
    apiVersion: 'notification.pko.dev/v1alpha1',
    kind: 'DriftDetection',
    metadata: { name: 'nightly', namespace: 'ns' },
    spec: { stackNames: ['app'], interval },
  };
}

describe('B17: duration ceilings in the code', () => {
  it('B17: a PullRequestPreview interval of 1000h is used as 24h, and the note says so', () => {
    const o = { minMs: 10_000, maxMs: 24 * HOUR, maxLabel: '24h', fallbackMs: 300_000 };
    expect(boundedDuration('spec.interval', '1000h', o)).toEqual({
      ms: 24 * HOUR,
      note: 'spec.interval 1000h is above the 24h ceiling and is not obeyed: 24h is used; set 24h or less',
    });
    expect(boundedDuration('spec.interval', '24h', o)).toEqual({ ms: 24 * HOUR });
    expect(boundedDuration('spec.interval', '1s', o)).toEqual({ ms: 10_000 });
    expect(boundedDuration('spec.interval', 'soon', o)).toEqual({ ms: 300_000 });
  });

  it('B17: a DriftDetection interval of 100000h is checked every 720h, and the note says so', () => {
    expect(MAX_INTERVAL_MS).toBe(720 * HOUR);
    expect(intervalOf(dd('100000h'))).toBe(720 * HOUR);
    expect(intervalNote(dd('100000h'))).toBe(
      'spec.interval 100000h is above the 720h ceiling and is not obeyed: checked every 720h; set 720h or less',
    );
    expect(intervalOf(dd('720h'))).toBe(720 * HOUR);
    expect(intervalNote(dd('720h'))).toBeUndefined();
    // A check planned under the old interval is later than any the ceiling allows: planned again.
    const now = 1_700_000_000_000;
    expect(now + 100_000 * HOUR > latestDue(now, intervalOf(dd('100000h')) as number)).toBe(true);
  });

  it('B17: duration flags above their ceiling are refused at start', () => {
    for (const [flag, max, over] of [
      ['relist-interval', '24h', '1000h'],
      ['shutdown-timeout', '1h', '1000h'],
      ['secret-refresh-interval', '24h', '1000h'],
      ['stack-stuck-after', '24h', '100000h'],
      ['leader-election-lease-duration', '10m', '1000h'],
    ] as const) {
      expect(() => loadConfig([`--${flag}=${over}`], {}), flag).toThrow(
        new UsageError(`--${flag} must be at most ${max}`),
      );
    }
    expect(loadConfig(['--relist-interval=24h', '--stack-stuck-after=24h'], {}).relistIntervalMs).toBe(
      24 * HOUR,
    );
  });
});
