/**
 * PkoSimulator (test/support/pko.ts) against the real API server: every object and `/status`
 * write is accepted by the installed CRDs and reads back in PKO's shapes (shared/facts/pko.md),
 * the status subresource keeps status apart from spec/metadata writes, and unknown fields
 * (preserved by the CRDs) survive.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Condition } from '../../src/api/meta.ts';
import type { Stack } from '../../src/api/pko.ts';
import { errorStatusCode, kubeRequest, objectPath } from '../../src/kube/client.ts';
import { createTestNamespace, kubeConfig } from './cluster.ts';
import { PKO_FINALIZER, PkoSimulator, goDuration, mergePatch, type SimClock } from './pko.ts';

const SHA1 = '2b0889718d3e63feeb6079ccd5e4488d8601e353';
const SHA2 = '9f1c2e7d0a4b5c6d7e8f90112233445566778899';
const SHA3 = '0123456789abcdef0123456789abcdef01234567';
const REPO = 'https://github.com/acme/app.git';
const T0 = Date.parse('2026-08-20T11:00:00Z');

let admin: KubeConfig;

/** A clock the test moves by hand. */
function manualClock(start = T0): SimClock & { advance(ms: number): void } {
  let t = start;
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

function conds(obj: { status?: { conditions?: Condition[] } }): Record<string, Condition> {
  return Object.fromEntries((obj.status?.conditions ?? []).map((c) => [c.type, c]));
}

function brief(obj: { status?: { conditions?: Condition[] } }): Record<string, string> {
  return Object.fromEntries((obj.status?.conditions ?? []).map((c) => [c.type, `${c.status} ${c.reason}`]));
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

beforeAll(() => {
  admin = kubeConfig('admin');
});

describe('pure helpers', () => {
  it('goDuration formats like Go time.Duration', () => {
    expect(goDuration(10)).toBe('10s');
    expect(goDuration(60)).toBe('1m0s');
    expect(goDuration(270)).toBe('4m30s');
    expect(goDuration(86_400)).toBe('24h0m0s');
  });

  it('mergePatch deletes, replaces arrays whole and recurses into objects', () => {
    expect(
      mergePatch({ a: 1, b: { c: 1, d: 2 }, e: [1, 2], f: 'x' }, { a: 1, b: { c: 2 }, e: [1], g: true }),
    ).toEqual({ b: { c: 2, d: null }, e: [1], f: null, g: true });
    expect(mergePatch({ a: [1] }, { a: [1] })).toEqual({});
  });
});

describe('PKO v2', () => {
  let ns: string;
  let clock: ReturnType<typeof manualClock>;
  let pko: PkoSimulator;
  beforeAll(async () => {
    ns = await createTestNamespace('pko-sim-v2');
    clock = manualClock();
    pko = new PkoSimulator(admin, ns, { version: 'v2', clock });
  });

  it('a succeeded up: Update and Stack in PKO shapes at every step', async () => {
    const created = await pko.createStack(
      'app',
      { git: { projectRepo: REPO, branch: 'main' } },
      { labels: { team: 'a' } },
    );
    expect(created.spec).toEqual({ stack: 'acme/app/dev', projectRepo: REPO, branch: 'main' });
    expect(created.status).toBeUndefined();

    const run = await pko.startRun('app', { type: 'up', commit: SHA1 });
    expect(run.name).toBe(`app-${T0.toString(16)}`);
    expect(run.message).toBe('Initial stack update');

    const running = await pko.getUpdate(run.name);
    expect(running.metadata.labels).toEqual({
      'pulumi.com/component': 'stack',
      'pulumi.com/stack-name': 'app',
    });
    const owners = running.metadata.ownerReferences ?? [];
    expect(owners).toHaveLength(2);
    expect(owners[0]).toMatchObject({
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Workspace',
      name: 'app',
      controller: true,
    });
    expect(owners[1]).toEqual({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      name: 'app',
      uid: created.metadata.uid,
      blockOwnerDeletion: true,
    });
    expect(running.spec).toEqual({
      workspaceName: 'app',
      stackName: 'acme/app/dev',
      type: 'up',
      ttlAfterCompleted: '24h0m0s',
      message: 'Initial stack update',
      targetDependents: false,
      refresh: false,
    });
    expect(running.status?.observedGeneration).toBe(running.metadata.generation);
    // As recorded from PKO 2.9: empty message/outputs/permalink, no startTime while it runs.
    expect(running.status?.startTime).toBeUndefined();
    expect(running.status).toMatchObject({ message: '', outputs: '', permalink: '' });
    expect(brief(running)).toEqual({
      Progressing: 'True Progressing',
      Failed: 'False Progressing',
      Complete: 'False Progressing',
    });
    expect(conds(running)['Progressing']).toEqual({
      type: 'Progressing',
      status: 'True',
      reason: 'Progressing',
      message: '',
      observedGeneration: 1,
      lastTransitionTime: iso(T0),
    });

    const inFlight = await pko.getStack('app');
    expect(inFlight.status).toEqual({
      observedGeneration: 1,
      observedReconcileRequest: '',
      currentUpdate: { generation: 1, name: run.name, commit: SHA1 },
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          reason: 'NotReadyInProgress',
          message: 'reconciliation is in progress',
          lastTransitionTime: iso(T0),
        },
        {
          type: 'Reconciling',
          status: 'True',
          reason: 'StackProcessing',
          message: 'stack is being processed',
          lastTransitionTime: iso(T0),
        },
      ],
    });
    await expect(pko.startRun('app', { type: 'up', commit: SHA1 })).rejects.toThrow(
      /already has a run in flight/,
    );

    clock.advance(95_000);
    const { update, stack } = await pko.finishRun(run, 'succeeded');
    expect(brief(update)).toEqual({
      Progressing: 'False Complete',
      Failed: 'False UpdateSucceeded',
      Complete: 'True Updated',
    });
    // PKO 2.9 leaves condition messages empty and JSON-quotes the spec message into the status.
    expect(conds(update)['Failed']?.message).toBe('');
    expect(update.status).toMatchObject({
      observedGeneration: 1,
      startTime: iso(T0),
      endTime: iso(T0 + 95_000),
      permalink: 'https://app.pulumi.com/acme/app/dev/updates/1',
      message: '"Initial stack update"',
      outputs: '',
    });
    expect(stack.status?.currentUpdate).toBeUndefined();
    expect(stack.status?.lastUpdate).toEqual({
      generation: 1,
      name: run.name,
      type: 'up',
      state: 'succeeded',
      lastAttemptedCommit: SHA1,
      lastSuccessfulCommit: SHA1,
      permalink: 'https://app.pulumi.com/acme/app/dev/updates/1',
      lastResyncTime: iso(T0 + 95_000),
    });
    expect(stack.status?.conditions).toEqual([
      {
        type: 'Ready',
        status: 'True',
        reason: 'ProcessingCompleted',
        message: 'the stack has been processed and is up to date',
        lastTransitionTime: iso(T0 + 95_000),
      },
    ]);
    expect(stack.metadata.labels).toEqual({ team: 'a' });
  });

  it('failures: PKO count, kept lastSuccessfulCommit, backoff message, Stalled on the third (2.8+)', async () => {
    clock.advance(60_000);
    const r1 = await pko.startRun('app', { type: 'up', commit: SHA2 });
    expect(r1.message).toBe(`New commit detected: "${SHA2}"`);
    clock.advance(10_000);
    const f1 = await pko.finishRun(r1, 'failed');
    // A failed `pulumi up`: reason Unknown, as PKO 2.9's update controller writes it.
    expect(brief(f1.update)).toEqual({
      Progressing: 'False Complete',
      Failed: 'True Unknown',
      Complete: 'True Updated',
    });
    expect(f1.update.status?.permalink).toBe('');
    expect(f1.update.status?.outputs).toBe('');
    expect(f1.update.status?.message).toMatch(/^up failed: failed to run update: exit status 255\n/);
    expect(conds(f1.update)['Failed']?.message).toBe('');
    expect(f1.stack.status?.lastUpdate).toEqual({
      generation: 1,
      name: r1.name,
      type: 'up',
      state: 'failed',
      message: f1.update.status?.message,
      lastAttemptedCommit: SHA2,
      lastSuccessfulCommit: SHA1,
      lastResyncTime: iso(clock.now()),
      failures: 1,
    });
    expect(brief(f1.stack)).toEqual({
      Ready: 'False NotReadyInProgress',
      Reconciling: 'True RetryingAfterFailure',
    });
    expect(conds(f1.stack)['Reconciling']?.message).toBe('1 update failure(s)');

    clock.advance(30_000);
    const r2 = await pko.startRun('app', { type: 'up', commit: SHA2 });
    expect(r2.message).toBe('Backoff time elapsed: 30s');
    const f2 = await pko.finishRun(r2, 'failed', { message: 'up failed: boom' });
    expect(f2.stack.status?.lastUpdate?.failures).toBe(2);
    expect(f2.stack.status?.lastUpdate?.message).toBe('up failed: boom');
    expect(conds(f2.stack)['Reconciling']?.message).toBe('2 update failure(s)');

    clock.advance(90_000);
    const r3 = await pko.startRun('app', { type: 'up', commit: SHA2 });
    expect(r3.message).toBe('Backoff time elapsed: 1m30s');
    const f3 = await pko.finishRun(r3, 'failed');
    expect(f3.stack.status?.lastUpdate?.failures).toBe(3);
    expect(brief(f3.stack)).toEqual({ Ready: 'False NotReadyStalled', Stalled: 'True UpdateFailed' });
    expect(conds(f3.stack)['Stalled']?.message).toBe(
      'up failed 3 times; not retrying until the spec or source changes',
    );
    expect(conds(f3.stack)['Ready']?.message).toBe('reconciliation is stalled');

    // A new commit clears the stall: PKO starts a run and marks the Stack reconciling again.
    clock.advance(1_000);
    const r4 = await pko.startRun('app', { type: 'up', commit: SHA3 });
    const s4 = await pko.getStack('app');
    expect(brief(s4)).toEqual({ Ready: 'False NotReadyInProgress', Reconciling: 'True StackProcessing' });
    const f4 = await pko.finishRun(r4, 'succeeded', { permalink: null });
    expect(f4.stack.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: SHA3 });
    expect(f4.stack.status?.lastUpdate?.failures).toBeUndefined();
    expect(f4.stack.status?.lastUpdate?.message).toBeUndefined();
    expect(f4.stack.status?.lastUpdate?.permalink).toBeUndefined();

    const names = (await pko.listUpdates('app')).map((u) => u.metadata.name);
    expect(names).toEqual([`app-${T0.toString(16)}`, r1.name, r2.name, r3.name, r4.name]);
  });

  it('Update names stay unique and ordered when the clock does not move', async () => {
    await pko.createStack('same-ms', { git: { projectRepo: REPO, commit: SHA1 } });
    const a = await pko.startRun('same-ms', { type: 'up', commit: SHA1 });
    await pko.finishRun(a, 'succeeded');
    const b = await pko.startRun('same-ms', { type: 'refresh', commit: SHA1, message: 'manual refresh' });
    expect(b.name > a.name).toBe(true);
    expect(b.name.length).toBe(a.name.length);
    expect((await pko.getUpdate(b.name)).spec?.message).toBe('manual refresh');
  });

  it('aborted runs and a first failure (failures 0, as PKO counts)', async () => {
    await pko.createStack('abort', { git: { projectRepo: REPO, branch: 'main' } });
    const run = await pko.startRun('abort', { type: 'up', commit: SHA1 });
    const { update, stack } = await pko.finishRun(run, 'aborted');
    expect(brief(update)).toEqual({
      Progressing: 'False Failed',
      Failed: 'True Aborted',
      Complete: 'True Failed',
    });
    expect(update.status?.endTime).toBeUndefined();
    expect(update.status?.observedGeneration).toBe(update.metadata.generation);
    expect(stack.status?.lastUpdate).toEqual({
      generation: 1,
      name: run.name,
      type: 'up',
      state: 'failed',
      lastAttemptedCommit: SHA1,
      lastResyncTime: iso(clock.now()),
    });
    expect(conds(stack)['Reconciling']).toMatchObject({
      reason: 'RetryingAfterFailure',
      message: '0 update failure(s)',
    });
    await expect(pko.finishRun(run, 'succeeded')).rejects.toThrow(/already complete/);
  });

  it('preview Stacks: PreviewFailed from 2.8, RetryingAfterFailure before; a succeeded preview is Ready', async () => {
    await pko.createStack(
      'pr-12',
      { git: { projectRepo: REPO, commit: SHA2 } },
      { preview: true, stack: 'acme/app/pr-12' },
    );
    const run = await pko.startRun('pr-12', { type: 'preview', commit: SHA2 });
    expect(run.version).toBeUndefined();
    const failed = await pko.finishRun(run, 'failed');
    expect(conds(failed.stack)['Reconciling']).toMatchObject({
      reason: 'PreviewFailed',
      message: 'preview failed (0 attempt(s))',
    });
    expect(failed.update.status?.message).toMatch(/^preview failed: /);

    const old = new PkoSimulator(admin, ns, { version: 'v2', minor: 7, clock });
    clock.advance(10_000);
    const r2 = await old.startRun('pr-12', { type: 'preview', commit: SHA2 });
    const f2 = await old.finishRun(r2, 'failed');
    expect(conds(f2.stack)['Reconciling']).toMatchObject({
      reason: 'RetryingAfterFailure',
      message: '1 update failure(s)',
    });

    clock.advance(1_000);
    const r3 = await pko.startRun('pr-12', { type: 'preview', commit: SHA2 });
    const ok = await pko.finishRun(r3, 'succeeded');
    expect(ok.update.status?.permalink).toMatch(
      /^https:\/\/app\.pulumi\.com\/acme\/app\/pr-12\/previews\/[0-9a-f-]{36}$/,
    );
    expect(brief(ok.stack)).toEqual({ Ready: 'True ProcessingCompleted' });
    expect(ok.stack.status?.lastUpdate).toMatchObject({ type: 'preview', state: 'succeeded' });
    expect(ok.stack.spec?.preview).toBe(true);
  });

  it("resync: a new Update on the same commit with PKO's message; lastResyncTime moves when it completes", async () => {
    await pko.createStack(
      'drift',
      { git: { projectRepo: REPO, branch: 'main' } },
      { continueResyncOnCommitMatch: true, resyncFrequencySeconds: 300 },
    );
    const first = await pko.startRun('drift', { type: 'up', commit: SHA1 });
    const done = await pko.finishRun(first, 'succeeded');
    const before = done.stack.status?.lastUpdate?.lastResyncTime;

    clock.advance(300_000);
    const run = await pko.resync('drift');
    expect(run).toBeDefined();
    expect(run?.commit).toBe(SHA1);
    expect((await pko.getUpdate(run!.name)).spec?.message).toBe('Resync time elapsed: 5m0s');
    expect((await pko.getStack('drift')).status?.lastUpdate?.lastResyncTime).toBe(before);
    clock.advance(20_000);
    const after = await pko.finishRun(run!, 'succeeded');
    expect(after.stack.status?.lastUpdate).toMatchObject({
      name: run!.name,
      lastSuccessfulCommit: SHA1,
      lastResyncTime: iso(clock.now()),
      permalink: 'https://app.pulumi.com/acme/drift/dev/updates/2',
    });
  });

  it("reconcile request and new generation: PKO's messages and recorded request", async () => {
    await pko.createStack('req', { git: { projectRepo: REPO, branch: 'main' } });
    await pko.finishRun(await pko.startRun('req', { type: 'up', commit: SHA1 }), 'succeeded');

    await pko.requestReconcile('req', 'now-1');
    const run = await pko.startRun('req', { type: 'up', commit: SHA1 });
    expect(run.message).toBe('Sync request: "now-1"');
    const mid = await pko.getStack('req');
    expect(mid.status?.currentUpdate).toEqual({
      generation: 1,
      reconcileRequest: 'now-1',
      name: run.name,
      commit: SHA1,
    });
    expect(mid.status?.['observedReconcileRequest']).toBe('now-1');
    const { stack } = await pko.finishRun(run, 'succeeded');
    expect(stack.status?.lastUpdate?.reconcileRequest).toBe('now-1');

    // A spec change bumps the generation; the status subresource is untouched by it.
    const bumped = await kubeRequest<Stack>(admin, {
      method: 'PATCH',
      path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: ns, name: 'req' }),
      body: { spec: { branch: 'release' }, status: { observedGeneration: 99 } },
      contentType: 'application/merge-patch+json',
    });
    expect(bumped.metadata.generation).toBe(2);
    expect(bumped.status).toEqual(stack.status);
    const r2 = await pko.startRun('req', { type: 'up', commit: SHA1 });
    expect(r2.message).toBe('New stack generation: 2');
    expect(r2.generation).toBe(2);
  });

  it('Update finalizer (recent PKO): present while running, gone after the result; deleteUpdate = TTL expiry', async () => {
    const fin = new PkoSimulator(admin, ns, { version: 'v2', clock, updateFinalizer: true });
    await fin.createStack('fin', { git: { projectRepo: REPO, branch: 'main' } });
    const run = await fin.startRun('fin', { type: 'up', commit: SHA1 });
    const finalizers = (u: { metadata: object }): unknown =>
      (u.metadata as { finalizers?: string[] }).finalizers;
    expect(finalizers(await fin.getUpdate(run.name))).toEqual([PKO_FINALIZER]);
    await fin.finishRun(run, 'succeeded');
    expect(finalizers(await fin.getUpdate(run.name))).toBeUndefined();
    await fin.deleteUpdate(run);
    await expect(fin.getUpdate(run.name)).rejects.toSatisfy((e: unknown) => errorStatusCode(e) === 404);
    await fin.deleteUpdate(run); // already gone: no error

    // Deleting an Update still carrying the finalizer (a run cut short) also works.
    const r2 = await fin.startRun('fin', { type: 'up', commit: SHA2 });
    await fin.deleteUpdate(r2.name);
    await expect(fin.getUpdate(r2.name)).rejects.toSatisfy((e: unknown) => errorStatusCode(e) === 404);
  });

  it('Flux and Program sources: GitRepository with url and artifact, revisions as PKO stores them', async () => {
    const rev = `main@sha1:${SHA1}`;
    const stack = await pko.createStack('flux', {
      flux: {
        gitRepositoryName: 'app-repo',
        url: 'https://github.com/acme/flux-app',
        revision: rev,
        dir: 'infra',
      },
    });
    expect(stack.spec?.fluxSource).toEqual({
      sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'app-repo' },
      dir: 'infra',
    });
    const repo = (await pko.getGitRepository('app-repo')) as {
      spec: { url: string; ref: unknown };
      status: { artifact: { revision: string; digest: string }; conditions: Condition[] };
    };
    expect(repo.spec.url).toBe('https://github.com/acme/flux-app');
    expect(repo.spec.ref).toEqual({ branch: 'main' });
    expect(repo.status.artifact.revision).toBe(rev);
    expect(repo.status.artifact.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(repo.status.conditions.map((c) => `${c.type}=${c.status}`)).toEqual([
      'Ready=True',
      'ArtifactInStorage=True',
    ]);

    const run = await pko.startRun('flux', { type: 'up', commit: rev });
    const { stack: done } = await pko.finishRun(run, 'succeeded');
    expect(done.status?.lastUpdate?.lastSuccessfulCommit).toBe(rev);

    const rev2 = `main@sha1:${SHA2}`;
    await pko.setFluxRevision('app-repo', rev2);
    const r2 = await pko.startRun('flux', { type: 'up', commit: rev2 });
    expect(r2.message).toBe(`New commit detected: "${rev2}"`);

    const prog = await pko.createStack('prog', { program: { name: 'yaml-prog' } }, { stack: 'dev' });
    expect(prog.spec).toEqual({ stack: 'dev', programRef: { name: 'yaml-prog' } });
    const pr = await pko.startRun('prog', { type: 'up', commit: '3' });
    const pdone = await pko.finishRun(pr, 'succeeded');
    expect(pdone.stack.status?.lastUpdate).toMatchObject({
      lastSuccessfulCommit: '3',
      lastAttemptedCommit: '3',
    });
    // A bare stack name (self-managed backend style) gets no default permalink.
    expect(pdone.stack.status?.lastUpdate?.permalink).toBeUndefined();
  });

  it('outputs and unknown fields survive; status writes do not touch spec', async () => {
    await pko.createStack(
      'outs',
      { git: { projectRepo: REPO, branch: 'main' } },
      {
        spec: {
          envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'tok', key: 'token' } } },
          destroyOnFinalize: true,
        },
      },
    );
    const run = await pko.startRun('outs', { type: 'up', commit: SHA1 });
    const { update, stack } = await pko.finishRun(run, 'succeeded', {
      outputs: { url: 'https://app.example', password: '[secret]' },
    });
    expect(update.status?.outputs).toBe(`${run.name}-stack-outputs`);
    expect(stack.status?.['outputs']).toEqual({ url: 'https://app.example', password: '[secret]' });
    expect(stack.spec?.['envRefs']).toEqual({
      PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'tok', key: 'token' } },
    });
    expect(stack.spec?.['destroyOnFinalize']).toBe(true);
    expect(stack.metadata.generation).toBe(1);
    const secret = await admin
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ name: `${run.name}-stack-outputs`, namespace: ns });
    expect(secret.metadata?.annotations?.['pulumi.com/secrets']).toBe('["password"]');
    expect(secret.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Update', name: run.name });

    // A later failed run keeps the outputs (PKO only replaces them on success).
    const r2 = await pko.startRun('outs', { type: 'up', commit: SHA2 });
    const f2 = await pko.finishRun(r2, 'failed');
    expect(f2.stack.status?.['outputs']).toEqual({ url: 'https://app.example', password: '[secret]' });
  });

  it('stall with other reasons; names over 42 characters are rejected by the CRD', async () => {
    await pko.createStack('nosrc', {
      flux: { gitRepositoryName: 'missing-artifact', url: 'https://github.com/acme/x' },
    });
    const s = await pko.stall('nosrc', 'SourceUnavailable');
    expect(brief(s)).toEqual({ Ready: 'False NotReadyStalled', Stalled: 'True SourceUnavailable' });
    expect(conds(s)['Stalled']?.message).toBe('Flux source has no artifact');
    expect(s.status?.observedGeneration).toBe(1);

    await expect(
      pko.createStack('x'.repeat(43), { git: { projectRepo: REPO, branch: 'main' } }),
    ).rejects.toSatisfy((e: unknown) => errorStatusCode(e) === 422);
    await expect(pko.v1Run('app', { commit: SHA1, state: 'succeeded' })).rejects.toThrow(/simulates PKO v1/);
  });
});

