/**
 * Private keys in the forms people paste into Secrets (case N06): a PEM whose newlines became the
 * two characters backslash-n (JSON and `.env` files, `kubectl create secret --from-literal`),
 * CRLF line ends, surrounding whitespace or quotes, a PEM folded onto one line, or the whole PEM
 * base64-encoded once more (`base64 -w0 key.pem`). Accepted when what was meant is unambiguous —
 * backslashes, quotes and carriage returns never occur in a PEM, and a base64 value that decodes
 * to a PEM block can only be that — else refused with a message that says exactly what is wrong.
 * Messages never contain the value.
 *
 * Hand-written: Node's `crypto.createPrivateKey` parses a well-formed PEM (PKCS#1 or PKCS#8) but
 * neither repairs these forms nor says which one it was given.
 */
import { createPrivateKey } from 'node:crypto';

export type KeyParse = { ok: true; pem: string; repaired: string[] } | { ok: false; problem: string };

const BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END ([A-Z0-9 ]+)-----/g;

function stripQuotes(s: string): { s: string; stripped: boolean } {
  const t = s.trim();
  for (const q of ['"', "'", '`']) {
    if (t.length >= 2 && t.startsWith(q) && t.endsWith(q))
      return { s: t.slice(1, -1).trim(), stripped: true };
  }
  return { s: t, stripped: false };
}

/** Base64 alphabet only (with optional padding and whitespace) and long enough to hold a key. */
function looksBase64(s: string): boolean {
  const t = s.replace(/\s+/g, '');
  return t.length >= 64 && /^[A-Za-z0-9+/]+={0,2}$/.test(t) && t.length % 4 === 0;
}

/**
 * A private key from a Secret value, normalised to a PEM that `createPrivateKey` accepts.
 * `repaired` lists what was fixed (for a log line), `problem` says what is wrong otherwise.
 */
export function parsePrivateKey(raw: string): KeyParse {
  const repaired: string[] = [];
  const unquoted = stripQuotes(raw);
  let s = unquoted.s;
  if (unquoted.stripped) repaired.push('surrounding quotes removed');
  if (s === '') return { ok: false, problem: 'is empty' };

  if (!s.includes('-----BEGIN') && looksBase64(s)) {
    const decoded = Buffer.from(s.replace(/\s+/g, ''), 'base64').toString('utf8');
    if (!decoded.includes('-----BEGIN')) {
      return {
        ok: false,
        problem:
          'is base64 that does not decode to a PEM block (a DER key?): paste the PEM file GitHub gave you (-----BEGIN RSA PRIVATE KEY----- …), as it is or base64-encoded',
      };
    }
    s = stripQuotes(decoded).s;
    repaired.push('base64 decoded');
  }

  if (/\\r\\n|\\n/.test(s) && s.includes('-----BEGIN')) {
    s = s.replace(/\\r\\n/g, '\n').replace(/\\n/g, '\n');
    repaired.push('literal \\n turned into line breaks');
  }
  if (s.includes('\r')) {
    s = s.replace(/\r\n?/g, '\n');
    repaired.push('CRLF line ends');
  }
  s = s.trim();

  if (!s.includes('-----BEGIN')) {
    return {
      ok: false,
      problem:
        'is not a PEM private key: no -----BEGIN … PRIVATE KEY----- line (paste the whole .pem file GitHub generated, including its BEGIN and END lines)',
    };
  }
  const blocks = [...s.matchAll(BLOCK)];
  if (blocks.length === 0) {
    return { ok: false, problem: 'is cut off: it has a -----BEGIN line but no matching -----END line' };
  }
  const first = blocks[0];
  const label = first?.[1] ?? '';
  if (blocks.length > 1) {
    return {
      ok: false,
      problem: `holds ${String(blocks.length)} PEM blocks (${blocks.map((b) => b[1] ?? '').join(', ')}): keep only the App's private key`,
    };
  }
  if (label !== first?.[3]) {
    return { ok: false, problem: `has -----BEGIN ${label}----- but -----END ${first?.[3] ?? ''}-----` };
  }
  if (label === 'ENCRYPTED PRIVATE KEY' || /Proc-Type: 4,ENCRYPTED/.test(first[2] ?? '')) {
    return {
      ok: false,
      problem: 'is encrypted with a passphrase: GitHub App keys are not; use the key as GitHub generated it',
    };
  }
  if (!label.endsWith('PRIVATE KEY')) {
    return {
      ok: false,
      problem: `is a ${label}, not a private key: the App's private key starts with -----BEGIN RSA PRIVATE KEY----- (or PRIVATE KEY)`,
    };
  }
  // One PEM block folded onto a single line (or with its line breaks turned into spaces): rebuild.
  let body = first[2] ?? '';
  if (!/\n/.test(body.trim()) || /[^\S\n]/.test(body.trim())) {
    const joined = body.replace(/\s+/g, '');
    if (/^[A-Za-z0-9+/]+={0,2}$/.test(joined)) {
      body = `\n${joined.replace(/.{1,64}/g, '$&\n')}`;
      repaired.push('line breaks restored');
    }
  }
  const pem = `-----BEGIN ${label}-----${body.endsWith('\n') ? body : `${body}\n`}-----END ${label}-----\n`;
  if (s.replace(BLOCK, '').trim() !== '') repaired.push('text around the key removed');
  try {
    createPrivateKey(pem);
  } catch {
    return {
      ok: false,
      problem: `has a ${label} block whose content is not a valid key (truncated, or characters changed when it was copied)`,
    };
  }
  return { ok: true, pem, repaired };
}
