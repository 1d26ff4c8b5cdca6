/**
 * Answer classification, in one place: what an endpoint's answer — or the failure to get one —
 * means for delivery. Every `ProviderError` carries a {@link Verdict}: the kind of outcome, whether
 * the same request may succeed later (and after how long), and what it says about the Provider as a
 * whole (a condition shown as `Ready=False` until a send succeeds). The delivery layer consumes the
 * verdict; notifiers and forges never decide retries or Provider conditions on their own.
 *
 * | kind          | typical answers                                                              | retry                      | Provider condition     |
 * |---------------|------------------------------------------------------------------------------|----------------------------|------------------------|
 * | `rateLimited` | 429; 403 with `Retry-After`/`x-ratelimit-remaining: 0` or "rate limit"       | yes, after the wait        | —                      |
 * | `permission`  | 403 otherwise ("Resource not accessible by integration")                     | no                         | `AuthenticationFailed` |
 * | `locked`      | 403 "issue is locked", "archived so is read-only", 423 "repo is archived"    | no (final for this event)  | — (credentials fine)   |
 * | `notFound`    | 404, 410                                                                     | no                         | —                      |
 * | `auth`        | 401; 203 or HTML sign-in page; 403 SAML/SSO enforcement                      | no (credentials must change)| `AuthenticationFailed`|
 * | `validation`  | 400, 413, 422, other 4xx; a request we refuse to make                        | no                         | —                      |
 * | `conflict`    | 409                                                                          | yes                        | —                      |
 * | `server`      | 5xx, 408                                                                     | yes (`Retry-After` kept)   | —                      |
 * | `unreachable` | DNS, refused, TLS, proxy: nothing was sent                                   | yes                        | TLS → `CertificateError`, proxy → `ProxyError` |
 * | `ambiguous`   | timeout or reset after the request was sent: it may have taken effect       | yes — the delivery layer decides per provider type |—|
 * | `redirect`    | a redirect to another origin, or too many                                    | no                         | —                      |
 * | `badResponse` | HTML or another body where the API sends JSON, a wrong JSON shape            | no                         | `NotTheAPI` (HTML)     |
 * | `aborted`     | cancelled by us (shutdown) or the HTTP client closed                         | yes                        | —                      |
 *
 * The patterns below come from real answers (each with its source) and are table-tested per forge
 * in test/notifier/classify.test.ts. Also here: the retry facts read from headers
 * (`Retry-After`, rate-limit resets), used by every classification.
 */

import { jsonObject } from './body.ts';
import { isSignInLocation } from './redirect.ts';

/** The kinds of outcome (see the table in the module comment). */
export type AnswerKind =
  | 'rateLimited'
  | 'permission'
  | 'locked'
  | 'notFound'
  | 'auth'
  | 'validation'
  | 'conflict'
  | 'server'
  | 'unreachable'
  | 'ambiguous'
  | 'redirect'
  | 'badResponse'
  | 'aborted';

/** What a failed send says about the whole Provider (`Ready=False` with this reason until a send succeeds). */
export type ProviderCondition = 'AuthenticationFailed' | 'CertificateError' | 'ProxyError' | 'NotTheAPI';

/**
 * The typed verdict on one failed call, consumed by the delivery layer (docs/architecture.md,
 * "Answer classification").
 */
export interface Verdict {
  readonly kind: AnswerKind;
  /** Whether the same request can succeed if sent again later (with the same credentials). */
  readonly retry: boolean;
  /** Least wait before sending again, ms, when the endpoint said so (rate limits, `Retry-After`). */
  readonly retryAfterMs?: number | undefined;
  /** What it says about the Provider; undefined: nothing, the Provider stays Ready. */
  readonly condition?: ProviderCondition | undefined;
}

// ---------------------------------------------------------------------------------------------
// Retry facts from headers

/** Cap of any retry delay read from response headers: 1 hour, in milliseconds. */
export const MAX_RETRY_AFTER_MS = 3_600_000;
/** Wait for a rate limit that names no time (GitHub: "wait at least 60 s"). */
export const RATE_LIMIT_FALLBACK_MS = 60_000;

/** Minimal header reader: both the global `Headers` and undici's satisfy it. */
export interface HeaderReader {
  get(name: string): string | null;
}

/** Epoch-looking values (after 2001-09-09) are absolute times; smaller ones are deltas. */
const EPOCH_SECONDS_THRESHOLD = 1_000_000_000;

const clampDelay = (ms: number): number => Math.min(Math.max(Math.ceil(ms), 0), MAX_RETRY_AFTER_MS);

