/**
 * JSON calls to forge REST APIs through the Provider's `ProviderHttp` (CA, proxy, timeout,
 * redacted errors), and narrowing helpers for the few fields each forge reads (no schema library
 * needed for them).
 */
import { classifyAnswer, isHtml } from '../notifier/classify.ts';
import { ProviderError } from '../notifier/errors.ts';
import type { HttpResponse, ProviderHttp } from '../notifier/http.ts';

/** Narrowing helpers for JSON read from forges. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
/** A string or a number, as a string (forges return ids as either). */
export function idOf(v: unknown): string | undefined {
  if (typeof v === 'string' && v !== '') return v;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return undefined;
}
/** Property `k` of `v` when `v` is an object. */
export function field(v: unknown, k: string): unknown {
  return isRecord(v) ? v[k] : undefined;
}

/** `{id}` of each item of `list` (an array; anything else holds none) with an `id` that `keep` accepts. */
export function idsWhere(list: unknown, keep: (item: unknown) => boolean): { id: string }[] {
  const out: { id: string }[] = [];
  for (const item of Array.isArray(list) ? (list as unknown[]) : []) {
    const id = idOf(field(item, 'id'));
    if (id !== undefined && keep(item)) out.push({ id });
  }
  return out;
}

/** A URL without its query (query strings may hold search terms we do not want in messages). */
export function describeURL(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/**
 * Parses a JSON answer.
 * @throws ProviderError when the body is not JSON (src/notifier/classify.ts): a sign-in page (a
 *   login proxy, or Azure DevOps' answer to expired credentials) is an authentication failure
 *   (`HTTP_<status>`, verdict `auth`); any other page `BAD_RESPONSE` — typically the address or
 *   apiURL points at the web UI. Neither is retryable.
 */
export function parseJson(res: HttpResponse, what: string, secretValues: readonly string[]): unknown {
  try {
    return res.text === '' ? null : (JSON.parse(res.text) as unknown);
  } catch {
    const c = classifyAnswer(
      { status: res.status, headers: res.headers, body: res.text, expectJson: true },
      0,
    );
    if (c?.verdict.kind === 'auth') {
      throw new ProviderError(
        `${what} answered ${res.status} with a sign-in page instead of JSON: the credentials were not accepted (expired or revoked?), or the address is a login or SSO page in front of the API; check the Provider's Secret (spec.secretRef) and that the Provider address (or spec.apiURL) is the API's`,
        {
          code: `HTTP_${res.status}`,
          status: res.status,
          retryable: false,
          secretValues,
          verdict: c.verdict,
        },
      );
    }
    // An HTML page (the web UI, a portal in front of the API) says the URL is wrong: the Provider
    // shows it (NotTheAPI, N13); a broken JSON body from the API itself does not.
    const html = isHtml(res.text, res.headers.get('content-type'));
    throw new ProviderError(
      `${what} answered ${res.status} with ${html ? 'an HTML page' : 'a body that is not JSON'}: set the Provider address (or spec.apiURL) to the forge's API URL`,
      {
        code: 'BAD_RESPONSE',
        status: res.status,
        retryable: false,
        secretValues,
        verdict: html
          ? { kind: 'badResponse', retry: false, condition: 'NotTheAPI' }
          : { kind: 'badResponse', retry: false },
      },
    );
  }
}

/** A ProviderError for an answer whose JSON lacks what the forge documents. */
export function badShape(what: string, secretValues: readonly string[]): ProviderError {
  return new ProviderError(
    `${what} answered with an unexpected JSON shape: check that the Provider address (or spec.apiURL) points at the forge's API`,
    { code: 'BAD_RESPONSE', retryable: false, secretValues },
  );
}

/**
 * The id (a string or a number) of what a create call answered, as a string.
 * @throws ProviderError `BAD_RESPONSE`, final, `<forge> answered a <thing> creation without a
 *   <thing> id`, when the answer has none.
 */
export function createdId(
  id: unknown,
  forge: string,
  thing: string,
  secretValues: readonly string[],
): string {
  const v = idOf(id);
  if (v === undefined)
    throw new ProviderError(`${forge} answered a ${thing} creation without a ${thing} id`, {
      code: 'BAD_RESPONSE',
      retryable: false,
      secretValues,
    });
  return v;
}

export interface JsonCall {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** Serialised as JSON with `Content-Type: application/json`. */
  body?: unknown;
  /** Non-2xx statuses returned instead of thrown (see `ProviderHttp.request`). */
  acceptStatus?: readonly number[];
  /** Cancels the call (the send's signal). */
  signal?: AbortSignal | undefined;
}

/**
 * One JSON API call through the Provider's `ProviderHttp` (CA, proxy, timeout, redacted errors).
 * Sends `Accept: application/json` (and the JSON content type with a body).
 * @returns the status, headers and parsed body (null for an empty body).
 * @throws ProviderError from the transport, for a non-2xx status not in `acceptStatus`, or
 *   `BAD_RESPONSE` for a body that is not JSON.
 */
export async function callJson(
  http: ProviderHttp,
  call: JsonCall,
): Promise<{ status: number; headers: HttpResponse['headers']; data: unknown }> {
  const res = await http.request(call.url, {
    method: call.method,
    headers: {
      Accept: 'application/json',
      ...(call.body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      ...call.headers,
    },
    ...(call.body !== undefined ? { body: JSON.stringify(call.body) } : {}),
    ...(call.acceptStatus !== undefined ? { acceptStatus: call.acceptStatus } : {}),
    ...(call.signal !== undefined ? { signal: call.signal } : {}),
  });
  const ok = res.status >= 200 && res.status <= 299;
  const data = ok ? parseJson(res, `${call.method} ${describeURL(call.url)}`, http.secretValues) : null;
  return { status: res.status, headers: res.headers, data };
}

/**
 * Whether `GET url` finds something (false on 404), for a pull request named by an event.
 * @throws ProviderError from the call for any other non-2xx answer.
 */
export async function exists(
  http: ProviderHttp,
  url: string,
  headers: Record<string, string>,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const { status } = await callJson(http, { method: 'GET', url, headers, acceptStatus: [404], signal });
  return status !== 404;
}
