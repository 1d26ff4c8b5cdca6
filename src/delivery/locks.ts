/**
 * First-come, first-served locks by key, for the process: per-target serialization of notifiers'
 * read-modify-write (src/notifier/types.ts `Serialize`, case N03) and the dispatcher's one send in
 * flight per Provider. A key's queue is forgotten when it empties.
 */
export class KeyedLock {
  readonly #tails = new Map<string, Promise<void>>();

  /**
   * Waits until every earlier holder of `key` released it; resolves with the release function.
   * Rejects (without taking the lock) when `signal` aborts first.
   */
  async acquire(key: string, signal?: AbortSignal): Promise<() => void> {
    const prev = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = prev.then(() => mine);
    this.#tails.set(key, tail);
    let released = false;
    const done = (): void => {
      if (released) return;
      released = true;
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    };
    // Giving up while waiting: ours passes through as soon as the previous holder releases, and
    // the key is forgotten only then (later arrivals still wait for that holder).
    const giveUp = (): void => {
      released = true;
      release();
      void tail.then(() => {
        if (this.#tails.get(key) === tail) this.#tails.delete(key);
      });
    };
    if (signal) {
      if (signal.aborted) {
        giveUp();
        throw abortError(signal);
      }
      let onAbort: (() => void) | undefined;
      const aborted = new Promise<never>((_, reject) => {
        onAbort = () => {
          reject(abortError(signal));
        };
        signal.addEventListener('abort', onAbort, { once: true });
      });
      try {
        await Promise.race([prev, aborted]);
      } catch (err) {
        giveUp();
        throw err;
      } finally {
        if (onAbort) signal.removeEventListener('abort', onAbort);
      }
    } else await prev;
    return done;
  }

  /** Runs `fn` holding `key`. */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire(key);
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Keys with a holder or waiters (for tests). */
  get size(): number {
    return this.#tails.size;
  }
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}
