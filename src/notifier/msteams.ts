/**
 * `msteams` provider: a Microsoft Teams Workflows webhook ("When a Teams webhook request is
 * received" → "Post card in a chat or channel"); `address` = the workflow's URL, usually kept in
 * the Secret's `address` key (its `sig` query parameter is the credential). Office 365 connector
 * URLs (`*.webhook.office.com`) were retired by Microsoft and are refused when the Provider is
 * resolved (`RetiredEndpoint`, case F24; src/credential/provider.ts).
 *
 * Payload (docs/providers/msteams.md): a `message` activity with one Adaptive Card 1.4 attachment,
 * built here; the template makes the text. The rendered message (Adaptive Card TextBlock Markdown:
 * src/template/markup.ts `msteams`) becomes TextBlocks: the first line as the title (coloured by
 * outcome), the rest as one TextBlock per paragraph group with lines joined by `\n\n` (a
 * TextBlock line break: Teams "Format cards in Teams"), and every ```` ``` ```` fenced part as a
 * monospace TextBlock (Adaptive Cards have no code blocks). The permalink, when the event has one,
 * is an `Action.OpenUrl` button.
 *
 * Limits: the whole request body ≤ 28 KB (28,672 bytes; Teams "message size limit 28 KB",
 * docs/providers/msteams.md). The renderer fits the text to 20,000 bytes; escaping and JSON can
 * still grow it, so the text is cut in its middle (start and end kept, the cut stated) until the
 * body fits. The Workflows endpoint answers 202 Accepted and runs the flow asynchronously: a card
 * the flow cannot post fails in the flow's run history, not in the answer.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { ProviderLimits } from '../template/rendered.ts';
import { urlValue } from '../template/markup.ts';
import { assertFits, assertPayloadFits } from './errors.ts';
import { fitBody } from './fit-body.ts';
import type { NotifierFactory } from './types.ts';

/** Largest request body, bytes (28 KB). */
export const MSTEAMS_MAX_PAYLOAD_BYTES = 28 * 1024;

/** What the renderer fits the message to. */
export const msteamsLimits: ProviderLimits = {
  message: {
    max: 20_000,
    unit: 'utf8',
    source:
      'Teams Workflows webhook payload ≤ 28 KB; 20,000 bytes of text leave room for the Adaptive Card and JSON escaping',
  },
};

interface TextBlock {
  type: 'TextBlock';
  text: string;
  wrap: true;
  weight?: 'Bolder';
  size?: 'Medium';
  color?: 'Good' | 'Attention' | 'Warning';
  fontType?: 'Monospace';
  spacing?: 'Small' | 'Medium';
}

/** The message split at lines that are exactly ```` ``` ```` (fences): text and code parts, in order. */
function parts(message: string): { code: boolean; lines: string[] }[] {
  const out: { code: boolean; lines: string[] }[] = [];
  let cur = { code: false, lines: [] as string[] };
  for (const line of message.split('\n')) {
    if (line.trim() === '```') {
      out.push(cur);
      cur = { code: !cur.code, lines: [] };
      continue;
    }
    cur.lines.push(line);
  }
  out.push(cur);
  return out.filter((p) => p.lines.some((l) => l.trim() !== ''));
}

function colour(ev: NotificationEvent): TextBlock['color'] {
  if (ev.severity === 'error') return 'Attention';
  if (ev.reason.endsWith('Succeeded')) return 'Good';
  return undefined;
}

/** The Adaptive Card (version 1.4) of `message` for `ev`. */
export function teamsCard(ev: NotificationEvent, message: string): Record<string, unknown> {
  const body: TextBlock[] = [];
  for (const part of parts(message)) {
    // Blank lines around a part carry no content; inside, a blank line stays a blank paragraph.
    let lines = part.lines;
    while (lines[0]?.trim() === '') lines = lines.slice(1);
    while (lines.at(-1)?.trim() === '') lines = lines.slice(0, -1);
    if (part.code) {
      body.push({
        type: 'TextBlock',
        text: lines.join('\n\n'),
        wrap: true,
        fontType: 'Monospace',
        spacing: 'Small',
      });
      continue;
    }
    if (body.length === 0) {
      const [title, ...rest] = lines;
      const c = colour(ev);
      body.push({
        type: 'TextBlock',
        text: title ?? '',
        wrap: true,
        weight: 'Bolder',
        size: 'Medium',
        ...(c !== undefined ? { color: c } : {}),
      });
      lines = rest;
      while (lines[0]?.trim() === '') lines = lines.slice(1);
      if (lines.length === 0) continue;
    }
    body.push({ type: 'TextBlock', text: lines.join('\n\n'), wrap: true, spacing: 'Small' });
  }
  const permalink = ev.metadata.permalink === undefined ? undefined : urlValue(ev.metadata.permalink);
  return {
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    type: 'AdaptiveCard',
    version: '1.4',
    msteams: { width: 'Full' },
    body,
    ...(permalink !== undefined
      ? { actions: [{ type: 'Action.OpenUrl', title: 'View the update', url: permalink }] }
      : {}),
  };
}

/** The request body: a `message` with the card as its one attachment (Teams "Send Adaptive Cards using an Incoming Webhook"). */
function envelope(card: Record<string, unknown>): string {
  return JSON.stringify({
    type: 'message',
    attachments: [
      { contentType: 'application/vnd.microsoft.card.adaptive', contentUrl: null, content: card },
    ],
  });
}

/**
 * The request body for `ev` and `message`, at most {@link MSTEAMS_MAX_PAYLOAD_BYTES}: when the
 * card is larger the message is cut in its middle (its first lines and its end kept, the cut
 * stated) until it fits (./fit-body.ts).
 */
export function teamsPayload(ev: NotificationEvent, message: string): string {
  return fitBody(message, MSTEAMS_MAX_PAYLOAD_BYTES, (text) => envelope(teamsCard(ev, text)));
}

/** Factory of the `msteams` provider type. */
export const msteams: NotifierFactory = (p, { http }) => ({
  async send(ev, rendered, signal) {
    assertFits(rendered.message, msteamsLimits.message, 'the Teams message', http.secretValues);
    const body = teamsPayload(ev, rendered.message);
    assertPayloadFits(body, MSTEAMS_MAX_PAYLOAD_BYTES, 'the Teams card', http.secretValues);
    // Workflows answer 202 Accepted with an empty body; the flow posts the card afterwards.
    await http.request(p.address, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body,
      responseBody: 'discard',
      notHtml: {
        fix: "set the address (spec.address or the Secret's key 'address') to the Teams Workflows webhook URL",
      },
      ...(signal !== undefined ? { signal } : {}),
    });
    return undefined;
  },
  close: () => http.close(),
});
