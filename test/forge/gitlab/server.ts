/**
 * A stateful GitLab REST v4 contract server for notifier tests. It behaves like GitLab where the
 * notifier depends on it (facts/forges.md "GitLab"):
 * - auth: `PRIVATE-TOKEN` or `Authorization: Bearer`, else 401;
 * - `:id` is a numeric id or the URL-encoded full path (`a%2Fb%2Fc`); an unencoded path 404s;
 * - commit statuses: `POST /projects/:id/statuses/:sha` reuses the newest running/pending status
 *   of the same (name, ref) and applies the transition, answering 400 "Cannot transition status
 *   via :run from :running" / ":enqueue from :pending" / ":enqueue from :running" for impossible
 *   ones; a terminal status is never reused (a new one is created). description > 255 → 400.
 *   `GET /projects/:id/repository/commits/:sha/statuses` filters by `ref`/`name` (unless
 *   `ignoreNameFilter`), returns the latest status per (name, ref) unless `all=true`, ordered by id;
 * - merge requests for a commit (those containing it, and a merged one whose `merge_commit_sha`
 *   or `squash_commit_sha` it is), single merge request, MR notes (list sorted `desc` by default,
 *   `sort=asc` honoured), note creation (body ≤ 1,000,000 characters else 400) and edit (only by
 *   the note's author, else 403);
 * - pipelines (`Ci::CreateCommitStatusService`, gitlab-org/gitlab app/services/ci/
 *   create_commit_status_service.rb): a status joins the newest pipeline of its commit that
 *   matches the given `ref` and `pipeline_id`; a `pipeline_id` that matches none (e.g. with a `ref`
 *   other than the pipeline's) answers 404 "Pipeline for pipeline_id, sha and ref"; without a
 *   match a new external pipeline is created for the ref (a detached branch pipeline beside the
 *   merge request's: case N09). `GET /projects/:id/merge_requests/:iid` carries `head_pipeline`;
 *   the commit's merge request list does not;
 * - offset pagination on every list: `page`, `per_page` (default 20, max 100), headers `x-page`,
 *   `x-per-page`, `x-total`, `x-total-pages`, `x-next-page`, `x-prev-page` and `Link`.
 */
import {
  intParam,
  json,
  startKitServer,
  type ForgeRequest,
  type KitServer,
  type Reply,
  type Route,
} from '../kit.ts';

export interface GitLabUser {
  id: number;
  username: string;
}

export interface GitLabStatus {
  id: number;
  sha: string;
  ref: string | null;
  status: string;
  name: string;
  target_url: string | null;
  description: string | null;
  created_at: string;
  author: GitLabUser;
  /** The pipeline the status belongs to (not in GitLab's status entity; for tests). */
  pipeline_id: number;
}

export interface GitLabNote {
  id: number;
  body: string;
  author: GitLabUser;
  system: boolean;
  created_at: string;
}

export interface GitLabPipeline {
  id: number;
  sha: string;
  /** Branch name, or `refs/merge-requests/<iid>/head` for a merge request pipeline. */
  ref: string;
  source: 'push' | 'merge_request_event' | 'external';
}

export interface GitLabMR {
  iid: number;
  state: 'opened' | 'closed' | 'merged';
  sha: string;
  source_branch: string;
  /** The merge request's head pipeline (shown by the single-MR endpoint). */
  head_pipeline_id?: number;
  /** Commits contained in the MR (for "merge requests of a commit"). */
  commits: string[];
  /** Once merged: the merge commit (null after a fast-forward merge) and the squash commit. */
  merge_commit_sha?: string | null;
  squash_commit_sha?: string | null;
  notes: GitLabNote[];
  /** Target branch (default `main`), author, labels; `fork` = opened from another project. */
  target_branch?: string;
  author?: GitLabUser;
  labels?: string[];
  fork?: boolean;
}

export interface GitLabProject {
  id: number;
  path: string;
  /** user id → access level (30 Developer, 40 Maintainer, 50 Owner), inherited ones included. */
  members?: Map<number, number>;
  statuses: GitLabStatus[];
  mrs: GitLabMR[];
  pipelines: GitLabPipeline[];
}