describe('PKO v1.16', () => {
  let ns: string;
  let clock: ReturnType<typeof manualClock>;
  let pko: PkoSimulator;
  beforeAll(async () => {
    ns = await createTestNamespace('pko-sim-v1');
    clock = manualClock();
    pko = new PkoSimulator(admin, ns, { version: 'v1', clock });
  });

  it('lastUpdate has only v1 fields; failures keep the last good commit; no Update objects', async () => {
    await pko.createStack(
      'legacy',
      { git: { projectRepo: 'https://gitlab.com/acme/legacy.git', branch: 'refs/heads/master' } },
      { stack: 'acme/legacy/prod', continueResyncOnCommitMatch: true },
    );
    const ok = await pko.v1Run('legacy', { commit: SHA1, state: 'succeeded', outputs: { n: 1 } });
    expect((ok.metadata as { finalizers?: string[] }).finalizers).toEqual(['finalizer.stack.pulumi.com']);
    expect(ok.status?.['outputs']).toEqual({ n: 1 });
    expect(ok.status?.lastUpdate).toEqual({
      state: 'succeeded',
      lastAttemptedCommit: SHA1,
      lastSuccessfulCommit: SHA1,
      permalink: 'https://app.pulumi.com/acme/legacy/prod/updates/1',
      lastResyncTime: iso(T0),
    });
    expect(ok.status?.observedGeneration).toBe(1);
    expect(ok.status?.currentUpdate).toBeUndefined();
    expect(brief(ok)).toEqual({ Ready: 'True ProcessingCompleted' });

    clock.advance(60_000);
    const bad = await pko.v1Run('legacy', {
      commit: SHA2,
      state: 'failed',
      message: 'failed to run update: exit status 255',
    });
    expect(bad.status?.lastUpdate).toEqual({
      state: 'failed',
      lastAttemptedCommit: SHA2,
      lastSuccessfulCommit: SHA1,
      lastResyncTime: iso(T0 + 60_000),
    });
    expect(brief(bad)).toEqual({
      Ready: 'False NotReadyInProgress',
      Reconciling: 'True RetryingAfterFailure',
    });
    expect(conds(bad)['Reconciling']?.message).toBe('failed to run update: exit status 255');
    expect(bad.status?.['outputs']).toEqual({ n: 1 });

    clock.advance(60_000);
    const good = await pko.v1Run('legacy', {
      commit: SHA2,
      state: 'succeeded',
      permalink: 'https://pulumi.example/u/9',
    });
    clock.advance(60_000);
    expect(await pko.resync('legacy')).toBeUndefined();
    const resynced = await pko.getStack('legacy');
    expect(resynced.status?.lastUpdate).toMatchObject({
      state: 'succeeded',
      lastSuccessfulCommit: SHA2,
      lastResyncTime: iso(T0 + 180_000),
    });
    expect(resynced.status?.lastUpdate?.lastResyncTime).not.toBe(good.status?.lastUpdate?.lastResyncTime);
    expect(await pko.listUpdates('legacy')).toEqual([]);
    await expect(pko.startRun('legacy', { type: 'up', commit: SHA1 })).rejects.toThrow(/simulates PKO v2/);
  });

  it('first reconcile writes the finalizer and an empty lastUpdate; retries, a no-op poll and a reset as PKO v1 writes them', async () => {
    await pko.createStack('walk', { git: { projectRepo: 'file:///repo', branch: 'main' } }, { stack: 'dev' });
    const seen: { lastUpdate: unknown; reconciling: string | undefined; ready: string | undefined }[] = [];
    const record = async (): Promise<void> => {
      const st = await pko.getStack('walk');
      seen.push({
        lastUpdate: st.status?.lastUpdate,
        reconciling: conds(st)['Reconciling']?.reason,
        ready: conds(st)['Ready']?.status,
      });
    };
    await pko.v1Run('walk', { commit: SHA1, state: 'succeeded' });
    await record();
    clock.advance(1_000);
    await pko.v1Run('walk', { commit: SHA2, state: 'failed', message: 'error: boom' });
    clock.advance(1_000);
    const retried = await pko.v1Run('walk', { commit: SHA2, state: 'failed', message: 'error: boom' });
    expect(retried.status?.lastUpdate).toEqual({
      state: 'failed',
      lastAttemptedCommit: SHA2,
      lastSuccessfulCommit: SHA1,
      lastResyncTime: iso(clock.now()),
    });
    await expect(pko.v1Poll('walk')).rejects.toThrow(/succeeded last update/);
    clock.advance(1_000);
    const reset = await pko.v1Reset('walk');
    expect(reset.status?.lastUpdate).toEqual({
      state: 'succeeded',
      lastAttemptedCommit: SHA2,
      lastSuccessfulCommit: SHA1,
      lastResyncTime: iso(clock.now()),
    });
    expect(brief(reset)).toEqual({ Ready: 'True ProcessingCompleted' });
    clock.advance(60_000);
    const polled = await pko.v1Poll('walk');
    expect(polled.status?.lastUpdate).toEqual(reset.status?.lastUpdate);
    expect(brief(polled)).toEqual({ Ready: 'True ProcessingCompleted' });
    await pko.deleteStack('walk');
    await expect(pko.getStack('walk')).rejects.toSatisfy((e: unknown) => errorStatusCode(e) === 404);
  });
});
