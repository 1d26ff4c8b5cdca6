/**
 * Redaction of secret values from any text that may reach logs, Events, status or errors.
 * Values shorter than 4 characters are not redacted (they would shred ordinary words);
 * Secrets that short are refused elsewhere as unusable credentials anyway.
 */
export const REDACTED = '[redacted]';

/** Replaces every occurrence of each value (and its URL-encoded and base64 forms) with `[redacted]`. */
export function redact(text: string, secretValues: readonly string[]): string {
  let out = text;
  const forms = new Set<string>();
  for (const v of secretValues) {
    if (v.length < 4) continue;
    forms.add(v);
    forms.add(encodeURIComponent(v));
    forms.add(Buffer.from(v, 'utf8').toString('base64'));
  }
  // Longest first, so a value containing another is replaced whole.
  for (const f of [...forms].sort((a, b) => b.length - a.length)) {
    out = out.split(f).join(REDACTED);
  }
  return out;
}
