/**
 * A stateful Bitbucket Data Center contract server for notifier tests (HTTP or HTTPS, under an
 * optional context path such as `/bitbucket`):
 * - auth: HTTP basic or `Authorization: Bearer <HTTP access token>`, else 401;
 *   `GET {context}/plugins/servlet/applinks/whoami` answers the user name as text;
 * - builds: `POST /rest/api/latest/projects/{key}/repos/{slug}/commits/{sha}/builds` → 204 —
 *   `key` ≤ 255, `state` ∈ INPROGRESS|SUCCESSFUL|FAILED|CANCELLED|UNKNOWN, `url` required; the same
 *   key overwrites (new `dateAdded`); `GET /rest/build-status/1.0/commits/{sha}` lists them;
 * - pull requests of a commit, pull requests by `state` (`order=NEWEST` first; a MERGED one
 *   carries `properties.mergeCommit`), one pull request, activities (newest first; comments appear as
 *   `COMMENTED`/`ADDED` with the comment's current text and version), comments: create (text ≤
 *   32,768 characters, else 400), get, edit with optimistic locking (`version` mismatch → 409;
 *   not the author → 403);
 * - paging: `start`/`limit` (default 25, max 1000), `{ values, size, start, limit, isLastPage,
 *   nextPageStart }`.
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

export interface BbsUser {
  name: string;
  slug: string;
  id: number;
}

export interface BbsBuild {
  key: string;
  state: string;
  name: string;
  url: string;
  description: string;
  dateAdded: number;
}

export interface BbsComment {
  id: number;
  version: number;
  text: string;
  author: BbsUser;
}

export interface BbsPull {
  id: number;
  state: 'OPEN' | 'MERGED' | 'DECLINED';
  latestCommit: string;
  commits: string[];
  /** Once MERGED: the commit the merge made, served as `properties.mergeCommit`. */
  mergeCommit?: string;
  /** Activity stream, oldest first (served newest first). */
  activities: ({ kind: 'comment'; comment: BbsComment } | { kind: 'other'; action: string })[];
}

export const BBS_COMMENT_MAX = 32_768;

export interface BbsServerOptions {
  tls?: { certPem: string; keyPem: string };
  /** Context path, e.g. `/bitbucket` (default none). */
  context?: string;
  /** username → { password, user }. */
  basic?: Record<string, { password: string; user: BbsUser }>;
  /** HTTP access token → user. */
  bearer?: Record<string, BbsUser>;
}

export interface BbsServer extends KitServer {
  builds: Map<string, Map<string, BbsBuild>>;
  pulls(key: string, slug: string): BbsPull[];
  addPull(key: string, slug: string, pull: Partial<BbsPull> & Pick<BbsPull, 'id' | 'latestCommit'>): BbsPull;
  addComment(key: string, slug: string, id: number, c: { text: string; author: BbsUser }): BbsComment;
  comments(key: string, slug: string, id: number): BbsComment[];
  writes(): string[];
}

const STATES = new Set(['INPROGRESS', 'SUCCESSFUL', 'FAILED', 'CANCELLED', 'UNKNOWN']);

