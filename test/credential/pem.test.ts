/**
 * Credentials in the forms people paste (src/credential/pem.ts), case N06: each accepted form
 * gives back the exact PEM; each unusable one a message that says what is wrong — and never the
 * key itself. Through `resolveProvider`, the same as the Provider's `Ready=False/InvalidSecret`.
 */
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { API_VERSION, type Provider } from '../../src/api/v1alpha1.ts';
import { parsePrivateKey } from '../../src/credential/pem.ts';
import { resolveProvider } from '../../src/credential/provider.ts';
import { makeTestPKI } from '../support/pki.ts';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PKCS1 = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
const PKCS8 = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const body = (pem: string): string =>
  pem
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('-----'))
    .join('');

describe('N06: private keys in the forms people paste', () => {
  it.each([
    ['as GitHub generated it', PKCS1, PKCS1, []],
    ['PKCS#8', PKCS8, PKCS8, []],
    [
      'newlines pasted as the two characters backslash-n',
      PKCS1.replace(/\n/g, '\\n'),
      PKCS1,
      ['literal \\n turned into line breaks'],
    ],
    ['CRLF line ends', PKCS1.replace(/\n/g, '\r\n'), PKCS1, ['CRLF line ends']],
    ['surrounding whitespace', `\n\n   ${PKCS1}   \n\t`, PKCS1, []],
    [
      'surrounding quotes and \\n (a JSON string)',
      JSON.stringify(PKCS1),
      PKCS1,
      ['surrounding quotes removed', 'literal \\n turned into line breaks'],
    ],
    [
      'base64 of the PEM (base64 -w0 key.pem)',
      Buffer.from(PKCS1).toString('base64'),
      PKCS1,
      ['base64 decoded'],
    ],
    [
      'base64 of the PEM, wrapped at 76',
      Buffer.from(PKCS1).toString('base64').replace(/.{76}/g, '$&\n'),
      PKCS1,
      ['base64 decoded'],
    ],
    ['folded onto one line with spaces', PKCS1.trim().replace(/\n/g, ' '), PKCS1, ['line breaks restored']],
    ['with \\r\\n escapes', PKCS1.replace(/\n/g, '\\r\\n'), PKCS1, ['literal \\n turned into line breaks']],
  ] as const)('accepted: %s', (_name, raw, want, repaired) => {
    const r = parsePrivateKey(raw);
    expect(r.ok, r.ok ? '' : r.problem).toBe(true);
    if (!r.ok) return;
    expect(r.pem).toBe(want);
    expect(r.repaired).toEqual(repaired);
  });

  it('the normalised key is the same key (PKCS#1 and #8 both kept as given)', () => {
    const one = parsePrivateKey(PKCS1.replace(/\n/g, '\\n'));
    const eight = parsePrivateKey(PKCS8.replace(/\n/g, '\r\n'));
    expect(one.ok && one.pem).toBe(PKCS1);
    expect(eight.ok && eight.pem).toBe(PKCS8);
  });

  const pki = makeTestPKI();

  it.each([
    ['empty', '   ', /is empty/],
    ['no PEM at all', 'ghp_notakeyatall', /no -----BEGIN … PRIVATE KEY----- line/],
    ['cut off', PKCS1.slice(0, 300), /cut off: .*no matching -----END/],
    ['truncated body', PKCS1.replace(/\n[A-Za-z0-9+/=]{64}\n/, '\n'), /content is not a valid key/],
    [
      'a public key',
      generateKeyPairSync('rsa', { modulusLength: 1024 })
        .publicKey.export({ type: 'spki', format: 'pem' })
        .toString(),
      /is a PUBLIC KEY, not a private key/,
    ],
    ['two keys', `${PKCS1}${PKCS8}`, /holds 2 PEM blocks/],
    [
      'encrypted',
      privateKey.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'x' }).toString(),
      /encrypted with a passphrase/,
    ],
    [
      'base64 that is not a PEM',
      Buffer.from('x'.repeat(200)).toString('base64'),
      /does not decode to a PEM block/,
    ],
  ] as const)('refused, saying what is wrong: %s', (_name, raw, message) => {
    const r = parsePrivateKey(raw);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problem).toMatch(message);
    expect(r.problem).not.toContain(body(PKCS1).slice(0, 20));
  });

  it('a certificate is named as such', async () => {
    const { certPem } = await pki;
    expect(new X509Certificate(certPem).subject).not.toBe('');
    const r = parsePrivateKey(certPem);
    expect(!r.ok && r.problem).toMatch(/is a CERTIFICATE, not a private key/);
  });

  it('through resolveProvider: accepted forms make a usable Provider, others InvalidSecret with the reason', async () => {
    const provider: Provider = {
      apiVersion: API_VERSION,
      kind: 'Provider',
      metadata: { name: 'gh', namespace: 'team-a' },
      spec: { type: 'github', address: 'https://github.com/acme/app', secretRef: { name: 'app' } },
    };
    const resolve = (key: string) =>
      resolveProvider(provider, () =>
        Promise.resolve({ githubAppID: '1', githubAppInstallationID: '2', githubAppPrivateKey: key }),
      );
    const ok = await resolve(PKCS1.replace(/\n/g, '\\n'));
    expect(ok.ok && ok.provider.githubApp?.privateKey).toBe(PKCS1);
    const bad = await resolve(PKCS1.slice(0, 300));
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.reason).toBe('InvalidSecret');
    expect(bad.message).toMatch(/key 'githubAppPrivateKey' of Secret .*app.* is cut off/);
    expect(bad.message).not.toContain(body(PKCS1).slice(0, 20));
  });
});