function parseNumber(v: string | null): number | undefined {
  if (v === null) return undefined;
  const t = v.trim();
  if (!/^\d+(?:\.\d+)?$/.test(t)) return undefined;
  return Number(t);
}

/**
 * Whether an HTTP status is worth retrying by its class alone: 408, 409, 429 and every 5xx are;
 * every other 4xx is final. 2xx/3xx are not errors and return false.
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || (status >= 500 && status <= 599);
}

/**
 * Seconds as Google APIs write a `google.protobuf.Duration` in JSON (`"2.5s"`), else undefined.
 */
function durationSeconds(v: unknown): number | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^(\d+(?:\.\d+)?)s$/.exec(v.trim());
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

/**
 * The wait a JSON error body names, in seconds, or undefined. Sources:
 * - Discord: 429 `{"message": …, "retry_after": 2.5, "global": false}`, seconds as a float
 *   (discord.com/developers/docs/topics/rate-limits "Exceeding A Rate Limit");
 * - Google APIs (Google Chat): `{"error": {"details": [{"@type":
 *   "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}]}}` (the error model's
 *   `RetryInfo`, cloud.google.com/apis/design/errors "Error details").
 * Only the first 64 KiB are parsed (rate-limit answers are small).
 */
function bodyRetrySeconds(body: string): number | undefined {
  if (body === '' || body.length > 65_536 || !body.includes('retry')) return undefined;
  const d = jsonObject(body);
  if (d === undefined) return undefined;
  if (typeof d.retry_after === 'number' && Number.isFinite(d.retry_after) && d.retry_after >= 0)
    return d.retry_after;
  const err = d.error;
  if (err !== null && typeof err === 'object' && Array.isArray((err as Record<string, unknown>).details)) {
    for (const x of (err as { details: unknown[] }).details) {
      if (x === null || typeof x !== 'object') continue;
      const detail = x as Record<string, unknown>;
      if (detail['@type'] === 'type.googleapis.com/google.rpc.RetryInfo') {
        const secs = durationSeconds(detail.retryDelay);
        if (secs !== undefined) return secs;
      }
    }
  }
  return undefined;
}

/**
 * How long the endpoint asked us to wait, in milliseconds (≥ 0, capped at 1 hour), or
 * undefined when its answer does not say. Every service's documented hint, first match wins:
 * - `Retry-After`: delta seconds or an HTTP-date (RFC 9110 §10.2.3) — Slack (api.slack.com/
 *   apis/rate-limits), Microsoft Teams ("Rate limiting for connectors"), Azure DevOps
 *   (learn.microsoft.com/azure/devops/integrate/concepts/rate-limits), Bitbucket Data Center
 *   ("Rate limiting"), GitLab, GitHub secondary limits, Discord;
 * - `x-ratelimit-remaining: 0` with `x-ratelimit-reset` in epoch seconds (GitHub "Rate limits for
 *   the REST API"; Azure DevOps sends the same pair);
 * - `RateLimit-Reset` (GitLab: epoch seconds; IETF draft: delta seconds — values above 10⁹
 *   are read as epoch seconds), used when `RateLimit-Remaining` is absent or 0;
 * - `X-RateLimit-Reset-After` (Discord: seconds, a float, until the bucket resets), when
 *   `X-RateLimit-Remaining` is absent or 0;
 * - the body (`body`, JSON): Discord `retry_after`, Google Chat `RetryInfo.retryDelay`
 *   ({@link bodyRetrySeconds}).
 * Bitbucket Cloud and Gitea document no wait (Bitbucket Cloud's 429 names none; Gitea has no API
 * rate limit): the delivery layer's backoff applies. `nowMs` is the current time in epoch
 * milliseconds (injected for tests).
 */
