/**
 * The `msteams` notifier against the Teams Workflows contract server (./msteams-server.ts):
 * Adaptive Card 1.4 within 28 KB for started/succeeded/failed, hostile text shown literally, the
 * retired Office 365 connector refused (F24), error answers classified.
 */
import MarkdownIt from 'markdown-it';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveProvider } from '../../src/credential/provider.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { msteams, MSTEAMS_MAX_PAYLOAD_BYTES, teamsCard, teamsPayload } from '../../src/notifier/msteams.ts';
import type { Notifier } from '../../src/notifier/types.ts';
import { resolved } from '../notifier/fixtures.ts';
import { failedWith, renderFor, runEvent } from './events.ts';
import { startTeamsServer, TEAMS_MAX_BYTES, type TeamsServer } from './msteams-server.ts';

let server: TeamsServer;
const notifiers: Notifier[] = [];
beforeEach(async () => {
  server = await startTeamsServer();
});
afterEach(async () => {
  await Promise.all(notifiers.splice(0).map((n) => n.close()));
  await server.close();
});

function teams(address = server.workflowURL): Notifier {
  const p = resolved({ type: 'msteams', address, addressFromSecret: true, secretValues: [address] });
  const n = msteams(p, { http: new ProviderHttp(p) });
  notifiers.push(n);
  return n;
}

interface Block {
  type: string;
  text: string;
  color?: string;
  fontType?: string;
  weight?: string;
}
const blocks = (i: number): Block[] => (server.runs[i]?.card?.body ?? []) as Block[];

describe('msteams: Adaptive Card 1.4 through a Workflows webhook', () => {
  it('started, succeeded and failed each post a card the flow accepts: title coloured by outcome, output monospace, permalink button', async () => {
    const n = teams();
    for (const ev of [
      runEvent('started'),
      runEvent('succeeded'),
      failedWith('error: boom\n  at main.go:12'),
    ]) {
      await n.send(ev, renderFor('msteams', ev));
    }
    expect(server.runs.map((r) => [r.status, r.error])).toEqual([
      ['Succeeded', undefined],
      ['Succeeded', undefined],
      ['Succeeded', undefined],
    ]);
    expect(server.runs[0]?.card).toMatchObject({ type: 'AdaptiveCard', version: '1.4' });
    expect(blocks(0)[0]).toMatchObject({ weight: 'Bolder' });
    expect(blocks(0)[0]?.color).toBeUndefined();
    expect(blocks(1)[0]?.color).toBe('Good');
    expect(blocks(2)[0]?.color).toBe('Attention');
    const code = blocks(2).find((b) => b.fontType === 'Monospace');
    expect(code?.text).toBe('error: boom\n\n  at main.go:12');
    expect(server.runs[2]?.card?.actions).toEqual([
      {
        type: 'Action.OpenUrl',
        title: 'View the update',
        url: 'https://app.pulumi.com/acme/app/dev/updates/7',
      },
    ]);
  });

  it('hostile output shows literally: no link, mention, emphasis or HTML in any TextBlock', async () => {
    const hostile = '<at>Everyone</at> **bold** [x](javascript:alert(1)) https://evil.example _i_ @channel';
    const ev = failedWith(`${hostile}\nerror: ${hostile}`);
    await teams().send(ev, renderFor('msteams', ev));
    expect(server.runs[0]?.status).toBe('Succeeded');
    const md = new MarkdownIt({ html: true, linkify: true });
    for (const b of blocks(0)) {
      const html = md.render(b.text);
      const tags = [...html.matchAll(/<\/?([a-z0-9]+)/gi)].map((m) => (m[1] ?? '').toLowerCase());
      // Values never format: the only markup is the template's own bold labels; no link at all.
      expect(
        tags.filter((t) => t !== 'p' && t !== 'br' && t !== 'strong'),
        html,
      ).toEqual([]);
      for (const m of html.matchAll(/<strong>([^<]*)<\/strong>/g))
        expect(['Stack:', 'Commit:']).toContain(m[1]);
    }
  });

  it('a failure whose escaped text would overflow 28 KB is cut in its middle to fit; the end stays', async () => {
    // The source bounds a message to 8,192 characters; lines of escaped characters grow most:
    // `*` → `\\*`, a line break → `\n\n`, and JSON doubles every backslash: 2 characters → 7 bytes.
    const ev = failedWith(`${Array.from({ length: 4_000 }, () => '*').join('\n')}\nerror: LAST`);
    const uncut = JSON.stringify({
      type: 'message',
      attachments: [{ content: teamsCard(ev, renderFor('msteams', ev).message) }],
    });
    expect(Buffer.byteLength(uncut, 'utf8')).toBeGreaterThan(MSTEAMS_MAX_PAYLOAD_BYTES);
    const rendered = renderFor('msteams', ev);
    const body = teamsPayload(ev, rendered.message);
    expect(Buffer.byteLength(body, 'utf8')).toBeLessThanOrEqual(MSTEAMS_MAX_PAYLOAD_BYTES);
    await teams().send(ev, rendered);
    expect(server.runs[0]).toMatchObject({ status: 'Succeeded' });
    expect(server.runs[0]?.bytes).toBeLessThanOrEqual(TEAMS_MAX_BYTES);
    expect(
      blocks(0)
        .map((b) => b.text)
        .join('\n'),
    ).toMatch(/error: LAST$/);
    expect(
      blocks(0)
        .map((b) => b.text)
        .join('\n'),
    ).toMatch(/characters cut/);
  });

  it('N13: a 200 HTML page (a portal in front of the endpoint) is not delivered: NotTheAPI, naming what to set', async () => {
    server.failNext({
      status: 200,
      headers: { 'content-type': 'text/html; charset=utf-8' },
      text: '<!doctype html><title>Sign in</title>',
    });
    const ev = runEvent('started');
    const e = await teams()
      .send(ev, renderFor('msteams', ev))
      .then(
        () => undefined,
        (err: unknown) => err as ProviderError,
      );
    expect(e).toBeInstanceOf(ProviderError);
    expect(e?.verdict).toEqual({ kind: 'badResponse', retry: false, condition: 'NotTheAPI' });
    expect(e?.message).toMatch(/answered 200 with an HTML page, not the API: set the address/);
  });

  it('a wrong signature is 401: auth, not retried, AuthenticationFailed; the sig never shows', async () => {
    const bad = server.workflowURL.replace(/sig=[^&]+/, 'sig=d3JvbmctY3JlZGVudGlhbA');
    const e = await teams(bad)
      .send(runEvent('started'), renderFor('msteams', runEvent('started')))
      .then(
        () => undefined,
        (err: unknown) => err as ProviderError,
      );
    expect(e).toBeInstanceOf(ProviderError);
    expect(e?.verdict).toEqual({ kind: 'auth', retry: false, condition: 'AuthenticationFailed' });
    expect(e?.message).not.toContain('d3JvbmctY3JlZGVudGlhbA');
  });

  it('over 4 requests per second: 429 rateLimited, retried after Retry-After (1 s)', async () => {
    const n = teams();
    const ev = runEvent('started');
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, () => n.send(ev, renderFor('msteams', ev))),
    );
    const rejected = results.filter((r) => r.status === 'rejected');
    expect(rejected).toHaveLength(1);
    expect((rejected[0] as PromiseRejectedResult).reason).toMatchObject({
      verdict: { kind: 'rateLimited', retry: true, retryAfterMs: 1_000 },
    });
  });
});

