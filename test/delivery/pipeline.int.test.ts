/**
 * The whole pipeline on the real control plane: PKO objects written as PKO v1.16 / v2.x write
 * them (test/support/pko.ts) → informers → events → Alerts → ledger → a local webhook receiver.
 * Case ids (F..) name the failure reports in shared/cases/cases.yaml.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeConfig, createTestNamespace, waitFor } from '../support/cluster.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { installAlertSourcesPolicy } from '../support/alert-sources.ts';

const SHA = '9f1c2e7d0a4b5c6d7e8f90112233445566778899';
const SHA2 = '2b0889718d3e63feeb6079ccd5e4488d8601e353';

interface Received {
  id: string;
  reason: string;
  severity: string;
  message: string;
  involvedObject: { kind: string; namespace: string; name: string };
  metadata: Record<string, string | undefined>;
}

function received(r: TestReceiver, path?: string): Received[] {
  return r.requests
    .filter((q) => path === undefined || q.path === path)
    .map((q) => JSON.parse(q.body) as Received);
}

async function waitCount(r: TestReceiver, n: number, path?: string, timeoutMs = 20_000): Promise<Received[]> {
  return waitFor(() => Promise.resolve(received(r, path).length >= n ? received(r, path) : undefined), {
    timeoutMs,
    intervalMs: 50,
    what: `${n} deliveries${path ? ` to ${path}` : ''} (have ${received(r, path).length})`,
  });
}

/** Waits a while and asserts nothing more arrived. */
async function settle(r: TestReceiver, expected: number, ms = 1500): Promise<void> {
  await new Promise((res) => setTimeout(res, ms));
  expect(received(r)).toHaveLength(expected);
}

let receiver: TestReceiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
});

async function setup(
  prefix: string,
  alertSpec: object = {},
  pko: 'v1' | 'v2' = 'v2',
): Promise<{ ns: string; sim: PkoSimulator; obj: Objects; ctl: InProcessController; path: string }> {
  const ns = await createTestNamespace(prefix);
  const obj = new Objects(ns);
  const path = `/${ns}`;
  await obj.provider('hook', { type: 'generic', address: `${receiver.url}${path}` });
  await obj.alert('all', {
    providerRef: { name: 'hook' },
    eventSources: [{ kind: 'Stack', name: '*' }],
    ...alertSpec,
  });
  const ctl = await startInProcess(ns);
  await obj.waitReady('alerts', 'all');
  return { ns, sim: new PkoSimulator(kubeConfig('admin'), ns, { version: pko }), obj, ctl, path };
}

