/**
 * Chat end to end on the real control plane: PKO objects (test/support/pko.ts) → informers →
 * Alerts → the slack, msteams, discord and googlechat notifiers → their contract servers
 * (test/chat/*-server.ts). Preview and update runs, started then succeeded/failed, and the
 * routing recipes of the README ("Routing chat notifications"): failures to an on-call channel,
 * everything to a deploys channel, per-team routing by matchLabels, previews to one channel and
 * production updates to another (eventReasons), per-environment eventMetadata in the text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { PkoSimulator, type RunHandle } from '../support/pko.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { startSlackServer, type SlackServer } from './slack-server.ts';
import { startTeamsServer, type TeamsServer } from './msteams-server.ts';
import { startDiscordServer, type DiscordServer } from './discord-server.ts';
import { startGoogleChatServer, type GoogleChatServer } from './googlechat-server.ts';

const TOKEN = 'xoxb-e2e-0000-bot-token';
const GIT = { git: { projectRepo: 'https://github.com/acme/app.git', branch: 'main' } };

let ns: string;
let obj: Objects;
let sim: PkoSimulator;
let ctl: InProcessController;
let slack: SlackServer;
let teams: TeamsServer;
let discord: DiscordServer;
let gchat: GoogleChatServer;
const ch: Record<string, string> = {};

const slackTexts = (channel: string): [string, string[]][] =>
  slack.threads(ch[channel] ?? '').map((t) => [t.parent.text, t.replies.map((r) => r.text)]);

beforeAll(async () => {
  [slack, teams, discord, gchat] = await Promise.all([
    startSlackServer({ token: TOKEN }),
    startTeamsServer(),
    startDiscordServer(),
    startGoogleChatServer(),
  ]);
  gchat.quota(false);
  for (const c of ['deploys', 'oncall', 'team-payments', 'previews', 'prod-updates'])
    ch[c] = slack.addChannel(c);

  ns = await createTestNamespace('chat-e2e');
  obj = new Objects(ns);
  await obj.secret('slack-bot', { token: TOKEN });
  await obj.secret('teams', { address: teams.workflowURL });
  await obj.secret('discord', { address: discord.webhookURL });
  await obj.secret('gchat', { address: gchat.webhookURL });
  const bot = (channel: string, threading?: string): object => ({
    type: 'slack',
    address: slack.postMessageURL,
    channel,
    secretRef: { name: 'slack-bot' },
    ...(threading !== undefined ? { threading } : {}),
  });
  await obj.provider('deploys', bot('deploys'));
  await obj.provider('oncall', bot('oncall'));
  await obj.provider('team-payments', bot('team-payments'));
  await obj.provider('previews', bot('previews'));
  await obj.provider('prod-updates', bot('prod-updates', 'update'));
  await obj.provider('teams', { type: 'msteams', secretRef: { name: 'teams' } });
  await obj.provider('discord', { type: 'discord', secretRef: { name: 'discord' } });
  await obj.provider('gchat', { type: 'googlechat', secretRef: { name: 'gchat' } });

  await obj.core.createNamespacedConfigMap({
    namespace: ns,
    body: {
      metadata: { name: 'env-message' },
      data: { message: '{{emoji}} [{{lookup metadata "environment"}}] {{summary}}' },
    },
  });

  const all = [{ kind: 'Stack' }];
  await obj.alert('everything', { providerRef: { name: 'deploys' }, eventSources: all });
  await obj.alert('failures', { providerRef: { name: 'oncall' }, eventSources: all, eventSeverity: 'error' });
  await obj.alert('team-payments', {
    providerRef: { name: 'team-payments' },
    eventSources: [{ kind: 'Stack', matchLabels: { team: 'payments' } }],
  });
  await obj.alert('previews', {
    providerRef: { name: 'previews' },
    eventSources: all,
    eventReasons: ['PreviewStarted', 'PreviewSucceeded', 'PreviewFailed'],
  });
  await obj.alert('prod-updates', {
    providerRef: { name: 'prod-updates' },
    eventSources: [{ kind: 'Stack', matchLabels: { env: 'production' } }],
    eventReasons: ['UpdateStarted', 'UpdateSucceeded', 'UpdateFailed'],
    eventMetadata: { environment: 'production' },
    templateRef: { name: 'env-message' },
  });
  await obj.alert('teams', { providerRef: { name: 'teams' }, eventSources: all });
  await obj.alert('discord', { providerRef: { name: 'discord' }, eventSources: all });
  await obj.alert('gchat', { providerRef: { name: 'gchat' }, eventSources: all });

  ctl = await startInProcess(ns);
  for (const a of [
    'everything',
    'failures',
    'team-payments',
    'previews',
    'prod-updates',
    'teams',
    'discord',
    'gchat',
  ])
    await obj.waitReady('alerts', a);
  sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
}, 60_000);

afterAll(async () => {
  await ctl.stop();
  await Promise.all([slack.close(), teams.close(), discord.close(), gchat.close()]);
});

/** Waits until the deploys channel (every event) holds `n` messages. */
async function deploys(n: number): Promise<void> {
  await waitFor(() => Promise.resolve((slack.channels.get(ch.deploys ?? '')?.messages.length ?? 0) >= n), {
    timeoutMs: 20_000,
    intervalMs: 50,
    what: `${String(n)} messages in #deploys`,
  });
}

