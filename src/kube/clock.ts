import { timerDelay } from './timer.ts';

/**
 * Time source for the controller runtime. Injected (never patched globally) so tests can drive
 * backoff and expiry deterministically. `setTimeout` returns an opaque handle that is only ever
 * passed back to `clearTimeout` of the same clock.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(cb: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The process clock: `Date.now` and Node's timers, every delay clamped by {@link timerDelay}. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (cb, ms) => setTimeout(cb, timerDelay(ms)),
  clearTimeout: (handle) => {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/**
 * Resolves after `ms` on `clock`, or early (without error) when `signal` aborts.
 * Never rejects, so loops can `await sleep(...)` and then check their own stop flag.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) {
      resolve();
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(handle);
      resolve();
    };
    const handle = clock.setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Exponential backoff with "equal jitter": the n-th delay (n from 0) lies in
 * [d/2, d] where d = min(initialMs * 2^n, maxMs). `random` is injectable for tests.
 */
export function jitteredBackoff(
  attempt: number,
  initialMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const d = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(d / 2 + random() * (d / 2));
}
