/**
 * The GitHub client of one Provider: its Octokit (./octokit.ts), the repository an event goes to,
 * the Provider's own identity (to recognise our comments), and error mapping for every call.
 *
 * API base: the repository comes from `resolveRepository` (src/forge/address.ts): github.com →
 * `https://api.github.com`, any other host → `https://HOST/api/v3` (GitHub Enterprise Server),
 * `spec.apiURL` overrides the guess (case F02). Credentials: `token` (or `password`, as GitHub
 * accepts a token there), or GitHub App keys. `GET /app` goes to `githubAppBaseURL` when set.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { NotificationEvent } from '../../api/event.ts';
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { Logger } from '../../log.ts';
import { ProviderError } from '../../notifier/errors.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import { parseForgeAddress } from '../address.ts';
import { Lazy } from '../auth.ts';
import { repositoryFor } from '../notifier.ts';
import { MAX_PAGES, tooManyPages } from '../paging.ts';
import { toProviderError } from './errors.ts';
import type { GitHubOctokit, OctokitOptions } from './octokit.ts';
import { originOf } from './origin.ts';

/** Page size of every listing (GitHub's maximum). */
export const GITHUB_PAGE_SIZE = 100;

/** A GitHub repository as the API addresses it (from `resolveRepository`). */
export interface GitHubRepo {
  /** API base without a trailing slash: `https://api.github.com` or `https://HOST/api/v3`. */
  apiBase: string;
  owner: string;
  repo: string;
}

export interface PullRef {
  id: string;
  number: number;
}

/** Author identity used to recognise our sticky comment. */
export type Identity = { kind: 'login'; login: string } | { kind: 'anyBot' };

export interface GitHubNotifierOptions {
  /** Where Octokit's own warnings go (deprecations, auth retries). Default: nowhere. */
  logger?: Logger;
  /** Clock for the pull-request cache and `Retry-After` dates, epoch ms. Default `Date.now`. */
  now?: () => number;
  /**
   * Write pacing per credential by @octokit/plugin-throttling (≥ 1 s between writes, 3 s between
   * comment creations). Default true; tests that write a lot turn it off.
   */
  pacing?: boolean;
}

export interface GitHubClient {
  /**
   * The Provider's Octokit. Loaded on the first {@link GitHubClient.call}: read it only inside
   * one (it throws before).
   */
  readonly octokit: GitHubOctokit;
  label: string;
  secretValues: readonly string[];
  now(): number;
  /** Runs one API call; every failure becomes a redacted `ProviderError` (./errors.ts). */
  call<T>(fn: () => Promise<T>): Promise<T>;
  /** Who our comments are written by (`GET /user`, or `<app slug>[bot]` from `GET /app`), once. */
  identity(signal: AbortSignal | undefined): Promise<Identity>;
  /** Base URL and repository parameters of a call (spread: the typed routes do not list `baseUrl`). */
  at(r: GitHubRepo): { baseUrl: string; owner: string; repo: string };
  repoKey(r: GitHubRepo): string;
  /** The repository an event goes to. @throws ProviderError */
  repository(ev: NotificationEvent): GitHubRepo;
}

function trimSlash(s: string): string {
  return s.replace(/\/+$/, '');
}

/**
 * Octokit and its plugins (./octokit.ts), imported on the first call: @octokit/rest and
 * @octokit/auth-app cost a process ~17 MiB RSS (measured: a fresh Node 24 importing each alone),
 * and a controller without GitHub Providers never needs them (issue 21, idle RSS).
 */
let octokitModulePromise: Promise<typeof import('./octokit.ts')> | undefined;
function octokitModule(): Promise<typeof import('./octokit.ts')> {
  octokitModulePromise ??= import('./octokit.ts');
  return octokitModulePromise;
}

/**
 * @throws Error when `p` has neither a token/password nor GitHub App keys.
 */
