/**
 * Real PKO v2.9.0 (operator and agent built from PKO's source, the workspace pod played by
 * test/support/workspace-standin.ts) against a control plane with PKO v2.9's CRDs, with the
 * controller under test, a generic webhook receiver and the GitHub contract server. PKO v2
 * refuses `file://` repositories, so the program's git repository is served over HTTPS on
 * loopback (test/support/git-repo.ts); state goes to a `file://` backend.
 *
 * One Stack is alive at a time (test/realpko/preview.realpko.test.ts runs several at once): `app`
 * walks through first `up`, a new commit found by the 60 s branch poll, a
 * failing commit that PKO retries until `Stalled`, a fix, a failing commit followed by a branch
 * reset, `continueResyncOnCommitMatch`, and deletion with `destroyOnFinalize` (a destroy run);
 * then `preview` (`spec.preview: true`) succeeds and fails. `retryMaxBackoffDurationSeconds: 10`
 * caps PKO's retry backoff (30 s, then 90 s by default) so that the three attempts before
 * `Stalled` fit in well under a minute; what PKO writes is otherwise the same.
 *
 * Expected (README "Event model: PKO v1 and v2"): Started and Succeeded/Failed per run; PKO's
 * automatic retries of the same commit and spec are one run to the user — Started once, Failed
 * once, then `StackStalled` when PKO stops retrying, or one Succeeded if a retry succeeds;
 * resyncs of an already reported commit send nothing; messages appear without PKO's JSON quotes.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { GitRepo, startGitHttpsServer, type GitHttpsServer } from '../support/git-repo.ts';
import { makeTestPKI } from '../support/pki.ts';
import {
  REALPKO_VERSIONS,
  StatusRecorder,
  stackSpecBase,
  startPkoV2,
  writeCaFile,
  yamlProgram,
  type PkoV2,
} from '../support/realpko.ts';
import {
  RunLog,
  createStack,
  deleteStack,
  getStack,
  requestReconcile,
  sleep,
  startKit,
  tempDir,
  until,
  writeFixture,
  ScenarioBook,
  summary,
  type Kit,
} from './kit.ts';

const log = new RunLog('realpko-v2');
let kit: Kit;
let pko: PkoV2;
let git: GitHttpsServer;
let recorder: StatusRecorder;
const cleanups: (() => Promise<void>)[] = [];
const book = new ScenarioBook(() => kit, `v${REALPKO_VERSIONS.pkoV2}`);
const { shas, repos, sha, repo, forStack, forge, scenario } = book;
const POLL_BUDGET_MS = 150_000;
const QUIET_MS = 3000;

const short = (name: string): string => sha(name).slice(0, 8);
const stackStatus = async (name: string): Promise<Stack['status']> =>
  (await getStack(kit.admin, kit.namespace, name)).status;

/** Waits until the newest Update of `stack` is complete with `outcome` for commit `name`. */
async function runOutcome(stack: string, name: string, state: 'succeeded' | 'failed'): Promise<void> {
  await until(
    `${stack} ${state} on ${name}`,
    async () => {
      const st = await stackStatus(stack);
      return (
        st?.lastUpdate?.state === state &&
        st.lastUpdate.lastAttemptedCommit === sha(name) &&
        (st.currentUpdate?.name ?? '') === ''
      );
    },
    { timeoutMs: POLL_BUDGET_MS, intervalMs: 500, log },
  );
}

/** What Kubernetes' garbage collector would delete after a Stack is gone (none runs here). */
async function collectGarbage(workspace: string): Promise<void> {
  const ns = kit.namespace;
  await kubeRequest(kit.admin, {
    method: 'DELETE',
    path: objectPath({
      group: 'auto.pulumi.com',
      version: 'v1alpha1',
      plural: 'workspaces',
      namespace: ns,
      name: workspace,
    }),
  }).catch(() => undefined);
  await kubeRequest(kit.admin, {
    method: 'DELETE',
    path: objectPath({
      group: 'apps',
      version: 'v1',
      plural: 'statefulsets',
      namespace: ns,
      name: `${workspace}-workspace`,
    }),
  }).catch(() => undefined);
}

