/**
 * B17 on the real control plane: no duration a tenant writes can make a timer fire at once.
 * Node fires a `setTimeout` over 2^31 − 1 ms (~24.8 days) after 1 ms; before the fix a
 * PullRequestPreview with `interval: 1000h` and a DriftDetection with `interval: 100000h`
 * reconciled in a hot loop (a PullRequestPreview listing pull requests at the forge each time).
 * - The API server refuses them with the CRD's CEL ceiling (24h, 720h) and accepts the ceiling.
 * - Objects stored before that rule (written to etcd here, as an older CRD let them be stored)
 *   are synced once, then wait: in the next 10 s no reconcile and no forge request; their Ready
 *   message says the value is not obeyed.
 * Reconciles are counted from the controller's `pkonc_reconcile_total` metric, forge requests
 * from the GitHub contract server's log.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { errorStatusCode, kubeRequest, objectPath } from '../../src/kube/client.ts';
import type { DriftDetection, PullRequestPreview } from '../../src/api/v1alpha1.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { rewriteStoredObject } from '../support/admission.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startGitHubServer } from '../forge/github/server.ts';

const admin = kubeConfig('admin');
const WAIT = { timeoutMs: 30_000 };
const QUIET_MS = 10_000;

const path = (plural: string, ns: string, name?: string): string =>
  objectPath({ group: GROUP, version: 'v1alpha1', plural, namespace: ns, ...(name ? { name } : {}) });

/** Creates a `kind` object (dry run unless `store`); resolves to the API server's error, or undefined. */
async function create(
  ns: string,
  plural: string,
  kind: string,
  spec: object,
  o: { store?: boolean } = {},
): Promise<unknown> {
  return kubeRequest(admin, {
    method: 'POST',
    path: path(plural, ns),
    ...(o.store === true ? {} : { query: { dryRun: 'All' } }),
    body: { apiVersion: `${GROUP}/v1alpha1`, kind, metadata: { name: 'b17' }, spec },
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
}

/**
 * Rewrites the stored object in etcd as an API server before the CRD's ceiling stored it
 * ({@link rewriteStoredObject}: the generation raised as for a spec change).
 */
async function rewriteStored(
  plural: string,
  ns: string,
  name: string,
  edit: (o: { spec: Record<string, unknown> }) => void,
): Promise<void> {
  await rewriteStoredObject<{ spec: Record<string, unknown>; metadata: { generation?: number } }>(
    plural,
    ns,
    name,
    edit,
  );
}

/** Reconciles the queue `queue` has run (from the controller's metrics). */
async function reconciles(ctl: InProcessController, queue: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${String(ctl.handle.metricsPort)}/metrics`)).text();
  const m = new RegExp(`^pkonc_reconcile_total\\{queue="${queue}"\\} (\\d+)`, 'm').exec(text);
  return Number(m?.[1] ?? 0);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('B17: no duration a tenant writes can make a timer fire at once', () => {
  it('B17: the API server refuses durations above the ceilings with the CEL message, and accepts the ceilings', async () => {
    const ns = await createTestNamespace('b17-crd');
    const prp = { stackRef: { name: 'app' }, providerRef: { name: 'gh' } };
    const refused = async (plural: string, kind: string, spec: object, message: string): Promise<void> => {
      const err = await create(ns, plural, kind, spec);
      expect(errorStatusCode(err), JSON.stringify(spec)).toBe(422);
      expect(String(err)).toContain(message);
    };
    await refused(
      'pullrequestpreviews',
      'PullRequestPreview',
      { ...prp, interval: '1000h' },
      'interval must be a duration of at most 24h',
    );
    await refused(
      'pullrequestpreviews',
      'PullRequestPreview',
      { ...prp, startTimeout: '1000h' },
      'startTimeout must be a duration of at most 24h',
    );
    await refused(
      'driftdetections',
      'DriftDetection',
      { stackNames: ['app'], interval: '100000h' },
      'interval must be a duration of at most 720h',
    );
    // Too many digits for CEL's duration(): refused by the guard, not by an evaluation error.
    await refused(
      'pullrequestpreviews',
      'PullRequestPreview',
      { ...prp, interval: '10000000h' },
      'interval must be a duration of at most 24h',
    );
    expect(
      await create(ns, 'pullrequestpreviews', 'PullRequestPreview', {
        ...prp,
        interval: '24h',
        startTimeout: '24h',
      }),
    ).toBeUndefined();
    expect(
      await create(ns, 'driftdetections', 'DriftDetection', { stackNames: ['app'], interval: '720h' }),
    ).toBeUndefined();
  });

  it('B17: a PullRequestPreview stored with interval 1000h syncs once, then no reconcile and no GitHub request for 10 s', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_b17token0123: 'pko-bot' },
    });
    onTestFinished(() => gh.close());
    const ns = await createTestNamespace('b17-prp');
    const obj = new Objects(ns);
    await obj.secret('gh', { token: 'ghp_b17token0123' });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    const sim = new PkoSimulator(admin, ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
    expect(
      await create(
        ns,
        'pullrequestpreviews',
        'PullRequestPreview',
        { stackRef: { name: 'app' }, providerRef: { name: 'gh' }, interval: '10m' },
        { store: true },
      ),
    ).toBeUndefined();
    await rewriteStored('pullrequestpreviews', ns, 'b17', (o) => {
      o.spec.interval = '1000h';
    });
    const ctl = await startInProcess(ns, { flags: ['--cluster-name=e2e'] });
    onTestFinished(() => ctl.stop());
    const synced = async (): Promise<PullRequestPreview | undefined> => {
      const p = await kubeRequest<PullRequestPreview>(admin, {
        method: 'GET',
        path: path('pullrequestpreviews', ns, 'b17'),
      });
      return p.status?.conditions?.some((c) => c.type === 'Ready' && c.reason === 'Synced') === true
        ? p
        : undefined;
    };
    await waitFor(synced, { ...WAIT, what: 'the first sync' });
    await sleep(1_000); // the sync's own status write settles
    const runs = await reconciles(ctl, 'preview');
    const requests = gh.log.length;
    await sleep(QUIET_MS);
    // Before the fix: 290 reconciles and 291 GitHub requests in these 10 s.
    expect({
      reconciles: (await reconciles(ctl, 'preview')) - runs,
      requests: gh.log.length - requests,
    }).toEqual({
      reconciles: 0,
      requests: 0,
    });
    expect(runs).toBeLessThanOrEqual(3);
    const ready = (await synced())?.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.message).toContain(
      'spec.interval 1000h is above the 24h ceiling and is not obeyed: 24h is used; set 24h or less',
    );
  }, 90_000);

  it('B17: a DriftDetection stored with interval 100000h syncs once, then no reconcile for 10 s, checked every 720h', async () => {
    const ns = await createTestNamespace('b17-dd');
    const sim = new PkoSimulator(admin, ns, { version: 'v2' });
    await sim.createStack('app', {
      git: { projectRepo: 'https://git.example/acme/app.git', branch: 'main' },
    });
    expect(
      await create(
        ns,
        'driftdetections',
        'DriftDetection',
        { stackNames: ['app'], interval: '10m' },
        { store: true },
      ),
    ).toBeUndefined();
    await rewriteStored('driftdetections', ns, 'b17', (o) => {
      o.spec.interval = '100000h';
    });
    // The first check is due half-way into the first tenth of an interval: 5000h under 100000h
    // (past any timer), 36h under the 720h ceiling.
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=drift'],
      deps: { drift: { random: () => 0.5 } },
    });
    onTestFinished(() => ctl.stop());
    const dd = (): Promise<DriftDetection> =>
      kubeRequest<DriftDetection>(admin, { method: 'GET', path: path('driftdetections', ns, 'b17') });
    await waitFor(
      async () => ((await dd()).status?.stacks?.[0]?.nextCheckTime !== undefined ? true : undefined),
      {
        ...WAIT,
        what: 'the first sync',
      },
    );
    await sleep(1_000);
    const runs = await reconciles(ctl, 'driftdetection');
    await sleep(QUIET_MS);
    // Before the fix: 1,123 reconciles in these 10 s.
    expect((await reconciles(ctl, 'driftdetection')) - runs).toBe(0);
    expect(runs).toBeLessThanOrEqual(3);
    const got = await dd();
    const ready = got.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.message).toBe(
      '1 Stack selected, spec.interval 100000h is above the 720h ceiling and is not obeyed: checked every 720h; set 720h or less',
    );
    const due = Date.parse(got.status?.stacks?.[0]?.nextCheckTime ?? '');
    expect(due - Date.now()).toBeGreaterThan(35 * 3_600_000);
    expect(due - Date.now()).toBeLessThan(37 * 3_600_000);
  }, 90_000);
});
