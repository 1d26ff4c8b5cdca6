/**
 * `googlechat` provider: a Google Chat incoming webhook (`address` =
 * `https://chat.googleapis.com/v1/spaces/<space>/messages?key=…&token=…`, usually kept in the
 * Secret's `address` key: `key` and `token` are the credential).
 *
 * Payload (docs/providers/googlechat.md; developers.google.com/workspace/chat/api/reference/rest/
 * v1/spaces.messages), built here; the template makes the text:
 * - one card v2 with a header (the event reason and the object) and a `textParagraph` holding the
 *   rendered message — Google Chat card text is an HTML subset (src/template/markup.ts
 *   `googlechat`), line breaks written as `<br>` — and a button to the permalink when there is one;
 * - `thread.threadKey` derived from the run (the Stack and the Update), with
 *   `messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD`, so a run's events stay in one
 *   thread (the first one starts it) — no state is kept: the key is the same in every process.
 *   `spec.threading: none` leaves both out (every event starts a thread).
 * Limits: a message ≤ 32,000 bytes including cards; the renderer fits the text to 28,000 bytes
 * and the card is cut in its middle if `<br>`s and JSON still make it larger. Errors: Google's
 * `{"error": {"code", "message", "status"}}`; 429 `RESOURCE_EXHAUSTED` when over the space's quota.
 */
import { createHash } from 'node:crypto';
import { runKey, type NotificationEvent } from '../api/event.ts';
import { boundText } from '../text.ts';
import type { ProviderLimits } from '../template/rendered.ts';
import { urlValue } from '../template/markup.ts';
import { assertFits, assertPayloadFits } from './errors.ts';
import { fitBody } from './fit-body.ts';
import type { NotifierFactory } from './types.ts';

/** Largest message, bytes (spaces.messages: "32,000 bytes, including cards"). */
export const GOOGLECHAT_MAX_PAYLOAD_BYTES = 32_000;

/** What the renderer fits the message to. */
export const googlechatLimits: ProviderLimits = {
  message: {
    max: 28_000,
    unit: 'utf8',
    source:
      'Google Chat spaces.messages.create: message ≤ 32,000 bytes including cards; 28,000 bytes of text leave room for the payload',
  },
};

/** The thread key of `ev`'s run: `pko-` and 40 hex digits of SHA-256 over the run key (Stack uid and run). */
export function googlechatThreadKey(ev: NotificationEvent): string {
  return `pko-${createHash('sha256').update(runKey(ev.identity)).digest('hex').slice(0, 40)}`;
}

/** The message body for `ev` and `message` (card text; `threadKey` when threading). */
export function googlechatPayload(ev: NotificationEvent, message: string, threadKey?: string): string {
  const { namespace, name } = ev.involvedObject;
  const permalink = ev.metadata.permalink === undefined ? undefined : urlValue(ev.metadata.permalink);
  return JSON.stringify({
    ...(threadKey !== undefined ? { thread: { threadKey } } : {}),
    cardsV2: [
      {
        cardId: 'pko-notification',
        card: {
          // Card header text is not formatted: API values only (reason, DNS-1123 names).
          header: { title: boundText(`${ev.reason}: ${namespace}/${name}`, 200, 'utf16') },
          sections: [
            {
              widgets: [
                { textParagraph: { text: message.replace(/\n/g, '<br>') } },
                ...(permalink !== undefined
                  ? [
                      {
                        buttonList: {
                          buttons: [{ text: 'View the update', onClick: { openLink: { url: permalink } } }],
                        },
                      },
                    ]
                  : []),
              ],
            },
          ],
        },
      },
    ],
  });
}

/** Factory of the `googlechat` provider type. */
export const googlechat: NotifierFactory = (p, { http }) => {
  const threads = (p.threading ?? 'thread') !== 'none';
  const url = new URL(p.address);
  if (threads) url.searchParams.set('messageReplyOption', 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD');
  const target = url.href;
  return {
    async send(ev, rendered, signal) {
      assertFits(rendered.message, googlechatLimits.message, 'the Google Chat message', http.secretValues);
      const key = threads && ev.identity.run.kind !== 'none' ? googlechatThreadKey(ev) : undefined;
      const body = fitBody(rendered.message, GOOGLECHAT_MAX_PAYLOAD_BYTES, (text) =>
        googlechatPayload(ev, text, key),
      );
      assertPayloadFits(body, GOOGLECHAT_MAX_PAYLOAD_BYTES, 'the Google Chat card', http.secretValues);
      await http.request(target, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json; charset=UTF-8' },
        body,
        responseBody: 'discard',
        notHtml: {
          fix: "set the address (spec.address or the Secret's key 'address') to the space's incoming-webhook URL (https://chat.googleapis.com/v1/spaces/…/messages?key=…&token=…)",
        },
        ...(signal !== undefined ? { signal } : {}),
      });
      return undefined;
    },
    close: () => http.close(),
  };
};
