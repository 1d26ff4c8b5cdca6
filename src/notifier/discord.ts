/**
 * `discord` provider: a Discord channel webhook (`address` = `https://discord.com/api/webhooks/
 * <id>/<token>`, usually kept in the Secret's `address` key: the token is the credential).
 *
 * Payload (docs/providers/discord.md; discord.com/developers/docs/resources/webhook "Execute
 * Webhook"), built here; the template makes the text:
 * - one embed: `title` (the event reason and the object, ≤ 256), `description` (the rendered
 *   message in Discord Markdown, src/template/markup.ts `discord`), `url` (the permalink),
 *   `color` (outcome), `timestamp`;
 * - `allowed_mentions: {parse: []}`: nothing in the message pings anyone, whatever it says;
 * - `username` from `spec.username` when set;
 * - sent with `?wait=true`, so Discord answers 200 with the created message (its `id`) once the
 *   message exists, instead of 204 before — the send reports what Discord did.
 * Limits ("Embed Limits"): description ≤ 4,096, title ≤ 256, the embeds of a message ≤ 6,000
 * characters in all, ≤ 10 embeds; the renderer fits the message to 2,000 characters (what a
 * `content` may hold), well within them. Errors: `{"message": "…", "code": N}` with 4xx; 429 with
 * `Retry-After` (and `retry_after` seconds in the body) when rate limited.
 */
import type { NotificationEvent } from '../api/event.ts';
import { boundText } from '../text.ts';
import type { ProviderLimits } from '../template/rendered.ts';
import { urlValue } from '../template/markup.ts';
import { RESPONSE_CAPS } from './body.ts';
import { assertFits } from './errors.ts';
import { notApiAnswer } from './http-errors.ts';
import type { NotifierFactory } from './types.ts';

/** What the renderer fits the message to. */
export const discordLimits: ProviderLimits = {
  message: {
    max: 2_000,
    unit: 'utf16',
    source: 'Discord webhook: content ≤ 2,000 characters (the embed description, ≤ 4,096, holds it)',
  },
};

/** Discord's embed limits ("Embed Limits"), in characters (UTF-16 units). */
export const DISCORD_EMBED_LIMITS = { title: 256, description: 4_096, total: 6_000, embeds: 10 } as const;

/** Embed colours: red for failures, green for successes, blue otherwise. */
function colour(ev: NotificationEvent): number {
  if (ev.severity === 'error') return 0xd73a49;
  if (ev.reason.endsWith('Succeeded')) return 0x2ea043;
  return 0x3b82f6;
}

/** The Execute Webhook body for `ev` and `message`. */
export function discordPayload(
  ev: NotificationEvent,
  message: string,
  username?: string,
): Record<string, unknown> {
  const { namespace, name } = ev.involvedObject;
  const permalink = ev.metadata.permalink === undefined ? undefined : urlValue(ev.metadata.permalink);
  return {
    ...(username !== undefined ? { username: boundText(username, 80, 'utf16') } : {}),
    allowed_mentions: { parse: [] },
    embeds: [
      {
        // Reason and object names are API values (DNS-1123 names), not free text.
        title: boundText(`${ev.reason}: ${namespace}/${name}`, DISCORD_EMBED_LIMITS.title, 'utf16'),
        description: message,
        ...(permalink !== undefined ? { url: permalink } : {}),
        color: colour(ev),
        timestamp: ev.timestamp,
      },
    ],
  };
}

/** Factory of the `discord` provider type. */
export const discord: NotifierFactory = (p, { http }) => {
  const url = new URL(p.address);
  url.searchParams.set('wait', 'true');
  const target = url.href;
  return {
    async send(ev, rendered, signal) {
      assertFits(rendered.message, discordLimits.message, 'the Discord message', http.secretValues);
      const res = await http.request(target, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(discordPayload(ev, rendered.message, p.username)),
        responseBody: RESPONSE_CAPS.chatAnswer,
        ...(signal !== undefined ? { signal } : {}),
      });
      let id: unknown;
      try {
        id = (JSON.parse(res.text) as { id?: unknown }).id;
      } catch {
        id = undefined;
      }
      if (typeof id !== 'string') {
        throw notApiAnswer('the Discord webhook', res, http.secretValues, {
          retryable: false,
          fix: "set the address (spec.address or the Secret's key 'address') to a Discord webhook URL (https://discord.com/api/webhooks/<id>/<token>)",
        });
      }
      return undefined;
    },
    close: () => http.close(),
  };
};
