/**
 * `github` provider: commit statuses and the sticky pull-request comment through GitHub's REST
 * API (github.com and GitHub Enterprise Server), with Octokit (`@octokit/rest` 22).
 *
 * One Octokit per notifier (i.e. per Provider generation), built on the Provider's `ProviderHttp`:
 * every call — API calls, the GitHub App token exchange, `GET /app` — uses its `fetch`, so the
 * Provider's CA (`certSecretRef`, F08) and proxy (`proxySecretRef`, F09) apply to all of them, and
 * each request is bounded by `spec.timeout`. Redirects are not followed (a moved repository fails
 * with code `REDIRECT`), and a next-page link to another origin is refused: credentials only go to
 * the API origin(s) the Provider names.
 *
 * API base: the repository comes from `resolveRepository` (./address.ts): github.com →
 * `https://api.github.com`, any other host → `https://HOST/api/v3` (GitHub Enterprise Server),
 * `spec.apiURL` overrides the guess (F02).
 *
 * Credentials: `token` (or `password`, as GitHub accepts a token there) → `Authorization: token …`;
 * GitHub App keys → an installation token from `POST /app/installations/{id}/access_tokens`
 * (signed JWT, `@octokit/auth-app`: cached, refreshed before its hour ends; a 401 with a cached
 * token refreshes it once). The exchange and `GET /app` go to `githubAppBaseURL` when set, else
 * to the API base.
 *
 * Plugins, and why:
 * - `@octokit/plugin-throttling`, with `throttle.id` = `credentialKey(p)` (its limiter state is
 *   module-global per id, so every Provider using one credential shares it): it paces writes per
 *   credential as GitHub asks (≥ 1 s between writes, comment creation 1 per 3 s). Its rate-limit
 *   handlers never wait: they return false, the 403/429 surfaces as a retryable `ProviderError`
 *   with `retryAfterMs` (from `Retry-After` or `x-ratelimit-reset`; 60 s for a secondary limit
 *   without them, facts/forges.md), and the dispatcher's credential gate holds every Provider
 *   using that credential until then (F20). The notifiers of this process also remember the
 *   deadline per credential and refuse to call GitHub before it (`RATE_LIMITED`, retryable, with
 *   the time left), whichever Provider asks. Nothing here sleeps for minutes inside a send.
 * - `@octokit/plugin-retry`: one quick retry (after 0.5 s) of an idempotent GET that failed with
 *   a 5xx or a transport error, so a long listing survives one blip without starting over. Writes
 *   are never retried here (a POST whose answer was lost may have taken effect: a retried comment
 *   creation would duplicate the sticky comment), nor any 4xx; the dispatcher retries those with
 *   backoff and jitter.
 *
 * Writes (design §4), via `forgeNotifier` (./forge-common.ts):
 * - Commit status on `metadata.commit`: skipped when the newest status of our context has the
 *   same state and description (F05; the link is not compared, it changes with every run). The
 *   newest is known from memory (the last status this notifier wrote or read per repository,
 *   commit and context); the first time a context is used in a repository after start, GitHub is
 *   asked (`GET /repos/{o}/{r}/commits/{sha}/statuses`, newest first, 100 per page, paging until
 *   the context is found, contexts compared case-insensitively: F06). After that, a commit this
 *   notifier has not seen is posted without a read: contexts are unique to this controller
 *   (cluster, namespace, Stack), so only a previous process could have written them, and what it
 *   left on the current commit was checked by that first read. Steady state: one call per status
 *   that changes, none for one that does not.
 * - Description ≤ 140 code points (escape codes removed, ellipsis when cut: F13); the 422 "maximum
 *   number of statuses" (1,000 per commit and context) is final.
 * - Sticky comment: pull requests from `metadata.pullRequest`, else
 *   `GET /repos/{o}/{r}/commits/{sha}/pulls` (open ones; 409/422 for an unknown commit → none),
 *   remembered per commit (10 min, 2 min when none). Ours = body contains the marker AND authored
 *   by us: the token's `GET /user` login, or `<app slug>[bot]` from `GET /app` for a GitHub App
 *   (an installation token cannot call `GET /user`; if a plain token cannot either — a
 *   GITHUB_TOKEN-like installation token — any Bot author counts). A human's comment that quotes
 *   the marker is never edited (F16). All pages are read until ours is found; edited in place when
 *   the body differs; body ≤ 65,536 characters (the marker is kept when cut).
 */
