/**
 * Text hygiene for messages taken from PKO status. PKO embeds the Pulumi CLI's stdout/stderr in
 * `Update.status.message` and `Stack.status.lastUpdate.message` (shared/facts/pko.md, "What PKO
 * does NOT give"): colour codes, carriage-return progress lines and megabytes of output.
 */

/**
 * ECMA-48 escape sequences, in this order: OSC (`ESC ]` … BEL | `ESC \`; an unterminated one runs
 * to the end of the line), 8-bit OSC (`0x9D` … BEL | `0x9C`), CSI (`ESC [` or `0x9B`, parameter
 * bytes, intermediate bytes, final byte), and the remaining two-or-more-byte escapes (`ESC (B`,
 * `ESC =`, `ESC 7`, a lone ST `ESC \`).
 */
const ANSI_SEQUENCE =
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  /\u001b\][^\u0007\u001b\n]*(?:\u0007|\u001b\\)?|\u009d[^\u0007\u009c\n]*(?:\u0007|\u009c)?|(?:\u001b\[|\u009b)[0-?]*[ -/]*[@-~]|\u001b[ -/]*[0-~]/g;

/** C0/C1 controls other than TAB and LF, left over after escape sequences are removed. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const STRAY_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** Removes ANSI/VT escape sequences (CSI such as colours, OSC such as hyperlinks and titles). */
export function stripAnsi(s: string): string {
  return s.replace(ANSI_SEQUENCE, '');
}

/**
 * Bounds `s` to at most `maxCodePoints` Unicode code points. When it has to cut, the result ends
 * with '…' and, ellipsis included, is at most `maxCodePoints` code points long. Cuts between code
 * points, so a surrogate pair is never split (grapheme clusters such as ZWJ emoji may be).
 * `maxCodePoints` ≤ 0 yields ''.
 */
export function boundText(s: string, maxCodePoints: number): string {
  if (maxCodePoints <= 0) return '';
  // Fast path: a string of n UTF-16 units has at most n code points.
  if (s.length <= maxCodePoints) return s;
  let points = 0;
  let cut = -1; // UTF-16 index after the (maxCodePoints - 1)-th code point
  for (let i = 0; i < s.length;) {
    if (points === maxCodePoints - 1) cut = i;
    if (points === maxCodePoints) return `${s.slice(0, cut)}…`;
    const cp = s.codePointAt(i) ?? 0;
    i += cp > 0xffff ? 2 : 1;
    points++;
  }
  return s; // exactly maxCodePoints code points: no cut needed
}

/**
 * Prepares a status message for humans: strips escape sequences, turns CRLF and lone CR into LF,
 * removes other control characters (TAB and LF stay), trims trailing whitespace, and bounds the
 * result to `max` code points (default 8192) with {@link boundText}.
 */
export function cleanMessage(s: string, max = 8192): string {
  const text = stripAnsi(s).replace(/\r\n?/g, '\n').replace(STRAY_CONTROL, '').trimEnd();
  return boundText(text, max);
}
