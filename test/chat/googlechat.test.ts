/**
 * The `googlechat` notifier against the Google Chat contract server (./googlechat-server.ts):
 * a run's events in one thread (threadKey per run, REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD) in
 * any process — the key is derived, nothing is stored — cards within 32,000 bytes, errors classified.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/notifier/errors.ts';
import { googlechat, GOOGLECHAT_MAX_PAYLOAD_BYTES } from '../../src/notifier/googlechat.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import type { Notifier } from '../../src/notifier/types.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { resolved } from '../notifier/fixtures.ts';
import { failedWith, renderFor, runEvent } from './events.ts';
import { startGoogleChatServer, type GoogleChatServer } from './googlechat-server.ts';

let server: GoogleChatServer;
const notifiers: Notifier[] = [];
beforeEach(async () => {
  server = await startGoogleChatServer();
  server.quota(false);
});
afterEach(async () => {
  await Promise.all(notifiers.splice(0).map((n) => n.close()));
  await server.close();
});

function chat(over: Partial<ResolvedProvider> = {}): Notifier {
  const address = over.address ?? server.webhookURL;
  const p = resolved({
    type: 'googlechat',
    address,
    addressFromSecret: true,
    secretValues: [address],
    ...over,
  });
  const n = googlechat(p, { http: new ProviderHttp(p) });
  notifiers.push(n);
  return n;
}

const text = (i: number): string => {
  const b = server.messages[i]?.body as {
    cardsV2: { card: { sections: { widgets: { textParagraph?: { text: string } }[] }[] } }[];
  };
  return b.cardsV2[0]?.card.sections[0]?.widgets[0]?.textParagraph?.text ?? '';
};

describe('googlechat webhooks', () => {
  it('a run stays in one thread — also from a second notifier (another process) — and another run gets its own', async () => {
    await chat().send(runEvent('started', 'u1'), renderFor('googlechat', runEvent('started', 'u1')));
    await chat().send(runEvent('started', 'u2'), renderFor('googlechat', runEvent('started', 'u2')));
    // A new notifier, as after a restart: the thread key is derived from the run, not remembered.
    const after = chat();
    await after.send(
      failedWith('error: boom', 'u1'),
      renderFor('googlechat', failedWith('error: boom', 'u1')),
    );
    await after.send(runEvent('succeeded', 'u2'), renderFor('googlechat', runEvent('succeeded', 'u2')));
    expect(
      server.requests.every(
        (r) => r.query.get('messageReplyOption') === 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD',
      ),
    ).toBe(true);
    const threads = server.threads();
    expect(threads).toHaveLength(2);
    expect(threads.map((t) => t.length)).toEqual([2, 2]);
    expect(threads[0]?.[0]?.threadKey).toMatch(/^pko-[0-9a-f]{40}$/);
  });

  it('spec.threading none: every event starts its own thread', async () => {
    const n = chat({ threading: 'none' });
    await n.send(runEvent('started'), renderFor('googlechat', runEvent('started')));
    await n.send(runEvent('succeeded'), renderFor('googlechat', runEvent('succeeded')));
    expect(server.requests[0]?.query.get('messageReplyOption')).toBeNull();
    expect(server.threads()).toHaveLength(2);
  });

  it('a card v2 with a header, the text as card HTML (line breaks <br>), and a button to the permalink', async () => {
    const ev = failedWith('<b>not bold</b> & <users/all> https://evil.example\nerror: x');
    await chat().send(ev, renderFor('googlechat', ev));
    const body = server.messages[0]?.body as {
      cardsV2: { card: { header: { title: string }; sections: { widgets: object[] }[] } }[];
    };
    expect(body.cardsV2[0]?.card.header.title).toBe('UpdateFailed: team-a/update-abc');
    expect(body.cardsV2[0]?.card.sections[0]?.widgets[1]).toEqual({
      buttonList: {
        buttons: [
          {
            text: 'View the update',
            onClick: { openLink: { url: 'https://app.pulumi.com/acme/app/dev/updates/7' } },
          },
        ],
      },
    });
    const t = text(0);
    expect(t).toContain(
      '&lt;b&gt;not bold&lt;/b&gt; &amp; &lt;users/all&gt; https:\u200b//evil.example<br>error: x',
    );
    // The only tags are the template's own (<b> labels) and the line breaks.
    expect(t.replace(/<br>|<\/?b>/g, '')).not.toMatch(/</);
  });

  it('many short lines (each <br>) stay within 32,000 bytes; the end is kept', async () => {
    const ev = failedWith(`${Array.from({ length: 4_000 }, () => '&').join('\n')}\nerror: LAST`);
    await chat().send(ev, renderFor('googlechat', ev));
    expect(Buffer.byteLength(server.requests[0]?.body ?? '', 'utf8')).toBeLessThanOrEqual(
      GOOGLECHAT_MAX_PAYLOAD_BYTES,
    );
    expect(text(0)).toMatch(/error: LAST$/);
  });

  it('quota: a second write within a second is 429 RESOURCE_EXHAUSTED → rateLimited, retried', async () => {
    server.quota(true);
    const n = chat();
    await n.send(runEvent('started'), { message: 'a' });
    const e = await n.send(runEvent('succeeded'), { message: 'b' }).then(
      () => undefined,
      (err: unknown) => err as ProviderError,
    );
    expect(e?.verdict).toMatchObject({ kind: 'rateLimited', retry: true });
  });

  it('N13: a 200 HTML page (a portal in front of the endpoint) is not delivered: NotTheAPI, naming what to set', async () => {
    server.failNext({
      status: 200,
      headers: { 'content-type': 'text/html; charset=utf-8' },
      text: '<!doctype html><title>Sign in</title>',
    });
    const ev = runEvent('started');
    const e = await chat()
      .send(ev, renderFor('googlechat', ev))
      .then(
        () => undefined,
        (err: unknown) => err as ProviderError,
      );
    expect(e).toBeInstanceOf(ProviderError);
    expect(e?.verdict).toEqual({ kind: 'badResponse', retry: false, condition: 'NotTheAPI' });
    expect(e?.message).toMatch(/answered 200 with an HTML page, not the API: set the address/);
  });

  it('a wrong token is 401 auth (AuthenticationFailed); a wrong key 400 validation; neither shows in the message', async () => {
    const badToken = server.webhookURL.replace(/token=[^&]+/, 'token=wrongtoken123');
    const e1 = await chat({ address: badToken })
      .send(runEvent('started'), { message: 'a' })
      .then(
        () => undefined,
        (err: unknown) => err as ProviderError,
      );
    expect(e1?.verdict).toEqual({ kind: 'auth', retry: false, condition: 'AuthenticationFailed' });
    expect(e1?.message).not.toContain('wrongtoken123');
    const badKey = server.webhookURL.replace(/key=[^&]+/, 'key=wrongkey456');
    const e2 = await chat({ address: badKey })
      .send(runEvent('started'), { message: 'a' })
      .then(
        () => undefined,
        (err: unknown) => err as ProviderError,
      );
    expect(e2?.verdict.kind).toBe('validation');
    expect(e2?.message).not.toContain('wrongkey456');
  });
});