describe('preview and update runs to every chat type, routed', () => {
  const runs: Record<string, RunHandle> = {};

  beforeAll(async () => {
    await sim.createStack('payments-prod', GIT, {
      stack: 'acme/payments/prod',
      labels: { team: 'payments', env: 'production' },
    });
    await sim.createStack('web-pr', GIT, {
      stack: 'acme/web/pr-7',
      preview: true,
      labels: { team: 'web', env: 'preview' },
    });
    await sim.createStack('web-prod', GIT, {
      stack: 'acme/web/prod',
      labels: { team: 'web', env: 'production' },
    });

    // Each run's Started is delivered before the run ends (a result already known may skip it).
    runs.pay = await sim.startRun('payments-prod', { type: 'up', commit: '1'.repeat(40) });
    await deploys(1);
    await sim.finishRun(runs.pay, 'failed', {
      message: 'update failed: exit status 255\nstderr: error: <!channel> @everyone quota exceeded',
    });
    await deploys(2);
    runs.pr = await sim.startRun('web-pr', { type: 'preview', commit: '2'.repeat(40) });
    await deploys(3);
    await sim.finishRun(runs.pr, 'succeeded');
    await deploys(4);
    runs.web = await sim.startRun('web-prod', { type: 'up', commit: '3'.repeat(40) });
    await deploys(5);
    await sim.finishRun(runs.web, 'succeeded');
    await deploys(6);
    // Let every other Alert finish too.
    await waitFor(
      () =>
        Promise.resolve(
          teams.runs.filter((r) => r.status === 'Succeeded').length >= 6 &&
            discord.messages.length >= 6 &&
            gchat.messages.length >= 6 &&
            (slack.channels.get(ch['prod-updates'] ?? '')?.messages.filter((m) => m.edited).length ?? 0) >= 2,
        ),
      { timeoutMs: 30_000, intervalMs: 100, what: 'every chat delivery' },
    );
  }, 90_000);

  it('slack #deploys (everything, threads): one thread per run, started as parent, result as reply', () => {
    const threads = slackTexts('deploys');
    expect(threads).toHaveLength(3);
    expect(
      threads.map(([parent, replies]) => [parent.split('\n')[0], replies.map((r) => r.split('\n')[0])]),
    ).toEqual([
      ['⏳ Update of stack acme/payments/prod started', ['❌ Update of stack acme/payments/prod failed']],
      ['⏳ Preview of stack acme/web/pr-7 started', ['✅ Preview of stack acme/web/pr-7 succeeded']],
      [
        '⏳ Update of stack acme/web/prod started',
        ['✅ Update of stack acme/web/prod succeeded: Initial stack update'],
      ],
    ]);
    // The failure text is escaped Slack mrkdwn: it shows, it does not ping.
    const failed = threads[0]?.[1][0] ?? '';
    expect(failed).toContain('&lt;!channel&gt;');
    expect(failed).not.toContain('<!channel>');
  });

  it('slack #oncall (eventSeverity error): only the failure', () => {
    expect(slackTexts('oncall').map(([p, r]) => [p.split('\n')[0], r.length])).toEqual([
      ['❌ Update of stack acme/payments/prod failed', 0],
    ]);
  });

  it('slack #team-payments (matchLabels team=payments): only the payments Stack, in its thread', () => {
    expect(
      slackTexts('team-payments').map(([p, r]) => [p.split('\n')[0], r.map((x) => x.split('\n')[0])]),
    ).toEqual([
      ['⏳ Update of stack acme/payments/prod started', ['❌ Update of stack acme/payments/prod failed']],
    ]);
  });

  it('slack #previews (eventReasons Preview*): only the preview run', () => {
    expect(
      slackTexts('previews').map(([p, r]) => [p.split('\n')[0], r.map((x) => x.split('\n')[0])]),
    ).toEqual([
      ['⏳ Preview of stack acme/web/pr-7 started', ['✅ Preview of stack acme/web/pr-7 succeeded']],
    ]);
  });

  it('slack #prod-updates (update in place, env=production, eventMetadata in the template): one edited message per run', () => {
    const msgs = slack.channels.get(ch['prod-updates'] ?? '')?.messages ?? [];
    expect(msgs.map((m) => [m.text, m.edited === true, m.thread_ts])).toEqual([
      ['❌ [production] Update of stack acme/payments/prod failed', true, undefined],
      ['✅ [production] Update of stack acme/web/prod succeeded: Initial stack update', true, undefined],
    ]);
  });

  it('msteams: six Adaptive Cards the flow posted, within 28 KB', () => {
    const ok = teams.runs.filter((r) => r.status === 'Succeeded');
    expect(teams.runs.filter((r) => r.status === 'Failed')).toEqual([]);
    const titles = ok.map((r) => ((r.card?.body as { text: string }[])[0]?.text ?? '').replace(/\\/g, ''));
    expect(titles.sort()).toEqual(
      [
        '⏳ Update of stack acme/payments/prod started',
        '❌ Update of stack acme/payments/prod failed',
        '⏳ Preview of stack acme/web/pr-7 started',
        '✅ Preview of stack acme/web/pr-7 succeeded',
        '⏳ Update of stack acme/web/prod started',
        '✅ Update of stack acme/web/prod succeeded: Initial stack update',
      ].sort(),
    );
  });

  it('discord: six messages with one embed each, nobody pinged by the failure text', () => {
    expect(discord.messages.map((m) => m.embeds[0]?.title).sort()).toEqual(
      [
        'PreviewStarted: ' + ns + '/web-pr',
        'PreviewSucceeded: ' + ns + '/web-pr',
        'UpdateFailed: ' + ns + '/payments-prod',
        'UpdateStarted: ' + ns + '/payments-prod',
        'UpdateStarted: ' + ns + '/web-prod',
        'UpdateSucceeded: ' + ns + '/web-prod',
      ].sort(),
    );
    expect(discord.messages.flatMap((m) => m.pinged)).toEqual([]);
    expect(discord.requests.every((r) => r.query.get('wait') === 'true')).toBe(true);
  });

  it('googlechat: one thread per run (threadKey), two messages in each', () => {
    const threads = gchat.threads();
    expect(threads.map((t) => t.length)).toEqual([2, 2, 2]);
    expect(new Set(threads.map((t) => t[0]?.threadKey)).size).toBe(3);
  });
});

