/**
 * What of an endpoint's error answer may be shown (case B09, docs/threat-model.md "Endpoints"):
 * error messages end up in the Alert's status, Kubernetes Events and logs, which more people can
 * read than the endpoint's answers were meant for. A Provider may point at anything the egress
 * policy allows — an internal service included — so its raw answer is never copied there. Only a
 * recognised error message is: a string field of a JSON error object in a shape the forges and
 * chat APIs document, bounded and on one line.
 *
 * Recognised shapes (first match wins): `{"message": "…"}` (GitHub, Gitea, GitLab, Azure DevOps),
 * `{"error": {"message": "…"}}` (Bitbucket Cloud), `{"errors": [{"message": "…"}]}` (Bitbucket
 * Data Center, GitHub validation errors), `{"error_description": "…"}` and `{"error": "…"}`
 * (OAuth errors, Slack). GitLab's `{"message": {"field": ["…"]}}` gives its first string. Anything
 * else — HTML, plain text, JSON without those fields, a message with control characters — is not
 * shown at all.
 */

import { boundText } from '../text.ts';
import { jsonObject } from './body.ts';

/** Longest message shown, in UTF-16 units (a longer one is cut with `…`). */
export const MAX_REFLECTED_LENGTH = 200;

function firstString(v: unknown, depth = 0): string | undefined {
  if (typeof v === 'string') return v;
  if (depth > 2) return undefined;
  if (Array.isArray(v)) {
    for (const x of v.slice(0, 8)) {
      const s = firstString(x, depth + 1);
      if (s !== undefined) return s;
    }
    return undefined;
  }
  if (v !== null && typeof v === 'object') {
    for (const x of Object.values(v as Record<string, unknown>).slice(0, 8)) {
      const s = firstString(x, depth + 1);
      if (s !== undefined) return s;
    }
  }
  return undefined;
}

function said(o: Record<string, unknown>): string | undefined {
  const message = o.message;
  if (typeof message === 'string') return message;
  if (message !== null && typeof message === 'object') return firstString(message);
  const error = o.error;
  if (error !== null && typeof error === 'object' && !Array.isArray(error)) {
    const m = (error as Record<string, unknown>).message;
    if (typeof m === 'string') return m;
  }
  const errors = o.errors;
  if (Array.isArray(errors)) {
    for (const e of errors.slice(0, 8)) {
      const m = e !== null && typeof e === 'object' ? (e as Record<string, unknown>).message : undefined;
      if (typeof m === 'string') return m;
    }
  }
  if (typeof o.error_description === 'string') return o.error_description;
  if (typeof error === 'string') return error;
  return undefined;
}

/**
 * The error message `body` carries in a recognised shape, on one line and at most
 * {@link MAX_REFLECTED_LENGTH} characters, or undefined. Not redacted: callers put it into a
 * `ProviderError`, whose message is redacted when made.
 */
export function recognisedMessage(body: string): string | undefined {
  const text = body.trim();
  if (!text.startsWith('{')) return undefined;
  const parsed = jsonObject(text);
  const m = parsed === undefined ? undefined : said(parsed)?.trim();
  // A message is text for people: one line after collapsing whitespace, no control characters.
  if (m === undefined || m === '') return undefined;
  const line = m.replace(/[\t\r\n ]+/g, ' ');
  if (/\p{Cc}/u.test(line)) return undefined;
  return boundText(line, MAX_REFLECTED_LENGTH, 'utf16');
}
