import { afterEach, describe, expect, it } from 'vitest';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { slack } from '../../src/notifier/slack.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { resolved, sampleEvent } from './fixtures.ts';
import { startProxy } from '../support/proxy.ts';

let receivers: TestReceiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});
async function receiver(): Promise<TestReceiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

describe('slack', () => {
  it('incoming webhook: posts {text, channel, username} as JSON', async () => {
    const r = await receiver();
    const p = resolved({
      type: 'slack',
      address: `${r.url}/services/T0/B0/X`,
      addressFromSecret: true,
      channel: 'infra',
      username: 'pko',
    });
    const n = slack(p, { http: new ProviderHttp(p) });
    await n.send(sampleEvent, { message: 'Update of stack acme/app/dev failed' });
    await n.close();
    expect(r.requests).toHaveLength(1);
    expect(JSON.parse(r.requests[0]!.body)).toEqual({
      text: 'Update of stack acme/app/dev failed',
      channel: 'infra',
      username: 'pko',
    });
  });

  it('bot token: chat.postMessage with Bearer auth; ok:false is a final error naming the cause, without the token', async () => {
    const r = await receiver();
    const token = 'xoxb-slack-test-token-123456';
    const p = resolved({
      type: 'slack',
      address: `${r.url}/api/chat.postMessage`,
      token,
      channel: 'C123',
      secretValues: [token],
    });
    const n = slack(p, { http: new ProviderHttp(p) });
    r.respondWith([
      { status: 200, body: '{"ok":true,"ts":"1.2"}' },
      { status: 200, body: `{"ok":false,"error":"invalid_auth","echo":"${token}"}` },
    ]);
    await n.send(sampleEvent, { message: 'hello' });
    expect(r.requests[0]!.headers.authorization).toBe(`Bearer ${token}`);
    const err = await n.send(sampleEvent, { message: 'hello' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ProviderError);
    expect((err as ProviderError).retryable).toBe(false);
    expect((err as ProviderError).message).toContain('invalid_auth');
    expect((err as ProviderError).message).not.toContain(token);
    await n.close();
  });

  it('F09: with proxySecretRef every request goes through the proxy (with proxy auth)', async () => {
    const r = await receiver();
    const proxy = await startProxy({ auth: { username: 'p', password: 'proxy-pass-123' } });
    try {
      const p = resolved({
        type: 'slack',
        address: `${r.url}/services/T0/B0/X`,
        proxy: { address: proxy.url, username: 'p', password: 'proxy-pass-123' },
      });
      const n = slack(p, { http: new ProviderHttp(p) });
      await n.send(sampleEvent, { message: 'via proxy' });
      await n.close();
      expect(r.requests).toHaveLength(1);
      expect(proxy.seen).toEqual([`POST ${r.url}/services/T0/B0/X`]);
    } finally {
      await proxy.close();
    }
  });

  it('a bot token without spec.channel is refused at construction', () => {
    const p = resolved({ type: 'slack', address: 'https://slack.com/api/chat.postMessage', token: 'xoxb-1' });
    expect(() => slack(p, { http: new ProviderHttp(p) })).toThrow(/spec\.channel/);
  });
});
