/**
 * Pull-request updates that change no code, retargets, and leader fencing, on the real control
 * plane against the GitHub and GitLab contract servers (test/forge/<forge>/server.ts). A webhook
 * delivery only triggers a sync; the sync plans from the open pull requests listed into the
 * branch, so:
 * - R06 (GitLab `Merge Request Hook` action=update): labels only → the preview Stack is not
 *   written (no new PKO run); a new head → the Stack pins it; target_branch main→release → the
 *   Stack is deleted, the MR says it no longer targets main, nothing is left pending;
 * - R07 (GitHub `pull_request` action=edited): base → release deletes the preview with a reason
 *   and resolves its pending status; back to main recreates it; a title-only edit does nothing;
 * - fencing: while the replica does not hold the Lease, nothing is written (Stacks, finalizer,
 *   status, notices).
 * Each delivery has a distinct body (a nonce), so no replay rule of the receiver applies.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { PullRequestPreview } from '../../src/api/v1alpha1.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { EventRecorder } from '../../src/kube/events.ts';
import { createLogger } from '../../src/log.ts';
import { PreviewReconciler } from '../../src/preview/controller.ts';
import { previewStack } from '../../src/preview/stack.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, Objects, VERSION, startInProcess, type InProcessController } from '../support/controller.ts';
import { installAdmission, rewriteStoredPreview } from '../support/admission.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startGitHubServer } from '../forge/github/server.ts';
import { startGitLabServer } from '../forge/gitlab/server.ts';

const WAIT = { timeoutMs: 30_000 };
const sha = (c: string): string => c.repeat(40);

interface Prp {
  metadata: { finalizers?: string[] };
  status?: { lastSyncTime?: string; previews?: { number: number; state: string }[] };
}

function getPreview(obj: Objects): Promise<Prp> {
  return obj.getPullRequestPreview<Prp>('previews');
}

function createPreview(obj: Objects, spec: Record<string, unknown>): Promise<void> {
  return obj.pullRequestPreview('previews', {
    interval: '10m',
    webhook: { secretRef: { name: 'hook' } },
    ...spec,
  });
}

/** Runs `trigger` and waits for a sync that started after it (`lastSyncTime` has 1 s resolution). */
async function syncAfter(obj: Objects, trigger: () => Promise<void>): Promise<void> {
  const before = (await getPreview(obj)).status?.lastSyncTime;
  await new Promise((r) => setTimeout(r, 1_100));
  await trigger();
  await waitFor(async () => ((await getPreview(obj)).status?.lastSyncTime !== before ? true : undefined), {
    ...WAIT,
    what: 'a sync after the delivery',
  });
}

async function deliver(
  ctl: InProcessController,
  ns: string,
  headers: Record<string, string>,
  body: string,
): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${String(ctl.handle.previewWebhookPort)}/hooks/${ns}/previews`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  expect(res.status).toBe(202);
}

/** Reconciles the preview queue has run (from the controller's metrics). */
async function previewReconciles(ctl: InProcessController): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${String(ctl.handle.metricsPort)}/metrics`)).text();
  const m = /^pkonc_reconcile_total\{queue="preview"\} (\d+)/m.exec(text);
  return Number(m?.[1] ?? 0);
}

