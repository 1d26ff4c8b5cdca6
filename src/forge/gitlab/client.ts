/**
 * The GitLab client of one Provider: `@gitbeaker/rest` 43 resources (`Commits`, `MergeRequests`,
 * `MergeRequestNotes`, `Users`) whose transport is replaced (their `requesterFn` option) by one
 * that sends every call through the Provider's `ProviderHttp`, so the Provider CA (case F08),
 * proxy (F09), timeout, redirect policy and redacted `ProviderError`s apply to GitLab exactly as to
 * every other provider. This also removes gitbeaker's built-in retry loop (10 tries within ~0.3 s,
 * ignoring `Retry-After`) and its in-process rate limiter: a failure surfaces at once as a
 * `ProviderError` carrying `retryable`/`retryAfterMs` (GitLab's `Retry-After` and
 * `RateLimit-Reset`), and the delivery layer's backoff decides when to try again.
 *
 * Auth: `PRIVATE-TOKEN: <token>` (personal, project or group access token, scope `api`). The
 * GitLab API has no password authentication: when the Secret has `username`/`password` but no
 * `token`, the `password` is used as the access token (Git-over-HTTPS credential Secrets carry a
 * token there); basic auth is never sent.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { Commits, MergeRequestNotes, MergeRequests, ProjectMembers, Users } from '@gitbeaker/rest';
import type { ResolvedProvider } from '../../credential/provider.ts';
import { ProviderError } from '../../notifier/errors.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { ForgeRepo } from '../address.ts';
import { identityOf, LazyPerKey } from '../auth.ts';
import { field, idOf, isRecord, parseJson } from '../json.ts';

type ResourceOptions = ConstructorParameters<typeof Commits>[0];
type RequesterFn = NonNullable<ResourceOptions['requesterFn']>;
type Requester = ReturnType<RequesterFn>;

/** Page size used for every GitLab listing (the API's maximum). */
export const PER_PAGE = 100;

export interface MergeRequest {
  id: string;
  sourceBranch: string | undefined;
  /**
   * The merge request's head pipeline (single-MR endpoint `head_pipeline`): its id, commit and ref
   * (`refs/merge-requests/<iid>/head` for a merge request pipeline). Undefined when it has none
   * or it was not read.
   */
  headPipeline?: { id: number; sha: string; ref: string } | undefined;
}

/** The gitbeaker resources of one API base, bound to one send's signal. */
export interface GitLabResources {
  commits: InstanceType<typeof Commits>;
  mergeRequests: InstanceType<typeof MergeRequests>;
  notes: InstanceType<typeof MergeRequestNotes>;
  users: InstanceType<typeof Users>;
  /** Project members (the preview controller's author check). */
  members: InstanceType<typeof ProjectMembers>;
}

/** camelCase → snake_case, as GitLab expects (gitbeaker's options are camelCase). */
function snake(k: string): string {
  return k.replace(/([a-z\d])([A-Z])/g, '$1_$2').toLowerCase();
}

function snakeKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(snakeKeys);
  if (isRecord(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[snake(k)] = snakeKeys(x);
    return out;
  }
  return v;
}

function appendQuery(url: URL, params: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    const key = snake(k);
    if (Array.isArray(v)) {
      for (const x of v) url.searchParams.append(`${key}[]`, String(x));
    } else if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') {
      url.searchParams.append(key, String(v));
    }
  }
}

/** gitbeaker's own signal (its query timeout, off here) combined with the send's. */
function signalOf(own: AbortSignal | undefined, send: AbortSignal | undefined): { signal?: AbortSignal } {
  const all = [own, send].filter((s): s is AbortSignal => s !== undefined);
  return all.length === 0
    ? {}
    : { signal: all.length === 1 ? (all[0] as AbortSignal) : AbortSignal.any(all) };
}

/**
 * A gitbeaker `requesterFn` that sends through `http` (cancelled with `signal`): `apiBase` (e.g.
 * `https://gitlab.example.net/api/v4`) + `/` + gitbeaker's endpoint (path parameters already
 * URL-encoded by gitbeaker), query from `searchParams` (snake_cased), JSON body (snake_cased).
 * JSON answers are parsed, others returned as text; headers are a plain object with lower-case
 * names (gitbeaker reads `link` from it to follow pages).
 */
export function gitlabRequester(
  http: ProviderHttp,
  apiBase: string,
  auth: Record<string, string>,
  signal?: AbortSignal,
): RequesterFn {
  return (resource) => {
    // gitbeaker gives each resource `url` = `${host}/api/v4/${prefixUrl}` (e.g. `/projects` for
    // note resources); keep that prefix and put it under the real API base.
    const root = `${GITBEAKER_HOST}/api/v4`;
    const prefix = resource.url.startsWith(root)
      ? resource.url.slice(root.length).replace(/^\/+|\/+$/g, '')
      : '';
    const base = `${apiBase.replace(/\/+$/, '')}${prefix === '' ? '' : `/${prefix}`}`;
    return requesterFor(http, base, auth, signal);
  };
}

/**
 * The `host` handed to gitbeaker resources: never contacted (the requester replaces it with the
 * API base); it only lets the requester find the resource's path prefix in `resource.url`.
 */
