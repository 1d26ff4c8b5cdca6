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
