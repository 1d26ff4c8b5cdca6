/**
 * F27 across a SIGKILL of the leader: two controller processes with leader election
 * (test/support/controller-process.ts), a Slack bot-token Provider in each threading mode. A run
 * starts (its message posted, its channel + ts kept as the run's note in the delivery ledger),
 * the leader is killed with SIGKILL, the run finishes; the new leader puts the result in the
 * run's thread (`thread`) or edits the run's message (`update`).
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { kubeConfig, createTestNamespace, waitFor } from '../support/cluster.ts';
import { PkoSimulator } from '../support/pko.ts';
import { Objects, bindControllerRole, GROUP, VERSION } from '../support/controller.ts';
import { startControllerProcess, stopAll, type ControllerProcess } from '../support/controller-process.ts';
import { LEDGER_PLURAL } from '../../src/delivery/ledger.ts';
import { startSlackServer } from './slack-server.ts';

const TOKEN = 'xoxb-f27-process-token';

afterAll(async () => {
  await stopAll();
});

async function controller(ns: string, name: string): Promise<ControllerProcess> {
  await bindControllerRole();
  const p = await startControllerProcess({
    kubeconfig: inject('controllerKubeconfig'),
    args: [
      `--watch-namespace=${ns}`,
      '--log-level=debug',
      '--leader-elect',
      `--leader-election-namespace=${ns}`,
      '--leader-election-lease-duration=8s',
      '--leader-election-renew-deadline=6s',
      '--leader-election-retry-period=1s',
    ],
    env: { POD_NAME: name },
  });
  await p.waitReady(30_000);
  return p;
}

describe('F27: a run stays in one thread / one message across a SIGKILL of the leader', () => {
  it('thread and update modes: the completion lands in the Started thread and edits the Started message', async () => {
    const slack = await startSlackServer({ token: TOKEN });
    try {
      const threads = slack.addChannel('deploys');
      const edits = slack.addChannel('oncall');
      const ns = await createTestNamespace('f27-sigkill');
      const obj = new Objects(ns);
      await obj.secret('slack-bot', { token: TOKEN });
      const bot = (channel: string, threading: string): object => ({
        type: 'slack',
        address: slack.postMessageURL,
        channel,
        threading,
        secretRef: { name: 'slack-bot' },
      });
      await obj.provider('threads', bot('deploys', 'thread'));
      await obj.provider('edits', bot('oncall', 'update'));
      await obj.alert('threads', { providerRef: { name: 'threads' }, eventSources: [{ kind: 'Stack' }] });
      await obj.alert('edits', { providerRef: { name: 'edits' }, eventSources: [{ kind: 'Stack' }] });
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });

      const [p1, p2] = await Promise.all([controller(ns, 'replica-1'), controller(ns, 'replica-2')]);
      const leader = await Promise.race(
        [p1, p2].map((p) => p.waitForLog((r) => r.msg === 'became leader', 30_000).then(() => p)),
      );
      const follower = leader === p1 ? p2 : p1;

      const run = await sim.startRun('app', { type: 'up', commit: 'a'.repeat(40) });
      const started = await waitFor(
        () => {
          const a = slack.channels.get(threads)?.messages[0];
          const b = slack.channels.get(edits)?.messages[0];
          return Promise.resolve(a !== undefined && b !== undefined ? [a, b] : undefined);
        },
        { timeoutMs: 30_000, what: 'the Started message in both channels' },
      );
      // Kill once both notes are in the ledger (the send→ledger window is F17's subject, not this one's).
      const notes = [`${threads} ${started[0]?.ts ?? ''}`, `${edits} ${started[1]?.ts ?? ''}`].map(
        (n) => `.n${Buffer.from(n, 'utf8').toString('base64url')}`,
      );
      await waitFor(
        async () => {
          const list = (await obj.custom.listNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: ns,
            plural: LEDGER_PLURAL,
          })) as { items: unknown[] };
          const text = JSON.stringify(list.items);
          return notes.every((n) => text.includes(n));
        },
        { timeoutMs: 10_000, intervalMs: 20, what: 'both run notes in the delivery ledger' },
      );
      leader.kill('SIGKILL');
      expect((await leader.exited).signal).toBe('SIGKILL');
      await sim.finishRun(run, 'failed');
      await follower.waitForLog((r) => r.msg === 'became leader', 30_000);

      await waitFor(
        () =>
          Promise.resolve(
            slack.threads(threads)[0]?.replies.length === 1 &&
              slack.channels.get(edits)?.messages[0]?.edited === true,
          ),
        { timeoutMs: 30_000, what: 'the result in the thread and the edit' },
      );
      await new Promise((r) => setTimeout(r, 2000));
      expect(
        slack
          .threads(threads)
          .map((t) => [t.parent.text.split('\n')[0], t.replies.map((r) => r.text.split('\n')[0])]),
      ).toEqual([
        // The summary may carry the Update's message ("…started: Initial stack update").
        [
          expect.stringMatching(/^⏳ Update of stack acme\/app\/dev started/),
          ['❌ Update of stack acme/app/dev failed'],
        ],
      ]);
      const edited = slack.channels.get(edits)?.messages ?? [];
      expect(edited).toHaveLength(1);
      expect(edited[0]?.text.split('\n')[0]).toBe('❌ Update of stack acme/app/dev failed');
      follower.kill('SIGTERM');
      expect((await follower.exited).code).toBe(0);
    } finally {
      await slack.close();
    }
  }, 150_000);
});