const GITBEAKER_HOST = 'http://gitbeaker.invalid';

function requesterFor(
  http: ProviderHttp,
  base: string,
  auth: Record<string, string>,
  sendSignal: AbortSignal | undefined,
): Requester {
  const call =
    (method: string) =>
    async (
      endpoint: string,
      options?: { body?: unknown; searchParams?: Record<string, unknown>; signal?: AbortSignal },
    ): Promise<{ body: unknown; headers: Record<string, string>; status: number }> => {
      const url = new URL(`${base}/${endpoint.replace(/^\/+/, '')}`);
      if (options?.searchParams) appendQuery(url, options.searchParams);
      const body = options?.body;
      if (body instanceof FormData) {
        throw new ProviderError(`${method} ${url.origin}${url.pathname}: form uploads are not supported`, {
          code: 'UNSUPPORTED',
          retryable: false,
          secretValues: http.secretValues,
        });
      }
      const res = await http.request(url.toString(), {
        method,
        headers: {
          ...auth,
          Accept: 'application/json',
          ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(snakeKeys(body)) } : {}),
        ...signalOf(options?.signal, sendSignal),
      });
      const type = (res.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      const parsed: unknown =
        res.status === 204
          ? null
          : type === 'application/json' || type.endsWith('+json')
            ? (parseJson(res, `${method} ${url.origin}${url.pathname}`, http.secretValues) ?? {})
            : res.text;
      return { body: parsed, headers: Object.fromEntries(res.headers.entries()), status: res.status };
    };
  const requester = {
    get: call('GET'),
    post: call('POST'),
    put: call('PUT'),
    patch: call('PATCH'),
    delete: call('DELETE'),
  };
  // gitbeaker declares each method generic in the body type it returns; the bodies above are the
  // parsed JSON GitLab sent, which is what gitbeaker's resources then hand back.
  return requester as unknown as Requester;
}

function gitlabAuth(p: ResolvedProvider): Record<string, string> {
  const token = p.token ?? p.password;
  if (token === undefined) {
    throw new Error(
      `Provider ${p.namespace}/${p.name}: type 'gitlab' needs an access token: set key 'token' in the Provider's Secret (a personal, project or group access token with scope 'api')`,
    );
  }
  return { 'PRIVATE-TOKEN': token };
}

export interface GitLabClient {
  secretValues: readonly string[];
  /** The resources for `repo`'s API base whose requests `signal` cancels. */
  resources(repo: ForgeRepo, signal: AbortSignal | undefined): Promise<GitLabResources>;
  /** The token's own user id (`GET /user`), once per API base. */
  myUserId(repo: ForgeRepo, signal: AbortSignal | undefined): Promise<string>;
  /** GitLab project id for gitbeaker, which URL-encodes it itself: the decoded full path. */
  projectId(repo: ForgeRepo): string;
}

/**
 * `@gitbeaker/rest`, imported on first use: it costs a process ~19 MiB RSS and 66 ms CPU
 * (measured: a fresh Node 24 importing it alone), and a controller without GitLab Providers
 * never needs it (issue 21, idle RSS).
 */
let gitbeakerModule: Promise<typeof import('@gitbeaker/rest')> | undefined;
function gitbeaker(): Promise<typeof import('@gitbeaker/rest')> {
  gitbeakerModule ??= import('@gitbeaker/rest');
  return gitbeakerModule;
}

/** @throws Error when the Provider has no token (or password). */
export function gitlabClient(p: ResolvedProvider, http: ProviderHttp): GitLabClient {
  const auth = gitlabAuth(p);
  const secretValues = http.secretValues;
  /** Resources per signal (one send) and API base; sends without a signal share one set. */
  const bySignal = new WeakMap<AbortSignal, Map<string, GitLabResources>>();
  const unsignalled = new Map<string, GitLabResources>();
  const resources = async (repo: ForgeRepo, signal: AbortSignal | undefined): Promise<GitLabResources> => {
    let byBase = signal === undefined ? unsignalled : bySignal.get(signal);
    if (byBase === undefined) {
      byBase = new Map();
      if (signal !== undefined) bySignal.set(signal, byBase);
    }
    let r = byBase.get(repo.apiBase);
    if (r === undefined) {
      const { Commits, MergeRequestNotes, MergeRequests, ProjectMembers, Users } = await gitbeaker();
      const opts = {
        host: GITBEAKER_HOST,
        requesterFn: gitlabRequester(http, repo.apiBase, auth, signal),
        queryTimeout: null,
      };
      r = {
        commits: new Commits(opts),
        mergeRequests: new MergeRequests(opts),
        notes: new MergeRequestNotes(opts),
        users: new Users(opts),
        members: new ProjectMembers(opts),
      };
      byBase.set(repo.apiBase, r);
    }
    return r;
  };
  const me = new LazyPerKey<string>();
  return {
    secretValues,
    resources,
    myUserId: (repo, signal) =>
      me.get(repo.apiBase, async () => {
        const u: unknown = await (await resources(repo, signal)).users.showCurrentUser();
        const message = 'GitLab GET /user answered without a user id: check the Provider address and token';
        return identityOf(idOf(field(u, 'id')), message, secretValues);
      }),
    projectId: (repo) => decodeURIComponent(repo.id),
  };
}
