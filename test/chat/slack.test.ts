/**
 * The `slack` notifier against the Slack contract server (./slack-server.ts): one run = one
 * thread or one edited message with a bot token, kept across a restart by the run's note (F27);
 * `ok:false` answers classified; incoming webhooks one message per event.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { classifySlackError } from '../../src/notifier/classify.ts';
import { memoryRunNotes } from '../../src/notifier/run-notes.ts';
import { parseSlackNote, slackWith, SLACK_METADATA_EVENT_TYPE } from '../../src/notifier/slack.ts';
import type { Notifier, SendOutcome } from '../../src/notifier/types.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { resolved } from '../notifier/fixtures.ts';
import { runEvent } from './events.ts';
import { startSlackServer, type SlackServer } from './slack-server.ts';

const TOKEN = 'xoxb-1111-2222-contract-token';
let server: SlackServer;
let channel: string;
const notifiers: Notifier[] = [];

beforeEach(async () => {
  server = await startSlackServer({ token: TOKEN });
  channel = server.addChannel('deploys');
});
afterEach(async () => {
  await Promise.all(notifiers.splice(0).map((n) => n.close()));
  await server.close();
});

function bot(over: Partial<ResolvedProvider> = {}, notes = memoryRunNotes()): Notifier {
  const p = resolved({
    type: 'slack',
    address: server.postMessageURL,
    token: TOKEN,
    channel: 'deploys',
    secretValues: [TOKEN],
    ...over,
  });
  const n = slackWith(notes)(p, { http: new ProviderHttp(p) });
  notifiers.push(n);
  return n;
}

async function failure(p: Promise<unknown>): Promise<ProviderError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ProviderError);
  return e as ProviderError;
}

describe('slack bot token: one run, one place', () => {
  it('thread (default): Started posts the run message, Succeeded replies in its thread', async () => {
    const n = bot();
    const first = (await n.send(runEvent('started'), { message: 'started' })) as SendOutcome;
    const second = (await n.send(runEvent('succeeded'), { message: 'succeeded' })) as SendOutcome;
    const threads = server.threads(channel);
    expect(threads).toHaveLength(1);
    expect(threads[0]?.parent.text).toBe('started');
    expect(threads[0]?.replies.map((m) => m.text)).toEqual(['succeeded']);
    // The note names the channel id Slack answered and the parent's ts; the reply keeps it.
    expect(first.note).toBe(`${channel} ${threads[0]?.parent.ts ?? ''}`);
    expect(second.note).toBe(first.note);
    // Each message carries its event id as Slack message metadata.
    expect(threads[0]?.parent.metadata).toEqual({
      event_type: SLACK_METADATA_EVENT_TYPE,
      event_payload: { event_id: runEvent('started').id },
    });
  });

  it('two runs of one Stack are two threads; a second Stack is its own thread', async () => {
    const n = bot();
    await n.send(runEvent('started', 'u1'), { message: 'u1 started' });
    await n.send(runEvent('started', 'u2'), { message: 'u2 started' });
    await n.send(runEvent('started', 'u1', 'other-stack'), { message: 'other started' });
    await n.send(runEvent('failed', 'u1'), { message: 'u1 failed' });
    await n.send(runEvent('succeeded', 'u2'), { message: 'u2 succeeded' });
    await n.send(runEvent('succeeded', 'u1', 'other-stack'), { message: 'other succeeded' });
    expect(server.threads(channel).map((t) => [t.parent.text, t.replies.map((r) => r.text)])).toEqual([
      ['u1 started', ['u1 failed']],
      ['u2 started', ['u2 succeeded']],
      ['other started', ['other succeeded']],
    ]);
  });

  it('update: Started posts, Failed edits the same message (chat.update)', async () => {
    const n = bot({ threading: 'update' });
    const a = (await n.send(runEvent('started'), { message: 'started' })) as SendOutcome;
    const b = (await n.send(runEvent('failed'), { message: 'failed: boom' })) as SendOutcome;
    const msgs = server.channels.get(channel)?.messages ?? [];
    expect(msgs).toHaveLength(1);
    expect(msgs[0]).toMatchObject({ text: 'failed: boom', edited: true });
    expect(b.note).toBe(a.note);
    expect(server.requests.map((r) => r.path)).toEqual(['/api/chat.postMessage', '/api/chat.update']);
  });

  it('update: a run message deleted meanwhile (message_not_found) is posted anew and becomes the run message', async () => {
    const n = bot({ threading: 'update' });
    const a = (await n.send(runEvent('started'), { message: 'started' })) as SendOutcome;
    const posted = parseSlackNote(a.note);
    server.deleteMessage(channel, posted?.ts ?? '');
    const b = (await n.send(runEvent('succeeded'), { message: 'succeeded' })) as SendOutcome;
    const msgs = server.channels.get(channel)?.messages ?? [];
    expect(msgs.map((m) => m.text)).toEqual(['succeeded']);
    expect(b.note).toBe(`${channel} ${msgs[0]?.ts ?? ''}`);
  });

  it('none: one top-level message per event', async () => {
    const n = bot({ threading: 'none' });
    expect(await n.send(runEvent('started'), { message: 'started' })).toBeUndefined();
    await n.send(runEvent('succeeded'), { message: 'succeeded' });
    expect(server.threads(channel).map((t) => [t.parent.text, t.replies.length])).toEqual([
      ['started', 0],
      ['succeeded', 0],
    ]);
  });

  it('F27: after a restart the completion lands in the Started thread, given the run note delivery kept', async () => {
    const before = bot();
    const started = (await before.send(runEvent('started'), { message: 'started' })) as SendOutcome;
    await before.close();
    // A new process: its in-memory notes are empty; delivery hands back the note it stored.
    const after = bot({}, memoryRunNotes());
    const done = (await after.send(runEvent('succeeded'), { message: 'succeeded' }, undefined, {
      ...(started.note !== undefined ? { runNote: started.note } : {}),
    })) as SendOutcome;
    expect(done.note).toBe(started.note);
    const threads = server.threads(channel);
    expect(threads).toHaveLength(1);
    expect(threads[0]?.replies.map((m) => m.text)).toEqual(['succeeded']);
  });

  it('F27 update mode: after a restart the completion edits the Started message', async () => {
    const before = bot({ threading: 'update' });
    const started = (await before.send(runEvent('started'), { message: 'started' })) as SendOutcome;
    const after = bot({ threading: 'update' }, memoryRunNotes());
    await after.send(runEvent('failed'), { message: 'failed' }, undefined, {
      ...(started.note !== undefined ? { runNote: started.note } : {}),
    });
    expect(server.channels.get(channel)?.messages.map((m) => [m.text, m.edited])).toEqual([['failed', true]]);
  });

  it('without a note from delivery and with the in-memory notes lost, the completion starts a new message (what the fallback loses)', async () => {
    await bot().send(runEvent('started'), { message: 'started' });
    await bot({}, memoryRunNotes()).send(runEvent('succeeded'), { message: 'succeeded' });
    expect(server.threads(channel).map((t) => [t.parent.text, t.replies.length])).toEqual([
      ['started', 0],
      ['succeeded', 0],
    ]);
  });

  it('a malformed note is ignored (a new message), never sent to Slack', async () => {
    const n = bot();
    await n.send(runEvent('succeeded'), { message: 'x' }, undefined, { runNote: 'C1 ts\nX-Injected: 1' });
    expect(server.threads(channel)).toHaveLength(1);
    expect(server.requests[0]?.json).not.toHaveProperty('thread_ts');
  });
});

describe('slack ok:false answers, classified (classifySlackError)', () => {
  it('invalid_auth: auth, not retried, AuthenticationFailed; the token is not in the message', async () => {
    const e = await failure(
      bot({ token: 'xoxb-wrong-token-000', secretValues: ['xoxb-wrong-token-000'] }).send(
        runEvent('started'),
        { message: 'x' },
      ),
    );
    expect(e.verdict).toEqual({ kind: 'auth', retry: false, condition: 'AuthenticationFailed' });
    expect(e.code).toBe('SLACK_INVALID_AUTH');
    expect(e.message).toContain('check the token');
    expect(e.message).not.toContain('xoxb-wrong-token-000');
  });

  it('channel_not_found: notFound, final; names spec.channel', async () => {
    const e = await failure(bot({ channel: 'nope' }).send(runEvent('started'), { message: 'x' }));
    expect(e.verdict).toEqual({ kind: 'notFound', retry: false });
    expect(e.message).toMatch(/channel_not_found.*spec\.channel/);
  });

  it('not_in_channel: permission, AuthenticationFailed (invite the bot)', async () => {
    server.addChannel('private', { member: false });
    const e = await failure(bot({ channel: 'private' }).send(runEvent('started'), { message: 'x' }));
    expect(e.verdict).toEqual({ kind: 'permission', retry: false, condition: 'AuthenticationFailed' });
    expect(e.message).toContain('invite the bot');
  });

  it('is_archived: locked, final for the event, the Provider stays Ready', async () => {
    server.addChannel('old', { archived: true });
    const e = await failure(bot({ channel: 'old' }).send(runEvent('started'), { message: 'x' }));
    expect(e.verdict).toEqual({ kind: 'locked', retry: false });
  });

  it('HTTP 429 ratelimited with Retry-After: 7 → rateLimited, retried after 7 s', async () => {
    server.rateLimit(1, 7);
    const e = await failure(bot().send(runEvent('started'), { message: 'x' }));
    expect(e.verdict).toMatchObject({ kind: 'rateLimited', retry: true, retryAfterMs: 7_000 });
  });

  it('a 40,001-character text is refused before sending (the renderer fits 4,000); Slack would answer msg_too_long', async () => {
    const e = await failure(bot().send(runEvent('started'), { message: 'x'.repeat(40_001) }));
    expect(e.code).toBe('LIMIT_EXCEEDED');
    expect(server.requests).toHaveLength(0);
  });

  it.each([
    ['ratelimited', { kind: 'rateLimited', retry: true, retryAfterMs: 60_000 }],
    ['msg_too_long', { kind: 'validation', retry: false }],
    ['no_text', { kind: 'validation', retry: false }],
    ['invalid_blocks', { kind: 'validation', retry: false }],
    ['token_revoked', { kind: 'auth', retry: false, condition: 'AuthenticationFailed' }],
    ['not_authed', { kind: 'auth', retry: false, condition: 'AuthenticationFailed' }],
    ['missing_scope', { kind: 'permission', retry: false, condition: 'AuthenticationFailed' }],
    ['internal_error', { kind: 'server', retry: true, retryAfterMs: undefined }],
  ] as const)('%s → %j', (error, verdict) => {
    expect(classifySlackError(error, undefined)).toEqual(verdict);
  });
});

describe('slack incoming webhook: one message per event, no threads', () => {
  function hook(address: string): Notifier {
    const p = resolved({ type: 'slack', address, addressFromSecret: true, secretValues: [address] });
    const n = slackWith(memoryRunNotes())(p, { http: new ProviderHttp(p) });
    notifiers.push(n);
    return n;
  }

  it('Started and Succeeded are two messages; nothing is returned as a note', async () => {
    const url = server.addHook();
    const n = hook(url);
    expect(await n.send(runEvent('started'), { message: 'started' })).toBeUndefined();
    await n.send(runEvent('succeeded'), { message: 'succeeded' });
    expect([...server.hooks.values()][0]?.texts).toEqual(['started', 'succeeded']);
  });

  it('410 channel_is_archived is locked; 404 no_service notFound; the hook URL never shows', async () => {
    const archived = server.addHook({ archived: true });
    const e1 = await failure(hook(archived).send(runEvent('started'), { message: 'x' }));
    expect(e1.verdict.kind).toBe('locked');
    expect(e1.message).not.toContain('hooksecret');
    const gone = `${server.url}/services/T0000/B9999/revoked`;
    const e2 = await failure(hook(gone).send(runEvent('started'), { message: 'x' }));
    expect(e2.verdict.kind).toBe('notFound');
  });
});

describe('N08: an attempt whose answer was lost is found by its event id (findDelivered)', () => {
  async function withHistory(): Promise<void> {
    await server.close();
    server = await startSlackServer({ token: TOKEN, historyScope: true });
    channel = server.addChannel('deploys');
  }

  it('timeout 1 s, Slack posts but answers after 2.5 s: the send is ambiguous, the lookup finds the message, one message in the channel', async () => {
    await withHistory();
    const n = bot({ channel, timeoutMs: 1_000 });
    server.delayNext(2_500);
    const e = await failure(n.send(runEvent('failed'), { message: 'failed' }));
    expect(e.verdict.kind).toBe('ambiguous');
    expect(await n.findDelivered?.(runEvent('failed'))).toBe(true);
    expect(server.channels.get(channel)?.messages).toHaveLength(1);
    // A different event of the same run is not taken for it.
    expect(await n.findDelivered?.(runEvent('succeeded', 'other-run'))).toBe(false);
  });

  it('a reply in the run thread is looked up in the thread (conversations.replies) with the run note', async () => {
    await withHistory();
    const n = bot({ channel });
    const started = (await n.send(runEvent('started'), { message: 'started' })) as SendOutcome;
    expect(await n.findDelivered?.(runEvent('succeeded'), undefined, { runNote: started.note ?? '' })).toBe(
      false,
    );
    await n.send(runEvent('succeeded'), { message: 'succeeded' });
    const fresh = bot({ channel }, memoryRunNotes());
    expect(
      await fresh.findDelivered?.(runEvent('succeeded'), undefined, { runNote: started.note ?? '' }),
    ).toBe(true);
    expect(server.requests.at(-1)?.path).toBe('/api/conversations.replies');
  });

  it('without the history scope, or with a channel name, the channel cannot be read: false (the event is sent)', async () => {
    // The default server grants no history scope.
    const n = bot({ channel });
    await n.send(runEvent('started'), { message: 'started' });
    expect(await bot({ channel }, memoryRunNotes()).findDelivered?.(runEvent('started'))).toBe(false);
    expect(await bot({ channel: 'deploys' }, memoryRunNotes()).findDelivered?.(runEvent('started'))).toBe(
      false,
    );
  });
});

describe('slack webhook mode cannot be asked', () => {
  it('has no findDelivered (delivery does not repeat an unanswered post to it)', () => {
    const p = resolved({ type: 'slack', address: `${server.url}/services/T/B/x`, addressFromSecret: true });
    const n = slackWith(memoryRunNotes())(p, { http: new ProviderHttp(p) });
    notifiers.push(n);
    expect('findDelivered' in n).toBe(false);
    expect('findDelivered' in bot()).toBe(true);
  });
});
