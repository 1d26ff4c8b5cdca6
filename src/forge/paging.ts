/**
 * Paged listings of forge APIs: every page is read (a status or comment of ours may be on the
 * last one: case F06), within a bound, following only links on the request's own origin.
 * RFC 8288 `Link` headers are parsed with `http-link-header`.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import LinkHeader from 'http-link-header';
import { ProviderError } from '../notifier/errors.ts';
import type { ProviderHttp } from '../notifier/http.ts';
import { badShape, callJson, describeURL, isRecord } from './json.ts';

/** The `rel="next"` target of an RFC 8288 `Link` header, or undefined (also for an unparsable header). */
export function nextLink(link: string | null): string | undefined {
  if (link === null || link.trim() === '') return undefined;
  try {
    return LinkHeader.parse(link).rel('next')[0]?.uri;
  } catch {
    return undefined;
  }
}

/** Bound of pages read from any one listing: 1,000 pages (≥ 20,000 items) means a forge bug or loop. */
export const MAX_PAGES = 1_000;

/**
 * A ProviderError for a listing that did not end within `MAX_PAGES` pages (a forge answering
 * the same `next` link forever).
 */
export function tooManyPages(what: string, secretValues: readonly string[]): ProviderError {
  return new ProviderError(`${what}: more than ${MAX_PAGES} pages; giving up`, {
    code: 'TOO_MANY_PAGES',
    retryable: false,
    secretValues,
  });
}

/**
 * A next-page URL given by the forge must stay on the same origin as the request (credentials
 * never travel elsewhere): relative links are resolved against `base`.
 * @throws ProviderError `BAD_RESPONSE` for a link to another origin.
 */
export function sameOriginNext(next: string, base: string, secretValues: readonly string[]): string {
  const u = new URL(next, base);
  if (u.origin !== new URL(base).origin) {
    throw new ProviderError(
      `the forge's next-page link points at another origin (${u.origin}): refusing to send credentials there`,
      { code: 'BAD_RESPONSE', retryable: false, secretValues },
    );
  }
  return u.toString();
}

/**
 * Runs a paged listing: `fetchPage(cursor)` returns one page's items and the next cursor
 * (undefined at the end). Yields page by page; stops with `tooManyPages` after `MAX_PAGES`.
 */
export async function* pages<T, C>(
  first: C,
  fetchPage: (cursor: C) => Promise<{ items: T[]; next: C | undefined }>,
  what: string,
  secretValues: readonly string[],
): AsyncGenerator<T[], void, undefined> {
  let cursor: C | undefined = first;
  for (let n = 0; cursor !== undefined; n++) {
    if (n >= MAX_PAGES) throw tooManyPages(what, secretValues);
    const page: { items: T[]; next: C | undefined } = await fetchPage(cursor);
    yield page.items;
    cursor = page.next;
  }
}

/**
 * The array a listing page holds: `data` itself, or its field `key` (`values`).
 * @throws ProviderError `BAD_RESPONSE` (naming `GET <url>` without its query) when it is not an array.
 */
export function pageItems(
  data: unknown,
  url: string,
  secretValues: readonly string[],
  key?: string,
): unknown[] {
  const items = key === undefined ? data : isRecord(data) ? data[key] : undefined;
  if (!Array.isArray(items)) throw badShape(`GET ${describeURL(url)}`, secretValues);
  return items as unknown[];
}

/**
 * A page of `items` fetched from `url` whose answer named `next`: followed on `url`'s origin only
 * ({@link sameOriginNext}); an empty page or no `next` ends the listing.
 * @throws ProviderError `BAD_RESPONSE` for a `next` on another origin.
 */
export function pageWithNext(
  items: unknown[],
  next: string | undefined,
  url: string,
  secretValues: readonly string[],
): { items: unknown[]; next: string | undefined } {
  return {
    items,
    next: next === undefined || items.length === 0 ? undefined : sameOriginNext(next, url, secretValues),
  };
}

/**
 * Pages of a JSON-array listing that paginates with RFC 8288 `Link: <…>; rel="next"` (Gitea,
 * GitLab): starts at `url`, follows `next` (same origin only) until there is none.
 * @throws ProviderError from the calls, `BAD_RESPONSE` for a page that is not an array,
 *   `TOO_MANY_PAGES` after `MAX_PAGES`.
 */
export function linkPages(
  http: ProviderHttp,
  url: string,
  headers: Record<string, string>,
  what: string,
  signal?: AbortSignal,
): AsyncGenerator<unknown[], void, undefined> {
  return pages<unknown, string>(
    url,
    async (u) => {
      const { data, headers: h } = await callJson(http, { method: 'GET', url: u, headers, signal });
      return pageWithNext(
        pageItems(data, u, http.secretValues),
        nextLink(h.get('link')),
        u,
        http.secretValues,
      );
    },
    what,
    http.secretValues,
  );
}

/** Collects every item of a paged listing. */
export async function collect<T>(it: AsyncIterable<readonly T[]>): Promise<T[]> {
  const out: T[] = [];
  for await (const page of it) out.push(...page);
  return out;
}
