import { describe, expect, it } from 'vitest';
import {
  assertPayloadFits,
  bodyExcerpt,
  isRetryableStatus,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_RETRY_AFTER_MS,
  ProviderError,
  retryAfterFrom,
} from '../../src/notifier/errors.ts';

const NOW = Date.parse('2026-05-01T12:00:00Z');

describe('isRetryableStatus', () => {
  it('retries 408, 409, 429 and 5xx; every other 4xx is final (design §4)', () => {
    for (const s of [408, 409, 429, 500, 502, 503, 504, 599])
      expect(isRetryableStatus(s), String(s)).toBe(true);
    for (const s of [400, 401, 403, 404, 405, 410, 413, 422, 451, 200, 304]) {
      expect(isRetryableStatus(s), String(s)).toBe(false);
    }
  });
});

describe('retryAfterFrom', () => {
  it('reads Retry-After in seconds', () => {
    expect(retryAfterFrom(new Headers({ 'Retry-After': '7' }), NOW)).toBe(7000);
    expect(retryAfterFrom(new Headers({ 'retry-after': '0' }), NOW)).toBe(0);
  });

  it('reads Retry-After as an HTTP-date', () => {
    const at = new Date(NOW + 90_000).toUTCString();
    expect(retryAfterFrom(new Headers({ 'Retry-After': at }), NOW)).toBe(90_000);
    // A date in the past means "now".
    expect(retryAfterFrom(new Headers({ 'Retry-After': new Date(NOW - 5000).toUTCString() }), NOW)).toBe(0);
  });

  it('reads GitHub x-ratelimit-reset (epoch seconds) only when remaining is 0', () => {
    const reset = String(NOW / 1000 + 42);
    expect(
      retryAfterFrom(new Headers({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset }), NOW),
    ).toBe(42_000);
    expect(
      retryAfterFrom(new Headers({ 'x-ratelimit-remaining': '4999', 'x-ratelimit-reset': reset }), NOW),
    ).toBeUndefined();
  });

  it('reads RateLimit-Reset as delta seconds or (GitLab) epoch seconds', () => {
    expect(retryAfterFrom(new Headers({ 'RateLimit-Reset': '30' }), NOW)).toBe(30_000);
    expect(
      retryAfterFrom(
        new Headers({ 'RateLimit-Remaining': '0', 'RateLimit-Reset': String(NOW / 1000 + 12) }),
        NOW,
      ),
    ).toBe(12_000);
    expect(
      retryAfterFrom(new Headers({ 'RateLimit-Remaining': '10', 'RateLimit-Reset': '30' }), NOW),
    ).toBeUndefined();
  });

  it('prefers Retry-After, caps at one hour and ignores garbage', () => {
    expect(
      retryAfterFrom(
        new Headers({
          'Retry-After': '3',
          'x-ratelimit-remaining': '0',
          'x-ratelimit-reset': String(NOW / 1000 + 60),
        }),
        NOW,
      ),
    ).toBe(3000);
    expect(retryAfterFrom(new Headers({ 'Retry-After': '86400' }), NOW)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterFrom(new Headers({ 'Retry-After': 'soon' }), NOW)).toBeUndefined();
    expect(retryAfterFrom(new Headers({ 'Retry-After': '-5' }), NOW)).toBeUndefined();
    expect(retryAfterFrom(new Headers(), NOW)).toBeUndefined();
  });
});

describe('ProviderError', () => {
  const token = 'ghp_SuperSecretToken1234567890';
  const hook = 'https://hooks.example.com/hooks/T000/B000/XXXXSECRET';

  it('keeps status, retryability, delay and code', () => {
    const e = new ProviderError('POST https://x/ answered 429', {
      status: 429,
      retryable: true,
      retryAfterMs: 7000,
      code: 'HTTP_429',
      secretValues: [],
    });
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('ProviderError');
    expect([e.status, e.retryable, e.retryAfterMs, e.code]).toEqual([429, true, 7000, 'HTTP_429']);
    expect(e.cause).toBeUndefined();
  });

  it('redacts secret values and their encoded forms (F23)', () => {
    const e = new ProviderError(
      `failed: token ${token}, encoded ${encodeURIComponent(token)}, b64 ${Buffer.from(token).toString('base64')}`,
      { code: 'X', retryable: false, secretValues: [token] },
    );
    expect(e.message).not.toContain(token);
    expect(e.message).not.toContain(Buffer.from(token).toString('base64'));
    expect(e.message).toContain('[redacted]');
    expect(e.stack ?? '').not.toContain(token);
  });

  it('replaces a secret URL together with anything appended to it', () => {
    const e = new ProviderError(`POST ${hook}/extra?wait=true answered 404`, {
      code: 'HTTP_404',
      retryable: false,
      secretValues: [hook],
    });
    expect(e.message).toBe('POST [redacted] answered 404');
  });

  it('strips userinfo, query strings and fragments from URLs', () => {
    const e = new ProviderError(
      'GET https://user:pa55word@git.example.com/api/v4/projects?private_token=abc#frag and http://h/p?x=1 failed',
      { code: 'X', retryable: false, secretValues: [] },
    );
    expect(e.message).toBe('GET https://git.example.com/api/v4/projects?… and http://h/p?… failed');
  });

  it('is one line of at most 512 characters', () => {
    const e = new ProviderError(
      `line1\nline2\r\n\u001b[31mred\u001b[0m ${'é'.repeat(300)}${'😀'.repeat(300)}`,
      {
        code: 'X',
        retryable: false,
        secretValues: [],
      },
    );
    expect(e.message.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_LENGTH);
    expect(e.message).not.toMatch(/\p{Cc}/u);
    expect(e.message.endsWith('…')).toBe(true);
    expect(e.message.startsWith('line1 line2 [31mred')).toBe(true);
    // never half a surrogate pair
    expect(e.message).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });
});

describe('bodyExcerpt', () => {
  it('redacts before cutting, so a cut never leaves part of a secret', () => {
    const secret = 'S3CRET-VALUE-abcdefghijklmnopqrstuvwxyz';
    const body = `${'x'.repeat(180)} ${secret} trailing`;
    const ex = bodyExcerpt(body, [secret], 200);
    expect(ex.length).toBeLessThanOrEqual(200);
    expect(ex).not.toContain('S3CRET');
    expect(ex).toContain('[redacted]');
  });
});

describe('assertPayloadFits', () => {
  it('passes a body within the limit in UTF-8 bytes, refuses a longer one as LIMIT_EXCEEDED, final, redacted', () => {
    expect(() => {
      assertPayloadFits('é'.repeat(50), 100, 'the card', []);
    }).not.toThrow();
    let err: unknown;
    try {
      assertPayloadFits(`s3cret ${'é'.repeat(50)}`, 100, 'the card s3cret', ['s3cret']);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: 'LIMIT_EXCEEDED', retryable: false });
    expect((err as ProviderError).message).toMatch(/^the card .* is over 100 bytes; not sent$/);
    expect((err as ProviderError).message).not.toContain('s3cret');
  });
});
