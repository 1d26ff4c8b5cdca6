/**
 * Redirects, followed where that is safe (case N07: a renamed or transferred repository): a
 * `301`/`302`/`307`/`308` to the SAME origin (scheme, host and port) is followed with the method,
 * headers and body kept — RFC 9110 §15.4 allows keeping the method for 301/302, and a forge that
 * answers a write on an old path with 301 (Gitea 1.27.3, observed) or 307 (GitHub) means "send it
 * there" — and a `303` as a GET without body. At most {@link MAX_REDIRECTS} hops. A redirect to
 * another origin is never followed: credentials are only ever sent where the Provider points.
 *
 * Permanent moves (`301`, `308`) are remembered per origin as a path-prefix rewrite (the part of
 * the path before what the old and new locations share), so later calls to the same repository
 * go straight to its new place: `/api/v1/repos/acme/app/…` → `/api/v1/repos/platform/app2/…`.
 */
import { LRUCache } from 'lru-cache';
import type { Response } from 'undici';

/** Bound of redirects followed for one request. */
export const MAX_REDIRECTS = 5;

/** What a send looks like to the redirect follower. */
export interface RedirectInit {
  method: string;
  headers: Record<string, string>;
  body?: string | undefined;
}

/** Why the final answer is a redirect that was not followed. */
export type RedirectRefusal =
  { reason: 'otherOrigin'; location: string } | { reason: 'tooMany' } | { reason: 'noLocation' };

const FOLLOW = new Set([301, 302, 303, 307, 308]);

function sameOrigin(a: URL, b: URL): boolean {
  return a.protocol === b.protocol && a.host === b.host;
}

/** Path segments both paths end with: the moved prefix is what comes before them. */
function movedPrefix(from: string, to: string): { from: string; to: string } | undefined {
  const a = from.split('/');
  const b = to.split('/');
  let shared = 0;
  while (
    shared < a.length - 1 &&
    shared < b.length - 1 &&
    a[a.length - 1 - shared] === b[b.length - 1 - shared]
  )
    shared++;
  const fromPrefix = a.slice(0, a.length - shared).join('/');
  const toPrefix = b.slice(0, b.length - shared).join('/');
  return fromPrefix === '' || fromPrefix === toPrefix ? undefined : { from: fromPrefix, to: toPrefix };
}

/** Follows same-origin redirects for one Provider's HTTP client and remembers permanent moves. */
export class RedirectFollower {
  /** `origin + old path prefix` → new path prefix. */
  readonly #moved = new LRUCache<string, string>({ max: 256 });

  /** `url` with a remembered permanent move applied (the longest matching prefix). */
  resolve(url: string): string {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return url;
    }
    const segs = u.pathname.split('/');
    for (let n = segs.length; n > 1; n--) {
      const prefix = segs.slice(0, n).join('/');
      const to = this.#moved.get(`${u.origin}${prefix}`);
      if (to !== undefined) {
        u.pathname = `${to}${u.pathname.slice(prefix.length)}`;
        return u.toString();
      }
    }
    return url;
  }

  /**
   * Sends `init` to `url` (after {@link resolve}) with `send`, following same-origin redirects.
   * @returns the final answer and its URL; when that answer is a redirect that was not followed,
   *   `refused` says why (the 3xx body is left unread for the caller).
   */
  async send(
    url: string,
    init: RedirectInit,
    send: (url: string, init: RedirectInit) => Promise<Response>,
  ): Promise<{ res: Response; url: string; refused?: RedirectRefusal }> {
    let at = this.resolve(url);
    let cur = init;
    for (let hop = 0; ; hop++) {
      const res = await send(at, cur);
      if (!FOLLOW.has(res.status)) return { res, url: at };
      const location = res.headers.get('location');
      if (location === null) return { res, url: at, refused: { reason: 'noLocation' } };
      const from = new URL(at);
      let next: URL;
      try {
        next = new URL(location, from);
      } catch {
        return { res, url: at, refused: { reason: 'otherOrigin', location } };
      }
      if (!sameOrigin(from, next))
        return { res, url: at, refused: { reason: 'otherOrigin', location: next.origin } };
      if (hop >= MAX_REDIRECTS) return { res, url: at, refused: { reason: 'tooMany' } };
      await res.body?.cancel();
      if (res.status === 301 || res.status === 308) {
        const moved = movedPrefix(from.pathname, next.pathname);
        if (moved !== undefined) this.#moved.set(`${from.origin}${moved.from}`, moved.to);
      }
      if (res.status === 303 && cur.method !== 'GET' && cur.method !== 'HEAD') {
        const headers = Object.fromEntries(
          Object.entries(cur.headers).filter(([k]) => k.toLowerCase() !== 'content-type'),
        );
        cur = { method: 'GET', headers };
      }
      at = next.toString();
    }
  }
}
