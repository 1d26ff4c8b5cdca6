/**
 * N08 end to end: a slack Provider with `timeout: 1s`; Slack accepts the post but answers after
 * 2.5 s. The attempt is ambiguous; delivery asks the channel (the Slack notifier's lookup by
 * event id in message metadata) instead of posting blind: one message in the channel, and the
 * outcome recorded on the Alert.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { PkoSimulator } from '../support/pko.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { startSlackServer, type SlackServer } from './slack-server.ts';

const TOKEN = 'xoxb-n08-token';
let slack: SlackServer;
let ctl: InProcessController;
let obj: Objects;
let sim: PkoSimulator;
let channel: string;

beforeAll(async () => {
  slack = await startSlackServer({ token: TOKEN, historyScope: true });
  channel = slack.addChannel('oncall');
  const ns = await createTestNamespace('chat-n08');
  obj = new Objects(ns);
  await obj.secret('slack-bot', { token: TOKEN });
  await obj.provider('oncall', {
    type: 'slack',
    address: slack.postMessageURL,
    channel,
    timeout: '1s',
    secretRef: { name: 'slack-bot' },
  });
  await obj.alert('failures', {
    providerRef: { name: 'oncall' },
    eventSources: [{ kind: 'Stack' }],
    eventSeverity: 'error',
  });
  ctl = await startInProcess(ns);
  await obj.waitReady('alerts', 'failures');
  sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
}, 60_000);

afterAll(async () => {
  await ctl.stop();
  await slack.close();
});

describe('N08: ambiguous failure on a non-idempotent target', () => {
  it('timeout 1 s, Slack answers after 2.5 s: one message in the channel, the outcome recorded', async () => {
    await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
    slack.delayNext(2_500);
    const run = await sim.startRun('app', { type: 'up', commit: 'b'.repeat(40) });
    await sim.finishRun(run, 'failed');
    await waitFor(() => Promise.resolve((slack.channels.get(channel)?.messages.length ?? 0) >= 1), {
      timeoutMs: 20_000,
      what: 'the failure in #oncall',
    });
    const status = await waitFor(
      async () => {
        const a = await obj.get('alerts', 'failures');
        const d = a.status?.lastDelivery?.[0];
        return d?.result === 'Delivered' ? d : undefined;
      },
      { timeoutMs: 30_000, what: 'the Alert recording the delivery' },
    );
    // Time for a blind repeat, had there been one.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(slack.channels.get(channel)?.messages).toHaveLength(1);
    expect(status.reason).toBe('AlreadyDelivered');
    expect(slack.requests.some((r) => r.path === '/api/conversations.history')).toBe(true);
  }, 60_000);
});
