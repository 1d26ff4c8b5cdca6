/**
 * Keyed semaphores and locks (src/delivery/locks.ts): the dispatcher's window per Provider and the
 * notifiers' per-target serialization.
 */
import { describe, expect, it } from 'vitest';
import { KeyedLock, KeyedSemaphore } from '../../src/delivery/locks.ts';

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('KeyedSemaphore', () => {
  it('lets `limit` holders of a key in at once, the rest in arrival order; keys are independent', async () => {
    const s = new KeyedSemaphore();
    const order: string[] = [];
    const take = (key: string, name: string) =>
      s.acquire(key, 2, undefined).then((release) => {
        order.push(name);
        return release;
      });
    const a = take('p', 'a');
    const b = take('p', 'b');
    const c = take('p', 'c');
    const d = take('p', 'd');
    const x = take('q', 'x');
    await tick();
    expect(order).toEqual(['a', 'b', 'x']);
    (await b)();
    await tick();
    expect(order).toEqual(['a', 'b', 'x', 'c']);
    (await a)();
    (await a)(); // releasing twice frees one slot only: c and d hold both, e waits
    const e = take('p', 'e');
    await tick();
    expect(order).toEqual(['a', 'b', 'x', 'c', 'd']);
    (await c)();
    await tick();
    expect(order).toEqual(['a', 'b', 'x', 'c', 'd', 'e']);
    (await e)();
    (await d)();
    (await x)();
    expect(s.size).toBe(0);
  });

  it('a waiter whose signal aborts leaves the queue without a slot; the next one gets its turn', async () => {
    const s = new KeyedSemaphore();
    const first = await s.acquire('p', 1);
    const ac = new AbortController();
    const gaveUp = s.acquire('p', 1, ac.signal);
    let third = false;
    const next = s.acquire('p', 1).then((r) => {
      third = true;
      return r;
    });
    ac.abort(new Error('stop'));
    await expect(gaveUp).rejects.toThrow('stop');
    await tick();
    expect(third).toBe(false);
    first();
    (await next)();
    expect(third).toBe(true);
    expect(s.size).toBe(0);
    await expect(s.acquire('p', 1, ac.signal)).rejects.toThrow('stop');
    expect(s.size).toBe(0);
  });

  it('waiters sharing one signal: one listener; an abort rejects them all and grants none of them', async () => {
    const s = new KeyedSemaphore();
    const ac = new AbortController();
    const addListener = ac.signal.addEventListener.bind(ac.signal);
    let adds = 0;
    ac.signal.addEventListener = (...args: Parameters<AbortSignal['addEventListener']>) => {
      adds++;
      addListener(...args);
    };
    const holder = await s.acquire('p', 2, ac.signal);
    const granted: number[] = [];
    const waiters = Array.from({ length: 50 }, (_, i) =>
      s.acquire('p', 2, ac.signal).then((release) => {
        granted.push(i);
        return release;
      }),
    );
    // One of a different signal behind them still gets its turn after the abort.
    const other = s.acquire('p', 2);
    await tick();
    expect(adds).toBe(1);
    expect(s.watchedSignals).toBe(1);
    // The first is let in at once (limit 2); the other 49 still wait when the signal aborts.
    expect(granted).toEqual([0]);
    ac.abort(new Error('stopping'));
    const settled = await Promise.allSettled(waiters.slice(1));
    expect(settled.every((r) => r.status === 'rejected')).toBe(true);
    expect(granted).toEqual([0]);
    expect(s.watchedSignals).toBe(0);
    holder();
    (await other)();
    (await (waiters[0] as Promise<() => void>))();
    expect(s.size).toBe(0);
  });

  it('a long queue is served in order, and listeners are removed as waiters are granted', async () => {
    const s = new KeyedSemaphore();
    const ac = new AbortController();
    const first = await s.acquire('p', 1, ac.signal);
    const order: number[] = [];
    const n = 1000;
    const all = Array.from({ length: n }, (_, i) =>
      s.acquire('p', 1, ac.signal).then((release) => {
        order.push(i);
        release();
      }),
    );
    expect(s.watchedSignals).toBe(1);
    first();
    await Promise.all(all);
    expect(order).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(s.watchedSignals).toBe(0);
    expect(s.size).toBe(0);
  });
});

describe('KeyedLock', () => {
  it('runs one holder per key at a time, first come first served', async () => {
    const l = new KeyedLock();
    const log: string[] = [];
    const job = (name: string) =>
      l.run('k', async () => {
        log.push(`${name}+`);
        await tick();
        log.push(`${name}-`);
      });
    await Promise.all([job('a'), job('b'), job('c')]);
    expect(log).toEqual(['a+', 'a-', 'b+', 'b-', 'c+', 'c-']);
    expect(l.size).toBe(0);
  });
});