import { createAppAuth } from '@octokit/auth-app';
import { retry } from '@octokit/plugin-retry';
import { throttling } from '@octokit/plugin-throttling';
import { Octokit } from '@octokit/rest';
import type { NotificationEvent } from '../api/event.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { credentialKey } from '../credential/key.ts';
import type { Logger } from '../log.ts';
import { isRetryableStatus, ProviderError, retryAfterFrom, type HeaderReader } from './errors.ts';
import { parseForgeAddress } from './address.ts';
import {
  forgeNotifier,
  Lazy,
  LruCache,
  MAX_PAGES,
  repositoryFor,
  tooManyPages,
  type ForgeAdapter,
  type ForgeComment,
  type NativeStatus,
  type SendContext,
  type StatusSnapshot,
} from './forge-common.ts';
import { USER_AGENT, type ProviderHttp } from './http.ts';
import { limitsFor, measure } from './limits.ts';
import type { Notifier, NotifierFactory } from './types.ts';

const LIMITS = limitsFor('github');
/** GitHub's commit status description limit, in code points (422 above it: F13). */
export const GITHUB_DESCRIPTION_MAX = LIMITS.statusDescription?.max ?? 140;
/** GitHub's issue comment body limit, in characters (422 "Body is too long"). */
export const GITHUB_COMMENT_MAX = LIMITS.comment?.max ?? 65_536;
/** Page size of every listing (GitHub's maximum). */
export const GITHUB_PAGE_SIZE = 100;
/** How long the open pull requests of a commit are remembered: when there are some / none. */
export const PULLS_TTL_MS = 10 * 60_000;
export const NO_PULLS_TTL_MS = 2 * 60_000;
/** Wait for a secondary rate limit that names no time (facts/forges.md: "wait ≥ 60 s"). */
export const SECONDARY_LIMIT_FALLBACK_MS = 60_000;

const GitHubOctokit = Octokit.plugin(retry, throttling);
type GitHubClient = InstanceType<typeof GitHubOctokit>;

/** A GitHub repository as the API addresses it (from `resolveRepository`). */
export interface GitHubRepo {
  /** API base without a trailing slash: `https://api.github.com` or `https://HOST/api/v3`. */
  apiBase: string;
  owner: string;
  repo: string;
}

export interface GitHubNotifierOptions {
  /** Where Octokit's own warnings go (deprecations, auth retries). Default: nowhere. */
  logger?: Logger;
  /** Clock for the pull-request cache, rate-limit holds and `Retry-After` dates, epoch ms. Default `Date.now`. */
  now?: () => number;
  /**
   * Write pacing per credential by @octokit/plugin-throttling (≥ 1 s between writes, 3 s between
   * comment creations). Default true; tests that write a lot turn it off.
   */
  pacing?: boolean;
}

/**
 * Until when (epoch ms) GitHub asked each credential (`credentialKey`) to stay away: shared by
 * every github notifier of the process, like the throttling plugin's state.
 */
const rateLimitHolds = new Map<string, number>();

interface PullRef {
  id: string;
  number: number;
}

/** Author identity used to recognise our sticky comment. */
type Identity = { kind: 'login'; login: string } | { kind: 'anyBot' };

/** Factory of the `github` provider type (see the module comment). */
export const github: NotifierFactory = (p, deps) => createGitHubNotifier(p, deps);

/**
 * Builds the `github` notifier for `p`, owning `deps.http`.
 * @throws Error when `p` has neither a token/password nor GitHub App keys.
 */
