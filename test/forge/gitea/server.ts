/**
 * A stateful Gitea (`/api/v1`) contract server for notifier tests, modelled on Gitea 1.2x:
 * - auth: `Authorization: token <t>` or HTTP basic (`user:password`, or `user:<token>`), else 401;
 * - `POST /repos/{o}/{r}/statuses/{sha}`: `state` ∈ pending|success|error|failure|warning|skipped
 *   (else 422), every post is kept as a new status (ids increase);
 *   `GET /repos/{o}/{r}/commits/{ref}/statuses`: newest first, `page`/`limit` (default 30, max 50),
 *   `Link` and `X-Total-Count`;
 * - `GET /repos/{o}/{r}/pulls?state=open|closed|all` paginated the same way; `GET …/pulls/{index}`;
 *   `GET /repos/{o}/{r}/commits/{sha}/pull`: the merged pull request whose merge commit is `sha`,
 *   else 404;
 * - issue comments: list (all at once, as Gitea does), create (201), edit by
 *   `PATCH /repos/{o}/{r}/issues/comments/{id}` (author only, else 403);
 * - `GET /repos/{o}/{r}`; a repository moved with `moveRepo` (rename or transfer) answers every
 *   request on its old path, whatever the method, with `301` and a relative `Location` naming the
 *   new path (query kept) — observed on Gitea 1.27.3 (`RedirectToRepo` in Gitea's
 *   services/context/repo.go), see test/support/gitea.int.test.ts.
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

export interface GiteaUser {
  id: number;
  login: string;
}

export interface GiteaStatus {
  id: number;
  status: string;
  context: string;
  description: string;
  target_url: string;
  creator: GiteaUser;
}

export interface GiteaComment {
  id: number;
  body: string;
  user: GiteaUser;
}

export interface GiteaPull {
  number: number;
  state: 'open' | 'closed';
  head: { sha: string; ref: string };
  comments: GiteaComment[];
  /** Merged (then `state` is `closed`), and the commit the merge made on the base branch. */
  merged?: boolean;
  merge_commit_sha?: string;
}

export interface GiteaRepo {
  statuses: Map<string, GiteaStatus[]>;
  pulls: GiteaPull[];
}

export interface GiteaServerOptions {
  tls?: { certPem: string; keyPem: string };
  /** token → user. */
  tokens: Record<string, GiteaUser>;
  /** login → password. */
  passwords?: Record<string, string>;
}

export interface GiteaServer extends KitServer {
  repo(owner: string, name: string): GiteaRepo;
  addPull(
    owner: string,
    name: string,
    pull: Partial<GiteaPull> & Pick<GiteaPull, 'number'> & { sha: string },
  ): GiteaPull;
  addComment(owner: string, name: string, index: number, c: { body: string; user: GiteaUser }): GiteaComment;
  /** Renames or transfers `owner/name` to `toOwner/toName`; the old path then redirects (301). */
  moveRepo(owner: string, name: string, toOwner: string, toName: string): void;
  writes(): string[];
}

const STATES = new Set(['pending', 'success', 'error', 'failure', 'warning', 'skipped']);

