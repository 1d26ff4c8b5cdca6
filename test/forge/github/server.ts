/**
 * A GitHub REST contract server for tests (design §8): a real local HTTP(S) server that answers
 * like api.github.com (base path `/`) or GitHub Enterprise Server (base path `/api/v3`) for the
 * endpoints the `github` notifier uses, keeps their state, and rejects what GitHub would reject.
 *
 * Every request is checked against GitHub's published OpenAPI description
 * (`@octokit/openapi`, `generated/api.github.com.json`): the method and path must match an
 * operation (else 404), path parameters and query parameters must fit their schemas (404 / 422),
 * and a JSON body must fit the operation's `requestBody` schema (ajv, `strict: false`,
 * ajv-formats) (422). On top of the schema, the server enforces GitHub's documented business
 * rules: description ≤ 140 characters, ≤ 1,000 statuses per commit and context, comment body
 * ≤ 65,536 characters, known repositories/issues/comments, credentials. Each such rejection is
 * recorded in `violations` — tests assert it is empty. An operation that exists in GitHub's API
 * but is not modelled here answers 501 and is recorded as a violation too.
 *
 * The 40 MB description is read once per test worker and reduced at load time to what the
 * checks need (path templates, parameters, request-body schemas with `$ref`s resolved); the
 * parsed document is not kept.
 *
 * State: repositories, pull requests, statuses per commit (newest first when listed), issue
 * comments with their author, user tokens, GitHub App installation tokens. Pagination follows
 * GitHub: `per_page` (default 30, at most 100), `page`, RFC 8288 `Link` with `next`/`last`/
 * `first`/`prev`, absolute URLs built from the request's `Host`.
 *
 * Rate limits are programmable (`throttle`): the next N matching requests get a 403 or 429 with
 * `retry-after` and GitHub's secondary-rate-limit message; those are logged, not violations.
 *
 * As strict as reality where the notifier can go wrong (each with its source):
 * - "List pull requests associated with a commit" returns EVERY pull request that contains the
 *   commit — open, closed or merged, from forks, and those whose head has moved on (case N04;
 *   GitHub's docs: "the merged pull request that introduced the commit", "additionally returns
 *   open pull requests associated with the commit"); only the caller can pick the one whose
 *   `head.sha` is the commit.
 * - A locked conversation refuses comments with 403 "Unable to create comment because issue is
 *   locked." (case N02; a caller without write access), an archived repository every write with
 *   403 "Repository was archived so is read-only." (bodies: test/forge/answers.ts).
 * - A renamed or transferred repository answers its old path with 301 for GET/HEAD and 307 for
 *   other methods, `Location` under `/repositories/{id}/…` (GitHub "Repository redirects";
 *   case N07); `/repositories/{id}/…` is served as the repository's own path.
 */
