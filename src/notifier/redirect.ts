/**
 * Redirects, followed where that is safe (case N07: a renamed or transferred repository): a
 * `301`/`307`/`308` to the SAME origin (scheme, host and port) is followed with the method,
 * headers and body kept — RFC 9110 §15.4 allows keeping the method for 301, and a forge that
 * answers a write on an old path with 301 (Gitea 1.27.3, observed) or 307 (GitHub) means "send it
 * there"; a `302`/`303` only for a GET or HEAD (answering a POST they mean "go look at this page",
 * e.g. a login form: case N13). At most {@link MAX_REDIRECTS} hops. Never followed: a redirect to
 * another origin (credentials are only ever sent where the Provider points) or to a sign-in page
 * ({@link isSignInLocation}), which is not the API whatever the origin.
 *
 * Permanent moves (`301`, `308`) are remembered per origin as a path-prefix rewrite (the part of
 * the path before what the old and new locations share), so later calls to the same repository
 * go straight to its new place: `/api/v1/repos/acme/app/…` → `/api/v1/repos/platform/app2/…`.
 */
import { LRUCache } from 'lru-cache';

/** Bound of redirects followed for one request. */
export const MAX_REDIRECTS = 5;

/** What a send looks like to the redirect follower. */
export interface RedirectInit {
  method: string;
  headers: Record<string, string>;
  body?: string | undefined;
}

/**
 * What the follower reads of one answer: its status and headers (a WHATWG `Response` of
 * `fetch`, or the `{status, headers}` view of undici's `request` answer in ./http.ts).
 */
export interface RedirectAnswer {
  status: number;
  headers: { get(name: string): string | null };
}

/** Why the final answer is a redirect that was not followed. */
export type RedirectRefusal =
  | { reason: 'otherOrigin'; location: string }
  | { reason: 'tooMany' }
  | { reason: 'noLocation' }
  /** A redirect to a sign-in page (`/login`, `/users/sign_in`, an SSO endpoint): not the API (N13). */
  | { reason: 'signIn'; location: string }
  /** A `302`/`303` answering a write: a browser form's "go look at this page", not "send it there". */
  | { reason: 'write'; location: string };

/**
 * Sign-in pages, as the path right after a web root (and after an API prefix): GitHub Enterprise
 * `/login` and `/sessions`, GitLab `/users/sign_in`, Gitea `/user/login`, Azure DevOps `_signin`,
 * SSO and OAuth endpoints (SAML, OIDC authorize). Anchored: only the first segments count, so a
 * repository named `login` (`/repos/acme/login/…`) is not a sign-in page.
 */
const SIGN_IN_PATH =
  /^(?:login|signin|sign_in|sessions?|_signin|sso|saml2?|users\/sign_in|user\/login|(?:login\/)?oauth2?\/authorize|authorize)(?:$|[/.])/i;
/** Hosts of sign-in portals (`login.…`, `sso.…`, Microsoft Entra), counted for another origin only. */
const SIGN_IN_HOST = /^(?:login|signin|sso|saml|auth)\.|(?:^|\.)login\.microsoftonline\.com$/i;
/** API prefixes after a web root: GitHub Enterprise, Gitea, GitLab, Bitbucket Data Center. */
const API_PREFIX = /^(?:api\/v\d+|api|rest\/api\/[^/]+)\//i;

/**
 * Whether a redirect from `from` (the URL requested) to `to` (its `Location`, resolved) goes to a
 * sign-in page (case N13), not to a moved resource. Looks only at the start of `to`'s path: right
 * after the web root — on the same origin, the part of `from`'s path before its API prefix
 * (`/gitlab` of `/gitlab/api/v4/…`), else `/` — or right after an API prefix there. The host
 * counts only for another origin (a portal like `login.microsoftonline.com`); the API's own host
 * (`sso.acme.com` serving the forge) does not make every redirect a sign-in.
 */
export function isSignInLocation(from: URL, to: URL): boolean {
  const same = sameOrigin(from, to);
  if (!same && SIGN_IN_HOST.test(to.hostname)) return true;
  let root = '/';
  if (same) {
    const m = /^(.*?\/)(?:api\/v\d+|api|rest\/api\/[^/]+|_apis)(?:\/|$)/i.exec(from.pathname);
    if (m?.[1] !== undefined) root = m[1];
  }
  const roots = root === '/' ? ['/'] : [root, '/'];
  for (const r of roots) {
    if (!to.pathname.startsWith(r)) continue;
    const rest = to.pathname.slice(r.length);
    if (SIGN_IN_PATH.test(rest)) return true;
    const api = API_PREFIX.exec(rest);
    if (api !== null && SIGN_IN_PATH.test(rest.slice(api[0].length))) return true;
  }
  return false;
}

const FOLLOW = new Set([301, 302, 303, 307, 308]);

/** A location as shown in messages: origin and path, never a query (it may carry a token). */
function shown(u: URL): string {
  return `${u.origin}${u.pathname}`;
}

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
   * Sends `init` to `url` (after {@link resolve}) with `send`, following same-origin redirects;
   * the body of each 3xx that is followed is disposed of with `discard` before the next hop.
   * @returns the final answer and its URL; when that answer is a redirect that was not followed,
   *   `refused` says why (the 3xx body is left unread for the caller).
   */
  async send<R extends RedirectAnswer>(
    url: string,
    init: RedirectInit,
    send: (url: string, init: RedirectInit) => Promise<R>,
    discard: (res: R) => Promise<void>,
  ): Promise<{ res: R; url: string; refused?: RedirectRefusal }> {
    let at = this.resolve(url);
    for (let hop = 0; ; hop++) {
      const res = await send(at, init);
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
      if (isSignInLocation(from, next))
        return { res, url: at, refused: { reason: 'signIn', location: shown(next) } };
      if (!sameOrigin(from, next))
        return { res, url: at, refused: { reason: 'otherOrigin', location: next.origin } };
      // A write is re-sent only where the forge means "send it there" (301 Gitea, 307/308 GitHub).
      if ((res.status === 302 || res.status === 303) && init.method !== 'GET' && init.method !== 'HEAD')
        return { res, url: at, refused: { reason: 'write', location: shown(next) } };
      if (hop >= MAX_REDIRECTS) return { res, url: at, refused: { reason: 'tooMany' } };
      await discard(res);
      if (res.status === 301 || res.status === 308) {
        const moved = movedPrefix(from.pathname, next.pathname);
        if (moved !== undefined) this.#moved.set(`${from.origin}${moved.from}`, moved.to);
      }
      at = next.toString();
    }
  }
}
