/**
 * A stateful Bitbucket Cloud (`/2.0`) contract server for notifier tests:
 * - auth: HTTP basic (username + app password / API token) or `Authorization: Bearer <access
 *   token>`, else 401;
 * - build statuses: `POST /repositories/{ws}/{repo}/commit/{sha}/statuses/build` — `key` ≤ 40
 *   characters (else 400 "key: Ensure this value has at most 40 characters"), `state` ∈
 *   INPROGRESS|SUCCESSFUL|FAILED|STOPPED, `url` required; the same key overwrites (200, new key
 *   201). `GET …/statuses/build/{key}` → the status or 404;
 * - pull requests of a commit (`commitLinks`: `enabled` → 200, `indexing` → 202, `disabled` →
 *   404), pull requests by state (`state=OPEN` by default; `state=MERGED&sort=-updated_on`, the
 *   one merged last first, with `merge_commit.hash` abbreviated to 12), one pull request; comments list/create/edit
 *   (edit by the author only, else 403; `deleted` comments listed as such);
 * - pagination: `page`/`pagelen` (default 10, max 100 for comments, 50 otherwise), JSON
 *   `{ values, page, pagelen, size, next }` with `next` an absolute URL.
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

export interface BitbucketUser {
  uuid: string;
  account_id: string;
  display_name: string;
}

export interface BitbucketStatus {
  key: string;
  state: string;
  name: string;
  url: string;
  description: string;
}

export interface BitbucketComment {
  id: number;
  content: { raw: string };
  user: BitbucketUser;
  deleted: boolean;
}

export interface BitbucketPull {
  id: number;
  state: 'OPEN' | 'MERGED' | 'DECLINED';
  /** Full source commit hash (served abbreviated to 12 characters, as Bitbucket does). */
  sourceCommit: string;
  /** Commits contained in the PR (for "pull requests of a commit"). */
  commits: string[];
  comments: BitbucketComment[];
  /** Once MERGED: the commit the merge made (served abbreviated to 12 characters as `merge_commit.hash`). */
  mergeCommit?: string;
}

export interface BitbucketRepo {
  statuses: Map<string, Map<string, BitbucketStatus>>;
  pulls: BitbucketPull[];
}

export interface BitbucketServerOptions {
  /** username → { password, user }. */
  basic?: Record<string, { password: string; user: BitbucketUser }>;
  /** access token → user. */
  bearer?: Record<string, BitbucketUser>;
  commitLinks?: 'enabled' | 'indexing' | 'disabled';
}

export interface BitbucketServer extends KitServer {
  repo(ws: string, slug: string): BitbucketRepo;
  addPull(
    ws: string,
    slug: string,
    pull: Partial<BitbucketPull> & Pick<BitbucketPull, 'id' | 'sourceCommit'>,
  ): BitbucketPull;
  addComment(
    ws: string,
    slug: string,
    id: number,
    c: { raw: string; user: BitbucketUser; deleted?: boolean },
  ): BitbucketComment;
  writes(): string[];
}

const STATES = new Set(['INPROGRESS', 'SUCCESSFUL', 'FAILED', 'STOPPED']);
export const BITBUCKET_KEY_LIMIT = 40;