export function createGitHubNotifier(
  p: ResolvedProvider,
  deps: { http: ProviderHttp },
  opts: GitHubNotifierOptions = {},
): Notifier {
  const { http } = deps;
  const now = opts.now ?? Date.now;
  const secretValues = http.secretValues;
  const label = `GitHub Provider ${p.namespace}/${p.name}`;
  const token = p.token ?? p.password;
  const app = p.githubApp;
  if (token === undefined && app === undefined) {
    throw new Error(
      `${label} has no credentials: set key 'token' or the GitHub App keys (githubAppID, githubAppInstallationID, githubAppPrivateKey) in its Secret`,
    );
  }

  const parsed = parseForgeAddress('github', p.address, p.apiURL);
  // An unreadable address fails every send in `repository()` before any request is made.
  const defaultBase = parsed.ok ? parsed.scope.apiBase : 'https://api.github.com';
  const appBase = trimSlash(app?.baseURL ?? defaultBase);
  /** Origins credentials may be sent to: the API base(s) in use and the App base. */
  const allowedOrigins = new Set<string>([originOf(appBase)]);
  if (parsed.ok) allowedOrigins.add(originOf(defaultBase));

  const fetchForOctokit = async (
    url: string,
    init: {
      method?: string;
      headers?: Record<string, string>;
      body?: string | null;
      signal?: AbortSignal | null;
    },
  ): ReturnType<ProviderHttp['fetch']> => {
    const method = (init.method ?? 'GET').toUpperCase();
    const origin = originOf(url);
    if (!allowedOrigins.has(origin)) {
      throw new ProviderError(
        `${method} ${url} not sent: GitHub pointed at another origin (${origin}) than the Provider's API; refusing to send credentials there`,
        { code: 'BAD_RESPONSE', retryable: false, secretValues },
      );
    }
    const res = await http.fetch(url, init);
    if (res.status >= 300 && res.status <= 399 && res.status !== 304) {
      const location = res.headers.get('location');
      await res.body?.cancel();
      throw new ProviderError(
        `${method} ${url} answered ${res.status}: the repository moved${location === null ? '' : ` to ${location}`}; set the Provider address to its new location (redirects are not followed)`,
        { code: 'REDIRECT', status: res.status, retryable: false, secretValues },
      );
    }
    return res;
  };

  const log = opts.logger;
  const throttleId = credentialKey(p);
  const octokit: GitHubClient = new GitHubOctokit({
    baseUrl: defaultBase,
    userAgent: USER_AGENT,
    ...(token !== undefined && app === undefined ? { auth: token } : {}),
    request: { fetch: fetchForOctokit },
    log: {
      debug: () => undefined,
      info: () => undefined,
      warn: (message: string) => log?.warn({ provider: `${p.namespace}/${p.name}` }, message),
      // Failed requests are reported by the caller as ProviderErrors; plugin-request-log's error lines are noise.
      error: (message: string) => log?.debug({ provider: `${p.namespace}/${p.name}` }, message),
    },
    retry: {
      retries: 1,
      retryAfterBaseValue: 500,
      // Every 4xx is final or handled by the dispatcher (429: rate limits must not be re-sent early).
      doNotRetry: Array.from({ length: 100 }, (_, i) => 400 + i),
    },
    throttle: {
      enabled: opts.pacing ?? true,
      id: throttleId,
      onRateLimit: () => false,
      onSecondaryRateLimit: () => false,
    },
  });

  let appIdentity: Lazy<Identity> | undefined;
  if (app !== undefined) {
    const appRequest = octokit.request.defaults({ baseUrl: appBase });
    const appAuth = createAppAuth({
      appId: app.appID,
      privateKey: app.privateKey,
      installationId: app.installationID,
      request: appRequest,
      log: { warn: (message: string) => log?.warn({ provider: `${p.namespace}/${p.name}` }, message) },
    });
    octokit.hook.wrap('request', async (request, options) => {
      if (isAppRoute(options.url)) {
        // App-level endpoints take the JWT (the token exchange sets it itself).
        if (options.headers.authorization === undefined) {
          const jwt = await appAuth({ type: 'app' });
          options.headers.authorization = `bearer ${jwt.token}`;
        }
        return request(options);
      }
      const installation = await appAuth({ type: 'installation' });
      options.headers.authorization = `token ${installation.token}`;
      try {
        return await request(options);
      } catch (err) {
        if (statusOf(err) !== 401) throw err;
        // Revoked or rotated: one fresh token, once.
        const fresh = await appAuth({ type: 'installation', refresh: true });
        options.headers.authorization = `token ${fresh.token}`;
        return request(options);
      }
    });
    appIdentity = new Lazy(async () => {
      const res = await appRequest('GET /app');
      const slug = res.data?.slug;
      if (typeof slug !== 'string' || slug === '') {
        throw new ProviderError(`${label}: GET /app answered without the App's slug`, {
          code: 'BAD_RESPONSE',
          retryable: false,
          secretValues,
        });
      }
      return { kind: 'login', login: `${slug}[bot]` };
    });
  }

  const identity =
    appIdentity ??
    new Lazy<Identity>(async () => {
      try {
        const res = await octokit.request('GET /user');
        return { kind: 'login', login: res.data.login };
      } catch (err) {
        // An installation token (e.g. a workflow's GITHUB_TOKEN) may not read /user ("Resource not
        // accessible by integration", a final 403): it comments as a bot. A rate limit is not that.
        const pe = toProviderError(err, secretValues, now());
        if (pe.status === 403 && !pe.retryable) return { kind: 'anyBot' };
        throw pe;
      }
    });

  /**
   * Runs one API call: refused without a request while GitHub's rate limit for this credential
   * holds (any notifier of the process), and every failure mapped to a ProviderError.
   */
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    const heldFor = (rateLimitHolds.get(throttleId) ?? 0) - now();
    if (heldFor <= 0) rateLimitHolds.delete(throttleId);
    else {
      throw new ProviderError(
        `${label}: GitHub rate-limited this credential; not calling it for another ${Math.ceil(heldFor / 1000)}s`,
        { code: 'RATE_LIMITED', retryable: true, retryAfterMs: heldFor, secretValues },
      );
    }
    try {
      return await fn();
    } catch (err) {
      const pe = toProviderError(err, secretValues, now());
      if (pe.retryAfterMs !== undefined && pe.retryAfterMs > 0) {
        const until = now() + pe.retryAfterMs;
        if ((rateLimitHolds.get(throttleId) ?? 0) < until) rateLimitHolds.set(throttleId, until);
      }
      throw pe;
    }
  };

  /** (repository, lower-cased context) pairs whose current status this notifier has read or written. */
  const knownContexts = new LruCache<true>();
  const pullsCache = new LruCache<{ prs: PullRef[]; until: number }>();
  /** Base URL and repository parameters of a call (spread, as the typed routes do not list `baseUrl`). */
  const at = (r: GitHubRepo): { baseUrl: string; owner: string; repo: string } => ({
    baseUrl: r.apiBase,
    owner: r.owner,
    repo: r.repo,
  });
  const repoKey = (r: GitHubRepo): string => `${r.apiBase}/repos/${r.owner}/${r.repo}`.toLowerCase();
  const contextKey = (r: GitHubRepo, context: string): string =>
    `${repoKey(r)}\u0000${context.toLowerCase()}`;

  const adapter: ForgeAdapter<GitHubRepo, PullRef> = {
    repository(ev: NotificationEvent): GitHubRepo {
      const r = repositoryFor('github', p, ev, secretValues);
      const [owner, repo] = r.path;
      if (owner === undefined || repo === undefined) {
        throw new ProviderError(`${label}: '${r.id}' is not OWNER/REPO`, {
          code: 'InvalidAddress',
          retryable: false,
          secretValues,
        });
      }
      allowedOrigins.add(originOf(r.apiBase));
      return { apiBase: r.apiBase, owner, repo };
    },
    repoKey,
    nativeState: (state) => state,
    nativeDescription: boundDescription,

    async readStatus(
      ctx: SendContext<GitHubRepo, PullRef>,
      context: string,
    ): Promise<StatusSnapshot | undefined> {
      const key = contextKey(ctx.repo, context);
      if (knownContexts.get(key) !== undefined) return undefined;
      const want = context.toLowerCase();
      const found = await call(async () => {
        const it = octokit.paginate.iterator('GET /repos/{owner}/{repo}/commits/{ref}/statuses', {
          ...at(ctx.repo),
          ref: ctx.sha,
          per_page: GITHUB_PAGE_SIZE,
        });
        let n = 0;
        for await (const page of it) {
          if (++n > MAX_PAGES)
            throw tooManyPages(`${label}: listing the statuses of ${ctx.sha}`, secretValues);
          for (const s of page.data) {
            if (s.context.toLowerCase() === want) return { state: s.state, description: s.description ?? '' };
          }
        }
        return undefined;
      });
      knownContexts.set(key, true);
      return found;
    },

    async writeStatus(ctx: SendContext<GitHubRepo, PullRef>, status: NativeStatus): Promise<void> {
      await call(() =>
        octokit.request('POST /repos/{owner}/{repo}/statuses/{sha}', {
          ...at(ctx.repo),
          sha: ctx.sha,
          state: status.state as 'pending' | 'success' | 'failure',
          context: status.context,
          description: status.description,
          ...(status.targetURL !== undefined && status.targetURL !== ''
            ? { target_url: status.targetURL }
            : {}),
          request: { retries: 0 },
        }),
      );
      knownContexts.set(contextKey(ctx.repo, status.context), true);
    },

    async pullRequestsForCommit(ctx: SendContext<GitHubRepo, PullRef>): Promise<PullRef[]> {
      const key = `${repoKey(ctx.repo)}\u0000${ctx.sha}`;
      const cached = pullsCache.get(key);
      if (cached !== undefined && cached.until > now()) return cached.prs;
      const prs = await call(async () => {
        const out: PullRef[] = [];
        try {
          const it = octokit.paginate.iterator('GET /repos/{owner}/{repo}/commits/{commit_sha}/pulls', {
            ...at(ctx.repo),
            commit_sha: ctx.sha,
            per_page: GITHUB_PAGE_SIZE,
          });
          let n = 0;
          for await (const page of it) {
            if (++n > MAX_PAGES)
              throw tooManyPages(`${label}: listing the pull requests of ${ctx.sha}`, secretValues);
            for (const pr of page.data) {
              if (pr.state === 'open') out.push({ id: String(pr.number), number: pr.number });
            }
          }
        } catch (err) {
          // GitHub answers 409/422 for a commit it does not know (yet): no pull request.
          const status = statusOf(err);
          if (status === 409 || status === 422) return [];
          throw err;
        }
        return out;
      });
      pullsCache.set(key, { prs, until: now() + (prs.length > 0 ? PULLS_TTL_MS : NO_PULLS_TTL_MS) });
      return prs;
    },

    // The number comes from our own source (metadata.pullRequest): no call to confirm it; a wrong
    // one fails on the comment listing with a 404.
    pullRequest: (_ctx, id) => Promise.resolve({ id, number: Number(id) }),

    async *comments(
      ctx: SendContext<GitHubRepo, PullRef>,
      pr: PullRef,
    ): AsyncIterable<readonly ForgeComment[]> {
      const me = await call(() => identity.get());
      const it = octokit.paginate.iterator('GET /repos/{owner}/{repo}/issues/{issue_number}/comments', {
        ...at(ctx.repo),
        issue_number: pr.number,
        per_page: GITHUB_PAGE_SIZE,
      });
      const pages = it[Symbol.asyncIterator]();
      for (let n = 1; ; n++) {
        if (n > MAX_PAGES)
          throw tooManyPages(`${label}: listing the comments of #${pr.number}`, secretValues);
        const next = await call(() => pages.next());
        if (next.done === true) return;
        yield next.value.data.map((c) => ({
          ref: String(c.id),
          body: c.body ?? '',
          mine: isMine(me, c.user),
        }));
      }
    },

    async createComment(ctx: SendContext<GitHubRepo, PullRef>, pr: PullRef, body: string): Promise<string> {
      const res = await call(() =>
        octokit.request('POST /repos/{owner}/{repo}/issues/{issue_number}/comments', {
          ...at(ctx.repo),
          issue_number: pr.number,
          body,
          request: { retries: 0 },
        }),
      );
      return String(res.data.id);
    },

    async editComment(
      ctx: SendContext<GitHubRepo, PullRef>,
      _pr: PullRef,
      ref: string,
      body: string,
    ): Promise<string> {
      await call(() =>
        octokit.request('PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}', {
          ...at(ctx.repo),
          comment_id: Number(ref),
          body,
          request: { retries: 0 },
        }),
      );
      return ref;
    },
  };

  const inner = forgeNotifier(http, { pullRequestComment: p.pullRequestComment, label }, adapter);
  return {
    send: (ev, rendered) =>
      inner.send(
        ev,
        rendered.comment === undefined
          ? rendered
          : {
              ...rendered,
              comment: {
                marker: rendered.comment.marker,
                body: boundComment(rendered.comment.body, rendered.comment.marker),
              },
            },
      ),
    close: () => inner.close(),
  };
}