export interface GitLabServerOptions {
  tls?: { certPem: string; keyPem: string };
  /** token → user. */
  tokens: Record<string, GitLabUser>;
  /** Ignore `name` on the statuses listing (older GitLab): the client must page. */
  ignoreNameFilter?: boolean;
}

export interface GitLabServer extends KitServer {
  /** Creates (or returns) the project with this full path. */
  project(path: string): GitLabProject;
  addMR(path: string, mr: Partial<GitLabMR> & Pick<GitLabMR, 'iid' | 'sha'>): GitLabMR;
  addPipeline(
    path: string,
    p: Omit<GitLabPipeline, 'source'> & Partial<Pick<GitLabPipeline, 'source'>>,
  ): GitLabPipeline;
  addStatus(
    path: string,
    s: Partial<GitLabStatus> & Pick<GitLabStatus, 'sha' | 'name' | 'status'>,
  ): GitLabStatus;
  addNote(
    path: string,
    iid: number,
    note: { body: string; author: GitLabUser; system?: boolean },
  ): GitLabNote;
  /** Makes `user` a member of the project with `accessLevel`. */
  addMember(path: string, user: GitLabUser, accessLevel: number): void;
  /** Requests that wrote something (POST/PUT), as `METHOD path`. */
  writes(): string[];
}

const ACTIVE = new Set(['pending', 'running']);
const STATES = new Set(['pending', 'running', 'success', 'failed', 'canceled', 'skipped']);
export const GITLAB_NOTE_MAX = 1_000_000;

