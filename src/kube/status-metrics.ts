/**
 * Gauges computed at scrape time from the informer caches and the dispatcher, for dashboards and
 * alerts (docs/metrics.md; charts/pko-notification-controller/files/prometheus-rules.yaml):
 *
 * - `pkonc_not_ready_objects{kind}`: Providers, Alerts and PullRequestPreviews in the cache whose
 *   `Ready` condition is not `True` (absent counts: not yet reconciled).
 * - `pkonc_not_ready_longest_seconds{kind}`: seconds since the `Ready` condition of the longest
 *   not-Ready object of that kind last changed (its `lastTransitionTime`), 0 when none is.
 * - `pkonc_deliveries_pending`: events waiting in delivery lanes (queued, being sent, or waiting
 *   for a retry's backoff).
 *
 * Labels are the kind only: never an object's name or namespace (docs/metrics.md, "Labels").
 */
import { Gauge, type Registry } from './prom.ts';
import type { Condition } from '../api/meta.ts';

/** A source of cached objects of one kind (an Informer's `list()`). */
export interface ReadinessSource {
  kind: 'Provider' | 'Alert' | 'PullRequestPreview';
  list(): readonly { status?: { conditions?: Condition[] } }[];
}

/** Registers the gauges on `registry`; `nowMs` is injected for tests (default `Date.now`). */
export function registerStatusMetrics(
  registry: Registry,
  opts: { sources: readonly ReadinessSource[]; pending: () => number; nowMs?: () => number },
): void {
  const now = opts.nowMs ?? Date.now;
  // A registry reused by a later controller (tests) reports that controller's objects.
  for (const n of ['pkonc_not_ready_objects', 'pkonc_not_ready_longest_seconds', 'pkonc_deliveries_pending'])
    registry.removeSingleMetric(n);
  const read = (): Map<string, { count: number; longestS: number }> => {
    const out = new Map<string, { count: number; longestS: number }>();
    for (const s of opts.sources) {
      let count = 0;
      let longestS = 0;
      for (const o of s.list()) {
        const ready = o.status?.conditions?.find((c) => c.type === 'Ready');
        if (ready?.status === 'True') continue;
        count++;
        const since = ready?.lastTransitionTime !== undefined ? Date.parse(ready.lastTransitionTime) : NaN;
        if (Number.isFinite(since)) longestS = Math.max(longestS, Math.max(0, (now() - since) / 1000));
      }
      out.set(s.kind, { count, longestS });
    }
    return out;
  };
  new Gauge({
    name: 'pkonc_not_ready_objects',
    help: 'Providers, Alerts and PullRequestPreviews whose Ready condition is not True, by kind.',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      for (const [kind, v] of read()) this.set({ kind }, v.count);
    },
  });
  new Gauge({
    name: 'pkonc_not_ready_longest_seconds',
    help: 'Seconds since the Ready condition of the longest not-Ready object of a kind changed; 0 when none.',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      for (const [kind, v] of read()) this.set({ kind }, Math.round(v.longestS));
    },
  });
  new Gauge({
    name: 'pkonc_deliveries_pending',
    help: 'Events waiting in delivery lanes: queued, being sent or waiting for a retry.',
    registers: [registry],
    collect() {
      this.set(opts.pending());
    },
  });
}