describe('F24: retired Office 365 connector webhooks', () => {
  it.each([
    'https://acme.webhook.office.com/webhookb2/0000@0000/IncomingWebhook/abc/0000',
    'https://outlook.office.com/webhook/0000@0000/IncomingWebhook/abc/0000',
  ])(
    '%s is Ready=False RetiredEndpoint, saying it is retired and to use a Workflows webhook',
    async (address) => {
      const r = await resolveProvider(
        {
          apiVersion: 'notification.pko.dev/v1alpha1',
          kind: 'Provider',
          metadata: { name: 'teams', namespace: 'team-a' },
          spec: { type: 'msteams', secretRef: { name: 'teams' } },
        },
        () => Promise.resolve({ address }),
      );
      expect(r.ok).toBe(false);
      if (r.ok) return;
      expect(r.reason).toBe('RetiredEndpoint');
      expect(r.message).toMatch(/Office 365 connector webhook, which Microsoft retired/);
      expect(r.message).toMatch(/Teams Workflows webhook/);
      // The URL came from the Secret: it is a credential and is not echoed.
      expect(r.message).not.toContain('IncomingWebhook');
    },
  );

  it('a Workflows URL resolves', async () => {
    const r = await resolveProvider(
      {
        apiVersion: 'notification.pko.dev/v1alpha1',
        kind: 'Provider',
        metadata: { name: 'teams', namespace: 'team-a' },
        spec: { type: 'msteams', secretRef: { name: 'teams' } },
      },
      () => Promise.resolve({ address: server.workflowURL }),
    );
    expect(r.ok).toBe(true);
  });
});
