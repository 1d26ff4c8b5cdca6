/**
 * A stateful Azure DevOps (Git REST 7.1) contract server for notifier tests, serving one
 * organisation: `/{org}/{project}/_apis/git/repositories/{repo}/…` and `/{org}/_apis/connectionData`.
 * - auth: HTTP basic with any user name and a known PAT; a wrong PAT → 401; no credentials, or
 *   a PAT expired with `expire(pat)` → 203 with Azure DevOps' HTML sign-in page (case N11; the
 *   page: test/forge/answers.ts);
 * - rate limits: `rateLimit(n)` answers the next n calls with 429, `Retry-After` and
 *   `X-RateLimit-*` ("Rate and usage limits");
 * - every `_apis` call needs `api-version` (else 400);
 * - statuses: POST (state ∈ notSet|pending|succeeded|failed|error|notApplicable, `context.name`
 *   required; every post kept, ids increase); GET newest first with `top`/`skip` and
 *   `latestOnly` (latest per genre+name);
 * - pull requests: `searchCriteria.status` (active|completed|abandoned|all), `$top`/`$skip`; one
 *   pull request; `POST …/pullrequestquery` (`lastMergeCommit`: the pull request whose merge made
 *   a commit); threads: listed in pages of `threadPageSize` with `x-ms-continuationtoken`
 *   (all at once when unset), created (201), comment edit by PATCH (author only, else 403).
 */
import {
  basicCredentials,
  intParam,
  json,
  startKitServer,
  type ForgeRequest,
  type KitServer,
  type Reply,
  type Route,
} from '../kit.ts';
import { azuredevops as AZ } from '../answers.ts';

export interface AzureIdentity {
  id: string;
  displayName: string;
}

export interface AzureStatus {
  id: number;
  state: string;
  description: string;
  targetUrl: string;
  context: { name: string; genre: string };
  createdBy: AzureIdentity;
}

export interface AzureComment {
  id: number;
  parentCommentId: number;
  content: string;
  author: AzureIdentity;
  commentType: string;
  isDeleted: boolean;
}

export interface AzureThread {
  id: number;
  comments: AzureComment[];
  status?: string;
  isDeleted: boolean;
}

export interface AzurePull {
  pullRequestId: number;
  status: 'active' | 'completed' | 'abandoned';
  sourceCommit: string;
  threads: AzureThread[];
  /** Once completed: the commit its merge made on the target branch (`lastMergeCommit`). */
  mergeCommit?: string;
}

export interface AzureRepo {
  statuses: Map<string, AzureStatus[]>;
  pulls: AzurePull[];
}

export interface AzureServerOptions {
  /** PAT → identity. */
  pats: Record<string, AzureIdentity>;
  /** Threads per page (with `x-ms-continuationtoken`); unset: all at once. */
  threadPageSize?: number;
}

export interface AzureServer extends KitServer {
  repo(org: string, project: string, name: string): AzureRepo;
  /** From now on every call with `pat` answers 203 with the sign-in page (an expired or revoked PAT). */
  expire(pat: string): void;
  /** The next `n` calls answer 429 with `Retry-After`. */
  rateLimit(n?: number): void;
  addPull(
    org: string,
    project: string,
    name: string,
    pr: Partial<AzurePull> & Pick<AzurePull, 'pullRequestId' | 'sourceCommit'>,
  ): AzurePull;
  addThread(
    org: string,
    project: string,
    name: string,
    id: number,
    c: { content: string; author: AzureIdentity; isDeleted?: boolean },
  ): AzureThread;
  writes(): string[];
}

const STATES = new Set(['notSet', 'pending', 'succeeded', 'failed', 'error', 'notApplicable']);

