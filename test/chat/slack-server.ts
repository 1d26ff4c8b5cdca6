/**
 * A stateful Slack contract server: the Web API methods the `slack` notifier calls and incoming
 * webhooks, answering as Slack documents them.
 *
 * Web API (api.slack.com/methods/chat.postMessage, /methods/chat.update, /web "Evaluating
 * responses"): every answer is HTTP 200 with `{"ok": true|false, …}` except rate limits (HTTP
 * 429, `Retry-After` in seconds; api.slack.com/apis/rate-limits). Errors enforced:
 * - `not_authed` (no `Authorization: Bearer`), `invalid_auth` (unknown token);
 * - `invalid_json` (a JSON body that does not parse), `no_text` (no `text`),
 *   `msg_too_long` (`text` over 40,000 characters: "truncated at 40,000" for postMessage; the
 *   same bound refuses it here so over-long texts are caught);
 * - `channel_not_found` (unknown channel), `not_in_channel` (the bot is not a member),
 *   `is_archived` (archived channel);
 * - chat.update: `channel` must be the channel id (a name is `channel_not_found`),
 *   `message_not_found` (no message with that `ts`), `cant_update_message` (not the bot's).
 * chat.postMessage answers `{ok, channel: <id>, ts, message}`; `ts` is `<seconds>.<6 digits>`,
 * unique per channel. `thread_ts` of an existing message makes a reply.
 *
 * Reads (GET with query parameters; api.slack.com/methods/conversations.history, /replies):
 * `channel` must be the id (`channel_not_found` otherwise), `not_in_channel` when the bot is not a
 * member, `missing_scope` unless the token was given the history scope (`historyScope`);
 * `conversations.history` returns the top-level messages newer than `oldest`, newest first;
 * `conversations.replies` the parent and its replies (`thread_not_found` for an unknown `ts`);
 * `metadata` only with `include_all_metadata=true`; at most `limit` (≤ 1,000) messages.
 * `delayNext(ms)`: the next post is stored at once but answered after `ms` (case N08).
 *
 * Incoming webhooks (api.slack.com/messaging/webhooks "Handling errors"): `POST
 * /services/T…/B…/…` answers 200 `ok`; 400 `invalid_payload` (not JSON), 400 `no_text`, 404
 * `no_service` (unknown or revoked hook), 410 `channel_is_archived`, as text/html bodies.
 */
import { json, startKitServer, type ForgeRequest, type KitServer, type Reply } from '../forge/kit.ts';

export interface SlackMessage {
  ts: string;
  text: string;
  thread_ts?: string;
  user: string;
  metadata?: unknown;
  edited?: boolean;
  username?: string;
}

export interface SlackChannel {
  id: string;
  name: string;
  member: boolean;
  archived: boolean;
  messages: SlackMessage[];
}

export interface SlackServer extends KitServer {
  /** Channels by id. */
  channels: Map<string, SlackChannel>;
  /** Messages posted through incoming webhooks, by hook path. */
  hooks: Map<string, { archived: boolean; texts: string[] }>;
  /** `https?://127.0.0.1:<port>/api/chat.postMessage` */
  postMessageURL: string;
  /** Adds a channel (member by default); returns its id. */
  addChannel(name: string, opts?: { member?: boolean; archived?: boolean }): string;
  /** Adds an incoming webhook; returns its URL. */
  addHook(opts?: { archived?: boolean }): string;
  /** Deletes a message (as a person would); later chat.update of it is `message_not_found`. */
  deleteMessage(channel: string, ts: string): void;
  /** The next `count` Web API calls answer 429 `ratelimited` with `Retry-After: <seconds>`. */
  rateLimit(count: number, retryAfterSeconds: number): void;
  /** The next chat.postMessage is stored at once and answered `ms` later. */
  delayNext(ms: number): void;
  /** Top-level messages of a channel with their replies. */
  threads(channel: string): { parent: SlackMessage; replies: SlackMessage[] }[];
}

