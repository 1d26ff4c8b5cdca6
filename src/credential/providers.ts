/**
 * The usable Providers by `namespace/name`: set by the Provider reconciler after every reconcile,
 * read by delivery. Every usable Provider's secret values are handed to the process `Redactor`, so
 * a response that echoes another Provider's credentials is redacted too.
 */
import type { ResolvedProvider } from './provider.ts';
import type { Redactor } from './redact.ts';

export class ProviderIndex {
  readonly #providers = new Map<string, ResolvedProvider>();
  readonly #redactor: Redactor;
  readonly #usable: ((key: string) => void)[] = [];

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
      this.#providers.delete(key);
      return;
    }
    this.#providers.set(key, resolved);
    this.#redactor.set(key, resolved.secretValues);
    if (!prev) for (const l of this.#usable) l(key);
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