export function retryAfterFrom(headers: HeaderReader, nowMs: number, body = ''): number | undefined {
  const ra = headers.get('retry-after');
  if (ra !== null) {
    const secs = parseNumber(ra);
    if (secs !== undefined) return clampDelay(secs * 1000);
    // HTTP-date forms (IMF-fixdate, RFC 850, asctime) all carry a month name and hh:mm:ss;
    // checking that keeps Date.parse's leniency (it reads '-5' as a year) out.
    const t = ra.trim();
    const at = /[A-Za-z]{3}/.test(t) && /\d{2}:\d{2}:\d{2}/.test(t) ? Date.parse(t) : Number.NaN;
    if (!Number.isNaN(at)) return clampDelay(at - nowMs);
  }
  const xRemaining = headers.get('x-ratelimit-remaining');
  if (parseNumber(xRemaining) === 0) {
    const reset = parseNumber(headers.get('x-ratelimit-reset'));
    if (reset !== undefined) return clampDelay(reset * 1000 - nowMs);
  }
  const remaining = headers.get('ratelimit-remaining');
  if (remaining === null || parseNumber(remaining) === 0) {
    const reset = parseNumber(headers.get('ratelimit-reset'));
    if (reset !== undefined) {
      return clampDelay(reset >= EPOCH_SECONDS_THRESHOLD ? reset * 1000 - nowMs : reset * 1000);
    }
  }
  if (xRemaining === null || parseNumber(xRemaining) === 0) {
    const after = parseNumber(headers.get('x-ratelimit-reset-after'));
    if (after !== undefined) return clampDelay(after * 1000);
  }
  const fromBody = bodyRetrySeconds(body);
  return fromBody === undefined ? undefined : clampDelay(fromBody * 1000);
}

// ---------------------------------------------------------------------------------------------
// What the body says

/**
 * The error text of a forge's JSON error body, in the shapes the forges send: GitHub and Gitea
 * `{message}` (+ GitHub `errors[].message|code`), GitLab `{message}` or `{message: {field:
 * [..]}}` or `{error}`, Bitbucket Cloud `{error: {message}}`, Bitbucket Data Center
 * `{errors: [{message}]}`, Azure DevOps `{message, typeKey}`. '' when none.
 */
export function errorText(body: string): string {
  let data: unknown;
  try {
    data = JSON.parse(body);
  } catch {
    return '';
  }
  const parts: string[] = [];
  const add = (v: unknown, field?: string): void => {
    if (typeof v === 'string' && v !== '') parts.push(field === undefined ? v : `${field} ${v}`);
  };
  if (data === null || typeof data !== 'object' || Array.isArray(data))
    return typeof data === 'string' ? data : '';
  const d = data as Record<string, unknown>;
  if (typeof d.message === 'string') add(d.message);
  else if (d.message !== null && typeof d.message === 'object') {
    for (const [k, v] of Object.entries(d.message as Record<string, unknown>)) {
      if (Array.isArray(v)) for (const x of v as unknown[]) add(x, k);
      else add(v, k);
    }
  }
  const err = d.error;
  if (typeof err === 'string') add(err);
  else if (err !== null && typeof err === 'object') add((err as Record<string, unknown>).message);
  if (Array.isArray(d.errors)) {
    for (const e of d.errors as unknown[]) {
      if (typeof e === 'string') add(e);
      else if (e !== null && typeof e === 'object') {
        const r = e as Record<string, unknown>;
        if (typeof r.message === 'string') add(r.message);
        else if (typeof r.code === 'string')
          add(r.code, typeof r.field === 'string' ? `${r.field}:` : undefined);
      }
    }
  }
  if (typeof d.typeKey === 'string' && parts.length === 0) add(d.typeKey);
  return parts.join('; ');
}

/** Whether a body is an HTML document rather than an API answer. */
export function isHtml(body: string, contentType?: string | null): boolean {
  if (contentType !== undefined && contentType !== null && /^\s*text\/html\b/i.test(contentType)) return true;
  return /^\s*(?:<!doctype html|<html[\s>])/i.test(body.slice(0, 512));
}

/**
 * Sign-in pages: what a forge or its login proxy answers in place of an API answer when the
 * credentials are missing, expired or revoked. Azure DevOps answers 203 with its "Sign In" page
 * (title `Azure DevOps Services | Sign In`; case N11); GitLab redirects to `/users/sign_in`,
 * Gitea to `/user/login`, SSO proxies (Microsoft Entra, Okta, …) show a login form.
 */
