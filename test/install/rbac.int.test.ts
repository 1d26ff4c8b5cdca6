/**
 * The shipped RBAC, verified: the ServiceAccount, ClusterRole, leader-election Role and their
 * bindings as `kubectl kustomize config/default` renders them are applied to the real control
 * plane; a token for the ServiceAccount comes from TokenRequest; the controller runs as a real
 * process with that token, the Deployment's args and NODE_OPTIONS, leader election in the
 * controller's namespace and no namespace restriction (as installed), through a full scenario:
 * Provider (address in a Secret) + Alert + a Stack's Update → delivered to a local receiver,
 * status written, DeliveryLedger created, a Warning Event recorded, no call denied. Then calls
 * outside the rules are denied for the same token — one per permission the controller does not
 * have (case B08): no ConfigMap writes anywhere, no Lease outside its namespace, Secrets by name
 * only, DeliveryLedgers without patch/watch.
 *
 * Other test files run controllers and Alerts in parallel on this control plane: this
 * controller serves only Providers/Alerts carrying this run's label (`--watch-label-selector`),
 * so it never delivers theirs, while it still lists and watches Stacks, Updates and ledger
 * DeliveryLedgers cluster-wide with the shipped permissions.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import {
  applyManifests,
  createTestNamespace,
  kubeConfig,
  serviceAccountKubeconfig,
  waitFor,
} from '../support/cluster.ts';
import { Objects } from '../support/controller.ts';
import { startControllerProcess, stopAll } from '../support/controller-process.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { kustomize } from '../support/kubectl.ts';
import { errorStatusCode, kubeRequest, objectPath, type KubeRequest } from '../../src/kube/client.ts';
import { GROUP, VERSION } from '../../src/api/v1alpha1.ts';
import { LEDGER_PLURAL } from '../../src/delivery/ledger.ts';
import { clusterNameFromUID } from '../../src/kube/cluster-name.ts';

const SHA = '0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c';

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: Record<string, unknown>;
  rules?: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
}

let receiver: TestReceiver | undefined;

afterAll(async () => {
  await stopAll();
  await receiver?.close();
});

describe('shipped RBAC (config/rbac) with a ServiceAccount token', () => {
  it('runs the full scenario with exactly the shipped permissions; calls outside them are denied', async () => {
    // --- install the shipped identity and rules, as rendered ------------------------------------
    const rendered = (await kustomize('config/default')) as unknown as Obj[];
    const pick = (kind: string): Obj => {
      const o = rendered.find((x) => x.kind === kind);
      if (!o) throw new Error(`config/default renders no ${kind}`);
      return o;
    };
    const ns = pick('Namespace').metadata.name;
    const sa = pick('ServiceAccount');
    const admin = kubeConfig('admin');
    await applyManifests(
      admin,
      ['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].map(
        (k) => pick(k) as never,
      ),
      { fieldManager: 'pko-nc-rbac-test' },
    );

    // --- TokenRequest ----------------------------------------------------------------------------
    const { token, file: kubeconfig, kc: saKc } = await serviceAccountKubeconfig(ns, sa.metadata.name);
    expect(token).not.toBe('');
    const review = await kubeRequest<{ status: { userInfo: { username: string } } }>(saKc, {
      method: 'POST',
      path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    expect(review.status.userInfo.username).toBe(`system:serviceaccount:${ns}:${sa.metadata.name}`);

    // --- the controller as installed: the Deployment's args and NODE_OPTIONS ------------------
    const dep = pick('Deployment').spec as {
      template: { spec: { containers: { args: string[]; env: { name: string; value?: string }[] }[] } };
    };
    const container = dep.template.spec.containers[0]!;
    const nodeOptions = container.env.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '';
    expect(nodeOptions).toMatch(/--max-old-space-size=/);
    const run = randomBytes(4).toString('hex');
    const shard = `pko-nc.test/rbac=${run}`;
    const proc = await startControllerProcess({
      kubeconfig,
      args: [
        ...container.args,
        // Loopback ports of our own instead of the pod's fixed ones; serve only this run's objects.
        '--metrics-bind-address=127.0.0.1:0',
        '--health-probe-bind-address=127.0.0.1:0',
        `--watch-label-selector=${shard}`,
        '--log-level=debug',
      ],
      env: { NODE_OPTIONS: nodeOptions, POD_NAMESPACE: ns, POD_NAME: `rbac-${run}` },
    });
    expect(container.args).toContain('--leader-elect');
    // As installed there is no --cluster-name: the shipped rules let it read kube-system (N15).
    expect(container.args.some((a) => a.startsWith('--cluster-name'))).toBe(false);
    const kubeSystem = await admin.makeApiClient(CoreV1Api).readNamespace({ name: 'kube-system' });
    const named = await proc.waitForLog((r) => r['source'] === 'kube-system', 30_000);
    expect(named['clusterName']).toBe(clusterNameFromUID(kubeSystem.metadata?.uid ?? ''));
    await proc.waitForLog((r) => r['msg'] === 'became leader', 30_000);
    await proc.waitReady(30_000);

    // --- full scenario ---------------------------------------------------------------------------
    receiver = await startReceiver();
    const tenant = await createTestNamespace('rbac-tenant');
    const obj = new Objects(tenant);
    const labels = { 'pko-nc.test/rbac': run };
    await obj.secret('hook', { address: `${receiver.url}/hook` });
    await obj.provider('hook', { type: 'generic', secretRef: { name: 'hook' } }, labels);
    await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] }, labels);
    // An Alert whose Provider does not exist: Ready=False and a Warning Event (events: create).
    await obj.alert(
      'orphan',
      { providerRef: { name: 'missing' }, eventSources: [{ kind: 'Stack' }] },
      labels,
    );
    await obj.waitReady('providers', 'hook');
    await obj.waitReady('alerts', 'all');
    await obj.waitReady('alerts', 'orphan', 'False', 'ProviderNotFound');
    await waitFor(
      async () => {
        const events = await obj.core.listNamespacedEvent({
          namespace: tenant,
          fieldSelector: 'involvedObject.name=orphan',
        });
        return events.items.some((e) => e.type === 'Warning' && e.reason === 'ProviderNotFound');
      },
      { what: 'Warning Event ProviderNotFound on Alert orphan' },
    );
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
    // A run's Started is dropped when its result is already known: finish after it went out.
    await delivered('UpdateStarted');
    await sim.finishRun(update, 'succeeded');
    await delivered('UpdateSucceeded');
    expect(reasons()).toEqual(['UpdateStarted', 'UpdateSucceeded']);
    const alert = await waitFor(
      async () => {
        const a = await obj.get('alerts', 'all');
        return (a.status?.lastDelivery ?? []).length > 0 ? a : undefined;
      },
      { what: 'Alert status.lastDelivery' },
    );
    expect(alert.status?.lastDelivery?.[0]?.result).toBe('Delivered');
    const ledgers = objectPath({ group: GROUP, version: VERSION, plural: LEDGER_PLURAL, namespace: tenant });
    const ledger = await kubeRequest<{ items: { metadata: { name: string } }[] }>(admin, {
      method: 'GET',
      path: ledgers,
    });
    expect(ledger.items.length).toBeGreaterThan(0);
    // Nothing the controller tried was refused — but the workspace log, whose permission is an
    // optional component (config/components/workspace-logs): that refusal is expected here and
    // says what to grant.
    const refused = proc.logs().filter((l) => /forbidden/i.test(l));
    const optional = (l: string): boolean =>
      l.includes('"component":"changes"') &&
      l.includes('grant the ClusterRole pko-notification-controller-workspace-logs');
    expect(refused.filter((l) => !optional(l))).toEqual([]);

    // --- outside the rules: denied ---------------------------------------------------------------
    const denied = async (what: string, req: KubeRequest): Promise<void> => {
      const code = await kubeRequest(saKc, req).then(
        () => 200,
        (err: unknown) => errorStatusCode(err),
      );
      expect(code, what).toBe(403);
    };
    const secrets = objectPath({ group: '', version: 'v1', plural: 'secrets', namespace: tenant });
    await denied('list Secrets (only get by name)', { method: 'GET', path: secrets });
    await denied('create a Secret', {
      method: 'POST',
      path: secrets,
      body: { metadata: { name: 'x' }, stringData: { a: 'b' } },
    });
    // The preview controller creates, patches and deletes preview Stacks; the leader patches a
    // finished Update's commit annotation; PKO's status of any Stack and its Updates stay out of
    // reach.
    await denied("write a Stack's status (PKO's own)", {
      method: 'PATCH',
      path: `${objectPath({
        group: 'pulumi.com',
        version: 'v1',
        plural: 'stacks',
        namespace: tenant,
        name: 'app',
      })}/status`,
      body: { status: { observedGeneration: 1 } },
      contentType: 'application/merge-patch+json',
    });
    await denied("write an Update's status (PKO's own)", {
      method: 'PATCH',
      path: `${objectPath({
        group: 'auto.pulumi.com',
        version: 'v1alpha1',
        plural: 'updates',
        namespace: tenant,
        name: 'x',
      })}/status`,
      body: { status: { observedGeneration: 1 } },
      contentType: 'application/merge-patch+json',
    });
    await denied('create an Update (Updates: only a finished one’s commit annotation is patched)', {
      method: 'POST',
      path: objectPath({
        group: 'auto.pulumi.com',
        version: 'v1alpha1',
        plural: 'updates',
        namespace: tenant,
      }),
      body: { apiVersion: 'auto.pulumi.com/v1alpha1', kind: 'Update', metadata: { name: 'x' }, spec: {} },
    });
    await denied('change a Provider spec (only status)', {
      method: 'PATCH',
      path: objectPath({
        group: 'notification.pko.dev',
        version: 'v1alpha1',
        plural: 'providers',
        namespace: tenant,
        name: 'hook',
      }),
      body: { spec: { suspend: true } },
      contentType: 'application/merge-patch+json',
    });
    // B08: the ledger is our own resource: no ConfigMap writes anywhere (templates are read only).
    const configMaps = objectPath({ group: '', version: 'v1', plural: 'configmaps', namespace: tenant });
    await obj.core.createNamespacedConfigMap({
      namespace: tenant,
      body: { metadata: { name: 'tpl' }, data: { message: 'x' } },
    });
    const tpl = `${configMaps}/tpl`;
    await denied('create a ConfigMap', {
      method: 'POST',
      path: configMaps,
      body: { metadata: { name: 'y' }, data: {} },
    });
    await denied('update a ConfigMap', {
      method: 'PUT',
      path: tpl,
      body: { metadata: { name: 'tpl' }, data: { message: 'y' } },
    });
    await denied('patch a ConfigMap', {
      method: 'PATCH',
      path: tpl,
      body: { data: { message: 'y' } },
      contentType: 'application/merge-patch+json',
    });
    await denied('delete a ConfigMap', { method: 'DELETE', path: tpl });
    await denied('patch a DeliveryLedger (only whole-object updates)', {
      method: 'PATCH',
      path: `${ledgers}/${ledger.items[0]!.metadata.name}`,
      body: { metadata: { labels: { x: 'y' } } },
      contentType: 'application/merge-patch+json',
    });
    await denied('delete every DeliveryLedger at once', { method: 'DELETE', path: ledgers });
    await denied('watch Secrets', { method: 'GET', path: secrets, query: { watch: 'true' } });
    await denied('a Lease outside the controller namespace', {
      method: 'POST',
      path: objectPath({ group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespace: tenant }),
      body: { metadata: { name: 'x' }, spec: {} },
    });
    await denied('read a namespace other than kube-system', {
      method: 'GET',
      path: objectPath({ group: '', version: 'v1', plural: 'namespaces', name: tenant }),
    });
    await denied('list namespaces', { method: 'GET', path: '/api/v1/namespaces' });
    await denied('list Pods', {
      method: 'GET',
      path: objectPath({ group: '', version: 'v1', plural: 'pods', namespace: tenant }),
    });
    // pods/log is a broad right: only the optional config/components/workspace-logs grants it.
    await denied('read a pod log (config/components/workspace-logs grants it)', {
      method: 'GET',
      path: `${objectPath({ group: '', version: 'v1', plural: 'pods', namespace: tenant, name: 'app-workspace-0' })}/log`,
    });
    await denied('read RBAC (no escalation path)', {
      method: 'GET',
      path: objectPath({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterroles' }),
    });

    proc.kill('SIGTERM');
    expect((await proc.exited).code).toBe(0);
  }, 120_000);
});
