/**
 * First-come, first-served locks and semaphores by key, for the process: per-target serialization
 * of notifiers' read-modify-write (src/notifier/types.ts `Serialize`, case N03) and the
 * dispatcher's window of sends in flight per Provider (docs/delivery.md, "Guarantees"). A key is
 * forgotten when it has no holder and no waiter.
 */

interface Waiter {
  limit: number;
  /** Set when its signal aborted first: skipped when its turn comes. */
  cancelled: boolean;
  grant: () => void;
  /** Rejects the waiter's promise with the abort reason. */
  reject: () => void;
  key: string;
  slots: Slots;
}

interface Slots {
  held: number;
  /** Waiters in arrival order from `head`; cancelled ones are skipped and dropped when reached. */
  queue: Waiter[];
  head: number;
  /** Waiters not cancelled. */
  waiting: number;
}

/**
 * Waiters of one signal, and the one listener that cancels them all when it aborts. One listener
 * per signal, not per waiter: a burst of 10,000 lanes waits on the dispatcher's one stop signal,
 * and Node's `EventTarget.addEventListener` walks the signal's listeners on every add (quadratic;
 * with the array's shift on each grant, 1.27 s of ~32 s busy in a 3,000-event burst, `--cpu-prof`).
 */
interface SignalWaiters {
  waiters: Set<Waiter>;
  onAbort: () => void;
}

/**
 * Up to `limit` holders per key at once; later arrivals wait in arrival order (one waiting for a
 * key keeps everyone behind it waiting, so a holder of a larger limit never overtakes).
 */
export class KeyedSemaphore {
  readonly #keys = new Map<string, Slots>();
  readonly #signals = new Map<AbortSignal, SignalWaiters>();

  /**
   * Waits until fewer than `limit` hold `key` and every earlier waiter got its turn; resolves with
   * the release function (idempotent). Rejects without taking a slot when `signal` aborts first.
   * @param limit holders at once, ≥ 1 (the caller's own limit: a key whose limit changes — a
   *   Provider whose type changed — lets the next waiter in once its own limit allows).
   */
  async acquire(key: string, limit: number, signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) throw abortError(signal);
    let slots = this.#keys.get(key);
    if (slots === undefined) {
      slots = { held: 0, queue: [], head: 0, waiting: 0 };
      this.#keys.set(key, slots);
    }
    if (slots.waiting === 0 && slots.held < limit) {
      slots.held++;
      return this.#releaser(key, slots);
    }
    const s = slots;
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        limit,
        cancelled: false,
        grant: () => {
          if (signal) this.#unwatch(signal, waiter);
          resolve();
        },
        reject: () => {
          reject(abortError(signal as AbortSignal));
        },
        key,
        slots: s,
      };
      if (signal) this.#watch(signal, waiter);
      s.queue.push(waiter);
      s.waiting++;
    });
    return this.#releaser(key, s);
  }

  /** Runs `fn` holding one of `limit` slots of `key`. */
  async run<T>(key: string, limit: number, fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire(key, limit);
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Keys with a holder or waiters (for tests). */
  get size(): number {
    return this.#keys.size;
  }

  /** Signals with a listener of ours (for tests: none once nobody waits). */
  get watchedSignals(): number {
    return this.#signals.size;
  }

  #watch(signal: AbortSignal, w: Waiter): void {
    let sw = this.#signals.get(signal);
    if (sw === undefined) {
      const waiters = new Set<Waiter>();
      const onAbort = (): void => {
        this.#signals.delete(signal);
        // All of the signal's waiters leave before anyone is let in: none of them may be granted.
        const touched = new Map<Slots, string>();
        for (const x of waiters) {
          x.cancelled = true;
          x.slots.waiting--;
          touched.set(x.slots, x.key);
          x.reject();
        }
        for (const [slots, key] of touched) this.#admit(key, slots);
      };
      sw = { waiters, onAbort };
      this.#signals.set(signal, sw);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    sw.waiters.add(w);
  }

  #unwatch(signal: AbortSignal, w: Waiter): void {
    const sw = this.#signals.get(signal);
    if (sw === undefined) return;
    sw.waiters.delete(w);
    if (sw.waiters.size === 0) {
      this.#signals.delete(signal);
      signal.removeEventListener('abort', sw.onAbort);
    }
  }

  #releaser(key: string, slots: Slots): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      slots.held--;
      this.#admit(key, slots);
    };
  }

  /** Lets waiters in, in order, while the first one's limit allows; forgets an idle key. */
  #admit(key: string, slots: Slots): void {
    const q = slots.queue;
    for (;;) {
      while (slots.head < q.length && (q[slots.head] as Waiter).cancelled) slots.head++;
      const w = q[slots.head];
      if (w === undefined || slots.held >= w.limit) break;
      slots.head++;
      slots.waiting--;
      slots.held++;
      w.grant();
    }
    // Drop the granted and cancelled prefix once it is most of the array (amortized O(1) a waiter).
    if (slots.head > 64 && slots.head * 2 > q.length) {
      q.splice(0, slots.head);
      slots.head = 0;
    }
    if (slots.held === 0 && slots.waiting === 0 && this.#keys.get(key) === slots) this.#keys.delete(key);
  }
}

/** One holder per key at a time: a {@link KeyedSemaphore} of limit 1. */
export class KeyedLock {
  readonly #slots = new KeyedSemaphore();

  /**
   * Waits until every earlier holder of `key` released it; resolves with the release function.
   * Rejects (without taking the lock) when `signal` aborts first.
   */
  acquire(key: string, signal?: AbortSignal): Promise<() => void> {
    return this.#slots.acquire(key, 1, signal);
  }

  /** Runs `fn` holding `key`. */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.#slots.run(key, 1, fn);
  }

  /** Keys with a holder or waiters (for tests). */
  get size(): number {
    return this.#slots.size;
  }
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}