describe('v2 git source', () => {
  let t: Awaited<ReturnType<typeof setup>>;
  beforeAll(async () => {
    t = await setup('pipe-v2');
  });
  afterAll(async () => t.ctl.stop());

  it('up running → succeeded delivers UpdateStarted then UpdateSucceeded with metadata', async () => {
    await t.sim.createStack(
      'app',
      { git: { projectRepo: 'https://github.com/acme/app.git', branch: 'main' } },
      { stack: 'acme/app/dev' },
    );
    const run = await t.sim.startRun('app', { type: 'up', commit: SHA });
    const [started] = await waitCount(receiver, 1, t.path);
    expect(started?.reason).toBe('UpdateStarted');
    await t.sim.finishRun(run, 'succeeded');
    const evs = await waitCount(receiver, 2, t.path);
    expect(evs.map((e) => e.reason)).toEqual(['UpdateStarted', 'UpdateSucceeded']);
    const done = evs[1]!;
    expect(done.severity).toBe('info');
    expect(done.involvedObject).toMatchObject({ kind: 'Stack', namespace: t.ns, name: 'app' });
    expect(done.metadata).toMatchObject({
      commit: SHA,
      revision: SHA,
      repository: 'https://github.com/acme/app.git',
      branch: 'main',
      stack: 'acme/app/dev',
      updateName: run.name,
      updateType: 'up',
    });
    expect(done.metadata.permalink).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);
    await settle(receiver, received(receiver).length);
    expect(received(receiver, t.path)).toHaveLength(2);
  });

  it('preview running → failed delivers PreviewStarted then PreviewFailed (error) with the CLI output, ANSI-free', async () => {
    await t.sim.createStack(
      'pv',
      { git: { projectRepo: 'https://github.com/acme/app.git', branch: 'main' } },
      { stack: 'acme/app/pv', preview: true },
    );
    const before = received(receiver, t.path).length;
    const run = await t.sim.startRun('pv', { type: 'preview', commit: SHA2 });
    await waitCount(receiver, before + 1, t.path);
    await t.sim.finishRun(run, 'failed', {
      message: 'preview failed: exit status 255\nstderr: \u001b[31merror:\u001b[0m resource is broken\n',
    });
    const evs = (await waitCount(receiver, before + 2, t.path)).slice(before);
    expect(evs.map((e) => e.reason)).toEqual(['PreviewStarted', 'PreviewFailed']);
    expect(evs[1]!.severity).toBe('error');
    expect(evs[1]!.message).toContain('error: resource is broken');
    expect(evs[1]!.message).not.toContain('\u001b');
  });

  it('delivers the runs of one Stack in order, each once', async () => {
    await t.sim.createStack(
      'seq',
      { git: { projectRepo: 'https://github.com/acme/app.git', branch: 'main' } },
      { stack: 'acme/app/seq' },
    );
    const before = received(receiver, t.path).length;
    const shas = ['1', '2', '3', '4', '5'].map((c) => c.repeat(40));
    for (const sha of shas) {
      const run = await t.sim.startRun('seq', { type: 'up', commit: sha });
      await t.sim.finishRun(run, 'succeeded');
    }
    // Fast runs: a run's Started may be skipped when its result is already known; results never are.
    await waitFor(
      () =>
        Promise.resolve(
          received(receiver, t.path)
            .slice(before)
            .filter((e) => e.reason === 'UpdateSucceeded').length === 5,
        ),
      {
        timeoutMs: 20_000,
        what: '5 UpdateSucceeded',
      },
    );
    await new Promise((r) => setTimeout(r, 1000));
    const evs = received(receiver, t.path)
      .slice(before)
      .filter((e) => e.involvedObject.name === 'seq');
    const results = evs.filter((e) => e.reason === 'UpdateSucceeded').map((e) => e.metadata.commit);
    expect(results).toEqual(shas);
    expect(new Set(evs.map((e) => e.id)).size).toBe(evs.length);
    // Each Started (if sent) precedes its own result.
    for (const [i, e] of evs.entries()) {
      if (e.reason === 'UpdateStarted') expect(evs[i + 1]?.metadata.updateName).toBe(e.metadata.updateName);
    }
  });
});

