/**
 * Redaction of secret values from any text that may reach logs, Events, status or errors.
 * Values shorter than 4 characters are not redacted (they would shred ordinary words);
 * Secrets that short are refused elsewhere as unusable credentials anyway.
 *
 * A secret is registered with its meaningful parts too (case B05): an endpoint that echoes
 * `token=leak-TOKEN-7777` from an `Authorization: Bearer leak-TOKEN-7777` header must not get the
 * token past redaction because the whole header value never appears.
 */
export const REDACTED = '[redacted]';

/** Parts shorter than this are not registered on their own (they would redact ordinary words). */
const MIN_PART_LENGTH = 6;

/** `user:password` and `password` of a base64 `user:password` (HTTP basic auth), if it is one. */
function basicParts(b64: string): string[] {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return [];
  const decoded = Buffer.from(b64, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0 || /[\p{Cc}\uFFFD]/u.test(decoded)) return [];
  const password = decoded.slice(colon + 1);
  return [decoded, ...(password.length >= 4 ? [password] : [])];
}

/**
 * The secret parts of a URL: its userinfo (`user:password`, the password alone), each query
 * value and, when long enough to be a credential (webhook URLs carry it there), its path.
 */
export function urlSecretParts(url: string): string[] {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return [];
  }
  const out: string[] = [];
  const user = decodeURIComponent(u.username);
  const password = decodeURIComponent(u.password);
  if (password.length >= 4) out.push(password, `${user}:${password}`);
  else if (user.length >= MIN_PART_LENGTH) out.push(user);
  for (const v of u.searchParams.values()) if (v.length >= MIN_PART_LENGTH) out.push(v);
  if (u.pathname.length > 8) out.push(u.pathname);
  return out;
}

/**
 * A secret value and its meaningful parts, to register for redaction: the value; the credential
 * after an authentication scheme (`Bearer x`, `token x`, `Basic x` — and for basic auth the
 * decoded `user:password` and the password); the values of `key=value` pairs (cookies, Digest
 * parameters, query strings); and the parts of any URL inside (userinfo, query values, path).
 */
export function secretParts(value: string): string[] {
  const out = new Set<string>();
  const add = (v: string, min = MIN_PART_LENGTH): void => {
    if (v.length >= min) out.add(v);
  };
  const v = value.trim();
  add(v, 4);
  const scheme = /^([A-Za-z][A-Za-z0-9_-]*)\s+(\S.*)$/.exec(v);
  const credential = scheme?.[2]?.trim();
  if (scheme !== null && credential !== undefined) {
    add(credential, 4);
    if (/^basic$/i.test(scheme[1] ?? '')) for (const p of basicParts(credential)) add(p, 4);
  }
  // Splits and index look-ups only (values are tenant-controlled: no backtracking regexes).
  for (const piece of v.split(/[\s"'<>;,&]+/)) {
    const eq = piece.indexOf('=');
    if (eq > 0) add(piece.slice(eq + 1));
    const sep = piece.indexOf('://');
    if (sep > 0) {
      // The URL starts where its scheme does: walk back over scheme characters.
      let start = sep;
      while (start > 0 && /[A-Za-z0-9+.-]/.test(piece.charAt(start - 1))) start--;
      for (const p of urlSecretParts(piece.slice(start))) add(p);
    }
  }
  return [...out];
}

/**
 * Replaces every occurrence of each value — raw, URL-encoded, base64, and JSON-escaped (with and
 * without `\/`) — with `[redacted]`.
 */
export function redact(text: string, secretValues: readonly string[]): string {
  return redactorFor(secretValues)(text);
}

/**
 * {@link redact} with the encoded forms of `secretValues` computed once, for redacting many texts
 * (e.g. every line of a change set) with the same values.
 */
export function redactorFor(secretValues: readonly string[]): (text: string) => string {
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
  const sorted = [...forms].sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const f of sorted) if (out.includes(f)) out = out.split(f).join(REDACTED);
    return out;
  };
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
