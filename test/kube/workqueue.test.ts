import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.ts';
import { WorkQueue, type ReconcileResult, type WorkQueueOptions } from '../../src/kube/workqueue.ts';
import { FakeClock, settle } from './fake-clock.ts';

function capture(): { logger: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  const logger = createLogger({ level: 'debug', destination });
  return {
    logger,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** A promise with its resolve function exposed. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

function makeQueue(
  reconcile: WorkQueueOptions['reconcile'],
  extra: Partial<WorkQueueOptions> = {},
): { q: WorkQueue; clock: FakeClock } {
  const clock = new FakeClock();
  const q = new WorkQueue({
    name: 'test',
    concurrency: 1,
    reconcile,
    logger: createLogger({ level: 'silent' }),
    clock,
    ...extra,
  });
  return { q, clock };
}

describe('WorkQueue', () => {
  it('coalesces adds of a key that is already queued', async () => {
    const runs: string[] = [];
    const { q } = makeQueue((key) => {
      runs.push(key);
      return Promise.resolve();
    });
    q.add('a');
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.length()).toBe(2);
    q.start();
    await settle();
    expect(runs).toEqual(['a', 'b']);
    expect(q.length()).toBe(0);
  });

  it('never runs one key twice at once, and reruns it once when added during a run', async () => {
    let running = 0;
    let maxRunning = 0;
    const gates: (() => void)[] = [];
    let runs = 0;
    const { q } = makeQueue(
      async () => {
        runs++;
        running++;
        maxRunning = Math.max(maxRunning, running);
        const d = deferred();
        gates.push(d.resolve);
        await d.promise;
        running--;
      },
      { concurrency: 4 },
    );
    q.start();
    q.add('a');
    await settle();
    expect(q.processing()).toBe(1);
    q.add('a');
    q.add('a');
    q.add('a');
    await settle();
    expect(q.processing()).toBe(1);
    expect(q.length()).toBe(0);
    expect(runs).toBe(1);
    gates.shift()?.();
    await settle();
    expect(runs).toBe(2); // one rerun for the three adds
    gates.shift()?.();
    await settle();
    expect(runs).toBe(2);
    expect(maxRunning).toBe(1);
    expect(q.processing()).toBe(0);
  });

  it('runs different keys in parallel up to the concurrency', async () => {
    const gate = deferred();
    const { q } = makeQueue(
      async () => {
        await gate.promise;
      },
      { concurrency: 2 },
    );
    q.add('a');
    q.add('b');
    q.add('c');
    q.start();
    await settle();
    expect(q.processing()).toBe(2);
    expect(q.length()).toBe(1);
    gate.resolve();
    await settle();
    await settle();
    expect(q.processing()).toBe(0);
    expect(q.length()).toBe(0);
  });

  it('retries a failing key with per-key exponential backoff and logs key and error', async () => {
    const { logger, lines } = capture();
    const times: number[] = [];
    const clock = new FakeClock(0);
    const q = new WorkQueue({
      name: 'backoff',
      concurrency: 1,
      logger,
      clock,
      backoff: { baseMs: 100, maxMs: 1_000 },
      reconcile: (key) => {
        if (key === 'bad') {
          times.push(clock.now());
          return Promise.reject(new Error('provider unreachable'));
        }
        return Promise.resolve();
      },
    });
    q.start();
    q.add('bad');
    await clock.advance(5_000);
    // 0, +100, +200, +400, +800, then capped at +1000.
    expect(times.slice(0, 8)).toEqual([0, 100, 300, 700, 1_500, 2_500, 3_500, 4_500]);
    const warn = lines().find((l) => l['msg'] === 'reconcile failed');
    expect(warn).toMatchObject({ level: 'warn', key: 'bad', err: 'provider unreachable', queue: 'backoff' });
    await q.shutdown(0);
  });

  it('forgets the backoff after a success', async () => {
    const clock = new FakeClock(0);
    const times: number[] = [];
    const outcomes = ['fail', 'fail', 'fail', 'ok', 'fail', 'ok'];
    const q = new WorkQueue({
      name: 'forget',
      concurrency: 1,
      logger: createLogger({ level: 'silent' }),
      clock,
      backoff: { baseMs: 100, maxMs: 10_000 },
      reconcile: () => {
        times.push(clock.now());
        return outcomes.shift() === 'fail' ? Promise.reject(new Error('boom')) : Promise.resolve();
      },
    });
    q.start();
    q.add('k');
    await clock.advance(700); // runs at 0 (fail), 100 (fail), 300 (fail), 700 (ok)
    expect(times).toEqual([0, 100, 300, 700]);
    q.add('k'); // fails; the next delay starts from the base again
    await clock.advance(100);
    expect(times).toEqual([0, 100, 300, 700, 700, 800]);
    expect(clock.pending()).toEqual([]);
  });

  it('schedules a later run when reconcile returns requeueAfterMs', async () => {
    const clock = new FakeClock(0);
    const times: number[] = [];
    const q = new WorkQueue({
      name: 'requeue',
      concurrency: 1,
      logger: createLogger({ level: 'silent' }),
      clock,
      reconcile: (): Promise<ReconcileResult | undefined> => {
        times.push(clock.now());
        return Promise.resolve(times.length === 1 ? { requeueAfterMs: 5_000 } : undefined);
      },
    });
    q.start();
    q.add('k');
    await clock.advance(4_999);
    expect(times).toEqual([0]);
    await clock.advance(1);
    expect(times).toEqual([0, 5_000]);
    await clock.advance(60_000);
    expect(times).toEqual([0, 5_000]);
  });

  it('keeps the earliest of two delayed adds of one key', async () => {
    const clock = new FakeClock(0);
    const times: number[] = [];
    const { q } = makeQueue(
      () => {
        times.push(clock.now());
        return Promise.resolve();
      },
      { clock },
    );
    q.start();
    q.addAfter('k', 1_000);
    q.addAfter('k', 300);
    q.addAfter('k', 2_000);
    await clock.advance(3_000);
    expect(times).toEqual([300]);
  });

  it('shutdown waits for in-flight reconciles up to the deadline', async () => {
    const gate = deferred();
    let started = 0;
    const { q, clock } = makeQueue(
      async () => {
        started++;
        await gate.promise;
      },
      { concurrency: 2 },
    );
    q.start();
    q.add('slow');
    q.add('queued-1');
    q.add('queued-2');
    q.addAfter('later', 100);
    await settle();
    expect(started).toBe(2);
    const result = q.shutdown(1_000);
    await clock.advance(999);
    let settledResult: { drained: boolean } | undefined;
    void result.then((r) => (settledResult = r));
    await settle();
    expect(settledResult).toBeUndefined();
    await clock.advance(1);
    expect(await result).toEqual({ drained: false });
    q.add('after-shutdown');
    expect(q.length()).toBe(0);
    gate.resolve();
    await settle();
    expect(started).toBe(2); // nothing new started after shutdown
  });

  it('shutdown reports drained when running reconciles finish in time', async () => {
    const gate = deferred();
    const { q, clock } = makeQueue(async () => {
      await gate.promise;
    });
    q.start();
    q.add('a');
    await settle();
    const result = q.shutdown(10_000);
    await clock.advance(50);
    gate.resolve();
    expect(await result).toEqual({ drained: true });
    expect(await q.shutdown(0)).toEqual({ drained: true });
  });

  it('counts reconciles and errors per queue in the registry', async () => {
    const registry = new Registry();
    const clock = new FakeClock(0);
    const mk = (name: string, fail: boolean): WorkQueue =>
      new WorkQueue({
        name,
        concurrency: 1,
        logger: createLogger({ level: 'silent' }),
        clock,
        registry,
        reconcile: () => (fail ? Promise.reject(new Error('x')) : Promise.resolve()),
      });
    const good = mk('good', false);
    const bad = mk('bad', true);
    good.start();
    bad.start();
    good.add('a');
    bad.add('a');
    await settle();
    const text = await registry.metrics();
    expect(text).toContain('pkonc_reconcile_total{queue="good"} 1');
    expect(text).toContain('pkonc_reconcile_errors_total{queue="bad"} 1');
    expect(text).toContain('pkonc_reconcile_duration_seconds_count{queue="good"} 1');
    expect(text).toMatch(/pkonc_workqueue_depth\{queue="bad"\} 0/);
    await bad.shutdown(0);
  });
});

describe('WorkQueue with fairBy (B12: one tenant cannot starve the others)', () => {
  const byNamespace = (k: string): string => k.slice(0, k.indexOf('/'));

  it("a namespace with many slow keys never holds every worker: another namespace's key starts at once", async () => {
    const started: string[] = [];
    const gates = new Map<string, () => void>();
    const { q } = makeQueue(
      (key) => {
        started.push(key);
        const d = deferred();
        gates.set(key, d.resolve);
        return d.promise;
      },
      { concurrency: 4, fairBy: byNamespace },
    );
    q.start();
    for (let i = 0; i < 10; i++) q.add(`a/p${String(i)}`);
    await settle();
    // Three of four workers: one stays free for another namespace.
    expect(started).toEqual(['a/p0', 'a/p1', 'a/p2']);
    q.add('b/first');
    await settle();
    expect(started.at(-1)).toBe('b/first');
    expect(q.processing()).toBe(4);
    // A worker that frees goes to the namespace served longest ago among those waiting.
    q.add('c/x');
    q.add('b/second');
    gates.get('a/p0')?.();
    await settle();
    expect(started.at(-1)).toBe('c/x');
  });

  it('round-robin across namespaces; FIFO within one; without fairBy, FIFO overall', async () => {
    const order: string[] = [];
    const fair = makeQueue(
      (key) => {
        order.push(key);
        return Promise.resolve();
      },
      { concurrency: 1, fairBy: byNamespace },
    ).q;
    for (const k of ['a/1', 'a/2', 'a/3', 'b/1', 'b/2', 'c/1']) fair.add(k);
    fair.start();
    await settle();
    expect(order).toEqual(['a/1', 'b/1', 'c/1', 'a/2', 'b/2', 'a/3']);

    const fifo: string[] = [];
    const plain = makeQueue((key) => {
      fifo.push(key);
      return Promise.resolve();
    }).q;
    for (const k of ['a/1', 'a/2', 'b/1']) plain.add(k);
    plain.start();
    await settle();
    expect(fifo).toEqual(['a/1', 'a/2', 'b/1']);
  });
});
