/**
 * Idempotent commit statuses (docs/architecture.md, "Forges"): a status identical (state and
 * description) to the newest one for its context is not posted again (case F05), and the newest
 * one is found by reading the forge, paging through everything (F06), when this process has not
 * seen it yet. One cache per notifier remembers what was read or written.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { LRUCache } from 'lru-cache';
import type { StatusSnapshot } from './types.ts';

/** Bound of every per-notifier cache (statuses, comments), in entries. */
export const FORGE_CACHE_ENTRIES = 10_000;

/**
 * The newest status this process wrote or read, per `statusKey(repo, sha, context)`, and per
 * `contextKey(repo, context)` the last one seen for that context on any commit (for forges that
 * read once per context).
 */
export type StatusCache = LRUCache<string, StatusSnapshot>;

export function newStatusCache(max = FORGE_CACHE_ENTRIES): StatusCache {
  return new LRUCache<string, StatusSnapshot>({ max });
}

/** Cache key of one commit status: repository identity, commit SHA, context (NUL-separated). */
export function statusKey(repoKey: string, sha: string, context: string): string {
  return `${repoKey}\u0000${sha}\u0000${context}`;
}

/** Cache key of a context in a repository, whatever the commit (contexts compare case-insensitively). */
export function contextKey(repoKey: string, context: string): string {
  return `${repoKey}\u0000*\u0000${context.toLowerCase()}`;
}

/** Whether two statuses are the same for deduplication: state and description (F05); URLs are not compared. */
export function sameStatus(a: StatusSnapshot, b: StatusSnapshot): boolean {
  return a.state === b.state && a.description === b.description;
}

export interface SyncStatusOptions {
  cache: StatusCache;
  repoKey: string;
  sha: string;
  context: string;
  want: StatusSnapshot;
  /** See `StatusPart.readPolicy`. */
  readPolicy: 'perCommit' | 'perContext';
  /** Reads the forge's newest status for this (sha, context), paging through all; undefined when none. */
  readCurrent: () => Promise<StatusSnapshot | undefined>;
  /** Posts `want`. */
  write: () => Promise<void>;
}

/**
 * Makes `want` the newest status of its (repository, commit, context) unless it already is.
 * Cache hit equal to `want` → nothing is sent; cache miss → the forge's current status is read
 * (one listing, all pages; with `perContext`, only the first time the context is seen in the
 * repository) and `want` is posted only when it differs. The cache is updated after a successful
 * read or write; a failed write empties it for that status, so the retry reads the forge first (a
 * write that timed out may have been stored).
 * @returns `'unchanged'` (nothing posted) or `'written'`.
 * @throws ProviderError from `readCurrent`/`write`.
 */
export async function syncCommitStatus(opts: SyncStatusOptions): Promise<'unchanged' | 'written'> {
  const { cache } = opts;
  const key = statusKey(opts.repoKey, opts.sha, opts.context);
  const ctxKey = contextKey(opts.repoKey, opts.context);
  const cached = cache.get(key);
  if (cached !== undefined && sameStatus(cached, opts.want)) return 'unchanged';
  if (cached === undefined && (opts.readPolicy === 'perCommit' || !cache.has(ctxKey))) {
    const current = await opts.readCurrent();
    if (opts.readPolicy === 'perContext') cache.set(ctxKey, current ?? { state: '', description: '' });
    if (current !== undefined) {
      cache.set(key, current);
      if (sameStatus(current, opts.want)) return 'unchanged';
    }
  }
  try {
    await opts.write();
  } catch (err) {
    // The forge may have stored it anyway (a timeout or reset after the request was sent): forget
    // what we knew, so the retry reads the forge's status before it writes (no duplicate status).
    cache.delete(key);
    if (opts.readPolicy === 'perContext') cache.delete(ctxKey);
    throw err;
  }
  cache.set(key, { ...opts.want });
  if (opts.readPolicy === 'perContext') cache.set(ctxKey, { ...opts.want });
  return 'written';
}
