/**
 * A keyed work queue with a fixed number of workers, after client-go's workqueue:
 * - a key is reconciled by at most one worker at a time;
 * - adding a key that is already queued coalesces into one run;
 * - adding a key while it is being reconciled makes it run once more right after;
 * - a reconcile that throws is retried after a per-key exponential backoff
 *   (`baseMs * 2^(failures-1)`, capped at `maxMs`); a success forgets the key's failures;
 * - a reconcile may ask for a later run with `{ requeueAfterMs }`; a delay longer than a timer
 *   holds (2^31 − 1 ms, ~24.8 days: Node would fire it after 1 ms) is waited in parts.
 * Keys are opaque strings (conventionally `namespace/name`). Order is FIFO among ready keys,
 * unless `fairBy` groups them (e.g. by namespace): then ready keys are taken round-robin across
 * groups, a group with a key running yields to a waiting group without one, and one group never
 * holds more than `concurrency - 1` workers (so another group's key starts at once).
 */
import type { Registry } from 'prom-client';
import type { Logger } from '../log.ts';
import { errorMessage } from './client.ts';
import { systemClock, type Clock } from './clock.ts';
import { timerDelay } from './timer.ts';
import { counter, gauge, histogram } from './metrics.ts';

export interface ReconcileResult {
  /** Run this key again after this many ms (in addition to any event-driven run). */
  requeueAfterMs?: number;
}

export interface WorkQueueOptions {
  /** Queue name for logs and the `queue` metric label. */
  name: string;
  /** Reconciles running in parallel (different keys). At least 1. */
  concurrency: number;
  // eslint-disable-next-line @typescript-eslint/no-invalid-void-type -- lets reconcilers be plain `async` functions that return nothing
  reconcile: (key: string) => Promise<ReconcileResult | undefined | void>;
  logger: Logger;
  /** Per-key retry backoff after errors; default 500 ms .. 300 000 ms (5 min). */
  backoff?: { baseMs: number; maxMs: number };
  /** Time source for delays and durations; default the system clock. */
  clock?: Clock;
  /** Where `pkonc_workqueue_*` / `pkonc_reconcile_*` metrics go; unregistered when absent. */
  registry?: Registry;
  /**
   * The fairness group of a key (e.g. its namespace: `k => k.slice(0, k.indexOf('/'))`). Absent:
   * plain FIFO. Present: round-robin across groups (the group served longest ago first), a group
   * with a key running only gets another worker when no other group waits, and never more than
   * `concurrency - 1` workers when `concurrency > 1`.
   */
  fairBy?: (key: string) => string;
}

export class WorkQueue {
  private readonly opts: WorkQueueOptions;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly backoff: { baseMs: number; maxMs: number };
  /** Ready keys in FIFO order; a Set keeps insertion order and dedupes. */
  private readonly ready = new Set<string>();
  private readonly active = new Set<string>();
  /** Keys added while active: run again once the current run ends. */
  private readonly dirty = new Set<string>();
  /** Delayed adds: key → due time and timer handle (the earliest due wins). */
  private readonly delayed = new Map<string, { due: number; handle: unknown }>();
  private readonly failures = new Map<string, number>();
  /** With `fairBy`: group → sequence number of its last start (lower = served longer ago). */
  private readonly served = new Map<string, number>();
  private serveSeq = 0;
  private started = false;
  private shuttingDown = false;
  private idleWaiters: (() => void)[] = [];
  private readonly depth;
  private readonly total;
  private readonly errors;
  private readonly duration;

