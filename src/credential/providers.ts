/**
 * The usable Providers by `namespace/name`: set by the Provider reconciler after every reconcile
 * (and every periodic re-read of its Secrets), read by delivery. A re-read that finds the same
 * settings keeps the stored object. Every usable Provider's secret values are handed to the
 * process `Redactor`, so a response that echoes another Provider's credentials is redacted too.
 */
import type { ResolvedProvider } from './provider.ts';
import type { Redactor } from './redact.ts';

export class ProviderIndex {
  readonly #providers = new Map<string, ResolvedProvider>();
  readonly #redactor: Redactor;
  readonly #usable: ((key: string) => void)[] = [];
  readonly #changed: ((key: string, resolved: ResolvedProvider | undefined) => void)[] = [];

  constructor(redactor: Redactor) {
    this.#redactor = redactor;
  }

  /**
   * Stores the resolved Provider `key`, or removes it (undefined: deleted or not usable). Listeners
   * of {@link onUsable} hear of a Provider that was not usable before. Secret values stay known to
   * the Redactor after removal (they may still appear in late answers).
   */
  set(key: string, resolved: ResolvedProvider | undefined): void {
    const prev = this.#providers.get(key);
    if (!resolved) {
      if (!this.#providers.delete(key)) return;
      for (const l of this.#changed) l(key, undefined);
      return;
    }
    // The same settings read again (a periodic re-read): keep the object, and with it the
    // notifier and its caches that delivery built for it.
    if (prev && sameSettings(prev, resolved)) return;
    this.#providers.set(key, resolved);
    this.#redactor.set(key, resolved.secretValues);
    for (const l of this.#changed) l(key, resolved);
    if (!prev) for (const l of this.#usable) l(key);
  }

  /** Called when a Provider is stored with new settings or removed (undefined). */
  onChange(listener: (key: string, resolved: ResolvedProvider | undefined) => void): void {
    this.#changed.push(listener);
  }

  get(key: string): ResolvedProvider | undefined {
    return this.#providers.get(key);
  }

  /** Called when a Provider becomes usable (e.g. to release events held for it). */
  onUsable(listener: (key: string) => void): void {
    this.#usable.push(listener);
  }

  /** Read-only view by `namespace/name`. */
  get all(): ReadonlyMap<string, ResolvedProvider> {
    return this.#providers;
  }
}

/** Whether two resolutions of a Provider are the same in every setting (Secret values included). */
export function sameSettings(a: ResolvedProvider, b: ResolvedProvider): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
