/**
 * Restart safety and leader election with the controller as real OS processes (SIGKILL, not a
 * polite stop): case F17 and the two-replica handover (issue 9: a new leader must not re-send
 * what the old one recorded; at most the one send in flight at the kill goes again).
 */
import { createServer } from 'node:net';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { kubeConfig, createTestNamespace, waitFor } from '../support/cluster.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { Objects, bindControllerRole } from '../support/controller.ts';
import { startControllerProcess, stopAll, type ControllerProcess } from '../support/controller-process.ts';
import { resultRecorded, storedLedger } from '../support/ledger.ts';

const SHA = 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678';
/** The `n`-th of a series of commits: each run of the leader test is a new commit, hence a new run. */
const commitN = (n: number): string => `${n.toString(16).padStart(2, '0')}${SHA.slice(2)}`;

afterAll(async () => {
  await stopAll();
});

interface Received {
  id: string;
  reason: string;
  metadata: Record<string, string | undefined>;
}
const events = (r: TestReceiver): Received[] => r.requests.map((q) => JSON.parse(q.body) as Received);

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

async function controller(
  ns: string,
  extra: string[] = [],
  env: Record<string, string> = {},
): Promise<ControllerProcess> {
  await bindControllerRole();
  const p = await startControllerProcess({
    kubeconfig: inject('controllerKubeconfig'),
    args: [`--watch-namespace=${ns}`, '--log-level=debug', ...extra],
    env,
  });
  await p.waitReady(30_000);
  return p;
}

async function setup(
  prefix: string,
  address: string,
): Promise<{ ns: string; obj: Objects; sim: PkoSimulator; stackUid: string }> {
  const ns = await createTestNamespace(prefix);
  const obj = new Objects(ns);
  await obj.provider('hook', { type: 'generic', address });
  await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] });
  const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
  const stack = await sim.createStack('app', {
    git: { projectRepo: 'https://github.com/acme/app', branch: 'main' },
  });
  return { ns, obj, sim, stackUid: stack.metadata.uid ?? '' };
}

describe('F17: SIGKILL', () => {
  it('killed after the Update completed but before delivery: delivered exactly once after restart', async () => {
    const port = await freePort(); // nothing listens yet: deliveries fail and are retried
    const { ns, sim } = await setup('f17-before', `http://127.0.0.1:${port}/hook`);
    const a = await controller(ns);
    const run = await sim.startRun('app', { type: 'up', commit: SHA });
    await sim.finishRun(run, 'succeeded');
    await a.waitForLog(
      (r) => typeof r.msg === 'string' && r.msg.startsWith('delivery failed, retrying'),
      30_000,
    );
    a.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');

    const receiver = await startReceiver({ port });
    try {
      const b = await controller(ns);
      await waitFor(() => Promise.resolve(events(receiver).some((e) => e.reason === 'UpdateSucceeded')), {
        timeoutMs: 30_000,
        what: 'UpdateSucceeded after restart',
      });
      await new Promise((r) => setTimeout(r, 3000));
      const got = events(receiver);
      expect(got.filter((e) => e.reason === 'UpdateSucceeded')).toHaveLength(1);
      expect(new Set(got.map((e) => e.id)).size).toBe(got.length);
      b.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
    } finally {
      await receiver.close();
    }
  }, 90_000);

  it('killed right after a delivery (recorded in the ledger): not delivered again', async () => {
    const receiver = await startReceiver();
    try {
      const { ns, sim, stackUid } = await setup('f17-after', `${receiver.url}/hook`);
      const a = await controller(ns);
      const run = await sim.startRun('app', { type: 'up', commit: SHA });
      await sim.finishRun(run, 'succeeded');
      await waitFor(() => Promise.resolve(events(receiver).some((e) => e.reason === 'UpdateSucceeded')), {
        timeoutMs: 30_000,
        what: 'UpdateSucceeded',
      });
      // The ledger write follows the send within milliseconds: kill as soon as it is there.
      await waitFor(async () => resultRecorded(await storedLedger(ns), stackUid, run.name), {
        timeoutMs: 10_000,
        intervalMs: 20,
        what: 'ledger entry for the delivered result',
      });
      a.kill('SIGKILL');
      await a.exited;
      const before = receiver.requests.length;

      const b = await controller(ns, ['--relist-interval=1s']);
      await new Promise((r) => setTimeout(r, 4000)); // restart + several relists
      expect(receiver.requests.length).toBe(before);
      b.kill('SIGTERM');
      await b.exited;
    } finally {
      await receiver.close();
    }
  }, 90_000);
});

