/**
 * `helm install` of the chart on the real control plane (kube-apiserver + etcd; no kubelet, so
 * the controller runs as a real process with what the release installed): the CRDs are served,
 * the release's objects are stored as rendered, its pod template passes PodSecurity `restricted`,
 * a TokenRequest token of the release's
 * ServiceAccount runs the controller with the Deployment's own args (cluster name, shard label
 * selector, Lease name from values) and NODE_OPTIONS through a full delivery — Ready, leader,
 * Provider + Alert Ready, an Update delivered, the DeliveryLedger written, no call refused — and
 * calls outside the chart's rules are denied (as test/install/rbac.int.test.ts shows for
 * config/). The optional workspace-logs binding grants pods/log in its namespace only. The
 * admission policy, fixed-name and cluster-wide, is already installed by other test files on this
 * control plane, so the release leaves it out and the API server validates the chart's copy
 * under another name (dry run); test/helm/chart.int.test.ts shows it equal to config/admission.
 * `helm upgrade` and `helm uninstall` end the release; the CRDs stay (Helm never deletes them).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { KubernetesObjectApi } from '@kubernetes/client-node';
import { parseAllDocuments, stringify } from 'yaml';
import { createTestNamespace, kubeConfig, serviceAccountKubeconfig, waitFor } from '../support/cluster.ts';
import { Objects } from '../support/controller.ts';
import { startControllerProcess, stopAll } from '../support/controller-process.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { kubectl } from '../support/kubectl.ts';
import { CHART, helm, type Obj } from '../support/helm.ts';
import { errorStatusCode, kubeRequest, objectPath, type KubeRequest } from '../../src/kube/client.ts';
import { GROUP, VERSION } from '../../src/api/v1alpha1.ts';
import { LEDGER_PLURAL } from '../../src/delivery/ledger.ts';

const SHA = '1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d';

let receiver: TestReceiver | undefined;
afterAll(async () => {
  await stopAll();
  await receiver?.close();
});

describe('helm install on the real control plane', () => {
  it('installs a release whose ServiceAccount runs the controller through a delivery, with nothing more', async () => {
    const kubeconfig = inject('kubeconfig');
    const admin = kubeConfig('admin');
    const run = randomBytes(4).toString('hex');
    const ns = await createTestNamespace('helm');
    const tenant = await createTestNamespace('helm-tenant');
    const release = `pkonc-${run}`;
    const shardKey = 'pko-nc.test/helm';
    const values = {
      clusterName: `helm-${run}`,
      watch: { labelSelector: `${shardKey}=${run}` },
      leaderElection: { enabled: true, id: `pkonc-${run}` },
      // Cluster-wide and fixed-name: already installed on this control plane by other files.
      admissionPolicy: { enabled: false },
      workspaceLogs: { clusterRole: true, namespaces: [tenant] },
      metrics: { grafanaDashboard: { enabled: true } },
    };
    const valuesFile = path.join(mkdtempSync(path.join(tmpdir(), 'pko-nc-helm-values-')), 'values.yaml');
    writeFileSync(valuesFile, stringify(values));

    // --- install ---------------------------------------------------------------------------------
    const install = await helm(['install', release, CHART, '--namespace', ns, '--values', valuesFile], {
      kubeconfig,
    });
    expect(install.code, install.stderr).toBe(0);
    expect(install.stdout).toContain('STATUS: deployed');
    // Every object of the release is stored as rendered.
    const manifest = await helm(['get', 'manifest', release, '--namespace', ns], { kubeconfig });
    expect(manifest.code, manifest.stderr).toBe(0);
    const objs = parseAllDocuments(manifest.stdout)
      .map((d) => d.toJS() as Obj | null)
      .filter((o): o is Obj => o !== null);
    expect(objs.map((o) => o.kind).sort()).toEqual(
      [
        'ClusterRole',
        'ClusterRole',
        'ClusterRoleBinding',
        'ConfigMap',
        'Deployment',
        'PodDisruptionBudget',
        'Role',
        'RoleBinding',
        'RoleBinding',
        'Service',
        'ServiceAccount',
      ].sort(),
    );
    const api = KubernetesObjectApi.makeApiClient(admin);
    const read = (o: Obj): Promise<Obj> =>
      api.read({
        apiVersion: o.apiVersion,
        kind: o.kind,
        metadata: {
          name: o.metadata.name,
          ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
        },
      }) as unknown as Promise<Obj>;
    for (const o of objs) {
      const stored = await read(o);
      expect(stored.metadata.annotations?.['meta.helm.sh/release-name'], `${o.kind} ${o.metadata.name}`).toBe(
        release,
      );
    }
    // The CRDs are served (installed from the chart's crds/ unless present).
    for (const plural of ['providers', 'alerts', 'pullrequestpreviews', 'deliveryledgers']) {
      const r = await kubectl(['get', `${plural}.${GROUP}`, '-A'], { kubeconfig });
      expect(r.code, `${plural}: ${r.stderr}`).toBe(0);
    }

    // The chart's admission policies and bindings are accepted by this API server (dry run,
    // renamed: the real ones exist already).
    for (const file of ['admission-policy.yaml', 'alert-sources-admission-policy.yaml']) {
      const template = await helm([
        'template',
        release,
        CHART,
        '--namespace',
        ns,
        '--show-only',
        `templates/${file}`,
      ]);
      expect(template.code, template.stderr).toBe(0);
      const admission = parseAllDocuments(template.stdout).map((d) => d.toJS() as Obj);
      expect(admission.map((o) => o.kind)).toEqual([
        'ValidatingAdmissionPolicy',
        'ValidatingAdmissionPolicyBinding',
      ]);
      const renamed = `pkonc-helm-dry-${run}`;
      for (const o of admission) {
        o.metadata.name = renamed;
        if (o.kind === 'ValidatingAdmissionPolicyBinding')
          (o.spec as Record<string, unknown>)['policyName'] = renamed;
        const plural =
          o.kind === 'ValidatingAdmissionPolicy'
            ? 'validatingadmissionpolicies'
            : 'validatingadmissionpolicybindings';
        await kubeRequest(admin, {
          method: 'POST',
          path: objectPath({ group: 'admissionregistration.k8s.io', version: 'v1', plural }),
          query: { dryRun: 'All', fieldValidation: 'Strict' },
          body: o,
        });
      }
    }

    // The Deployment as installed passes PodSecurity `restricted` (helm shows no API warnings, so
    // its pod template is sent again by kubectl as a server-side dry run, renamed); without the
    // chart's security contexts the same check warns.
    const psa = async (edit: (d: Obj) => void): Promise<string> => {
      const d = structuredClone(objs.find((o) => o.kind === 'Deployment')!);
      d.metadata = { name: `psa-${run}`, namespace: ns };
      edit(d);
      const file = path.join(mkdtempSync(path.join(tmpdir(), 'pko-nc-helm-psa-')), 'deployment.json');
      writeFileSync(file, JSON.stringify(d));
      const r = await kubectl(['create', '--dry-run=server', '-f', file], { kubeconfig });
      expect(r.code, r.stderr).toBe(0);
      return r.stderr;
    };
    const labelled = await kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/warn=restricted'], {
      kubeconfig,
    });
    expect(labelled.code, labelled.stderr).toBe(0);
    expect(await psa(() => undefined)).not.toMatch(/would violate PodSecurity/);
    expect(
      await psa((d) => {
        const spec = (
          d.spec as {
            template: { spec: { securityContext?: unknown; containers: { securityContext?: unknown }[] } };
          }
        ).template.spec;
        delete spec.securityContext;
        delete spec.containers[0]!.securityContext;
      }),
    ).toMatch(/would violate PodSecurity "restricted:latest"/);

    // --- the release's ServiceAccount, by TokenRequest ---------------------------------------------
    const dep = objs.find((o) => o.kind === 'Deployment')!;
    const pod = (
      dep.spec as {
        template: {
          spec: {
            serviceAccountName: string;
            containers: { args: string[]; env: { name: string; value?: string }[] }[];
          };
        };
      }
    ).template.spec;
    const { file: saKubeconfig, kc: saKc } = await serviceAccountKubeconfig(ns, pod.serviceAccountName);

    // --- the controller as the release runs it ------------------------------------------------------
    const container = pod.containers[0]!;
    expect(container.args).toEqual(
      expect.arrayContaining([
        '--leader-elect',
        `--leader-election-id=pkonc-${run}`,
        `--cluster-name=helm-${run}`,
        `--watch-label-selector=${shardKey}=${run}`,
      ]),
    );
    const nodeOptions = container.env.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '';
    expect(nodeOptions).toBe('--max-old-space-size=160');
    const proc = await startControllerProcess({
      kubeconfig: saKubeconfig,
      // The pod's fixed ports become loopback ports of our own (later flags win).
      args: [
        ...container.args,
        '--metrics-bind-address=127.0.0.1:0',
        '--health-probe-bind-address=127.0.0.1:0',
      ],
      env: { NODE_OPTIONS: nodeOptions, POD_NAMESPACE: ns, POD_NAME: `${release}-0` },
    });
    await proc.waitForLog((r) => r['msg'] === 'became leader', 30_000);
    await proc.waitReady(30_000);
    const lease = await kubeRequest<{ spec: { holderIdentity: string } }>(admin, {
      method: 'GET',
      path: objectPath({
        group: 'coordination.k8s.io',
        version: 'v1',
        plural: 'leases',
        namespace: ns,
        name: `pkonc-${run}`,
      }),
    });
    expect(lease.spec.holderIdentity).not.toBe('');

    // --- a full delivery ------------------------------------------------------------------------------
    receiver = await startReceiver();
    const obj = new Objects(tenant);
    const labels = { [shardKey]: run };
    await obj.secret('hook', { address: `${receiver.url}/hook` });
    await obj.provider('hook', { type: 'generic', secretRef: { name: 'hook' } }, labels);
    await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] }, labels);
    await obj.waitReady('providers', 'hook');
    await obj.waitReady('alerts', 'all');
    const sim = new PkoSimulator(admin, tenant, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
    const reasons = (): string[] =>
      receiver!.requests.map((q) => (JSON.parse(q.body) as { reason: string }).reason);
    const delivered = (reason: string): Promise<true> =>
      waitFor(() => Promise.resolve(reasons().includes(reason) ? (true as const) : undefined), {
        timeoutMs: 30_000,
        what: `${reason} at the receiver`,
      });
    const update = await sim.startRun('app', { type: 'up', commit: SHA });
    await delivered('UpdateStarted');
    await sim.finishRun(update, 'succeeded');
    await delivered('UpdateSucceeded');
    const alert = await waitFor(
      async () => {
        const a = await obj.get('alerts', 'all');
        return (a.status?.lastDelivery ?? []).length > 0 ? a : undefined;
      },
      { what: 'Alert status.lastDelivery' },
    );
    expect(alert.status?.lastDelivery?.[0]?.result).toBe('Delivered');
    const ledgers = objectPath({ group: GROUP, version: VERSION, plural: LEDGER_PLURAL, namespace: tenant });
    const ledger = await kubeRequest<{ items: unknown[] }>(admin, { method: 'GET', path: ledgers });
    expect(ledger.items.length).toBeGreaterThan(0);
    // The metrics the alert rules read: this replica leads; nothing it serves is not Ready.
    const metrics = await (await fetch(`http://127.0.0.1:${proc.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^pkonc_leader 1$/m);
    expect(metrics).toMatch(/^pkonc_not_ready_objects\{kind="Provider"\} 0$/m);
    expect(metrics).toMatch(/^pkonc_not_ready_objects\{kind="Alert"\} 0$/m);
    // Nothing was refused (the workspace log of the Stack is granted in this namespace).
    expect(proc.logs().filter((l) => /forbidden/i.test(l))).toEqual([]);

    // --- outside the chart's rules: denied ----------------------------------------------------------
    const status = (req: KubeRequest): Promise<number> =>
      kubeRequest(saKc, req).then(
        () => 200,
        (err: unknown) => errorStatusCode(err),
      );
    const denied = async (what: string, req: KubeRequest): Promise<void> => {
      expect(await status(req), what).toBe(403);
    };
    await denied('list Secrets', {
      method: 'GET',
      path: objectPath({ group: '', version: 'v1', plural: 'secrets', namespace: tenant }),
    });
    await denied('create a ConfigMap', {
      method: 'POST',
      path: objectPath({ group: '', version: 'v1', plural: 'configmaps', namespace: tenant }),
      body: { metadata: { name: 'x' }, data: {} },
    });
    await denied('a Lease outside the release namespace', {
      method: 'POST',
      path: objectPath({ group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespace: tenant }),
      body: { metadata: { name: 'x' }, spec: {} },
    });
    await denied('read RBAC', {
      method: 'GET',
      path: objectPath({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterroles' }),
    });
    await denied('change a Provider spec', {
      method: 'PATCH',
      path: objectPath({
        group: GROUP,
        version: VERSION,
        plural: 'providers',
        namespace: tenant,
        name: 'hook',
      }),
      body: { spec: { suspend: true } },
      contentType: 'application/merge-patch+json',
    });
    // workspaceLogs.namespaces: pods/log in the tenant namespace (no such pod: 404), nowhere else.
    const podLog = (namespace: string): KubeRequest => ({
      method: 'GET',
      path: `${objectPath({ group: '', version: 'v1', plural: 'pods', namespace, name: 'app-workspace-0' })}/log`,
    });
    expect(await status(podLog(tenant)), 'pods/log where bound').toBe(404);
    await denied('pods/log where not bound', podLog(ns));

    proc.kill('SIGTERM');
    expect((await proc.exited).code).toBe(0);

    // --- upgrade and uninstall --------------------------------------------------------------------------
    const upgrade = await helm(
      ['upgrade', release, CHART, '--namespace', ns, '--values', valuesFile, '--set', 'replicas=1'],
      { kubeconfig },
    );
    expect(upgrade.code, upgrade.stderr).toBe(0);
    expect(((await read(dep)).spec as { replicas: number }).replicas).toBe(1);
    const uninstall = await helm(['uninstall', release, '--namespace', ns], { kubeconfig });
    expect(uninstall.code, uninstall.stderr).toBe(0);
    for (const o of objs) {
      const code = await read(o).then(
        () => 200,
        (err: unknown) => errorStatusCode(err),
      );
      expect(code, `${o.kind} ${o.metadata.name} after uninstall`).toBe(404);
    }
    const crds = await kubectl(['get', `crd/providers.${GROUP}`], { kubeconfig });
    expect(crds.code, 'the CRDs stay').toBe(0);
  }, 180_000);
});
