/**
 * The Helm chart (charts/pko-notification-controller), rendered by the real helm (built from its
 * Go module, scripts/helm-build.sh): `helm lint` with the defaults and with every option on, what
 * `helm template` renders for both, values.schema.json refusing a typo, and the chart agreeing with
 * `kubectl kustomize config/…` on every object but names and labels — so the RBAC rules, the
 * admission policy, the CRDs and the Deployment cannot drift apart between the two installs. The
 * copies the chart carries (CRDs, dashboard, alert rules) are checked equal to their sources.
 */
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ROOT, kustomize } from '../support/kubectl.ts';
import { CHART, helm, helmTemplate, type Obj } from '../support/helm.ts';

const NS = 'pko-notification-system';
const version = (JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { version: string }).version;

interface Container {
  image: string;
  args: string[];
  env: { name: string; value?: string }[];
  ports: { name: string; containerPort: number }[];
  resources: unknown;
  securityContext: Record<string, unknown>;
}
interface PodSpec {
  serviceAccountName: string;
  securityContext: Record<string, unknown>;
  containers: Container[];
  nodeSelector?: Record<string, string>;
  tolerations?: unknown[];
  affinity?: unknown;
  imagePullSecrets?: unknown[];
}
const podSpec = (o: Obj): PodSpec => (o.spec as { template: { spec: PodSpec } }).template.spec;

const find = (objs: Obj[], kind: string, name?: string): Obj => {
  const o = objs.find((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  if (!o)
    throw new Error(
      `no ${kind} ${name ?? ''} in ${objs.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')}`,
    );
  return o;
};
const kinds = (objs: Obj[]): string[] => objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();

/** Every option on (values.yaml keys; README.md lists them). */
const EVERYTHING: Record<string, unknown> = {
  image: {
    repository: 'registry.example.com/platform/pkonc',
    tag: '9.9.9',
    digest: `sha256:${'a'.repeat(64)}`,
  },
  imagePullSecrets: [{ name: 'regcred' }],
  replicas: 3,
  leaderElection: { enabled: true, id: 'pkonc-shard1' },
  clusterName: 'prod-eu-1',
  watch: { namespace: 'team-a', labelSelector: 'sharding.fluxcd.io/key=shard1' },
  egress: {
    allowCIDRs: ['10.0.0.0/8', '192.168.0.0/16'],
    denyCIDRs: ['10.96.0.0/12'],
    allowHosts: ['*.github.com', 'hooks.slack.com'],
    denyHosts: ['metadata.google.internal'],
  },
  crossNamespaceRefs: true,
  extraArgs: ['--log-level=debug'],
  extraEnv: [{ name: 'HTTPS_PROXY', value: 'http://proxy.example.com:3128' }],
  heapMaxMiB: 400,
  resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '768Mi' } },
  terminationGracePeriodSeconds: 60,
  podAnnotations: { 'example.com/a': 'b' },
  podLabels: { team: 'platform' },
  priorityClassName: 'system-cluster-critical',
  nodeSelector: { 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'platform', effect: 'NoSchedule' }],
  affinity: {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchExpressions: [{ key: 'pool', operator: 'In', values: ['system'] }] }],
      },
    },
  },
  topologySpreadConstraints: [
    { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' },
  ],
  serviceAccount: { create: true, name: 'pkonc', annotations: { 'example.com/role': 'x' } },
  podDisruptionBudget: { enabled: true, maxUnavailable: 2 },
  metrics: {
    service: { enabled: true, annotations: { 'example.com/scrape': 'true' } },
    serviceMonitor: { enabled: true, interval: '15s', labels: { release: 'kube-prometheus-stack' } },
    prometheusRule: { enabled: true, labels: { release: 'kube-prometheus-stack' } },
    grafanaDashboard: { enabled: true, labels: { grafana_dashboard: '1' }, annotations: { folder: 'PKO' } },
  },
  previewWebhook: {
    enabled: true,
    maxBodyBytes: 2097152,
    service: { type: 'ClusterIP', port: 80, annotations: {} },
    ingress: {
      enabled: true,
      className: 'nginx',
      annotations: { 'cert-manager.io/cluster-issuer': 'letsencrypt' },
      hosts: ['hooks.example.com'],
      tls: [{ secretName: 'hooks-tls', hosts: ['hooks.example.com'] }],
    },
  },
  workspaceLogs: { clusterRole: true, namespaces: ['team-a', 'team-b'], clusterWide: true },
};

