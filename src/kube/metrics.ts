/**
 * Get-or-create helpers for prom-client metrics. Several informers / queues share one
 * `Registry` and one metric per name (told apart by labels); registering a name twice would
 * throw, so the first creator registers and later ones reuse it. Without a registry the
 * metric is created unregistered (still usable, never exported).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

function existing(registry: Registry | undefined, name: string): unknown {
  return registry?.getSingleMetric(name);
}

export function counter<L extends string>(
  registry: Registry | undefined,
  name: string,
  help: string,
  labelNames: readonly L[],
): Counter<L> {
  return (
    (existing(registry, name) as Counter<L> | undefined) ??
    new Counter<L>({ name, help, labelNames, registers: registry ? [registry] : [] })
  );
}

/**
 * @param value when given, the gauge (no labels) is set from it at each scrape instead of by its
 *   owner on every change — for values costly to keep current (a count over a large structure).
 */
export function gauge<L extends string>(
  registry: Registry | undefined,
  name: string,
  help: string,
  labelNames: readonly L[],
  value?: () => number,
): Gauge<L> {
  return (
    (existing(registry, name) as Gauge<L> | undefined) ??
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: registry ? [registry] : [],
      ...(value
        ? {
            collect(this: Gauge<L>) {
              this.set(value());
            },
          }
        : {}),
    })
  );
}

export function histogram<L extends string>(
  registry: Registry | undefined,
  name: string,
  help: string,
  labelNames: readonly L[],
  buckets: number[],
): Histogram<L> {
  return (
    (existing(registry, name) as Histogram<L> | undefined) ??
    new Histogram<L>({ name, help, labelNames, buckets, registers: registry ? [registry] : [] })
  );
}