describe(`real PKO v${REALPKO_VERSIONS.pkoV2}`, () => {
  beforeAll(async () => {
    kit = await startKit('v2', log);
    cleanups.push(() => kit.close());
    const pki = await makeTestPKI();
    git = await startGitHttpsServer({ certPem: pki.certPem, keyPem: pki.keyPem });
    cleanups.push(() => git.close());
    const caFile = await writeCaFile(pki.caPem);
    pko = await startPkoV2({
      bins: kit.bins,
      plane: kit.plane,
      namespace: kit.namespace,
      caFile,
      log: log.add,
    });
    cleanups.push(() => pko.stop());
    recorder = new StatusRecorder(kit.admin, kit.namespace, { updates: true });
    await recorder.start();
    cleanups.push(async () => {
      recorder.stop();
      await writeFixture(`pko-v${REALPKO_VERSIONS.pkoV2}`, `v${REALPKO_VERSIONS.pkoV2}`, recorder, kit);
    });
    for (const name of ['app', 'preview']) {
      const r = await GitRepo.create();
      repos.set(name, r);
      await git.add(name, r);
    }
  });

  afterAll(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  const dumpOnFailure = (): void => {
    onTestFailed(() => {
      console.error(`--- real PKO v2 run log (tail) ---\n${log.tail()}`);
    });
  };

  it('first up: UpdateStarted and UpdateSucceeded on the commit, message without JSON quotes', async () => {
    dumpOnFailure();
    await scenario('v2 first up', async () => {
      shas.set('app-1', await repo('app').commit('first commit of app', yamlProgram(1)));
      await createStack(kit.admin, kit.namespace, 'app', {
        ...stackSpecBase(await tempDir('backend')),
        projectRepo: git.url('app'),
        retryMaxBackoffDurationSeconds: 10,
        destroyOnFinalize: true,
      });
      await runOutcome('app', 'app-1', 'succeeded');
      await until('two events', () => forStack('app').length >= 2, { timeoutMs: 30_000, log });
      await until('success on GitHub', () => forge('app-1')['app-1']?.at(-1) === 'success', {
        timeoutMs: 30_000,
      });
      await sleep(QUIET_MS);
      const got = forStack('app');
      expect(summary(got)).toEqual([`UpdateStarted ${short('app-1')}`, `UpdateSucceeded ${short('app-1')}`]);
      // Real v2 writes the Update's message JSON-quoted ('"Initial stack update"').
      expect(got[1]?.message).toContain('Initial stack update');
      expect(got[1]?.message).not.toContain('"Initial stack update"');
      expect(forge('app-1')).toEqual({ 'app-1': ['pending', 'success'] });
      return {
        expected: ['UpdateStarted app-1', 'UpdateSucceeded app-1'],
        observed: summary(got),
        forge: forge('app-1'),
      };
    });
  });

  it('new commit found by the 60 s branch poll: Started and Succeeded for it', async () => {
    dumpOnFailure();
    await scenario('v2 new commit (branch poll)', async () => {
      const before = forStack('app').length;
      shas.set('app-2', await repo('app').commit('second', yamlProgram(2)));
      await runOutcome('app', 'app-2', 'succeeded');
      await until('two more events', () => forStack('app').length >= before + 2, { timeoutMs: 30_000, log });
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([`UpdateStarted ${short('app-2')}`, `UpdateSucceeded ${short('app-2')}`]);
      expect(forge('app-2')).toEqual({ 'app-2': ['pending', 'success'] });
      return {
        expected: ['UpdateStarted app-2', 'UpdateSucceeded app-2'],
        observed: summary(got),
        forge: forge('app-2'),
      };
    });
  });

  it('failing commit retried by PKO until Stalled: Started once, Failed once, StackStalled once', async () => {
    dumpOnFailure();
    await scenario('v2 failing commit (3 attempts, Stalled)', async () => {
      const before = forStack('app').length;
      shas.set('app-3', await repo('app').commit('broken', yamlProgram(3, { broken: true })));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      const st = await until(
        'Stalled after PKO gave up retrying',
        async () => {
          const s = await stackStatus('app');
          return s?.conditions?.some((c) => c.type === 'Stalled' && c.status === 'True') ? s : undefined;
        },
        { timeoutMs: POLL_BUDGET_MS, intervalMs: 500, log },
      );
      expect(st.lastUpdate?.failures).toBe(3);
      await until(
        'StackStalled delivered',
        () =>
          forStack('app')
            .slice(before)
            .some((d) => d.reason === 'StackStalled'),
        {
          timeoutMs: 30_000,
          log,
        },
      );
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      const attempts = recorder.items.filter(
        (i) => i.kind === 'Update' && i.type === 'ADDED' && i.object.metadata.name?.startsWith('app-'),
      ).length;
      expect(summary(got)).toEqual([
        `UpdateStarted ${short('app-3')}`,
        `UpdateFailed ${short('app-3')}`,
        `StackStalled ${short('app-3')}`,
      ]);
      expect(got[1]?.message).toContain('doesNotExist');
      expect(got[2]?.message).toMatch(/not retrying/);
      // The failure, then the stall (same state, its own description).
      expect(forge('app-3')).toEqual({ 'app-3': ['pending', 'failure', 'failure'] });
      return {
        expected: ['UpdateStarted app-3', 'UpdateFailed app-3 (error text)', 'StackStalled app-3'],
        observed: [...summary(got), `(Update objects so far: ${attempts})`],
        forge: forge('app-3'),
      };
    });
  });

  it('fix after the stall: Started and Succeeded for the fix', async () => {
    dumpOnFailure();
    await scenario('v2 fix', async () => {
      const before = forStack('app').length;
      shas.set('app-4', await repo('app').commit('fix', yamlProgram(4)));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      await runOutcome('app', 'app-4', 'succeeded');
      await until('two more events', () => forStack('app').length >= before + 2, { timeoutMs: 30_000, log });
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([`UpdateStarted ${short('app-4')}`, `UpdateSucceeded ${short('app-4')}`]);
      expect(forge('app-4')).toEqual({ 'app-4': ['pending', 'success'] });
      return {
        expected: ['UpdateStarted app-4', 'UpdateSucceeded app-4'],
        observed: summary(got),
        forge: forge('app-4'),
      };
    });
  });

  it('branch reset after a failure: v2 really runs the deployed commit again, which is reported', async () => {
    dumpOnFailure();
    await scenario('v2 branch reset after a failure', async () => {
      const before = forStack('app').length;
      shas.set('app-5', await repo('app').commit('broken again', yamlProgram(5, { broken: true })));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      await until(
        'UpdateFailed for the second broken commit',
        () =>
          forStack('app')
            .slice(before)
            .some((d) => d.reason === 'UpdateFailed'),
        { timeoutMs: 60_000, log },
      );
      await repo('app').resetTo(sha('app-4'));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      await runOutcome('app', 'app-4', 'succeeded');
      await until('Succeeded after the reset', () => forStack('app').length >= before + 4, {
        timeoutMs: 30_000,
        log,
      });
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([
        `UpdateStarted ${short('app-5')}`,
        `UpdateFailed ${short('app-5')}`,
        `UpdateStarted ${short('app-4')}`,
        `UpdateSucceeded ${short('app-4')}`,
      ]);
      expect(forge('app-5')).toEqual({ 'app-5': ['pending', 'failure'] });
      expect(forge('app-4')['app-4']?.at(-1)).toBe('success');
      return {
        expected: [
          'UpdateStarted app-5',
          'UpdateFailed app-5',
          'UpdateStarted app-4',
          'UpdateSucceeded app-4',
        ],
        observed: summary(got),
        forge: forge('app-4', 'app-5'),
      };
    });
  });

  it('continueResyncOnCommitMatch: the new spec is one run; resyncs of the same commit send nothing', async () => {
    dumpOnFailure();
    await scenario('v2 continueResyncOnCommitMatch', async () => {
      const before = forStack('app').length;
      await kubeRequest(kit.admin, {
        method: 'PATCH',
        path: objectPath({
          group: 'pulumi.com',
          version: 'v1',
          plural: 'stacks',
          namespace: kit.namespace,
          name: 'app',
        }),
        contentType: 'application/merge-patch+json',
        body: { spec: { continueResyncOnCommitMatch: true } },
      });
      const resyncs = (): number =>
        recorder.items.filter(
          (i) =>
            i.kind === 'Update' &&
            i.type === 'ADDED' &&
            (i.object as { spec?: { message?: string } }).spec?.message?.startsWith('Resync time elapsed') ===
              true,
        ).length;
      await until('a resync run', () => resyncs() >= 1, { timeoutMs: POLL_BUDGET_MS, intervalMs: 500, log });
      await runOutcome('app', 'app-4', 'succeeded');
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([`UpdateStarted ${short('app-4')}`, `UpdateSucceeded ${short('app-4')}`]);
      return {
        expected: ['UpdateStarted app-4', 'UpdateSucceeded app-4', '(resyncs: nothing)'],
        observed: [...summary(got), `(resync runs: ${resyncs()})`],
        forge: forge('app-4'),
      };
    });
  });

  it('nothing is sent again after a controller restart', async () => {
    dumpOnFailure();
    await scenario('v2 controller restart', async () => {
      const before = kit.delivered().length;
      await kit.restartController();
      await sleep(5000);
      const got = kit.delivered().slice(before);
      expect(summary(got)).toEqual([]);
      return { expected: [], observed: summary(got) };
    });
  });

  it('Stack deletion with destroyOnFinalize: DestroyStarted and DestroySucceeded, about no commit', async () => {
    dumpOnFailure();
    await scenario('v2 destroy (Stack deletion)', async () => {
      const before = forStack('app').length;
      const forgeBefore = kit.gh.log.filter((r) => r.method === 'POST').length;
      await deleteStack(kit.admin, kit.namespace, 'app');
      await until(
        'Stack gone',
        () =>
          getStack(kit.admin, kit.namespace, 'app').then(
            () => false,
            () => true,
          ),
        { timeoutMs: POLL_BUDGET_MS, intervalMs: 500, log },
      );
      await until('destroy events', () => forStack('app').length >= before + 2, { timeoutMs: 30_000, log });
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      // PKO 2.9 destroys from the saved state without fetching the source (its currentUpdate
      // and lastUpdate name no commit), so the events carry none and a forge gets nothing.
      expect(summary(got)).toEqual(['DestroyStarted -', 'DestroySucceeded -']);
      expect(got[1]?.message).toContain('Stack marked for deletion');
      expect(kit.gh.log.filter((r) => r.method === 'POST').length).toBe(forgeBefore);
      await collectGarbage('app');
      return {
        expected: ['DestroyStarted (no commit)', 'DestroySucceeded (no commit)', '(forge: nothing)'],
        observed: summary(got),
        forge: forge('app-4'),
      };
    });
  });

  it('preview Stack: PreviewStarted and PreviewSucceeded', async () => {
    dumpOnFailure();
    await scenario('v2 preview succeeding', async () => {
      shas.set('preview-1', await repo('preview').commit('first commit of preview', yamlProgram(1)));
      await createStack(kit.admin, kit.namespace, 'preview', {
        ...stackSpecBase(await tempDir('backend')),
        projectRepo: git.url('preview'),
        preview: true,
        retryMaxBackoffDurationSeconds: 10,
      });
      await runOutcome('preview', 'preview-1', 'succeeded');
      await until('two events', () => forStack('preview').length >= 2, { timeoutMs: 30_000, log });
      await sleep(QUIET_MS);
      const got = forStack('preview');
      expect(summary(got)).toEqual([
        `PreviewStarted ${short('preview-1')}`,
        `PreviewSucceeded ${short('preview-1')}`,
      ]);
      expect(forge('preview-1')).toEqual({ 'preview-1': ['pending', 'success'] });
      return {
        expected: ['PreviewStarted preview-1', 'PreviewSucceeded preview-1'],
        observed: summary(got),
        forge: forge('preview-1'),
      };
    });
  });

  it('failing preview retried by PKO: PreviewStarted once, PreviewFailed once, StackStalled once', async () => {
    dumpOnFailure();
    await scenario('v2 preview failing (retries, Stalled)', async () => {
      const before = forStack('preview').length;
      shas.set('preview-2', await repo('preview').commit('broken', yamlProgram(2, { broken: true })));
      await requestReconcile(kit.admin, kit.namespace, 'preview');
      await until(
        'Stalled after PKO gave up retrying the preview',
        async () =>
          (await stackStatus('preview'))?.conditions?.some(
            (c) => c.type === 'Stalled' && c.status === 'True',
          ),
        { timeoutMs: POLL_BUDGET_MS, intervalMs: 500, log },
      );
      await until(
        'StackStalled delivered',
        () =>
          forStack('preview')
            .slice(before)
            .some((d) => d.reason === 'StackStalled'),
        { timeoutMs: 30_000, log },
      );
      await sleep(QUIET_MS);
      const got = forStack('preview').slice(before);
      expect(summary(got)).toEqual([
        `PreviewStarted ${short('preview-2')}`,
        `PreviewFailed ${short('preview-2')}`,
        `StackStalled ${short('preview-2')}`,
      ]);
      expect(got[1]?.message).toContain('doesNotExist');
      await deleteStack(kit.admin, kit.namespace, 'preview');
      expect(kit.gh.violations).toEqual([]);
      expect(pko.standIn.errors).toEqual([]);
      return {
        expected: ['PreviewStarted preview-2', 'PreviewFailed preview-2', 'StackStalled preview-2'],
        observed: summary(got),
        forge: forge('preview-2'),
      };
    });
  });
});
