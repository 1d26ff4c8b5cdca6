/**
 * `slack` provider: an incoming webhook (`address` = the hooks.slack.com URL, usually kept in
 * the Secret's `address` key), or, with a bot `token`, the Web API (`address` =
 * `https://slack.com/api/chat.postMessage`; `chat.update` is called beside it; `channel` required).
 *
 * Plain HTTP through `ProviderHttp` rather than `@slack/webhook`/`@slack/web-api`: those send
 * through axios, which would bypass the Provider's CA bundle and proxy (every provider must honour
 * them), and have no timeout by default. The JSON payload is built here; only the text is templated.
 *
 * Runs (docs/providers/slack.md, "Threads"): with a bot token, the first event of a run posts a
 * message and its `channel` + `ts` are kept as the run's note; later events of the run reply in
 * its thread (`thread_ts`, `spec.threading: thread`, the default) or edit it (`chat.update`,
 * `spec.threading: update`). The note is handed back to delivery (`SendOutcome.note`) and read
 * from it (`SendContext.runNote`); without one from delivery, from the in-process fallback
 * (./run-notes.ts). Incoming webhooks return no message id: one message per event, no threads.
 *
 * Behaviour: a webhook answers `ok` (HTTP 200) and errors with 4xx text (`invalid_payload`,
 * `no_service`, `channel_is_archived`); the Web API answers HTTP 200 with `{"ok": false, "error":
 * "…"}` on failure (classified by `classifySlackError`, ./classify.ts), and 429 with `Retry-After`
 * when rate limited. `text` is bounded by the renderer (≤ 4,000 characters advisable: `slackLimits`).
 */
import { runKey } from '../api/event.ts';
import type { ProviderLimits } from '../template/rendered.ts';
import type { Notifier, NotifierFactory, SendOutcome } from './types.ts';
import { classifySlackError } from './classify.ts';
import { assertFits, ProviderError, retryAfterFrom } from './errors.ts';
import { notApiAnswer } from './http-errors.ts';
import { RESPONSE_CAPS } from './body.ts';
import type { ProviderHttp } from './http.ts';
import { processRunNotes, type RunNotes } from './run-notes.ts';

/** Slack's field limits (the renderer fits the message to them). */
export const slackLimits: ProviderLimits = {
  message: {
    max: 4_000,
    unit: 'utf16',
    source:
      'Slack chat.postMessage: text ≤ 4,000 characters advisable (cut at 40,000); docs/providers/slack.md',
  },
};

/** `event_type` of the message metadata each bot message carries (its payload: `{event_id}`). */
export const SLACK_METADATA_EVENT_TYPE = 'pko_notification';

/**
 * chat.update errors after which the run's message cannot be edited (deleted, too old, not
 * ours): the event is posted as a new message, which becomes the run's message.
 */
const UNEDITABLE = new Set(['message_not_found', 'cant_update_message', 'edit_window_closed']);

/** A run's message: the channel id chat.postMessage answered and the message's `ts`. */
interface RunMessage {
  channel: string;
  ts: string;
}

/** Note format: `<channel id> <ts>` (≤ 128 bytes: ids are short; ts is `<seconds>.<micros>`). */
const NOTE = /^([A-Za-z0-9_-]{1,64}) (\d{1,12}\.\d{1,8})$/;

export function parseSlackNote(note: string | undefined): RunMessage | undefined {
  const m = note === undefined ? null : NOTE.exec(note);
  return m?.[1] !== undefined && m[2] !== undefined ? { channel: m[1], ts: m[2] } : undefined;
}

interface SlackAnswer {
  ok?: unknown;
  error?: unknown;
  ts?: unknown;
  channel?: unknown;
}

/**
 * Calls one Web API method — POST with a JSON body, or GET with `body` as query parameters (the
 * read methods) — and returns the answer when `ok`; throws a classified ProviderError otherwise
 * (except the errors in `tolerate`, returned).
 */
