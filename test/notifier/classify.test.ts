/**
 * Answer classification (src/notifier/classify.ts), table-tested per forge from real answers
 * (test/forge/answers.ts, each with its source): kind, retry and wait, and what the answer says
 * about the Provider (its `Ready` condition). Cases N02 and N11 are described in docs/cases.md.
 */
import { Headers } from 'undici';
import { describe, expect, it } from 'vitest';
import { classifyAnswer, classifySlackError, type Verdict } from '../../src/notifier/classify.ts';
import { httpError } from '../../src/notifier/http-errors.ts';
import { problemReason } from '../../src/delivery/health.ts';
import * as A from '../forge/answers.ts';

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const NOW_S = NOW / 1000;

const headers = (h: Record<string, string>): Headers => new Headers(h);

type Row = [name: string, answer: A.RealAnswer, want: Verdict];

const AUTH: Partial<Verdict> = { condition: 'AuthenticationFailed' };

const TABLE: Record<string, Row[]> = {
  github: [
    ['N02: 403 "issue is locked"', A.github.locked, { kind: 'locked', retry: false }],
    ['403 archived repository', A.github.archived, { kind: 'locked', retry: false }],
    [
      '403 primary rate limit (x-ratelimit-remaining 0)',
      A.github.primaryRateLimit(NOW_S + 120),
      { kind: 'rateLimited', retry: true, retryAfterMs: 120_000 },
    ],
    [
      '403 secondary rate limit with retry-after',
      A.github.secondaryRateLimit(30),
      { kind: 'rateLimited', retry: true, retryAfterMs: 30_000 },
    ],
    [
      '403 secondary rate limit without retry-after: wait at least 60 s',
      A.github.secondaryRateLimit(undefined),
      { kind: 'rateLimited', retry: true, retryAfterMs: 60_000 },
    ],
    [
      '429 secondary rate limit',
      A.github.secondaryRateLimit(7, 429),
      { kind: 'rateLimited', retry: true, retryAfterMs: 7_000 },
    ],
    [
      '403 not accessible by integration',
      A.github.notAccessible,
      { kind: 'permission', retry: false, ...AUTH },
    ],
    ['403 SAML enforcement', A.github.sso, { kind: 'auth', retry: false, ...AUTH }],
    ['401 bad credentials', A.github.badCredentials, { kind: 'auth', retry: false, ...AUTH }],
    ['404', A.github.notFound, { kind: 'notFound', retry: false }],
    ['422 description too long', A.github.descriptionTooLong, { kind: 'validation', retry: false }],
    ['502 HTML', A.github.serverError, { kind: 'server', retry: true }],
  ],
  gitea: [
    ['401 invalid token', A.gitea.badToken, { kind: 'auth', retry: false, ...AUTH }],
    ['401 no token', A.gitea.noToken, { kind: 'auth', retry: false, ...AUTH }],
    ['403 no write permission', A.gitea.noWrite, { kind: 'permission', retry: false, ...AUTH }],
    ['403 locked issue', A.gitea.locked, { kind: 'locked', retry: false }],
    ['423 archived repository', A.gitea.archived, { kind: 'locked', retry: false }],
    ['404', A.gitea.notFound, { kind: 'notFound', retry: false }],
    ['404 no route (text)', A.gitea.noRoute, { kind: 'notFound', retry: false }],
  ],
  gitlab: [
    ['401', A.gitlab.unauthorized, { kind: 'auth', retry: false, ...AUTH }],
    [
      '403 (also locked discussions and archived projects: GitLab does not say)',
      A.gitlab.forbidden,
      { kind: 'permission', retry: false, ...AUTH },
    ],
    ['404', A.gitlab.projectNotFound, { kind: 'notFound', retry: false }],
    [
      '429 Retry later',
      A.gitlab.rateLimited(NOW_S + 300),
      { kind: 'rateLimited', retry: true, retryAfterMs: 60_000 },
    ],
    [
      '400 same state twice (F15: the driver treats it as done)',
      A.gitlab.sameState,
      { kind: 'validation', retry: false },
    ],
    ['400 field errors', A.gitlab.validation, { kind: 'validation', retry: false }],
    ['500', A.gitlab.serverError, { kind: 'server', retry: true }],
  ],
  bitbucket: [
    ['401', A.bitbucket.unauthorized, { kind: 'auth', retry: false, ...AUTH }],
    ['403 scopes', A.bitbucket.scopes, { kind: 'permission', retry: false, ...AUTH }],
    ['404', A.bitbucket.notFound, { kind: 'notFound', retry: false }],
    ['429', A.bitbucket.rateLimited, { kind: 'rateLimited', retry: true }],
    ['400 key too long', A.bitbucket.keyTooLong, { kind: 'validation', retry: false }],
  ],
  bitbucketserver: [
    ['401', A.bitbucketserver.unauthorized, { kind: 'auth', retry: false, ...AUTH }],
    ['403', A.bitbucketserver.forbidden, { kind: 'permission', retry: false, ...AUTH }],
    [
      '429 with Retry-After',
      A.bitbucketserver.rateLimited,
      { kind: 'rateLimited', retry: true, retryAfterMs: 5_000 },
    ],
  ],
  azuredevops: [
    ['N11: 203 with the sign-in page', A.azuredevops.signIn, { kind: 'auth', retry: false, ...AUTH }],
    ['401', A.azuredevops.unauthorized, { kind: 'auth', retry: false, ...AUTH }],
    ['302 to the sign-in service', A.azuredevops.signInRedirect, { kind: 'auth', retry: false, ...AUTH }],
    ['404 TF401019', A.azuredevops.repoNotFound, { kind: 'notFound', retry: false }],
    ['403 TF401027', A.azuredevops.noContribute, { kind: 'permission', retry: false, ...AUTH }],
    [
      '429 with Retry-After',
      A.azuredevops.rateLimited,
      { kind: 'rateLimited', retry: true, retryAfterMs: 10_000 },
    ],
  ],
  slack: [
    ['webhook 404 no_service', A.slack.webhookNoService, { kind: 'notFound', retry: false }],
    ['webhook 410 channel_is_archived', A.slack.webhookArchived, { kind: 'locked', retry: false }],
    [
      'webhook 403 action_prohibited',
      A.slack.webhookProhibited,
      { kind: 'permission', retry: false, ...AUTH },
    ],
    ['webhook 400 invalid_payload', A.slack.webhookInvalidPayload, { kind: 'validation', retry: false }],
    ['webhook 429', A.slack.webhookRateLimited, { kind: 'rateLimited', retry: true, retryAfterMs: 30_000 }],
  ],
};

