/**
 * A Discord Execute Webhook contract server (discord.com/developers/docs/resources/webhook
 * "Execute Webhook", /reference "Rate Limits", "Error Messages", /resources/message "Embed
 * Limits"):
 * - `POST /api/webhooks/<id>/<token>`: unknown id 404 `{"message": "Unknown Webhook", "code":
 *   10015}`, wrong token 401 `{"message": "Invalid Webhook Token", "code": 50027}`;
 * - `?wait=true` answers 200 with the created message (`id`, `channel_id`, `content`, `embeds`);
 *   without it 204 and no body;
 * - validation, 400 `{"message": "Invalid Form Body", "code": 50035, "errors": {…}}`: `content`
 *   ≤ 2,000; ≤ 10 embeds; embed `title` ≤ 256, `description` ≤ 4,096, `fields` ≤ 25 (name ≤ 256,
 *   value ≤ 1,024), `footer.text` ≤ 2,048, `author.name` ≤ 256, and all embeds' characters ≤ 6,000;
 *   a message with neither content nor embeds is 400 `{"message": "Cannot send an empty
 *   message", "code": 50006}`;
 * - `allowed_mentions.parse` decides which mentions in `content` ping: the server records who
 *   would have been pinged (`@everyone`/`@here` when `everyone` is parsed, `<@id>` when `users`);
 *   mentions never ping from embeds;
 * - rate limits: `rateLimit(n, seconds)` → 429 `{"message": "You are being rate limited.",
 *   "retry_after": s, "global": false}` with `Retry-After` (whole seconds, rounded up) and
 *   `X-RateLimit-Remaining: 0`, `X-RateLimit-Reset-After: s`; with `{retryAfterHeader: false}`
 *   no `Retry-After` (case N14: the wait only in the body and `X-RateLimit-Reset-After`).
 */
import { json, startKitServer, type ForgeRequest, type KitServer, type Reply } from '../forge/kit.ts';

export interface DiscordMessage {
  id: string;
  content: string;
  embeds: Record<string, unknown>[];
  username?: string;
  /** Who this message pinged (per allowed_mentions). */
  pinged: string[];
}

export interface DiscordServer extends KitServer {
  webhookURL: string;
  messages: DiscordMessage[];
  rateLimit(count: number, seconds: number, opts?: { retryAfterHeader?: boolean }): void;
}

const ID = '1234567890123456789';
const TOKEN = 'dIsCoRdWeBhOoKtOkEn-0123456789abcdefABCDEF';

const len = (v: unknown): number => (typeof v === 'string' ? v.length : 0);

function formError(errors: Record<string, string>): Reply {
  return json(400, {
    message: 'Invalid Form Body',
    code: 50035,
    errors: Object.fromEntries(
      Object.entries(errors).map(([k, m]) => [
        k,
        { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: m }] },
      ]),
    ),
  });
}

/** Form errors of an Execute Webhook body, by field path. */
function validate(b: Record<string, unknown>): Record<string, string> {
  const errors: Record<string, string> = {};
  if (len(b.content) > 2000) errors.content = 'Must be 2000 or fewer in length.';
  const embeds = Array.isArray(b.embeds) ? (b.embeds as Record<string, unknown>[]) : [];
  if (embeds.length > 10) errors.embeds = 'Must be 10 or fewer in length.';
  let total = 0;
  embeds.forEach((e, i) => {
    const footer = e.footer as { text?: unknown } | undefined;
    const author = e.author as { name?: unknown } | undefined;
    const fields = Array.isArray(e.fields) ? (e.fields as { name?: unknown; value?: unknown }[]) : [];
    if (len(e.title) > 256) errors[`embeds.${String(i)}.title`] = 'Must be 256 or fewer in length.';
    if (len(e.description) > 4096)
      errors[`embeds.${String(i)}.description`] = 'Must be 4096 or fewer in length.';
    if (fields.length > 25) errors[`embeds.${String(i)}.fields`] = 'Must be 25 or fewer in length.';
    fields.forEach((f, j) => {
      if (len(f.name) > 256)
        errors[`embeds.${String(i)}.fields.${String(j)}.name`] = 'Must be 256 or fewer in length.';
      if (len(f.value) > 1024)
        errors[`embeds.${String(i)}.fields.${String(j)}.value`] = 'Must be 1024 or fewer in length.';
      total += len(f.name) + len(f.value);
    });
    if (len(footer?.text) > 2048)
      errors[`embeds.${String(i)}.footer.text`] = 'Must be 2048 or fewer in length.';
    if (len(author?.name) > 256)
      errors[`embeds.${String(i)}.author.name`] = 'Must be 256 or fewer in length.';
    total += len(e.title) + len(e.description) + len(footer?.text) + len(author?.name);
  });
  if (total > 6000) errors.embeds = 'Embed size exceeds maximum size of 6000';
  return errors;
}

