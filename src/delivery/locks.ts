/**
 * First-come, first-served locks and semaphores by key, for the process: per-target serialization
 * of notifiers' read-modify-write (src/notifier/types.ts `Serialize`, case N03) and the
 * dispatcher's window of sends in flight per Provider (docs/delivery.md, "Guarantees"). A key is
 * forgotten when it has no holder and no waiter.
 */

interface Waiter {
  limit: number;
  grant: () => void;
}

interface Slots {
  held: number;
  waiting: Waiter[];
}

/**
 * Up to `limit` holders per key at once; later arrivals wait in arrival order (one waiting for a
 * key keeps everyone behind it waiting, so a holder of a larger limit never overtakes).
 */
export class KeyedSemaphore {
  readonly #keys = new Map<string, Slots>();

  /**
   * Waits until fewer than `limit` hold `key` and every earlier waiter got its turn; resolves with
   * the release function (idempotent). Rejects without taking a slot when `signal` aborts first.
   * @param limit holders at once, ≥ 1 (the caller's own limit: a key whose limit changes — a
   *   Provider whose type changed — lets the next waiter in once its own limit allows).
   */
  async acquire(key: string, limit: number, signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) throw abortError(signal);
    const slots = this.#keys.get(key) ?? { held: 0, waiting: [] };
    this.#keys.set(key, slots);
    if (slots.waiting.length === 0 && slots.held < limit) {
      slots.held++;
      return this.#releaser(key, slots);
    }
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        limit,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        slots.waiting.splice(slots.waiting.indexOf(waiter), 1);
        this.#admit(key, slots);
        reject(abortError(signal as AbortSignal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      slots.waiting.push(waiter);
    });
    return this.#releaser(key, slots);
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
    for (let w = slots.waiting[0]; w !== undefined && slots.held < w.limit; w = slots.waiting[0]) {
      slots.waiting.shift();
      slots.held++;
      w.grant();
    }
    if (slots.held === 0 && slots.waiting.length === 0 && this.#keys.get(key) === slots)
      this.#keys.delete(key);
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
