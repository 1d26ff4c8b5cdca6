/**
 * Case B14 on the real control plane: a tenant stays inside its namespace. Tenant A is a
 * ServiceAccount of namespace `a` whose Role there covers providers, alerts, configmaps and
 * secrets only (its requests use a TokenRequest token; GET stacks in `b` answers 403). Namespace
 * `b` has a Stack with envRefs to a Secret and a workspace pod (on the kubelet stand-in,
 * test/support/kubelet-standin.ts) whose log holds a change set, and the controller (in-process,
 * shipped RBAC) holds the workspace-logs grant in `b`.
 *
 * - Admission (config/admission/alert_sources_policy.yaml): A's Alerts selecting `b` or `*` are
 *   refused with a message naming who may not list Stacks where; an update that adds `b` too. A
 *   writer who may list Stacks in a namespace (A, after a RoleBinding in `c`) is admitted.
 * - Default flags: an Alert of `a` selecting `b` or `*` (written by a cluster admin, whom the
 *   policy admits) is Ready=False `CrossNamespaceForbidden`; nothing of `b` is read (no pods/log
 *   request for b's pod reaches the kubelet) and A's receiver gets only `a`'s events.
 * - `--no-cross-namespace-refs=false`: an Alert stored before the policy (rewritten in etcd as an
 *   older object) is Ready=False `CrossNamespaceUnchecked`, nothing of `b` read on its behalf;
 *   one the admin creates now is Ready and gets b's event with its change set (the scene does
 *   read `b` when allowed: the negative assertions are not vacuous).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { Alert } from '../../src/api/v1alpha1.ts';
import { errorMessage, errorStatusCode, kubeRequest, objectPath } from '../../src/kube/client.ts';
import { ALERT_SOURCES_POLICY_NAME } from '../../src/api/v1alpha1.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, Objects, VERSION, startInProcess } from '../support/controller.ts';
import { rewriteStoredObject } from '../support/admission.ts';
import { installAlertSourcesPolicy } from '../support/alert-sources.ts';
import { KubeletStandIn, placeWorkspacePod } from '../support/kubelet-standin.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import {
  grantWorkspaceLogs,
  installWorkspaceLogs,
  playPreviewRun,
  recordedPreview,
} from '../support/workspace-logs.ts';

const SHA = 'b14b14b14b14b14b14b14b14b14b14b14b14b14b';
const ALERTS = { group: GROUP, version: VERSION, plural: 'alerts' };
/** A value of the Secret b's Stack references. */
const B_SECRET = 'b14-tenant-b-db-password';

const admin = kubeConfig('admin');
let a: string;
let b: string;
let c: string;
let tenant: KubeConfig;
let tenantName: string;
let kubelet: KubeletStandIn;
let receiver: TestReceiver;

/** A KubeConfig for a bearer token on the test API server (server and CA from the admin's). */
function tokenKubeConfig(token: string): KubeConfig {
  const cluster = admin.getCurrentCluster();
  if (cluster === null) throw new Error('admin kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: 'tenant', token }],
    contexts: [{ name: 'tenant', cluster: cluster.name, user: 'tenant' }],
    currentContext: 'tenant',
  });
  return kc;
}

function alertBody(name: string, spec: Record<string, unknown>, labels?: Record<string, string>): object {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: 'Alert',
    metadata: { name, ...(labels ? { labels } : {}) },
    spec: { providerRef: { name: 'hook' }, ...spec },
  };
}

/** Creates an Alert in `a` as `kc`; the API server's message when refused. */
async function createAlert(
  kc: KubeConfig,
  name: string,
  spec: Record<string, unknown>,
  labels?: Record<string, string>,
): Promise<string | undefined> {
  try {
    await kubeRequest(kc, {
      method: 'POST',
      path: objectPath({ ...ALERTS, namespace: a }),
      body: alertBody(name, spec, labels),
    });
    return undefined;
  } catch (err) {
    return errorMessage(err);
  }
}

/**
 * Rewrites the stored Alert `a/name` in etcd as an older API server (before the admission policy)
 * would have stored it: `edit` changes it, the generation is raised as for a spec change
 * (compare-and-swap on the revision; retried for up to 30 s).
 */
async function rewriteStoredAlert(name: string, edit: (o: Alert) => void): Promise<void> {
  await rewriteStoredObject('alerts', a, name, edit);
}

/**
 * Installs config/admission (other files may have already), waits until {@link POLICY_SETTLE_MS}
 * has passed since the Alert sources policy and its binding were created (Alerts created after
 * this count as checked) and until the API server refuses A's Alert selecting `b` (dry run).
 */
