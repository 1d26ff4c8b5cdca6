/**
 * Drift detection on the real control plane (docs/drift.md): a DriftDetection selects a PKO v2
 * Stack written by the PKO simulator; the test plays PKO for each check Stack the controller
 * creates — a workspace pod owned as PKO v2.9.0 owns it, on a Node served by the kubelet
 * stand-in, whose `pulumi` container logged the recording of the real agent running
 * `pulumi preview --refresh` on a drifted pkotest File (test/fixtures/agent-logs/05-drift.log),
 * and the preview Update's result. The controller runs as the test user `controller` bound to the
 * shipped ClusterRole (config/rbac) and the workspace-logs ClusterRole; events go through an
 * Alert to a generic webhook receiver. The controller's clock is the real one plus an offset the
 * test moves forward to make the next check due.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { getGlobalDispatcher, type Dispatcher } from 'undici';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { KubeletStandIn, placeWorkspacePod } from '../support/kubelet-standin.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { installAdmission } from '../support/admission.ts';
import {
  grantWorkspaceLogs,
  installWorkspaceLogs,
  playPreviewRun,
  recordedPreview,
} from '../support/workspace-logs.ts';
import { errorStatusCode, kubeRequest, loadKubeConfig, objectPath } from '../../src/kube/client.ts';
import type { KubeConfig } from '../../src/kube/kubeconfig.ts';
import type { Stack } from '../../src/api/pko.ts';
import { DRIFT_CHECK_LABEL, type DriftDetection } from '../../src/api/v1alpha1.ts';

const admin = kubeConfig('admin');
const SHA = '7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b';
const MINUTE = 60_000;
let kubelet: KubeletStandIn;

/** The recorded `pulumi preview --refresh` run (05-drift.log), from its banner to its end line. */
function recordedDrift(): string[] {
  return recordedPreview('05-drift.log');
}

/** The same run after the file was put back: the refresh reads what was deployed, nothing to do. */
function recordedClean(): string[] {
  const lines = recordedDrift().filter((l) => !/\tpulumi\t( {6}[~+-]| {10}[+-]| {8}--outputs)/.test(l));
  // The update's resource, [id=…] and [urn=…] lines go: the CLI prints no unchanged resource but the root stack.
  lines.splice(
    lines.findIndex((l) => l.includes('~ pkotest:index:File: (update)')),
    3,
  );
  return lines
    .map((l) => l.replace('    ~ 1 to update', '    3 unchanged').replace(/\t {4}2 unchanged$/, '\t'))
    .filter((l) => !/\tpulumi\t$/.test(l));
}

beforeAll(async () => {
  await installWorkspaceLogs();
  kubelet = await KubeletStandIn.start({ kubeConfig: admin });
}, 60_000);

afterAll(async () => {
  await kubelet.close();
});

/**
 * The controller's connection, with every Stack create held `delayMs` before it is sent: two
 * workers deciding on check slots at once then both decide before either create has answered
 * (the race that once let 4 checks run with --drift-max-checks=3, seen only under CPU load).
 */
function slowStackCreates(delayMs: number): KubeConfig {
  const base = loadKubeConfig({ kubeconfig: inject('controllerKubeconfig') });
  return {
    getCurrentCluster: () => base.getCurrentCluster(),
    async applySecurityAuthentication(target) {
      let dispatcher: Dispatcher = getGlobalDispatcher();
      await base.applySecurityAuthentication({
        setHeaderParam: (k, v) => {
          target.setHeaderParam(k, v);
        },
        setDispatcher: (d) => {
          dispatcher = d;
        },
      });
      target.setDispatcher(
        dispatcher.compose((dispatch) => (opts, handler) => {
          if (opts.method !== 'POST' || !/\/stacks(\?|$)/.test(opts.path)) return dispatch(opts, handler);
          setTimeout(() => dispatch(opts, handler), delayMs);
          return true;
        }),
      );
    },
  };
}

