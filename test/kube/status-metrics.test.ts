/**
 * The scrape-time gauges of src/kube/status-metrics.ts: not-Ready counts and the longest time
 * not Ready per kind (from the Ready condition's lastTransitionTime), pending deliveries — read
 * from the sources at each scrape, labelled by kind only.
 */
import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import type { Condition } from '../../src/api/meta.ts';
import { registerStatusMetrics } from '../../src/kube/status-metrics.ts';

const NOW = Date.parse('2026-01-01T12:00:00Z');
const ready = (status: Condition['status'], since: string): { status: { conditions: Condition[] } } => ({
  status: {
    conditions: [{ type: 'Ready', status, reason: 'R', message: 'm', lastTransitionTime: since }],
  },
});

async function sample(r: Registry, name: string, kind?: string): Promise<number | undefined> {
  const m = (await r.getMetricsAsJSON()).find((x) => x.name === name);
  return m?.values.find((v) => kind === undefined || v.labels['kind'] === kind)?.value;
}

describe('status metrics', () => {
  it('counts objects whose Ready is not True and the longest time one has been so, per kind', async () => {
    const r = new Registry();
    let providers = [
      ready('True', '2026-01-01T11:00:00Z'),
      ready('False', '2026-01-01T11:30:00Z'),
      ready('Unknown', '2026-01-01T11:50:00Z'),
      {}, // not reconciled yet: not Ready, no time known
    ];
    let pending = 7;
    registerStatusMetrics(r, {
      sources: [
        { kind: 'Provider', list: () => providers },
        { kind: 'Alert', list: () => [ready('True', '2026-01-01T10:00:00Z')] },
      ],
      pending: () => pending,
      nowMs: () => NOW,
    });
    expect(await sample(r, 'pkonc_not_ready_objects', 'Provider')).toBe(3);
    expect(await sample(r, 'pkonc_not_ready_longest_seconds', 'Provider')).toBe(1800);
    expect(await sample(r, 'pkonc_not_ready_objects', 'Alert')).toBe(0);
    expect(await sample(r, 'pkonc_not_ready_longest_seconds', 'Alert')).toBe(0);
    expect(await sample(r, 'pkonc_deliveries_pending')).toBe(7);

    // Read again at the next scrape.
    providers = [ready('True', '2026-01-01T11:59:00Z')];
    pending = 0;
    expect(await sample(r, 'pkonc_not_ready_objects', 'Provider')).toBe(0);
    expect(await sample(r, 'pkonc_not_ready_longest_seconds', 'Provider')).toBe(0);
    expect(await sample(r, 'pkonc_deliveries_pending')).toBe(0);
    const text = await r.metrics();
    expect(text).not.toMatch(/name=|namespace=/);
  });

  it('registers again on a reused registry, reporting the later sources', async () => {
    const r = new Registry();
    registerStatusMetrics(r, { sources: [], pending: () => 1 });
    registerStatusMetrics(r, { sources: [], pending: () => 2 });
    expect(await sample(r, 'pkonc_deliveries_pending')).toBe(2);
  });
});
