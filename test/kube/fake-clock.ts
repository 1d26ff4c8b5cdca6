/**
 * A manual clock for unit tests (injected through the `Clock` interface; no global timers are
 * touched). `advance(ms)` fires due timers in time order and lets promise chains settle between
 * them, so code that awaits and then schedules again behaves as it would in real time.
 */
import type { Clock } from '../../src/kube/clock.ts';

interface Timer {
  at: number;
  seq: number;
  cb: () => void;
}

export class FakeClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly timers = new Map<number, Timer>();

  constructor(start = 1_700_000_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimeout(cb: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), seq: id, cb });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Delays (from now) of the pending timers, sorted. */
  pending(): number[] {
    return [...this.timers.values()].map((x) => x.at - this.t).sort((a, b) => a - b);
  }

  async advance(ms: number): Promise<void> {
    const target = this.t + ms;
    await settle();
    for (;;) {
      let next: [number, Timer] | undefined;
      for (const e of this.timers) {
        if (
          e[1].at <= target &&
          (next === undefined || e[1].at < next[1].at || (e[1].at === next[1].at && e[1].seq < next[1].seq))
        ) {
          next = e;
        }
      }
      if (next === undefined) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].cb();
      await settle();
    }
    this.t = target;
    await settle();
  }
}

/** Lets pending promise callbacks run (a macrotask turn). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
