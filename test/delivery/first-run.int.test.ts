/**
 * A Stack's first run delivered by a controller that starts only after the Stack moved on (the
 * stress suite's round-0 NoCommit losses, made deterministic): PKO v2 names the commit of a run
 * such as "Initial stack update" only while it is the Stack's current or last run, so the
 * controller here starts after the second run finished, and must find the first run's commit
 * where PKO still records it (src/source/derive.ts `recordedRevisions`), or say why not.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { gitHubContract, startGitHubServer } from '../forge/github/server.ts';
import { RUN_COMMIT_ANNOTATION } from '../../src/source/derive.ts';

const sha = (): string => randomBytes(20).toString('hex');

beforeAll(() => {
  gitHubContract(); // load GitHub's OpenAPI description once, outside the tests' timeouts
}, 60_000);

/** GitHub, a Provider and an Alert; the Stack's runs happen before the controller starts. */
async function setUp(prefix: string, runs: (sim: PkoSimulator) => Promise<void>) {
  const token = `ghp_${randomBytes(12).toString('hex')}`;
  const gh = await startGitHubServer({ basePath: '/api/v3', tokens: { [token]: 'pko-bot' } });
  const ns = await createTestNamespace(prefix);
  const obj = new Objects(ns);
  await obj.secret('gh', { token });
  await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
  await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
  const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
  await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
  await runs(sim);
  const ctl = await startInProcess(ns, {
    flags: ['--github-write-pacing=false', `--cluster-name=${prefix}`],
  });
  const states = (c: string): string[] => gh.statuses('acme/app', c).map((s) => s.state);
  return { gh, ctl, states, seen: (...commits: string[]) => whatWasSeen(ctl, states, commits) };
}

/** For a timeout message: each commit's statuses and the controller's skips and failures. */
function whatWasSeen(ctl: InProcessController, states: (c: string) => string[], commits: string[]): string {
  const byCommit = commits.map((c, i) => `c${String(i + 1)} ${JSON.stringify(states(c))}`);
  const notes = ctl.logs
    .parsed()
    .filter((l) => l['skipReason'] !== undefined || l['failReason'] !== undefined)
    .map((l) => `${String(l['skipReason'] ?? l['failReason'])}: ${String(l['msg'])}`);
  return [...byCommit, ...notes].join('; ');
}

