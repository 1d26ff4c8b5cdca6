/**
 * Fitting a chat payload to its service's size limit when the text grows on the way into it
 * (escapes, JSON, `<br>` for line breaks): the renderer bounds the text, not the payload.
 */
import { keepEnds, measure } from '../text.ts';

/**
 * `build(text)` for the longest middle-cut of `text` (its first lines and its end kept, the cut
 * stated: src/text.ts `keepEnds`) whose result is at most `maxBytes` UTF-8 bytes. Tries at most
 * 12 proportional cuts, then a 1,000-byte text; returns the last build (the caller checks it).
 */
export function fitBody(text: string, maxBytes: number, build: (text: string) => string): string {
  let t = text;
  for (let i = 0; i < 12; i++) {
    const body = build(t);
    const size = Buffer.byteLength(body, 'utf8');
    if (size <= maxBytes) return body;
    // Shrink in proportion to the overflow, with a margin for the cut marker.
    const bytes = measure(t, 'utf8');
    const max = Math.max(0, Math.floor((bytes * maxBytes) / size) - 256);
    t = keepEnds(t, { max, unit: 'utf8', source: 'the service payload limit' }).text;
  }
  return build(keepEnds(t, { max: 1_000, unit: 'utf8', source: 'the service payload limit' }).text);
}
