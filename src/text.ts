/**
 * Text utilities shared by every layer: measuring a string in the unit a limit is counted in,
 * cutting it without splitting a surrogate pair (prefix, suffix, or head + tail), removing
 * terminal escape sequences, and the hygiene applied to messages taken from PKO status (which
 * embed the Pulumi CLI's colour codes, carriage-return progress lines and megabytes of output:
 * see docs/events.md).
 *
 * Cuts always fall between code points; grapheme clusters (ZWJ emoji, combining marks) may be
 * split. Pure functions, no imports from the rest of the controller.
 */
import { stripVTControlCharacters } from 'node:util';

/** How a length is counted: Unicode code points, UTF-16 code units (JS `length`) or UTF-8 bytes. */
export type LengthUnit = 'codePoints' | 'utf16' | 'utf8';

/** A bound on a text field, with the unit it is counted in and where the number comes from. */
export interface FieldLimit {
  /** Largest accepted length, in `unit`. */
  max: number;
  unit: LengthUnit;
  /** Where the number comes from (documentation, observed API error, or "chosen"). */
  source: string;
}

const ELLIPSIS = '…';

function isHigh(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}
function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Width of the code point starting at UTF-16 index `i` (`n` units long) in `unit`. */
function width(cp: number, n: number, unit: LengthUnit): number {
  if (unit === 'codePoints') return 1;
  if (unit === 'utf16') return n;
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/** Length of `s` in `unit` (a lone surrogate counts as one code point, 3 UTF-8 bytes). */
export function measure(s: string, unit: LengthUnit): number {
  switch (unit) {
    case 'utf16':
      return s.length;
    case 'utf8':
      return Buffer.byteLength(s, 'utf8');
    case 'codePoints': {
      let n = 0;
      for (let i = 0; i < s.length; i++) {
        if (isHigh(s.charCodeAt(i)) && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) i++;
        n++;
      }
      return n;
    }
  }
}

/** Whether `s` fits `limit` (true when there is no limit). */
export function fits(s: string, limit: FieldLimit | undefined): boolean {
  return limit === undefined || measure(s, limit.unit) <= limit.max;
}

/** The longest prefix of `s` made of whole code points whose length in `unit` is at most `max`. */
export function prefixTo(s: string, max: number, unit: LengthUnit = 'codePoints'): string {
  if (max <= 0) return '';
  // Fast path: n UTF-16 units are at most n code points and at most n UTF-16 units.
  if (unit !== 'utf8' && s.length <= max) return s;
  let used = 0;
  let i = 0;
  while (i < s.length) {
    const cp = s.codePointAt(i) ?? 0;
    const n = cp > 0xffff ? 2 : 1;
    const w = width(cp, n, unit);
    if (used + w > max) break;
    used += w;
    i += n;
  }
  return s.slice(0, i);
}

/**
 * `s` bounded to `max` in `unit` (default code points). When it has to cut, the result is the
 * longest prefix of whole code points followed by `…`, ellipsis included within `max`.
 * `max` ≤ 0 yields ''.
 */
export function boundText(s: string, max: number, unit: LengthUnit = 'codePoints'): string {
  if (max <= 0) return '';
  if ((unit !== 'utf8' && s.length <= max) || measure(s, unit) <= max) return s;
  const room = max - measure(ELLIPSIS, unit);
  return room < 0 ? '' : `${prefixTo(s, room, unit)}${ELLIPSIS}`;
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
    if (isLow(s.charCodeAt(i)) && i > 0 && isHigh(s.charCodeAt(i - 1))) i--;
    const cp = s.codePointAt(i) ?? 0;
    const w = width(cp, start - i, unit);
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

/** The line inserted by {@link headAndTail} where it cut. */
export const CUT_LINE = '\n[… truncated …]\n';

/**
 * `s` fitted to `limit` keeping both ends: unchanged when it fits; else its first line (at most a
 * quarter of the limit), {@link CUT_LINE}, and as much of the END of the rest as fits (CLI
 * errors are printed last). A single line is cut with {@link boundText}.
 */
export function headAndTail(s: string, limit: FieldLimit | undefined): string {
  if (limit === undefined || measure(s, limit.unit) <= limit.max) return s;
  const { max, unit } = limit;
  const nl = s.indexOf('\n');
  const first = nl < 0 ? s : s.slice(0, nl);
  const rest = nl < 0 ? '' : s.slice(nl + 1);
  if (rest === '') return boundText(s, max, unit);
  const head = boundText(first, Math.floor(max / 4), unit);
  const room = max - measure(head, unit) - measure(CUT_LINE, unit);
  if (room <= 0) return boundText(s, max, unit);
  return `${head}${CUT_LINE}${tailTo(rest, room, unit)}`;
}

/**
 * OSC sequences (`ESC ]` … BEL | `ESC \`, and 8-bit `0x9D` … BEL | `0x9C`), terminated or not: an
 * unterminated one runs to the end of the line. Removed before `util.stripVTControlCharacters`,
 * whose pattern would otherwise eat only the first characters of an unterminated title.
 */
const OSC =
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  /\u001b\][^\u0007\u001b\n]*(?:\u0007|\u001b\\)?|\u009d[^\u0007\u009c\n]*(?:\u0007|\u009c)?/g;

/** Two-byte escapes `util.stripVTControlCharacters` leaves (`ESC =`, `ESC 7`, a lone ST `ESC \`). */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const LEFTOVER_ESCAPE = /\u001b[ -/]*[0-~]/g;

/**
 * Removes ANSI/VT escape sequences (CSI such as colours and cursor moves, OSC such as hyperlinks
 * and titles, charset designations): Node's `util.stripVTControlCharacters`, plus the OSC and
 * two-byte forms it does not cover (see above).
 */
export function stripAnsi(s: string): string {
  // eslint-disable-next-line no-control-regex -- a quick test for ESC, CSI (0x9B) and OSC (0x9D)
  if (!/[\u001b\u009b\u009d]/.test(s)) return s;
  return stripVTControlCharacters(s.replace(OSC, '')).replace(LEFTOVER_ESCAPE, '');
}

/** C0/C1 controls other than TAB and LF, left over after escape sequences are removed. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const STRAY_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Prepares a status message for humans: strips escape sequences, turns CRLF and lone CR into LF,
 * removes other control characters (TAB and LF stay), trims trailing whitespace, and bounds the
 * result to `max` code points (default 8192) with {@link boundText}.
 */
export function cleanMessage(s: string, max = 8192): string {
  const text = stripAnsi(s).replace(/\r\n?/g, '\n').replace(STRAY_CONTROL, '').trimEnd();
  return boundText(text, max);
}

// eslint-disable-next-line no-control-regex -- removing control characters is the point
const CONTROL_OR_SPACE = /[\u0000-\u001f\u007f-\u009f\s]+/g;

/** Whitespace runs (newlines included) → one space, escape sequences and controls removed, trimmed. */
export function singleLine(s: string): string {
  return stripAnsi(s).replace(CONTROL_OR_SPACE, ' ').trim();
}
