/**
 * Logic shared by the git forge notifiers (gitlab, gitea, bitbucket, bitbucketserver,
 * azuredevops; github may use it too): commit-status deduplication, the sticky pull-request
 * comment upsert, pull-request selection, and small HTTP helpers.
 *
 * Design §4: forge writes are idempotent — a commit status identical (state and description) to
 * the newest one for its context is not posted again (case F05), and the newest one is found by
 * reading the forge, paging through everything (F06), when this process has not seen it yet;
 * the sticky comment is identified by its hidden marker AND by being authored by the
 * Provider's own identity, across all pages (F16), and edited in place.
 */
import { createHash } from 'node:crypto';
import type { NotificationEvent } from '../api/event.ts';
import type { GitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { resolveRepository, type ForgeRepo } from './address.ts';
import { ProviderError } from './errors.ts';
import type { HttpResponse, ProviderHttp } from './http.ts';
import type { CommitState, Notifier, RenderedNotification } from './types.ts';

/** Default bound of every per-notifier cache (statuses, comments), in entries. */
export const FORGE_CACHE_ENTRIES = 10_000;

/**
 * A small least-recently-used map. `get` refreshes an entry; `set` evicts the oldest entry once
 * `max` entries are held.
 */
export class LruCache<V> {
  readonly #max: number;
  readonly #map = new Map<string, V>();

  constructor(max: number = FORGE_CACHE_ENTRIES) {
    this.#max = Math.max(1, max);
  }

  get(key: string): V | undefined {
    const v = this.#map.get(key);
    if (v !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, v);
    }
    return v;
  }

  set(key: string, value: V): void {
    this.#map.delete(key);
    this.#map.set(key, value);
    while (this.#map.size > this.#max) {
      const oldest = this.#map.keys().next();
      if (oldest.done === true) break;
      this.#map.delete(oldest.value);
    }
  }

  delete(key: string): void {
    this.#map.delete(key);
  }

  get size(): number {
    return this.#map.size;
  }
}

/** A commit status as the forge holds it: the forge's own state word and the description ('' when none). */
export interface StatusSnapshot {
  state: string;
  description: string;
}

/** The newest status this process wrote or read, per `statusKey(repo, sha, context)`. */
export type StatusCache = LruCache<StatusSnapshot>;

/** Cache key of one commit status: repository identity, commit SHA, context (NUL-separated). */
export function statusKey(repoKey: string, sha: string, context: string): string {
  return `${repoKey}\u0000${sha}\u0000${context}`;
}

/** Whether two statuses are the same for deduplication: state and description (F05); URLs are not compared. */
export function sameStatus(a: StatusSnapshot, b: StatusSnapshot): boolean {
  return a.state === b.state && a.description === b.description;
}

export interface SyncStatusOptions {
  cache: StatusCache;
  /** `statusKey(...)`. */
  key: string;
  want: StatusSnapshot;
  /** Reads the forge's newest status for this (sha, context), paging through all; undefined when none. */
  readCurrent: () => Promise<StatusSnapshot | undefined>;
  /** Posts `want`. */
  write: () => Promise<void>;
}

/**
 * Makes `want` the newest status of its (repository, commit, context) unless it already is.
 * Cache hit equal to `want` → nothing is sent; cache miss or different → the forge's current
 * status is read (one listing, all pages) and `want` is posted only when it differs. The cache
 * is updated after a successful read or write.
 * @returns `'unchanged'` (nothing posted) or `'written'`.
 * @throws ProviderError from `readCurrent`/`write`.
 */
export async function syncCommitStatus(opts: SyncStatusOptions): Promise<'unchanged' | 'written'> {
  const cached = opts.cache.get(opts.key);
  if (cached !== undefined && sameStatus(cached, opts.want)) return 'unchanged';
  if (cached === undefined) {
    const current = await opts.readCurrent();
    if (current !== undefined) {
      opts.cache.set(opts.key, current);
      if (sameStatus(current, opts.want)) return 'unchanged';
    }
  }
  await opts.write();
  opts.cache.set(opts.key, { ...opts.want });
  return 'written';
}

/**
 * One comment on a pull request as the forge lists it. `ref` is whatever the forge needs to edit
 * it (an id; Bitbucket Data Center adds the version; Azure DevOps the thread id). `mine` is true
 * when the Provider's own identity authored it.
 */
export interface ForgeComment {
  ref: string;
  body: string;
  mine: boolean;
}

/** The sticky comment this process last wrote or found, per `commentKey(...)`: its `ref` and body. */
export type CommentCache = LruCache<{ ref: string; body: string }>;