async function callSlack(
  http: ProviderHttp,
  url: string,
  method: string,
  token: string,
  body: object,
  signal: AbortSignal | undefined,
  tolerate: ReadonlySet<string> = new Set(),
  read = false,
): Promise<{ ts?: unknown; channel?: unknown; messages?: unknown; error: string | undefined }> {
  const target = new URL(url);
  if (read) for (const [k, v] of Object.entries(body)) target.searchParams.set(k, String(v));
  const res = await http.request(target.href, {
    method: read ? 'GET' : 'POST',
    headers: {
      ...(read ? {} : { 'Content-Type': 'application/json; charset=utf-8' }),
      Authorization: `Bearer ${token}`,
    },
    ...(read ? {} : { body: JSON.stringify(body) }),
    responseBody: read ? RESPONSE_CAPS.apiPage : RESPONSE_CAPS.chatAnswer,
    ...(signal !== undefined ? { signal } : {}),
  });
  let answer: SlackAnswer & { messages?: unknown };
  try {
    answer = JSON.parse(res.text) as SlackAnswer;
  } catch {
    throw notApiAnswer(method, res, http.secretValues, {
      retryable: true,
      fix: "set spec.address to Slack's API (https://slack.com/api/chat.postMessage) or the incoming-webhook URL",
    });
  }
  if (answer.ok === true)
    return { ts: answer.ts, channel: answer.channel, messages: answer.messages, error: undefined };
  // Slack's error codes are short snake_case words; anything else is not shown (B09).
  const error =
    typeof answer.error === 'string' && /^[a-z0-9_.]{1,64}$/.test(answer.error)
      ? answer.error
      : 'unknown_error';
  if (tolerate.has(error)) return { error };
  const verdict = classifySlackError(error, retryAfterFrom(res.headers, http.now(), res.text));
  const hint =
    verdict.kind === 'auth'
      ? ' (check the token in the Provider Secret)'
      : error === 'channel_not_found' || error === 'not_in_channel'
        ? ' (check spec.channel and invite the bot)'
        : error === 'missing_scope'
          ? ' (the bot needs the chat:write scope)'
          : '';
  throw new ProviderError(`${method} failed: ${error}${hint}`, {
    status: res.status,
    retryable: verdict.retry,
    code: `SLACK_${error.toUpperCase()}`,
    secretValues: http.secretValues,
    verdict,
  });
}

/** Messages read back per lookup (one page; ours are at most 4,000 characters each). */
const LOOKUP_LIMIT = 100;
/** How far before the event's time a lookup reads the channel, seconds (clock skew, queueing). */
const LOOKUP_SLACK_SECONDS = 300;

/**
 * Lookup errors after which the channel cannot be read with this token (no `channels:history`
 * scope, not a member, a channel name rather than an id): the answer is "not found", so the event
 * is sent (again) rather than never.
 */
const CANNOT_READ = new Set(['missing_scope', 'not_in_channel', 'channel_not_found', 'thread_not_found']);

/** Whether one of `messages` (a Web API `messages` array) carries `eventId` in its metadata. */
function carries(messages: unknown, eventId: string): boolean {
  if (!Array.isArray(messages)) return false;
  return messages.some((m) => {
    const md = (m as { metadata?: { event_type?: unknown; event_payload?: { event_id?: unknown } } })
      .metadata;
    return md?.event_type === SLACK_METADATA_EVENT_TYPE && md.event_payload?.event_id === eventId;
  });
}