describe('answer classification per forge, from real answers', () => {
  for (const [forge, rows] of Object.entries(TABLE)) {
    describe(forge, () => {
      it.each(rows)('%s', (_name, answer, want) => {
        const got = classifyAnswer(
          { status: answer.status, headers: headers(answer.headers), body: answer.body },
          NOW,
        );
        // GitHub's client adds its documented 60 s to a rate limit that names no wait.
        const verdict =
          forge === 'github' && got?.verdict.kind === 'rateLimited' && got.verdict.retryAfterMs === undefined
            ? { ...got.verdict, retryAfterMs: 60_000 }
            : got?.verdict;
        expect(strip(verdict)).toEqual(want);
        // The same verdict reaches the delivery layer through the shared HTTP client's error.
        if (answer.status >= 400) {
          const e = httpError(
            { secretValues: [], now: () => NOW, timeoutMs: 1000, proxy: false, reflect: true },
            'POST',
            'https://forge.example/api',
            answer.status,
            headers(answer.headers),
            answer.body,
          );
          expect(e.verdict.kind).toBe(want.kind);
          expect(e.retryable).toBe(want.retry);
          expect(problemReason(e)).toBe(want.condition);
        }
      });
    });
  }
});

/** The verdict without undefined fields (the table leaves them out). */
function strip(v: Verdict | undefined): Verdict | undefined {
  if (v === undefined) return undefined;
  return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined)) as unknown as Verdict;
}