export async function startAzureServer(opts: AzureServerOptions): Promise<AzureServer> {
  const repos = new Map<string, AzureRepo>();
  let nextId = 1;
  const repo = (org: string, project: string, name: string): AzureRepo => {
    const k = `${org}/${project}/${name}`.toLowerCase();
    let r = repos.get(k);
    if (!r) {
      r = { statuses: new Map(), pulls: [] };
      repos.set(k, r);
    }
    return r;
  };
  const existing = (m: RegExpExecArray): AzureRepo | undefined =>
    repos.get(
      [m[1], m[2], m[3]]
        .map((s) => decodeURIComponent(s ?? ''))
        .join('/')
        .toLowerCase(),
    );
  const userOf = (req: ForgeRequest): AzureIdentity | undefined => {
    const b = basicCredentials(req);
    return b === undefined ? undefined : opts.pats[b.password];
  };
  const body = (req: ForgeRequest): Record<string, unknown> =>
    req.json !== null && typeof req.json === 'object' ? (req.json as Record<string, unknown>) : {};
  const err = (status: number, message: string): Reply =>
    json(status, {
      $id: '1',
      innerException: null,
      message,
      typeName: 'Microsoft.TeamFoundation.SourceControl.WebServer.GitException',
    });
  const R = '/([^/]+)/([^/]+)/_apis/git/repositories/([^/]+)';
  const pullOf = (m: RegExpExecArray): AzurePull | undefined =>
    existing(m)?.pulls.find((p) => p.pullRequestId === Number(m[4]));
  const pullJSON = (p: AzurePull): Record<string, unknown> => ({
    pullRequestId: p.pullRequestId,
    status: p.status,
    lastMergeSourceCommit: { commitId: p.sourceCommit },
    ...(p.mergeCommit !== undefined ? { lastMergeCommit: { commitId: p.mergeCommit } } : {}),
  });

  const routes: Route[] = [
    [
      'GET',
      /^\/([^/]+)\/_apis\/connectionData$/,
      (req) => json(200, { authenticatedUser: userOf(req), authorizedUser: userOf(req), instanceId: 'i-1' }),
    ],
    [
      'POST',
      new RegExp(`^${R}/commits/([0-9a-f]{40})/statuses$`),
      (req, m) => {
        const r = existing(m);
        if (!r) return err(404, 'TF401019: The Git repository does not exist');
        const b = body(req);
        const c = b.context as { name?: unknown; genre?: unknown } | undefined;
        if (typeof c?.name !== 'string' || c.name === '') return err(400, 'context.name is required');
        if (typeof b.state !== 'string' || !STATES.has(b.state)) return err(400, 'state is invalid');
        const s: AzureStatus = {
          id: nextId++,
          state: b.state,
          description: typeof b.description === 'string' ? b.description : '',
          targetUrl: typeof b.targetUrl === 'string' ? b.targetUrl : '',
          context: { name: c.name, genre: typeof c.genre === 'string' ? c.genre : '' },
          createdBy: userOf(req)!,
        };
        const sha = m[4] ?? '';
        r.statuses.set(sha, [...(r.statuses.get(sha) ?? []), s]);
        return json(201, s);
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/commits/([0-9a-f]{40})/statuses$`),
      (req, m) => {
        const r = existing(m);
        if (!r) return err(404, 'TF401019: The Git repository does not exist');
        let list = [...(r.statuses.get(m[4] ?? '') ?? [])].sort((a, b) => b.id - a.id);
        if (req.query.get('latestOnly') === 'true') {
          const seen = new Set<string>();
          list = list.filter((s) => {
            const k = `${s.context.genre}/${s.context.name}`;
            if (seen.has(k)) return false;
            seen.add(k);
            return true;
          });
        }
        const top = intParam(req.query, 'top', 1000, 1, 1000);
        const skip = intParam(req.query, 'skip', 0, 0, Number.MAX_SAFE_INTEGER);
        const value = list.slice(skip, skip + top);
        return json(200, { count: value.length, value });
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pullrequests$`),
      (req, m) => {
        const r = existing(m);
        if (!r) return err(404, 'TF401019: The Git repository does not exist');
        const status = req.query.get('searchCriteria.status') ?? 'active';
        const top = intParam(req.query, '$top', 101, 1, 1000);
        const skip = intParam(req.query, '$skip', 0, 0, Number.MAX_SAFE_INTEGER);
        const list = r.pulls.filter((p) => status === 'all' || p.status === status).map(pullJSON);
        const value = list.slice(skip, skip + top);
        return json(200, { count: value.length, value });
      },
    ],
    [
      // "Pull Request Query - Get": `queries[].type` lastMergeCommit (the pull requests that
      // created the given merge commits) or commit (those that merged the given commits); the
      // answer repeats the queries and holds, per query, a dictionary commit → pull requests.
      'POST',
      new RegExp(`^${R}/pullrequestquery$`),
      (req, m) => {
        const r = existing(m);
        if (!r) return err(404, 'TF401019: The Git repository does not exist');
        const queries = body(req).queries;
        if (!Array.isArray(queries)) return err(400, 'Value cannot be null. Parameter name: queries');
        const results = queries.map((q: { type?: unknown; items?: unknown }) => {
          const items = Array.isArray(q.items) ? q.items.filter((x) => typeof x === 'string') : [];
          const out: Record<string, unknown[]> = {};
          for (const sha of items) {
            const hits = r.pulls.filter((p) =>
              q.type === 'lastMergeCommit' ? p.mergeCommit === sha : p.sourceCommit === sha,
            );
            if (hits.length > 0) out[sha] = hits.map(pullJSON);
          }
          return out;
        });
        return json(200, { queries, results });
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pullrequests/(\\d+)$`),
      (_req, m) => {
        const pr = pullOf(m);
        return pr ? json(200, pullJSON(pr)) : err(404, 'TF401180: The requested pull request was not found.');
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pullRequests/(\\d+)/threads$`),
      (req, m) => {
        const pr = pullOf(m);
        if (!pr) return err(404, 'TF401180: The requested pull request was not found.');
        const size = opts.threadPageSize;
        if (size === undefined) return json(200, { count: pr.threads.length, value: pr.threads });
        const start = Number(req.query.get('continuationToken') ?? '0');
        const value = pr.threads.slice(start, start + size);
        const more = start + size < pr.threads.length;
        return json(
          200,
          { count: value.length, value },
          more ? { 'x-ms-continuationtoken': String(start + size) } : {},
        );
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/pullRequests/(\\d+)/threads$`),
      (req, m) => {
        const pr = pullOf(m);
        if (!pr) return err(404, 'TF401180: The requested pull request was not found.');
        const comments = body(req).comments;
        const first = Array.isArray(comments)
          ? (comments[0] as { content?: unknown } | undefined)
          : undefined;
        if (typeof first?.content !== 'string') return err(400, 'comments are required');
        if (first.content.length > 150_000)
          return err(400, 'A discussion comment cannot be longer than 150000 characters');
        const t: AzureThread = {
          id: nextId++,
          isDeleted: false,
          ...(typeof body(req).status === 'string' ? { status: body(req).status as string } : {}),
          comments: [
            {
              id: 1,
              parentCommentId: 0,
              content: first.content,
              author: userOf(req)!,
              commentType: 'text',
              isDeleted: false,
            },
          ],
        };
        pr.threads.push(t);
        return json(200, t);
      },
    ],
    [
      'PATCH',
      new RegExp(`^${R}/pullRequests/(\\d+)/threads/(\\d+)/comments/(\\d+)$`),
      (req, m) => {
        const t = pullOf(m)?.threads.find((x) => x.id === Number(m[5]));
        const c = t?.comments.find((x) => x.id === Number(m[6]));
        if (!c) return err(404, 'The comment does not exist');
        if (c.author.id !== userOf(req)?.id) return err(403, 'TF401181: only the author can edit a comment');
        const content = body(req).content;
        if (typeof content !== 'string') return err(400, 'content is required');
        c.content = content;
        return json(200, c);
      },
    ],
  ];

  const expired = new Set<string>();
  const signIn: Reply = {
    status: AZ.signIn.status,
    headers: AZ.signIn.headers,
    text: AZ.signIn.body,
  };
  const server = await startKitServer(routes, {
    authenticate: (req) => {
      const basic = basicCredentials(req);
      if (basic === undefined || expired.has(basic.password)) return signIn;
      if (userOf(req) === undefined) return { status: 401, text: 'Unauthorized' };
      if (req.path.includes('/_apis/git/') && req.query.get('api-version') === null) {
        return err(400, 'No api-version was supplied for the request.');
      }
      return undefined;
    },
  });
  return {
    ...server,
    repo,
    expire(pat) {
      expired.add(pat);
    },
    rateLimit(n = 1) {
      server.failNext(
        { status: AZ.rateLimited.status, headers: AZ.rateLimited.headers, text: AZ.rateLimited.body },
        n,
      );
    },
    addPull(org, project, name, pr) {
      const full: AzurePull = { status: 'active', threads: [], ...pr };
      repo(org, project, name).pulls.push(full);
      return full;
    },
    addThread(org, project, name, id, c) {
      const pr = repo(org, project, name).pulls.find((p) => p.pullRequestId === id);
      if (!pr) throw new Error(`no pull request ${id}`);
      const t: AzureThread = {
        id: nextId++,
        isDeleted: false,
        comments: [
          {
            id: 1,
            parentCommentId: 0,
            content: c.content,
            author: c.author,
            commentType: 'text',
            isDeleted: c.isDeleted ?? false,
          },
        ],
      };
      pr.threads.push(t);
      return t;
    },
    writes: () =>
      server.requests
        .filter((r) => r.method === 'POST' || r.method === 'PATCH')
        .map((r) => `${r.method} ${r.path}`),
  };
}
