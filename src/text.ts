/**
 * Text utilities shared by every layer: measuring a string in the unit a limit is counted in,
 * cutting it without splitting a surrogate pair (prefix, suffix, or head + tail), removing
 * terminal escape sequences, and the hygiene applied to messages taken from PKO status (which
 * embed the Pulumi CLI's colour codes, carriage-return progress lines and megabytes of output:
 * see docs/events.md).
 *
 * Cuts always fall between code points; grapheme clusters (ZWJ emoji, combining marks) may be
 * split. Pure functions, no imports from the rest of the controller; and {@link readBounded}, the
 * bounded read of a response body as text (the notifier's and the Kubernetes client's), and
 * {@link re2}, the linear-time regular expression engine, and {@link yaml}, the YAML library, each
 * loaded when first used.
 */
import { createRequire } from 'node:module';
import { stripVTControlCharacters } from 'node:util';
import type { RE2JS as RE2JSClass } from 're2js';

/** CommonJS `require` for the libraries loaded on first use below. */
const load = createRequire(import.meta.url);

/** A compiled re2js pattern (linear-time matching). */
export type RE2JS = RE2JSClass;
let re2js: typeof RE2JSClass | undefined;
/**
 * re2js's `RE2JS` class, loaded (its CommonJS build, synchronously) the first time it is asked
 * for: a controller with no Alert compiles no pattern, and loading it costs ~1.3 MiB of resident
 * memory at idle (issue 21, docs/benchmarks.md ninth pass). Every pattern of the controller goes
 * through here, so one copy of the library is loaded.
 */
export function re2(): typeof RE2JSClass {
  re2js ??= (load('re2js') as typeof import('re2js')).RE2JS;
  return re2js;
}

type YamlLibrary = typeof import('yaml');
let yamlLib: YamlLibrary | undefined;
/**
 * The `yaml` package (`parse`, `parseAllDocuments`, …), loaded (its CommonJS build, synchronously:
 * callers stay plain functions) the first time it is asked for. In the Deployment the controller
 * reads no kubeconfig file (in-cluster configuration) and parses YAML only for a Provider
 * Secret's `headers`, or CRD files in development; loaded at start it cost ~2 MiB of the idle
 * controller's resident memory (`npm run bench:idle`, 3 runs each: median 81.9 → 79.9 MiB;
 * docs/benchmarks.md, issue 21).
 */
export function yaml(): YamlLibrary {
  yamlLib ??= load('yaml') as YamlLibrary;
  return yamlLib;
}

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
  const tail = suffixTo(s, max, unit);
  const start = s.length - tail.length;
  if (start > 0 && s[start - 1] !== '\n') {
    const nl = tail.indexOf('\n');
    if (nl >= 0 && nl < Math.min(400, Math.ceil(tail.length / 10))) return tail.slice(nl + 1);
  }
  return tail;
}

/** `n` with thousands separators (`21,808`): how counts read in cut lines and notes. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** Leading lines {@link headAndTail} keeps of a multi-line text (the summary and the first of the output). */
const HEAD_LINES = 3;

/** The line {@link headAndTail} puts where it cut a multi-line text: says how much went. */
export function cutLine(cut: number): string {
  return `\n[… ${formatCount(cut)} characters cut …]\n`;
}

/** The marker {@link headAndTail} puts where it cut a single line. */
function cutInline(cut: number): string {
  return ` [… ${formatCount(cut)} characters cut …] `;
}

/**
 * `s` fitted to `limit` keeping BOTH ends — the summary at the start and the error the Pulumi CLI
 * prints last — and saying what went: unchanged when it fits; else
 * - multi-line: its first lines (up to 3, within a quarter of the limit), a line
 *   `[… N characters cut …]` (N in code points), and as much of the END of the rest as fits
 *   (from a line start when one is close: {@link tailTo});
 * - one line: a quarter of the limit from its start, ` [… N characters cut …] `, the rest from
 *   its end.
 * The result never exceeds `limit.max` in `limit.unit`; when even the marker does not fit
 * (`max` below ~40) it falls back to {@link boundText}.
 */