/** Cache key of one sticky comment: repository identity, pull request id, marker. */
export function commentKey(repoKey: string, pullRequest: string, marker: string): string {
  return `${repoKey}\u0000${pullRequest}\u0000${marker}`;
}

export interface UpsertCommentOptions {
  cache: CommentCache;
  /** `commentKey(...)`. */
  key: string;
  /** Hidden marker identifying the sticky comment (contained in `body`). */
  marker: string;
  body: string;
  /** Lists every comment of the pull request, page by page (stop early by breaking out). */
  pages: () => AsyncIterable<readonly ForgeComment[]>;
  /** Creates the comment; returns its `ref`. */
  create: (body: string) => Promise<string>;
  /** Replaces the body of the comment `ref`; returns its (possibly new) `ref`. */
  edit: (ref: string, body: string) => Promise<string>;
}

/**
 * Creates or edits in place the one sticky comment of ours on a pull request (F16).
 * A comment is ours when it contains `marker` AND `mine` is true: a human's comment that quotes
 * the marker is never touched. The first matching comment in listing order is the sticky one;
 * an identical body is left alone. A cached `ref` is edited directly; if the forge says it is
 * gone (404), the pull request is listed again.
 * @returns what was done.
 * @throws ProviderError from the forge calls.
 */
export async function upsertStickyComment(
  opts: UpsertCommentOptions,
): Promise<'created' | 'edited' | 'unchanged'> {
  const cached = opts.cache.get(opts.key);
  if (cached !== undefined) {
    if (cached.body === opts.body) return 'unchanged';
    try {
      const ref = await opts.edit(cached.ref, opts.body);
      opts.cache.set(opts.key, { ref, body: opts.body });
      return 'edited';
    } catch (err) {
      if (!(err instanceof ProviderError) || err.status !== 404) throw err;
      opts.cache.delete(opts.key);
    }
  }
  let found: ForgeComment | undefined;
  search: for await (const page of opts.pages()) {
    for (const c of page) {
      if (c.mine && c.body.includes(opts.marker)) {
        found = c;
        break search;
      }
    }
  }
  if (found === undefined) {
    const ref = await opts.create(opts.body);
    opts.cache.set(opts.key, { ref, body: opts.body });
    return 'created';
  }
  if (found.body === opts.body) {
    opts.cache.set(opts.key, { ref: found.ref, body: found.body });
    return 'unchanged';
  }
  const ref = await opts.edit(found.ref, opts.body);
  opts.cache.set(opts.key, { ref, body: opts.body });
  return 'edited';
}

/**
 * A value computed once on first use and kept; a failed computation is not kept (the next call
 * tries again). Used for the Provider's own identity (GET /user and the like).
 */
export class Lazy<T> {
  readonly #compute: () => Promise<T>;
  #value: Promise<T> | undefined;

  constructor(compute: () => Promise<T>) {
    this.#compute = compute;
  }

