/**
 * Redaction of secret values from any text that may reach logs, Events, status or errors.
 * Values shorter than 4 characters are not redacted (they would shred ordinary words);
 * Secrets that short are refused elsewhere as unusable credentials anyway.
 */
export const REDACTED = '[redacted]';

/**
 * Replaces every occurrence of each value — raw, URL-encoded, base64, and JSON-escaped (with and
 * without `\/`) — with `[redacted]`.
 */
export function redact(text: string, secretValues: readonly string[]): string {
  let out = text;
  const forms = new Set<string>();
  for (const v of secretValues) {
    if (v.length < 4) continue;
    forms.add(v);
    forms.add(encodeURIComponent(v));
    forms.add(Buffer.from(v, 'utf8').toString('base64'));
    // As it appears inside a JSON string: escaped quotes/newlines (a PEM key), and `\/` (many
    // APIs escape slashes, e.g. an echoed webhook URL).
    const json = JSON.stringify(v).slice(1, -1);
    forms.add(json);
    forms.add(json.replaceAll('/', '\\/'));
  }
  // Longest first, so a value containing another is replaced whole.
  for (const f of [...forms].sort((a, b) => b.length - a.length)) {
    out = out.split(f).join(REDACTED);
  }
  return out;
}

/**
 * Every secret value the controller currently holds, by owner (`namespace/provider`). One
 * instance per process: the logger, the dispatcher and the status writers redact with it, so a
 * response that echoes another Provider's credentials is caught too.
 */
export class Redactor {
  readonly #byOwner = new Map<string, readonly string[]>();
  #all: string[] = [];

  set(owner: string, values: readonly string[]): void {
    this.#byOwner.set(owner, values);
    this.#rebuild();
  }

  delete(owner: string): void {
    if (this.#byOwner.delete(owner)) this.#rebuild();
  }

  #rebuild(): void {
    this.#all = [...new Set([...this.#byOwner.values()].flat())];
  }

  /** `text` with every known secret value (and its encoded forms) replaced by `[redacted]`. */
  redact(text: string): string {
    return this.#all.length === 0 ? text : redact(text, this.#all);
  }
}
