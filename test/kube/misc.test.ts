import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { KubeConfig } from '@kubernetes/client-node';
import { jitteredBackoff } from '../../src/kube/clock.ts';
import { boundMessage } from '../../src/kube/events.ts';
import { LeaderElector, microTime } from '../../src/kube/leader.ts';

describe('jitteredBackoff', () => {
  it('doubles from initial to max with up to half jitter', () => {
    expect([0, 1, 2, 3, 10].map((n) => jitteredBackoff(n, 1_000, 30_000, () => 1))).toEqual([
      1_000, 2_000, 4_000, 8_000, 30_000,
    ]);
    expect(jitteredBackoff(2, 1_000, 30_000, () => 0)).toBe(2_000);
  });
});

describe('boundMessage', () => {
  it('keeps short messages and cuts long ones to 1024 UTF-8 bytes on a code point', () => {
    expect(boundMessage('short')).toBe('short');
    const long = 'ü'.repeat(2_000) + '🙂';
    const cut = boundMessage(long);
    expect(Buffer.byteLength(cut, 'utf8')).toBeLessThanOrEqual(1_024);
    expect(cut.endsWith('…')).toBe(true);
    expect(cut).not.toContain('\uFFFD');
    expect(boundMessage('a'.repeat(1_024))).toHaveLength(1_024);
  });
});

describe('LeaderElector', () => {
  it('writes MicroTime with six fractional digits', () => {
    expect(microTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe('2026-01-02T03:04:05.678000Z');
  });

  it('rejects unsafe timing (client-go bounds)', () => {
    const base = { namespace: 'ns', name: 'l', identity: 'a', logger: createLogger({ level: 'silent' }) };
    const kc = new KubeConfig();
    expect(
      () => new LeaderElector(kc, { ...base, leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }),
    ).toThrow(/exceed renewDeadlineMs/);
    expect(() => new LeaderElector(kc, { ...base, renewDeadlineMs: 2_000, retryPeriodMs: 2_000 })).toThrow(
      /retryPeriodMs/,
    );
    expect(() => new LeaderElector(kc, { ...base, identity: '' })).toThrow(/identity/);
  });
});