describe('R07: GitHub pull_request edited', () => {
  it('R07: base → release deletes the preview (the PR says why, nothing left pending); back to main recreates it; a title-only edit changes nothing', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_r07token0123: 'pko-bot' },
    });
    onTestFinished(() => gh.close());
    gh.addPullRequest('acme/app', { number: 7, headSha: sha('a'), author: 'alice', association: 'MEMBER' });
    const ns = await createTestNamespace('pv-r07');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=e2e', '--preview-webhook-bind-address=127.0.0.1:0'],
    });
    onTestFinished(() => ctl.stop());
    const secret = randomBytes(12).toString('hex');
    const edited = async (changes: Record<string, unknown>, base: string): Promise<void> => {
      const body = JSON.stringify({
        action: 'edited',
        number: 7,
        changes,
        pull_request: { number: 7, base: { ref: base } },
        repository: { full_name: 'acme/app', clone_url: `${gh.origin}/acme/app.git` },
        nonce: randomBytes(8).toString('hex'),
      });
      await deliver(
        ctl,
        ns,
        {
          'x-github-event': 'pull_request',
          'x-github-delivery': randomBytes(8).toString('hex'),
          'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
        },
        body,
      );
    };
    await obj.secret('gh', { token: 'ghp_r07token0123' });
    await obj.secret('hook', { token: secret });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
    await obj.waitReady('providers', 'gh');
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
    await createPreview(obj, { stackRef: { name: 'app' }, providerRef: { name: 'gh' } });
    await waitFor(async () => sim.findStack('app-pr-7'), { ...WAIT, what: 'app-pr-7' });
    // A preview run in flight: its status on the head is pending.
    await sim.startRun('app-pr-7', { type: 'preview', commit: sha('a') });
    const context = `pko/e2e/${ns}/app-pr-7`;
    await waitFor(
      () => Promise.resolve(gh.statuses('acme/app', sha('a'))[0]?.state === 'pending' || undefined),
      {
        ...WAIT,
        what: 'the pending status',
      },
    );

    // Retargeted to release.
    gh.updatePullRequest('acme/app', 7, { base: 'release' });
    await edited({ base: { ref: { from: 'main' }, sha: { from: sha('0') } } }, 'release');
    await waitFor(async () => ((await sim.findStack('app-pr-7')) === undefined ? true : undefined), {
      ...WAIT,
      what: 'app-pr-7 deleted',
    });
    const notice = await waitFor(
      () =>
        Promise.resolve(gh.comments('acme/app', 7).find((c) => c.body.includes('no longer targets `main`'))),
      { ...WAIT, what: 'the notice saying #7 left main' },
    );
    expect(notice.body).toContain('app-pr-7');
    // Issue 19: the pull request read by number says where it went.
    expect(notice.body).toContain('no longer targets `main`: it now targets `release`.');
    const resolved = await waitFor(
      () =>
        Promise.resolve(
          gh.statuses('acme/app', sha('a')).find((s) => s.context === context && s.state !== 'pending'),
        ),
      { ...WAIT, what: 'the pending status resolved' },
    );
    expect(resolved.state).toBe('failure');
    expect(resolved.description).toContain('preview cancelled');
    expect(gh.statuses('acme/app', sha('a'))[0]?.state).toBe('failure');

    // Back to main: recreated.
    gh.updatePullRequest('acme/app', 7, { base: 'main' });
    await edited({ base: { ref: { from: 'release' }, sha: { from: sha('0') } } }, 'main');
    const again = await waitFor(async () => sim.findStack('app-pr-7'), {
      ...WAIT,
      what: 'app-pr-7 recreated',
    });
    expect(again.spec?.commit).toBe(sha('a'));
    // Its notice follows off the sync path: let it arrive before looking for writes.
    await waitFor(
      () =>
        Promise.resolve(
          gh.comments('acme/app', 7).find((c) => c.body.includes('**Preview running**')) ?? undefined,
        ),
      { ...WAIT, what: "the notice saying #7's preview runs again" },
    );

    // Title only: the listing changes (a new ETag, 200), the Stack is not written.
    const rv = again.metadata.resourceVersion;
    const comments = gh.comments('acme/app', 7).map((c) => `${String(c.id)}:${c.updated_at}`);
    const listings = gh.log.filter((r) => r.operationId === 'pulls/list').length;
    gh.updatePullRequest('acme/app', 7, { title: 'A better title' });
    await syncAfter(obj, () => edited({ title: { from: 'PR 7' } }, 'main'));
    expect(
      gh.log
        .filter((r) => r.operationId === 'pulls/list')
        .slice(listings)
        .map((r) => r.status),
    ).toContain(200);
    expect((await sim.getStack('app-pr-7')).metadata.resourceVersion).toBe(rv);
    expect(gh.comments('acme/app', 7).map((c) => `${String(c.id)}:${c.updated_at}`)).toEqual(comments);
    expect(gh.violations).toEqual([]);
  }, 120_000);
});

