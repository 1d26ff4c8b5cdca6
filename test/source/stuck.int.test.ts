/**
 * Case N20 extended by issue 22, on the real control plane: a PKO v2 Stack wedged on a missing
 * Update (PKO #1292's "update object not found; will retry") that this controller never saw —
 * the Update was garbage-collected before the controller started — is reported once as stuck
 * (`StackStalled`, reason `NoProgress`) after `--stack-stuck-after`, to a webhook through an
 * Alert created while it waited (the event's time is when the threshold was reached), and not
 * again while it stays wedged. Shapes written by the PKO simulator (PKO v2.9).
 */
import { describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver } from '../support/receiver.ts';

const SHA = '7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b';

describe('N20: a Stack wedged on a missing Update it never saw', () => {
  it('one StackStalled (NoProgress) after the threshold, not repeated', async () => {
    const ns = await createTestNamespace('stuck');
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', {
      git: { projectRepo: 'https://git.example/acme/app.git', branch: 'main' },
    });
    const first = await sim.startRun('app', { type: 'up', commit: SHA });
    await sim.finishRun(first, 'succeeded', { permalink: null });
    // The wedge: PKO's current run's Update is gone before this controller ever saw it.
    const wedged = await sim.startRun('app', {
      type: 'up',
      commit: SHA,
      message: 'Resync time elapsed: 1m0s',
    });
    await sim.deleteUpdate(wedged);
    const rcv = await startReceiver();
    const ctl = await startInProcess(ns, { flags: ['--stack-stuck-after=15s'] });
    try {
      const obj = new Objects(ns);
      await obj.provider('hook', { type: 'generic', address: `${rcv.url}/hook` });
      await obj.alert('hook', {
        providerRef: { name: 'hook' },
        eventSources: [{ kind: 'Stack' }],
        eventReasons: ['StackStalled'],
      });
      await obj.waitReady('alerts', 'hook');
      const bodies = (): { reason: string; message: string; id: string }[] =>
        rcv.requests.map((r) => JSON.parse(r.body) as { reason: string; message: string; id: string });
      const stuck = await waitFor(
        () => Promise.resolve(bodies().find((b) => b.message.includes('NoProgress'))),
        {
          timeoutMs: 60_000,
          what: 'StackStalled NoProgress at the webhook',
        },
      );
      expect(stuck.reason).toBe('StackStalled');
      expect(stuck.message).toContain(
        `status.currentUpdate names Update ${wedged.name}, which does not exist`,
      );
      expect(stuck.id).toMatch(new RegExp(`/${wedged.name}/stalled:NoProgress@\\d+$`));
      // Still wedged a while later: the same event, not sent again.
      await new Promise((r) => setTimeout(r, 4_000));
      expect(bodies().filter((b) => b.message.includes('NoProgress'))).toHaveLength(1);
    } finally {
      await ctl.stop();
      await rcv.close();
    }
  }, 90_000);
});