export function headAndTail(s: string, limit: FieldLimit | undefined): string {
  return keepEnds(s, limit).text;
}

/** {@link headAndTail}, also returning how many code points were cut (0 when `s` fits). */
export function keepEnds(s: string, limit: FieldLimit | undefined): { text: string; cut: number } {
  if (limit === undefined || measure(s, limit.unit) <= limit.max) return { text: s, cut: 0 };
  const { max, unit } = limit;
  const total = measure(s, 'codePoints');
  // The marker's width with the largest count it can show (the count only shrinks as we keep more).
  const nl = s.indexOf('\n');
  const multi = nl >= 0 && nl < s.length - 1;
  const marker = multi ? cutLine(total) : cutInline(total);
  const room = max - measure(marker, unit);
  if (room < 8) {
    const text = boundText(s, max, unit);
    return { text, cut: total - measure(text, 'codePoints') + 1 };
  }
  let head: string;
  let rest: string;
  if (multi) {
    // The first line, and up to HEAD_LINES in all while they fit a quarter of the room.
    let end = nl;
    for (let n = 1; n < HEAD_LINES; n++) {
      const next = s.indexOf('\n', end + 1);
      if (next < 0 || measure(s.slice(0, next), unit) > Math.floor(room / 4)) break;
      end = next;
    }
    head = prefixTo(s.slice(0, end), Math.floor(room / 4), unit);
    rest = s.slice(end + 1);
  } else {
    head = prefixTo(s, Math.floor(room / 4), unit);
    rest = s.slice(head.length);
  }
  const tail = multi
    ? tailTo(rest, room - measure(head, unit), unit)
    : suffixTo(rest, room - measure(head, unit), unit);
  const cut = total - measure(head, 'codePoints') - measure(tail, 'codePoints');
  return { text: `${head}${multi ? cutLine(cut) : cutInline(cut)}${tail}`, cut };
}

