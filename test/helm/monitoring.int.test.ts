/**
 * The Grafana dashboard (config/grafana/, the chart's files/) and the alert rules
 * (files/prometheus-rules.yaml, config/components/prometheusrule) query only metrics a running
 * controller serves: every metric name in every panel target, template query and alert
 * expression is among the names `/metrics` of a real controller process declares (its `# TYPE`
 * lines; a histogram's series are `_bucket`, `_sum` and `_count`). A renamed metric therefore
 * fails here instead of leaving an empty panel or an alert that never fires.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { startControllerProcess, stopAll } from '../support/controller-process.ts';
import { ROOT, kustomize } from '../support/kubectl.ts';
import { CHART } from '../support/helm.ts';

afterAll(async () => {
  await stopAll();
});

/** Longest PromQL expression read; ours are far shorter (a bound on the work per expression). */
const MAX_EXPR = 4096;
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'inf',
  'nan',
]);

/**
 * Metric names a PromQL expression selects: identifiers that are not functions (followed by
 * `(`), keywords, label names in by/without/on/ignoring lists, label matchers inside `{…}`,
 * string literals, durations, numbers or Grafana variables (`$…`).
 */
function promqlMetricNames(expr: string): string[] {
  if (expr.length > MAX_EXPR) throw new Error(`PromQL expression longer than ${MAX_EXPR} characters`);
  const s = expr
    .replace(/"(?:[^"\\]|\\.){0,512}"|'(?:[^'\\]|\\.){0,512}'/g, '""')
    .replace(/\{[^{}]{0,1024}\}/g, ' ')
    .replace(/\[[^[\]]{0,64}\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s{0,8}\([^()]{0,512}\)/g, ' ')
    .replace(/\$[A-Za-z_]{1,64}/g, ' ');
  const names = new Set<string>();
  for (const m of s.matchAll(/(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]{0,200})(\s{0,8}\()?/g)) {
    const id = m[1]!;
    if (m[2] !== undefined || KEYWORDS.has(id.toLowerCase())) continue;
    names.add(id);
  }
  return [...names].sort();
}

/** Names of the series a `/metrics` text can hold, from its `# TYPE` lines. */
function servedNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^# TYPE ([A-Za-z_:][A-Za-z0-9_:]{0,200}) (\w{1,16})$/gm)) {
    const [, name, type] = m as unknown as [string, string, string];
    out.add(name);
    if (type === 'histogram') for (const sfx of ['_bucket', '_sum', '_count']) out.add(name + sfx);
    if (type === 'summary') for (const sfx of ['_sum', '_count']) out.add(name + sfx);
  }
  return out;
}

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

/** (where, expression) of every query of the dashboard and the rules. */
function queries(): [string, string][] {
  const out: [string, string][] = [];
  const dashboard = JSON.parse(
    readFileSync(`${ROOT}/config/grafana/pko-notification-controller.json`, 'utf8'),
  ) as {
    panels: Panel[];
    templating: { list: { name: string; query?: string | { query: string } }[] };
  };
  const walk = (ps: Panel[]): void => {
    for (const p of ps) {
      for (const t of p.targets ?? [])
        if (t.expr !== undefined) out.push([`panel "${p.title ?? ''}"`, t.expr]);
      walk(p.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating.list) {
    const q = typeof v.query === 'string' ? v.query : v.query?.query;
    const m = q === undefined ? null : /^label_values\(\s{0,8}([^,]{1,256}),/.exec(q);
    if (m) out.push([`variable ${v.name}`, m[1]!]);
  }
  const rules = parse(readFileSync(`${ROOT}/${CHART}/files/prometheus-rules.yaml`, 'utf8')) as {
    groups: { rules: { alert: string; expr: string }[] }[];
  };
  for (const g of rules.groups) for (const r of g.rules) out.push([`alert ${r.alert}`, r.expr]);
  return out;
}

describe('dashboard and alert rules', () => {
  it('reads metric names out of PromQL, and only them', () => {
    expect(
      promqlMetricNames(
        'histogram_quantile(0.95, sum by (le, provider_type) (rate(pkonc_delivery_duration_seconds_bucket{job=~"$job", a="b{c}"}[$__rate_interval])))',
      ),
    ).toEqual(['pkonc_delivery_duration_seconds_bucket']);
    expect(
      promqlMetricNames(
        'max(pkonc_deliveries_pending) > 100 and sum(rate(pkonc_delivery_attempts_total{outcome!="success"}[15m])) > 0',
      ),
    ).toEqual(['pkonc_deliveries_pending', 'pkonc_delivery_attempts_total']);
    expect(promqlMetricNames('sum(changes(pkonc_leader[1h])) > 6')).toEqual(['pkonc_leader']);
    expect(() => promqlMetricNames('x'.repeat(MAX_EXPR + 1))).toThrow(/longer than/);
  });

  it('queries only metrics that /metrics of a running controller serves', async () => {
    const run = randomBytes(4).toString('hex');
    const proc = await startControllerProcess({
      kubeconfig: inject('kubeconfig'),
      // Serve nothing of the other files; the preview webhook receiver on, so its metric exists.
      args: [
        `--watch-label-selector=pko-nc.test/monitoring=${run}`,
        '--preview-webhook-bind-address=127.0.0.1:0',
      ],
    });
    await proc.waitReady(30_000);
    const res = await fetch(`http://127.0.0.1:${proc.metricsPort}/metrics`);
    expect(res.status).toBe(200);
    const served = servedNames(await res.text());
    expect(served.has('pkonc_deliveries_total')).toBe(true);

    const all = queries();
    expect(all.filter(([w]) => w.startsWith('panel')).length).toBeGreaterThan(20);
    expect(all.filter(([w]) => w.startsWith('alert')).length).toBeGreaterThanOrEqual(4);
    const missing: string[] = [];
    const used = new Set<string>();
    for (const [where, expr] of all) {
      const names = promqlMetricNames(expr);
      expect(names.length, `${where}: no metric in ${expr}`).toBeGreaterThan(0);
      for (const n of names) {
        used.add(n);
        if (!served.has(n)) missing.push(`${where}: ${n}`);
      }
    }
    expect(missing).toEqual([]);
    // The list: deliveries by result, retries, queue depth, ledger bytes, previews,
    // readiness and the leader all appear.
    for (const n of [
      'pkonc_deliveries_total',
      'pkonc_delivery_attempts_total',
      'pkonc_deliveries_pending',
      'pkonc_workqueue_depth',
      'pkonc_ledger_write_bytes_total',
      'pkonc_informer_objects',
      'pkonc_preview_webhook_requests_total',
      'pkonc_not_ready_longest_seconds',
      'pkonc_leader',
    ])
      expect(used.has(n), n).toBe(true);
    // A name the controller does not serve is caught.
    expect(promqlMetricNames('rate(pkonc_no_such_metric_total[5m])').filter((n) => !served.has(n))).toEqual([
      'pkonc_no_such_metric_total',
    ]);

    // config/grafana builds the sidecar's ConfigMap from the same JSON.
    const cm = (await kustomize('config/grafana')) as { kind: string; data: Record<string, string> }[];
    expect(cm.map((o) => o.kind)).toEqual(['ConfigMap']);
    expect(JSON.parse(cm[0]!.data['pko-notification-controller.json']!)).toEqual(
      JSON.parse(readFileSync(`${ROOT}/${CHART}/files/grafana-dashboard.json`, 'utf8')),
    );

    proc.kill('SIGTERM');
    expect((await proc.exited).code).toBe(0);
  });
});