describe('the commit of a Stack’s first run, once the Stack moved on (PKO v2)', () => {
  it('first run succeeded, the next commit failed: the first run’s status comes from lastSuccessfulCommit', async () => {
    const c1 = sha();
    const c2 = sha();
    const { gh, ctl, states, seen } = await setUp('first-lsc', async (sim) => {
      const r1 = await sim.startRun('app', { type: 'up', commit: c1 });
      expect(r1.message).toBe('Initial stack update');
      await sim.finishRun(r1, 'succeeded');
      await sim.finishRun(await sim.startRun('app', { type: 'up', commit: c2 }), 'failed');
    });
    try {
      await waitFor(() => Promise.resolve(states(c1).includes('success') && states(c2).includes('failure')), {
        timeoutMs: 60_000,
        what: 'a success status on the first run’s commit and a failure on the second',
        state: () => seen(c1, c2),
      });
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 120_000);

  it('first run failed and its retry succeeded: the failure status names the retry’s commit', async () => {
    const c1 = sha();
    const { gh, ctl, states, seen } = await setUp('first-retry', async (sim) => {
      await sim.finishRun(await sim.startRun('app', { type: 'up', commit: c1 }), 'failed');
      const retry = await sim.startRun('app', { type: 'up', commit: c1 });
      expect(retry.message).toMatch(/^Backoff time elapsed/);
      await sim.finishRun(retry, 'succeeded');
    });
    try {
      await waitFor(() => Promise.resolve(states(c1).includes('failure') && states(c1).includes('success')), {
        timeoutMs: 60_000,
        what: 'the first run’s failure and its retry’s success on the same commit',
        state: () => seen(c1),
      });
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 120_000);

  it('first run succeeded, the next commit succeeded: PKO records the first commit nowhere, and the skip says so', async () => {
    const c1 = sha();
    const c2 = sha();
    let first = '';
    let pko: PkoSimulator | undefined;
    // Another shard watches every namespace while the runs happen (in CI, other files' sharded
    // controllers do): it serves no Alert that selects this Stack, so it must not record the
    // first run's commit that it saw — PKO alone would not tell this controller.
    const shard = await startInProcess('', {
      flags: ['--watch-label-selector=pko-nc-test/shard=none', '--cluster-name=first-gap-shard'],
    });
    await waitFor(() => Promise.resolve(shard.handle.ready().ok), {
      timeoutMs: 60_000,
      what: 'the other shard ready',
    });
    const { gh, ctl, states, seen } = await setUp('first-gap', async (sim) => {
      pko = sim;
      const r1 = await sim.startRun('app', { type: 'up', commit: c1 });
      first = r1.name;
      await sim.finishRun(r1, 'succeeded');
      await sim.finishRun(await sim.startRun('app', { type: 'up', commit: c2 }), 'succeeded');
    });
    try {
      const note = `PKO names the commit of run ${first} ("Initial stack update") only while it is the Stack's current or last run, and this controller did not see it then`;
      await waitFor(
        () =>
          Promise.resolve(
            states(c2).includes('success') &&
              ctl.logs
                .parsed()
                .some((l) => l['skipReason'] === 'NoCommit' && String(l['msg']).includes(note)),
          ),
        {
          timeoutMs: 60_000,
          what: 'the second run’s status and the first run’s NoCommit with its note',
          state: () => seen(c1, c2),
        },
      );
      expect(states(c1)).toEqual([]);
      const annotations = (await pko?.getUpdate(first))?.metadata.annotations ?? {};
      expect(annotations[RUN_COMMIT_ANNOTATION]).toBeUndefined();
    } finally {
      await shard.stop();
      await ctl.stop();
      await gh.close();
    }
  }, 120_000);

  it('first run succeeded, the next commit succeeded, seen by a leader that stopped: its annotation carries the commit to the next one', async () => {
    const token = `ghp_${randomBytes(12).toString('hex')}`;
    const gh = await startGitHubServer({ basePath: '/api/v3', tokens: { [token]: 'pko-bot' } });
    // While the first controller runs, GitHub answers 429 with a long retry-after: nothing lands.
    let blocked = true;
    gh.throttle({ status: 429, retryAfter: 3600, count: 1_000_000, match: () => blocked });
    const ns = await createTestNamespace('first-annotated');
    const obj = new Objects(ns);
    await obj.secret('gh', { token });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
    const flags = ['--github-write-pacing=false', '--cluster-name=first-annotated'];
    const states = (c: string): string[] => gh.statuses('acme/app', c).map((x) => x.state);
    const c1 = sha();
    const c2 = sha();
    const first = await startInProcess(ns, { flags });
    let second: Awaited<ReturnType<typeof startInProcess>> | undefined;
    try {
      await obj.waitReady('alerts', 'gh');
      const r1 = await sim.startRun('app', { type: 'up', commit: c1 });
      await sim.finishRun(r1, 'succeeded');
      await waitFor(
        async () => (await sim.getUpdate(r1.name)).metadata.annotations?.[RUN_COMMIT_ANNOTATION] === c1,
        { timeoutMs: 60_000, what: 'the first run’s commit in its Update’s annotation' },
      );
      await first.stop();
      expect(states(c1)).toEqual([]);
      await sim.finishRun(await sim.startRun('app', { type: 'up', commit: c2 }), 'succeeded');
      blocked = false;
      second = await startInProcess(ns, { flags });
      await waitFor(() => Promise.resolve(states(c1).includes('success') && states(c2).includes('success')), {
        timeoutMs: 60_000,
        what: 'success statuses on both commits from the controller started after both runs',
      });
    } finally {
      await first.stop();
      await second?.stop();
      await gh.close();
    }
  }, 180_000);

  it('first run succeeded while the Alert waited for its Provider, the next commit succeeded: the annotation still carries the first commit', async () => {
    const token = `ghp_${randomBytes(12).toString('hex')}`;
    const gh = await startGitHubServer({ basePath: '/api/v3', tokens: { [token]: 'pko-bot' } });
    const ns = await createTestNamespace('first-waiting');
    const obj = new Objects(ns);
    await obj.secret('gh', { token });
    // Applied before its Provider (a GitOps tool's order): Ready=False, ProviderNotFound.
    await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
    const flags = ['--github-write-pacing=false', '--cluster-name=first-waiting'];
    const states = (c: string): string[] => gh.statuses('acme/app', c).map((x) => x.state);
    const c1 = sha();
    const c2 = sha();
    const first = await startInProcess(ns, { flags });
    let second: Awaited<ReturnType<typeof startInProcess>> | undefined;
    try {
      await obj.waitReady('alerts', 'gh', 'False', 'ProviderNotFound');
      const r1 = await sim.startRun('app', { type: 'up', commit: c1 });
      await sim.finishRun(r1, 'succeeded');
      await waitFor(
        async () => (await sim.getUpdate(r1.name)).metadata.annotations?.[RUN_COMMIT_ANNOTATION] === c1,
        { timeoutMs: 60_000, what: 'the first run’s commit in its Update’s annotation, the Alert not Ready' },
      );
      await first.stop();
      await sim.finishRun(await sim.startRun('app', { type: 'up', commit: c2 }), 'succeeded');
      await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
      second = await startInProcess(ns, { flags });
      const ctl = second;
      await waitFor(() => Promise.resolve(states(c1).includes('success') && states(c2).includes('success')), {
        timeoutMs: 60_000,
        what: 'success statuses on both commits once the Provider exists',
        state: () => whatWasSeen(ctl, states, [c1, c2]),
      });
    } finally {
      await first.stop();
      await second?.stop();
      await gh.close();
    }
  }, 180_000);
});