const ddPath = (ns: string, name?: string): string =>
  objectPath({
    group: 'notification.pko.dev',
    version: 'v1alpha1',
    plural: 'driftdetections',
    namespace: ns,
    ...(name ? { name } : {}),
  });
const stackPath = (ns: string, name?: string): string =>
  objectPath({
    group: 'pulumi.com',
    version: 'v1',
    plural: 'stacks',
    namespace: ns,
    ...(name ? { name } : {}),
  });

interface Env {
  ns: string;
  sim: PkoSimulator;
  rcv: TestReceiver;
  ctl: InProcessController;
  clock: { offset: number };
  /** Events the receiver got, parsed. */
  events(): {
    reason: string;
    message: string;
    metadata: Record<string, string>;
    involvedObject: { name: string };
  }[];
  dd(): Promise<DriftDetection>;
  /** The check Stacks of the DriftDetection that exist now. */
  checks(): Promise<Stack[]>;
  /** Moves the controller's clock forward and makes it look again. */
  advance(ms: number): void;
  close(): Promise<void>;
}

/** A namespace with an Alert to a webhook, a deployed Stack `app` at SHA, and a DriftDetection for it. */
async function setUp(
  prefix: string,
  o: { logs?: boolean; remediation?: { allowed: false; why: string } } = {},
): Promise<Env> {
  const ns = await createTestNamespace(prefix);
  if (o.logs !== false) await grantWorkspaceLogs(ns);
  const rcv = await startReceiver();
  const clock = { offset: 0 };
  const ctl = await startInProcess(ns, {
    flags: ['--cluster-name=drift'],
    deps: {
      drift: {
        now: () => Date.now() + clock.offset,
        random: () => 0,
        deferRetryMs: 2_000,
        ...(o.remediation !== undefined
          ? { remediation: { checked: () => Promise.resolve(o.remediation ?? { allowed: true }) } }
          : {}),
      },
    },
  });
  const obj = new Objects(ns);
  await obj.provider('hook', { type: 'generic', address: `${rcv.url}/hook` });
  await obj.alert('hook', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] });
  await obj.waitReady('alerts', 'hook');
  const sim = new PkoSimulator(admin, ns, { version: 'v2' });
  await sim.createStack(
    'app',
    { git: { projectRepo: 'https://git.example/acme/app.git', branch: 'main' } },
    { stack: 'acme/app/dev', labels: { drift: 'on' } },
  );
  const run = await sim.startRun('app', { type: 'up', commit: SHA });
  await sim.finishRun(run, 'succeeded', { permalink: null });
  const env: Env = {
    ns,
    sim,
    rcv,
    ctl,
    clock,
    events: () => rcv.requests.map((r) => JSON.parse(r.body) as ReturnType<Env['events']>[number]),
    dd: () => kubeRequest<DriftDetection>(admin, { method: 'GET', path: ddPath(ns, 'nightly') }),
    checks: async () =>
      (
        await kubeRequest<{ items: Stack[] }>(admin, {
          method: 'GET',
          path: stackPath(ns),
          query: { labelSelector: `${DRIFT_CHECK_LABEL}=nightly` },
        })
      ).items,
    advance: (ms) => {
      clock.offset += ms;
      ctl.handle.drift.queue.add(`${ns}/nightly`);
    },
    close: async () => {
      await ctl.stop();
      await rcv.close();
      // The test plane runs no garbage collector: check Stacks left in flight are removed here,
      // so they hold no check slot of another test's controller.
      await kubeRequest(admin, {
        method: 'DELETE',
        path: stackPath(ns),
        query: { labelSelector: DRIFT_CHECK_LABEL },
      });
    },
  };
  return env;
}

async function createDriftDetection(
  ns: string,
  spec: DriftDetection['spec'],
  o: { as?: 'admin' | 'viewer'; labels?: Record<string, string>; dryRun?: boolean } = {},
): Promise<void> {
  await kubeRequest(kubeConfig(o.as ?? 'admin'), {
    method: 'POST',
    path: ddPath(ns),
    ...(o.dryRun === true ? { query: { dryRun: 'All' } } : {}),
    body: {
      apiVersion: 'notification.pko.dev/v1alpha1',
      kind: 'DriftDetection',
      metadata: { name: 'nightly', ...(o.labels ? { labels: o.labels } : {}) },
      spec,
    },
  });
}