const SIGN_IN = [
  /<title>[^<]*\b(?:sign[ -]?in|log[ -]?in|login|authenticat)/i,
  /<input[^>]+type=["']?password/i,
  /\b(?:_signin|users\/sign_in|user\/login|login\.microsoftonline\.com|\/oauth2?\/authorize)\b/i,
];

/**
 * Whether a `Location` (relative to `url`, the URL requested, when known) names a sign-in page
 * (./redirect.ts {@link isSignInLocation}).
 */
function signInLocation(location: string, url: string | undefined): boolean {
  try {
    const from = new URL(url ?? 'http://relative.invalid/');
    return isSignInLocation(from, new URL(location, from));
  } catch {
    return false;
  }
}

/** Whether an HTML body is a sign-in page (see {@link SIGN_IN}). */
export function isSignInPage(body: string): boolean {
  const head = body.slice(0, 64 * 1024);
  return SIGN_IN.some((re) => re.test(head));
}

/**
 * Targets that refuse writes whatever the credentials: GitHub 403 "Unable to create comment
 * because issue is locked." (case N02), "Repository was archived so is read-only.", "Repository
 * has been locked for migration", blocked users; Gitea 403 "You cannot comment on a locked
 * issue." and 423 "repo is archived" (observed on Gitea 1.27.3); Bitbucket Data Center
 * `RepositoryArchivedException`. (GitLab answers a plain "403 Forbidden" for locked discussions
 * and archived projects: indistinguishable from a missing permission.)
 */
const LOCKED = [
  /\b(?:issue|conversation|discussion|pull request|merge request) is locked\b/i,
  /\blocked (?:issue|conversation|discussion)\b/i,
  /archived/i,
  /\bread-only\b/i,
  /\blocked for migration\b/i,
  /\b(?:user is|you are|you have been) blocked\b|\bblocked from\b/i,
];

/** GitHub 403 "Resource protected by organization SAML enforcement" (`X-GitHub-SSO`): the token must be authorised for the organisation. */
const SSO = /\bSAML enforcement\b|\bSSO\b/;

/** Rate limits named in a body: GitHub "API rate limit exceeded", "secondary rate limit"; Bitbucket "Rate limit for this resource has been exceeded". */
const RATE_LIMIT = /\brate limit/i;

/** An HTTP answer to classify. */
export interface Answer {
  status: number;
  headers: HeaderReader;
  /** The body (or its first part), UTF-8. */
  body: string;
  /** Whether the caller expected JSON: an HTML 2xx answer is then a failure. */
  expectJson?: boolean;
  /** The URL requested (a redirect's `Location` is resolved against it). */
  url?: string;
}

/**
 * Classifies an HTTP answer (see the module comment). A 2xx answer is a success (undefined)
 * unless it is 203 or, where JSON was expected, an HTML page: a sign-in page is `auth`
 * (Azure DevOps 203, N11), any other page `badResponse`. `said` is the forge's own error text
 * (for messages; unredacted — the caller's `ProviderError` redacts).
 */
export function classifyAnswer(a: Answer, nowMs: number): { verdict: Verdict; said: string } | undefined {
  const { status, headers, body } = a;
  const said = errorText(body);
  const html = isHtml(body, headers.get('content-type'));
  const verdict = (
    kind: AnswerKind,
    retry: boolean,
    extra: Partial<Verdict> = {},
  ): { verdict: Verdict; said: string } => ({
    verdict: { kind, retry, ...extra },
    said,
  });
  if (status >= 200 && status <= 299) {
    if (status === 203) {
      return verdict('auth', false, { condition: 'AuthenticationFailed' });
    }
    if (a.expectJson === true && html) {
      return isSignInPage(body)
        ? verdict('auth', false, { condition: 'AuthenticationFailed' })
        : verdict('badResponse', false, { condition: 'NotTheAPI' });
    }
    return undefined;
  }
  if (status >= 300 && status <= 399) {
    // A redirect to a sign-in page (Azure DevOps without `X-TFS-FedAuthRedirect: Suppress`,
    // GitLab `/users/sign_in`, an SSO proxy) means the credentials were not accepted.
    const location = headers.get('location') ?? '';
    return location !== '' && signInLocation(location, a.url)
      ? verdict('auth', false, { condition: 'AuthenticationFailed' })
      : verdict('redirect', false);
  }
  const wait = retryAfterFrom(headers, nowMs, body);
  if (status === 401) return verdict('auth', false, { condition: 'AuthenticationFailed' });
  if (status === 407) return verdict('auth', false, { condition: 'ProxyError' });
  if (status === 429) return verdict('rateLimited', true, { retryAfterMs: wait });
  if (status === 403) {
    const text = said === '' ? body.slice(0, 4096) : said;
    if (wait !== undefined || RATE_LIMIT.test(text)) {
      return verdict('rateLimited', true, { retryAfterMs: wait ?? RATE_LIMIT_FALLBACK_MS });
    }
    if (LOCKED.some((re) => re.test(text))) return verdict('locked', false);
    if (SSO.test(text) || headers.get('x-github-sso') !== null) {
      return verdict('auth', false, { condition: 'AuthenticationFailed' });
    }
    if (html && isSignInPage(body)) return verdict('auth', false, { condition: 'AuthenticationFailed' });
    return verdict('permission', false, { condition: 'AuthenticationFailed' });
  }
  if (status === 423) return verdict('locked', false);
  if (status === 404 || status === 410) {
    // Slack webhooks answer 410 `channel_is_archived` (docs/providers/slack.md).
    const text = said === '' ? body.slice(0, 4096) : said;
    return LOCKED.some((re) => re.test(text)) ? verdict('locked', false) : verdict('notFound', false);
  }
  if (status === 408) return verdict('server', true, { retryAfterMs: wait });
  if (status === 409) return verdict('conflict', true, { retryAfterMs: wait });
  if (status >= 500) return verdict('server', true, { retryAfterMs: wait });
  return verdict('validation', false);
}

/**
 * Slack Web API errors (`{"ok": false, "error": "…"}` with HTTP 200; api.slack.com/methods/
 * chat.postMessage "Errors"): credentials (`invalid_auth`, `not_authed`, `token_revoked`,
 * `token_expired`, `account_inactive`), the channel (`channel_not_found` → notFound,
 * `not_in_channel`/`restricted_action` → permission, `is_archived` → locked), rate limits,
 * Slack's own failures; the rest (e.g. `msg_too_long`, `invalid_blocks`) validation.
 */
export function classifySlackError(error: string, retryAfterMs: number | undefined): Verdict {
  if (
    [
      'invalid_auth',
      'not_authed',
      'token_revoked',
      'token_expired',
      'account_inactive',
      'no_permission',
    ].includes(error)
  ) {
    return { kind: 'auth', retry: false, condition: 'AuthenticationFailed' };
  }
  if (error === 'ratelimited')
    return { kind: 'rateLimited', retry: true, retryAfterMs: retryAfterMs ?? RATE_LIMIT_FALLBACK_MS };
  if (['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout'].includes(error)) {
    return { kind: 'server', retry: true, retryAfterMs };
  }
  if (error === 'channel_not_found') return { kind: 'notFound', retry: false };
  if (error === 'is_archived' || error === 'channel_is_archived') return { kind: 'locked', retry: false };
  if (error === 'not_in_channel' || error === 'restricted_action' || error === 'missing_scope') {
    return { kind: 'permission', retry: false, condition: 'AuthenticationFailed' };
  }
  return { kind: 'validation', retry: false };
}

// ---------------------------------------------------------------------------------------------
// Failures without an answer, and our own refusals

/**
 * The verdict of a failure the transport or the caller describes by code (src/notifier/errors.ts
 * `ProviderError.code`), for errors made without an HTTP answer to read:
 * `TLS` → unreachable + `CertificateError`; `PROXY` → unreachable + `ProxyError`; `NETWORK` /
 * `TIMEOUT` → `ambiguous` when `sent` (the request reached the wire), else `unreachable`;
 * `ABORTED`/`CLOSED` → aborted; `REDIRECT` → redirect; `BAD_RESPONSE` → badResponse;
 * `HTTP_<status>` → by status alone; anything else (a request we refuse to make: a field over
 * its limit, no commit, a bad address) → validation, or as `retryable` says.
 */
export function verdictForCode(
  code: string,
  opts: {
    status?: number | undefined;
    retryable: boolean;
    retryAfterMs?: number | undefined;
    sent?: boolean;
  },
): Verdict {
  const { retryable, retryAfterMs } = opts;
  switch (code) {
    case 'TLS':
      return { kind: 'unreachable', retry: retryable, condition: 'CertificateError' };
    case 'PROXY':
      return { kind: 'unreachable', retry: retryable, condition: 'ProxyError' };
    case 'NETWORK':
    case 'TIMEOUT':
      return { kind: opts.sent === true ? 'ambiguous' : 'unreachable', retry: retryable };
    case 'ABORTED':
    case 'CLOSED':
      return { kind: 'aborted', retry: retryable };
    case 'REDIRECT':
      return { kind: 'redirect', retry: retryable };
    case 'BAD_RESPONSE':
      return { kind: 'badResponse', retry: retryable };
  }
  const status = opts.status;
  if (status !== undefined && /^HTTP_\d{3}$/.test(code)) {
    const c = classifyAnswer({ status, headers: { get: () => null }, body: '' }, 0);
    if (c !== undefined) {
      return { ...c.verdict, retry: retryable, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    }
  }
  return retryable
    ? { kind: 'server', retry: true, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) }
    : { kind: 'validation', retry: false };
}
