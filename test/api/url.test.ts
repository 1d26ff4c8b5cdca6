/**
 * src/api/url.ts beyond what the property test (validity.int.test.ts) generates: credentials in a
 * URL are accepted only for addresses held in a Secret.
 */
import { describe, expect, it } from 'vitest';
import { isHttpURL, isSshURL } from '../../src/api/url.ts';

describe('isHttpURL', () => {
  it.each([
    'https://hooks.example.com/x',
    'http://10.0.0.7:8080/notify?x=1',
    'https://[fd00::1]/hook',
    'https://git.example.com./acme/app',
  ])('accepts %s', (u) => {
    expect(isHttpURL(u)).toBe(true);
  });

  it.each([
    'ftp://example.com/x',
    'https://',
    'https://2852039166/latest', // 169.254.169.254 as one number: a numeric last label is not a name
    'https://xn--80ak6aa92e.com/',
    'https://[fd00::zz]/',
    'http://[::ffff:169.254.169.254]/', // IPv4-mapped: CEL isIP() refuses it, so do we
    'http://[::ffff:a9fe:a9fe]/',
    'https://example.com:70000/',
    'https://exa mple.com/',
  ])('refuses %s', (u) => {
    expect(isHttpURL(u)).toBe(false);
  });

  it('credentials in the URL only where a Secret holds it (a webhook or proxy URL)', () => {
    const u = 'http://ci:p%40ss@proxy.internal:3128';
    expect(isHttpURL(u)).toBe(false);
    expect(isHttpURL(u, { userinfo: true })).toBe(true);
    expect(isHttpURL('https://user@hooks.example.com/x', { userinfo: true })).toBe(true);
    // Still a URL after the credentials: the host rules apply.
    expect(isHttpURL('https://u:p@2852039166/', { userinfo: true })).toBe(false);
    expect(isHttpURL('https://u:p@/', { userinfo: true })).toBe(false);
  });
});

describe('isSshURL', () => {
  it.each([
    ['git@github.com:acme/app.git', true],
    ['ssh://git@git.example.com:2222/acme/app.git', true],
    ['git@github.com:/acme', false],
    ['ssh://git@/acme', false],
  ])('%s → %s', (u, want) => {
    expect(isSshURL(u)).toBe(want);
  });
});