/** Waits for a check Stack and plays PKO for it: workspace pod, preview Update, log lines, result. */
async function playCheck(
  env: Env,
  o: { lines?: string[]; outcome?: 'succeeded' | 'failed'; message?: string } = {},
): Promise<Stack> {
  const cs = await waitFor(
    async () => (await env.checks()).find((s) => s.metadata.deletionTimestamp === undefined),
    {
      timeoutMs: 30_000,
      what: 'a check Stack',
    },
  );
  const pod = await placeWorkspacePod(admin, env.ns, cs, { nodeName: kubelet.nodeName });
  await playPreviewRun(env.sim, kubelet, {
    stack: cs.metadata.name ?? '',
    pod,
    commit: SHA,
    lines: o.lines ?? recordedDrift(),
    ...(o.outcome !== undefined ? { outcome: o.outcome } : {}),
    ...(o.message !== undefined ? { message: o.message } : {}),
  });
  return cs;
}

async function waitGone(env: Env, name: string): Promise<void> {
  await waitFor(
    async () => {
      try {
        await kubeRequest(admin, { method: 'GET', path: stackPath(env.ns, name) });
        return false;
      } catch (err) {
        return errorStatusCode(err) === 404;
      }
    },
    { timeoutMs: 30_000, what: `check Stack ${name} deleted` },
  );
}