describe('sources and shapes', () => {
  it('Flux source: repository from the GitRepository, commit from main@sha1:<sha>', async () => {
    const t = await setup('pipe-flux');
    try {
      await t.sim.createStack(
        'fx',
        { flux: { gitRepositoryName: 'repo', url: 'https://gitlab.example.net/platform/app.git' } },
        { stack: 'acme/fx/dev' },
      );
      const run = await t.sim.startRun('fx', { type: 'up', commit: `main@sha1:${SHA}` });
      await t.sim.finishRun(run, 'succeeded');
      const evs = await waitCount(receiver, 1, t.path);
      const last = await waitFor(
        () => Promise.resolve(received(receiver, t.path).find((e) => e.reason === 'UpdateSucceeded')),
        { what: 'UpdateSucceeded' },
      );
      expect(last.metadata).toMatchObject({
        commit: SHA,
        revision: `main@sha1:${SHA}`,
        repository: 'https://gitlab.example.net/platform/app.git',
        branch: 'main',
      });
      expect(evs.length).toBeGreaterThan(0);
    } finally {
      await t.ctl.stop();
    }
  });

  it('PKO v1 Stack: succeeded then failed on a new commit', async () => {
    const t = await setup('pipe-v1', {}, 'v1');
    try {
      await t.sim.createStack(
        'legacy',
        { git: { projectRepo: 'https://github.com/acme/legacy', branch: 'main' } },
        { stack: 'acme/legacy/prod' },
      );
      await t.sim.v1Run('legacy', { commit: SHA, state: 'succeeded' });
      await waitCount(receiver, 1, t.path);
      await t.sim.v1Run('legacy', { commit: SHA2, state: 'failed', message: 'update failed' });
      const evs = await waitCount(receiver, 2, t.path);
      expect(evs.map((e) => [e.reason, e.metadata.commit])).toEqual([
        ['UpdateSucceeded', SHA],
        ['UpdateFailed', SHA2],
      ]);
      await settle(receiver, received(receiver).length);
      expect(received(receiver, t.path)).toHaveLength(2);
    } finally {
      await t.ctl.stop();
    }
  });

  it('F26: Program source (revision "3") is delivered to slack and generic with the fields that exist', async () => {
    const t = await setup('pipe-f26');
    try {
      await t.obj.provider('chat', { type: 'slack', address: `${receiver.url}${t.path}-slack` });
      await t.obj.alert('to-slack', {
        providerRef: { name: 'chat' },
        eventSources: [{ kind: 'Stack' }],
        eventReasons: ['UpdateFailed'],
      });
      await t.obj.waitReady('alerts', 'to-slack');
      await t.sim.createStack('prog', { program: { name: 'my-program' } }, { stack: 'acme/prog/dev' });
      const run = await t.sim.startRun('prog', { type: 'up', commit: '3' });
      await t.sim.finishRun(run, 'failed');
      const ev = await waitFor(
        () => Promise.resolve(received(receiver, t.path).find((e) => e.reason === 'UpdateFailed')),
        { what: 'UpdateFailed' },
      );
      expect(ev.metadata.revision).toBe('3');
      expect(ev.metadata).not.toHaveProperty('commit');
      expect(ev.metadata).not.toHaveProperty('repository');
      expect(ev.metadata.stack).toBe('acme/prog/dev');
      const chat = await waitFor(
        () => Promise.resolve(receiver.requests.find((q) => q.path === `${t.path}-slack`)),
        { what: 'the slack message' },
      );
      expect((JSON.parse(chat.body) as { text: string }).text).toContain('acme/prog/dev');
    } finally {
      await t.ctl.stop();
    }
  });
});

