/**
 * Get-or-create helpers for prom-client metrics. Several informers / queues share one
 * `Registry` and one metric per name (told apart by labels); registering a name twice would
 * throw, so the first creator registers and later ones reuse it. Without a registry the
 * metric is created unregistered (still usable, never exported).
 */
import { Counter, Gauge, Histogram, type Registry } from './prom.ts';

/** The metric registered as `name` on `registry`, else the one `create` makes on it (or on none). */
function registered<M>(
  registry: Registry | undefined,
  name: string,
  create: (registers: Registry[]) => M,
): M {
  return (registry?.getSingleMetric(name) as M | undefined) ?? create(registry ? [registry] : []);
}

export function counter<L extends string>(
  registry: Registry | undefined,
  name: string,
  help: string,
  labelNames: readonly L[],
): Counter<L> {
  return registered(registry, name, (registers) => new Counter<L>({ name, help, labelNames, registers }));
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
  return registered(
    registry,
    name,
    (registers) =>
      new Gauge<L>({
        name,
        help,
        labelNames,
        registers,
        ...(value
          ? {
              collect(this: Gauge<L>) {
                this.set(value());
              },
            }
          : {}),
      }),
  );
}

export function histogram<L extends string>(
  registry: Registry | undefined,
  name: string,
  help: string,
  labelNames: readonly L[],
  buckets: number[],
): Histogram<L> {
  return registered(
    registry,
    name,
    (registers) => new Histogram<L>({ name, help, labelNames, buckets, registers }),
  );
}