describe('drift detection (PKO v2 shapes, recorded agent log)', () => {
  it('drift → DriftDetected naming the resource and property at the deployed commit; put back → DriftResolved', async () => {
    const env = await setUp('drift-detect');
    try {
      await createDriftDetection(env.ns, { selector: { matchLabels: { drift: 'on' } }, interval: '10m' });
      const cs = await playCheck(env);
      // The check Stack ran the base spec as a refresh preview at the deployed commit.
      expect(cs.spec).toMatchObject({
        preview: true,
        refresh: true,
        commit: SHA,
        destroyOnFinalize: false,
        workspaceReclaimPolicy: 'Retain',
      });
      expect(cs.spec?.branch).toBeUndefined();
      const detected = await waitFor(
        () => Promise.resolve(env.events().find((e) => e.reason === 'DriftDetected')),
        { timeoutMs: 30_000, what: 'DriftDetected at the webhook' },
      );
      expect(detected.involvedObject.name).toBe('app');
      expect(detected.metadata.commit).toBe(SHA);
      expect(detected.message).toContain(
        'Drift detected in stack acme/app/dev at 7a6b5c4: 1 resource differs',
      );
      expect(detected.message).toContain('pkotest:index:File f: content, size');
      expect(detected.message).toContain('+ changed out of band');
      await waitGone(env, cs.metadata.name ?? '');
      const entry = (await env.dd()).status?.stacks?.find((s) => s.name === 'app');
      expect(entry).toMatchObject({ result: 'Drifted', changedResources: 1, commit: SHA });
      // The check Stack's own preview run is not reported as an event of its own.
      expect(env.events().filter((e) => e.involvedObject.name === cs.metadata.name)).toEqual([]);

      // The next check: the file was put back.
      env.advance(11 * MINUTE);
      const cs2 = await playCheck(env, { lines: recordedClean() });
      expect(cs2.metadata.name).not.toBe(cs.metadata.name);
      const resolved = await waitFor(
        () => Promise.resolve(env.events().find((e) => e.reason === 'DriftResolved')),
        { timeoutMs: 30_000, what: 'DriftResolved at the webhook' },
      );
      expect(resolved.message).toContain('Drift resolved in stack acme/app/dev');
      expect(env.events().filter((e) => e.reason === 'DriftDetected')).toHaveLength(1);
      const after = (await env.dd()).status?.stacks?.find((s) => s.name === 'app');
      expect(after).toMatchObject({ result: 'Clean', changedResources: 0 });
    } finally {
      await env.close();
    }
  }, 120_000);

  it("the check's preview fails → DriftCheckFailed with the reason, no DriftDetected", async () => {
    const env = await setUp('drift-fail');
    try {
      await createDriftDetection(env.ns, { stackNames: ['app'], interval: '10m' });
      await playCheck(env, {
        lines: [],
        outcome: 'failed',
        message:
          'preview failed: failed to run update: exit status 255\nstderr: error: could not read credentials\n',
      });
      const failed = await waitFor(
        () => Promise.resolve(env.events().find((e) => e.reason === 'DriftCheckFailed')),
        { timeoutMs: 30_000, what: 'DriftCheckFailed at the webhook' },
      );
      expect(failed.message).toContain('error: could not read credentials');
      expect(env.events().some((e) => e.reason === 'DriftDetected')).toBe(false);
      expect((await env.dd()).status?.stacks?.[0]).toMatchObject({ result: 'Failed' });
    } finally {
      await env.close();
    }
  }, 120_000);

  it('a check while the Stack runs is deferred: no check Stack, no event', async () => {
    const env = await setUp('drift-defer', { logs: false });
    try {
      const running = await env.sim.startRun('app', { type: 'up', commit: SHA });
      await createDriftDetection(env.ns, { stackNames: ['app'], interval: '10m' });
      const entry = await waitFor(
        async () => (await env.dd()).status?.stacks?.find((s) => s.result === 'Deferred'),
        { timeoutMs: 30_000, what: 'a Deferred entry' },
      );
      expect(entry.message).toMatch(/running/);
      expect(await env.checks()).toEqual([]);
      // Once the run is over the check goes ahead.
      await env.sim.finishRun(running, 'succeeded', { permalink: null });
      await waitFor(async () => (await env.checks()).length === 1, {
        timeoutMs: 30_000,
        what: 'the deferred check started',
      });
      expect(env.events().some((e) => e.reason.startsWith('Drift'))).toBe(false);
    } finally {
      await env.close();
    }
  }, 120_000);

  it('the Stack starts a run mid-check → check abandoned, its Stack deleted, no event', async () => {
    const env = await setUp('drift-abandon', { logs: false });
    try {
      await createDriftDetection(env.ns, { stackNames: ['app'], interval: '10m' });
      const cs = await waitFor(async () => (await env.checks())[0], {
        timeoutMs: 30_000,
        what: 'a check Stack',
      });
      await env.sim.startRun('app', { type: 'up', commit: SHA });
      await waitGone(env, cs.metadata.name ?? '');
      const entry = (await env.dd()).status?.stacks?.find((s) => s.name === 'app');
      expect(entry?.result).toBe('Deferred');
      expect(entry?.message).toMatch(/abandoned: the Stack started a run/);
      expect(entry?.check).toBeUndefined();
      expect(env.events().some((e) => e.reason.startsWith('Drift'))).toBe(false);
    } finally {
      await env.close();
    }
  }, 120_000);

  it('the Stack is deleted mid-check → check abandoned, its Stack deleted, no event', async () => {
    const env = await setUp('drift-deleted', { logs: false });
    try {
      await createDriftDetection(env.ns, { stackNames: ['app'], interval: '10m' });
      const cs = await waitFor(async () => (await env.checks())[0], {
        timeoutMs: 30_000,
        what: 'a check Stack',
      });
      await env.sim.deleteStack('app');
      await waitGone(env, cs.metadata.name ?? '');
      await waitFor(async () => ((await env.dd()).status?.stacks ?? []).length === 0, {
        timeoutMs: 30_000,
        what: 'the entry of the deleted Stack gone',
      });
      expect(env.events().some((e) => e.reason.startsWith('Drift'))).toBe(false);
    } finally {
      await env.close();
    }
  }, 120_000);

  it('an interval under 10m is refused by the API server with the reason', async () => {
    const ns = await createTestNamespace('drift-floor');
    const err = await createDriftDetection(ns, { stackNames: ['app'], interval: '5m' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(errorStatusCode(err)).toBe(422);
    expect(String(err)).toContain('interval must be at least 10m');
  });

  it('remediation without the admission policy in force: refused, said so, the Stack not patched', async () => {
    const env = await setUp('drift-norem', { remediation: { allowed: false, why: 'test: no policy' } });
    try {
      await createDriftDetection(env.ns, { stackNames: ['app'], interval: '10m', remediate: true });
      await playCheck(env);
      await waitFor(() => Promise.resolve(env.events().some((e) => e.reason === 'DriftDetected')), {
        timeoutMs: 30_000,
        what: 'DriftDetected at the webhook',
      });
      const dd = await waitFor(
        async () => {
          const d = await env.dd();
          return d.status?.stacks?.[0]?.result === 'Drifted' ? d : undefined;
        },
        { timeoutMs: 30_000, what: 'the Drifted entry' },
      );
      expect(dd.status?.stacks?.[0]?.message).toContain('remediation refused: test: no policy');
      expect(dd.status?.conditions?.find((c) => c.type === 'Remediation')).toMatchObject({
        status: 'False',
        reason: 'Refused',
      });
      const app = await kubeRequest<Stack>(admin, { method: 'GET', path: stackPath(env.ns, 'app') });
      expect(app.metadata.annotations?.['pulumi.com/reconciliation-request']).toBeUndefined();
    } finally {
      await env.close();
    }
  }, 120_000);

  it('remediation under the shipped admission policy: refused at admission for a user who may not patch Stacks; for one who may, PKO is asked to run the drifted Stack', async () => {
    await installAdmission();
    const env = await setUp('drift-rem');
    try {
      // The viewer may write DriftDetections here, but not patch Stacks.
      await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRole({
        namespace: env.ns,
        body: {
          metadata: { name: 'drift-writer' },
          rules: [{ apiGroups: ['notification.pko.dev'], resources: ['driftdetections'], verbs: ['create'] }],
        },
      });
      await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
        namespace: env.ns,
        body: {
          metadata: { name: 'drift-writer' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'drift-writer' },
          subjects: [{ kind: 'User', name: 'viewer', apiGroup: 'rbac.authorization.k8s.io' }],
        },
      });
      const refused = await waitFor(
        async () => {
          const err = await createDriftDetection(
            env.ns,
            { stackNames: ['app'], interval: '10m', remediate: true },
            { as: 'viewer', dryRun: true },
          ).then(
            () => undefined,
            (e: unknown) => (e instanceof Error ? e.message : 'not an Error'),
          );
          return err?.includes('may not patch stacks.pulumi.com') === true ? err : undefined;
        },
        { timeoutMs: 30_000, what: 'the drift remediation policy enforced' },
      );
      expect(refused).toContain('spec.remediate: viewer may not patch stacks.pulumi.com');
      // Without remediate the viewer may create it (the policy checks only remediate).
      await createDriftDetection(
        env.ns,
        { stackNames: ['app'], interval: '10m' },
        { as: 'viewer', dryRun: true },
      );
      // Checked objects count once the policy has been in force a moment (POLICY_SETTLE_MS).
      await new Promise((r) => setTimeout(r, 5_500));
      await createDriftDetection(env.ns, { stackNames: ['app'], interval: '10m', remediate: true });
      const cs = await playCheck(env);
      const app = await waitFor(
        async () => {
          const s = await kubeRequest<Stack>(admin, { method: 'GET', path: stackPath(env.ns, 'app') });
          return s.metadata.annotations?.['pulumi.com/reconciliation-request'] !== undefined ? s : undefined;
        },
        { timeoutMs: 30_000, what: 'the reconcile request on the drifted Stack' },
      );
      expect(app.metadata.annotations?.['pulumi.com/reconciliation-request']).toBe(
        `drift-${cs.metadata.name ?? ''}`,
      );
      const dd = await env.dd();
      expect(dd.status?.conditions?.find((c) => c.type === 'Remediation')).toMatchObject({
        status: 'True',
        reason: 'Enabled',
      });
    } finally {
      await env.close();
    }
  }, 120_000);

  it('bounded and fair: at most --drift-max-checks at once, at most per namespace, every namespace served', async () => {
    const id = `fair-${String(Date.now())}`;
    const namespaces = [await createTestNamespace('drift-fair-a'), await createTestNamespace('drift-fair-b')];
    const ctl = await startInProcess('', {
      flags: [
        `--watch-label-selector=drift-test=${id}`,
        '--drift-max-checks=3',
        '--drift-max-checks-per-namespace=2',
      ],
      deps: { drift: { random: () => 0 }, kubeConfig: slowStackCreates(400) },
    });
    try {
      for (const ns of namespaces) {
        const sim = new PkoSimulator(admin, ns, { version: 'v2' });
        for (const name of ['s1', 's2', 's3', 's4']) {
          await sim.createStack(name, {
            git: { projectRepo: 'https://git.example/acme/app.git', branch: 'main' },
          });
          const run = await sim.startRun(name, { type: 'up', commit: SHA });
          await sim.finishRun(run, 'succeeded', { permalink: null });
        }
      }
      for (const ns of namespaces)
        await createDriftDetection(ns, { selector: {}, interval: '10m' }, { labels: { 'drift-test': id } });
      const counts = async (): Promise<number[]> =>
        Promise.all(
          namespaces.map(
            async (ns) =>
              (
                await kubeRequest<{ items: Stack[] }>(admin, {
                  method: 'GET',
                  path: stackPath(ns),
                  query: { labelSelector: DRIFT_CHECK_LABEL },
                })
              ).items.length,
          ),
        );
      const seen: number[][] = [];
      await waitFor(
        async () => {
          const c = await counts();
          seen.push(c);
          return c.every((n) => n >= 1) && c.reduce((a, b) => a + b, 0) === 3;
        },
        { timeoutMs: 60_000, intervalMs: 50, what: 'both namespaces holding check slots, 3 in all' },
      ).catch(async (e: unknown) => {
        // What held the slots (for the failure message).
        const all = await kubeRequest<{ items: Stack[] }>(admin, {
          method: 'GET',
          path: '/apis/pulumi.com/v1/stacks',
          query: { labelSelector: DRIFT_CHECK_LABEL },
        });
        const dds = await Promise.all(
          namespaces.map((ns) =>
            kubeRequest<DriftDetection>(admin, { method: 'GET', path: ddPath(ns, 'nightly') }),
          ),
        );
        throw new Error(
          `${(e as Error).message}; counts ${JSON.stringify(seen.slice(-2))}; check Stacks ${JSON.stringify(all.items.map((x) => [x.metadata.namespace, x.metadata.name, x.metadata.deletionTimestamp ?? null, x.metadata.finalizers ?? []]))}; entries ${JSON.stringify(dds.map((d) => (d.status?.stacks ?? []).map((x) => [x.name, x.result ?? null, x.check?.name ?? null, x.nextCheckTime ?? null])))}`,
        );
      });
      // Nobody plays PKO: the checks stay in flight and the other Stacks wait for a slot.
      await new Promise((r) => setTimeout(r, 3_000));
      seen.push(await counts());
      for (const c of seen) {
        expect(c.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(3);
        for (const n of c) expect(n).toBeLessThanOrEqual(2);
      }
      const waiting = await kubeRequest<DriftDetection>(admin, {
        method: 'GET',
        path: ddPath(namespaces[0] ?? '', 'nightly'),
      });
      const entries = waiting.status?.stacks ?? [];
      expect(entries).toHaveLength(4);
      // Every selected Stack is listed with when it is due; the ones without a slot have no check yet.
      expect(entries.every((e) => e.nextCheckTime !== undefined)).toBe(true);
      expect(entries.filter((e) => e.check !== undefined).length).toBeLessThanOrEqual(2);
    } finally {
      await ctl.stop();
    }
  }, 180_000);
});