export async function startGiteaServer(opts: GiteaServerOptions): Promise<GiteaServer> {
  const repos = new Map<string, GiteaRepo>();
  let nextId = 1;
  const repo = (o: string, r: string): GiteaRepo => {
    const key = `${o}/${r}`.toLowerCase();
    let x = repos.get(key);
    if (!x) {
      x = { statuses: new Map(), pulls: [] };
      repos.set(key, x);
    }
    return x;
  };
  /** Old `owner/name` (lower case) → current `[owner, name]`. */
  const redirects = new Map<string, [string, string]>();
  const movedTo = (req: ForgeRequest): Reply | undefined => {
    const m = /^\/api\/v1\/repos\/([^/]+)\/([^/]+)(.*)$/.exec(req.path);
    if (m === null) return undefined;
    const to = redirects.get(
      `${decodeURIComponent(m[1] ?? '')}/${decodeURIComponent(m[2] ?? '')}`.toLowerCase(),
    );
    if (to === undefined) return undefined;
    const q = req.url.indexOf('?');
    const location = `/api/v1/repos/${to.map(encodeURIComponent).join('/')}${m[3] ?? ''}${q < 0 ? '' : req.url.slice(q)}`;
    return {
      status: 301,
      headers: { Location: location },
      text: `<a href="${location}">Moved Permanently</a>.`,
    };
  };
  const existing = (o: string | undefined, r: string | undefined): GiteaRepo | undefined =>
    repos.get(`${decodeURIComponent(o ?? '')}/${decodeURIComponent(r ?? '')}`.toLowerCase());
  const userOf = (req: ForgeRequest): GiteaUser | undefined => {
    const h = req.headers.authorization;
    if (typeof h === 'string' && h.startsWith('token ')) return opts.tokens[h.slice(6)];
    const basic = basicCredentials(req);
    if (basic === undefined) return undefined;
    if (opts.passwords?.[basic.username] === basic.password) {
      return (
        Object.values(opts.tokens).find((u) => u.login === basic.username) ?? {
          id: 999,
          login: basic.username,
        }
      );
    }
    const byToken = opts.tokens[basic.password];
    return byToken?.login === basic.username ? byToken : undefined;
  };
  let base = '';
  const paginate = (req: ForgeRequest, items: readonly unknown[]): Reply => {
    const limit = intParam(req.query, 'limit', 30, 1, 50);
    const page = intParam(req.query, 'page', 1, 1, Number.MAX_SAFE_INTEGER);
    const pages = Math.max(1, Math.ceil(items.length / limit));
    const link = (n: number, rel: string): string => {
      const q = new URLSearchParams(req.query);
      q.set('page', String(n));
      q.set('limit', String(limit));
      return `<${base}${req.path}?${q.toString()}>; rel="${rel}"`;
    };
    const links: string[] = [];
    if (page < pages) links.push(link(page + 1, 'next'), link(pages, 'last'));
    if (page > 1) links.push(link(1, 'first'), link(page - 1, 'prev'));
    return json(200, items.slice((page - 1) * limit, page * limit), {
      'X-Total-Count': String(items.length),
      ...(links.length > 0 ? { Link: links.join(',') } : {}),
    });
  };
  const notFound = json(404, { message: "The target couldn't be found.", errors: [] });
  const body = (req: ForgeRequest): Record<string, unknown> =>
    req.json !== null && typeof req.json === 'object' ? (req.json as Record<string, unknown>) : {};
  const R = '/api/v1/repos/([^/]+)/([^/]+)';

  const routes: Route[] = [
    ['GET', /^\/api\/v1\/user$/, (req) => json(200, { ...userOf(req), username: userOf(req)?.login })],
    [
      'GET',
      new RegExp(`^${R}$`),
      (_req, m) =>
        existing(m[1], m[2])
          ? json(200, { name: m[2], full_name: `${m[1] ?? ''}/${m[2] ?? ''}`, owner: { login: m[1] } })
          : notFound,
    ],
    [
      'POST',
      new RegExp(`^${R}/statuses/([0-9a-f]{40})$`),
      (req, m) => {
        const r = existing(m[1], m[2]);
        if (!r) return notFound;
        const b = body(req);
        if (typeof b.state !== 'string' || !STATES.has(b.state)) {
          return json(422, { message: `invalid state: ${String(b.state)}` });
        }
        const s: GiteaStatus = {
          id: nextId++,
          status: b.state,
          context: typeof b.context === 'string' ? b.context : 'default',
          description: typeof b.description === 'string' ? b.description : '',
          target_url: typeof b.target_url === 'string' ? b.target_url : '',
          creator: userOf(req) ?? { id: 0, login: '?' },
        };
        const list = r.statuses.get(m[3] ?? '') ?? [];
        list.push(s);
        r.statuses.set(m[3] ?? '', list);
        return json(201, s);
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/commits/([^/]+)/statuses$`),
      (req, m) => {
        const r = existing(m[1], m[2]);
        if (!r) return notFound;
        const list = [...(r.statuses.get(m[3] ?? '') ?? [])].sort((a, b) => b.id - a.id);
        return paginate(req, list);
      },
    ],
    [
      // The pull request whose merge commit is the commit, else 404 (Gitea's
      // `GetPullRequestByMergedCommit`, routers/api/v1/repo/pull.go; real Gitea 1.27.3 answers
      // the same in test/preview/gitea.int.test.ts).
      'GET',
      new RegExp(`^${R}/commits/([0-9a-f]{40})/pull$`),
      (_req, m) => {
        const pr = existing(m[1], m[2])?.pulls.find((p) => p.merged === true && p.merge_commit_sha === m[3]);
        return pr ? json(200, pullJSON(pr)) : notFound;
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pulls$`),
      (req, m) => {
        const r = existing(m[1], m[2]);
        if (!r) return notFound;
        const state = req.query.get('state') ?? 'open';
        return paginate(req, r.pulls.filter((p) => state === 'all' || p.state === state).map(pullJSON));
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pulls/(\\d+)$`),
      (_req, m) => {
        const pr = existing(m[1], m[2])?.pulls.find((p) => p.number === Number(m[3]));
        return pr ? json(200, pullJSON(pr)) : notFound;
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/issues/(\\d+)/comments$`),
      (_req, m) => {
        const pr = existing(m[1], m[2])?.pulls.find((p) => p.number === Number(m[3]));
        return pr ? json(200, pr.comments) : notFound;
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/issues/(\\d+)/comments$`),
      (req, m) => {
        const pr = existing(m[1], m[2])?.pulls.find((p) => p.number === Number(m[3]));
        if (!pr) return notFound;
        const text = body(req).body;
        if (typeof text !== 'string') return json(422, { message: 'body is required' });
        const c: GiteaComment = { id: nextId++, body: text, user: userOf(req) ?? { id: 0, login: '?' } };
        pr.comments.push(c);
        return json(201, c);
      },
    ],
    [
      'PATCH',
      new RegExp(`^${R}/issues/comments/(\\d+)$`),
      (req, m) => {
        const r = existing(m[1], m[2]);
        const c = r?.pulls.flatMap((p) => p.comments).find((x) => x.id === Number(m[3]));
        if (!c) return notFound;
        if (c.user.id !== userOf(req)?.id) return json(403, { message: 'user should be the poster' });
        const text = body(req).body;
        if (typeof text !== 'string') return json(422, { message: 'body is required' });
        c.body = text;
        return json(200, c);
      },
    ],
  ];

  // Every repository route answers a moved repository's old path with Gitea's redirect.
  const routed: Route[] = routes.map(([method, pattern, handler]) => [
    method,
    pattern,
    (req, m) => movedTo(req) ?? handler(req, m),
  ]);
  const server = await startKitServer(routed, {
    ...(opts.tls ? { tls: opts.tls } : {}),
    authenticate: (req) =>
      userOf(req) === undefined ? json(401, { message: 'token is required' }) : undefined,
  });
  base = server.url;
  return {
    ...server,
    repo,
    addPull(owner, name, pull) {
      const { sha, ...rest } = pull;
      const pr: GiteaPull = {
        state: 'open',
        head: { sha, ref: `feature-${pull.number}` },
        comments: [],
        ...rest,
      };
      repo(owner, name).pulls.push(pr);
      return pr;
    },
    addComment(owner, name, index, c) {
      const pr = repo(owner, name).pulls.find((p) => p.number === index);
      if (!pr) throw new Error(`no pull #${index}`);
      const out: GiteaComment = { id: nextId++, ...c };
      pr.comments.push(out);
      return out;
    },
    moveRepo(owner, name, toOwner, toName) {
      const from = `${owner}/${name}`.toLowerCase();
      const r = repos.get(from);
      if (!r) throw new Error(`no repository ${owner}/${name}`);
      repos.delete(from);
      repos.set(`${toOwner}/${toName}`.toLowerCase(), r);
      redirects.delete(`${toOwner}/${toName}`.toLowerCase());
      for (const [k, v] of redirects)
        if (`${v[0]}/${v[1]}`.toLowerCase() === from) redirects.set(k, [toOwner, toName]);
      redirects.set(from, [toOwner, toName]);
    },
    writes: () =>
      server.requests
        .filter((r) => r.method === 'POST' || r.method === 'PATCH')
        .map((r) => `${r.method} ${r.path}`),
  };
}

function pullJSON(p: GiteaPull): Record<string, unknown> {
  return {
    number: p.number,
    state: p.state,
    head: p.head,
    merged: p.merged ?? false,
    merge_commit_sha: p.merge_commit_sha ?? null,
  };
}
