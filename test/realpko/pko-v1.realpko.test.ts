/**
 * Real PKO v1.16.0 (its manager, the Pulumi CLI and the YAML language host, built from source)
 * against a control plane that has only PKO v1's CRDs — no `Update` CRD, as on every real v1
 * cluster — with the controller under test, a generic webhook receiver and the GitHub contract
 * server. Programs come from local `file://` git repositories, state goes to `file://` backends.
 *
 * Three Stacks run side by side in one namespace (PKO v1 reconciles up to 10 at once):
 * - `app` walks through first `up`, a new commit found by the 60 s branch poll, a failing commit
 *   retried for over 60 s, a fix, a failing commit followed by a branch reset, and deletion;
 * - `resync` sets `continueResyncOnCommitMatch` (PKO re-runs the same commit every 60 s);
 * - `idle` never changes (PKO polls its branch every 60 s and runs nothing).
 * Changes after the first poll are picked up at once by setting PKO's reconcile-request
 * annotation (v1.16's ReconcileRequestedPredicate), as a user or a webhook receiver would.
 *
 * Expected, per docs in README "Event model: PKO v1 and v2": no Started events (v1 marks no run
 * start: `StackProcessing` is also written by every no-op poll); one `UpdateSucceeded` per
 * deployed commit, carrying that commit; exactly one `UpdateFailed` per failing commit however
 * often PKO retries, carrying the CLI's error text; nothing for no-op polls, for resyncs of an
 * already reported commit, for a branch reset that ran nothing, or for deleting a Stack (v1
 * writes no status while finalizing). On GitHub: `success`/`failure` on exactly those commits.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import { GitRepo } from '../support/git-repo.ts';
import {
  REALPKO_VERSIONS,
  StatusRecorder,
  stackSpecBase,
  startPkoV1,
  yamlProgram,
  type OperatorProcess,
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

const log = new RunLog('realpko-v1');
let kit: Kit;
let recorder: StatusRecorder;
const cleanups: (() => Promise<void>)[] = [];
const book = new ScenarioBook(() => kit, `v${REALPKO_VERSIONS.pkoV1}`);
const { shas, repos, sha, repo, forStack, forge, scenario } = book;
/** Time a poll of PKO v1 may take to come round (60 s) plus a run, with slack for a loaded machine. */
const POLL_BUDGET_MS = 120_000;
const QUIET_MS = 3000;

const lastUpdate = async (name: string): Promise<Stack['status']> =>
  (await getStack(kit.admin, kit.namespace, name)).status;

