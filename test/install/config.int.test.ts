/**
 * Install: `kubectl apply -k config/default` — the real kubectl (built from its Go module) against
 * the real test control plane — creates every object and the API server accepts the Deployment
 * with strict field validation and without a PodSecurity (restricted) warning. What the
 * kustomization renders is checked first: versioned image, probes, resources, heap bound, metrics
 * Service, PodDisruptionBudget, RBAC subjects.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { KubernetesObjectApi } from '@kubernetes/client-node';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { ROOT, kubectl, kustomize } from '../support/kubectl.ts';
import { loadConfig } from '../../src/config.ts';

const NS = 'pko-notification-system';
const version = (JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { version: string }).version;

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
}

interface Container {
  name: string;
  image: string;
  imagePullPolicy: string;
  args: string[];
  env: { name: string; value?: string; valueFrom?: unknown }[];
  ports: { name: string; containerPort: number }[];
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
  resources: { requests: Record<string, string>; limits: Record<string, string> };
}

interface DeploymentSpec {
  replicas: number;
  selector: { matchLabels: Record<string, string> };
  template: {
    metadata: { labels: Record<string, string> };
    spec: { serviceAccountName: string; containers: Container[] };
  };
}

const find = (objs: Obj[], kind: string, name?: string): Obj => {
  const o = objs.find((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  if (!o) throw new Error(`no ${kind} ${name ?? ''} in the rendered objects`);
  return o;
};

describe('config/default', () => {
  it('renders the versioned image, probes, resources, heap bound, metrics Service, PDB and RBAC for one namespace', async () => {
    const objs = (await kustomize('config/default')) as unknown as Obj[];
    const kinds = objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kinds).toEqual(
      [
        'ClusterRole/pko-notification-controller',
        'ClusterRoleBinding/pko-notification-controller',
        'CustomResourceDefinition/alerts.notification.pko.dev',
        'CustomResourceDefinition/deliveryledgers.notification.pko.dev',
        'CustomResourceDefinition/driftdetections.notification.pko.dev',
        'CustomResourceDefinition/providers.notification.pko.dev',
        'CustomResourceDefinition/pullrequestpreviews.notification.pko.dev',
        'Deployment/pko-notification-controller',
        `Namespace/${NS}`,
        'PodDisruptionBudget/pko-notification-controller',
        'Role/pko-notification-controller-leader-election',
        'RoleBinding/pko-notification-controller-leader-election',
        'Service/pko-notification-controller-metrics',
        'ServiceAccount/pko-notification-controller',
        'ValidatingAdmissionPolicy/pko-notification-controller-alert-sources',
        'ValidatingAdmissionPolicy/pko-notification-controller-drift-remediation',
        'ValidatingAdmissionPolicy/pko-notification-controller-preview-overrides',
        'ValidatingAdmissionPolicyBinding/pko-notification-controller-alert-sources',
        'ValidatingAdmissionPolicyBinding/pko-notification-controller-drift-remediation',
        'ValidatingAdmissionPolicyBinding/pko-notification-controller-preview-overrides',
      ].sort(),
    );
    const clusterScoped = new Set([
      'Namespace',
      'CustomResourceDefinition',
      'ClusterRole',
      'ClusterRoleBinding',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
    ]);
    for (const o of objs) {
      expect(o.metadata.namespace, `${o.kind} ${o.metadata.name}`).toBe(
        clusterScoped.has(o.kind) ? undefined : NS,
      );
    }

    const dep = find(objs, 'Deployment').spec as unknown as DeploymentSpec;
    expect(dep.replicas).toBe(2);
    const c = dep.template.spec.containers[0]!;
    expect(c.image).toBe(`pko-notification-controller:${version}`);
    expect(c.imagePullPolicy).toBe('IfNotPresent');
    expect(c.args).toContain('--leader-elect');
    // B14: Alerts stay in their namespace, explicitly (and loadConfig reads it so).
    expect(c.args).toContain('--no-cross-namespace-refs=true');
    expect(loadConfig(c.args, {}).noCrossNamespaceRefs).toBe(true);
    expect(c.env.find((e) => e.name === 'NODE_OPTIONS')?.value).toBe('--max-old-space-size=160');
    expect(c.env.map((e) => e.name)).toEqual(expect.arrayContaining(['POD_NAMESPACE', 'POD_NAME']));
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'probes' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'probes' });
    expect(c.resources.limits['memory']).toBe('384Mi');
    expect(c.resources.requests['memory']).toBe('96Mi');
    // Ports named by the probes, the Service and the args agree.
    expect(c.ports).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'metrics', containerPort: 8080 }),
        expect.objectContaining({ name: 'probes', containerPort: 8081 }),
      ]),
    );
    expect(c.args).toEqual(
      expect.arrayContaining(['--metrics-bind-address=:8080', '--health-probe-bind-address=:8081']),
    );

    const podLabels = dep.template.metadata.labels;
    const selects = (sel: Record<string, string>): boolean =>
      Object.entries(sel).every(([k, v]) => podLabels[k] === v) && Object.keys(sel).length > 0;
    expect(selects(dep.selector.matchLabels)).toBe(true);
    const svc = find(objs, 'Service').spec as {
      selector: Record<string, string>;
      ports: { targetPort: string }[];
    };
    expect(selects(svc.selector)).toBe(true);
    expect(svc.ports.map((p) => p.targetPort)).toEqual(['metrics']);
    const pdb = find(objs, 'PodDisruptionBudget').spec as {
      maxUnavailable: number;
      selector: { matchLabels: Record<string, string> };
    };
    expect(selects(pdb.selector.matchLabels)).toBe(true);
    expect(pdb.maxUnavailable).toBe(1);

    const sa = find(objs, 'ServiceAccount');
    expect(dep.template.spec.serviceAccountName).toBe(sa.metadata.name);
    for (const b of [find(objs, 'ClusterRoleBinding'), find(objs, 'RoleBinding')]) {
      expect(b['subjects']).toEqual([{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: NS }]);
    }
  });

  it('config/prometheus adds a ServiceMonitor that selects the metrics Service and scrapes its port', async () => {
    const objs = (await kustomize('config/prometheus')) as unknown as Obj[];
    const sm = find(objs, 'ServiceMonitor');
    const svc = find(objs, 'Service');
    expect(sm.metadata.namespace).toBe(NS);
    const spec = sm.spec as {
      selector: { matchLabels: Record<string, string> };
      endpoints: { port: string }[];
    };
    for (const [k, v] of Object.entries(spec.selector.matchLabels)) expect(svc.metadata.labels?.[k]).toBe(v);
    expect(spec.endpoints.map((e) => e.port)).toEqual(['metrics']);
    expect(objs.length).toBe((await kustomize('config/default')).length + 1);
  });

  it('`kubectl apply -k config/default` creates everything; the Deployment passes strict validation and PodSecurity restricted', async () => {
    const kubeconfig = inject('kubeconfig');
    const res = await kubectl(['apply', '-k', 'config/default'], { kubeconfig });
    expect(res.stderr).not.toMatch(/would violate PodSecurity/);
    expect(res.stderr).not.toMatch(/unknown field/i);
    expect(res.code, res.stderr).toBe(0);

    const rendered = (await kustomize('config/default')) as unknown as Obj[];
    const api = KubernetesObjectApi.makeApiClient(kubeConfig('admin'));
    type Stored = Obj & { metadata: { resourceVersion?: string } };
    const read = async (o: Obj): Promise<Stored> => {
      const ref = {
        apiVersion: o.apiVersion,
        kind: o.kind,
        metadata: {
          name: o.metadata.name,
          ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
        },
      };
      return (await api.read(ref)) as unknown as Stored;
    };
    const versions = new Map<string, string>();
    for (const o of rendered) {
      const stored = await read(o);
      expect(stored.metadata.labels?.['app.kubernetes.io/part-of'], `${o.kind} ${o.metadata.name}`).toBe(
        'pko-notification-controller',
      );
      versions.set(`${o.kind}/${o.metadata.name}`, stored.metadata.resourceVersion ?? '');
    }
    const want = (find(rendered, 'Deployment').spec as unknown as DeploymentSpec).template.spec
      .containers[0]!;
    const got = ((await read(find(rendered, 'Deployment'))).spec as unknown as DeploymentSpec).template.spec
      .containers[0]!;
    expect(got).toMatchObject(want);

    // Applying again changes nothing (kubectl still reports the PodDisruptionBudget "configured":
    // its selector's patch strategy is `replace`, so client-side apply always sends a patch, which
    // leaves the object as it was) and `kubectl diff` finds no difference.
    const again = await kubectl(['apply', '-k', 'config/default'], { kubeconfig });
    expect(again.code, again.stderr).toBe(0);
    for (const o of rendered) {
      const stored = await read(o);
      expect(stored.metadata.resourceVersion, `${o.kind} ${o.metadata.name}`).toBe(
        versions.get(`${o.kind}/${o.metadata.name}`),
      );
    }
    const diff = await kubectl(['diff', '-k', 'config/default'], { kubeconfig });
    expect(diff.code, diff.stdout + diff.stderr).toBe(0);

    // The CRDs are served.
    await waitFor(
      async () => {
        const r = await kubectl(['get', 'providers.notification.pko.dev,alerts.notification.pko.dev', '-A'], {
          kubeconfig,
        });
        return r.code === 0;
      },
      { what: 'kubectl get providers,alerts' },
    );
  }, 120_000);

  it('the PodSecurity check above can fail: a pod template without the securityContext draws the warning', async () => {
    const ns = await createTestNamespace('install-psa');
    const kubeconfig = inject('kubeconfig');
    const label = await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/warn=restricted'], {
      kubeconfig,
    });
    expect(label.code, label.stderr).toBe(0);
    const objs = (await kustomize('config/default')) as unknown as Obj[];
    const dep = structuredClone(find(objs, 'Deployment'));
    dep.metadata.namespace = ns;
    const spec = dep.spec as unknown as DeploymentSpec;
    delete (spec.template.spec as Record<string, unknown>)['securityContext'];
    delete (spec.template.spec.containers[0] as unknown as Record<string, unknown>)['securityContext'];
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const dir = mkdtempSync('/tmp/pko-nc-psa-');
    writeFileSync(`${dir}/deployment.json`, JSON.stringify(dep));
    const res = await kubectl(['apply', '-f', `${dir}/deployment.json`], { kubeconfig });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(/would violate PodSecurity "restricted:latest"/);
  });
});
