/**
 * The parts of prom-client the controller uses, loaded from their own files instead of the
 * package's index. The index also loads the Pushgateway client and the cluster-mode aggregator
 * (node:cluster), neither used here: in a fresh Node 24 (`--max-semi-space-size=2`) 19 MiB of
 * resident memory at start against 13 MiB for these, default metrics included — less inside the
 * controller, which loads much of the same anyway (docs/benchmarks.md, issue 21's seventh pass).
 *
 * Values come from prom-client's files (no `exports` map in prom-client 15); types from its
 * declarations. prom-client is pinned to one version in package.json, and test/library-files.test.ts
 * checks that every value here is the one the package's index exports: an upgrade that moves a
 * file fails that test, not the controller.
 */
import { createRequire } from 'node:module';
import type * as Prom from 'prom-client';

const load = createRequire(import.meta.url);

export const Registry = load('prom-client/lib/registry.js') as typeof Prom.Registry;
export type Registry = Prom.Registry;
export const Counter = load('prom-client/lib/counter.js') as typeof Prom.Counter;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge = load('prom-client/lib/gauge.js') as typeof Prom.Gauge;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram = load('prom-client/lib/histogram.js') as typeof Prom.Histogram;
export type Histogram<T extends string = string> = Prom.Histogram<T>;
/** prom-client's process and Node.js metrics (`process_cpu_seconds_total`, `nodejs_heap_*`, …). */
export const collectDefaultMetrics = load(
  'prom-client/lib/defaultMetrics.js',
) as typeof Prom.collectDefaultMetrics;