describe('R06: GitLab Merge Request Hook action=update', () => {
  it('R06: (a) labels only → the preview Stack is not written; (b) a new head → pinned to it; (c) target_branch main → release → deleted, the MR says it no longer targets main, nothing left pending', async () => {
    const BOT = { id: 7, username: 'pko-bot' };
    const DEV = { id: 21, username: 'dev' };
    const gl = await startGitLabServer({ tokens: { 'glpat-r06-token': BOT } });
    onTestFinished(() => gl.close());
    gl.project('acme/app');
    gl.addMember('acme/app', DEV, 30);
    const mr = gl.addMR('acme/app', {
      iid: 3,
      sha: sha('1'),
      author: DEV,
      source_branch: 'feat',
      labels: [],
    });
    const ns = await createTestNamespace('pv-r06');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=e2e', '--preview-webhook-bind-address=127.0.0.1:0'],
    });
    onTestFinished(() => ctl.stop());
    const secret = randomBytes(12).toString('hex');
    const hook = (attrs: Record<string, unknown>, changes: Record<string, unknown>): Promise<void> =>
      deliver(
        ctl,
        ns,
        {
          'x-gitlab-event': 'Merge Request Hook',
          'x-gitlab-event-uuid': randomBytes(8).toString('hex'),
          'x-gitlab-token': secret,
        },
        JSON.stringify({
          object_kind: 'merge_request',
          event_type: 'merge_request',
          object_attributes: { iid: 3, action: 'update', ...attrs },
          project: { path_with_namespace: 'acme/app', git_http_url: `${gl.url}/acme/app.git` },
          changes,
          nonce: randomBytes(8).toString('hex'),
        }),
      );
    await obj.secret('gl', { token: 'glpat-r06-token' });
    await obj.secret('hook', { token: secret });
    await obj.provider('gl', { type: 'gitlab', address: `${gl.url}/acme`, secretRef: { name: 'gl' } });
    await obj.alert('gl', { providerRef: { name: 'gl' }, eventSources: [{ kind: 'Stack' }] });
    await obj.waitReady('providers', 'gl');
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gl.url}/acme/app.git`, branch: 'main' } });
    await createPreview(obj, { stackRef: { name: 'app' }, providerRef: { name: 'gl' } });
    const first = await waitFor(async () => sim.findStack('app-pr-3'), { ...WAIT, what: 'app-pr-3' });

    // (a) Labels only (no oldrev): a sync runs, the preview Stack is not written.
    mr.labels = ['needs-review'];
    await syncAfter(obj, () =>
      hook({ target_branch: 'main' }, { labels: { previous: [], current: [{ title: 'needs-review' }] } }),
    );
    const still = await sim.getStack('app-pr-3');
    expect(still.metadata.resourceVersion).toBe(first.metadata.resourceVersion);
    expect(still.metadata.generation).toBe(first.metadata.generation);

    // (b) A new head (oldrev present): pinned to it.
    mr.sha = sha('2');
    mr.commits.push(sha('2'));
    await hook({ oldrev: sha('1'), last_commit: { id: sha('2') }, target_branch: 'main' }, {});
    await waitFor(
      async () => ((await sim.findStack('app-pr-3'))?.spec?.commit === sha('2') ? true : undefined),
      { ...WAIT, what: 'app-pr-3 at the new head' },
    );
    // Written and announced once: one PreviewUpdated Event (count 1) for the new head.
    const updatedEvents = async () =>
      (await obj.core.listNamespacedEvent({ namespace: ns })).items.filter(
        (e) => e.reason === 'PreviewUpdated',
      );
    await waitFor(async () => ((await updatedEvents()).length > 0 ? true : undefined), {
      ...WAIT,
      what: 'Event PreviewUpdated',
    });
    // A later sync (labels only): nothing more is updated or announced.
    await syncAfter(obj, () =>
      hook({ target_branch: 'main' }, { labels: { previous: [], current: [{ title: 'needs-review' }] } }),
    );
    const updated = await updatedEvents();
    expect(updated.map((e) => e.count ?? 1)).toEqual([1]);
    expect(updated[0]?.message).toContain(sha('2').slice(0, 7));

    // (c) Retargeted while a run is in flight.
    await sim.startRun('app-pr-3', { type: 'preview', commit: sha('2') });
    const name = `pko/e2e/${ns}/app-pr-3`;
    const ours = () => gl.project('acme/app').statuses.filter((s) => s.sha === sha('2') && s.name === name);
    await waitFor(
      () => Promise.resolve(ours().at(-1)?.status === 'running' || ours().at(-1)?.status === 'pending'),
      {
        ...WAIT,
        what: 'the running status of app-pr-3',
      },
    );
    mr.target_branch = 'release';
    await hook({ target_branch: 'release' }, { target_branch: { previous: 'main', current: 'release' } });
    await waitFor(async () => ((await sim.findStack('app-pr-3')) === undefined ? true : undefined), {
      ...WAIT,
      what: 'app-pr-3 deleted',
    });
    const note = await waitFor(
      () =>
        Promise.resolve(
          mr.notes.find((n) => n.author.id === BOT.id && n.body.includes('no longer targets `main`')),
        ),
      { ...WAIT, what: 'the note saying !3 left main' },
    );
    expect(note.body).toContain('app-pr-3');
    await waitFor(
      () =>
        Promise.resolve(!['pending', 'running'].includes(ours().at(-1)?.status ?? 'pending') || undefined),
      { ...WAIT, what: 'nothing left pending on the head' },
    );
    expect(ours().at(-1)?.description).toContain('preview cancelled');
  }, 120_000);
});

describe('leader fencing of preview writes', () => {
  it('while the replica does not hold the Lease, no preview write happens (no Stack, finalizer, status or notice), also when the Lease is lost after a sync began; holding it again, the sync writes', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_fence0123456: 'pko-bot' },
    });
    onTestFinished(() => gh.close());
    gh.addPullRequest('acme/app', { number: 1, headSha: sha('c'), association: 'MEMBER' });
    gh.addPullRequest('acme/app', { number: 2, headSha: sha('d'), association: 'NONE' });
    let holds = false;
    /** Writes left before the Lease is lost (Infinity: not lost). */
    let budget = Number.POSITIVE_INFINITY;
    const ns = await createTestNamespace('pv-fence');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=e2e'],
      deps: { previews: { mayWrite: () => holds && budget-- > 0, notReadyRetryMs: 300 } },
    });
    onTestFinished(() => ctl.stop());
    await obj.secret('gh', { token: 'ghp_fence0123456' });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    await obj.waitReady('providers', 'gh');
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
    const writes = async (): Promise<unknown[]> => {
      const p = await getPreview(obj);
      const events = await obj.core.listNamespacedEvent({ namespace: ns });
      return [
        await sim.findStack('app-pr-1'),
        p.metadata.finalizers,
        p.status,
        gh.comments('acme/app', 2).length,
        events.items.filter((e) => e.involvedObject.kind === 'PullRequestPreview').length,
      ];
    };
    const none = [undefined, undefined, undefined, 0, 0];

    // Not holding the Lease: syncs are attempted (and retried), nothing is written.
    await createPreview(obj, { stackRef: { name: 'app' }, providerRef: { name: 'gh' } });
    const r0 = await previewReconciles(ctl);
    await waitFor(async () => (await previewReconciles(ctl)) >= r0 + 2 || undefined, {
      ...WAIT,
      what: 'two fenced syncs',
    });
    expect(await writes()).toEqual(none);

    // The Lease is lost right after a sync began (its first check passes, the next write is refused).
    holds = true;
    budget = 1;
    const r1 = await previewReconciles(ctl);
    await waitFor(async () => (await previewReconciles(ctl)) >= r1 + 2 || undefined, {
      ...WAIT,
      what: 'two syncs that lose the Lease',
    });
    expect(await writes()).toEqual(none);

    // Holding it: the sync writes.
    budget = Number.POSITIVE_INFINITY;
    await waitFor(async () => sim.findStack('app-pr-1'), { ...WAIT, what: 'app-pr-1' });
    await waitFor(() => Promise.resolve(gh.comments('acme/app', 2).length === 1 || undefined), {
      ...WAIT,
      what: 'the notice on #2',
    });
    expect((await getPreview(obj)).metadata.finalizers).toContain('notification.pko.dev/preview-stacks');

    // Lost again: closing #1 deletes nothing until the Lease is held.
    holds = false;
    gh.updatePullRequest('acme/app', 1, { state: 'closed' });
    await obj.custom.patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'pullrequestpreviews',
      name: 'previews',
      // JSON patch (the client's default content type): a sync request, as a webhook would make.
      body: [
        { op: 'add', path: '/metadata/annotations', value: { 'notification.pko.dev/sync-requested': 'now' } },
      ],
    });
    const r2 = await previewReconciles(ctl);
    await waitFor(async () => (await previewReconciles(ctl)) >= r2 + 1 || undefined, {
      ...WAIT,
      what: 'a fenced sync',
    });
    expect(await sim.findStack('app-pr-1')).toBeDefined();
    holds = true;
    await waitFor(async () => ((await sim.findStack('app-pr-1')) === undefined ? true : undefined), {
      ...WAIT,
      what: 'app-pr-1 deleted once the Lease is held',
    });
  }, 120_000);
});

describe('reconcileBaseOnPush is honoured only under the admission policy', () => {
  it('a push runs the base Stack for a PullRequestPreview created after the policy; not for one stored before it (Warning Event, nothing set)', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_push0123456789: 'pko-bot' },
    });
    onTestFinished(() => gh.close());
    await installAdmission();
    const ns = await createTestNamespace('pv-push');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=e2e', '--preview-webhook-bind-address=127.0.0.1:0'],
    });
    onTestFinished(() => ctl.stop());
    const secret = randomBytes(12).toString('hex');
    const push = async (after: string): Promise<string> => {
      const body = JSON.stringify({
        ref: 'refs/heads/main',
        after,
        repository: {
          full_name: 'acme/app',
          clone_url: `${gh.origin}/acme/app.git`,
          html_url: `${gh.origin}/acme/app`,
        },
      });
      await deliver(
        ctl,
        ns,
        {
          'x-github-event': 'push',
          'x-github-delivery': randomBytes(8).toString('hex'),
          'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
        },
        body,
      );
      return createHash('sha256').update(body).digest('hex');
    };
    await obj.secret('gh', { token: 'ghp_push0123456789' });
    await obj.secret('hook', { token: secret });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    await obj.waitReady('providers', 'gh');
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
    await createPreview(obj, {
      stackRef: { name: 'app' },
      providerRef: { name: 'gh' },
      webhook: { secretRef: { name: 'hook' }, reconcileBaseOnPush: true },
    });
    await waitFor(async () => (await getPreview(obj)).status?.lastSyncTime, {
      ...WAIT,
      what: 'a first sync',
    });
    const request = async (): Promise<string | undefined> =>
      (await sim.getStack('app')).metadata.annotations?.['pulumi.com/reconciliation-request'];

    const first = await push(sha('1'));
    await waitFor(async () => ((await request()) === first ? true : undefined), {
      ...WAIT,
      what: 'the reconcile request on the base Stack',
    });

    // Stored as if created before the policy existed: never checked, so a push runs nothing.
    await syncAfter(obj, () =>
      rewriteStoredPreview(ns, 'previews', (o) => {
        o.metadata.creationTimestamp = '2020-01-01T00:00:00Z';
      }),
    );
    await push(sha('2'));
    const refused = await waitFor(
      async () =>
        (await obj.core.listNamespacedEvent({ namespace: ns })).items.find(
          (e) => e.reason === 'ReconcileBaseOnPushRefused',
        ),
      { ...WAIT, what: 'Warning Event ReconcileBaseOnPushRefused' },
    );
    expect(refused.type).toBe('Warning');
    expect(refused.message).toMatch(
      /^not asking PKO to run Stack app for the push: the PullRequestPreview was created at .*, before .*, from when PullRequestPreviews count as checked by ValidatingAdmissionPolicy .*: the later creation of the policy and its binding \(.*\) plus 5 s for the API server to start enforcing them, so its spec\.webhook\.reconcileBaseOnPush was never checked; delete and create it again$/,
    );
    expect(await request()).toBe(first);
  }, 120_000);
});

describe('associations looked up are per repository', () => {
  it("after the base Stack's projectRepo changes, an author's access to the old repository grants no preview in the new one", async () => {
    const BOT = { id: 7, username: 'pko-bot' };
    const DEV = { id: 21, username: 'dev' };
    const gl = await startGitLabServer({ tokens: { 'glpat-repo-token': BOT } });
    onTestFinished(() => gl.close());
    gl.project('acme/app');
    gl.project('acme/other');
    gl.addMember('acme/app', DEV, 30); // Developer of acme/app only
    gl.addMR('acme/app', { iid: 3, sha: sha('3'), author: DEV, source_branch: 'feat' });
    gl.addMR('acme/other', { iid: 4, sha: sha('4'), author: DEV, source_branch: 'feat' });
    const ns = await createTestNamespace('pv-memo');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, { flags: ['--cluster-name=e2e'] });
    onTestFinished(() => ctl.stop());
    await obj.secret('gl', { token: 'glpat-repo-token' });
    await obj.provider('gl', { type: 'gitlab', address: `${gl.url}/acme`, secretRef: { name: 'gl' } });
    await obj.waitReady('providers', 'gl');
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gl.url}/acme/app.git`, branch: 'main' } });
    await createPreview(obj, { stackRef: { name: 'app' }, providerRef: { name: 'gl' } });
    await waitFor(async () => sim.findStack('app-pr-3'), { ...WAIT, what: 'app-pr-3' });

    // The base Stack now deploys acme/other, where dev has no access: !4 is not previewed.
    await kubeRequest(kubeConfig('admin'), {
      method: 'PATCH',
      path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: ns, name: 'app' }),
      body: { spec: { projectRepo: `${gl.url}/acme/other.git` } },
      contentType: 'application/merge-patch+json',
    });
    const entry = await waitFor(
      async () => (await getPreview(obj)).status?.previews?.find((e) => e.number === 4),
      { ...WAIT, what: '!4 in status' },
    );
    expect(entry.state).toBe('Untrusted');
    expect(await sim.findStack('app-pr-4')).toBeUndefined();
  }, 90_000);
});