describe(`real PKO v${REALPKO_VERSIONS.pkoV1}`, () => {
  beforeAll(async () => {
    kit = await startKit('v1', log);
    cleanups.push(() => kit.close());
    const pko: OperatorProcess = await startPkoV1({
      bins: kit.bins,
      kubeconfigPath: kit.plane.cp.kubeconfigPath,
      namespace: kit.namespace,
      log: log.add,
    });
    cleanups.push(() => pko.stop());
    recorder = new StatusRecorder(kit.admin, kit.namespace, { updates: false });
    await recorder.start();
    cleanups.push(async () => {
      recorder.stop();
      await writeFixture(`pko-v${REALPKO_VERSIONS.pkoV1}`, `v${REALPKO_VERSIONS.pkoV1}`, recorder, kit);
    });
    for (const name of ['app', 'resync', 'idle']) {
      const r = await GitRepo.create();
      repos.set(name, r);
      // Messages differ per repository: identical commits would get identical SHAs.
      shas.set(`${name}-1`, await r.commit(`first commit of ${name}`, yamlProgram(1)));
    }
    const backend = async (): Promise<string> => tempDir('backend');
    await createStack(kit.admin, kit.namespace, 'app', {
      ...stackSpecBase(await backend()),
      projectRepo: `file://${repo('app').dir}`,
    });
    await createStack(kit.admin, kit.namespace, 'resync', {
      ...stackSpecBase(await backend()),
      projectRepo: `file://${repo('resync').dir}`,
      continueResyncOnCommitMatch: true,
    });
    await createStack(kit.admin, kit.namespace, 'idle', {
      ...stackSpecBase(await backend()),
      projectRepo: `file://${repo('idle').dir}`,
    });
  });

  afterAll(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  const dumpOnFailure = (): void => {
    onTestFailed(() => {
      console.error(`--- real PKO v1 run log (tail) ---\n${log.tail()}`);
    });
  };

  it('with only PKO v1 CRDs installed, /readyz is 200 within 5 s', () => {
    expect(kit.readyzMs).toBeLessThan(5000);
  });

  it('first up: one UpdateSucceeded with the deployed commit; no Started', async () => {
    dumpOnFailure();
    await scenario('v1 first up', async () => {
      await until(
        'app succeeded on its first commit',
        async () => (await lastUpdate('app'))?.lastUpdate?.lastSuccessfulCommit === sha('app-1'),
        { timeoutMs: 90_000, log },
      );
      await until('UpdateSucceeded delivered', () => forStack('app').length >= 1, { timeoutMs: 30_000, log });
      await until('success on GitHub', () => kit.statuses(sha('app-1')).length >= 1, { timeoutMs: 30_000 });
      await sleep(QUIET_MS);
      const got = forStack('app');
      expect(summary(got)).toEqual([`UpdateSucceeded ${sha('app-1').slice(0, 8)}`]);
      expect(got[0]?.metadata['commit']).toBe(sha('app-1'));
      expect(forge('app-1')).toEqual({ 'app-1': ['success'] });
      // PKO v1 writes a finalizer and an empty lastUpdate before the first run (recorded).
      const versions = recorder.stacks('app');
      expect(
        versions.some((s) =>
          (s.metadata as { finalizers?: string[] }).finalizers?.includes('finalizer.stack.pulumi.com'),
        ),
      ).toBe(true);
      return { expected: ['UpdateSucceeded app-1'], observed: summary(got), forge: forge('app-1') };
    });
  });

  it('new commit found by the 60 s branch poll: one UpdateSucceeded for it', async () => {
    dumpOnFailure();
    await scenario('v1 new commit (branch poll)', async () => {
      const before = forStack('app').length;
      shas.set('app-2', await repo('app').commit('second', yamlProgram(2)));
      await until(
        'app succeeded on the second commit',
        async () => (await lastUpdate('app'))?.lastUpdate?.lastSuccessfulCommit === sha('app-2'),
        { timeoutMs: POLL_BUDGET_MS, intervalMs: 500, log },
      );
      await until('second UpdateSucceeded', () => forStack('app').length > before, {
        timeoutMs: 30_000,
        log,
      });
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([`UpdateSucceeded ${sha('app-2').slice(0, 8)}`]);
      expect(forge('app-1', 'app-2')).toEqual({ 'app-1': ['success'], 'app-2': ['success'] });
      return { expected: ['UpdateSucceeded app-2'], observed: summary(got), forge: forge('app-2') };
    });
  });

  it('failing commit retried for over 60 s: exactly one UpdateFailed, with the CLI error text', async () => {
    dumpOnFailure();
    await scenario('v1 failing commit (retries ≥ 60 s)', async () => {
      const before = forStack('app').length;
      shas.set('app-3', await repo('app').commit('broken', yamlProgram(3, { broken: true })));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      const failedAt = await until(
        'app failed on the broken commit',
        async () => {
          const st = await lastUpdate('app');
          return st?.lastUpdate?.state === 'failed' && st.lastUpdate.lastAttemptedCommit === sha('app-3')
            ? Date.now()
            : undefined;
        },
        { timeoutMs: 60_000, log },
      );
      await until('UpdateFailed delivered', () => forStack('app').length > before, {
        timeoutMs: 30_000,
        log,
      });
      // Let PKO retry for more than a minute (exponential backoff from 5 ms: ~13 full runs).
      await sleep(Math.max(0, failedAt + 65_000 - Date.now()));
      const retries = new Set(
        recorder
          .stacks('app')
          .filter(
            (s) =>
              s.status?.lastUpdate?.state === 'failed' &&
              s.status.lastUpdate.lastAttemptedCommit === sha('app-3'),
          )
          .map((s) => s.status?.lastUpdate?.lastResyncTime),
      ).size;
      expect(retries).toBeGreaterThanOrEqual(5);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([`UpdateFailed ${sha('app-3').slice(0, 8)}`]);
      expect(got[0]?.severity).toBe('error');
      expect(got[0]?.message).toContain('doesNotExist');
      expect(got[0]?.message.length).toBeLessThanOrEqual(8192);
      expect(forge('app-3')).toEqual({ 'app-3': ['failure'] });
      return {
        expected: ['UpdateFailed app-3 (with error text)'],
        observed: [...summary(got), `(PKO runs of the broken commit: ${retries})`],
        forge: forge('app-3'),
      };
    });
  });

  it('fix after the failure: one UpdateSucceeded for the fix', async () => {
    dumpOnFailure();
    await scenario('v1 fix', async () => {
      const before = forStack('app').length;
      shas.set('app-4', await repo('app').commit('fix', yamlProgram(4)));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      await until(
        'app succeeded on the fix',
        async () => (await lastUpdate('app'))?.lastUpdate?.lastSuccessfulCommit === sha('app-4'),
        { timeoutMs: 60_000, log },
      );
      await until('UpdateSucceeded for the fix', () => forStack('app').length > before, {
        timeoutMs: 30_000,
        log,
      });
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([`UpdateSucceeded ${sha('app-4').slice(0, 8)}`]);
      expect(forge('app-3', 'app-4')).toEqual({ 'app-3': ['failure'], 'app-4': ['success'] });
      return { expected: ['UpdateSucceeded app-4'], observed: summary(got), forge: forge('app-4') };
    });
  });

  it('branch reset to the deployed commit after a failure: PKO runs nothing, nothing is sent, no commit turns green', async () => {
    dumpOnFailure();
    await scenario('v1 branch reset after a failure', async () => {
      const before = forStack('app').length;
      shas.set('app-5', await repo('app').commit('broken again', yamlProgram(5, { broken: true })));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      await until('UpdateFailed for the second broken commit', () => forStack('app').length > before, {
        timeoutMs: 60_000,
        log,
      });
      await repo('app').resetTo(sha('app-4'));
      await requestReconcile(kit.admin, kit.namespace, 'app');
      const st = await until(
        'PKO marks the Stack succeeded after the reset',
        async () => {
          const s = await lastUpdate('app');
          return s?.lastUpdate?.state === 'succeeded' && s.lastUpdate.lastAttemptedCommit === sha('app-5')
            ? s
            : undefined;
        },
        { timeoutMs: 60_000, log },
      );
      // What PKO v1 writes for a reset: succeeded, the broken commit still "attempted".
      expect(st.lastUpdate?.lastSuccessfulCommit).toBe(sha('app-4'));
      await sleep(QUIET_MS);
      const got = forStack('app').slice(before);
      expect(summary(got)).toEqual([`UpdateFailed ${sha('app-5').slice(0, 8)}`]);
      expect(forge('app-4', 'app-5')).toEqual({ 'app-4': ['success'], 'app-5': ['failure'] });
      return {
        expected: ['UpdateFailed app-5', '(reset: nothing)'],
        observed: summary(got),
        forge: forge('app-4', 'app-5'),
      };
    });
  });

  it('continueResyncOnCommitMatch: PKO re-runs the commit every 60 s, one UpdateSucceeded only', async () => {
    dumpOnFailure();
    await scenario('v1 continueResyncOnCommitMatch', async () => {
      const runs = (): number =>
        new Set(
          recorder
            .stacks('resync')
            .filter((s) => s.status?.lastUpdate?.state === 'succeeded')
            .map((s) => s.status?.lastUpdate?.lastResyncTime),
        ).size;
      await until('a resync run of the same commit', () => runs() >= 2, { timeoutMs: POLL_BUDGET_MS, log });
      await sleep(QUIET_MS);
      const got = forStack('resync');
      expect(summary(got)).toEqual([`UpdateSucceeded ${sha('resync-1').slice(0, 8)}`]);
      expect(forge('resync-1')).toEqual({ 'resync-1': ['success'] });
      return {
        expected: ['UpdateSucceeded resync-1'],
        observed: [...summary(got), `(PKO runs of the commit: ${runs()})`],
        forge: forge('resync-1'),
      };
    });
  });

  it('no-op branch polls send nothing', async () => {
    dumpOnFailure();
    await scenario('v1 no-op polls', async () => {
      // A poll writes Reconciling/StackProcessing, then Ready again, with lastUpdate unchanged.
      const polls = (): number =>
        recorder
          .stacks('idle')
          .filter(
            (s) =>
              s.status?.lastUpdate?.state === 'succeeded' &&
              s.status.conditions?.some((c) => c.type === 'Reconciling' && c.reason === 'StackProcessing'),
          ).length;
      await until('a no-op poll of idle', () => polls() >= 1, { timeoutMs: POLL_BUDGET_MS, log });
      await sleep(QUIET_MS);
      const got = forStack('idle');
      expect(summary(got)).toEqual([`UpdateSucceeded ${sha('idle-1').slice(0, 8)}`]);
      return {
        expected: ['UpdateSucceeded idle-1'],
        observed: [...summary(got), `(no-op polls seen: ${polls()})`],
        forge: forge('idle-1'),
      };
    });
  });

  it('Stack deletion: PKO removes its finalizer, nothing is sent', async () => {
    dumpOnFailure();
    await scenario('v1 Stack deletion', async () => {
      const before = kit.delivered().length;
      for (const name of ['app', 'resync', 'idle']) await deleteStack(kit.admin, kit.namespace, name);
      await until(
        'Stacks gone',
        async () => {
          for (const name of ['app', 'resync', 'idle']) {
            const gone = await getStack(kit.admin, kit.namespace, name).then(
              () => false,
              () => true,
            );
            if (!gone) return false;
          }
          return true;
        },
        { timeoutMs: 60_000, log },
      );
      await sleep(QUIET_MS);
      const got = kit.delivered().slice(before);
      expect(summary(got)).toEqual([]);
      expect(kit.gh.violations).toEqual([]);
      return { expected: [], observed: summary(got) };
    });
  });
});