describe('successful statuses that are not successes', () => {
  it('N11: Azure DevOps 203 + sign-in page is an authentication failure, whatever the caller expected', () => {
    const a = A.azuredevops.signIn;
    expect(
      strip(classifyAnswer({ status: 203, headers: headers(a.headers), body: a.body }, NOW)?.verdict),
    ).toEqual({
      kind: 'auth',
      retry: false,
      condition: 'AuthenticationFailed',
    });
  });

  it('HTML where JSON was expected: a sign-in page is auth, the web UI is badResponse, JSON is a success', () => {
    const signIn = { ...A.azuredevops.signIn, status: 200 };
    expect(
      classifyAnswer(
        { status: 200, headers: headers(signIn.headers), body: signIn.body, expectJson: true },
        NOW,
      )?.verdict.kind,
    ).toBe('auth');
    const page = A.gitea.webPage;
    expect(
      classifyAnswer({ status: 200, headers: headers(page.headers), body: page.body, expectJson: true }, NOW)
        ?.verdict,
    ).toEqual({ kind: 'badResponse', retry: false, condition: 'NotTheAPI' });
    expect(
      classifyAnswer({ status: 200, headers: headers({}), body: '{"id":1}', expectJson: true }, NOW),
    ).toBeUndefined();
    // Without the expectation (a webhook answering `ok` as HTML), a 200 is a success.
    expect(
      classifyAnswer({ status: 200, headers: headers(page.headers), body: page.body }, NOW),
    ).toBeUndefined();
  });
});

describe('Slack Web API errors (HTTP 200, ok: false)', () => {
  it.each([
    ['invalid_auth', { kind: 'auth', retry: false, condition: 'AuthenticationFailed' }],
    ['token_revoked', { kind: 'auth', retry: false, condition: 'AuthenticationFailed' }],
    ['ratelimited', { kind: 'rateLimited', retry: true, retryAfterMs: 60_000 }],
    ['channel_not_found', { kind: 'notFound', retry: false }],
    ['is_archived', { kind: 'locked', retry: false }],
    ['not_in_channel', { kind: 'permission', retry: false, condition: 'AuthenticationFailed' }],
    ['internal_error', { kind: 'server', retry: true }],
    ['msg_too_long', { kind: 'validation', retry: false }],
  ] as const)('%s', (error, want) => {
    expect(strip(classifySlackError(error, undefined))).toEqual(want);
  });
});

describe("N14: every service's documented rate-limit hint, header or body", () => {
  const epoch = (s: number): string => String(NOW_S + s);
  const googleRetry = JSON.stringify({
    error: {
      code: 429,
      status: 'RESOURCE_EXHAUSTED',
      message: 'Resource has been exhausted (e.g. check quota).',
      details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '2.5s' }],
    },
  });
  // [service, status, headers, body, expected wait in ms (undefined: the delivery backoff)]
  const table: [string, number, Record<string, string>, string, number | undefined][] = [
    ['discord: retry_after in the body only', 429, {}, '{"retry_after": 2.5, "global": false}', 2_500],
    [
      'discord: X-RateLimit-Reset-After',
      429,
      { 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset-After': '2.5' },
      '{}',
      2_500,
    ],
    ['discord: Retry-After header wins', 429, { 'Retry-After': '3' }, '{"retry_after": 2.5}', 3_000],
    ['slack: Retry-After', 429, { 'Retry-After': '7' }, '{"ok":false,"error":"ratelimited"}', 7_000],
    ['msteams: Retry-After', 429, { 'Retry-After': '1' }, '', 1_000],
    ['googlechat: RetryInfo.retryDelay', 429, {}, googleRetry, 2_500],
    ['googlechat: no hint', 429, {}, '{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}', undefined],
    [
      'github: primary limit',
      403,
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': epoch(42) },
      '{"message":"API rate limit exceeded"}',
      42_000,
    ],
    [
      'github: secondary limit',
      403,
      { 'retry-after': '60' },
      '{"message":"You have exceeded a secondary rate limit"}',
      60_000,
    ],
    [
      'gitlab: RateLimit-Reset (epoch)',
      429,
      { 'RateLimit-Remaining': '0', 'RateLimit-Reset': epoch(12) },
      'Retry later',
      12_000,
    ],
    ['gitlab: Retry-After', 429, { 'Retry-After': '9' }, 'Retry later', 9_000],
    [
      'azuredevops: Retry-After with X-RateLimit-*',
      429,
      { 'Retry-After': '30', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': epoch(30) },
      '',
      30_000,
    ],
    ['bitbucketserver: Retry-After', 429, { 'Retry-After': '5' }, '', 5_000],
    [
      'bitbucket cloud: no hint documented',
      429,
      { 'X-RateLimit-Limit': '1000', 'X-RateLimit-NearLimit': 'true' },
      '',
      undefined,
    ],
    [
      'gitea: no API rate limit; a proxy in front may send Retry-After',
      429,
      { 'Retry-After': '4' },
      '',
      4_000,
    ],
  ];
  it.each(table)('%s', (_name, status, headers, body, wait) => {
    const c = classifyAnswer({ status, headers: new Headers(headers), body }, NOW);
    expect(c?.verdict.kind).toBe('rateLimited');
    expect(c?.verdict.retryAfterMs).toBe(wait);
  });

  it('a body hint is only read from JSON, and negative or malformed values are ignored', () => {
    const wait = (body: string): number | undefined =>
      classifyAnswer({ status: 429, headers: new Headers(), body }, NOW)?.verdict.retryAfterMs;
    expect(wait('retry_after: 5')).toBeUndefined();
    expect(wait('{"retry_after": -1}')).toBeUndefined();
    expect(wait('{"retry_after": "5"}')).toBeUndefined();
    expect(wait('{"retry_after": 99999}')).toBe(3_600_000);
  });
});

