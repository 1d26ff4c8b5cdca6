/**
 * A Google Chat incoming-webhook contract server (developers.google.com/workspace/chat/
 * quickstart/webhooks; REST spaces.messages.create; "Usage limits"):
 * - `POST /v1/spaces/<space>/messages?key=…&token=…`: a wrong `key` is 400 `API_KEY_INVALID`
 *   ("API key not valid"), a wrong `token` 401 `UNAUTHENTICATED`, an unknown space 404
 *   `NOT_FOUND` — Google's envelope `{"error": {"code", "message", "status"}}`;
 * - the body: `text` and/or `cardsV2` (else 400 `INVALID_ARGUMENT` "Message cannot be empty"),
 *   ≤ 32,000 bytes ("Message size including cards"), `thread.threadKey` ≤ 4,000 characters;
 *   each card v2 needs a `card` with `sections` of `widgets`;
 * - threads: `messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD` with a `threadKey` replies
 *   in the thread created with that key by this webhook, or starts it; without the option the
 *   key is ignored and every message starts a thread (`MESSAGE_REPLY_OPTION_UNSPECIFIED`);
 * - answers 200 with the Message (`name`, `thread.name`, `thread.threadKey`);
 * - quota: more than 1 write per second per space → 429 `RESOURCE_EXHAUSTED` ("Per space write
 *   limit for webhooks: 1 per second").
 */
import { json, startKitServer, type ForgeRequest, type KitServer, type Reply } from '../forge/kit.ts';

export interface ChatMessage {
  name: string;
  thread: string;
  threadKey?: string;
  body: Record<string, unknown>;
}

export interface GoogleChatServer extends KitServer {
  webhookURL: string;
  messages: ChatMessage[];
  /** Messages grouped by thread, in order of each thread's first message. */
  threads(): ChatMessage[][];
  /** Turns the 1-write-per-second quota on or off (default on). */
  quota(on: boolean): void;
}

const SPACE = 'AAAAabcdEFG';
const KEY = 'AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI';
const TOKEN = 'gChAtWeBhOoKtOkEn0123456789';
const MAX_BYTES = 32_000;

const gError = (code: number, status: string, message: string): Reply =>
  json(code, { error: { code, message, status } });

export async function startGoogleChatServer(): Promise<GoogleChatServer> {
  const messages: ChatMessage[] = [];
  const threadsByKey = new Map<string, string>();
  let lastWrite = 0;
  let quota = true;
  let seq = 0;
  const create = (req: ForgeRequest, m: RegExpExecArray): Reply => {
    if (req.query.get('key') !== KEY)
      return gError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.');
    if (req.query.get('token') !== TOKEN)
      return gError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.');
    if (m[1] !== SPACE) return gError(404, 'NOT_FOUND', 'Requested entity was not found.');
    const now = Date.now();
    if (quota && now - lastWrite < 1000) {
      return gError(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).');
    }
    if (Buffer.byteLength(req.body, 'utf8') > MAX_BYTES)
      return gError(400, 'INVALID_ARGUMENT', 'Message is too large.');
    if (req.json === null || typeof req.json !== 'object')
      return gError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
    const b = req.json as { text?: unknown; cardsV2?: unknown; thread?: { threadKey?: unknown } };
    const cards = Array.isArray(b.cardsV2) ? (b.cardsV2 as { card?: { sections?: unknown } }[]) : [];
    if ((typeof b.text !== 'string' || b.text === '') && cards.length === 0)
      return gError(400, 'INVALID_ARGUMENT', 'Message cannot be empty.');
    for (const c of cards) {
      const sections = c.card?.sections;
      if (!Array.isArray(sections) || sections.some((s: { widgets?: unknown }) => !Array.isArray(s.widgets)))
        return gError(
          400,
          'INVALID_ARGUMENT',
          'Invalid JSON payload received. Unknown name or missing widgets in card.',
        );
    }
    const key = typeof b.thread?.threadKey === 'string' ? b.thread.threadKey : undefined;
    if (key !== undefined && key.length > 4000)
      return gError(400, 'INVALID_ARGUMENT', 'Thread key is too long.');
    lastWrite = now;
    const reply = req.query.get('messageReplyOption') === 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD';
    let thread: string;
    if (reply && key !== undefined && threadsByKey.has(key)) thread = threadsByKey.get(key) ?? '';
    else {
      thread = `spaces/${SPACE}/threads/t${String(++seq)}`;
      if (reply && key !== undefined) threadsByKey.set(key, thread);
    }
    const msg: ChatMessage = {
      name: `spaces/${SPACE}/messages/m${String(++seq)}`,
      thread,
      ...(key !== undefined ? { threadKey: key } : {}),
      body: b,
    };
    messages.push(msg);
    return json(200, {
      name: msg.name,
      thread: { name: thread, ...(key !== undefined ? { threadKey: key } : {}) },
      space: { name: `spaces/${SPACE}` },
    });
  };
  const kit = await startKitServer([['POST', /^\/v1\/spaces\/([^/]+)\/messages$/, create]]);
  return {
    ...kit,
    messages,
    webhookURL: `${kit.url}/v1/spaces/${SPACE}/messages?key=${KEY}&token=${TOKEN}`,
    threads() {
      const order: string[] = [];
      for (const m of messages) if (!order.includes(m.thread)) order.push(m.thread);
      return order.map((t) => messages.filter((m) => m.thread === t));
    },
    quota(on) {
      quota = on;
    },
  };
}
