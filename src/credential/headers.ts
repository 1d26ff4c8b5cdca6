/**
 * Extra HTTP headers from a Provider Secret's `headers` key, checked by meaning (case B07,
 * docs/threat-model.md): a header the controller could never send, or one that would let a
 * tenant change what a request is rather than add a credential to it, makes the Provider
 * `Ready=False` with the header named — never a send that fails, or succeeds in a way nobody meant.
 *
 * Refused:
 * - names that are not RFC 9110 tokens (§5.1), values with characters outside RFC 9110's
 *   field-value (§5.5: visible ASCII, obs-text, space and tab inside; CR, LF, NUL never);
 * - names that describe the connection or the message framing, which HTTP clients own
 *   (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`, `Keep-Alive`, `Upgrade`, `TE`,
 *   `Trailer`, `Expect`, `Proxy-Connection`, and every `Proxy-*`: proxy credentials belong in
 *   spec.proxySecretRef);
 * - names the controller sets itself for receivers to rely on (`X-PKO-Event-Id`, `X-Signature`);
 * - the request headers that unlock cloud metadata services (`Metadata-Flavor`, `Metadata`,
 *   `X-aws-ec2-metadata-token*`, `X-Google-Metadata-Request`): no notification needs them;
 * - more than 32 headers, names over 256 characters, values over 8,192 characters.
 */

/** RFC 9110 §5.6.2 `token`. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** RFC 9110 §5.5 `field-value` (after trimming): VCHAR / obs-text, with SP and HTAB inside. */
const FIELD_VALUE = /^[\x21-\x7e\x80-\xff]([\x20-\x7e\x80-\xff\t]*[\x21-\x7e\x80-\xff])?$/;

export const MAX_HEADERS = 32;
export const MAX_HEADER_NAME_LENGTH = 256;
export const MAX_HEADER_VALUE_LENGTH = 8192;

const FORBIDDEN: ReadonlyMap<string, string> = new Map([
  ['host', 'the host comes from the Provider address'],
  ['content-length', 'the HTTP client computes the body length'],
  ['transfer-encoding', 'the HTTP client frames the body'],
  ['connection', 'the HTTP client manages connections'],
  ['keep-alive', 'the HTTP client manages connections'],
  ['upgrade', 'notifications are plain HTTP requests'],
  ['te', 'the HTTP client negotiates transfer codings'],
  ['trailer', 'requests carry no trailers'],
  ['expect', 'the HTTP client does not wait for 100-continue'],
  ['x-pko-event-id', 'the controller sets it (receivers deduplicate on it)'],
  ['x-signature', 'the controller sets it (generic-hmac signs the body with the Secret token)'],
  ['metadata-flavor', 'it unlocks cloud metadata services'],
  ['metadata', 'it unlocks cloud metadata services'],
  ['x-google-metadata-request', 'it unlocks cloud metadata services'],
]);

function forbiddenWhy(lower: string): string | undefined {
  const why = FORBIDDEN.get(lower);
  if (why !== undefined) return why;
  if (lower.startsWith('proxy-')) return 'proxy settings and credentials belong in spec.proxySecretRef';
  if (lower.startsWith('x-aws-ec2-metadata-token')) return 'it unlocks cloud metadata services';
  return undefined;
}

export type HeadersResult = { ok: true; headers: Record<string, string> } | { ok: false; message: string };

/**
 * Checks the parsed `headers` map of a Provider Secret. `where` names it in messages
 * (`key 'headers' of Secret 'ns/name'`). Values are never quoted in messages (they are secrets);
 * names are. Values are trimmed of surrounding whitespace, as HTTP does.
 */
export function checkHeaders(parsed: Record<string, unknown>, where: string): HeadersResult {
  const entries = Object.entries(parsed);
  if (entries.length > MAX_HEADERS) {
    return {
      ok: false,
      message: `${where} has ${String(entries.length)} headers, over the limit of ${String(MAX_HEADERS)}: keep only the ones the endpoint needs`,
    };
  }
  const headers: Record<string, string> = {};
  const seen = new Set<string>();
  for (const [name, raw] of entries) {
    if (name.length > MAX_HEADER_NAME_LENGTH || !TOKEN.test(name)) {
      const shown = name.length > 64 ? `${name.slice(0, 64)}…` : name;
      return {
        ok: false,
        message: `${where}: ${JSON.stringify(shown)} is not a valid HTTP header name (RFC 9110 token: letters, digits and !#$%&'*+.^_\`|~- only, at most ${String(MAX_HEADER_NAME_LENGTH)} characters)`,
      };
    }
    const lower = name.toLowerCase();
    const why = forbiddenWhy(lower);
    if (why !== undefined) {
      return { ok: false, message: `${where}: header '${name}' may not be set (${why}): remove it` };
    }
    if (seen.has(lower)) {
      return {
        ok: false,
        message: `${where}: header '${name}' is given twice (names are case-insensitive): keep one`,
      };
    }
    seen.add(lower);
    const value =
      typeof raw === 'string'
        ? raw
        : typeof raw === 'number' || typeof raw === 'boolean'
          ? String(raw)
          : undefined;
    if (value === undefined) {
      return { ok: false, message: `${where}: header '${name}' must have a string value` };
    }
    const v = value.replace(/^[ \t]+|[ \t]+$/g, '');
    if (v.length > MAX_HEADER_VALUE_LENGTH) {
      return {
        ok: false,
        message: `${where}: the value of header '${name}' is ${String(v.length)} characters, over the limit of ${String(MAX_HEADER_VALUE_LENGTH)}`,
      };
    }
    if (v === '' || !FIELD_VALUE.test(v)) {
      const what = /[\r\n]/.test(v)
        ? 'contains a line break (CR or LF)'
        : v === ''
          ? 'is empty'
          : /[^\u0000-\u00ff]/.test(v) // eslint-disable-line no-control-regex -- the range is the point
            ? 'contains a character outside ISO-8859-1'
            : 'contains a control character';
      return {
        ok: false,
        message: `${where}: the value of header '${name}' ${what}, which HTTP forbids (RFC 9110 §5.5): write it on one line without control characters`,
      };
    }
    headers[name] = v;
  }
  return { ok: true, headers };
}