  get(): Promise<T> {
    if (this.#value === undefined) {
      const p = this.#compute();
      this.#value = p;
      p.catch(() => {
        if (this.#value === p) this.#value = undefined;
      });
    }
    return this.#value;
  }
}

/** `Basic <base64(user:password)>`. */
export function basicAuth(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

/**
 * Fits `value` into `max` characters for forges that bound identifiers (Bitbucket build `key`
 * ≤ 40, facts/forges.md): values that fit are kept; longer ones become a prefix of the value,
 * `-`, and the first 16 hex digits of its SHA-256, so distinct long values stay distinct and the
 * same value always maps to the same key.
 */
export function boundedKey(value: string, max: number): string {
  if (value.length <= max) return value;
  const digest = createHash('sha256').update(value, 'utf8').digest('hex').slice(0, 16);
  const keep = Math.max(0, max - digest.length - 1);
  return keep === 0 ? digest.slice(0, max) : `${value.slice(0, keep)}-${digest}`;
}

/**
 * Parses a JSON answer.
 * @throws ProviderError `BAD_RESPONSE` (not retryable) when the body is not JSON — typically an
 *   HTML page because the address or apiURL points at the web UI or a login proxy.
 */
export function parseJson(res: HttpResponse, what: string, secretValues: readonly string[]): unknown {
  try {
    return res.text === '' ? null : (JSON.parse(res.text) as unknown);
  } catch {
    throw new ProviderError(
      `${what} answered ${res.status} with a body that is not JSON: check that the Provider address (or spec.apiURL) points at the forge's API`,
      { code: 'BAD_RESPONSE', status: res.status, retryable: false, secretValues },
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

/** Narrowing helpers for JSON read from forges (no schema library needed for the few fields used). */
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

/** The `rel="next"` target of an RFC 8288 `Link` header, or undefined. */
export function nextLink(link: string | null): string | undefined {
  if (link === null) return undefined;
  for (const part of link.split(',')) {
    const m = /<([^>]*)>\s*;(.*)$/.exec(part.trim());
    if (m !== null && /\brel\s*=\s*"?(?:[^"]*\s)?next(?:\s[^"]*)?"?/i.test(m[2] ?? '')) return m[1];
  }
  return undefined;
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
 * The repository an event goes to (`resolveRepository` from ./address.ts with the Provider's
 * address and apiURL and the Stack's repository, `metadata.repository`).
 * @throws ProviderError with `code` = the failure reason (`InvalidAddress`, `NoRepository`,
 *   `OutsideAddress`), not retryable: the Provider or the Stack must change.
 */
export function repositoryFor(
  type: GitProviderType,
  p: ResolvedProvider,
  ev: NotificationEvent,
  secretValues: readonly string[],
): ForgeRepo {
  const r = resolveRepository(type, p.address, p.apiURL, ev.metadata.repository);
  if (r.ok) return r.repo;
  throw new ProviderError(`Provider ${p.namespace}/${p.name}: ${r.message}`, {
    code: r.reason,
    retryable: false,
    secretValues,
  });
}

/** Pull request ids named explicitly by the event (`metadata.pullRequest`, a positive integer), or undefined. */
export function explicitPullRequest(ev: NotificationEvent): string | undefined {
  const v = ev.metadata.pullRequest?.trim();
  return v !== undefined && /^[1-9]\d*$/.test(v) ? v : undefined;
}

/**
 * The forge-specific half of a git notifier; `forgeNotifier` drives it. `R` is the resolved
 * repository (from `resolveRepository`), `P` a pull request as the forge describes it.
 */
export interface ForgeAdapter<R, P extends { id: string }> {
  /** Resolves the repository of this event (Provider address, or the Stack's repository). @throws ProviderError */
  repository(ev: NotificationEvent): R;
  /** Stable identity of `repo` for cache keys (e.g. its API URL). */
  repoKey(repo: R): string;
  /** The forge's state word for a neutral state. */
  nativeState(state: CommitState): string;
  /** The description as the forge stores it (e.g. bounded), so that it compares equal on read-back. */
  nativeDescription?: (description: string) => string;
  /** The newest status of `context` on `sha`, reading all pages; undefined when none. */
  readStatus(ctx: SendContext<R, P>, context: string): Promise<StatusSnapshot | undefined>;
  /** Posts the status. */
  writeStatus(ctx: SendContext<R, P>, status: NativeStatus): Promise<void>;
  /** Open pull requests whose head is `ctx.sha` (the explicit one, when named, is fetched by `pullRequest`). */
  pullRequestsForCommit(ctx: SendContext<R, P>): Promise<P[]>;
  /** The pull request named by `metadata.pullRequest`; undefined when the forge says it does not exist. */
  pullRequest(ctx: SendContext<R, P>, id: string): Promise<P | undefined>;
  /** Every comment of `pr`, page by page, with `mine` filled from the Provider's identity. */
  comments(ctx: SendContext<R, P>, pr: P): AsyncIterable<readonly ForgeComment[]>;
  createComment(ctx: SendContext<R, P>, pr: P, body: string): Promise<string>;
  editComment(ctx: SendContext<R, P>, pr: P, ref: string, body: string): Promise<string>;
}

/** A commit status in the forge's terms, ready to post. */
export interface NativeStatus {
  state: string;
  context: string;
  description: string;
  targetURL: string | undefined;
}

/** Per-send state handed to the adapter: the event, the repository, the commit, and the memoised pull requests. */
export interface SendContext<R, P> {
  ev: NotificationEvent;
  repo: R;
  sha: string;
  /** The pull requests to comment on (explicit one first, else the forge's query); memoised per send. */
  pullRequests(): Promise<P[]>;
}

/**
 * Builds a `Notifier` from a forge adapter. `send`:
 * 1. requires `metadata.commit` (40 hex digits; the dispatcher never calls a git notifier without it);
 * 2. resolves the repository (adapter);
 * 3. with `rendered.commitStatus`: `syncCommitStatus` (skip when identical to the newest);
 * 4. with `rendered.comment` and `pullRequestComment` on: for each pull request (explicit
 *    `metadata.pullRequest`, else open ones whose head is the commit) `upsertStickyComment`.
 * A retried send repeats nothing that already took effect (both steps are idempotent).
 * @throws ProviderError
 */
export function forgeNotifier<R, P extends { id: string }>(
  http: ProviderHttp,
  opts: { pullRequestComment: boolean; label: string },
  adapter: ForgeAdapter<R, P>,
): Notifier {
  const statuses: StatusCache = new LruCache();
  const comments: CommentCache = new LruCache();
  const secretValues = http.secretValues;

  return {
    async send(ev: NotificationEvent, rendered: RenderedNotification): Promise<void> {
      const sha = ev.metadata.commit?.trim().toLowerCase();
      if (sha === undefined || !/^[0-9a-f]{40}$/.test(sha)) {
        throw new ProviderError(
          `${opts.label}: the event has no commit SHA (metadata.commit), so there is nothing to set a status on`,
          { code: 'NO_COMMIT', retryable: false, secretValues },
        );
      }
      const repo = adapter.repository(ev);
      const repoKey = adapter.repoKey(repo);
      let prs: Promise<P[]> | undefined;
      const ctx: SendContext<R, P> = {
        ev,
        repo,
        sha,
        pullRequests: () => {
          prs ??= (async () => {
            const explicit = explicitPullRequest(ev);
            if (explicit !== undefined) {
              const pr = await adapter.pullRequest(ctx, explicit);
              return pr === undefined ? [] : [pr];
            }
            return adapter.pullRequestsForCommit(ctx);
          })();
          return prs;
        },
      };

      const cs = rendered.commitStatus;
      if (cs !== undefined) {
        const description = adapter.nativeDescription
          ? adapter.nativeDescription(cs.description)
          : cs.description;
        const native: NativeStatus = {
          state: adapter.nativeState(cs.state),
          context: cs.context,
          description,
          targetURL: cs.targetURL,
        };
        await syncCommitStatus({
          cache: statuses,
          key: statusKey(repoKey, sha, cs.context),
          want: { state: native.state, description },
          readCurrent: () => adapter.readStatus(ctx, cs.context),
          write: () => adapter.writeStatus(ctx, native),
        });
      }

      const comment = rendered.comment;
      if (comment !== undefined && opts.pullRequestComment) {
        for (const pr of await ctx.pullRequests()) {
          await upsertStickyComment({
            cache: comments,
            key: commentKey(repoKey, pr.id, comment.marker),
            marker: comment.marker,
            body: comment.body,
            pages: () => adapter.comments(ctx, pr),
            create: (body) => adapter.createComment(ctx, pr, body),
            edit: (ref, body) => adapter.editComment(ctx, pr, ref, body),
          });
        }
      }
    },
    close: () => http.close(),
  };
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

export interface JsonCall {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** Serialised as JSON with `Content-Type: application/json`. */
  body?: unknown;
  /** Non-2xx statuses returned instead of thrown (see `ProviderHttp.request`). */
  acceptStatus?: readonly number[];
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
  });
  const ok = res.status >= 200 && res.status <= 299;
  const data = ok ? parseJson(res, `${call.method} ${describeURL(call.url)}`, http.secretValues) : null;
  return { status: res.status, headers: res.headers, data };
}

/** A URL without its query (query strings may hold search terms we do not want in messages). */
export function describeURL(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
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
): AsyncGenerator<unknown[], void, undefined> {
  return pages<unknown, string>(
    url,
    async (u) => {
      const { data, headers: h } = await callJson(http, { method: 'GET', url: u, headers });
      if (!Array.isArray(data)) throw badShape(`GET ${describeURL(u)}`, http.secretValues);
      const next = nextLink(h.get('link'));
      return {
        items: data as unknown[],
        next:
          next === undefined || data.length === 0 ? undefined : sameOriginNext(next, u, http.secretValues),
      };
    },
    what,
    http.secretValues,
  );
}

/**
 * Authorization headers for forges taking either a token or a username/password pair:
 * with `username` and a password (or, lacking one, the token: Atlassian API tokens and Azure
 * DevOps PATs work as basic-auth passwords) → `Basic`; else the token with `tokenScheme`
 * (`Bearer`, or Gitea's `token`).
 * @throws Error when the Provider has neither (resolveProvider already refuses that).
 */
export function authHeaders(p: ResolvedProvider, tokenScheme: string, label: string): Record<string, string> {
  const secret = p.password ?? p.token;
  if (p.username !== undefined && secret !== undefined) {
    return { Authorization: basicAuth(p.username, secret) };
  }
  if (p.token !== undefined) return { Authorization: `${tokenScheme} ${p.token}` };
  throw new Error(
    `Provider ${p.namespace}/${p.name}: type '${label}' needs credentials: key 'token', or 'username' (or spec.username) and 'password', in the Provider's Secret`,
  );
}

/** Collects every item of a paged listing. */
export async function collect<T>(it: AsyncIterable<readonly T[]>): Promise<T[]> {
  const out: T[] = [];
  for await (const page of it) out.push(...page);
  return out;
}
