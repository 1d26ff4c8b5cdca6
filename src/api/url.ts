/**
 * What a valid URL is, once for the API server and the controller (one truth for validity): the
 * patterns below are the CRDs' `pattern`s (crds/, checked equal by test/api/crd-enums.test.ts), and
 * the CRDs' CEL rules add what a pattern cannot say (port range, IPv6 literals — IPv4-mapped ones
 * refused, as CEL's isIP() does — and `xn--` labels).
 * The controller's parsers ({@link isHttpURL}, {@link isSshURL}) apply the same pattern, then
 * WHATWG's URL parser (what undici sends with) — and a property test (test/api/
 * validity.int.test.ts) runs generated values through both and requires the same verdict.
 *
 * Hosts: DNS names of ASCII labels whose last label starts with a letter (a numeric last label
 * makes WHATWG read an IPv4 address), dotted-quad IPv4, or a bracketed IPv6 literal. Not
 * accepted: internationalised names (`xn--` labels: WHATWG refuses invalid punycode), userinfo
 * (credentials never go in a URL field), `_` and other characters DNS does not allow.
 */

const LABEL = '[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?';
const LAST_LABEL = '[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?';
const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])';
const HOST = `((${LABEL}\\.)*${LAST_LABEL}\\.?|${OCTET}(\\.${OCTET}){3}|\\[[0-9A-Fa-f:.]+\\])`;
/** 0–65535, leading zeros allowed up to 4 digits (WHATWG reads `:00443` as 443, this refuses it). */
const PORT = '(:([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?';
/** Not whitespace, spelled out: RE2's `\\s` (the API server) and JavaScript's differ beyond ASCII. */
const NOT_SPACE = '[^\\t\\n\\f\\r ]';

/**
 * An absolute http(s) URL: scheme, host, optional port, then path, query or fragment without
 * whitespace. Schemes are case-insensitive (RFC 3986 §3.1: `HTTPS://GitHub.COM/…` is a valid
 * URL, and WHATWG and src/forge/url.ts read it so), spelled out as classes because the pattern
 * also runs in the API server (RE2), where JavaScript's `i` flag does not exist.
 */
export const HTTP_URL_PATTERN = `^[Hh][Tt][Tt][Pp][Ss]?://${HOST}${PORT}([/?#]${NOT_SPACE}*)?$`;

/** A git remote over ssh: `ssh://[user@]host[:port]/path` or scp-like `user@host:path`. */
export const SSH_URL_PATTERN = `^([Ss][Ss][Hh]://([-A-Za-z0-9._~]+@)?${HOST}${PORT}/${NOT_SPACE}+|[-A-Za-z0-9._]+@${HOST}:[^\\t\\n\\f\\r /]${NOT_SPACE}*)$`;

const HTTP_URL = new RegExp(HTTP_URL_PATTERN);
const SSH_URL = new RegExp(SSH_URL_PATTERN);

/** The host and port of a URL matched by one of the patterns (`[v6]` keeps its brackets). */
function authority(s: string): { host: string; port: string | undefined } {
  const rest = s.includes('://') ? s.slice(s.indexOf('://') + 3) : s;
  let auth = rest.split(/[/?#]/)[0] ?? '';
  if (!s.includes('://')) auth = auth.split(':')[0] ?? ''; // scp-like: host then ':' and the path
  auth = auth.includes('@') ? auth.slice(auth.lastIndexOf('@') + 1) : auth;
  const m = /^(\[[^\]]*\]|[^:]*)(?::([0-9]*))?$/.exec(auth);
  return { host: m?.[1] ?? auth, port: m?.[2] };
}

/**
 * What the CEL rules check beyond the pattern (the same checks, in crds/): an IPv6 literal that
 * parses, no `xn--` label.
 */
function hostChecks(s: string): boolean {
  const { host } = authority(s);
  if (/(^|\.)xn--/i.test(host)) return false;
  if (host.startsWith('[')) {
    try {
      // The API server's CEL isIP() refuses IPv4-mapped IPv6 (`::ffff:a.b.c.d`, in any spelling:
      // Kubernetes' CEL IP library, Go netip Is4In6): so does the controller. WHATWG writes the
      // mapped forms as `[::ffff:xxxx:xxxx]`.
      if (/^\[::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}\]$/i.test(new URL(`http://${host}/`).hostname)) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/** RFC 3986 `userinfo@` right after the scheme: unreserved, pct-encoded, sub-delims and ':'. */
const USERINFO = /^(https?:\/\/)[-A-Za-z0-9._~%!$&'()*+,;=:]*@/i;

/**
 * Whether `s` is an http(s) URL both the API server admits and undici can send to. With
 * `userinfo`, credentials in the URL (`https://user:pass@host/…`) are accepted: for addresses
 * held in a Secret (a webhook or proxy URL with its credentials, as Flux users write them), never
 * for spec fields, which everyone who can read the object sees.
 */
export function isHttpURL(s: string, opts: { userinfo?: boolean } = {}): boolean {
  const bare = opts.userinfo === true ? s.replace(USERINFO, '$1') : s;
  if (!HTTP_URL.test(bare) || !hostChecks(bare)) return false;
  try {
    new URL(s);
    return true;
  } catch {
    return false;
  }
}

/** Whether `s` is an ssh git remote (`ssh://…` or `user@host:path`) the API server admits. */
export function isSshURL(s: string): boolean {
  return SSH_URL.test(s) && hostChecks(s);
}