/** The `slack` factory keeping runs' notes, when delivery passes none, in `notes`. */
export function slackWith(notes: RunNotes): NotifierFactory {
  return (p, { http }) => {
    const token = p.token;
    if (token !== undefined && p.channel === undefined) {
      throw new Error(`Provider ${p.namespace}/${p.name}: a slack bot token needs spec.channel`);
    }
    const mode = p.threading ?? 'thread';
    // chat.update sits beside chat.postMessage (https://slack.com/api/<method>).
    const updateURL = token !== undefined ? new URL('chat.update', p.address).href : '';
    const notifier: Notifier = {
      async send(ev, rendered, signal, ctx): Promise<SendOutcome | undefined> {
        assertFits(rendered.message, slackLimits.message, 'the slack message', http.secretValues);
        if (token === undefined) {
          // Incoming webhook: no message id comes back, so no threads (docs/providers/slack.md).
          await http.request(p.address, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json; charset=utf-8' },
            body: JSON.stringify({
              text: rendered.message,
              ...(p.channel !== undefined ? { channel: p.channel } : {}),
              ...(p.username !== undefined ? { username: p.username } : {}),
            }),
            // Webhook mode answers "ok", unread.
            responseBody: 'discard',
            ...(signal !== undefined ? { signal } : {}),
          });
          return undefined;
        }

        const key = `${p.namespace}/${p.name}\u0000${runKey(ev.identity)}`;
        const keepsRun = mode !== 'none' && ev.identity.run.kind !== 'none';
        const prev = keepsRun ? parseSlackNote(ctx?.runNote ?? notes.get(key)) : undefined;

        if (prev !== undefined && mode === 'update') {
          const a = await callSlack(
            http,
            updateURL,
            'chat.update',
            token,
            { channel: prev.channel, ts: prev.ts, text: rendered.message },
            signal,
            UNEDITABLE,
          );
          if (a.error === undefined) return { note: `${prev.channel} ${prev.ts}` };
          // Deleted or no longer editable: the event becomes the run's new message.
        }

        const threadTs = prev !== undefined && mode === 'thread' ? prev.ts : undefined;
        const a = await callSlack(
          http,
          p.address,
          'chat.postMessage',
          token,
          {
            channel: threadTs !== undefined && prev ? prev.channel : p.channel,
            text: rendered.message,
            ...(p.username !== undefined ? { username: p.username } : {}),
            ...(threadTs !== undefined ? { thread_ts: threadTs } : {}),
            // A permalink in the text is the update's page, not worth a preview card.
            unfurl_links: false,
            unfurl_media: false,
            // The event id on the message (Slack "message metadata"), so that `findDelivered`
            // can tell whether an attempt that got no answer posted it.
            metadata: { event_type: SLACK_METADATA_EVENT_TYPE, event_payload: { event_id: ev.id } },
          },
          signal,
        );
        if (!keepsRun) return undefined;
        if (threadTs !== undefined && prev) return { note: `${prev.channel} ${prev.ts}` };
        const posted =
          typeof a.channel === 'string' && typeof a.ts === 'string'
            ? parseSlackNote(`${a.channel} ${a.ts}`)
            : undefined;
        if (posted === undefined) return undefined;
        const note = `${posted.channel} ${posted.ts}`;
        notes.set(key, note);
        return { note };
      },

      /**
       * Whether the channel already holds `ev` (an earlier attempt posted it but its answer was
       * lost): reads the run's thread (`conversations.replies`) when the run has a message, else
       * the channel's history since shortly before the event (`conversations.history`), with
       * message metadata, and looks for the event id. Needs the `channels:history` (or
       * `groups:history`) scope and, for a run's first message, `spec.channel` as a channel id;
       * when the channel cannot be read the answer is false (the event is sent). In `update` mode
       * an edit of the run's message is idempotent: false (it is made again). Bot tokens only.
       */
      async findDelivered(ev, signal, ctx) {
        if (token === undefined) return false; // not reached: webhooks have no findDelivered
        const key = `${p.namespace}/${p.name}\u0000${runKey(ev.identity)}`;
        const keepsRun = mode !== 'none' && ev.identity.run.kind !== 'none';
        const prev = keepsRun ? parseSlackNote(ctx?.runNote ?? notes.get(key)) : undefined;
        if (prev !== undefined && mode === 'update') return false;
        let a: { messages?: unknown; error: string | undefined };
        if (prev !== undefined) {
          a = await callSlack(
            http,
            new URL('conversations.replies', p.address).href,
            'conversations.replies',
            token,
            { channel: prev.channel, ts: prev.ts, limit: LOOKUP_LIMIT, include_all_metadata: true },
            signal,
            CANNOT_READ,
            true,
          );
        } else {
          const channel = p.channel ?? '';
          // conversations.history takes a channel id (C…, G…, D…), not a name.
          if (!/^[CGD][A-Z0-9]{2,}$/.test(channel)) return false;
          const at = Date.parse(ev.timestamp);
          const oldest = Number.isNaN(at) ? 0 : Math.max(0, Math.floor(at / 1000) - LOOKUP_SLACK_SECONDS);
          a = await callSlack(
            http,
            new URL('conversations.history', p.address).href,
            'conversations.history',
            token,
            { channel, oldest: `${String(oldest)}.000000`, limit: LOOKUP_LIMIT, include_all_metadata: true },
            signal,
            CANNOT_READ,
            true,
          );
        }
        return a.error === undefined && carries(a.messages, ev.id);
      },
      close: () => http.close(),
    };
    // Only a bot token can read the channel: an incoming webhook has no `findDelivered`, so
    // delivery treats it as a target that cannot be asked (an unanswered post is not repeated).
    if (token === undefined) delete notifier.findDelivered;
    return notifier;
  };
}

/** Factory of the `slack` provider type (runs' notes fall back to the process-wide memory). */
export const slack: NotifierFactory = slackWith(processRunNotes);
