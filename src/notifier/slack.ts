/**
 * `slack` provider: an incoming webhook (`address` = the hooks.slack.com URL, usually kept in
 * the Secret's `address` key), or, with a bot `token`, the Web API `chat.postMessage`
 * (`address` = `https://slack.com/api/chat.postMessage`, `channel` required).
 *
 * Plain HTTP through `ProviderHttp` rather than `@slack/webhook`/`@slack/web-api`: those send
 * through axios, which would bypass the Provider's CA bundle and proxy (every provider must honour
 * them), and have no timeout by default. The JSON payload is built here; only the text is templated.
 *
 * Behaviour (docs/providers/slack.md): a webhook answers `ok` (HTTP 200) and errors with 4xx text
 * (`invalid_payload`, `no_service`, `channel_is_archived`); `chat.postMessage` answers HTTP 200 with
 * `{"ok": false, "error": "…"}` on failure, and 429 with `Retry-After` when rate limited. `text`
 * is bounded by the renderer (≤ 4,000 characters advisable: `slackLimits`).
 */
import type { ProviderLimits } from '../template/rendered.ts';
import type { NotifierFactory } from './types.ts';
import { classifySlackError } from './classify.ts';
import { assertFits, ProviderError, retryAfterFrom } from './errors.ts';
import { RESPONSE_CAPS } from './body.ts';

/** Slack's field limits (the renderer fits the message to them). */
export const slackLimits: ProviderLimits = {
  message: {
    max: 4_000,
    unit: 'utf16',
    source:
      'Slack chat.postMessage: text ≤ 4,000 characters advisable (cut at 40,000); docs/providers/slack.md',
  },
};

export const slack: NotifierFactory = (p, { http }) => {
  const bot = p.token !== undefined;
  if (bot && p.channel === undefined) {
    throw new Error(`Provider ${p.namespace}/${p.name}: a slack bot token needs spec.channel`);
  }
  return {
    async send(_ev, rendered, signal) {
      assertFits(rendered.message, slackLimits.message, 'the slack message', http.secretValues);
      const payload = {
        text: rendered.message,
        ...(p.channel !== undefined ? { channel: p.channel } : {}),
        ...(p.username !== undefined ? { username: p.username } : {}),
      };
      const res = await http.request(p.address, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json; charset=utf-8',
          ...(bot ? { Authorization: `Bearer ${p.token ?? ''}` } : {}),
        },
        body: JSON.stringify(payload),
        // Webhook mode answers "ok", unread; chat.postMessage's small JSON answer is read.
        responseBody: bot ? RESPONSE_CAPS.chatAnswer : 'discard',
        ...(signal !== undefined ? { signal } : {}),
      });
      if (!bot) return;
      let answer: { ok?: unknown; error?: unknown };
      try {
        answer = JSON.parse(res.text) as { ok?: unknown; error?: unknown };
      } catch {
        throw new ProviderError(
          'chat.postMessage answered with a body that is not JSON: check spec.address',
          {
            status: res.status,
            retryable: true,
            code: 'BAD_RESPONSE',
            secretValues: http.secretValues,
          },
        );
      }
      if (answer.ok === true) return;
      // Slack's error codes are short snake_case words; anything else is not shown (B09).
      const error =
        typeof answer.error === 'string' && /^[a-z0-9_.]{1,64}$/.test(answer.error)
          ? answer.error
          : 'unknown_error';
      const verdict = classifySlackError(error, retryAfterFrom(res.headers, Date.now()));
      throw new ProviderError(
        `chat.postMessage failed: ${error}${verdict.kind === 'auth' ? ' (check the token in the Provider Secret)' : error === 'channel_not_found' || error === 'not_in_channel' ? ' (check spec.channel and invite the bot)' : ''}`,
        {
          status: res.status,
          retryable: verdict.retry,
          code: `SLACK_${error.toUpperCase()}`,
          secretValues: http.secretValues,
          verdict,
        },
      );
    },
    close: () => http.close(),
  };
};
