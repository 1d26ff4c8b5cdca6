/**
 * Rate-limit gate per credential (case F20, docs/cases.md): when a forge or chat service answers
 * 429/403 with `Retry-After` or a rate-limit reset, no request with that credential is sent before
 * then — across every Provider that shares the credential, not only the one that was told. The
 * one place the controller honours rate limits (the GitHub client only paces writes).
 *
 * Keys are `credentialKey(p)` hashes (src/credential/key.ts), never tokens.
 */
import { sleep, systemClock, type Clock } from '../kube/clock.ts';

export class CredentialGate {
  readonly #blockedUntil = new Map<string, number>();
  readonly #clock: Clock;

  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  /** Forbid requests for `key` until `untilMs` (epoch ms); a later deadline wins. */
  block(key: string, untilMs: number): void {
    if ((this.#blockedUntil.get(key) ?? 0) < untilMs) this.#blockedUntil.set(key, untilMs);
  }

  /** Milliseconds left before `key` may be used (0 when free). */
  remaining(key: string): number {
    const until = this.#blockedUntil.get(key);
    if (until === undefined) return 0;
    const left = until - this.#clock.now();
    if (left <= 0) {
      this.#blockedUntil.delete(key);
      return 0;
    }
    return left;
  }

  /** Resolves when `key` may be used (or when `signal` aborts). */
  async wait(key: string, signal?: AbortSignal): Promise<void> {
    for (let left = this.remaining(key); left > 0 && signal?.aborted !== true; left = this.remaining(key)) {
      await sleep(this.#clock, left, signal);
    }
  }
}
