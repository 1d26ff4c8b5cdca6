/**
 * Fitting rendered text into provider limits (src/notifier/limits.ts): cut with an ellipsis,
 * keep the END of CLI output (errors are printed last), and shorten commit status contexts
 * without collisions.
 */
import { createHash } from 'node:crypto';
import { measure, type FieldLimit, type LengthUnit } from '../notifier/limits.ts';
import { boundText, stripAnsi } from '../source/text.ts';

/** Code point count of `s`. */
function codePointCount(s: string): number {
  return measure(s, 'codePoints');
}

/**
 * The longest prefix of `s` (whole code points) whose length in `unit` is at most `max`,
 * ending in `…` when anything was cut (the ellipsis counts). `max` ≤ 0 yields ''.
 */
export function boundTo(s: string, max: number, unit: LengthUnit): string {
  if (max <= 0) return '';
  if (measure(s, unit) <= max) return s;
  let k = Math.min(max, codePointCount(s));
  for (;;) {
    const cut = boundText(s, k);
    const over = measure(cut, unit) - max;
    if (over <= 0 || k <= 1) return over <= 0 ? cut : '';
    k -= Math.max(1, Math.ceil(over / 4));
  }
}

/** The longest prefix of `s` (whole code points) that fits `max` in `unit`, without ellipsis. */
export function prefixTo(s: string, max: number, unit: LengthUnit): string {
  if (max <= 0) return '';
  if (measure(s, unit) <= max) return s;
  let end = 0; // UTF-16 index
  let used = 0;
  for (const ch of s) {
    const w = measure(ch, unit);
    if (used + w > max) break;
    used += w;
    end += ch.length;
  }
  return s.slice(0, end);
}

/**
 * The longest suffix of `s` (whole code points) that fits `max` in `unit`. When the suffix starts
 * mid-line and a line break follows within its first 10 % (at most 400 units), it starts after
 * that line break instead, so the kept output begins with a whole line.
 */
export function tailTo(s: string, max: number, unit: LengthUnit): string {
  if (max <= 0) return '';
  if (measure(s, unit) <= max) return s;
  let start = s.length;
  let used = 0;
  while (start > 0) {
    let i = start - 1;
    const c = s.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff && i > 0) {
      const h = s.charCodeAt(i - 1);
      if (h >= 0xd800 && h <= 0xdbff) i--;
    }
    const w = measure(s.slice(i, start), unit);
    if (used + w > max) break;
    used += w;
    start = i;
  }
  const tail = s.slice(start);
  if (start > 0 && s[start - 1] !== '\n') {
    const nl = tail.indexOf('\n');
    if (nl >= 0 && nl < Math.min(400, Math.ceil(tail.length / 10))) return tail.slice(nl + 1);
  }
  return tail;
}

// eslint-disable-next-line no-control-regex -- removing control characters is the point
const CONTROL_OR_SPACE = /[\u0000-\u001f\u007f-\u009f\s]+/g;

/** Whitespace runs (newlines included) → one space, escape sequences and controls removed, trimmed. */
export function singleLine(s: string): string {
  return stripAnsi(s).replace(CONTROL_OR_SPACE, ' ').trim();
}

/**
 * A commit status context that fits `limit`: unchanged when it fits, else a readable prefix plus
 * `~` and the first 10 hex characters of SHA-256 over the whole value (so two long contexts that
 * share a prefix stay distinct — Bitbucket keys are ≤ 40 characters).
 */
export function fitContext(s: string, limit: FieldLimit | undefined): string {
  if (limit === undefined || measure(s, limit.unit) <= limit.max) return s;
  const hash = createHash('sha256').update(s).digest('hex').slice(0, 10);
  const suffix = `~${hash}`;
  const room = limit.max - measure(suffix, limit.unit);
  return `${prefixTo(s, room, limit.unit).replace(/[\s/:~._-]+$/, '')}${suffix}`;
}

/**
 * A chat message that fits `limit`: unchanged when it fits; else its first line (at most a quarter
 * of the limit), a `[… truncated …]` line, and as much of the END of the rest as fits.
 */
export function fitMessage(s: string, limit: FieldLimit | undefined): string {
  if (limit === undefined || measure(s, limit.unit) <= limit.max) return s;
  const { max, unit } = limit;
  const nl = s.indexOf('\n');
  const first = nl < 0 ? s : s.slice(0, nl);
  const rest = nl < 0 ? '' : s.slice(nl + 1);
  const gap = '\n[… truncated …]\n';
  if (rest === '') return boundTo(s, max, unit);
  const head = boundTo(first, Math.floor(max / 4), unit);
  const room = max - measure(head, unit) - measure(gap, unit);
  if (room <= 0) return boundTo(s, max, unit);
  return `${head}${gap}${tailTo(rest, room, unit)}`;
}