import { createHash, createPublicKey, verify as verifySignature, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { Ajv, type ValidateFunction } from 'ajv';
import { github as GH, type RealAnswer } from '../answers.ts';
import addFormats from 'ajv-formats';

// ---------------------------------------------------------------------------------------------
// The OpenAPI contract, reduced

interface ParamSpec {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required: boolean;
  schema: unknown;
  multiSegment: boolean;
}

interface OperationSpec {
  operationId: string;
  method: string;
  template: string;
  regex: RegExp;
  /** Path parameter names in order of the regex groups. */
  pathParams: string[];
  params: ParamSpec[];
  body: { required: boolean; schema: unknown } | undefined;
  /** Literal segment count, for match priority. */
  literals: number;
}

interface Contract {
  operations: OperationSpec[];
  ajv: Ajv;
  validators: Map<unknown, ValidateFunction>;
}

let contract: Contract | undefined;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Keys dropped from schemas at load: documentation only. */
const DOC_KEYS = new Set(['description', 'example', 'examples', 'summary', 'externalDocs', 'title']);

/** Loads and reduces GitHub's OpenAPI description (once per worker). */
export function gitHubContract(): Contract {
  if (contract !== undefined) return contract;
  const require = createRequire(import.meta.url);
  const file = require.resolve('@octokit/openapi/generated/api.github.com.json');
  const spec = JSON.parse(readFileSync(file, 'utf8')) as {
    paths: Record<string, Record<string, Json>>;
    components: Record<string, Record<string, Json>>;
  };
  const formats = new Set<string>();
  const memo = new Map<string, Json>();
  const resolving = new Set<string>();

  const lookup = (ref: string): Json => {
    const m = /^#\/components\/([^/]+)\/(.+)$/.exec(ref);
    const v = m ? spec.components[m[1] ?? '']?.[m[2] ?? ''] : undefined;
    if (v === undefined) throw new Error(`unresolvable $ref ${ref}`);
    return v;
  };
  // Inlines $refs (memoised; a reference cycle becomes an unconstrained schema) and drops docs.
  const deref = (node: Json): Json => {
    if (Array.isArray(node)) return node.map(deref);
    if (node === null || typeof node !== 'object') return node;
    const ref = node.$ref;
    if (typeof ref === 'string') {
      const done = memo.get(ref);
      if (done !== undefined) return done;
      if (resolving.has(ref)) return {};
      resolving.add(ref);
      const out = deref(lookup(ref));
      resolving.delete(ref);
      memo.set(ref, out);
      return out;
    }
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(node)) {
      if (DOC_KEYS.has(k)) continue;
      if (k === 'format' && typeof v === 'string') formats.add(v);
      // `properties` maps names to schemas: keep every name even if it is `description`.
      out[k] =
        k === 'properties' && v !== null && typeof v === 'object' && !Array.isArray(v)
          ? Object.fromEntries(Object.entries(v).map(([pk, pv]) => [pk, deref(pv)]))
          : deref(v);
    }
    return out;
  };

  const operations: OperationSpec[] = [];
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const [method, rawOp] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const op = rawOp as { operationId?: string; parameters?: Json[]; requestBody?: Json };
      const params: ParamSpec[] = (op.parameters ?? []).map((raw) => {
        const p = deref(raw) as {
          name: string;
          in: ParamSpec['in'];
          required?: boolean;
          schema?: Json;
          'x-multi-segment'?: boolean;
        };
        return {
          name: p.name,
          in: p.in,
          required: p.required === true,
          schema: p.schema ?? {},
          multiSegment: p['x-multi-segment'] === true,
        };
      });
      const pathParams: string[] = [];
      const segs = template.split('/').filter((s) => s !== '');
      let literals = 0;
      const pattern = segs
        .map((s) => {
          const m = /^\{(.+)\}$/.exec(s);
          if (m?.[1] === undefined) {
            literals++;
            return `/${escapeRegex(s)}`;
          }
          pathParams.push(m[1]);
          const multi = params.find((p) => p.name === m[1])?.multiSegment === true;
          return multi ? '/(.+)' : '/([^/]+)';
        })
        .join('');
      let body: OperationSpec['body'];
      if (op.requestBody !== undefined) {
        const rb = deref(op.requestBody) as {
          required?: boolean;
          content?: Record<string, { schema?: Json }>;
        };
        const schema = rb.content?.['application/json']?.schema;
        if (schema !== undefined) body = { required: rb.required === true, schema };
      }
      operations.push({
        operationId: op.operationId ?? `${method} ${template}`,
        method: method.toUpperCase(),
        template,
        regex: new RegExp(`^${pattern === '' ? '/' : pattern}$`),
        pathParams,
        params,
        body,
        literals,
      });
    }
  }
  // Most specific first: more literal segments, then fewer multi-segment parameters.
  operations.sort((a, b) => b.literals - a.literals || a.pathParams.length - b.pathParams.length);

  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats.default(ajv);
  ajv.addFormat('int32', {
    type: 'number',
    validate: (n: number) => Number.isInteger(n) && Math.abs(n) < 2 ** 31,
  });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  for (const f of formats) {
    if (ajv.formats[f] === undefined) ajv.addFormat(f, true);
  }
  contract = { operations, ajv, validators: new Map() };
  return contract;
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function validatorFor(c: Contract, schema: unknown): ValidateFunction {
  let v = c.validators.get(schema);
  if (v === undefined) {
    v = c.ajv.compile(schema as object);
    c.validators.set(schema, v);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Server state

export interface StoredStatus {
  id: number;
  state: 'error' | 'failure' | 'pending' | 'success';
  context: string;
  description: string | null;
  target_url: string | null;
  creator: string;
  created_at: string;
}

export interface StoredComment {
  id: number;
  body: string;
  login: string;
  userType: 'User' | 'Bot';
  /** App that made it (installation tokens), else null. */
  app: { id: number; slug: string } | null;
  created_at: string;
  updated_at: string;
  /** How many times it was edited. */
  edits: number;
}

export interface StoredPull {
  number: number;
  headSha: string;
  /** Every commit the pull request contains (its head included). */
  commits: string[];
  state: 'open' | 'closed';
  merged: boolean;
  /**
   * The commit its merge made on the base branch (merge, squash or rebase), listed as
   * `merge_commit_sha`; the pull request is then "associated with" that commit too (GitHub's
   * docs: "the merged pull request that introduced the commit").
   */
  mergeCommit?: string;
  /** Opened from a fork (`head.repo` is another repository). */
  fork: boolean;
  /** Target branch (default `main`), head branch (default `feature-<n>`), author, labels. */
  base?: string;
  headRef?: string;
  author?: string;
  /** GitHub's `author_association` of the author (default `MEMBER`). */
  association?: string;
  /** Title (default `PR <number>`). */
  title?: string;
  labels?: string[];
}

export interface LoggedRequest {
  method: string;
  /** Path as received, without the query. */
  path: string;
  query: string;
  host: string;
  /** Matched operation id, or undefined. */
  operationId: string | undefined;
  /** Who the credentials name: `token:<login>`, `installation:<slug>[bot]`, `jwt:<app id>`, `none`, `invalid`. */
  auth: string;
  status: number;
  throttled: boolean;
}

export interface Violation {
  method: string;
  path: string;
  status: number;
  reason: string;
}

export interface GitHubAppSpec {
  id: number;
  slug: string;
  installationId: number;
  /** PEM public key matching the App's private key (JWTs are verified with it). */
  publicKeyPem: string;
}

export interface GitHubServerOptions {
  /** `''` (api.github.com-like, default) or `/api/v3` (GitHub Enterprise Server). */
  basePath?: string;
  /** Serve HTTPS with this certificate. */
  tls?: { cert: string; key: string };
  /** Repositories (`owner/repo`) that exist. Default `['acme/app']`. */
  repos?: string[];
  /** Personal tokens → login. */
  tokens?: Record<string, string>;
  app?: GitHubAppSpec;
  /** Lifetime of installation tokens, ms (default 1 hour). */
  installationTokenTtlMs?: number;
}

export interface ThrottleSpec {
  status: 403 | 429;
  /** `retry-after` seconds; omitted when undefined. */
  retryAfter?: number;
  /** How many matching requests get it (default 1). */
  count?: number;
  /** Only requests for which this returns true (default: all). */
  match?: (method: string, path: string) => boolean;
}

export interface GitHubContractServer {
  /** `http(s)://127.0.0.1:<port>` */
  origin: string;
  /** `origin + basePath` — the API base a client should use. */
  apiBase: string;
  port: number;
  log: LoggedRequest[];
  violations: Violation[];
  addRepo(fullName: string): void;
  addToken(token: string, login: string): void;
  /** Revokes a personal token: requests carrying it get 401 "Bad credentials" from now on. */
  revokeToken(token: string): void;
  /**
   * Takes the "Pull requests" permission from a personal token (a fine-grained token with
   * "Commit statuses" only): pull-request listings and issue comments answer 403 "Resource not
   * accessible by personal access token"; statuses still work.
   */
  withoutPullRequestPermission(token: string): void;
  /**
   * Adds a pull request; `commits` are the commits it contains besides its head (the head is
   * always one of them).
   */
  addPullRequest(
    repo: string,
    pr: {
      number: number;
      headSha: string;
      commits?: string[];
      state?: 'open' | 'closed';
      merged?: boolean;
      mergeCommit?: string;
      fork?: boolean;
      base?: string;
      headRef?: string;
      author?: string;
      association?: string;
      labels?: string[];
    },
  ): void;
  /**
   * Changes a pull request as a push, close, relabel or retarget would: a new `headSha` joins its
   * commits. Its listing (`GET /repos/{o}/{r}/pulls`) then answers with a new `ETag`.
   */
  updatePullRequest(
    repo: string,
    n: number,
    patch: Partial<
      Pick<StoredPull, 'headSha' | 'state' | 'merged' | 'mergeCommit' | 'base' | 'labels' | 'title'>
    >,
  ): void;
  /** Locks the conversation of issue or pull request `n`: comments are refused (403). */
  lockIssue(repo: string, n: number): void;
  /** Archives `repo`: every write is refused (403). */
  archiveRepo(repo: string): void;
  /** Renames or transfers `from` to `to` (`owner/repo`): the old path redirects (301/307). */
  renameRepo(from: string, to: string): void;
  /** Adds a status as if another tool had posted it (appended: newest). */
  addStatus(
    repo: string,
    sha: string,
    s: {
      state: StoredStatus['state'];
      context: string;
      description?: string;
      target_url?: string;
      creator?: string;
    },
  ): StoredStatus;
  /** Adds an issue comment by `login` (appended: newest). */
  addComment(
    repo: string,
    issue: number,
    c: { body: string; login: string; userType?: 'User' | 'Bot' },
  ): StoredComment;
  /** Statuses of a commit, newest first. */
  statuses(repo: string, sha: string): StoredStatus[];
  /** Comments of an issue or pull request, oldest first. */
  comments(repo: string, issue: number): StoredComment[];
  throttle(spec: ThrottleSpec): void;
  /**
   * From now on, requests for which `match` returns true are never answered (held open until
   * `close()`): a forge that hangs. They are logged with status 0.
   */
  stall(match: (method: string, path: string) => boolean): void;
  /**
   * The next `count` (default 1) successful answers of operation `operationId` are followed by
   * JSON whitespace up to `toBytes` in all: still a valid answer, just too long to read (case N17:
   * a 50 MB listing). Written in 1 MiB chunks, stopping when the client goes away.
   */
  padAnswers(spec: { operationId: string; toBytes: number; count?: number }): void;
  /**
   * The next `count` (default 1) requests `match` accepts get this answer instead of GitHub's:
   * what a login or SSO portal in front of the API answers (an HTML page with 200, a 302 to
   * `/login` or to another host). Logged with operation id `portal`.
   */
  portalNext(spec: {
    match: (method: string, path: string) => boolean;
    status: number;
    headers?: Record<string, string>;
    body?: string;
    count?: number;
  }): void;
  /** Makes "pull requests for commit" answer 422 "No commit found" for `sha` (not yet indexed). */
  commitNotIndexed(sha: string): void;
  /** Requests that reached the server and were not throttled. */
  apiCalls(): LoggedRequest[];
  /** TCP connections accepted so far (with a proxy, each one is a tunnel the proxy opened). */
  connections(): number;
  close(): Promise<void>;
}

const SECONDARY_LIMIT_MESSAGE =
  'You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.';
const DOCS = 'https://docs.github.com/rest';

interface Credential {
  kind: 'user' | 'installation';
  login: string;
  type: 'User' | 'Bot';
  app: { id: number; slug: string } | null;
  expiresAt: number;
  /** A fine-grained token without the "Pull requests" permission (commit statuses only). */
  noPullRequests?: boolean;
}

/** Writes `json` then spaces up to `toBytes` in all, in 1 MiB chunks, until done or the client leaves. */
async function writePadded(res: ServerResponse, json: string, toBytes: number): Promise<void> {
  const chunk = Buffer.alloc(1024 * 1024, 0x20);
  let left = toBytes - Buffer.byteLength(json);
  res.write(json);
  while (left > 0 && !res.destroyed) {
    const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
    left -= part.length;
    if (!res.write(part)) {
      await new Promise<void>((resolve) => {
        res.once('drain', resolve);
        res.once('close', resolve);
      });
    }
  }
  if (!res.destroyed) res.end();
}

class HttpAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly headers: Record<string, string>;
  readonly violation: string | undefined;
  constructor(
    status: number,
    body: unknown,
    opts: { headers?: Record<string, string>; violation?: string } = {},
  ) {
    this.status = status;
    this.body = body;
    this.headers = opts.headers ?? {};
    this.violation = opts.violation;
  }
}

const reject = (status: number, message: string, reason: string, errors?: unknown[]): HttpAnswer =>
  new HttpAnswer(
    status,
    { message, ...(errors ? { errors } : {}), documentation_url: DOCS, status: String(status) },
    { violation: reason },
  );

const codePoints = (s: string): number => Array.from(s).length;

/** `merged_at` of merged pull requests: fixed, so a listing's ETag changes only with its content. */
const MERGED_AT = '2026-01-01T00:00:00Z';

/** A refusal GitHub gives a well-formed request (not a contract violation): a real answer as it is. */
const refusal = (a: RealAnswer): HttpAnswer => new HttpAnswer(a.status, JSON.parse(a.body) as unknown);

/** Starts the contract server on 127.0.0.1 (random port). */
export async function startGitHubServer(opts: GitHubServerOptions = {}): Promise<GitHubContractServer> {
  const c = gitHubContract();
  const basePath = (opts.basePath ?? '').replace(/\/+$/, '');
  const log: LoggedRequest[] = [];
  const violations: Violation[] = [];
  const repos = new Map<string, string>(); // lower-case → canonical
  const statuses = new Map<string, StoredStatus[]>(); // repo@sha → oldest first
  const comments = new Map<string, StoredComment[]>(); // repo#n → oldest first
  const pulls = new Map<string, StoredPull[]>(); // repo → pulls
  const credentials = new Map<string, Credential>();
  const throttles: (ThrottleSpec & { left: number })[] = [];
  const stalls: ((method: string, path: string) => boolean)[] = [];
  const pads: { operationId: string; toBytes: number; left: number }[] = [];
  const portals: {
    match: (method: string, path: string) => boolean;
    status: number;
    headers: Record<string, string>;
    body: string;
    left: number;
  }[] = [];
  const notIndexed = new Set<string>();
  const locked = new Set<string>(); // repo#n
  const archived = new Set<string>(); // repo key
  const repoIds = new Map<string, number>(); // repo key → id
  const movedFrom = new Map<string, string>(); // old repo key → canonical new name
  const app = opts.app;
  const appKey = app ? createPublicKey(app.publicKeyPem) : undefined;
  const tokenTtl = opts.installationTokenTtlMs ?? 3_600_000;
  let nextId = 1000;

  const repoKey = (r: string): string => r.toLowerCase();
  const addRepo = (r: string): void => {
    repos.set(repoKey(r), r);
    if (!repoIds.has(repoKey(r))) repoIds.set(repoKey(r), 100 + repoIds.size);
  };
  /** The canonical name of the repository with id `id`. */
  const repoById = (id: number): string | undefined => {
    for (const [k, v] of repoIds) if (v === id) return repos.get(k);
    return undefined;
  };
  /** A write to an archived repository is refused, whatever the operation (answers.ts). */
  const readOnly = (repo: string): HttpAnswer | undefined =>
    archived.has(repoKey(repo)) ? refusal(GH.archived) : undefined;
  for (const r of opts.repos ?? ['acme/app']) addRepo(r);
  for (const [t, login] of Object.entries(opts.tokens ?? {})) {
    credentials.set(t, { kind: 'user', login, type: 'User', app: null, expiresAt: Number.POSITIVE_INFINITY });
  }

  const userObject = (login: string, type: 'User' | 'Bot'): Record<string, unknown> => ({
    login,
    id: Math.abs(hashCode(login)),
    node_id: `U_${login}`,
    type,
    site_admin: false,
    url: `https://api.github.invalid/users/${encodeURIComponent(login)}`,
  });

  const statusObject = (s: StoredStatus): Record<string, unknown> => ({
    url: `https://api.github.invalid/statuses/${s.id}`,
    avatar_url: null,
    id: s.id,
    node_id: `SC_${s.id}`,
    state: s.state,
    description: s.description,
    target_url: s.target_url,
    context: s.context,
    created_at: s.created_at,
    updated_at: s.created_at,
    creator: userObject(s.creator, s.creator.endsWith('[bot]') ? 'Bot' : 'User'),
  });

  const commentObject = (repo: string, issue: number, cm: StoredComment): Record<string, unknown> => ({
    id: cm.id,
    node_id: `IC_${cm.id}`,
    url: `https://api.github.invalid/repos/${repo}/issues/comments/${cm.id}`,
    html_url: `https://github.invalid/${repo}/pull/${issue}#issuecomment-${cm.id}`,
    issue_url: `https://api.github.invalid/repos/${repo}/issues/${issue}`,
    body: cm.body,
    user: userObject(cm.login, cm.userType),
    created_at: cm.created_at,
    updated_at: cm.updated_at,
    author_association: cm.userType === 'Bot' ? 'NONE' : 'MEMBER',
    performed_via_github_app: cm.app,
  });

  const pullObject = (repo: string, p: StoredPull): Record<string, unknown> => ({
    id: p.number * 7919,
    number: p.number,
    node_id: `PR_${p.number}`,
    state: p.state,
    title: p.title ?? `PR ${p.number}`,
    html_url: `https://github.invalid/${repo}/pull/${p.number}`,
    merged_at: p.merged ? MERGED_AT : null,
    merge_commit_sha: p.mergeCommit ?? null,
    head: {
      sha: p.headSha,
      ref: p.headRef ?? `feature-${p.number}`,
      repo: { full_name: p.fork ? `fork-owner/${repo.split('/')[1] ?? 'repo'}` : repo, fork: p.fork },
    },
    base: { ref: p.base ?? 'main', repo: { full_name: repo, fork: false } },
    user: userObject(p.author ?? 'octocat', 'User'),
    labels: (p.labels ?? []).map((name, i) => ({ id: i + 1, name, color: 'ededed', default: false })),
    author_association: p.association ?? 'MEMBER',
  });

  const findComment = (repo: string, id: number): { issue: number; cm: StoredComment } | undefined => {
    for (const [k, list] of comments) {
      if (!k.startsWith(`${repoKey(repo)}#`)) continue;
      const cm = list.find((x) => x.id === id);
      if (cm) return { issue: Number(k.slice(k.indexOf('#') + 1)), cm };
    }
    return undefined;
  };

  const issueExists = (repo: string, n: number): boolean =>
    (pulls.get(repoKey(repo)) ?? []).some((p) => p.number === n) || comments.has(`${repoKey(repo)}#${n}`);

  /** Pagination per GitHub: returns the page and the Link header. */
  const paginate = <T>(
    items: T[],
    query: URLSearchParams,
    self: URL,
  ): { page: T[]; headers: Record<string, string> } => {
    const perPage = Math.min(Math.max(Number(query.get('per_page') ?? 30) || 30, 1), 100);
    const page = Math.max(Number(query.get('page') ?? 1) || 1, 1);
    const last = Math.max(Math.ceil(items.length / perPage), 1);
    const link = (n: number): string => {
      const u = new URL(self.toString());
      u.searchParams.set('per_page', String(perPage));
      u.searchParams.set('page', String(n));
      return u.toString();
    };
    const rels: string[] = [];
    if (page > 1) rels.push(`<${link(page - 1)}>; rel="prev"`);
    if (page < last) rels.push(`<${link(page + 1)}>; rel="next"`, `<${link(last)}>; rel="last"`);
    if (page > 1) rels.push(`<${link(1)}>; rel="first"`);
    return {
      page: items.slice((page - 1) * perPage, page * perPage),
      headers: rels.length > 0 ? { link: rels.join(', ') } : {},
    };
  };

  /** Verifies an App JWT (RS256, iss = App id, at most 10 minutes, not expired). */
  const verifyJwt = (jwt: string): string | undefined => {
    if (!app || !appKey) return 'no GitHub App is configured on this server';
    const parts = jwt.split('.');
    if (parts.length !== 3) return 'A JSON web token could not be decoded';
    const [h = '', p = '', s = ''] = parts;
    let header: { alg?: unknown };
    let payload: { iss?: unknown; iat?: unknown; exp?: unknown };
    try {
      header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as { alg?: unknown };
      payload = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as typeof payload;
    } catch {
      return 'A JSON web token could not be decoded';
    }
    if (header.alg !== 'RS256') return `'alg' must be RS256`;
    const ok = verifySignature('RSA-SHA256', Buffer.from(`${h}.${p}`), appKey, Buffer.from(s, 'base64url'));
    if (!ok) return 'A JSON web token could not be decoded';
    const now = Math.floor(Date.now() / 1000);
    if (typeof payload.iat !== 'number' || payload.iat > now + 60) {
      return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued.";
    }
    if (typeof payload.exp !== 'number' || payload.exp <= now) {
      return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires.";
    }
    if (payload.exp - payload.iat > 660) return "'Expiration time' claim ('exp') is too far in the future.";
    if (String(payload.iss) !== String(app.id)) return "'Issuer' claim ('iss') must be an Integer";
    return undefined;
  };

  interface Ctx {
    method: string;
    op: OperationSpec;
    params: Record<string, string>;
    query: URLSearchParams;
    body: unknown;
    self: URL;
    authHeader: string | undefined;
    /** `If-None-Match` of the request (conditional GETs). */
    ifNoneMatch: string | undefined;
    setAuth: (a: string) => void;
  }

  /** Resolves the caller of a non-App endpoint. */
  const caller = (ctx: Ctx): Credential | HttpAnswer => {
    const h = ctx.authHeader;
    if (h === undefined) return reject(401, 'Requires authentication', 'no credentials');
    const m = /^(token|bearer)\s+(\S+)$/i.exec(h);
    const cred = m?.[2] === undefined ? undefined : credentials.get(m[2]);
    if (cred === undefined || cred.expiresAt <= Date.now()) {
      ctx.setAuth('invalid');
      return reject(401, 'Bad credentials', 'bad credentials');
    }
    ctx.setAuth(cred.kind === 'user' ? `token:${cred.login}` : `installation:${cred.login}`);
    return cred;
  };

  /** GitHub's answer to a token without the permission an operation needs. */
  const notAccessible = (): HttpAnswer =>
    new HttpAnswer(403, {
      message: 'Resource not accessible by personal access token',
      documentation_url: DOCS,
      status: '403',
    });

  const repoOf = (ctx: Ctx): string | HttpAnswer => {
    const full = `${ctx.params.owner ?? ''}/${ctx.params.repo ?? ''}`;
    const canonical = repos.get(repoKey(full));
    return canonical ?? reject(404, 'Not Found', `repository ${full} does not exist`);
  };

  const handlers: Record<string, (ctx: Ctx) => HttpAnswer> = {
    'users/get-authenticated': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      if (who.kind === 'installation') {
        return reject(403, 'Resource not accessible by integration', 'GET /user with an installation token');
      }
      return new HttpAnswer(200, userObject(who.login, 'User'));
    },

    'apps/get-authenticated': (ctx) => {
      const why = verifyJwt(/^bearer\s+(\S+)$/i.exec(ctx.authHeader ?? '')?.[1] ?? '');
      if (why !== undefined || !app)
        return reject(401, why ?? 'no app', `App JWT refused: ${why ?? 'no app'}`);
      ctx.setAuth(`jwt:${app.id}`);
      return new HttpAnswer(200, {
        id: app.id,
        slug: app.slug,
        node_id: `A_${app.id}`,
        name: app.slug,
        owner: userObject('acme', 'User'),
      });
    },

    'apps/create-installation-access-token': (ctx) => {
      const why = verifyJwt(/^bearer\s+(\S+)$/i.exec(ctx.authHeader ?? '')?.[1] ?? '');
      if (why !== undefined || !app)
        return reject(401, why ?? 'no app', `App JWT refused: ${why ?? 'no app'}`);
      ctx.setAuth(`jwt:${app.id}`);
      if (Number(ctx.params.installation_id) !== app.installationId) {
        return reject(404, 'Not Found', `installation ${ctx.params.installation_id ?? ''} does not exist`);
      }
      const token = `ghs_${randomBytes(18).toString('hex')}`;
      const expiresAt = Date.now() + tokenTtl;
      credentials.set(token, {
        kind: 'installation',
        login: `${app.slug}[bot]`,
        type: 'Bot',
        app: { id: app.id, slug: app.slug },
        expiresAt,
      });
      return new HttpAnswer(201, {
        token,
        expires_at: new Date(expiresAt).toISOString(),
        permissions: { statuses: 'write', pull_requests: 'write', issues: 'write', metadata: 'read' },
        repository_selection: 'all',
      });
    },

    'repos/create-commit-status': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      const repo = repoOf(ctx);
      if (typeof repo === 'string' && readOnly(repo)) return readOnly(repo) as HttpAnswer;
      if (repo instanceof HttpAnswer) return repo;
      const sha = ctx.params.sha ?? '';
      if (!/^[0-9a-f]{40}$/i.test(sha))
        return reject(422, `No commit found for SHA: ${sha}`, 'unknown commit');
      const b = ctx.body as {
        state: StoredStatus['state'];
        context?: string;
        description?: string | null;
        target_url?: string | null;
      };
      const context = b.context ?? 'default';
      if (b.description != null && codePoints(b.description) > 140) {
        return reject(422, 'Validation Failed', 'description over 140 characters', [
          {
            resource: 'Status',
            code: 'custom',
            field: 'description',
            message: 'description is too long (maximum is 140 characters)',
          },
        ]);
      }
      const key = `${repoKey(repo)}@${sha.toLowerCase()}`;
      const list = statuses.get(key) ?? [];
      if (list.filter((s) => s.context.toLowerCase() === context.toLowerCase()).length >= 1000) {
        return reject(422, 'Validation Failed', 'over 1000 statuses for this commit and context', [
          {
            resource: 'Status',
            code: 'custom',
            field: 'context',
            message: 'This SHA and context has reached the maximum number of statuses.',
          },
        ]);
      }
      const s: StoredStatus = {
        id: nextId++,
        state: b.state,
        context,
        description: b.description ?? null,
        target_url: b.target_url ?? null,
        creator: who.login,
        created_at: new Date().toISOString(),
      };
      list.push(s);
      statuses.set(key, list);
      return new HttpAnswer(201, statusObject(s));
    },

    'repos/list-commit-statuses-for-ref': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const list = [
        ...(statuses.get(`${repoKey(repo)}@${(ctx.params.ref ?? '').toLowerCase()}`) ?? []),
      ].reverse();
      const { page, headers } = paginate(list, ctx.query, ctx.self);
      return new HttpAnswer(200, page.map(statusObject), { headers });
    },

    'repos/list-pull-requests-associated-with-commit': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      if (who.noPullRequests === true) return notAccessible();
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const sha = (ctx.params.commit_sha ?? '').toLowerCase();
      if (!/^[0-9a-f]{40}$/.test(sha))
        return reject(422, `No commit found for SHA: ${sha}`, 'unknown commit');
      if (notIndexed.has(sha)) {
        // GitHub's answer for a commit it has not indexed: the request itself is valid.
        return new HttpAnswer(422, {
          message: `No commit found for SHA: ${sha}`,
          documentation_url: DOCS,
          status: '422',
        });
      }
      // Every pull request containing the commit, whatever its state, head or origin (N04).
      const list = (pulls.get(repoKey(repo)) ?? []).filter(
        (p) => p.commits.some((c) => c.toLowerCase() === sha) || (p.merged && p.mergeCommit === sha),
      );
      const { page, headers } = paginate(list, ctx.query, ctx.self);
      return new HttpAnswer(
        200,
        page.map((p) => pullObject(repo, p)),
        { headers },
      );
    },

    // Open pull requests of a branch, with GitHub's conditional requests: every answer carries an
    // `ETag` of its content; `If-None-Match` with the current one answers `304 Not Modified` with
    // no body — which GitHub does not count against the rate limit ("Use conditional requests if
    // appropriate", REST API best practices). Order: newest first (`sort=created`, `direction=desc`).
    'pulls/list': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const state = ctx.query.get('state') ?? 'open';
      const base = ctx.query.get('base');
      const list = (pulls.get(repoKey(repo)) ?? [])
        .filter((p) => state === 'all' || p.state === state)
        .filter((p) => base === null || (p.base ?? 'main') === base)
        .sort((a, b) => b.number - a.number);
      const { page, headers } = paginate(list, ctx.query, ctx.self);
      const body = page.map((p) => pullObject(repo, p));
      const etag = `W/"${createHash('sha256')
        .update(JSON.stringify([body, headers]))
        .digest('hex')
        .slice(0, 32)}"`;
      if (ctx.ifNoneMatch !== undefined && ctx.ifNoneMatch === etag) {
        return new HttpAnswer(304, undefined, { headers: { etag } });
      }
      return new HttpAnswer(200, body, { headers: { ...headers, etag } });
    },

    // One pull request by number: the listing's fields plus `merged` (GitHub's "Get a pull
    // request"; closed pull requests too); 404 for an unknown number.
    'pulls/get': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const n = Number(ctx.params.pull_number);
      const p = (pulls.get(repoKey(repo)) ?? []).find((x) => x.number === n);
      if (p === undefined) return reject(404, 'Not Found', `pull request ${String(n)} does not exist`);
      return new HttpAnswer(200, { ...pullObject(repo, p), merged: p.merged });
    },

    'issues/list-comments': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      if (who.noPullRequests === true) return notAccessible();
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const n = Number(ctx.params.issue_number);
      if (!issueExists(repo, n)) return reject(404, 'Not Found', `issue ${n} does not exist`);
      const list = comments.get(`${repoKey(repo)}#${n}`) ?? [];
      const { page, headers } = paginate(list, ctx.query, ctx.self);
      return new HttpAnswer(
        200,
        page.map((cm) => commentObject(repo, n, cm)),
        { headers },
      );
    },

    'issues/create-comment': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      if (who.noPullRequests === true) return notAccessible();
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const n = Number(ctx.params.issue_number);
      if (!issueExists(repo, n)) return reject(404, 'Not Found', `issue ${n} does not exist`);
      const ro = readOnly(repo);
      if (ro) return ro;
      if (locked.has(`${repoKey(repo)}#${n}`)) return refusal(GH.locked);
      const body = (ctx.body as { body: string }).body;
      if (codePoints(body) > 65_536) {
        return reject(422, 'Validation Failed', 'comment body over 65,536 characters', [
          {
            resource: 'IssueComment',
            code: 'unprocessable',
            field: 'data',
            message: 'Body is too long (maximum is 65536 characters)',
          },
        ]);
      }
      const now = new Date().toISOString();
      const cm: StoredComment = {
        id: nextId++,
        body,
        login: who.login,
        userType: who.type,
        app: who.app,
        created_at: now,
        updated_at: now,
        edits: 0,
      };
      const key = `${repoKey(repo)}#${n}`;
      comments.set(key, [...(comments.get(key) ?? []), cm]);
      return new HttpAnswer(201, commentObject(repo, n, cm));
    },

    'issues/update-comment': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      if (who.noPullRequests === true) return notAccessible();
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const found = findComment(repo, Number(ctx.params.comment_id));
      if (!found) return reject(404, 'Not Found', `comment ${ctx.params.comment_id ?? ''} does not exist`);
      const ro = readOnly(repo);
      if (ro) return ro;
      if (locked.has(`${repoKey(repo)}#${found.issue}`)) return refusal(GH.locked);
      const body = (ctx.body as { body: string }).body;
      if (codePoints(body) > 65_536) {
        return reject(422, 'Validation Failed', 'comment body over 65,536 characters', [
          {
            resource: 'IssueComment',
            code: 'unprocessable',
            field: 'data',
            message: 'Body is too long (maximum is 65536 characters)',
          },
        ]);
      }
      found.cm.body = body;
      found.cm.updated_at = new Date().toISOString();
      found.cm.edits++;
      return new HttpAnswer(200, commentObject(repo, found.issue, found.cm));
    },

    'issues/get-comment': (ctx) => {
      const who = caller(ctx);
      if (who instanceof HttpAnswer) return who;
      const repo = repoOf(ctx);
      if (repo instanceof HttpAnswer) return repo;
      const found = findComment(repo, Number(ctx.params.comment_id));
      if (!found) return reject(404, 'Not Found', `comment ${ctx.params.comment_id ?? ''} does not exist`);
      return new HttpAnswer(200, commentObject(repo, found.issue, found.cm));
    },
  };

  /** Checks the request against the contract and runs the handler. */
  const answer = (
    method: string,
    url: URL,
    rawBody: string,
    req: IncomingMessage,
    entry: LoggedRequest,
  ): HttpAnswer => {
    if (basePath !== '' && !url.pathname.startsWith(`${basePath}/`)) {
      return reject(404, 'Not Found', `path outside the API base ${basePath}`);
    }
    let path = url.pathname.slice(basePath.length) || '/';
    // Repository redirects (N07): the old path of a moved repository redirects to its id.
    const old = /^\/repos\/([^/]+)\/([^/]+)(\/.*)?$/.exec(path);
    const movedTo =
      old === null
        ? undefined
        : movedFrom.get(repoKey(`${decodeURIComponent(old[1] ?? '')}/${decodeURIComponent(old[2] ?? '')}`));
    if (old !== null && movedTo !== undefined) {
      const location = `${url.origin}${basePath}/repositories/${String(repoIds.get(repoKey(movedTo)))}${old[3] ?? ''}${url.search}`;
      const permanent = method === 'GET' || method === 'HEAD';
      return new HttpAnswer(
        permanent ? 301 : 307,
        {
          message: permanent ? 'Moved Permanently' : 'Temporary Redirect',
          url: location,
          documentation_url: 'https://docs.github.com/v3/#http-redirects',
        },
        { headers: { location } },
      );
    }
    const byId = /^\/repositories\/(\d+)(\/.*)?$/.exec(path);
    const idName = byId === null ? undefined : repoById(Number(byId[1]));
    if (byId !== null && idName !== undefined) path = `/repos/${idName}${byId[2] ?? ''}`;
    const candidates = c.operations.filter((o) => o.regex.test(path));
    if (candidates.length === 0) return reject(404, 'Not Found', 'no such path in the GitHub REST API');
    const op = candidates.find((o) => o.method === method);
    if (op === undefined)
      return reject(404, 'Not Found', `no ${method} operation for this path in the GitHub REST API`);
    entry.operationId = op.operationId;

    // Path parameters.
    const m = op.regex.exec(path);
    const params: Record<string, string> = {};
    op.pathParams.forEach((name, i) => {
      params[name] = decodeURIComponent(m?.[i + 1] ?? '');
    });
    for (const p of op.params) {
      if (p.in === 'path') {
        const v = coerce(params[p.name] ?? '', p.schema);
        if (!validatorFor(c, p.schema)(v))
          return reject(
            404,
            'Not Found',
            `path parameter ${p.name}=${params[p.name] ?? ''} does not fit its schema`,
          );
      } else if (p.in === 'query') {
        const raw = url.searchParams.get(p.name);
        if (raw === null) {
          if (p.required)
            return reject(422, `Missing query parameter ${p.name}`, `missing query parameter ${p.name}`);
          continue;
        }
        const v = coerce(raw, p.schema);
        const validate = validatorFor(c, p.schema);
        if (!validate(v))
          return reject(
            422,
            `Invalid query parameter ${p.name}`,
            `query parameter ${p.name}=${raw}: ${c.ajv.errorsText(validate.errors)}`,
          );
      }
    }

    // Body.
    let body: unknown;
    if (rawBody !== '') {
      try {
        body = JSON.parse(rawBody);
      } catch {
        return reject(400, 'Problems parsing JSON', 'body is not JSON');
      }
    }
    if (op.body !== undefined) {
      if (body === undefined && op.body.required)
        return reject(422, 'Invalid request.\n\nNo body given.', 'missing request body');
      if (body !== undefined) {
        const validate = validatorFor(c, op.body.schema);
        if (!validate(body)) {
          return reject(
            422,
            `Invalid request.\n\n${c.ajv.errorsText(validate.errors)}`,
            `body does not fit ${op.operationId}: ${c.ajv.errorsText(validate.errors)}`,
          );
        }
      }
    }

    const handler = handlers[op.operationId];
    if (handler === undefined) {
      return reject(
        501,
        'Not Implemented',
        `${op.operationId} is a GitHub operation the contract server does not model`,
      );
    }
    const auth = req.headers.authorization;
    return handler({
      method,
      op,
      params,
      query: url.searchParams,
      body,
      self: url,
      authHeader: auth,
      ifNoneMatch: req.headers['if-none-match'],
      setAuth: (a) => {
        entry.auth = a;
      },
    });
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      const method = (req.method ?? 'GET').toUpperCase();
      const host = req.headers.host ?? '';
      const url = new URL(req.url ?? '/', `${opts.tls ? 'https' : 'http'}://${host}`);
      const entry: LoggedRequest = {
        method,
        path: url.pathname,
        query: url.search,
        host,
        operationId: undefined,
        auth: req.headers.authorization === undefined ? 'none' : 'unverified',
        status: 0,
        throttled: false,
      };
      log.push(entry);
      const base = {
        'content-type': 'application/json; charset=utf-8',
        'x-github-api-version-selected': '2022-11-28',
        'x-ratelimit-limit': '5000',
        'x-ratelimit-remaining': '4999',
        'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
        'x-ratelimit-resource': 'core',
      };

      if (stalls.some((m) => m(method, url.pathname))) return; // never answered
      const portal = portals.find((x) => x.left > 0 && x.match(method, url.pathname));
      if (portal) {
        portal.left--;
        entry.status = portal.status;
        entry.operationId = 'portal';
        res.writeHead(portal.status, portal.headers);
        res.end(portal.body);
        return;
      }
      const t = throttles.find((x) => x.left > 0 && (x.match?.(method, url.pathname) ?? true));
      if (t) {
        t.left--;
        entry.status = t.status;
        entry.throttled = true;
        res.writeHead(t.status, {
          ...base,
          ...(t.retryAfter !== undefined ? { 'retry-after': String(t.retryAfter) } : {}),
        });
        res.end(
          JSON.stringify({
            message: SECONDARY_LIMIT_MESSAGE,
            documentation_url: `${DOCS}/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits`,
            status: String(t.status),
          }),
        );
        return;
      }

      let a: HttpAnswer;
      try {
        a = answer(method, url, Buffer.concat(chunks).toString('utf8'), req, entry);
      } catch (err) {
        a = reject(
          500,
          'Server Error',
          `contract server failed: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      entry.status = a.status;
      if (a.violation !== undefined)
        violations.push({ method, path: url.pathname, status: a.status, reason: a.violation });
      res.writeHead(a.status, { ...base, ...a.headers });
      const pad = pads.find((x) => x.left > 0 && x.operationId === entry.operationId && a.status === 200);
      if (pad !== undefined) {
        pad.left--;
        void writePadded(res, JSON.stringify(a.body), pad.toBytes);
        return;
      }
      res.end(a.status === 204 || a.status === 304 ? undefined : JSON.stringify(a.body));
    });
  };

  const server: Server = opts.tls
    ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }, onRequest)
    : createHttpServer(onRequest);
  let connections = 0;
  server.on('connection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`;

  return {
    origin,
    apiBase: `${origin}${basePath}`,
    port,
    log,
    violations,
    addRepo,
    addToken: (token, login) => {
      credentials.set(token, {
        kind: 'user',
        login,
        type: 'User',
        app: null,
        expiresAt: Number.POSITIVE_INFINITY,
      });
    },
    revokeToken: (token) => {
      credentials.delete(token);
    },
    withoutPullRequestPermission: (token) => {
      const c = credentials.get(token);
      if (c !== undefined) c.noPullRequests = true;
    },
    addPullRequest: (repo, pr) => {
      const list = pulls.get(repoKey(repo)) ?? [];
      list.push({
        number: pr.number,
        headSha: pr.headSha,
        commits: [...new Set([...(pr.commits ?? []), pr.headSha])],
        state: pr.state ?? 'open',
        merged: pr.merged ?? false,
        ...(pr.mergeCommit !== undefined ? { mergeCommit: pr.mergeCommit } : {}),
        fork: pr.fork ?? false,
        ...(pr.base !== undefined ? { base: pr.base } : {}),
        ...(pr.headRef !== undefined ? { headRef: pr.headRef } : {}),
        ...(pr.author !== undefined ? { author: pr.author } : {}),
        ...(pr.association !== undefined ? { association: pr.association } : {}),
        ...(pr.labels !== undefined ? { labels: pr.labels } : {}),
      });
      pulls.set(repoKey(repo), list);
    },
    updatePullRequest: (repo, n, patch) => {
      const p = (pulls.get(repoKey(repo)) ?? []).find((x) => x.number === n);
      if (p === undefined) throw new Error(`no pull request ${repo}#${String(n)}`);
      Object.assign(p, patch);
      if (patch.headSha !== undefined && !p.commits.includes(patch.headSha)) p.commits.push(patch.headSha);
    },
    lockIssue: (repo, n) => {
      locked.add(`${repoKey(repo)}#${String(n)}`);
    },
    archiveRepo: (repo) => {
      archived.add(repoKey(repo));
    },
    renameRepo: (from, to) => {
      const f = repoKey(from);
      const t = repoKey(to);
      const rekey = <V>(m: Map<string, V>, sep: string): void => {
        for (const [k, v] of [...m]) {
          if (k === f || k.startsWith(`${f}${sep}`)) {
            m.delete(k);
            m.set(`${t}${k.slice(f.length)}`, v);
          }
        }
      };
      rekey(statuses, '@');
      rekey(comments, '#');
      rekey(pulls, '\u0000');
      for (const k of [...locked]) if (k.startsWith(`${f}#`)) locked.add(`${t}${k.slice(f.length)}`);
      repos.delete(f);
      repos.set(t, to);
      repoIds.set(t, repoIds.get(f) ?? 100 + repoIds.size);
      repoIds.delete(f);
      movedFrom.set(f, to);
    },
    addStatus: (repo, sha, s) => {
      const st: StoredStatus = {
        id: nextId++,
        state: s.state,
        context: s.context,
        description: s.description ?? null,
        target_url: s.target_url ?? null,
        creator: s.creator ?? 'ci-bot',
        created_at: new Date().toISOString(),
      };
      const key = `${repoKey(repo)}@${sha.toLowerCase()}`;
      statuses.set(key, [...(statuses.get(key) ?? []), st]);
      return st;
    },
    addComment: (repo, issue, cm) => {
      const now = new Date().toISOString();
      const stored: StoredComment = {
        id: nextId++,
        body: cm.body,
        login: cm.login,
        userType: cm.userType ?? (cm.login.endsWith('[bot]') ? 'Bot' : 'User'),
        app: null,
        created_at: now,
        updated_at: now,
        edits: 0,
      };
      const key = `${repoKey(repo)}#${issue}`;
      comments.set(key, [...(comments.get(key) ?? []), stored]);
      return stored;
    },
    statuses: (repo, sha) => [...(statuses.get(`${repoKey(repo)}@${sha.toLowerCase()}`) ?? [])].reverse(),
    comments: (repo, issue) => [...(comments.get(`${repoKey(repo)}#${issue}`) ?? [])],
    throttle: (spec) => {
      throttles.push({ ...spec, left: spec.count ?? 1 });
    },
    stall: (match) => {
      stalls.push(match);
    },
    portalNext: (spec) => {
      portals.push({
        match: spec.match,
        status: spec.status,
        headers: spec.headers ?? {},
        body: spec.body ?? '',
        left: spec.count ?? 1,
      });
    },
    padAnswers: (spec) => {
      pads.push({ operationId: spec.operationId, toBytes: spec.toBytes, left: spec.count ?? 1 });
    },
    commitNotIndexed: (commit) => {
      notIndexed.add(commit.toLowerCase());
    },
    apiCalls: () => log.filter((e) => !e.throttled),
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

/** Query/path strings as the schema's type (integers and booleans); other values unchanged. */
function coerce(raw: string, schema: unknown): unknown {
  const type = (schema as { type?: unknown } | null)?.type;
  if ((type === 'integer' || type === 'number') && /^-?\d+(?:\.\d+)?$/.test(raw)) return Number(raw);
  if (type === 'boolean' && (raw === 'true' || raw === 'false')) return raw === 'true';
  return raw;
}

function hashCode(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (Math.imul(31, h) + s.charCodeAt(i)) | 0;
  return h;
}