describe('a preview Stack the cache does not show yet', () => {
  it('is brought to the desired spec on the 409 of its create: fields the desired spec lacks are removed', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_stale0123456789: 'pko-bot' },
    });
    onTestFinished(() => gh.close());
    gh.addPullRequest('acme/app', { number: 7, headSha: sha('b'), author: 'alice', association: 'MEMBER' });
    const ns = await createTestNamespace('pv-stale');
    const obj = new Objects(ns);
    const admin = kubeConfig('admin');
    const sim = new PkoSimulator(admin, ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
    await createPreview(obj, { stackRef: { name: 'app' }, providerRef: { name: 'gh' } });
    const prp = await kubeRequest<PullRequestPreview>(admin, {
      method: 'GET',
      path: objectPath({
        group: GROUP,
        version: VERSION,
        plural: 'pullrequestpreviews',
        namespace: ns,
        name: 'previews',
      }),
    });
    const base = await sim.getStack('app');
    // Our preview Stack of #7 as an earlier sync left it (an old head, and `refresh`, which the
    // desired spec does not have).
    const stale = previewStack(
      base,
      prp,
      {
        number: 7,
        headSHA: sha('a'),
        headRef: 'feat',
        baseRef: 'main',
        author: 'alice',
        labels: [],
        fork: false,
        webURL: '',
        association: 'MEMBER',
      },
      `${gh.origin}/acme/app.git`,
    );
    await kubeRequest(admin, {
      method: 'POST',
      path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: ns }),
      body: { ...stale, spec: { ...stale.spec, refresh: true } },
    });
    const token = 'ghp_stale0123456789';
    const provider: ResolvedProvider = {
      namespace: ns,
      name: 'gh',
      type: 'github',
      address: `${gh.origin}/acme`,
      addressFromSecret: false,
      token,
      headers: {},
      timeoutMs: 10_000,
      suspend: false,
      pullRequestComment: true,
      secretValues: [token],
    };
    const reconciler = new PreviewReconciler({
      kubeConfig: admin,
      previews: { get: () => prp },
      // A cache that lags: it has the base Stack, not the preview Stack.
      stacks: { get: (_ns, name) => (name === 'app' ? base : undefined), list: () => [] },
      providers: { get: () => provider },
      recorder: new EventRecorder(admin, { component: 'test', logger: createLogger({ level: 'silent' }) }),
      logger: createLogger({ level: 'silent' }),
      clusterName: 'e2e',
    });
    onTestFinished(() => reconciler.close());
    await reconciler.reconcile(`${ns}/previews`);
    const now = await sim.getStack('app-pr-7');
    expect(now.spec?.commit).toBe(sha('b'));
    expect(now.spec && 'refresh' in now.spec).toBe(false);
  }, 60_000);
});