export const BOT_USER = 'U0BOT';
const MAX_TEXT = 40_000;

const webApiError = (error: string): Reply => json(200, { ok: false, error });
const hookError = (status: number, text: string): Reply => ({
  status,
  text,
  headers: { 'Content-Type': 'text/html' },
});

export async function startSlackServer(opts: {
  token: string;
  historyScope?: boolean;
}): Promise<SlackServer> {
  const channels = new Map<string, SlackChannel>();
  const hooks = new Map<string, { archived: boolean; texts: string[] }>();
  let clock = 1_700_000_000;
  let seq = 0;
  let limited: { count: number; seconds: number } | undefined;
  let delay = 0;
  // Slack's ts is the post time in seconds with a per-channel unique fraction.
  const nextTs = (): string => {
    clock = Math.max(clock + 1, Math.floor(Date.now() / 1000));
    return `${String(clock)}.${String(++seq).padStart(6, '0')}`;
  };

  const byNameOrId = (c: unknown): SlackChannel | undefined => {
    if (typeof c !== 'string') return undefined;
    const name = c.replace(/^#/, '');
    return channels.get(c) ?? [...channels.values()].find((ch) => ch.name === name);
  };

  /** Shared checks of Web API calls: rate limit, auth, JSON body. */
  const webApi = (req: ForgeRequest, handle: (body: Record<string, unknown>) => Reply): Reply => {
    if (limited !== undefined && limited.count > 0) {
      limited.count--;
      return json(429, { ok: false, error: 'ratelimited' }, { 'Retry-After': String(limited.seconds) });
    }
    const auth = req.headers.authorization;
    if (typeof auth !== 'string' || !auth.startsWith('Bearer ')) return webApiError('not_authed');
    if (auth.slice(7) !== opts.token) return webApiError('invalid_auth');
    if (req.json === undefined || req.json === null || typeof req.json !== 'object')
      return webApiError('invalid_json');
    return handle(req.json as Record<string, unknown>);
  };

  const postMessage = (b: Record<string, unknown>): Reply => {
    const ch = byNameOrId(b.channel);
    if (ch === undefined) return webApiError('channel_not_found');
    if (ch.archived) return webApiError('is_archived');
    if (!ch.member) return webApiError('not_in_channel');
    if (typeof b.text !== 'string' || b.text === '') return webApiError('no_text');
    if (b.text.length > MAX_TEXT) return webApiError('msg_too_long');
    const parent =
      typeof b.thread_ts === 'string' ? ch.messages.find((m) => m.ts === b.thread_ts) : undefined;
    const msg: SlackMessage = {
      ts: nextTs(),
      text: b.text,
      user: BOT_USER,
      ...(parent !== undefined ? { thread_ts: parent.thread_ts ?? parent.ts } : {}),
      ...(b.metadata !== undefined ? { metadata: b.metadata } : {}),
      ...(typeof b.username === 'string' ? { username: b.username } : {}),
    };
    ch.messages.push(msg);
    return json(200, { ok: true, channel: ch.id, ts: msg.ts, message: { ...msg, type: 'message' } });
  };

  const update = (b: Record<string, unknown>): Reply => {
    // chat.update takes the channel id only ("Channel containing the message to be updated").
    const ch = typeof b.channel === 'string' ? channels.get(b.channel) : undefined;
    if (ch === undefined) return webApiError('channel_not_found');
    const msg = ch.messages.find((m) => m.ts === b.ts);
    if (msg === undefined) return webApiError('message_not_found');
    if (msg.user !== BOT_USER) return webApiError('cant_update_message');
    if (typeof b.text !== 'string' || b.text === '') return webApiError('no_text');
    if (b.text.length > MAX_TEXT) return webApiError('msg_too_long');
    msg.text = b.text;
    msg.edited = true;
    return json(200, { ok: true, channel: ch.id, ts: msg.ts, text: msg.text });
  };

  const read = (req: ForgeRequest, replies: boolean): Reply => {
    const auth = req.headers.authorization;
    if (typeof auth !== 'string' || !auth.startsWith('Bearer ')) return webApiError('not_authed');
    if (auth.slice(7) !== opts.token) return webApiError('invalid_auth');
    if (opts.historyScope !== true) return webApiError('missing_scope');
    const ch = channels.get(req.query.get('channel') ?? '');
    if (ch === undefined) return webApiError('channel_not_found');
    if (!ch.member) return webApiError('not_in_channel');
    const limit = Math.min(Number(req.query.get('limit') ?? '100') || 100, 1000);
    const withMetadata = req.query.get('include_all_metadata') === 'true';
    const show = (m: SlackMessage): Record<string, unknown> => {
      const { metadata, ...rest } = m;
      return { type: 'message', ...rest, ...(withMetadata && metadata !== undefined ? { metadata } : {}) };
    };
    if (replies) {
      const ts = req.query.get('ts');
      const parent = ch.messages.find((m) => m.ts === ts && m.thread_ts === undefined);
      if (parent === undefined) return webApiError('thread_not_found');
      const msgs = [parent, ...ch.messages.filter((m) => m.thread_ts === parent.ts)].slice(0, limit);
      return json(200, { ok: true, messages: msgs.map(show), has_more: false });
    }
    const oldest = Number(req.query.get('oldest') ?? '0');
    const msgs = ch.messages
      .filter((m) => m.thread_ts === undefined && Number(m.ts) > oldest)
      .reverse()
      .slice(0, limit);
    return json(200, { ok: true, messages: msgs.map(show), has_more: false });
  };

  const hook = (req: ForgeRequest): Reply => {
    const h = hooks.get(req.path);
    if (h === undefined) return hookError(404, 'no_service');
    if (req.json === undefined) return hookError(400, 'invalid_payload');
    const text = (req.json as { text?: unknown }).text;
    if (typeof text !== 'string' || text === '') return hookError(400, 'no_text');
    if (h.archived) return hookError(410, 'channel_is_archived');
    h.texts.push(text);
    return { status: 200, text: 'ok' };
  };

  const kit = await startKitServer([
    [
      'POST',
      /^\/api\/chat\.postMessage$/,
      async (req) => {
        const reply = webApi(req, postMessage);
        const wait = delay;
        delay = 0;
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        return reply;
      },
    ],
    ['GET', /^\/api\/conversations\.history$/, (req) => read(req, false)],
    ['GET', /^\/api\/conversations\.replies$/, (req) => read(req, true)],
    ['POST', /^\/api\/chat\.update$/, (req) => webApi(req, update)],
    ['POST', /^\/services\/[^/]+\/[^/]+\/[^/]+$/, hook],
  ]);
  let hookSeq = 0;
  return {
    ...kit,
    channels,
    hooks,
    postMessageURL: `${kit.url}/api/chat.postMessage`,
    addChannel(name, o = {}) {
      const id = `C${String(channels.size + 1).padStart(8, '0')}`;
      channels.set(id, {
        id,
        name,
        member: o.member ?? true,
        archived: o.archived ?? false,
        messages: [],
      });
      return id;
    },
    addHook(o = {}) {
      const path = `/services/T0000/B${String(++hookSeq).padStart(4, '0')}/hooksecret${String(hookSeq)}`;
      hooks.set(path, { archived: o.archived ?? false, texts: [] });
      return `${kit.url}${path}`;
    },
    deleteMessage(channel, ts) {
      const ch = channels.get(channel);
      if (ch) ch.messages = ch.messages.filter((m) => m.ts !== ts);
    },
    delayNext(ms) {
      delay = ms;
    },
    rateLimit(count, seconds) {
      limited = { count, seconds };
    },
    threads(channel) {
      const ch = channels.get(channel);
      if (!ch) return [];
      return ch.messages
        .filter((m) => m.thread_ts === undefined)
        .map((parent) => ({ parent, replies: ch.messages.filter((m) => m.thread_ts === parent.ts) }));
    },
  };
}