describe('redirects to sign-in pages (N13) and to a repository named like one', () => {
  const verdictOf = (url: string, location: string): Verdict | undefined =>
    strip(classifyAnswer({ status: 301, headers: headers({ location }), body: '', url }, NOW)?.verdict);
  const AUTH_VERDICT = { kind: 'auth', retry: false, condition: 'AuthenticationFailed' };

  it('a sign-in page right after the web root or the API prefix, on the same host or a portal', () => {
    const api = 'https://ghe.acme.dev/api/v3/repos/acme/app/statuses/abc';
    for (const location of [
      '/login?return_to=%2Fapi',
      '/sessions',
      '/users/sign_in',
      '/user/login',
      '/_signin',
      '/sso',
      '/saml/consume',
      '/login/oauth/authorize?client_id=x',
      '/api/v3/login',
      'https://login.microsoftonline.com/tenant/oauth2/v2.0/authorize',
      'https://sso.example.net/saml/login',
    ])
      expect(verdictOf(api, location), location).toEqual(AUTH_VERDICT);
    // Behind a web root: GitLab at /gitlab.
    expect(verdictOf('https://acme.dev/gitlab/api/v4/projects/1', '/gitlab/users/sign_in')).toEqual(
      AUTH_VERDICT,
    );
  });

  it('a repository (or owner) named login, sso, sessions, authorize or saml is a moved resource, not a sign-in', () => {
    for (const name of ['login', 'sso', 'sessions', 'authorize', 'saml', 'signin']) {
      const api = `https://ghe.acme.dev/api/v3/repos/acme/${name}/statuses/abc`;
      expect(verdictOf(api, `/api/v3/repos/platform/${name}/statuses/abc`), name).toEqual({
        kind: 'redirect',
        retry: false,
      });
      expect(verdictOf(api, `/api/v3/repos/${name}/app/statuses/abc`), name).toEqual({
        kind: 'redirect',
        retry: false,
      });
      // Gitea at the root of its host, a user named `user`.
      expect(
        verdictOf(`https://gitea.acme.dev/api/v1/repos/user/${name}`, `/api/v1/repos/user/${name}-2`),
        name,
      ).toEqual({ kind: 'redirect', retry: false });
    }
    // The API's own host may be named like a portal: only another origin's host counts.
    expect(verdictOf('https://sso.acme.dev/api/v3/repos/a/b', '/api/v3/repos/c/b')).toEqual({
      kind: 'redirect',
      retry: false,
    });
  });
});