describe('F26: a Program source (no commit, no repository) reaches every chat type with the fields that exist', () => {
  beforeAll(async () => {
    await sim.createStack('prog', { program: { name: 'my-program' } }, { stack: 'acme/prog/dev' });
    const run = await sim.startRun('prog', { type: 'up', commit: '3' });
    await deploys(7);
    await sim.finishRun(run, 'failed');
    await deploys(8);
    await waitFor(
      () =>
        Promise.resolve(
          teams.runs.filter((r) => r.status === 'Succeeded').length >= 8 &&
            discord.messages.length >= 8 &&
            gchat.messages.length >= 8,
        ),
      { timeoutMs: 30_000, intervalMs: 100, what: 'the Program-source run on every chat type' },
    );
  }, 60_000);

  it('slack: the failure in the run thread, no Commit line', () => {
    const t = slackTexts('deploys').find(([p]) => p.includes('acme/prog/dev'));
    expect(t?.[1]).toHaveLength(1);
    expect(t?.[1][0]).toMatch(/^❌ Update of stack acme\/prog\/dev failed/);
    expect(t?.[1][0]).not.toContain('Commit:');
  });

  it('msteams, discord, googlechat: delivered, no Commit line', () => {
    const card = teams.runs.at(-1)?.card?.body as { text: string }[];
    expect(card[0]?.text).toMatch(/acme\/prog\/dev failed/);
    expect(JSON.stringify(card)).not.toContain('Commit:');
    const embed = discord.messages.at(-1)?.embeds[0];
    expect(embed?.title).toBe(`UpdateFailed: ${ns}/prog`);
    expect(String(embed?.description)).not.toContain('Commit:');
    const last = gchat.threads().find((t) => JSON.stringify(t[0]?.body).includes('acme/prog/dev'));
    expect(last).toHaveLength(2);
    expect(JSON.stringify(last?.[1]?.body)).not.toContain('Commit:');
  });
});

describe('N14: a Discord 429 with retry_after only in the body is honoured by the delivery layer', () => {
  it('the next attempt comes ≥ 2.5 s after the 429', async () => {
    await sim.createStack('limited', GIT, { stack: 'acme/limited/dev' });
    const before = discord.requests.length;
    const delivered = discord.messages.length;
    discord.rateLimit(1, 2.5, { retryAfterHeader: false });
    await sim.startRun('limited', { type: 'up', commit: '4'.repeat(40) });
    await waitFor(() => Promise.resolve(discord.messages.length > delivered), {
      timeoutMs: 30_000,
      intervalMs: 50,
      what: 'the Discord message after the rate limit',
    });
    const mine = discord.requests.slice(before);
    const limited = mine.findIndex((r) => r.status === 429);
    expect(limited).toBeGreaterThanOrEqual(0);
    const [first, next] = [mine[limited], mine[limited + 1]];
    expect(first?.headers['retry-after']).toBeUndefined();
    expect((next?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(2_500);
  }, 60_000);
});
