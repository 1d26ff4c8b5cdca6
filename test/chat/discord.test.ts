/**
 * The `discord` notifier against the Discord contract server (./discord-server.ts): `?wait=true`,
 * one embed within Discord's limits, `allowed_mentions: {parse: []}` so nothing pings, hostile
 * text shown literally, error answers classified.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { discord, DISCORD_EMBED_LIMITS } from '../../src/notifier/discord.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import type { Notifier } from '../../src/notifier/types.ts';
import { resolved } from '../notifier/fixtures.ts';
import { failedWith, renderFor, runEvent } from './events.ts';
import { startDiscordServer, type DiscordServer } from './discord-server.ts';

let server: DiscordServer;
const notifiers: Notifier[] = [];
beforeEach(async () => {
  server = await startDiscordServer();
});
afterEach(async () => {
  await Promise.all(notifiers.splice(0).map((n) => n.close()));
  await server.close();
});

function hook(address = server.webhookURL, username?: string): Notifier {
  const p = resolved({
    type: 'discord',
    address,
    addressFromSecret: true,
    secretValues: [address],
    ...(username !== undefined ? { username } : {}),
  });
  const n = discord(p, { http: new ProviderHttp(p) });
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

describe('discord webhooks', () => {
  it('started, succeeded and failed: ?wait=true, one embed each (title, description, permalink, colour), username', async () => {
    const n = hook(server.webhookURL, 'pko');
    for (const ev of [runEvent('started'), runEvent('succeeded'), failedWith('error: boom')]) {
      await n.send(ev, renderFor('discord', ev));
    }
    expect(server.requests.map((r) => r.query.get('wait'))).toEqual(['true', 'true', 'true']);
    expect(server.messages).toHaveLength(3);
    const [started, succeeded, failed] = server.messages.map((m) => m.embeds[0] ?? {});
    expect(started).toMatchObject({
      title: 'UpdateStarted: team-a/update-abc',
      url: 'https://app.pulumi.com/acme/app/dev/updates/7',
      color: 0x3b82f6,
    });
    expect(succeeded?.color).toBe(0x2ea043);
    expect(failed?.color).toBe(0xd73a49);
    expect(failed?.description).toMatch(/```\nerror: boom\n```$/);
    expect(server.messages[0]?.username).toBe('pko');
  });

  it('hostile output pings nobody and shows literally (allowed_mentions parse [] and escaping)', async () => {
    const hostile = '@everyone @here <@123456789012345678> <@&222> [x](https://evil.example) **b** ||s|| # h';
    const ev = failedWith(`${hostile}\nerror: ${hostile}`);
    // The stack name carries it too, outside the code block.
    const named = { ...ev, metadata: { ...ev.metadata, stack: hostile } };
    await hook().send(named, renderFor('discord', named));
    const msg = server.messages[0];
    expect(server.requests[0]?.json).toMatchObject({ allowed_mentions: { parse: [] } });
    expect(msg?.pinged).toEqual([]);
    const description = String(msg?.embeds[0]?.description);
    // Outside the code block every mention and link is broken.
    const outside = description.replace(/```[\s\S]*```/, '');
    expect(outside).not.toMatch(/(^|[^\\])<@/);
    expect(outside).not.toMatch(/@everyone|@here/);
    expect(outside).not.toMatch(/(^|[^\\])\[x\]/);
  });

  it('the same content without allowed_mentions would ping (control: the server counts pings)', async () => {
    const res = await fetch(server.webhookURL, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ content: '@everyone <@123>' }),
    });
    expect(res.status).toBe(204);
    expect(server.messages[0]?.pinged).toEqual(['@everyone', 'user:123']);
  });

  it('a 2,000-character message fits one embed within every limit', async () => {
    const ev = failedWith(Array.from({ length: 400 }, (_, i) => `line ${String(i)} *x*`).join('\n'));
    const rendered = renderFor('discord', ev);
    expect(rendered.message.length).toBeLessThanOrEqual(2_000);
    await hook().send(ev, rendered);
    const e = server.messages[0]?.embeds[0] ?? {};
    expect(String(e.description).length).toBeLessThanOrEqual(DISCORD_EMBED_LIMITS.description);
    expect(String(e.title).length + String(e.description).length).toBeLessThanOrEqual(
      DISCORD_EMBED_LIMITS.total,
    );
  });

  it('Unknown Webhook (404, 10015) is notFound; Invalid Webhook Token (401, 50027) auth; the token never shows', async () => {
    const gone = server.webhookURL.replace(/webhooks\/\d+/, 'webhooks/999');
    const e1 = await failure(hook(gone).send(runEvent('started'), { message: 'x' }));
    expect(e1.verdict.kind).toBe('notFound');
    expect(e1.message).toContain('Unknown Webhook');
    const bad = server.webhookURL.replace(/[^/]+$/, 'wrong-token-value-123');
    const e2 = await failure(hook(bad).send(runEvent('started'), { message: 'x' }));
    expect(e2.verdict).toEqual({ kind: 'auth', retry: false, condition: 'AuthenticationFailed' });
    expect(e2.message).not.toContain('wrong-token-value-123');
  });

  it('rate limited (429, retry_after 1.5, Retry-After 2) is rateLimited after 2 s', async () => {
    server.rateLimit(1, 1.5);
    const e = await failure(hook().send(runEvent('started'), { message: 'x' }));
    expect(e.verdict).toMatchObject({ kind: 'rateLimited', retry: true, retryAfterMs: 2_000 });
  });

  it('N14: 429 with retry_after 2.5 only in the body (and X-RateLimit-Reset-After), no Retry-After: waits 2.5 s', async () => {
    server.rateLimit(1, 2.5, { retryAfterHeader: false });
    const e = await failure(hook().send(runEvent('started'), { message: 'x' }));
    expect(server.requests.at(-1)?.headers['retry-after']).toBeUndefined();
    expect(e.verdict).toMatchObject({ kind: 'rateLimited', retry: true, retryAfterMs: 2_500 });
    expect(e.message).toContain('will retry after 2500ms');
  });

  it('N13: an HTML page (a portal in front of the API) is NotTheAPI, naming the URL to set; a login redirect is not followed', async () => {
    server.failNext({
      status: 200,
      headers: { 'content-type': 'text/html' },
      text: '<!doctype html><p>portal</p>',
    });
    const e = await failure(hook().send(runEvent('started'), { message: 'x' }));
    expect(e.verdict).toEqual({ kind: 'badResponse', retry: false, condition: 'NotTheAPI' });
    expect(e.message).toMatch(
      /answered 200 with an HTML page, not the API: set the address .* to a Discord webhook URL/,
    );
    server.failNext({ status: 302, headers: { location: '/login' } });
    const before = server.requests.length;
    const r = await failure(hook().send(runEvent('started'), { message: 'x' }));
    expect([r.code, r.verdict.kind]).toEqual(['REDIRECT', 'auth']);
    expect(server.requests.length).toBe(before + 1);
  });

  it('an endpoint answering 200 without a message is badResponse, not taken as delivered', async () => {
    server.failNext({ status: 200, text: 'ok' });
    const e = await failure(hook().send(runEvent('started'), { message: 'x' }));
    expect(e.verdict.kind).toBe('badResponse');
  });
});