export function githubClient(
  p: ResolvedProvider,
  http: ProviderHttp,
  opts: GitHubNotifierOptions = {},
): GitHubClient {
  const now = opts.now ?? Date.now;
  const secretValues = http.secretValues;
  const label = `GitHub Provider ${p.namespace}/${p.name}`;
  const app = p.githubApp;
  if (p.token === undefined && p.password === undefined && app === undefined) {
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
  const octokitOptions: OctokitOptions = {
    baseUrl: appBase,
    allowedOrigins,
    logger: opts.logger,
    pacing: opts.pacing ?? true,
  };
  let octokit: GitHubOctokit | undefined;
  const load = async (): Promise<GitHubOctokit> => {
    octokit ??= (await octokitModule()).buildOctokit(p, http, octokitOptions);
    return octokit;
  };
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      await load();
      return await fn();
    } catch (err) {
      throw toProviderError(err, secretValues, now());
    }
  };
  /** Computed once (on the first send that needs it, with that send's signal); a failure is not kept. */
  let identity: Lazy<Identity> | undefined;
  const lookupIdentity = async (signal: AbortSignal | undefined): Promise<Identity> => {
    const request = signal === undefined ? {} : { signal };
    if (app !== undefined) {
      const res = await (await load()).request('GET /app', { baseUrl: appBase, request });
      const slug = res.data?.slug;
      if (typeof slug !== 'string' || slug === '') {
        throw new ProviderError(`${label}: GET /app answered without the App's slug`, {
          code: 'BAD_RESPONSE',
          retryable: false,
          secretValues,
        });
      }
      return { kind: 'login', login: `${slug}[bot]` };
    }
    try {
      const res = await (await load()).request('GET /user', { baseUrl: defaultBase, request });
      return { kind: 'login', login: res.data.login };
    } catch (err) {
      // An installation token (e.g. a workflow's GITHUB_TOKEN) may not read /user ("Resource not
      // accessible by integration", a final 403): it comments as a bot. A rate limit is not that.
      const pe = toProviderError(err, secretValues, now());
      if (pe.status === 403 && !pe.retryable) return { kind: 'anyBot' };
      throw pe;
    }
  };
  return {
    get octokit(): GitHubOctokit {
      if (octokit === undefined) throw new Error(`${label}: Octokit read before a call loaded it`);
      return octokit;
    },
    label,
    secretValues,
    now,
    call,
    identity: (signal) => {
      identity ??= new Lazy(() => lookupIdentity(signal));
      return call(() => (identity as Lazy<Identity>).get());
    },
    at: (r) => ({ baseUrl: r.apiBase, owner: r.owner, repo: r.repo }),
    repoKey: (r) => `${r.apiBase}/repos/${r.owner}/${r.repo}`.toLowerCase(),
    repository(ev) {
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
  };
}

/** Octokit's per-request options: the send's signal, and for writes no plugin retry. */
export function requestOptions(
  signal: AbortSignal | undefined,
  write = false,
): { request: { signal?: AbortSignal; retries?: number } } {
  return { request: { ...(signal !== undefined ? { signal } : {}), ...(write ? { retries: 0 } : {}) } };
}

/** Octokit parameters of a listing in `ctx.repo`: where, `per_page`, the send's signal. */
export function listing(
  c: GitHubClient,
  ctx: { repo: GitHubRepo; signal: AbortSignal | undefined },
): ReturnType<GitHubClient['at']> & { per_page: number } & ReturnType<typeof requestOptions> {
  return { ...c.at(ctx.repo), per_page: GITHUB_PAGE_SIZE, ...requestOptions(ctx.signal) };
}

/**
 * The items of each page of `it` (Octokit's `paginate.iterator`), at most `MAX_PAGES` pages.
 * @throws ProviderError `TOO_MANY_PAGES` (saying `what`) on the page after the last allowed.
 */
export async function* boundedPages<T>(
  it: AsyncIterable<{ data: T[] }>,
  what: string,
  secretValues: readonly string[],
): AsyncGenerator<T[], void, undefined> {
  let n = 0;
  for await (const page of it) {
    if (++n > MAX_PAGES) throw tooManyPages(what, secretValues);
    yield page.data;
  }
}