/** The longest suffix of `s` made of whole code points whose length in `unit` is at most `max`. */
export function suffixTo(s: string, max: number, unit: LengthUnit = 'codePoints'): string {
  if (max <= 0) return '';
  if (measure(s, unit) <= max) return s;
  let start = s.length;
  let used = 0;
  while (start > 0) {
    let i = start - 1;
    if (isLow(s.charCodeAt(i)) && i > 0 && isHigh(s.charCodeAt(i - 1))) i--;
    const w = width(s.codePointAt(i) ?? 0, start - i, unit);
    if (used + w > max) break;
    used += w;
    start = i;
  }
  return s.slice(start);
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

/** Default bound of a message taken from PKO status, in code points (docs/events.md). */
export const MESSAGE_MAX = 8192;

/**
 * Prepares a status message for humans: strips escape sequences, turns CRLF and lone CR into LF,
 * removes other control characters (TAB and LF stay), trims trailing whitespace, and bounds the
 * result to `max` code points (default {@link MESSAGE_MAX}) with {@link headAndTail}: the first
 * lines and the END are kept (the Pulumi CLI prints the error last), with a line saying how many
 * characters were cut.
 */
export function cleanMessage(s: string, max = MESSAGE_MAX): string {
  const text = stripAnsi(s).replace(/\r\n?/g, '\n').replace(STRAY_CONTROL, '').trimEnd();
  return headAndTail(text, { max, unit: 'codePoints', source: 'chosen: docs/events.md' });
}

// eslint-disable-next-line no-control-regex -- removing control characters is the point
const CONTROL_OR_SPACE = /[\u0000-\u001f\u007f-\u009f\s]+/g;

/** Whitespace runs (newlines included) → one space, escape sequences and controls removed, trimmed. */
export function singleLine(s: string): string {
  return stripAnsi(s).replace(CONTROL_OR_SPACE, ' ').trim();
}

/** A line that only labels a block (`stderr:`, `Outputs:`, `Resources:`): says nothing by itself. */
const LABEL_ONLY = /^[\p{L}\p{N} _-]{1,40}:$/u;
/** A line carrying an error, as the Pulumi CLI and PKO print them (`error: …`, `… running error: …`). */
const ERROR_LINE = /(?:^|[\s:])error:/i;

/**
 * Where the Pulumi CLI / PKO start a block of errors: `Diagnostics:` and `stderr:` (PKO v1 and
 * v2). PKO v2 writes the block's first line on the header line itself (`stderr: error: …`,
 * /work/shared/pko-traces/v2.9.0-real), so `stderr:` may be followed by text; `Diagnostics:` not.
 */
const ERROR_SECTION = /^(?:Diagnostics:$|stderr:(?:$|\s))/;
/**
 * A header that starts a section of the CLI output or of PKO's message, at the start of a line
 * (the CLI indents what is inside a section): it ends the block before it.
 */
const SECTION_HEADER =
  /^(?:Diagnostics|Outputs|Resources|Duration|Policies|Policy Violations|stdout|stderr|code):(?:$|\s)/;

/**
 * The line of a CLI output that says what failed (the built-in commit status description shows
 * it): the first error line of the last `Diagnostics:` or `stderr:` block that has one (the cause,
 * printed before its consequences such as `Error registering output`; a block ends at the next
 * section header at the start of a line, `Outputs:`, `Resources:`, …), else the last line with
 * `error:`, else the last non-blank line that is not a bare label such as `stderr:` (PKO v1 ends
 * every failure with an empty `stderr:` block, case N19). Trimmed; null when no line is left.
 */
export function meaningfulLine(output: string): string | null {
  const raw = output.split('\n');
  const lines = raw.map((l) => l.trim());
  let end = lines.length;
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = raw[i] ?? '';
    if (!SECTION_HEADER.test(line)) continue;
    // The block: from its header (which may carry its first line) to the next header.
    if (ERROR_SECTION.test(line)) {
      const cause = lines.slice(i, end).find((l) => ERROR_LINE.test(l));
      if (cause !== undefined) return cause;
    }
    end = i;
  }
  const error = lines.findLast((l) => ERROR_LINE.test(l));
  if (error !== undefined) return error;
  return lines.findLast((l) => l !== '' && !LABEL_ONLY.test(l)) ?? null;
}

export interface BoundedText {
  /** The body decoded as UTF-8 (the first `max` bytes when `truncated`). */
  text: string;
  /** Bytes read. */
  bytes: number;
  /** The body had more than `max` bytes; the rest was not read. */
  truncated: boolean;
}

/**
 * Reads at most `max` bytes of `body` as UTF-8; the rest is cancelled unread (a response body:
 * src/notifier/body.ts, src/kube/client.ts). `body` is a web `ReadableStream` (fetch) or a Node
 * `Readable` (undici's `request`): stopping early cancels the one and destroys the other, which
 * undici answers by closing the connection.
 */
export async function readBounded(body: AsyncIterable<Uint8Array> | null, max: number): Promise<BoundedText> {
  if (body === null) return { text: '', bytes: 0, truncated: false };
  const decoder = new TextDecoder();
  let text = '';
  let seen = 0;
  for await (const value of body) {
    if (seen + value.byteLength > max) {
      text += decoder.decode(value.subarray(0, max - seen), { stream: true });
      seen = max;
      // Leaving the loop cancels (web stream) or destroys (Node stream) the rest of the body.
      return { text: text + decoder.decode(), bytes: seen, truncated: true };
    }
    seen += value.byteLength;
    text += decoder.decode(value, { stream: true });
  }
  return { text: text + decoder.decode(), bytes: seen, truncated: false };
}
