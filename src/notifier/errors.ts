/**
 * Errors raised by notifiers and the shared HTTP layer, and the retry facts read from HTTP
 * responses (status classes, `Retry-After`, rate-limit headers).
 *
 * A `ProviderError` message may end up in logs, Kubernetes Events and `status.conditions`,
 * so it is sanitised when the error is constructed (case F23): secret values are redacted,
 * URLs lose their userinfo, query string and fragment, a URL that is itself a secret (a
 * webhook address kept in a Secret) is replaced whole together with anything appended to it,
 * control characters are flattened, and the result is bounded to 512 characters.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { redact, REDACTED } from '../credential/redact.ts';
import { boundText, measure, type FieldLimit } from '../text.ts';
import { verdictForCode, type Verdict } from './classify.ts';

export {
  isRetryableStatus,
  MAX_RETRY_AFTER_MS,
  retryAfterFrom,
  type HeaderReader,
  type Verdict,
} from './classify.ts';

/** Upper bound (characters) of every `ProviderError.message`. */
export const MAX_ERROR_MESSAGE_LENGTH = 512;
/** Upper bound (characters) of the response-body excerpt quoted in an error message. */
export const MAX_BODY_EXCERPT_LENGTH = 200;

export interface ProviderErrorOptions {
  /** HTTP status of the endpoint's answer; undefined for network, TLS, proxy and timeout failures. */
  status?: number | undefined;
  /** Whether the delivery layer should try again (with backoff). */
  retryable: boolean;
  /** Minimum wait before the next attempt, in milliseconds, when the endpoint said so. */
  retryAfterMs?: number | undefined;
  /** Stable machine-readable code: `HTTP_<status>`, `TIMEOUT`, `TLS`, `NETWORK`, `PROXY`, `REDIRECT`, … */
  code: string;
  /** Every secret value of the Provider (`ResolvedProvider.secretValues`): redacted from the message. */
  secretValues: readonly string[];
  /**
   * The classification (./classify.ts). When given, its `retry` and `retryAfterMs` win over
   * `retryable` and `retryAfterMs`; else it is derived from `code`, `status` and `retryable`.
   */
  verdict?: Verdict | undefined;
}

/** `: will retry;` in the middle of a message (the TIMEOUT hint goes on after it). */
const RETRY_PROMISE_MID = /:\s*will retry(?: after \d+(?:\.\d+)?m?s)?;\s*/g;
/** `; will retry`, `; will retry after 7s`, `: will retry` where a clause ends. */
const RETRY_PROMISE = /\s*[;:,]?\s*will retry(?: after \d+(?:\.\d+)?m?s)?(?=$|[.;,)])/g;

/**
 * `message` without its promise to retry (`…; will retry after 7s`), for what the controller
 * writes once it stopped retrying (retries exhausted, a final failure, an outcome it cannot
 * confirm): a message saying both "gave up" and "will retry" tells the user nothing.
 */
export function withoutRetryPromise(message: string): string {
  return message.replace(RETRY_PROMISE_MID, ': ').replace(RETRY_PROMISE, '');
}

/**
 * A failed call to a provider endpoint. `message` says what failed and what to do about it,
 * and is already safe to show anywhere (see the module comment); no `cause` is attached,
 * because lower-level errors may carry unredacted URLs or bodies.
 */
export class ProviderError extends Error {
  readonly status: number | undefined;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  readonly code: string;
  /** What this failure means for delivery: kind, retry, Provider condition (./classify.ts). */
  readonly verdict: Verdict;

  constructor(message: string, opts: ProviderErrorOptions) {
    super(sanitizeErrorText(message, opts.secretValues, MAX_ERROR_MESSAGE_LENGTH));
    this.name = 'ProviderError';
    this.status = opts.status;
    this.code = opts.code;
    this.verdict =
      opts.verdict ??
      verdictForCode(opts.code, {
        status: opts.status,
        retryable: opts.retryable,
        retryAfterMs: opts.retryAfterMs,
      });
    this.retryable = this.verdict.retry;
    this.retryAfterMs = this.verdict.retry ? (this.verdict.retryAfterMs ?? opts.retryAfterMs) : undefined;
  }
}

