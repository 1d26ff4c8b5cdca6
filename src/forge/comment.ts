/**
 * The sticky pull-request comment (docs/architecture.md, "Forges"): identified by its hidden
 * marker AND by being authored by the Provider's own identity, across all pages (case F16), and
 * edited in place.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { LRUCache } from 'lru-cache';
import { ProviderError } from '../notifier/errors.ts';
import { FORGE_CACHE_ENTRIES } from './status.ts';
import type { ForgeComment } from './types.ts';

/** The sticky comment this process last wrote or found, per `commentKey(...)`: its `ref` and body. */
export type CommentCache = LRUCache<string, { ref: string; body: string }>;

export function newCommentCache(max = FORGE_CACHE_ENTRIES): CommentCache {
  return new LRUCache<string, { ref: string; body: string }>({ max });
}

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
  /**
   * Only edit a sticky comment that exists; create none (the base Stack's deployment of a merged
   * pull request continues its preview's comment, and writes nothing where there was none).
   */
  onlyEdit?: boolean;
}

/**
 * Creates or edits in place the one sticky comment of ours on a pull request (F16).
 * A comment is ours when it contains `marker` AND `mine` is true: a human's comment that quotes
 * the marker is never touched. The first matching comment in listing order is the sticky one;
 * an identical body is left alone. A cached `ref` is edited directly; if the forge says it is
 * gone (404), the pull request is listed again. With `onlyEdit`, a pull request without one gets
 * none (`'absent'`).
 * @returns what was done.
 * @throws ProviderError from the forge calls.
 */
export async function upsertStickyComment(
  opts: UpsertCommentOptions,
): Promise<'created' | 'edited' | 'unchanged' | 'absent'> {
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
    if (opts.onlyEdit === true) return 'absent';
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