describe('cases', () => {
  it('F04: a Program-source failure reaches slack; the github Provider posts nothing and says why once', async () => {
    const t = await setup('pipe-f04', { eventSeverity: 'error' });
    const github = await startReceiver();
    try {
      await t.obj.secret('gh', { token: 'ghp_f04tokenvalue' });
      await t.obj.provider('gh', {
        type: 'github',
        address: `${github.url}/acme/app`,
        secretRef: { name: 'gh' },
      });
      await t.obj.alert('to-github', {
        providerRef: { name: 'gh' },
        eventSources: [{ kind: 'Stack', name: '*' }],
      });
      await t.obj.waitReady('alerts', 'to-github');
      await t.obj.provider('chat', { type: 'slack', address: `${receiver.url}${t.path}-slack` });
      await t.obj.alert('to-slack', {
        providerRef: { name: 'chat' },
        eventSources: [{ kind: 'Stack', name: '*' }],
        eventSeverity: 'error',
      });
      await t.obj.waitReady('alerts', 'to-slack');
      await t.sim.createStack('prog', { program: { name: 'p' } }, { stack: 'acme/prog/dev' });
      const run = await t.sim.startRun('prog', { type: 'up', commit: '3' });
      await t.sim.finishRun(run, 'failed');
      await waitCount(receiver, 1, t.path);
      const chat = await waitFor(
        () => Promise.resolve(receiver.requests.find((q) => q.path === `${t.path}-slack`)),
        { what: 'the slack message' },
      );
      expect((JSON.parse(chat.body) as { text: string }).text).toMatch(/failed/i);
      const status = await waitFor(
        async () => {
          const a = await t.obj.get('alerts', 'to-github');
          return a.status?.lastDelivery?.find((d) => d.result === 'Skipped');
        },
        { what: 'Skipped lastDelivery on the github Alert' },
      );
      expect(status.reason).toBe('NoCommit');
      expect(status.message).toMatch(/not a git commit/);
      // Resyncs and relists do not explain it again.
      t.ctl.handle.router.queue.add(`${t.ns}/prog`);
      await new Promise((r) => setTimeout(r, 1000));
      const explained = t.ctl.logs.parsed().filter((l) => l.skipReason === 'NoCommit');
      expect(explained).toHaveLength(2); // Started and Failed of the run, once each
      expect(github.requests).toHaveLength(0);
    } finally {
      await github.close();
      await t.ctl.stop();
    }
  });

  it('F05: relists and restarts with unchanged status cause no further deliveries', async () => {
    const ns = await createTestNamespace('pipe-f05');
    const obj = new Objects(ns);
    const path = `/${ns}`;
    await obj.provider('hook', { type: 'generic', address: `${receiver.url}${path}` });
    await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] });
    let ctl = await startInProcess(ns, { flags: ['--relist-interval=300ms'] });
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    try {
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const run = await sim.startRun('app', { type: 'up', commit: SHA });
      await sim.finishRun(run, 'succeeded');
      await waitFor(
        () => Promise.resolve(received(receiver, path).some((e) => e.reason === 'UpdateSucceeded')),
        { what: 'UpdateSucceeded' },
      );
      const n = received(receiver, path).length; // the result, and the Started if it went out first
      expect(n).toBeLessThanOrEqual(2);
      expect(new Set(received(receiver, path).map((e) => e.id)).size).toBe(n);
      await new Promise((r) => setTimeout(r, 2500)); // ~8 relists
      expect(received(receiver, path)).toHaveLength(n);
      await ctl.stop();
      ctl = await startInProcess(ns, { flags: ['--relist-interval=300ms'] });
      await new Promise((r) => setTimeout(r, 2500));
      expect(received(receiver, path)).toHaveLength(n);
    } finally {
      await ctl.stop();
    }
  });

  it('F19: two Alerts with different eventMetadata each deliver only their own', async () => {
    const t = await setup('pipe-f19', { eventMetadata: { team: 'alpha' } });
    try {
      await t.obj.provider('hook2', { type: 'generic', address: `${receiver.url}${t.path}-2` });
      await t.obj.alert('second', {
        providerRef: { name: 'hook2' },
        eventSources: [{ kind: 'Stack' }],
        eventMetadata: { env: 'prod' },
      });
      await t.obj.waitReady('alerts', 'second');
      await t.sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const run = await t.sim.startRun('app', { type: 'up', commit: SHA });
      await t.sim.finishRun(run, 'succeeded');
      const a = await waitFor(
        () => Promise.resolve(received(receiver, t.path).find((e) => e.reason === 'UpdateSucceeded')),
        { what: 'first' },
      );
      const b = await waitFor(
        () => Promise.resolve(received(receiver, `${t.path}-2`).find((e) => e.reason === 'UpdateSucceeded')),
        { what: 'second' },
      );
      expect(a.metadata.team).toBe('alpha');
      expect(a.metadata).not.toHaveProperty('env');
      expect(b.metadata.env).toBe('prod');
      expect(b.metadata).not.toHaveProperty('team');
    } finally {
      await t.ctl.stop();
    }
  });

  it('F18: namespace "*" matches Stacks in every namespace (opened: --no-cross-namespace-refs=false)', async () => {
    // Other namespaces are honoured only when opened, for an Alert the admission policy checked
    // (case B14): the admin may list Stacks everywhere, so its Alert is admitted.
    await installAlertSourcesPolicy();
    const home = await createTestNamespace('pipe-f18');
    const other = await createTestNamespace('pipe-f18-other');
    const obj = new Objects(home);
    const path = `/${home}`;
    const label = home; // unique per run: other test files' Stacks are not selected
    // A controller that watches every namespace serves only this test's Provider and Alert
    // (--watch-label-selector): unscoped, it would also deliver for the Alerts of test files
    // running beside this one — a second sender that duplicated their events.
    const shard = { 'pko-nc.test/shard': home };
    await obj.provider('hook', { type: 'generic', address: `${receiver.url}${path}` }, shard);
    await obj.alert(
      'everywhere',
      {
        providerRef: { name: 'hook' },
        eventSources: [{ kind: 'Stack', name: '*', namespace: '*', matchLabels: { suite: label } }],
      },
      shard,
    );
    const ctl = await startInProcess('', {
      flags: [`--watch-label-selector=pko-nc.test/shard=${home}`, '--no-cross-namespace-refs=false'],
    });
    try {
      await obj.waitReady('alerts', 'everywhere');
      for (const ns of [home, other]) {
        const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
        await sim.createStack(
          'app',
          { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } },
          { labels: { suite: label } },
        );
        const run = await sim.startRun('app', { type: 'up', commit: SHA });
        await sim.finishRun(run, 'succeeded');
      }
      await waitFor(
        () =>
          Promise.resolve(
            new Set(
              received(receiver, path)
                .filter((e) => e.reason === 'UpdateSucceeded')
                .map((e) => e.involvedObject.namespace),
            ).size === 2,
          ),
        { what: 'UpdateSucceeded from both namespaces' },
      );
    } finally {
      await ctl.stop();
    }
  });

  it('F20: 429 with Retry-After: 7 → no request before 7 s, then delivered (not left at Started)', async () => {
    const t = await setup('pipe-f20', { eventReasons: ['UpdateSucceeded'] });
    try {
      await t.sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      receiver.respondWith([{ status: 429, headers: { 'retry-after': '7' } }]);
      const run = await t.sim.startRun('app', { type: 'up', commit: SHA });
      await t.sim.finishRun(run, 'succeeded');
      const evs = await waitCount(receiver, 2, t.path, 30_000);
      const [first, second] = receiver.requests.filter((q) => q.path === t.path);
      expect(second!.time - first!.time).toBeGreaterThanOrEqual(7000);
      expect(evs[1]!.reason).toBe('UpdateSucceeded');
      expect(evs[0]!.id).toBe(evs[1]!.id);
    } finally {
      await t.ctl.stop();
    }
  }, 45_000);

  it('F22: Stalled=True (UpdateFailed after 3 failures) delivers a StackStalled error', async () => {
    const t = await setup('pipe-f22', { eventSeverity: 'error' });
    try {
      await t.sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      for (let i = 0; i < 3; i++) {
        const run = await t.sim.startRun('app', { type: 'up', commit: SHA });
        await t.sim.finishRun(run, 'failed');
      }
      await t.sim.stall('app', 'UpdateFailed');
      const stalled = await waitFor(
        () => Promise.resolve(received(receiver, t.path).find((e) => e.reason === 'StackStalled')),
        { what: 'StackStalled' },
      );
      expect(stalled.severity).toBe('error');
      expect(stalled.metadata.commit).toBe(SHA);
      const failures = received(receiver, t.path).filter((e) => e.reason === 'UpdateFailed');
      expect(failures.length).toBeGreaterThanOrEqual(1);
    } finally {
      await t.ctl.stop();
    }
  });

  it('F29: an aborted Update is not a failure; the next run of the same commit is reported', async () => {
    const t = await setup('pipe-f29');
    try {
      await t.sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const aborted = await t.sim.startRun('app', { type: 'up', commit: SHA });
      await waitCount(receiver, 1, t.path);
      await t.sim.finishRun(aborted, 'aborted');
      const next = await t.sim.startRun('app', { type: 'up', commit: SHA });
      await t.sim.finishRun(next, 'succeeded');
      await waitFor(
        () => Promise.resolve(received(receiver, t.path).some((e) => e.reason === 'UpdateSucceeded')),
        { what: 'UpdateSucceeded' },
      );
      await new Promise((r) => setTimeout(r, 1000));
      const evs = received(receiver, t.path);
      expect(evs.filter((e) => e.reason === 'UpdateFailed')).toHaveLength(0);
      expect(evs.find((e) => e.reason === 'UpdateSucceeded')?.metadata.updateName).toBe(next.name);
    } finally {
      await t.ctl.stop();
    }
  });
});
