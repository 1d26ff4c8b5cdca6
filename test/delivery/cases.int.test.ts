/**
 * Delivery cases on the real control plane (ids from the case list): N03 (two Alerts, one pull
 * request → one sticky comment), N10 a/b (a deleted Secret stops sends and holds events; a rotated
 * and revoked token loses nothing), B04 (order from our own observation: names and clocks that
 * lie), B06 (deleting an Alert cancels its pending retries at once).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { gitHubContract, startGitHubServer, type GitHubContractServer } from '../forge/github/server.ts';

interface Received {
  id: string;
  reason: string;
  metadata: Record<string, string | undefined>;
}
const received = (r: TestReceiver, path: string): Received[] =>
  r.requests.filter((q) => q.path === path).map((q) => JSON.parse(q.body) as Received);

const sha = (): string => randomBytes(20).toString('hex');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => {
        resolve(port);
      });
    });
  });
}

let receiver: TestReceiver;
beforeAll(async () => {
  gitHubContract(); // load GitHub's OpenAPI description once, outside the tests' timeouts
  receiver = await startReceiver();
}, 60_000);
afterAll(async () => {
  await receiver.close();
});

async function generic(prefix: string, providerSpec: object = {}) {
  const ns = await createTestNamespace(prefix);
  const obj = new Objects(ns);
  const path = `/${ns}`;
  await obj.provider('hook', { type: 'generic', address: `${receiver.url}${path}`, ...providerSpec });
  await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] });
  return { ns, obj, path };
}

describe('B04: order from our own observation, never from names or clocks', () => {
  it('B04: an Update named <stack>-fffffffffff, then normal ones, then <stack>-manual-refresh-000000001: every result delivered once, in the order observed', async () => {
    const { ns, obj, path } = await generic('b04-names');
    const ctl = await startInProcess(ns);
    try {
      await obj.waitReady('alerts', 'all');
      // A clock far in the future names the first Update app-fffffffffff (year 2527).
      const future = new PkoSimulator(kubeConfig('admin'), ns, {
        version: 'v2',
        clock: { now: () => 0xfffffffffff },
      });
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const names: string[] = [];
      const r1 = await future.startRun('app', { type: 'up', commit: sha() });
      await future.finishRun(r1, 'failed');
      names.push(r1.name);
      for (let i = 0; i < 2; i++) {
        const r = await sim.startRun('app', { type: 'up', commit: sha() });
        await sim.finishRun(r, 'succeeded');
        names.push(r.name);
      }
      const manual = await sim.startRun('app', {
        type: 'up',
        commit: sha(),
        name: 'app-manual-refresh-000000001',
      });
      await sim.finishRun(manual, 'succeeded');
      names.push(manual.name);
      expect(names[0]).toBe('app-fffffffffff');

      const results = (): string[] =>
        received(receiver, path)
          .filter((e) => e.reason === 'UpdateSucceeded' || e.reason === 'UpdateFailed')
          .map((e) => e.metadata['updateName'] ?? '');
      await waitFor(() => Promise.resolve(results().length >= names.length), {
        timeoutMs: 30_000,
        what: `${names.length} results (have ${results().length})`,
      });
      await sleep(1500);
      expect(results()).toEqual(names);
      const ids = received(receiver, path).map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      await ctl.stop();
    }
  }, 90_000);

  it('B04: PKO v1 with lastResyncTime an hour ahead, then the clock moving back an hour: every outcome delivered, in the order observed', async () => {
    const { ns, obj, path } = await generic('b04-v1');
    const ctl = await startInProcess(ns);
    try {
      await obj.waitReady('alerts', 'all');
      const ahead = new PkoSimulator(kubeConfig('admin'), ns, {
        version: 'v1',
        clock: { now: () => Date.now() + 3_600_000 },
      });
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v1' });
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const c1 = sha();
      const c2 = sha();
      const c3 = sha();
      await ahead.v1Run('app', { commit: c1, state: 'failed' });
      const outcomes = (): string[] =>
        received(receiver, path)
          .filter((e) => e.reason === 'UpdateSucceeded' || e.reason === 'UpdateFailed')
          .map((e) => `${e.reason} ${e.metadata['commit'] ?? ''}`);
      // Each outcome is seen before the next is written (v1 shows only the latest on the Stack).
      const wait = (n: number): Promise<boolean> =>
        waitFor(() => Promise.resolve(outcomes().length >= n), { timeoutMs: 20_000, what: `${n} outcomes` });
      await wait(1);
      await sim.v1Run('app', { commit: c2, state: 'succeeded' }); // an hour "earlier"
      await wait(2);
      await sim.v1Run('app', { commit: c3, state: 'failed' });
      await wait(3);
      await sleep(1500);
      expect(outcomes()).toEqual([`UpdateFailed ${c1}`, `UpdateSucceeded ${c2}`, `UpdateFailed ${c3}`]);
    } finally {
      await ctl.stop();
    }
  }, 90_000);
});

describe('B06: work follows the object', () => {
  it('B06: deleting an Alert cancels its retries at once: nothing reaches the endpoint once it answers', async () => {
    const port = await freePort(); // nothing listens yet: every attempt fails and is retried
    const ns = await createTestNamespace('b06');
    const obj = new Objects(ns);
    await obj.provider('hook', { type: 'generic', address: `http://127.0.0.1:${port}/hook` });
    await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] });
    const ctl = await startInProcess(ns);
    try {
      await obj.waitReady('alerts', 'all');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const run = await sim.startRun('app', { type: 'up', commit: sha() });
      await sim.finishRun(run, 'succeeded');
      await waitFor(
        () =>
          Promise.resolve(
            ctl.logs.parsed().some((l) => String(l['msg']).startsWith('delivery failed, retrying')),
          ),
        { timeoutMs: 20_000, what: 'a retried delivery' },
      );
      await obj.custom.deleteNamespacedCustomObject({
        group: 'notification.pko.dev',
        version: 'v1alpha1',
        namespace: ns,
        plural: 'alerts',
        name: 'all',
      });
      await sleep(1000);
      // The endpoint answers now; the retry policy (200 ms doubling to 2 s) would have sent again.
      const r = await startReceiver({ port });
      try {
        await sleep(5000);
        expect(r.requests).toHaveLength(0);
      } finally {
        await r.close();
      }
    } finally {
      await ctl.stop();
    }
  }, 60_000);
});

describe('N10: fresh credentials', () => {
  it('N10a: a deleted Secret makes the Provider Ready=False/SecretNotFound and the Alert say so; nothing is sent; the held event goes out once the Secret is back', async () => {
    const ns = await createTestNamespace('n10a');
    const obj = new Objects(ns);
    const path = `/${ns}`;
    await obj.secret('hook', { address: `${receiver.url}${path}` });
    await obj.provider('hook', { type: 'generic', secretRef: { name: 'hook' } });
    await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] });
    const ctl = await startInProcess(ns, { flags: ['--secret-refresh-interval=1s'] });
    try {
      await obj.waitReady('providers', 'hook');
      await obj.waitReady('alerts', 'all');
      await obj.core.deleteNamespacedSecret({ name: 'hook', namespace: ns });
      await obj.waitReady('providers', 'hook', 'False', 'SecretNotFound');
      await obj.waitReady('alerts', 'all', 'False', 'ProviderNotReady');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const run = await sim.startRun('app', { type: 'up', commit: sha() });
      await sim.finishRun(run, 'succeeded');
      await sleep(3000);
      expect(received(receiver, path)).toEqual([]);

      await obj.secret('hook', { address: `${receiver.url}${path}` });
      await waitFor(
        () => Promise.resolve(received(receiver, path).some((e) => e.reason === 'UpdateSucceeded')),
        { timeoutMs: 20_000, what: 'the held result' },
      );
      await obj.waitReady('alerts', 'all');
      const ids = received(receiver, path).map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
    } finally {
      await ctl.stop();
    }
  }, 90_000);

  it('N10b: a token rotated in the Secret and revoked at GitHub: the next event gets 401, the Secret is read again, and it is delivered with the new token — nothing lost', async () => {
    const oldToken = `ghp_${randomBytes(12).toString('hex')}`;
    const newToken = `ghp_${randomBytes(12).toString('hex')}`;
    const gh: GitHubContractServer = await startGitHubServer({
      basePath: '/api/v3',
      tokens: { [oldToken]: 'pko-bot' },
    });
    const ns = await createTestNamespace('n10b');
    const obj = new Objects(ns);
    await obj.secret('gh', { token: oldToken });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
    // The periodic re-read is far away: only the 401 can make the controller see the new token.
    const ctl = await startInProcess(ns, {
      flags: ['--secret-refresh-interval=10m', '--github-write-pacing=false', '--cluster-name=n10b'],
    });
    try {
      await obj.waitReady('providers', 'gh');
      await obj.waitReady('alerts', 'gh');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
      const success = (c: string): boolean => gh.statuses('acme/app', c).some((s) => s.state === 'success');
      const c1 = sha();
      const r1 = await sim.startRun('app', { type: 'up', commit: c1 });
      await sim.finishRun(r1, 'succeeded');
      await waitFor(() => Promise.resolve(success(c1)), { timeoutMs: 20_000, what: 'first status' });

      await obj.core.replaceNamespacedSecret({
        name: 'gh',
        namespace: ns,
        body: { metadata: { name: 'gh' }, stringData: { token: newToken } },
      });
      gh.addToken(newToken, 'pko-bot');
      gh.revokeToken(oldToken);
      const c2 = sha();
      const r2 = await sim.startRun('app', { type: 'up', commit: c2 });
      await sim.finishRun(r2, 'succeeded');
      await waitFor(() => Promise.resolve(success(c2)), {
        timeoutMs: 20_000,
        what: 'status with the new token',
      });
      const lines = ctl.logs.parsed();
      expect(
        lines.some((l) => l['msg'] === 'credentials changed in the Secret: sending again with the new ones'),
      ).toBe(true);
      const alert = await obj.get('alerts', 'gh');
      expect((alert.status?.lastDelivery ?? []).map((d) => d.result)).not.toContain('Failed');
      expect(ctl.logs.lines.join('\n')).not.toContain(newToken);
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 90_000);
});

describe('N03: read-modify-write per target', () => {
  it('N03: two Alerts route one Stack to one github Provider: exactly one sticky comment on the pull request, no repeated status', async () => {
    const token = `ghp_${randomBytes(12).toString('hex')}`;
    const gh = await startGitHubServer({ basePath: '/api/v3', tokens: { [token]: 'pko-bot' } });
    const ns = await createTestNamespace('n03');
    const obj = new Objects(ns);
    await obj.secret('gh', { token });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    await obj.alert('first', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
    await obj.alert('second', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
    const ctl = await startInProcess(ns, { flags: ['--github-write-pacing=false', '--cluster-name=n03'] });
    try {
      await obj.waitReady('alerts', 'first');
      await obj.waitReady('alerts', 'second');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      // A preview Stack: a preview run's comment goes on the pull request whose head is its commit.
      await sim.createStack(
        'app',
        { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } },
        { preview: true },
      );
      for (let pr = 1; pr <= 4; pr++) {
        const c = sha();
        gh.addPullRequest('acme/app', { number: pr, headSha: c });
        const run = await sim.startRun('app', { type: 'preview', commit: c });
        await sim.finishRun(run, 'succeeded');
        await waitFor(() => Promise.resolve(gh.statuses('acme/app', c).some((s) => s.state === 'success')), {
          timeoutMs: 20_000,
          what: `status of PR #${pr}`,
        });
        await sleep(1000); // the other Alert's send too
        const ours = gh.comments('acme/app', pr).filter((x) => x.login === 'pko-bot');
        expect(ours, `comments on PR #${pr}`).toHaveLength(1);
        const states = gh
          .statuses('acme/app', c)
          .reverse()
          .map((s) => `${s.context} ${s.state}`);
        expect(
          states.filter((s, i) => i > 0 && s === states[i - 1]),
          `statuses of PR #${pr}`,
        ).toEqual([]);
      }
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 120_000);
});
