/**
 * No message the controller writes contradicts itself about retrying, across every classified
 * outcome: each kind of answer (src/notifier/classify.ts) and transport failure, as the HTTP
 * client (src/notifier/http-errors.ts) and the GitHub client (src/forge/github/errors.ts) word it,
 * is put through what the dispatcher writes for it (`failureText`: Alert `lastDelivery`, Warning
 * Events, logs) and through the Provider condition a send reports (src/delivery/health.ts).
 * While retried, nothing may say "final" or "gave up"; once the controller stopped (retries
 * exhausted, a final error, an unconfirmed send), nothing may promise a retry.
 */
import { RequestError } from '@octokit/request-error';
import { Headers } from 'undici';
import { describe, expect, it } from 'vitest';
import { failureText } from '../../src/delivery/outcome.ts';
import { problemReason } from '../../src/delivery/health.ts';
import { toProviderError } from '../../src/forge/github/errors.ts';
import { ProviderError, withoutRetryPromise } from '../../src/notifier/errors.ts';
import { httpError, transportError, type FailureContext } from '../../src/notifier/http-errors.ts';

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);
const ctx = (proxy = false): FailureContext => ({
  secretValues: [],
  now: () => NOW,
  timeoutMs: 15_000,
  proxy,
  reflect: true,
});
const URL = 'https://hooks.example.com/x';

/** Every HTTP answer kind: [name, status, headers, body, expectJson]. */
const answers: [string, number, Record<string, string>, string, boolean][] = [
  ['HTML instead of JSON', 200, { 'content-type': 'text/html' }, '<!doctype html><p>hi', true],
  ['203 sign-in page', 203, { 'content-type': 'text/html' }, '<title>Sign In</title>', true],
  ['302 to a sign-in page', 302, { location: 'https://login.microsoftonline.com/x' }, '', false],
  ['301 elsewhere', 301, { location: 'https://other.example.net/x' }, '', false],
  ['400', 400, {}, '{"message":"bad"}', false],
  ['401', 401, {}, '{"message":"Bad credentials"}', false],
  ['403 permission', 403, {}, '{"message":"Resource not accessible by integration"}', false],
  ['403 rate limit', 403, {}, '{"message":"API rate limit exceeded"}', false],
  ['403 locked', 403, {}, '{"message":"Unable to create comment because issue is locked."}', false],
  ['403 SSO', 403, { 'x-github-sso': 'required' }, '{"message":"SAML enforcement"}', false],
  ['404', 404, {}, '{"message":"Not Found"}', false],
  ['407', 407, {}, '', false],
  ['408', 408, {}, '', false],
  ['409', 409, {}, '{"message":"conflict"}', false],
  ['410', 410, {}, '', false],
  ['413', 413, {}, '', false],
  ['422', 422, {}, '{"message":"Validation Failed"}', false],
  ['423', 423, {}, '{"message":"repo is archived"}', false],
  ['429 Retry-After', 429, { 'retry-after': '7' }, '', false],
  ['429 body retry_after', 429, {}, '{"retry_after": 2.5}', false],
  ['429 no hint', 429, {}, '', false],
  ['500', 500, {}, '', false],
  ['502 Retry-After', 502, { 'retry-after': '9' }, '', false],
  ['503', 503, {}, '', false],
];

const coded = (code: string, message = code): Error =>
  Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(message), { code }) });