function isMine(me: Identity, user: { login: string; type?: string } | null | undefined): boolean {
  if (user === null || user === undefined) return false;
  if (me.kind === 'anyBot') return user.type === 'Bot';
  return user.login.toLowerCase() === me.login.toLowerCase();
}

/** Endpoints that take the App's JWT rather than an installation token: `/app` and below (the only ones used). */
function isAppRoute(url: string): boolean {
  const path = url.startsWith('/') ? url : safePath(url);
  return /^\/app(?:\/|$)/.test(path.split('?')[0] ?? '');
}

function safePath(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

function trimSlash(s: string): string {
  return s.replace(/\/+$/, '');
}

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/** Control characters and ANSI escape sequences (CSI/OSC), removed from descriptions. */
// eslint-disable-next-line no-control-regex
const ESCAPES = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-_]?/g;

/**
 * A commit status description as GitHub accepts it: escape codes and control characters removed,
 * whitespace collapsed, at most 140 code points (cut with `…`). The renderer already bounds it;
 * this is the last line of defence against a final 422 (F13).
 */
export function boundDescription(description: string): string {
  const clean = description
    .replace(ESCAPES, '')
    .replace(/\p{Cc}+/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (measure(clean, 'codePoints') <= GITHUB_DESCRIPTION_MAX) return clean;
  const points = Array.from(clean);
  return `${points
    .slice(0, GITHUB_DESCRIPTION_MAX - 1)
    .join('')
    .trimEnd()}…`;
}

const COMMENT_CUT_NOTE = '\n\n…(truncated: the comment exceeded GitHub’s 65,536-character limit)\n';

/**
 * A comment body within GitHub's limit (the renderer already bounds it). A longer one is cut,
 * says so, and keeps `marker` so the comment is still recognised as ours.
 */
export function boundComment(body: string, marker: string): string {
  if (body.length <= GITHUB_COMMENT_MAX) return body;
  const cut = (text: string, max: number): string => {
    let end = max;
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    return text.slice(0, end);
  };
  const kept = cut(body, GITHUB_COMMENT_MAX - COMMENT_CUT_NOTE.length);
  if (kept.includes(marker)) return kept + COMMENT_CUT_NOTE;
  return (
    cut(body, GITHUB_COMMENT_MAX - COMMENT_CUT_NOTE.length - marker.length - 1) +
    COMMENT_CUT_NOTE +
    '\n' +
    marker
  );
}

/** Shape of an Octokit `RequestError` (not imported: @octokit/request-error is not a direct dependency). */
interface OctokitRequestError {
  status: number;
  message: string;
  cause?: unknown;
  request?: { method?: string; url?: string };
  response?: { headers?: Record<string, string | number | undefined>; data?: unknown };
}

function asRequestError(err: unknown): OctokitRequestError | undefined {
  if (!(err instanceof Error)) return undefined;
  const e = err as Error & Partial<OctokitRequestError>;
  return typeof e.status === 'number' ? (e as OctokitRequestError) : undefined;
}

function statusOf(err: unknown): number | undefined {
  if (err instanceof ProviderError) return err.status;
  return asRequestError(err)?.status;
}

function headerReader(headers: Record<string, string | number | undefined> | undefined): HeaderReader {
  return {
    get: (name: string) => {
      const v = headers?.[name.toLowerCase()];
      return v === undefined ? null : String(v);
    },
  };
}

/** GitHub's error text: `message` plus each `errors[].message`/`code`. */
function gitHubMessage(data: unknown, fallback: string): string {
  if (data === null || typeof data !== 'object')
    return typeof data === 'string' && data !== '' ? data : fallback;
  const d = data as { message?: unknown; errors?: unknown };
  const parts: string[] = [];
  if (typeof d.message === 'string') parts.push(d.message);
  if (Array.isArray(d.errors)) {
    for (const e of d.errors as unknown[]) {
      if (typeof e === 'string') parts.push(e);
      else if (e !== null && typeof e === 'object') {
        const m = (e as { message?: unknown; code?: unknown; field?: unknown }).message;
        const code = (e as { code?: unknown }).code;
        const field = (e as { field?: unknown }).field;
        if (typeof m === 'string') parts.push(m);
        else if (typeof code === 'string')
          parts.push(`${typeof field === 'string' ? `${field}: ` : ''}${code}`);
      }
    }
  }
  return parts.length > 0 ? parts.join('; ') : fallback;
}

/**
 * Maps whatever an Octokit call threw to a redacted `ProviderError`:
 * - a `ProviderError` from the transport (TLS, proxy, timeout; possibly wrapped by Octokit) as is;
 * - an HTTP error: `HTTP_<status>`, retryable per `isRetryableStatus`; a 403 carrying rate-limit
 *   headers or saying "rate limit" is retryable too; `retryAfterMs` from `Retry-After` /
 *   `x-ratelimit-reset`, else 60 s for a rate limit (facts/forges.md);
 * - anything else (e.g. an unusable App private key): `GITHUB_CLIENT`, not retryable.
 */
export function toProviderError(err: unknown, secretValues: readonly string[], nowMs: number): ProviderError {
  if (err instanceof ProviderError) return err;
  const re = asRequestError(err);
  if (re === undefined) {
    const msg = err instanceof Error ? err.message : String(err);
    return new ProviderError(`GitHub client failed: ${msg}`, {
      code: 'GITHUB_CLIENT',
      retryable: false,
      secretValues,
    });
  }
  if (re.cause instanceof ProviderError) return re.cause;
  const status = re.status;
  const method = (re.request?.method ?? 'GET').toUpperCase();
  const url = re.request?.url ?? 'GitHub';
  if (re.response === undefined) {
    // Octokit's own failure without an answer (should not happen: transport errors are ProviderErrors).
    return new ProviderError(`${method} ${url} failed: ${re.message}; will retry`, {
      code: 'NETWORK',
      retryable: true,
      secretValues,
    });
  }
  const headers = headerReader(re.response.headers);
  const said = gitHubMessage(re.response.data, re.message);
  const rateLimited =
    status === 429 ||
    (status === 403 &&
      (headers.get('retry-after') !== null ||
        headers.get('x-ratelimit-remaining') === '0' ||
        /rate limit/i.test(said)));
  const retryable = isRetryableStatus(status) || rateLimited;
  let retryAfterMs = retryable ? retryAfterFrom(headers, nowMs) : undefined;
  if (rateLimited && retryAfterMs === undefined) retryAfterMs = SECONDARY_LIMIT_FALLBACK_MS;
  const path = safePath(url);
  // The App's own calls: the token exchange and GET /app (not a repository named "app").
  const appCall =
    /\/app\/installations\/[^/]+\/access_tokens$/.test(path) ||
    (/\/app$/.test(path) && !/\/repos\/[^/]+\/app$/.test(path));

  let hint: string;
  if (rateLimited) {
    hint = `rate limited by GitHub; will retry after ${Math.ceil((retryAfterMs ?? 0) / 1000)}s`;
  } else if (status === 401) {
    hint = appCall
      ? "GitHub refused the App's credentials: check githubAppID, githubAppInstallationID and githubAppPrivateKey in the Provider's Secret"
      : "GitHub refused the credentials: check key 'token' of the Provider's Secret (expired or revoked?)";
  } else if (status === 403) {
    hint =
      'the credentials lack permission: a token needs commit statuses write (classic: repo:status) and, for comments, pull requests write; a GitHub App needs the same permissions on this repository';
  } else if (status === 404) {
    hint = appCall
      ? 'the GitHub App or its installation was not found: check githubAppID, githubAppInstallationID and githubAppBaseURL'
      : 'the repository does not exist or the credentials cannot see it: check the Provider address and the token’s repository access';
  } else if (status === 422) {
    hint = 'GitHub rejected the request (final)';
  } else if (status >= 500) {
    hint = 'GitHub failed; will retry';
  } else if (status === 409) {
    hint = 'conflict; will retry';
  } else {
    hint = 'GitHub rejected the request';
  }
  if (!retryable) retryAfterMs = undefined;
  return new ProviderError(`${method} ${url} answered ${status}: ${hint}. GitHub said: ${said}`, {
    code: `HTTP_${status}`,
    status,
    retryable,
    retryAfterMs,
    secretValues,
  });
}
