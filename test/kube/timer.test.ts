/**
 * B17: no duration can make a timer fire at once. Node fires a `setTimeout` whose delay is over
 * 2^31 − 1 ms (~24.8 days) after 1 ms, so a work queue handing it a tenant's `interval: 1000h`
 * reconciled in a hot loop. The work queue waits such delays in parts, and the process clock
 * clamps every delay.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { systemClock } from '../../src/kube/clock.ts';
import { MAX_TIMER_MS, timerDelay } from '../../src/kube/timer.ts';
import { WorkQueue } from '../../src/kube/workqueue.ts';
import { FakeClock, settle } from './fake-clock.ts';

const HOUR = 3_600_000;
const quiet = (): ReturnType<typeof createLogger> => createLogger({ level: 'silent' });

describe('B17: timers hold the largest durations', () => {
  it('timerDelay caps at 2^31 − 1 ms and treats NaN and Infinity as the cap', () => {
    expect(MAX_TIMER_MS).toBe(2 ** 31 - 1);
    expect(timerDelay(1000 * HOUR)).toBe(MAX_TIMER_MS);
    expect(timerDelay(Number.NaN)).toBe(MAX_TIMER_MS);
    expect(timerDelay(Number.POSITIVE_INFINITY)).toBe(MAX_TIMER_MS);
    expect(timerDelay(-5)).toBe(0);
    expect(timerDelay(1_500)).toBe(1_500);
  });

  it('B17: a requeue after 1000h on the real clock runs once in the first second, not in a hot loop', async () => {
    let runs = 0;
    const q = new WorkQueue({
      name: 'b17',
      concurrency: 1,
      logger: quiet(),
      clock: systemClock,
      reconcile: () => {
        runs++;
        return Promise.resolve({ requeueAfterMs: 1000 * HOUR });
      },
    });
    q.start();
    q.add('ns/a');
    await new Promise((r) => setTimeout(r, 1_000));
    await q.shutdown(1_000);
    // Before: Node fired the 3.6e9 ms timer after 1 ms, hundreds of runs in this second.
    expect(runs).toBe(1);
  });

  it('B17: on an injected clock, 100000h is waited in timer-sized parts and runs exactly when due', async () => {
    const clock = new FakeClock();
    let runs = 0;
    const q = new WorkQueue({
      name: 'b17',
      concurrency: 1,
      logger: quiet(),
      clock,
      reconcile: () => {
        runs++;
        return Promise.resolve(runs === 1 ? { requeueAfterMs: 100_000 * HOUR } : undefined);
      },
    });
    q.start();
    q.add('ns/a');
    await settle();
    expect(runs).toBe(1);
    // Every armed timer fits in a signed 32-bit delay.
    expect(Math.max(...clock.pending())).toBeLessThanOrEqual(MAX_TIMER_MS);
    await clock.advance(100_000 * HOUR - 1);
    expect(runs).toBe(1);
    await clock.advance(1);
    expect(runs).toBe(2);
    await q.shutdown(1_000);
  });
});