function valuesFile(values: Record<string, unknown>): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'pko-nc-chart-')), 'values.yaml');
  writeFileSync(file, stringify(values));
  return file;
}

/**
 * An object with what may differ between the chart and config/ taken out: labels and
 * annotations, and label selectors (the chart selects by release as well). Everything else —
 * rules, specs, args, CEL — stays.
 */
function normalize(o: Obj): unknown {
  const drop = (v: unknown, key: string): unknown => {
    if (Array.isArray(v)) return v.map((x) => drop(x, ''));
    if (v === null || typeof v !== 'object') return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (k === 'labels' || k === 'annotations' || k === 'matchLabels') continue;
      if (k === 'selector' && key === 'spec' && o.kind === 'Service') continue;
      out[k] = drop(x, k);
    }
    return out;
  };
  return drop(o, '');
}
const byKey = (objs: Obj[]): Map<string, unknown> =>
  new Map(objs.map((o) => [`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`, normalize(o)]));

describe('Helm chart', () => {
  it('passes helm lint with the defaults and with every option on', async () => {
    const def = await helm(['lint', '--strict', CHART]);
    expect(def.code, def.stdout + def.stderr).toBe(0);
    expect(def.stdout).toContain('0 chart(s) failed');
    const all = await helm(['lint', '--strict', CHART, '--values', valuesFile(EVERYTHING)]);
    expect(all.code, all.stdout + all.stderr).toBe(0);
  });

  it('has the version of the controller and carries the CRDs of crds/ unchanged', () => {
    const chart = parse(readFileSync(`${ROOT}/${CHART}/Chart.yaml`, 'utf8')) as {
      version: string;
      appVersion: string;
    };
    expect(chart.version).toBe(version);
    expect(chart.appVersion).toBe(version);
    const crds = readdirSync(`${ROOT}/crds`).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    expect(
      readdirSync(`${ROOT}/${CHART}/crds`).sort(),
      'cp crds/notification.pko.dev_*.yaml into the chart',
    ).toEqual(crds.sort());
    for (const f of crds) {
      expect(
        readFileSync(`${ROOT}/${CHART}/crds/${f}`, 'utf8'),
        `${CHART}/crds/${f} differs from crds/${f}`,
      ).toBe(readFileSync(`${ROOT}/crds/${f}`, 'utf8'));
    }
  });

  it('documents every value in README.md, and values.yaml passes its own schema', async () => {
    const values = parse(readFileSync(`${ROOT}/${CHART}/values.yaml`, 'utf8')) as Record<string, unknown>;
    const readme = readFileSync(`${ROOT}/${CHART}/README.md`, 'utf8');
    const leaves = (o: Record<string, unknown>, prefix: string): string[] =>
      Object.entries(o).flatMap(([k, v]) =>
        v !== null &&
        typeof v === 'object' &&
        !Array.isArray(v) &&
        Object.keys(v).length > 0 &&
        !/Context$|^resources$|labels$/.test(k)
          ? leaves(v as Record<string, unknown>, `${prefix}${k}.`)
          : [`${prefix}${k}`],
      );
    const keys = leaves(values, '');
    expect(keys.length).toBeGreaterThan(40);
    expect(keys.filter((k) => !readme.includes(`\`${k}\``))).toEqual([]);
    // The schema knows every top-level key, and the defaults pass it.
    const schema = JSON.parse(readFileSync(`${ROOT}/${CHART}/values.schema.json`, 'utf8')) as {
      properties: Record<string, unknown>;
    };
    for (const k of Object.keys(values)) expect(schema.properties, k).toHaveProperty(k);
    const lint = await helm(['lint', '--strict', CHART, '--values', `${CHART}/values.yaml`]);
    expect(lint.code, lint.stdout).toBe(0);
  });

  it('renders with the defaults: the objects of config/default, non-root, versioned image, nothing optional', async () => {
    const objs = await helmTemplate();
    expect(kinds(objs)).toEqual(
      [
        'ClusterRole/pko-notification-controller',
        'ClusterRoleBinding/pko-notification-controller',
        'Deployment/pko-notification-controller',
        'PodDisruptionBudget/pko-notification-controller',
        'Role/pko-notification-controller-leader-election',
        'RoleBinding/pko-notification-controller-leader-election',
        'Service/pko-notification-controller-metrics',
        'ServiceAccount/pko-notification-controller',
        'ValidatingAdmissionPolicy/pko-notification-controller-preview-overrides',
        'ValidatingAdmissionPolicyBinding/pko-notification-controller-preview-overrides',
        'ValidatingAdmissionPolicy/pko-notification-controller-drift-remediation',
        'ValidatingAdmissionPolicyBinding/pko-notification-controller-drift-remediation',
        'ValidatingAdmissionPolicy/pko-notification-controller-alert-sources',
        'ValidatingAdmissionPolicyBinding/pko-notification-controller-alert-sources',
      ].sort(),
    );
    const pod = podSpec(find(objs, 'Deployment'));
    const c = pod.containers[0]!;
    expect(c.image).toBe(`pko-notification-controller:${version}`);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532 });
    expect(c.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
    });
    // B14: Alerts stay in their namespace unless crossNamespaceRefs.
    expect(c.args).toEqual([
      '--leader-elect',
      '--metrics-bind-address=:8080',
      '--health-probe-bind-address=:8081',
      '--no-cross-namespace-refs=true',
    ]);
    for (const o of objs) expect(o.metadata.labels?.['app.kubernetes.io/managed-by'], o.kind).toBe('Helm');
    // Another release name: every name follows it, except the admission policy the controller
    // looks up by its fixed name.
    const other = await helmTemplate({ release: 'shard1', namespace: 'team-ops' });
    for (const o of other) {
      if (o.kind.startsWith('ValidatingAdmissionPolicy'))
        expect([
          'pko-notification-controller-preview-overrides',
          'pko-notification-controller-drift-remediation',
          'pko-notification-controller-alert-sources',
        ]).toContain(o.metadata.name);
      else expect(o.metadata.name, o.kind).toMatch(/^shard1-pko-notification-controller/);
      if (o.metadata.namespace !== undefined) expect(o.metadata.namespace).toBe('team-ops');
    }
  });

  it('renders every option where it belongs', async () => {
    const objs = await helmTemplate({ release: 'pkonc', values: EVERYTHING });
    const dep = find(objs, 'Deployment');
    expect((dep.spec as { replicas: number }).replicas).toBe(3);
    const pod = podSpec(dep);
    const c = pod.containers[0]!;
    expect(c.image).toBe(`registry.example.com/platform/pkonc:9.9.9@sha256:${'a'.repeat(64)}`);
    expect(c.args).toEqual([
      '--leader-elect',
      '--metrics-bind-address=:8080',
      '--health-probe-bind-address=:8081',
      '--no-cross-namespace-refs=false',
      '--leader-election-id=pkonc-shard1',
      '--cluster-name=prod-eu-1',
      '--watch-namespace=team-a',
      '--watch-label-selector=sharding.fluxcd.io/key=shard1',
      '--egress-allow-cidrs=10.0.0.0/8,192.168.0.0/16',
      '--egress-deny-cidrs=10.96.0.0/12',
      '--egress-allow-hosts=*.github.com,hooks.slack.com',
      '--egress-deny-hosts=metadata.google.internal',
      '--preview-webhook-bind-address=:8082',
      '--preview-webhook-max-body-bytes=2097152',
      '--log-level=debug',
    ]);
    expect(c.env).toEqual(
      expect.arrayContaining([
        { name: 'NODE_OPTIONS', value: '--max-old-space-size=400' },
        { name: 'HTTPS_PROXY', value: 'http://proxy.example.com:3128' },
      ]),
    );
    expect(c.resources).toEqual(EVERYTHING['resources']);
    expect(pod.serviceAccountName).toBe('pkonc');
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(pod.tolerations).toEqual(EVERYTHING['tolerations']);
    expect(pod.affinity).toEqual(EVERYTHING['affinity']);
    expect(pod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(
      (dep.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels[
        'team'
      ],
    ).toBe('platform');
    expect((find(objs, 'PodDisruptionBudget').spec as { maxUnavailable: number }).maxUnavailable).toBe(2);
    for (const o of objs.filter((x) => x.kind === 'ClusterRoleBinding' || x.kind === 'RoleBinding'))
      expect(o['subjects'], `${o.kind} ${o.metadata.name}`).toEqual([
        { kind: 'ServiceAccount', name: 'pkonc', namespace: NS },
      ]);

    // Monitoring: the ServiceMonitor selects the metrics Service; the rules and the dashboard are
    // the files of config/.
    const svc = find(objs, 'Service', 'pkonc-pko-notification-controller-metrics');
    const sm = find(objs, 'ServiceMonitor');
    const smSpec = sm.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string; interval: string }[];
    };
    for (const [k, v] of Object.entries(smSpec.selector.matchLabels))
      expect(svc.metadata.labels?.[k], k).toBe(v);
    expect(smSpec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', interval: '15s' }]);
    expect(sm.metadata.labels?.['release']).toBe('kube-prometheus-stack');
    const configRule = parse(
      readFileSync(`${ROOT}/config/components/prometheusrule/prometheusrule.yaml`, 'utf8'),
    ) as Obj;
    expect(find(objs, 'PrometheusRule').spec).toEqual(configRule.spec);
    const dashboard = find(objs, 'ConfigMap', 'pkonc-pko-notification-controller-dashboard');
    expect(dashboard.metadata.labels?.['grafana_dashboard']).toBe('1');
    expect(
      JSON.parse((dashboard['data'] as Record<string, string>)['pko-notification-controller.json']!),
    ).toEqual(JSON.parse(readFileSync(`${ROOT}/config/grafana/pko-notification-controller.json`, 'utf8')));

    // The preview webhook receiver: the container listens, the Service targets it, the Ingress
    // routes only /hooks/ to it.
    expect(c.ports).toEqual(
      expect.arrayContaining([{ name: 'webhook', containerPort: 8082, protocol: 'TCP' }]),
    );
    const hook = find(objs, 'Service', 'pkonc-pko-notification-controller-webhook');
    expect((hook.spec as { ports: unknown[] }).ports).toEqual([
      { name: 'webhook', port: 80, targetPort: 'webhook', protocol: 'TCP' },
    ]);
    const ing = find(objs, 'Ingress').spec as {
      ingressClassName: string;
      tls: unknown[];
      rules: { host: string; http: { paths: { path: string; backend: { service: { name: string } } }[] } }[];
    };
    expect(ing.ingressClassName).toBe('nginx');
    expect(ing.tls).toEqual([{ secretName: 'hooks-tls', hosts: ['hooks.example.com'] }]);
    expect(ing.rules.map((r) => r.host)).toEqual(['hooks.example.com']);
    expect(ing.rules[0]!.http.paths.map((p) => [p.path, p.backend.service.name])).toEqual([
      ['/hooks/', hook.metadata.name],
    ]);

    // Workspace logs: the ClusterRole, bound per namespace and cluster-wide.
    const wl = 'pkonc-pko-notification-controller-workspace-logs';
    find(objs, 'ClusterRole', wl);
    expect(
      objs.filter((o) => o.kind === 'RoleBinding' && o.metadata.name === wl).map((o) => o.metadata.namespace),
    ).toEqual(['team-a', 'team-b']);
    expect((find(objs, 'ClusterRoleBinding', wl)['roleRef'] as { name: string }).name).toBe(wl);
  });

  it('values.schema.json refuses a typo or a wrong type, naming it', async () => {
    const cases: [string, string, RegExp][] = [
      ['replica', '3', /additional properties 'replica' not allowed/],
      ['image.tga', '"1.0"', /at '\/image'.*additional properties 'tga' not allowed/s],
      ['metrics.serviceMonitor.enabeld', 'true', /additional properties 'enabeld' not allowed/],
      ['replicas', '"two"', /at '\/replicas'/],
      ['clusterName', '"Prod EU"', /at '\/clusterName'/],
      ['extraArgs', '["log-level=debug"]', /at '\/extraArgs\/0'/],
    ];
    for (const [key, value, want] of cases) {
      for (const cmd of ['template', 'install']) {
        const args =
          cmd === 'template'
            ? ['template', 'x', CHART, '--set-json', `${key}=${value}`]
            : ['install', 'x', CHART, '--dry-run=client', '--set-json', `${key}=${value}`];
        // install asks the real control plane first (`helm install` refuses before it creates anything).
        const res = await helm(args, { kubeconfig: inject('kubeconfig') });
        expect(res.code, `${cmd} ${key}=${value}`).not.toBe(0);
        expect(res.stderr, `${cmd} ${key}=${value}`).toMatch(
          /values don't meet the specifications of the schema/,
        );
        expect(res.stderr, `${cmd} ${key}=${value}`).toMatch(want);
      }
    }
    // The same keys spelled right render.
    await helmTemplate({ values: { replicas: 3, image: { tag: '1.0' }, clusterName: 'prod-eu-1' } });
  });

  it('refuses options that need another one, saying which', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ 'previewWebhook.ingress.enabled': true }, /set previewWebhook.enabled: true too/],
      [{ 'previewWebhook.enabled': true, 'previewWebhook.ingress.enabled': true }, /at least one host/],
      [{ 'workspaceLogs.namespaces': ['team-a'] }, /set workspaceLogs.clusterRole: true too/],
      [
        { 'metrics.service.enabled': false, 'metrics.serviceMonitor.enabled': true },
        /set metrics.service.enabled: true/,
      ],
      [{ 'serviceAccount.create': false }, /serviceAccount.name is required/],
    ];
    for (const [values, want] of cases)
      await expect(helmTemplate({ values }), JSON.stringify(values)).rejects.toThrow(want);
  });

  it('agrees with `kubectl kustomize config/default` on every object but names and labels', async () => {
    const chart = await helmTemplate({ includeCrds: true });
    const config = ((await kustomize('config/default')) as unknown as Obj[]).filter(
      (o) => o.kind !== 'Namespace',
    );
    const c = byKey(chart);
    const k = byKey(config);
    expect([...c.keys()].sort()).toEqual([...k.keys()].sort());
    for (const [key, want] of k) expect(c.get(key), key).toEqual(want);
    // What is compared is the substance: rules, CEL, container spec.
    const role = c.get('ClusterRole//pko-notification-controller') as { rules: unknown[] };
    expect(role.rules.length).toBeGreaterThan(5);
    const policy = c.get('ValidatingAdmissionPolicy//pko-notification-controller-preview-overrides') as {
      spec: { validations: unknown[] };
    };
    expect(policy.spec.validations.length).toBe(11);
    // A difference in substance is found (the comparison can fail).
    const edited = structuredClone(find(chart, 'ClusterRole'));
    (edited['rules'] as { verbs: string[] }[])[0]!.verbs.push('delete');
    expect(normalize(edited)).not.toEqual(k.get('ClusterRole//pko-notification-controller'));
  });

  it('agrees with config/prometheus, the prometheusrule component and config/workspace-logs on the optional objects', async () => {
    const chart = byKey(
      await helmTemplate({
        values: {
          'metrics.serviceMonitor.enabled': true,
          'metrics.prometheusRule.enabled': true,
          'workspaceLogs.clusterRole': true,
        },
      }),
    );
    const config = byKey([
      ...((await kustomize('config/prometheus')) as unknown as Obj[]),
      parse(readFileSync(`${ROOT}/config/components/prometheusrule/prometheusrule.yaml`, 'utf8')) as Obj,
      ...((await kustomize('config/workspace-logs')) as unknown as Obj[]),
    ]);
    for (const key of [
      `ServiceMonitor/${NS}/pko-notification-controller`,
      `PrometheusRule/${NS}/pko-notification-controller`,
      'ClusterRole//pko-notification-controller-workspace-logs',
    ]) {
      expect(config.has(key), key).toBe(true);
      expect(chart.get(key), key).toEqual(config.get(key));
    }
  });
});