  constructor(opts: WorkQueueOptions) {
    if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) {
      throw new Error(`work queue ${opts.name}: concurrency must be a positive integer`);
    }
    this.opts = opts;
    this.log = opts.logger.child({ queue: opts.name });
    this.clock = opts.clock ?? systemClock;
    this.backoff = opts.backoff ?? { baseMs: 500, maxMs: 300_000 };
    const q = opts.name;
    this.depth = gauge(opts.registry, 'pkonc_workqueue_depth', 'Keys waiting in the work queue.', [
      'queue',
    ]).labels(q);
    this.total = counter(opts.registry, 'pkonc_reconcile_total', 'Reconciles run.', ['queue']).labels(q);
    this.errors = counter(opts.registry, 'pkonc_reconcile_errors_total', 'Reconciles that threw.', [
      'queue',
    ]).labels(q);
    this.duration = histogram(
      opts.registry,
      'pkonc_reconcile_duration_seconds',
      'Reconcile duration.',
      ['queue'],
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    ).labels(q);
  }

  /** Queues `key` now. Ignored after shutdown. */
  add(key: string): void {
    if (this.shuttingDown) return;
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    this.ready.add(key);
    this.depth.set(this.ready.size);
    this.pump();
  }

  /** Queues `key` after `delayMs`; an earlier pending delayed add of the same key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const due = this.clock.now() + delayMs;
    const existing = this.delayed.get(key);
    if (existing !== undefined) {
      if (existing.due <= due) return;
      this.clock.clearTimeout(existing.handle);
    }
    const entry: { due: number; handle: unknown } = { due, handle: undefined };
    // A delay beyond what a timer holds (2^31 − 1 ms) is waited in parts, never fired early.
    const arm = (): unknown =>
      this.clock.setTimeout(
        () => {
          const rest = due - this.clock.now();
          if (rest > 0) {
            entry.handle = arm();
            return;
          }
          this.delayed.delete(key);
          this.add(key);
        },
        timerDelay(due - this.clock.now()),
      );
    entry.handle = arm();
    this.delayed.set(key, entry);
  }

  /** Starts the workers (keys added before start wait until then). */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.pump();
  }

  /**
   * Stops taking work: pending and delayed keys are dropped, no new reconcile starts, and the
   * call waits up to `deadlineMs` for running reconciles. `drained` says whether they all ended.
   */
  async shutdown(deadlineMs: number): Promise<{ drained: boolean }> {
    this.shuttingDown = true;
    for (const { handle } of this.delayed.values()) this.clock.clearTimeout(handle);
    this.delayed.clear();
    this.ready.clear();
    this.dirty.clear();
    this.depth.set(0);
    if (this.active.size === 0) return { drained: true };
    let timer: unknown;
    const drained = await Promise.race([
      new Promise<boolean>((resolve) => {
        this.idleWaiters.push(() => {
          resolve(true);
        });
      }),
      new Promise<boolean>((resolve) => {
        timer = this.clock.setTimeout(() => {
          resolve(false);
        }, timerDelay(deadlineMs));
      }),
    ]);
    this.clock.clearTimeout(timer);
    if (!drained) {
      this.log.warn({ running: [...this.active] }, 'shutdown deadline passed with reconciles still running');
    }
    return { drained };
  }

  /** Keys ready to run (not counting running or delayed ones). */
  length(): number {
    return this.ready.size;
  }

  /** Reconciles running now. */
  processing(): number {
    return this.active.size;
  }

  private pump(): void {
    if (!this.started || this.shuttingDown) return;
    while (this.active.size < this.opts.concurrency) {
      const key = this.next();
      if (key === undefined) break;
      this.ready.delete(key);
      this.active.add(key);
      void this.run(key);
    }
    this.depth.set(this.ready.size);
  }

  /** The ready key to start next (FIFO, or fair across `fairBy` groups); undefined: none may start. */
  private next(): string | undefined {
    const groupOf = this.opts.fairBy;
    if (groupOf === undefined) {
      const first = this.ready.values().next();
      return first.done === true ? undefined : first.value;
    }
    const running = new Map<string, number>();
    for (const k of this.active) {
      const g = groupOf(k);
      running.set(g, (running.get(g) ?? 0) + 1);
    }
    const cap = this.opts.concurrency > 1 ? this.opts.concurrency - 1 : 1;
    let idle: { key: string; group: string; served: number } | undefined;
    let busy: { key: string; group: string; served: number } | undefined;
    for (const key of this.ready) {
      const group = groupOf(key);
      const n = running.get(group) ?? 0;
      if (n >= cap) continue;
      const served = this.served.get(group) ?? -1;
      if (n === 0) {
        if (idle === undefined || served < idle.served) idle = { key, group, served };
      } else if (busy === undefined || served < busy.served) busy = { key, group, served };
    }
    const pick = idle ?? busy;
    if (pick === undefined) return undefined;
    this.served.set(pick.group, ++this.serveSeq);
    if (this.served.size > 10_000) {
      // Forget groups with nothing ready or running (bounded memory).
      const live = new Set([...this.ready, ...this.active].map(groupOf));
      for (const g of this.served.keys()) if (!live.has(g)) this.served.delete(g);
    }
    return pick.key;
  }

  private async run(key: string): Promise<void> {
    const start = this.clock.now();
    this.total.inc();
    try {
      const result = await this.opts.reconcile(key);
      this.failures.delete(key);
      const after = result?.requeueAfterMs;
      if (after !== undefined && after >= 0) this.addAfter(key, after);
    } catch (err) {
      this.errors.inc();
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const delay = Math.min(this.backoff.maxMs, this.backoff.baseMs * 2 ** Math.min(n - 1, 30));
      this.log.warn({ key, err: errorMessage(err), failures: n, retryInMs: delay }, 'reconcile failed');
      this.addAfter(key, delay);
    } finally {
      this.duration.observe((this.clock.now() - start) / 1000);
      this.active.delete(key);
      if (this.dirty.delete(key)) this.add(key);
      if (this.active.size === 0) {
        for (const w of this.idleWaiters.splice(0)) w();
      }
      this.pump();
    }
  }
}