/**
 * A short, single-line, redacted excerpt of a response body for error messages: secrets are
 * redacted BEFORE cutting (so a cut never leaves half a secret), whitespace is collapsed, and
 * the result has at most `max` characters (an ellipsis marks a cut).
 */
export function bodyExcerpt(
  body: string,
  secretValues: readonly string[],
  max: number = MAX_BODY_EXCERPT_LENGTH,
): string {
  return sanitizeErrorText(body, secretValues, max);
}

/**
 * Makes `text` safe to show: see the module comment for the steps. `max` bounds the result in
 * UTF-16 units, i.e. `result.length <= max` (a trailing `…` marks a cut).
 */
export function sanitizeErrorText(text: string, secretValues: readonly string[], max: number): string {
  let out = text;
  // 1. A secret URL (webhook address, proxy URL) and whatever was appended to it (paths, query).
  for (const v of secretValues) {
    if (v.length >= 4 && /^[a-z][a-z0-9+.-]*:\/\//i.test(v)) out = replaceWithContinuation(out, v);
  }
  // 2. Userinfo, query strings and fragments of every URL.
  out = out.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi, stripUrl);
  // 3. Every secret value (and its URL-encoded and base64 forms).
  out = redact(out, secretValues);
  // 4. One line, no control characters.
  out = out
    .replace(/\p{Cc}+/gu, ' ')
    .replace(/ {2,}/g, ' ')
    .trim();
  return boundText(out, max, 'utf16');
}

function replaceWithContinuation(text: string, value: string): string {
  let out = '';
  let from = 0;
  for (;;) {
    const i = text.indexOf(value, from);
    if (i < 0) break;
    out += text.slice(from, i) + REDACTED;
    let j = i + value.length;
    while (j < text.length && !/[\s"'<>`]/.test(text.charAt(j))) j++;
    from = j;
  }
  return out + text.slice(from);
}

function stripUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.username === '' && u.password === '' && u.search === '' && u.hash === '') return raw;
    const origin = u.host === '' ? u.protocol : `${u.protocol}//${u.host}`;
    return `${origin}${u.pathname}${u.search !== '' ? '?…' : ''}`;
  } catch {
    const noQuery = raw.replace(/[?#].*$/, '');
    return noQuery.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/]*@/i, '$1');
  }
}

/**
 * Refuses a request body over the service's payload limit (`maxBytes` UTF-8 bytes) that fitting
 * (./fit-body.ts) could not bring under it.
 * @throws ProviderError `LIMIT_EXCEEDED`, not retryable: `<what> is over <maxBytes> bytes; not sent`.
 */
export function assertPayloadFits(
  body: string,
  maxBytes: number,
  what: string,
  secretValues: readonly string[],
): void {
  if (Buffer.byteLength(body, 'utf8') <= maxBytes) return;
  throw new ProviderError(`${what} is over ${String(maxBytes)} bytes; not sent`, {
    code: 'LIMIT_EXCEEDED',
    retryable: false,
    secretValues,
  });
}

/**
 * Refuses a rendered field over its limit: the renderer fits every field, so a longer one is a
 * bug, refused before any request rather than cut a second time.
 * @throws ProviderError `LIMIT_EXCEEDED`, not retryable, naming the field, its length and the limit.
 */
export function assertFits(
  value: string,
  limit: FieldLimit | undefined,
  what: string,
  secretValues: readonly string[],
): void {
  if (limit === undefined) return;
  const n = measure(value, limit.unit);
  if (n <= limit.max) return;
  throw new ProviderError(`${what} is ${n} ${limit.unit} long, over the limit of ${limit.max}; not sent`, {
    code: 'LIMIT_EXCEEDED',
    retryable: false,
    secretValues,
  });
}