function outcomes(): [string, ProviderError][] {
  const out: [string, ProviderError][] = [];
  for (const [name, status, headers, body, expectJson] of answers) {
    out.push([
      `http ${name}`,
      httpError(ctx(), 'POST', URL, status, new Headers(headers), body, {
        expectJson,
        ...(status === 301
          ? { redirect: { reason: 'otherOrigin' as const, location: 'https://other.example.net/x' } }
          : {}),
      }),
    ]);
    if (status >= 400) {
      const err = new RequestError('failed', status, {
        request: { method: 'POST', url: 'https://api.github.com/repos/acme/app/statuses/abc', headers: {} },
        response: {
          status,
          url: 'https://api.github.com/repos/acme/app/statuses/abc',
          headers,
          data: body === '' ? '' : (JSON.parse(body) as unknown),
        },
      });
      out.push([`github ${name}`, toProviderError(err, [], NOW)]);
    }
  }
  const live = new AbortController().signal;
  const timedOut = AbortSignal.abort();
  for (const [code, proxy, sent] of [
    ['ECONNREFUSED', false, false],
    ['ENOTFOUND', false, false],
    ['ECONNRESET', false, true],
    ['UND_ERR_SOCKET', false, true],
    ['SELF_SIGNED_CERT_IN_CHAIN', false, false],
    ['CERT_HAS_EXPIRED', false, false],
    ['ERR_TLS_CERT_ALTNAME_INVALID', false, false],
    ['EPROTO', false, false],
    ['ECONNREFUSED', true, false],
    ['UND_ERR_PRX_TLS', true, false],
  ] as const) {
    out.push([
      `transport ${code}${proxy ? ' via proxy' : ''}`,
      transportError(ctx(proxy), coded(code), 'POST', URL, live, undefined, sent),
    ]);
  }
  out.push([
    'transport proxy 407',
    transportError(ctx(true), coded('', 'Proxy response (407)'), 'POST', URL, live, undefined, false),
  ]);
  out.push([
    'transport proxy 502',
    transportError(ctx(true), coded('', 'Proxy response (502)'), 'POST', URL, live, undefined, false),
  ]);
  out.push(['timeout (sent)', transportError(ctx(), new Error('x'), 'POST', URL, timedOut, undefined, true)]);
  out.push(['timeout', transportError(ctx(), new Error('x'), 'POST', URL, timedOut, undefined, false)]);
  return out;
}

const PROMISE = /will retry|retrying|will be retried|try again later/i;
const FINAL = /\b(final|not retried|gave up|not sent again|will not retry)\b/i;

describe('no message contradicts itself about retrying, across every classified outcome', () => {
  const all = outcomes();

  it('covers every kind of outcome', () => {
    const kinds = new Set(all.map(([, pe]) => pe.verdict.kind));
    expect([...kinds].sort()).toEqual(
      [
        'ambiguous',
        'auth',
        'badResponse',
        'conflict',
        'locked',
        'notFound',
        'permission',
        'rateLimited',
        'redirect',
        'server',
        'unreachable',
        'validation',
      ].sort(),
    );
  });

  it.each(all)('%s', (_name, pe) => {
    if (pe.retryable) {
      // While retried: the attempt's status, the Provider condition, the warning Event.
      expect(failureText('Retrying', pe)).not.toMatch(FINAL);
      if (problemReason(pe) !== undefined) expect(pe.message).not.toMatch(FINAL);
      // Once the retry budget is spent.
      const exhausted = failureText('RetriesExhausted', pe, 9_000);
      expect(exhausted).toMatch(/^gave up after 9 s of retries: /);
      expect(exhausted).not.toMatch(PROMISE);
      if (pe.verdict.kind === 'ambiguous') expect(failureText('Unconfirmed', pe)).not.toMatch(PROMISE);
    } else {
      // A final error: neither its message (also the Provider condition) nor what is written.
      expect(pe.message).not.toMatch(PROMISE);
      expect(failureText('DeliveryFailed', pe)).not.toMatch(PROMISE);
    }
  });

  it('withoutRetryPromise keeps the advice and drops only the promise', () => {
    expect(withoutRetryPromise('POST x answered 503: the endpoint failed; will retry after 9s')).toBe(
      'POST x answered 503: the endpoint failed',
    );
    expect(
      withoutRetryPromise(
        'POST x got no complete answer within 15s (spec.timeout): will retry; raise spec.timeout if the endpoint is slow',
      ),
    ).toBe(
      'POST x got no complete answer within 15s (spec.timeout): raise spec.timeout if the endpoint is slow',
    );
    expect(withoutRetryPromise('rate limited by GitHub; will retry after 60s. GitHub said: x')).toBe(
      'rate limited by GitHub. GitHub said: x',
    );
  });
});