export async function startGitLabServer(opts: GitLabServerOptions): Promise<GitLabServer> {
  const projects = new Map<string, GitLabProject>();
  let nextId = 1000;
  let clock = Date.parse('2026-05-01T00:00:00Z');
  const now = (): string => new Date((clock += 1000)).toISOString();

  const project = (path: string): GitLabProject => {
    let p = projects.get(path.toLowerCase());
    if (!p) {
      p = { id: nextId++, path, statuses: [], mrs: [], pipelines: [] };
      projects.set(path.toLowerCase(), p);
    }
    return p;
  };
  const find = (rawId: string): GitLabProject | undefined => {
    if (rawId.includes('/')) return undefined; // GitLab needs the path URL-encoded
    const id = decodeURIComponent(rawId);
    if (/^\d+$/.test(id)) return [...projects.values()].find((p) => p.id === Number(id));
    return projects.get(id.toLowerCase());
  };
  const userOf = (req: ForgeRequest): GitLabUser | undefined => {
    const pt = req.headers['private-token'];
    const auth = req.headers.authorization;
    const token =
      typeof pt === 'string'
        ? pt
        : typeof auth === 'string' && auth.startsWith('Bearer ')
          ? auth.slice(7)
          : undefined;
    return token === undefined ? undefined : opts.tokens[token];
  };
  let base = '';
  const paginate = (req: ForgeRequest, items: readonly unknown[]): Reply => {
    const perPage = intParam(req.query, 'per_page', 20, 1, 100);
    const page = intParam(req.query, 'page', 1, 1, Number.MAX_SAFE_INTEGER);
    const total = items.length;
    const totalPages = Math.max(1, Math.ceil(total / perPage));
    const slice = items.slice((page - 1) * perPage, page * perPage);
    const link = (n: number): string => {
      const q = new URLSearchParams(req.query);
      q.set('page', String(n));
      q.set('per_page', String(perPage));
      return `${base}${req.path}?${q.toString()}`;
    };
    const links = [`<${link(1)}>; rel="first"`, `<${link(totalPages)}>; rel="last"`];
    if (page < totalPages) links.unshift(`<${link(page + 1)}>; rel="next"`);
    if (page > 1) links.unshift(`<${link(page - 1)}>; rel="prev"`);
    return json(200, slice, {
      'x-page': String(page),
      'x-per-page': String(perPage),
      'x-total': String(total),
      'x-total-pages': String(totalPages),
      'x-next-page': page < totalPages ? String(page + 1) : '',
      'x-prev-page': page > 1 ? String(page - 1) : '',
      link: links.join(', '),
    });
  };
  const noProject = json(404, { message: '404 Project Not Found' });
  const bad = (message: unknown): Reply => json(400, { message });
  const body = (req: ForgeRequest): Record<string, unknown> =>
    req.json !== null && typeof req.json === 'object' ? (req.json as Record<string, unknown>) : {};

  const mrListJSON = (p: GitLabProject, mr: GitLabMR): Record<string, unknown> => ({
    ...mrJSON(mr),
    target_branch: mr.target_branch ?? 'main',
    source_project_id: mr.fork === true ? p.id + 1 : p.id,
    target_project_id: p.id,
    author: mr.author ?? { id: 1, username: 'ci' },
    labels: mr.labels ?? [],
    web_url: `${base}/${p.path}/-/merge_requests/${String(mr.iid)}`,
  });

  const routes: Route[] = [
    // A project's merge requests (GitLab REST "List project merge requests"): `state`
    // (opened|closed|merged|locked|all), `target_branch`; newest first; offset pagination.
    [
      'GET',
      /^\/api\/v4\/projects\/([^/]+)\/merge_requests$/,
      (req, m) => {
        const p = find(m[1] ?? '');
        if (!p) return noProject;
        const state = req.query.get('state') ?? 'all';
        if (!['opened', 'closed', 'merged', 'locked', 'all'].includes(state))
          return bad('state does not have a valid value');
        const target = req.query.get('target_branch');
        const list = p.mrs
          .filter((mr) => state === 'all' || mr.state === state)
          .filter((mr) => target === null || (mr.target_branch ?? 'main') === target)
          .sort((a, b) => b.iid - a.iid)
          .map((mr) => mrListJSON(p, mr));
        return paginate(req, list);
      },
    ],
    // "Get a member of a group or project, including inherited and invited members".
    [
      'GET',
      /^\/api\/v4\/projects\/([^/]+)\/members\/all\/(\d+)$/,
      (_req, m) => {
        const p = find(m[1] ?? '');
        if (!p) return noProject;
        const level = p.members?.get(Number(m[2]));
        if (level === undefined) return json(404, { message: '404 Not found' });
        return json(200, {
          id: Number(m[2]),
          username: `user${m[2] ?? ''}`,
          access_level: level,
          state: 'active',
        });
      },
    ],
    ['GET', /^\/api\/v4\/user$/, (req) => json(200, userOf(req))],
    [
      'POST',
      /^\/api\/v4\/projects\/([^/]+)\/statuses\/([0-9a-f]{40})$/,
      (req, m) => {
        const p = find(m[1] ?? '');
        if (!p) return noProject;
        const b = body(req);
        const state = b.state;
        if (typeof state !== 'string' || !STATES.has(state)) return bad('state does not have a valid value');
        const name =
          typeof b.name === 'string' ? b.name : typeof b.context === 'string' ? b.context : 'default';
        const description = typeof b.description === 'string' ? b.description : null;
        if (description !== null && description.length > 255) {
          return bad({ description: ['is too long (maximum is 255 characters)'] });
        }
        const sha = m[2] ?? '';
        // first_matching_pipeline: newest first, then by ref and pipeline_id when given.
        const wantRef = typeof b.ref === 'string' ? b.ref : undefined;
        const wantPipeline = b.pipeline_id === undefined ? undefined : Number(b.pipeline_id);
        const matching = p.pipelines
          .filter(
            (x) =>
              x.sha === sha &&
              (wantRef === undefined || x.ref === wantRef) &&
              (wantPipeline === undefined || x.id === wantPipeline),
          )
          .sort((a, z) => z.id - a.id)[0];
        if (wantPipeline !== undefined && matching === undefined) {
          return json(404, { message: '404 Pipeline for pipeline_id, sha and ref Not Found' });
        }
        // ref: params[:ref] || first_matching_pipeline.ref || a branch containing the commit.
        const ref = wantRef ?? matching?.ref ?? 'main';
        let pipeline = matching;
        if (pipeline === undefined) {
          pipeline = { id: nextId++, sha, ref, source: 'external' };
          p.pipelines.push(pipeline);
        }
        const inPipeline = pipeline.id;
        const active = p.statuses
          .filter(
            (s) => s.sha === sha && s.name === name && s.pipeline_id === inPipeline && ACTIVE.has(s.status),
          )
          .at(-1);
        if (active) {
          if (state === 'pending') return bad(`Cannot transition status via :enqueue from :${active.status}`);
          if (state === 'running' && active.status === 'running') {
            return bad('Cannot transition status via :run from :running');
          }
          active.status = state;
          active.description = description;
          active.target_url = typeof b.target_url === 'string' ? b.target_url : null;
          return json(201, active);
        }
        const s: GitLabStatus = {
          id: nextId++,
          sha,
          ref,
          status: state,
          name,
          target_url: typeof b.target_url === 'string' ? b.target_url : null,
          description,
          created_at: now(),
          author: userOf(req) ?? { id: 0, username: '?' },
          pipeline_id: inPipeline,
        };
        p.statuses.push(s);
        return json(201, s);
      },
    ],
    [
      'GET',
      /^\/api\/v4\/projects\/([^/]+)\/repository\/commits\/([0-9a-f]{40})\/statuses$/,
      (req, m) => {
        const p = find(m[1] ?? '');
        if (!p) return noProject;
        const ref = req.query.get('ref');
        const name = opts.ignoreNameFilter === true ? null : req.query.get('name');
        let list = p.statuses.filter(
          (s) => s.sha === m[2] && (ref === null || s.ref === ref) && (name === null || s.name === name),
        );
        if (req.query.get('all') !== 'true') {
          const latest = new Map<string, GitLabStatus>();
          for (const s of list) latest.set(`${s.name}\u0000${s.ref ?? ''}`, s);
          list = [...latest.values()].sort((a, b) => a.id - b.id);
        }
        return paginate(req, list);
      },
    ],
    [
      'GET',
      /^\/api\/v4\/projects\/([^/]+)\/repository\/commits\/([0-9a-f]{40})\/merge_requests$/,
      (req, m) => {
        const p = find(m[1] ?? '');
        if (!p) return noProject;
        const sha = m[2] ?? '';
        // "Merge requests related to the commit": those containing it, and a merged one whose
        // merge or squash commit it is (GitLab's `by_related_commit_sha`).
        const related = (mr: GitLabMR): boolean =>
          mr.commits.includes(sha) || mr.merge_commit_sha === sha || mr.squash_commit_sha === sha;
        return paginate(req, p.mrs.filter(related).map(mrJSON));
      },
    ],
    [
      'GET',
      /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)$/,
      (_req, m) => {
        const p = find(m[1] ?? '');
        const mr = p?.mrs.find((x) => x.iid === Number(m[2]));
        if (!p || !mr) return json(404, { message: '404 Not found' });
        const head = p.pipelines.find((x) => x.id === mr.head_pipeline_id);
        return json(200, {
          ...mrJSON(mr),
          head_pipeline:
            head === undefined
              ? null
              : {
                  id: head.id,
                  iid: head.id - 1000,
                  sha: head.sha,
                  ref: head.ref,
                  status: 'running',
                  source: head.source,
                },
        });
      },
    ],
    [
      'GET',
      /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)\/notes$/,
      (req, m) => {
        const mr = find(m[1] ?? '')?.mrs.find((x) => x.iid === Number(m[2]));
        if (!mr) return json(404, { message: '404 Not found' });
        const asc = req.query.get('sort') === 'asc';
        const notes = [...mr.notes].sort((a, b) => (asc ? a.id - b.id : b.id - a.id));
        return paginate(req, notes);
      },
    ],
    [
      'POST',
      /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)\/notes$/,
      (req, m) => {
        const mr = find(m[1] ?? '')?.mrs.find((x) => x.iid === Number(m[2]));
        if (!mr) return json(404, { message: '404 Not found' });
        const text = body(req).body;
        if (typeof text !== 'string' || text === '') return bad('400 Bad request - body is missing');
        if (text.length > GITLAB_NOTE_MAX) {
          return bad({ note: [`is too long (maximum is ${GITLAB_NOTE_MAX} characters)`] });
        }
        const user = userOf(req) ?? { id: 0, username: '?' };
        const note: GitLabNote = { id: nextId++, body: text, author: user, system: false, created_at: now() };
        mr.notes.push(note);
        return json(201, note);
      },
    ],
    [
      'PUT',
      /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)\/notes\/(\d+)$/,
      (req, m) => {
        const mr = find(m[1] ?? '')?.mrs.find((x) => x.iid === Number(m[2]));
        const note = mr?.notes.find((n) => n.id === Number(m[3]));
        if (!note) return json(404, { message: '404 Note Not Found' });
        if (note.author.id !== userOf(req)?.id) return json(403, { message: '403 Forbidden' });
        const text = body(req).body;
        if (typeof text !== 'string' || text === '') return bad('400 Bad request - body is missing');
        if (text.length > GITLAB_NOTE_MAX) {
          return bad({ note: [`is too long (maximum is ${GITLAB_NOTE_MAX} characters)`] });
        }
        note.body = text;
        return json(200, note);
      },
    ],
  ];

  const server = await startKitServer(routes, {
    ...(opts.tls ? { tls: opts.tls } : {}),
    authenticate: (req) =>
      userOf(req) === undefined ? json(401, { message: '401 Unauthorized' }) : undefined,
  });
  base = server.url;

  return {
    ...server,
    project,
    addMR(path, mr) {
      const full: GitLabMR = {
        state: 'opened',
        source_branch: 'feature',
        commits: [mr.sha],
        notes: [],
        ...mr,
      };
      project(path).mrs.push(full);
      return full;
    },
    addPipeline(path, pl) {
      const full: GitLabPipeline = { source: 'push', ...pl };
      project(path).pipelines.push(full);
      return full;
    },
    addStatus(path, s) {
      const full: GitLabStatus = {
        id: nextId++,
        ref: 'main',
        target_url: null,
        description: null,
        created_at: now(),
        author: { id: 1, username: 'ci' },
        pipeline_id: 0,
        ...s,
      };
      if (s.pipeline_id === undefined) {
        const pr = project(path);
        let pl = pr.pipelines.find((x) => x.sha === full.sha && x.ref === full.ref);
        if (pl === undefined) {
          pl = { id: nextId++, sha: full.sha, ref: full.ref ?? 'main', source: 'external' };
          pr.pipelines.push(pl);
        }
        full.pipeline_id = pl.id;
      }
      project(path).statuses.push(full);
      return full;
    },
    addNote(path, iid, note) {
      const mr = project(path).mrs.find((x) => x.iid === iid);
      if (!mr) throw new Error(`no MR !${iid}`);
      const n: GitLabNote = { id: nextId++, system: false, created_at: now(), ...note };
      mr.notes.push(n);
      return n;
    },
    addMember(path, user, accessLevel) {
      const p = project(path);
      p.members ??= new Map();
      p.members.set(user.id, accessLevel);
    },
    writes: () =>
      server.requests
        .filter((r) => r.method === 'POST' || r.method === 'PUT')
        .map((r) => `${r.method} ${r.path}`),
  };
}

function mrJSON(mr: GitLabMR): Record<string, unknown> {
  return {
    iid: mr.iid,
    id: mr.iid + 50_000,
    state: mr.state,
    sha: mr.sha,
    source_branch: mr.source_branch,
    merge_commit_sha: mr.merge_commit_sha ?? null,
    squash_commit_sha: mr.squash_commit_sha ?? null,
  };
}