export async function startBitbucketServerDC(opts: BbsServerOptions): Promise<BbsServer> {
  const ctx = opts.context ?? '';
  const esc = ctx.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const repos = new Map<string, BbsPull[]>();
  /** sha → key → build (build-status is per commit, as in Bitbucket). */
  const builds = new Map<string, Map<string, BbsBuild>>();
  let nextId = 500;
  let clock = Date.parse('2026-05-01T00:00:00Z');
  const pulls = (key: string, slug: string): BbsPull[] => {
    const k = `${key.toUpperCase()}/${slug.toLowerCase()}`;
    let r = repos.get(k);
    if (!r) {
      r = [];
      repos.set(k, r);
    }
    return r;
  };
  const existing = (key: string | undefined, slug: string | undefined): BbsPull[] | undefined =>
    repos.get(
      `${decodeURIComponent(key ?? '').toUpperCase()}/${decodeURIComponent(slug ?? '').toLowerCase()}`,
    );
  const userOf = (req: ForgeRequest): BbsUser | undefined => {
    const h = req.headers.authorization;
    if (typeof h === 'string' && h.startsWith('Bearer ')) return opts.bearer?.[h.slice(7)];
    const b = basicCredentials(req);
    if (b === undefined) return undefined;
    const entry = opts.basic?.[b.username];
    return entry?.password === b.password ? entry.user : undefined;
  };
  const paginate = (req: ForgeRequest, items: readonly unknown[]): Reply => {
    const limit = intParam(req.query, 'limit', 25, 1, 1000);
    const start = intParam(req.query, 'start', 0, 0, Number.MAX_SAFE_INTEGER);
    const values = items.slice(start, start + limit);
    const isLastPage = start + limit >= items.length;
    return json(200, {
      size: values.length,
      limit,
      start,
      isLastPage,
      values,
      ...(isLastPage ? {} : { nextPageStart: start + limit }),
    });
  };
  const err = (
    status: number,
    message: string,
    exceptionName = 'com.atlassian.bitbucket.ServiceException',
  ): Reply => json(status, { errors: [{ context: null, message, exceptionName }] });
  const body = (req: ForgeRequest): Record<string, unknown> =>
    req.json !== null && typeof req.json === 'object' ? (req.json as Record<string, unknown>) : {};
  const R = `${esc}/rest/api/latest/projects/([^/]+)/repos/([^/]+)`;
  const pullOf = (m: RegExpExecArray): BbsPull | undefined =>
    existing(m[1], m[2])?.find((p) => p.id === Number(m[3]));
  const commentsOf = (pr: BbsPull): BbsComment[] =>
    pr.activities.flatMap((a) => (a.kind === 'comment' ? [a.comment] : []));
  const pullJSON = (p: BbsPull): Record<string, unknown> => ({
    id: p.id,
    state: p.state,
    fromRef: { id: 'refs/heads/feature', latestCommit: p.latestCommit },
    toRef: { id: 'refs/heads/main', latestCommit: '0'.repeat(40) },
    ...(p.mergeCommit !== undefined
      ? { properties: { mergeCommit: { id: p.mergeCommit, displayId: p.mergeCommit.slice(0, 11) } } }
      : {}),
  });

  const routes: Route[] = [
    [
      'GET',
      new RegExp(`^${esc}/plugins/servlet/applinks/whoami$`),
      (req) => ({ status: 200, text: userOf(req)?.name ?? '' }),
    ],
    [
      'POST',
      new RegExp(`^${R}/commits/([0-9a-f]{40})/builds$`),
      (req, m) => {
        if (!existing(m[1], m[2]))
          return err(
            404,
            'Repository does not exist',
            'com.atlassian.bitbucket.repository.NoSuchRepositoryException',
          );
        const b = body(req);
        if (typeof b.key !== 'string' || b.key === '' || b.key.length > 255)
          return err(400, 'key must be 1-255 characters');
        if (typeof b.state !== 'string' || !STATES.has(b.state)) return err(400, 'state is invalid');
        if (typeof b.url !== 'string' || b.url === '') return err(400, 'url is required');
        // The build status name is limited to 255 characters (BSERV-12804).
        if (typeof b.name === 'string' && b.name.length > 255)
          return err(400, 'name must be at most 255 characters');
        const byKey = builds.get(m[3] ?? '') ?? new Map<string, BbsBuild>();
        byKey.set(b.key, {
          key: b.key,
          state: b.state,
          name: typeof b.name === 'string' ? b.name : b.key,
          url: b.url,
          description: typeof b.description === 'string' ? b.description : '',
          dateAdded: (clock += 1000),
        });
        builds.set(m[3] ?? '', byKey);
        return { status: 204 };
      },
    ],
    [
      'GET',
      new RegExp(`^${esc}/rest/build-status/1\\.0/commits/([0-9a-f]{40})$`),
      (req, m) => paginate(req, [...(builds.get(m[1] ?? '')?.values() ?? [])]),
    ],
    [
      'GET',
      new RegExp(`^${R}/commits/([0-9a-f]{40})/pull-requests$`),
      (req, m) => {
        const list = existing(m[1], m[2]);
        if (!list) return err(404, 'Repository does not exist');
        return paginate(req, list.filter((p) => p.commits.includes(m[3] ?? '')).map(pullJSON));
      },
    ],
    [
      // `state` (OPEN by default, or MERGED, DECLINED, ALL), `order` NEWEST (default) or OLDEST:
      // here the pull request added or merged last is the newest.
      'GET',
      new RegExp(`^${R}/pull-requests$`),
      (req, m) => {
        const list = existing(m[1], m[2]);
        if (!list) return err(404, 'Repository does not exist');
        const state = req.query.get('state') ?? 'OPEN';
        const chosen = list.filter((p) => state === 'ALL' || p.state === state);
        if (req.query.get('order') !== 'OLDEST') chosen.reverse();
        return paginate(req, chosen.map(pullJSON));
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pull-requests/(\\d+)$`),
      (_req, m) => {
        const pr = pullOf(m);
        return pr ? json(200, pullJSON(pr)) : err(404, 'Pull request does not exist');
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pull-requests/(\\d+)/activities$`),
      (req, m) => {
        const pr = pullOf(m);
        if (!pr) return err(404, 'Pull request does not exist');
        const acts = [...pr.activities]
          .reverse()
          .map((a, i) =>
            a.kind === 'comment'
              ? { id: 9000 + i, action: 'COMMENTED', commentAction: 'ADDED', comment: a.comment }
              : { id: 9000 + i, action: a.action },
          );
        return paginate(req, acts);
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/pull-requests/(\\d+)/comments$`),
      (req, m) => {
        const pr = pullOf(m);
        if (!pr) return err(404, 'Pull request does not exist');
        const text = body(req).text;
        if (typeof text !== 'string' || text === '' || text.length > BBS_COMMENT_MAX) {
          return err(400, 'Please enter a non-empty value less than 32768 characters');
        }
        const c: BbsComment = { id: nextId++, version: 0, text, author: userOf(req)! };
        pr.activities.push({ kind: 'comment', comment: c });
        return json(201, c);
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pull-requests/(\\d+)/comments/(\\d+)$`),
      (_req, m) => {
        const pr = pullOf(m);
        const c = pr ? commentsOf(pr).find((x) => x.id === Number(m[4])) : undefined;
        return c ? json(200, c) : err(404, 'Comment does not exist');
      },
    ],
    [
      'PUT',
      new RegExp(`^${R}/pull-requests/(\\d+)/comments/(\\d+)$`),
      (req, m) => {
        const pr = pullOf(m);
        const c = pr ? commentsOf(pr).find((x) => x.id === Number(m[4])) : undefined;
        if (!c) return err(404, 'Comment does not exist');
        if (c.author.name !== userOf(req)?.name)
          return err(403, 'You are not permitted to edit this comment');
        const b = body(req);
        if (b.version !== c.version) {
          return err(
            409,
            `You are attempting to modify a comment based on out-of-date information (version ${String(b.version)} vs ${c.version})`,
          );
        }
        if (typeof b.text !== 'string' || b.text === '' || b.text.length > BBS_COMMENT_MAX) {
          return err(400, 'Please enter a non-empty value less than 32768 characters');
        }
        c.text = b.text;
        c.version++;
        return json(200, c);
      },
    ],
  ];

  const server = await startKitServer(routes, {
    ...(opts.tls ? { tls: opts.tls } : {}),
    authenticate: (req) =>
      userOf(req) === undefined
        ? err(401, 'Authentication failed. Please check your credentials and try again.')
        : undefined,
  });
  return {
    ...server,
    builds,
    pulls,
    addPull(key, slug, pull) {
      const pr: BbsPull = { state: 'OPEN', commits: [pull.latestCommit], activities: [], ...pull };
      pulls(key, slug).push(pr);
      return pr;
    },
    addComment(key, slug, id, c) {
      const pr = pulls(key, slug).find((p) => p.id === id);
      if (!pr) throw new Error(`no pull request #${id}`);
      const out: BbsComment = { id: nextId++, version: 0, ...c };
      pr.activities.push({ kind: 'comment', comment: out });
      return out;
    },
    comments(key, slug, id) {
      const pr = pulls(key, slug).find((p) => p.id === id);
      return pr ? commentsOf(pr) : [];
    },
    writes: () =>
      server.requests
        .filter((r) => r.method === 'POST' || r.method === 'PUT')
        .map((r) => `${r.method} ${r.path}`),
  };
}