async function enforcedAlertSourcesPolicy(): Promise<void> {
  await installAlertSourcesPolicy();
  await waitFor(
    async () => {
      try {
        await kubeRequest(tenant, {
          method: 'POST',
          path: objectPath({ ...ALERTS, namespace: a }),
          query: { dryRun: 'All' },
          body: alertBody('probe', { eventSources: [{ kind: 'Stack', namespace: b }] }),
        });
        return undefined;
      } catch (err) {
        return errorStatusCode(err) === 403 && errorMessage(err).includes('spec.eventSources')
          ? true
          : undefined;
      }
    },
    { timeoutMs: 30_000, what: 'the Alert sources policy enforced' },
  );
}

/** The events the receiver got on `path`. */
function received(
  path: string,
): { reason: string; involvedObject: { namespace: string }; message: string }[] {
  return receiver.requests
    .filter((q) => q.path === path)
    .map(
      (q) => JSON.parse(q.body) as { reason: string; involvedObject: { namespace: string }; message: string },
    );
}

/** Requests for any pod of namespace `ns` that reached the kubelet stand-in (through pods/log). */
const logReadsIn = (ns: string): number => kubelet.requests.filter((r) => r.namespace === ns).length;

beforeAll(async () => {
  await installWorkspaceLogs();
  kubelet = await KubeletStandIn.start({ kubeConfig: admin });
  receiver = await startReceiver();
  a = await createTestNamespace('b14-a');
  b = await createTestNamespace('b14-b');
  c = await createTestNamespace('b14-c');
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespacedServiceAccount({ namespace: a, body: { metadata: { name: 'tenant' } } });
  tenantName = `system:serviceaccount:${a}:tenant`;
  const subjects = [{ kind: 'ServiceAccount', name: 'tenant', namespace: a }];
  await rbac.createNamespacedRole({
    namespace: a,
    body: {
      metadata: { name: 'tenant' },
      rules: [
        {
          apiGroups: [GROUP],
          resources: ['providers', 'alerts'],
          verbs: ['create', 'get', 'list', 'watch', 'update', 'patch', 'delete'],
        },
        {
          apiGroups: [''],
          resources: ['configmaps', 'secrets'],
          verbs: ['create', 'get', 'list', 'watch', 'update', 'patch', 'delete'],
        },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: a,
    body: {
      metadata: { name: 'tenant' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant' },
      subjects,
    },
  });
  // In `c` only, the tenant may read Stacks (the positive case of admission).
  await rbac.createNamespacedRole({
    namespace: c,
    body: {
      metadata: { name: 'stack-reader' },
      rules: [{ apiGroups: ['pulumi.com'], resources: ['stacks'], verbs: ['get', 'list', 'watch'] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: c,
    body: {
      metadata: { name: 'stack-reader' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'stack-reader' },
      subjects,
    },
  });
  const tr = await core.createNamespacedServiceAccountToken({
    name: 'tenant',
    namespace: a,
    body: { spec: { expirationSeconds: 3600, audiences: [] } },
  });
  tenant = tokenKubeConfig(tr.status?.token ?? '');
  const review = await kubeRequest<{ status: { userInfo: { username: string } } }>(tenant, {
    method: 'POST',
    path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  expect(review.status.userInfo.username).toBe(tenantName);
  // The controller may read b's workspace logs (the grant B14 must not lend to A).
  await grantWorkspaceLogs(b);
  await enforcedAlertSourcesPolicy();
}, 120_000);

afterAll(async () => {
  await kubelet.close();
  await receiver.close();
});

/**
 * Namespace b's scene: Stack `app` (label `suite=<a>`) with envRefs to Secret `db`, its workspace
 * pod on the kubelet stand-in, and one preview run whose agent logs the recorded change set.
 */
async function runInB(stackName: string): Promise<void> {
  const sim = new PkoSimulator(admin, b, { version: 'v2' });
  await new Objects(b).secret(`${stackName}-db`, { DB_PASSWORD: B_SECRET });
  const stack = await sim.createStack(
    stackName,
    { git: { projectRepo: 'https://github.com/acme/app.git', branch: 'main' } },
    {
      labels: { suite: a },
      spec: {
        envRefs: {
          DB_PASSWORD: { type: 'Secret', secret: { name: `${stackName}-db`, key: 'DB_PASSWORD' } },
        },
      },
    },
  );
  const pod = await placeWorkspacePod(admin, b, stack, { nodeName: kubelet.nodeName });
  await playPreviewRun(sim, kubelet, {
    stack: stackName,
    pod,
    commit: SHA,
    lines: recordedPreview('08-large.log'),
  });
}

/** A run of a Stack in `a` (A's own), and the wait until A's receiver has it on `path`. */
async function runInA(stackName: string, path: string): Promise<void> {
  const sim = new PkoSimulator(admin, a, { version: 'v2' });
  await sim.createStack(stackName, {
    git: { projectRepo: 'https://github.com/acme/own.git', branch: 'main' },
  });
  const run = await sim.startRun(stackName, { type: 'up', commit: SHA });
  await sim.finishRun(run, 'succeeded');
  await waitFor(
    () =>
      Promise.resolve(
        received(path).some((e) => e.reason === 'UpdateSucceeded' && e.involvedObject.namespace === a),
      ),
    { timeoutMs: 30_000, what: `A's own UpdateSucceeded on ${path}` },
  );
}

describe('B14: a tenant never receives another namespace’s events or change sets', () => {
  it('B14: admission refuses A’s Alerts selecting b or *, and admits a namespace A may list Stacks in', async () => {
    // The tenant holds no right in b.
    const getStack = await kubeRequest(tenant, {
      method: 'GET',
      path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: b, name: 'app' }),
    }).then(
      () => 200,
      (err: unknown) => errorStatusCode(err),
    );
    expect(getStack).toBe(403);

    const toB = await createAlert(tenant, 'to-b', { eventSources: [{ kind: 'Stack', namespace: b }] });
    expect(toB).toContain(
      `spec.eventSources: ${tenantName} may not list stacks.pulumi.com in namespace ${b}, so an Alert they write in namespace ${a} may not select it`,
    );
    expect(toB).toContain(`or have someone who may list Stacks in ${b} write the Alert`);
    const star = await createAlert(tenant, 'to-all', {
      eventSources: [{ kind: 'Stack' }, { kind: 'Update', namespace: '*' }],
    });
    expect(star).toContain(
      `spec.eventSources: ${tenantName} may not list stacks.pulumi.com in every namespace (cluster-wide), so an Alert they write may not select namespace '*'`,
    );
    expect(star).toContain('ValidatingAdmissionPolicy');
    // Its own namespace, named or not, needs nothing more; c, where it may list Stacks, is admitted.
    expect(
      await createAlert(tenant, 'own', { eventSources: [{ kind: 'Stack', namespace: a }] }),
    ).toBeUndefined();
    expect(
      await createAlert(tenant, 'to-c', {
        eventSources: [{ kind: 'Stack' }, { kind: 'Stack', namespace: c }],
      }),
    ).toBeUndefined();
    // An update of the spec is checked as well: adding b is refused.
    const update = await kubeRequest(tenant, {
      method: 'PATCH',
      path: objectPath({ ...ALERTS, namespace: a, name: 'own' }),
      contentType: 'application/merge-patch+json',
      body: { spec: { eventSources: [{ kind: 'Stack' }, { kind: 'Stack', namespace: b }] } },
    }).then(
      () => 'accepted',
      (err: unknown) => errorMessage(err),
    );
    expect(update).toContain(`may not list stacks.pulumi.com in namespace ${b}`);
    // 64 sources (the CRD's maximum), each another namespace: over 8 distinct ones is refused by
    // count (each authorizer check is costly in CEL), 8 are each checked, repeats count once.
    const other = (n: number): { kind: string; namespace: string }[] =>
      Array.from({ length: n }, (_, i) => ({ kind: 'Stack', namespace: `${b}-${String(i)}` }));
    expect(await createAlert(tenant, 'many', { eventSources: other(64) })).toContain(
      `spec.eventSources names 64 namespaces other than the Alert's own (${b}-0, ${b}-1, `,
    );
    expect(await createAlert(tenant, 'nine', { eventSources: other(9) })).toContain(
      "; at most 8 are checked: split the Alert, or select '*'",
    );
    const eight = [...Array.from({ length: 7 }, () => ({ kind: 'Stack', namespace: c })), ...other(7)];
    expect(await createAlert(tenant, 'eight', { eventSources: eight })).toContain(
      `may not list stacks.pulumi.com in namespace ${b}-0,`,
    );
    const cOnly = [
      ...Array.from({ length: 60 }, () => ({ kind: 'Update', namespace: c })),
      { kind: 'Stack', namespace: c },
    ];
    expect(await createAlert(tenant, 'c-repeated', { eventSources: cOnly })).toBeUndefined();
  });

  it('B14: with the default flags an Alert selecting b or * is Ready=False CrossNamespaceForbidden; nothing of b is read', async () => {
    const shard = { 'pko-nc.test/shard': `${a}-default` };
    const obj = new Objects(a);
    const path = `/${a}/default`;
    await obj.provider('hook', { type: 'generic', address: `${receiver.url}${path}` }, shard);
    // Written by a cluster admin (the policy admits whoever may list Stacks there).
    expect(
      await createAlert(admin, 'b-only', { eventSources: [{ kind: 'Stack', namespace: b }] }, shard),
    ).toBeUndefined();
    expect(
      await createAlert(
        admin,
        'everywhere',
        { eventSources: [{ kind: 'Stack', namespace: '*', matchLabels: { suite: a } }] },
        shard,
      ),
    ).toBeUndefined();
    await obj.alert('mine', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] }, shard);
    const ctl = await startInProcess('', {
      flags: [`--watch-label-selector=pko-nc.test/shard=${a}-default`],
    });
    try {
      const forbidden = await obj.waitReady('alerts', 'b-only', 'False', 'CrossNamespaceForbidden');
      expect(forbidden.message).toContain(`eventSources[0].namespace "${b}" selects events outside`);
      expect(forbidden.message).toContain('--no-cross-namespace-refs=false');
      await obj.waitReady('alerts', 'everywhere', 'False', 'CrossNamespaceForbidden');
      await obj.waitReady('alerts', 'mine');
      const before = logReadsIn(b);
      await runInB('app');
      await runInA('own', path);
      // Time for the b Stack's events to go through the router (they were derived before a's).
      await new Promise((r) => setTimeout(r, 3_000));
      expect(logReadsIn(b) - before).toBe(0);
      expect(received(path).filter((e) => e.involvedObject.namespace !== a)).toEqual([]);
      expect(receiver.requests.some((q) => q.body.includes(B_SECRET))).toBe(false);
    } finally {
      await ctl.stop();
    }
  });

  it('B14: opened (--no-cross-namespace-refs=false), an Alert stored before the policy is Ready=False CrossNamespaceUnchecked and reads nothing of b; one admitted now does', async () => {
    const shard = { 'pko-nc.test/shard': `${a}-open` };
    const obj = new Objects(a);
    const path = `/${a}/open`;
    const allowedPath = `/${a}/open-allowed`;
    await obj.provider('hook-open', { type: 'generic', address: `${receiver.url}${path}` }, shard);
    await obj.provider('hook-allowed', { type: 'generic', address: `${receiver.url}${allowedPath}` }, shard);
    // A's Alert as it could have been stored before the policy existed: admitted for its own
    // namespace, then (an older API server) selecting b, created an hour ago.
    expect(
      await createAlert(
        tenant,
        'stored',
        { providerRef: { name: 'hook-open' }, eventSources: [{ kind: 'Stack' }] },
        shard,
      ),
    ).toBeUndefined();
    await rewriteStoredAlert('stored', (o) => {
      o.spec.eventSources = [{ kind: 'Stack', namespace: b, name: '*' }];
      o.metadata.creationTimestamp = new Date(Date.now() - 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    });
    await obj.alert(
      'mine-open',
      { providerRef: { name: 'hook-open' }, eventSources: [{ kind: 'Stack' }] },
      shard,
    );
    const ctl = await startInProcess('', {
      flags: [`--watch-label-selector=pko-nc.test/shard=${a}-open`, '--no-cross-namespace-refs=false'],
    });
    try {
      const unchecked = await obj.waitReady('alerts', 'stored', 'False', 'CrossNamespaceUnchecked');
      expect(unchecked.message).toMatch(
        new RegExp(
          `^eventSources\\[0\\]\\.namespace "${b}" selects events outside the Alert's namespace "${a}", which this controller honours only for Alerts that ValidatingAdmissionPolicy ${ALERT_SOURCES_POLICY_NAME} admitted \\(their writer may list Stacks there\\): the Alert was created at .*, before .*, from when Alerts count as checked by ValidatingAdmissionPolicy ${ALERT_SOURCES_POLICY_NAME}: the later creation of the policy and its binding \\(.*\\) plus 5 s for the API server to start enforcing them, so its eventSources were never checked; delete and create it again$`,
        ),
      );
      await obj.waitReady('alerts', 'mine-open');
      const before = logReadsIn(b);
      await runInB('app-open');
      await runInA('own-open', path);
      await new Promise((r) => setTimeout(r, 3_000));
      expect(logReadsIn(b) - before).toBe(0);
      expect(received(path).filter((e) => e.involvedObject.namespace !== a)).toEqual([]);

      // The same scene for an Alert the policy admitted (a cluster admin wrote it now): b is read.
      expect(
        await createAlert(
          admin,
          'admitted',
          {
            providerRef: { name: 'hook-allowed' },
            eventSources: [{ kind: 'Stack', namespace: b, name: 'app-allowed' }],
          },
          shard,
        ),
      ).toBeUndefined();
      await obj.waitReady('alerts', 'admitted');
      await runInB('app-allowed');
      const got = await waitFor(
        () => Promise.resolve(received(allowedPath).find((e) => e.reason === 'PreviewSucceeded')),
        { timeoutMs: 30_000, what: `b's PreviewSucceeded on ${allowedPath}` },
      );
      expect(got.involvedObject.namespace).toBe(b);
      expect(logReadsIn(b) - before).toBeGreaterThan(0);
      expect(received(path).filter((e) => e.involvedObject.namespace !== a)).toEqual([]);
    } finally {
      await ctl.stop();
    }
  });
});