/** Who `content` pings under `allowed_mentions` (default: everything parsed). */
function pings(content: string, allowed: unknown): string[] {
  const parse: string[] =
    allowed !== null && typeof allowed === 'object' && Array.isArray((allowed as { parse?: unknown }).parse)
      ? (allowed as { parse: string[] }).parse
      : ['everyone', 'users', 'roles'];
  const out: string[] = [];
  if (parse.includes('everyone'))
    for (const m of content.matchAll(/@(everyone|here)\b/g)) out.push(`@${m[1] ?? ''}`);
  if (parse.includes('users'))
    for (const m of content.matchAll(/<@!?(\d+)>/g)) out.push(`user:${m[1] ?? ''}`);
  if (parse.includes('roles')) for (const m of content.matchAll(/<@&(\d+)>/g)) out.push(`role:${m[1] ?? ''}`);
  return out;
}

export async function startDiscordServer(): Promise<DiscordServer> {
  const messages: DiscordMessage[] = [];
  let limited: { count: number; seconds: number; retryAfterHeader: boolean } | undefined;
  let seq = 0;
  const execute = (req: ForgeRequest, m: RegExpExecArray): Reply => {
    if (m[1] !== ID) return json(404, { message: 'Unknown Webhook', code: 10015 });
    if (m[2] !== TOKEN) return json(401, { message: 'Invalid Webhook Token', code: 50027 });
    if (limited !== undefined && limited.count > 0) {
      limited.count--;
      return json(
        429,
        { message: 'You are being rate limited.', retry_after: limited.seconds, global: false },
        {
          ...(limited.retryAfterHeader ? { 'Retry-After': String(Math.ceil(limited.seconds)) } : {}),
          'X-RateLimit-Limit': '5',
          'X-RateLimit-Remaining': '0',
          'X-RateLimit-Reset-After': String(limited.seconds),
          'X-RateLimit-Scope': 'user',
        },
      );
    }
    if (req.json === null || typeof req.json !== 'object')
      return json(400, { message: 'Cannot send an empty message', code: 50006 });
    const b = req.json as Record<string, unknown>;
    const content = typeof b.content === 'string' ? b.content : '';
    const embeds = Array.isArray(b.embeds) ? (b.embeds as Record<string, unknown>[]) : [];
    if (content === '' && embeds.length === 0)
      return json(400, { message: 'Cannot send an empty message', code: 50006 });
    const errors = validate(b);
    if (Object.keys(errors).length > 0) return formError(errors);
    const msg: DiscordMessage = {
      id: String(1_100_000_000_000_000_000n + BigInt(++seq)),
      content,
      embeds,
      ...(typeof b.username === 'string' ? { username: b.username } : {}),
      pinged: pings(content, b.allowed_mentions),
    };
    messages.push(msg);
    if (req.query.get('wait') !== 'true') return { status: 204 };
    return json(200, {
      id: msg.id,
      type: 0,
      channel_id: '222222222222222222',
      content,
      embeds,
      webhook_id: ID,
    });
  };
  const kit = await startKitServer([['POST', /^\/api\/webhooks\/([^/]+)\/([^/]+)$/, execute]]);
  return {
    ...kit,
    messages,
    webhookURL: `${kit.url}/api/webhooks/${ID}/${TOKEN}`,
    rateLimit(count, seconds, opts = {}) {
      limited = { count, seconds, retryAfterHeader: opts.retryAfterHeader ?? true };
    },
  };
}
