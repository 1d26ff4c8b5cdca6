/**
 * The Ready Alerts the router matches against: compiled by the Alert reconciler (src/reconcile),
 * kept here by `namespace/name`, read by the router and by delivery.
 */
import type { DeliveryAlert } from '../delivery/types.ts';
import type { CompiledAlert } from './compile.ts';

/** A Ready Alert: what delivery needs plus the compiled matcher. */
export interface RoutedAlert extends DeliveryAlert {
  compiled: CompiledAlert;
}

/**
 * Compiled, Ready Alerts by `namespace/name`; and, apart, the compiled selectors of every Alert
 * served whose spec compiles, Ready or not ({@link setSelecting}).
 */
export class AlertIndex {
  readonly #alerts = new Map<string, RoutedAlert>();
  readonly #selecting = new Map<string, CompiledAlert>();
  readonly #selectingListeners: ((key: string) => void)[] = [];
  readonly #listeners: ((key: string, alert: RoutedAlert | undefined) => void)[] = [];

  /** Stores (or removes) a routed Alert; listeners hear of new or changed generations and removals. */
  set(key: string, alert: RoutedAlert | undefined): void {
    const prev = this.#alerts.get(key);
    // The Alert's resourceVersion when first seen (its creation's, seen live): kept across updates.
    if (
      alert &&
      prev?.uid === alert.uid &&
      prev.sinceRv !== undefined &&
      (alert.sinceRv === undefined || prev.sinceRv < alert.sinceRv)
    )
      alert = { ...alert, sinceRv: prev.sinceRv };
    if (alert) this.#alerts.set(key, alert);
    else this.#alerts.delete(key);
    const changed = alert
      ? prev?.uid !== alert.uid || prev.compiled.generation !== alert.compiled.generation
      : prev !== undefined;
    if (changed) for (const l of this.#listeners) l(key, alert);
  }

  onChange(listener: (key: string, alert: RoutedAlert | undefined) => void): void {
    this.#listeners.push(listener);
  }

  /**
   * Stores (or removes) the compiled spec of an Alert that may not be Ready — waiting for its
   * Provider or its template ConfigMap, or with a template that does not compile — but whose
   * `eventSources` compile: the Stacks it selects are the ones whose runs it will be given once
   * Ready, so the router records their commits now (src/alert/router.ts, docs/delivery.md).
   */
  setSelecting(key: string, compiled: CompiledAlert | undefined): void {
    const prev = this.#selecting.get(key);
    if (compiled) this.#selecting.set(key, compiled);
    else this.#selecting.delete(key);
    // A Ready Alert's changes are heard through `onChange`; a new or changed one waiting here is
    // heard through `onSelecting`.
    if (compiled && !this.#alerts.has(key) && prev?.generation !== compiled.generation)
      for (const l of this.#selectingListeners) l(key);
  }

  /**
   * Listens for an Alert not Ready that selects anew: stored by {@link setSelecting} for the first
   * time or with a new generation, while not in the Ready index. The router looks at the Stacks
   * again, so a run finished before the Alert was compiled has its commit recorded now.
   */
  onSelecting(listener: (key: string) => void): void {
    this.#selectingListeners.push(listener);
  }

  /** The compiled specs given to {@link setSelecting}, Ready or not. */
  selecting(): IterableIterator<CompiledAlert> {
    return this.#selecting.values();
  }

  get(key: string): RoutedAlert | undefined {
    return this.#alerts.get(key);
  }

  all(): IterableIterator<RoutedAlert> {
    return this.#alerts.values();
  }

  get size(): number {
    return this.#alerts.size;
  }
}
