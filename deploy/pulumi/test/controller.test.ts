/**
 * The Pulumi program under Pulumi's runtime mocks (no engine, no cluster, no provider plugin):
 * every resource it registers is recorded and compared with `kubectl kustomize config/default`
 * (kubectl built from its Go module by scripts/kubectl-build.sh, cached), object by object.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as pulumi from '@pulumi/pulumi';
import { parseAllDocuments } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
}

const registered: { type: string; name: string; inputs: Record<string, unknown> }[] = [];

pulumi.runtime.setMocks(
  {
    newResource(args) {
      registered.push({ type: args.type, name: args.name, inputs: args.inputs as Record<string, unknown> });
      return { id: `${args.name}-id`, state: args.inputs as Record<string, unknown> };
    },
    call(args) {
      throw new Error(`unexpected provider call ${args.token}: the program must not invoke functions`);
    },
  },
  'pko-notification-controller',
  'test',
  true,
);

// Imported after setMocks, as Pulumi's testing guide requires.
const { PkoNotificationController, releaseVersion } = await import('../controller.ts');

/** Registers the component and resolves with the Kubernetes objects it created. */
async function render(
  name: string,
  args: ConstructorParameters<typeof PkoNotificationController>[1] = {},
): Promise<K8sObject[]> {
  const before = registered.length;
  const c = new PkoNotificationController(name, args);
  await new Promise<void>((resolve) => pulumi.all(c.children.map((r) => r.urn)).apply(() => resolve()));
  return registered
    .slice(before)
    .filter((r) => r.type.startsWith('kubernetes:'))
    .map((r) => strip(r.inputs) as K8sObject);
}

/** Drops `undefined` members (the SDK passes every optional input through). */
function strip(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(strip);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => [k, strip(x)]),
    );
  }
  return v;
}

const key = (o: K8sObject): string => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/** Same object up to the one label that names the tool (`managed-by`: kustomize vs pulumi). */
function normalise(o: K8sObject): K8sObject {
  const copy = structuredClone(o);
  if (copy.metadata.labels) delete copy.metadata.labels['app.kubernetes.io/managed-by'];
  return copy;
}

let kubectl: string;

/** `kubectl kustomize <dir>` as objects. */
function kustomize(dir: string): K8sObject[] {
  const text = execFileSync(kubectl, ['kustomize', `${REPO}${dir}`], { encoding: 'utf8' });
  return parseAllDocuments(text).map((d) => d.toJS() as K8sObject);
}

beforeAll(() => {
  // Prints the cached binary's path; builds it first when missing (minutes, once).
  kubectl = execFileSync('bash', [`${REPO}scripts/kubectl-build.sh`], { encoding: 'utf8' }).trim();
}, 900_000);

describe('Pulumi program', () => {
  it.each([
    { dir: 'config/default', args: {} },
    { dir: 'config/prometheus', args: { serviceMonitor: true } },
  ])('creates exactly the objects of $dir, field for field', async ({ dir, args }) => {
    const want = kustomize(dir);
    const objects = await render(`same-${dir.replace('/', '-')}`, args);
    expect(objects.map(key).sort()).toEqual(want.map(key).sort());
    const byKey = new Map(objects.map((o) => [key(o), o]));
    for (const w of want) {
      const got = byKey.get(key(w));
      expect.soft(got && normalise(got), key(w)).toEqual(normalise(w));
    }
    for (const o of objects) expect(o.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('pulumi');
  });

  it('deploys the image of this release and two replicas with the measured heap bound', async () => {
    const deployment = (await render('image')).find((o) => o.kind === 'Deployment');
    const spec = deployment?.['spec'] as {
      replicas: number;
      template: { spec: { containers: { image: string; env: { name: string; value?: string }[] }[] } };
    };
    expect(spec.replicas).toBe(2);
    const container = spec.template.spec.containers[0];
    expect(container?.image).toBe(`pko-notification-controller:${releaseVersion()}`);
    expect(container?.image).not.toMatch(/:latest$/);
    expect(container?.env.find((e) => e.name === 'NODE_OPTIONS')?.value).toBe('--max-old-space-size=160');
  });

  it('moves every namespaced object and the RBAC subjects with `namespace`; passes image, cluster name, ServiceMonitor, crossNamespaceRefs', async () => {
    const objects = await render('custom', {
      namespace: 'ops',
      image: 'registry.example/pkonc:1.2.3',
      clusterName: 'prod-eu',
      serviceMonitor: true,
      crossNamespaceRefs: true,
    });
    const clusterScoped = [
      'Namespace',
      'CustomResourceDefinition',
      'ClusterRole',
      'ClusterRoleBinding',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
    ];
    const namespaced = objects.filter((o) => !clusterScoped.includes(o.kind));
    expect(namespaced.map((o) => o.metadata.namespace)).toEqual(namespaced.map(() => 'ops'));
    expect(objects.find((o) => o.kind === 'Namespace')?.metadata.name).toBe('ops');
    for (const binding of objects.filter(
      (o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding',
    )) {
      expect(binding['subjects']).toEqual([
        { kind: 'ServiceAccount', name: 'pko-notification-controller', namespace: 'ops' },
      ]);
    }
    const monitor = objects.find((o) => o.kind === 'ServiceMonitor');
    const service = objects.find((o) => o.kind === 'Service');
    // The ServiceMonitor selects the metrics Service by its labels and scrapes its named port.
    const sel = (monitor?.['spec'] as { selector: { matchLabels: Record<string, string> } }).selector
      .matchLabels;
    expect(Object.keys(sel).length).toBeGreaterThan(0);
    for (const [k, v] of Object.entries(sel)) expect(service?.metadata.labels?.[k]).toBe(v);
    const ports = (service?.['spec'] as { ports: { name: string }[] }).ports.map((p) => p.name);
    const endpoints = (monitor?.['spec'] as { endpoints: { port: string }[] }).endpoints.map((e) => e.port);
    expect(ports).toEqual(endpoints);
    const container = (
      objects.find((o) => o.kind === 'Deployment')?.['spec'] as {
        template: { spec: { containers: { image: string; args: string[] }[] } };
      }
    ).template.spec.containers[0];
    expect(container?.image).toBe('registry.example/pkonc:1.2.3');
    expect(container?.args).toContain('--cluster-name=prod-eu');
    // B14: opened only when asked (the default, =true, is config/default's: the test above).
    expect(container?.args).toContain('--no-cross-namespace-refs=false');
    expect(container?.args).not.toContain('--no-cross-namespace-refs=true');
  });
});