describe('leader election with two processes', () => {
  it('exactly one delivers; SIGKILL of the leader hands over within 15 s; nothing lost; nothing recorded before the kill sent again, at most the one in flight', async () => {
    const receiver = await startReceiver();
    try {
      const { ns, sim, stackUid } = await setup('le-two', `${receiver.url}/hook`);
      const timing = [
        '--leader-elect',
        `--leader-election-namespace=${ns}`,
        '--leader-election-lease-duration=8s',
        '--leader-election-renew-deadline=6s',
        '--leader-election-retry-period=1s',
      ];
      const [p1, p2] = await Promise.all([
        controller(ns, timing, { POD_NAME: 'replica-1' }),
        controller(ns, timing, { POD_NAME: 'replica-2' }),
      ]);
      const leader: ControllerProcess = await Promise.race(
        [p1, p2].map((p) => p.waitForLog((r) => r.msg === 'became leader', 30_000).then(() => p)),
      );
      const follower = leader === p1 ? p2 : p1;

      const names: string[] = [];
      for (let i = 0; i < 3; i++) {
        const run = await sim.startRun('app', { type: 'up', commit: commitN(i) });
        await sim.finishRun(run, 'succeeded');
        names.push(run.name);
      }
      await waitFor(
        () => Promise.resolve(events(receiver).filter((e) => e.reason === 'UpdateSucceeded').length >= 3),
        { timeoutMs: 20_000, what: '3 results from the leader' },
      );
      // Kill at once — the third result's ledger write may or may not have landed: that send is
      // the one in flight. Everything recorded by now must never be sent again.
      const killedAt = Date.now();
      leader.kill('SIGKILL');
      await leader.exited;
      const recordedAtKill = await storedLedger(ns);
      const sentAtKill = events(receiver).map((e) => e.id);

      // Runs that finish while nobody leads must be delivered by the next leader.
      for (let i = 3; i < 5; i++) {
        const run = await sim.startRun('app', { type: 'up', commit: commitN(i) });
        await sim.finishRun(run, 'succeeded');
        names.push(run.name);
      }
      await follower.waitForLog((r) => r.msg === 'became leader', 30_000);
      const handoverMs = Date.now() - killedAt;
      console.log(`leader handover after SIGKILL: ${handoverMs} ms (lease 8 s, retry 1 s)`);
      expect(handoverMs).toBeLessThan(15_000);

      await waitFor(
        () => Promise.resolve(events(receiver).filter((e) => e.reason === 'UpdateSucceeded').length >= 5),
        { timeoutMs: 20_000, what: '5 results' },
      );
      await new Promise((r) => setTimeout(r, 2000));
      const results = events(receiver).filter((e) => e.reason === 'UpdateSucceeded');
      expect(new Set(results.map((e) => e.metadata.updateName))).toEqual(new Set(names));
      const ids = events(receiver).map((e) => e.id);
      const again = ids.filter((id, i) => ids.indexOf(id) !== i);
      // Nothing recorded before the kill was sent again; at most one event (the send in flight).
      for (const id of again) {
        const run = id.split('/')[1] ?? '';
        const isResult = id.endsWith('/succeeded');
        expect(
          isResult && resultRecorded(recordedAtKill, stackUid, run),
          `${id} was recorded before the kill`,
        ).toBe(false);
        expect(sentAtKill).toContain(id);
      }
      expect(again.length).toBeLessThanOrEqual(1);
      follower.kill('SIGTERM');
      expect((await follower.exited).code).toBe(0);
    } finally {
      await receiver.close();
    }
  }, 120_000);
});