export async function startBitbucketServer(opts: BitbucketServerOptions): Promise<BitbucketServer> {
  const repos = new Map<string, BitbucketRepo>();
  let nextId = 100;
  const repo = (ws: string, slug: string): BitbucketRepo => {
    const k = `${ws}/${slug}`.toLowerCase();
    let r = repos.get(k);
    if (!r) {
      r = { statuses: new Map(), pulls: [] };
      repos.set(k, r);
    }
    return r;
  };
  const existing = (ws: string | undefined, slug: string | undefined): BitbucketRepo | undefined =>
    repos.get(`${decodeURIComponent(ws ?? '')}/${decodeURIComponent(slug ?? '')}`.toLowerCase());
  const userOf = (req: ForgeRequest): BitbucketUser | undefined => {
    const h = req.headers.authorization;
    if (typeof h === 'string' && h.startsWith('Bearer ')) return opts.bearer?.[h.slice(7)];
    const b = basicCredentials(req);
    if (b === undefined) return undefined;
    const entry = opts.basic?.[b.username];
    return entry?.password === b.password ? entry.user : undefined;
  };
  let base = '';
  const paginate = (req: ForgeRequest, items: readonly unknown[], max: number): Reply => {
    const pagelen = intParam(req.query, 'pagelen', 10, 1, max);
    const page = intParam(req.query, 'page', 1, 1, Number.MAX_SAFE_INTEGER);
    const body: Record<string, unknown> = {
      values: items.slice((page - 1) * pagelen, page * pagelen),
      page,
      pagelen,
      size: items.length,
    };
    if (page * pagelen < items.length) {
      const q = new URLSearchParams(req.query);
      q.set('page', String(page + 1));
      body.next = `${base}${req.path}?${q.toString()}`;
    }
    return json(200, body);
  };
  const err = (status: number, message: string): Reply => json(status, { type: 'error', error: { message } });
  const body = (req: ForgeRequest): Record<string, unknown> =>
    req.json !== null && typeof req.json === 'object' ? (req.json as Record<string, unknown>) : {};
  const R = '/2\\.0/repositories/([^/]+)/([^/]+)';
  const pullJSON = (p: BitbucketPull): Record<string, unknown> => ({
    id: p.id,
    state: p.state,
    source: { commit: { hash: p.sourceCommit.slice(0, 12) } },
    merge_commit: p.mergeCommit === undefined ? null : { hash: p.mergeCommit.slice(0, 12) },
  });
  const pullOf = (m: RegExpExecArray): BitbucketPull | undefined =>
    existing(m[1], m[2])?.pulls.find((p) => p.id === Number(m[3]));
  const commentText = (req: ForgeRequest): string | undefined => {
    const c = body(req).content;
    const raw = c !== null && typeof c === 'object' ? (c as { raw?: unknown }).raw : undefined;
    return typeof raw === 'string' && raw !== '' ? raw : undefined;
  };

  const routes: Route[] = [
    ['GET', /^\/2\.0\/user$/, (req) => json(200, userOf(req))],
    [
      'POST',
      new RegExp(`^${R}/commit/([0-9a-f]{40})/statuses/build$`),
      (req, m) => {
        const r = existing(m[1], m[2]);
        if (!r) return err(404, 'Repository not found');
        const b = body(req);
        if (typeof b.key !== 'string' || b.key === '') return err(400, 'key: This field is required.');
        if (b.key.length > BITBUCKET_KEY_LIMIT) {
          return err(400, `key: Ensure this value has at most 40 characters (it has ${b.key.length}).`);
        }
        if (typeof b.state !== 'string' || !STATES.has(b.state)) return err(400, 'state: invalid value');
        if (typeof b.url !== 'string' || b.url === '') return err(400, 'url: This field is required.');
        const byKey = r.statuses.get(m[3] ?? '') ?? new Map<string, BitbucketStatus>();
        const isNew = !byKey.has(b.key);
        const s: BitbucketStatus = {
          key: b.key,
          state: b.state,
          name: typeof b.name === 'string' ? b.name : b.key,
          url: b.url,
          description: typeof b.description === 'string' ? b.description : '',
        };
        byKey.set(b.key, s);
        r.statuses.set(m[3] ?? '', byKey);
        return json(isNew ? 201 : 200, { type: 'build', ...s });
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/commit/([0-9a-f]{40})/statuses/build/([^/]+)$`),
      (_req, m) => {
        const s = existing(m[1], m[2])
          ?.statuses.get(m[3] ?? '')
          ?.get(decodeURIComponent(m[4] ?? ''));
        return s ? json(200, { type: 'build', ...s }) : err(404, 'Build status not found');
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/commit/([0-9a-f]{40})/pullrequests$`),
      (req, m) => {
        const r = existing(m[1], m[2]);
        if (!r) return err(404, 'Repository not found');
        const mode = opts.commitLinks ?? 'enabled';
        if (mode === 'disabled') return err(404, 'Pull request commit links are not enabled');
        if (mode === 'indexing') return { status: 202, text: '' };
        return paginate(req, r.pulls.filter((p) => p.commits.includes(m[3] ?? '')).map(pullJSON), 50);
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pullrequests$`),
      (req, m) => {
        const r = existing(m[1], m[2]);
        if (!r) return err(404, 'Repository not found');
        const states = req.query.getAll('state');
        const wanted = states.length === 0 ? ['OPEN'] : states;
        const list = r.pulls.filter((p) => wanted.includes(p.state));
        // `sort=-updated_on`: the pull request changed last first (here: the one added or merged last).
        if (req.query.get('sort') === '-updated_on') list.reverse();
        return paginate(req, list.map(pullJSON), 50);
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pullrequests/(\\d+)$`),
      (_req, m) => {
        const pr = pullOf(m);
        return pr ? json(200, pullJSON(pr)) : err(404, 'Pull request not found');
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pullrequests/(\\d+)/comments$`),
      (req, m) => {
        const pr = pullOf(m);
        if (!pr) return err(404, 'Pull request not found');
        return paginate(
          req,
          pr.comments.map((c) => (c.deleted ? { ...c, content: { raw: '' } } : c)),
          100,
        );
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/pullrequests/(\\d+)/comments$`),
      (req, m) => {
        const pr = pullOf(m);
        if (!pr) return err(404, 'Pull request not found');
        const raw = commentText(req);
        if (raw === undefined) return err(400, 'content.raw: This field is required.');
        const c: BitbucketComment = { id: nextId++, content: { raw }, user: userOf(req)!, deleted: false };
        pr.comments.push(c);
        return json(201, c);
      },
    ],
    [
      'PUT',
      new RegExp(`^${R}/pullrequests/(\\d+)/comments/(\\d+)$`),
      (req, m) => {
        const c = pullOf(m)?.comments.find((x) => x.id === Number(m[4]));
        if (!c || c.deleted) return err(404, 'Comment not found');
        if (c.user.uuid !== userOf(req)?.uuid) return err(403, 'You can only edit your own comments');
        const raw = commentText(req);
        if (raw === undefined) return err(400, 'content.raw: This field is required.');
        c.content = { raw };
        return json(200, c);
      },
    ],
  ];

  const server = await startKitServer(routes, {
    authenticate: (req) => (userOf(req) === undefined ? err(401, 'Unauthorized') : undefined),
  });
  base = server.url;
  return {
    ...server,
    repo,
    addPull(ws, slug, pull) {
      const pr: BitbucketPull = { state: 'OPEN', commits: [pull.sourceCommit], comments: [], ...pull };
      repo(ws, slug).pulls.push(pr);
      return pr;
    },
    addComment(ws, slug, id, c) {
      const pr = repo(ws, slug).pulls.find((p) => p.id === id);
      if (!pr) throw new Error(`no pull request #${id}`);
      const out: BitbucketComment = {
        id: nextId++,
        content: { raw: c.raw },
        user: c.user,
        deleted: c.deleted ?? false,
      };
      pr.comments.push(out);
      return out;
    },
    writes: () =>
      server.requests
        .filter((r) => r.method === 'POST' || r.method === 'PUT')
        .map((r) => `${r.method} ${r.path}`),
  };
}
