/**
 * A real Gitea for end-to-end forge tests: one fresh server per test file, in a temp folder,
 * built from its Go module by scripts/gitea-build.sh (run by `npm test`'s `pretest`).
 *
 * {@link startGitea} writes an `app.ini` (SQLite, loopback HTTP on a free port, no SSH, offline,
 * registration off, webhooks allowed to loopback), runs `gitea migrate`, creates an admin user
 * and an access token with the CLI (before the server, so SQLite has one writer), then starts
 * `gitea web` and waits until `GET /api/v1/version` answers. {@link Gitea} wraps the few REST
 * calls tests need, typed, each checking the status Gitea documents and failing with the
 * answer's body otherwise.
 *
 * The binary is looked up in `PKO_NC_GITEA_DIR`, else
 * `~/.cache/pko-notification-controller/gitea/<GITEA_VERSION>/` (a folder with `gitea`,
 * `templates/`, `options/`, `public/` and a `.complete` marker). When it is missing or does not
 * start, {@link startGitea} throws with the reason and the server's log: the suite fails, it never
 * skips.
 */
import { spawn, execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { homedir, tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Gitea version the tests run (keep in sync with scripts/gitea-build.sh). */
export const GITEA_VERSION = '1.27.3';

/** Folder holding the built Gitea, or the reason it is not usable. */
export function giteaDir(): { dir: string } | { error: string } {
  const cacheRoot = path.join(
    process.env['XDG_CACHE_HOME'] ?? path.join(homedir(), '.cache'),
    'pko-notification-controller',
    'gitea',
  );
  const dir =
    process.env['PKO_NC_GITEA_DIR'] ??
    path.join(process.env['PKO_NC_GITEA_CACHE'] ?? cacheRoot, GITEA_VERSION);
  const bin = path.join(dir, 'gitea');
  if (!existsSync(bin) || !existsSync(path.join(dir, '.complete'))) {
    return {
      error:
        `Gitea ${GITEA_VERSION} is not built (no complete build in ${dir}): run ` +
        '`bash scripts/gitea-build.sh` (npm test runs it in pretest; it needs Go and the Go module proxy)',
    };
  }
  return { dir };
}

/** A user of the test Gitea with an access token of scope `all`. */
export interface GiteaUser {
  id: number;
  username: string;
  password: string;
  token: string;
}

/** Answer of {@link Gitea.api}: status, headers and the parsed JSON body (null when empty). */
export interface GiteaAnswer<T> {
  status: number;
  headers: Headers;
  data: T;
}

export interface GiteaRepo {
  id: number;
  name: string;
  full_name: string;
  owner: { login: string };
  default_branch: string;
  clone_url: string;
  html_url: string;
  fork: boolean;
}

export interface GiteaPull {
  id: number;
  number: number;
  state: 'open' | 'closed';
  merged: boolean;
  head: { ref: string; sha: string; repo: { full_name: string } | null };
  base: { ref: string; sha: string };
  merge_commit_sha: string | null;
}

export interface GiteaStatus {
  id: number;
  /** `pending` | `success` | `error` | `failure` | `warning` (Gitea calls the state `status`). */
  status: string;
  context: string;
  description: string;
  target_url: string;
  creator: { id: number; login: string } | null;
  created_at: string;
}

export interface GiteaComment {
  id: number;
  body: string;
  user: { id: number; login: string };
  created_at: string;
  updated_at: string;
}

export interface GiteaHook {
  id: number;
  type: string;
  active: boolean;
  events: string[];
  config: Record<string, string>;
}

/** Options of {@link startGitea}. */
export interface StartGiteaOptions {
  /** Admin user name (default `pko-admin`). */
  adminName?: string;
  /** Extra `app.ini` lines appended to the generated file (section headers included). */
  extraIni?: string;
}

/** How long the API may take to answer after `gitea web` starts (measured ~0.4 s idle). */
const READY_TIMEOUT_MS = 30_000;
/** Bound of each CLI step. */
const CLI_TIMEOUT_MS = 60_000;

/** A running Gitea. Call {@link Gitea.stop} (e.g. in `afterAll`); it removes the temp folder. */
export class Gitea {
  /** `http://127.0.0.1:<port>` (no trailing slash); also the `ROOT_URL`. */
  readonly url: string;
  /** `<url>/api/v1`. */
  readonly apiBase: string;
  readonly admin: GiteaUser;
  /** Milliseconds from {@link startGitea} being called until the API answered. */
  readonly startMs: number;
  /** Where {@link startMs} went: `gitea migrate`, admin user, token, `gitea web` until ready (ms). */
  readonly phasesMs: Readonly<Record<'migrate' | 'admin' | 'token' | 'web', number>>;
  readonly #proc: ReturnType<typeof spawn>;
  readonly #work: string;
  readonly #bin: string;
  readonly #ini: string;
  #log: string[];
  #stopped = false;

  constructor(init: {
    url: string;
    admin: GiteaUser;
    startMs: number;
    phasesMs: Gitea['phasesMs'];
    proc: ReturnType<typeof spawn>;
    work: string;
    bin: string;
    ini: string;
    log: string[];
  }) {
    this.url = init.url;
    this.apiBase = `${init.url}/api/v1`;
    this.admin = init.admin;
    this.startMs = init.startMs;
    this.phasesMs = init.phasesMs;
    this.#proc = init.proc;
    this.#work = init.work;
    this.#bin = init.bin;
    this.#ini = init.ini;
    this.#log = init.log;
  }

  /** The last `lines` lines the server logged (for failure messages). */
  logTail(lines = 40): string {
    return this.#log.join('').split('\n').slice(-lines).join('\n');
  }

  /**
   * One REST call to `/api/v1<path>` as `as` (default the admin), `Authorization: token …`.
   * Redirects are not followed (so a test sees what Gitea answers).
   * @throws Error naming the call, the status and Gitea's answer when the status is not in
   *   `expect` (default: any 2xx).
   */
  async api<T = unknown>(
    method: string,
    apiPath: string,
    opts: { body?: unknown; as?: GiteaUser; expect?: readonly number[] } = {},
  ): Promise<GiteaAnswer<T>> {
    const res = await fetch(`${this.apiBase}${apiPath}`, {
      method,
      redirect: 'manual',
      headers: {
        authorization: `token ${(opts.as ?? this.admin).token}`,
        accept: 'application/json',
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    });
    const text = await res.text();
    const ok = opts.expect ? opts.expect.includes(res.status) : res.status >= 200 && res.status < 300;
    if (!ok) {
      throw new Error(`Gitea ${method} /api/v1${apiPath} answered ${res.status}: ${text.slice(0, 500)}`);
    }
    let data: unknown = null;
    if (text !== '') {
      try {
        data = JSON.parse(text);
      } catch {
        data = text;
      }
    }
    return { status: res.status, headers: res.headers, data: data as T };
  }

  /** Every item of a paged listing (`limit=50`, following `Link: rel="next"`). */
  async all<T>(apiPath: string, as?: GiteaUser): Promise<T[]> {
    const out: T[] = [];
    let next = `${apiPath}${apiPath.includes('?') ? '&' : '?'}limit=50&page=1`;
    for (let n = 0; ; n++) {
      if (n > 100) throw new Error(`Gitea listing ${apiPath}: more than 100 pages`);
      const page: GiteaAnswer<T[]> = await this.api<T[]>('GET', next, as ? { as } : {});
      out.push(...page.data);
      const link: string | undefined = /<([^>]+)>\s*;\s*rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
      if (link === undefined) break;
      const u = new URL(link, this.url);
      next = u.pathname.replace(/^\/api\/v1/, '') + u.search;
    }
    return out;
  }

  /** Creates a user (not admin) with an access token of scope `all`, through the admin API. */
  async createUser(username: string): Promise<GiteaUser> {
    const password = `pw-${randomBytes(12).toString('hex')}`;
    const { data } = await this.api<{ id: number }>('POST', '/admin/users', {
      body: {
        username,
        email: `${username}@example.test`,
        password,
        must_change_password: false,
      },
      expect: [201],
    });
    const res = await fetch(`${this.apiBase}/users/${encodeURIComponent(username)}/tokens`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: `e2e-${randomBytes(4).toString('hex')}`, scopes: ['all'] }),
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`Gitea token for ${username} answered ${res.status}: ${text}`);
    const token = (JSON.parse(text) as { sha1: string }).sha1;
    return { id: data.id, username, password, token };
  }

  /** Creates a repository owned by `as` (default admin), initialised with a README on `main`. */
  async createRepo(name: string, opts: { as?: GiteaUser; org?: string } = {}): Promise<GiteaRepo> {
    const body = { name, auto_init: true, default_branch: 'main', readme: 'Default', private: false };
    const where = opts.org !== undefined ? `/orgs/${opts.org}/repos` : '/user/repos';
    return (await this.api<GiteaRepo>('POST', where, { body, expect: [201], ...this.#as(opts.as) })).data;
  }

  /** Creates an organization owned by the admin. */
  async createOrg(name: string): Promise<void> {
    await this.api('POST', '/orgs', { body: { username: name, visibility: 'public' }, expect: [201] });
  }

  /** Gives `user` `permission` (`read` | `write` | `admin`) on `owner/repo`. */
  async addCollaborator(owner: string, repo: string, user: GiteaUser, permission = 'write'): Promise<void> {
    await this.api('PUT', `/repos/${owner}/${repo}/collaborators/${user.username}`, {
      body: { permission },
      expect: [204],
    });
  }

  /** Creates branch `name` from `from` (default `main`). */
  async createBranch(
    owner: string,
    repo: string,
    name: string,
    from = 'main',
    as?: GiteaUser,
  ): Promise<void> {
    await this.api('POST', `/repos/${owner}/${repo}/branches`, {
      body: { new_branch_name: name, old_branch_name: from },
      expect: [201],
      ...this.#as(as),
    });
  }

  /** The commit SHA a branch points at. */
  async branchSha(owner: string, repo: string, branch: string): Promise<string> {
    const { data } = await this.api<{ commit: { id: string } }>(
      'GET',
      `/repos/${owner}/${repo}/branches/${encodeURIComponent(branch)}`,
    );
    return data.commit.id;
  }

  /**
   * Commits a new file on `branch` through the contents API and returns the new commit's SHA.
   * `file` defaults to a unique name, so every call makes a new commit.
   */
  async commit(
    owner: string,
    repo: string,
    opts: { branch: string; file?: string; content?: string; message?: string; as?: GiteaUser },
  ): Promise<string> {
    const file = opts.file ?? `changes/${Date.now().toString(36)}-${randomBytes(3).toString('hex')}.txt`;
    const { data } = await this.api<{ commit: { sha: string } }>(
      'POST',
      `/repos/${owner}/${repo}/contents/${file.split('/').map(encodeURIComponent).join('/')}`,
      {
        body: {
          branch: opts.branch,
          content: Buffer.from(opts.content ?? `change ${file}\n`).toString('base64'),
          message: opts.message ?? `add ${file}`,
        },
        expect: [201],
        ...this.#as(opts.as),
      },
    );
    return data.commit.sha;
  }

  /**
   * Writes `file` on `branch` with `content` through the contents API — creates it, or replaces
   * it when it exists (Gitea needs the current blob's SHA for that) — and returns the new
   * commit's SHA.
   */
  async writeFile(
    owner: string,
    repo: string,
    opts: { branch: string; file: string; content: string; message: string; as?: GiteaUser },
  ): Promise<string> {
    const where = `/repos/${owner}/${repo}/contents/${opts.file.split('/').map(encodeURIComponent).join('/')}`;
    const current = await this.api<{ sha: string } | null>(
      'GET',
      `${where}?ref=${encodeURIComponent(opts.branch)}`,
      { expect: [200, 404], ...this.#as(opts.as) },
    );
    const body = {
      branch: opts.branch,
      content: Buffer.from(opts.content).toString('base64'),
      message: opts.message,
      ...(current.status === 200 && current.data ? { sha: current.data.sha } : {}),
    };
    const { data } = await this.api<{ commit: { sha: string } }>(
      current.status === 200 ? 'PUT' : 'POST',
      where,
      {
        body,
        expect: current.status === 200 ? [200] : [201],
        ...this.#as(opts.as),
      },
    );
    return data.commit.sha;
  }

  /**
   * Clones `owner/repo` over HTTP with `as`'s token (default admin), commits one file on `branch`
   * and pushes it, with the system `git`. Returns the pushed commit's SHA.
   * @throws Error when git is missing or any git step fails (with git's output).
   */
  async gitPush(owner: string, repo: string, branch: string, as?: GiteaUser): Promise<string> {
    const user = as ?? this.admin;
    const dir = await mkdtemp(path.join(this.#work, 'clone-'));
    const remote = `${this.url}/${owner}/${repo}.git`;
    // Credentials go in a header set through the environment, never in the command line or URL
    // (git's error messages quote both).
    const basic = Buffer.from(`${user.username}:${user.token}`).toString('base64');
    const env = {
      ...process.env,
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'http.extraHeader',
      GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
      GIT_TERMINAL_PROMPT: '0',
      GIT_CONFIG_NOSYSTEM: '1',
      HOME: dir,
      GIT_AUTHOR_NAME: user.username,
      GIT_AUTHOR_EMAIL: `${user.username}@example.test`,
      GIT_COMMITTER_NAME: user.username,
      GIT_COMMITTER_EMAIL: `${user.username}@example.test`,
    };
    const git = async (...args: string[]): Promise<string> => {
      try {
        return (await run('git', args, { cwd: dir, env, timeout: CLI_TIMEOUT_MS })).stdout.trim();
      } catch (err) {
        const e = err as { stderr?: string; message: string };
        throw new Error(`git ${args[0] ?? ''} failed: ${e.stderr ?? e.message}`, { cause: err });
      }
    };
    try {
      await git('clone', '--quiet', '--branch', branch, remote, '.');
      const file = `pushed-${Date.now().toString(36)}.txt`;
      await writeFile(path.join(dir, file), `pushed ${file}\n`);
      await git('add', file);
      await git('commit', '--quiet', '-m', `push ${file}`);
      await git('push', '--quiet', 'origin', `HEAD:${branch}`);
      return await git('rev-parse', 'HEAD');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** Opens a pull request `head` → `base` on `owner/repo` (head `user:branch` for a fork). */
  async openPull(
    owner: string,
    repo: string,
    opts: { head: string; base?: string; title?: string; as?: GiteaUser },
  ): Promise<GiteaPull> {
    const body = { head: opts.head, base: opts.base ?? 'main', title: opts.title ?? `Change ${opts.head}` };
    return (
      await this.api<GiteaPull>('POST', `/repos/${owner}/${repo}/pulls`, {
        body,
        expect: [201],
        ...this.#as(opts.as),
      })
    ).data;
  }

  async getPull(owner: string, repo: string, index: number): Promise<GiteaPull> {
    return (await this.api<GiteaPull>('GET', `/repos/${owner}/${repo}/pulls/${index}`)).data;
  }

  /** Closes (or with `open: true` reopens) a pull request. */
  async setPullState(
    owner: string,
    repo: string,
    index: number,
    state: 'open' | 'closed',
  ): Promise<GiteaPull> {
    return (
      await this.api<GiteaPull>('PATCH', `/repos/${owner}/${repo}/pulls/${index}`, {
        body: { state },
        expect: [201],
      })
    ).data;
  }

  /** Merges a pull request with a merge commit; returns the pull request as Gitea then shows it. */
  async mergePull(owner: string, repo: string, index: number): Promise<GiteaPull> {
    // Gitea answers 405 "Please try again later" while it still computes whether the pull
    // request can be merged (right after it was opened or pushed to): wait and try again, as a
    // user would, for up to 60 s.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const res = await this.api('POST', `/repos/${owner}/${repo}/pulls/${index}/merge`, {
        body: { Do: 'merge' },
        expect: [200, 405],
      });
      if (res.status === 200) break;
      const said =
        typeof res.data === 'object' && res.data !== null ? JSON.stringify(res.data) : String(res.data);
      if (!/try again later/i.test(said) || Date.now() > deadline) {
        throw new Error(
          `Gitea POST /api/v1/repos/${owner}/${repo}/pulls/${String(index)}/merge answered 405: ${said.slice(0, 500)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    return this.getPull(owner, repo, index);
  }

  /** Forks `owner/repo` into `as`'s account. */
  async fork(owner: string, repo: string, as: GiteaUser): Promise<GiteaRepo> {
    return (
      await this.api<GiteaRepo>('POST', `/repos/${owner}/${repo}/forks`, { body: {}, expect: [202], as })
    ).data;
  }

  /** Renames a repository (Gitea then redirects the old path). */
  async renameRepo(owner: string, repo: string, newName: string): Promise<GiteaRepo> {
    return (await this.api<GiteaRepo>('PATCH', `/repos/${owner}/${repo}`, { body: { name: newName } })).data;
  }

  /** Adds a `gitea` webhook (JSON, HMAC-signed with `secret`) for `events`. */
  async addWebhook(
    owner: string,
    repo: string,
    opts: { url: string; secret: string; events: string[] },
  ): Promise<GiteaHook> {
    return (
      await this.api<GiteaHook>('POST', `/repos/${owner}/${repo}/hooks`, {
        body: {
          type: 'gitea',
          active: true,
          events: opts.events,
          config: { url: opts.url, content_type: 'json', secret: opts.secret },
        },
        expect: [201],
      })
    ).data;
  }

  /** Posts a commit status as `as` (default admin), as another tool would. */
  async postStatus(
    owner: string,
    repo: string,
    sha: string,
    status: { state: string; context: string; description?: string; target_url?: string },
    as?: GiteaUser,
  ): Promise<GiteaStatus> {
    return (
      await this.api<GiteaStatus>('POST', `/repos/${owner}/${repo}/statuses/${sha}`, {
        body: status,
        expect: [201],
        ...this.#as(as),
      })
    ).data;
  }

  /** Every status on `sha` (all pages), in Gitea's listing order. */
  statuses(owner: string, repo: string, sha: string): Promise<GiteaStatus[]> {
    // `sort=leastindex` (index DESC, unique per commit): the default `created_unix DESC` ties
    // within a second, and paging through a tie repeats and skips statuses (seen: 124 for 122).
    return this.all<GiteaStatus>(`/repos/${owner}/${repo}/commits/${sha}/statuses?sort=leastindex`);
  }

  /** Every comment of issue/pull request `index` (Gitea does not paginate this list). */
  async comments(owner: string, repo: string, index: number): Promise<GiteaComment[]> {
    return (await this.api<GiteaComment[]>('GET', `/repos/${owner}/${repo}/issues/${index}/comments`)).data;
  }

  async addComment(
    owner: string,
    repo: string,
    index: number,
    body: string,
    as?: GiteaUser,
  ): Promise<GiteaComment> {
    return (
      await this.api<GiteaComment>('POST', `/repos/${owner}/${repo}/issues/${index}/comments`, {
        body: { body },
        expect: [201],
        ...this.#as(as),
      })
    ).data;
  }

  /** Runs a `gitea` CLI command against this instance's app.ini (e.g. `['admin', 'user', 'list']`). */
  async cli(args: string[]): Promise<string> {
    return giteaCli(this.#bin, this.#ini, this.#work, args);
  }

  /** Stops the server (SIGTERM, then SIGKILL after 10 s) and removes its folder. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await stopProcess(this.#proc);
    await rm(this.#work, { recursive: true, force: true });
  }

  #as(as: GiteaUser | undefined): { as?: GiteaUser } {
    return as !== undefined ? { as } : {};
  }
}

async function giteaCli(bin: string, ini: string, work: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(bin, ['--config', ini, '--work-path', work, ...args], {
      cwd: work,
      env: giteaEnv(work),
      timeout: CLI_TIMEOUT_MS,
    });
    return stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(
      `gitea ${args.slice(0, 3).join(' ')} failed: ${e.message}\n${e.stderr ?? ''}${e.stdout ?? ''}`,
      { cause: err },
    );
  }
}

function giteaEnv(work: string): NodeJS.ProcessEnv {
  // Gitea runs git with its own HOME under the data folder; USER must match RUN_USER.
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: work,
    USER: userInfo().username,
    GITEA_WORK_DIR: work,
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => {
        if (addr !== null && typeof addr === 'object') resolve(addr.port);
        else reject(new Error('no TCP port'));
      });
    });
  });
}

function stopProcess(proc: ReturnType<typeof spawn>): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    proc.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    proc.kill('SIGTERM');
  });
}

function appIni(o: { work: string; static: string; port: number; runUser: string; extra: string }): string {
  const root = o.runUser === 'root';
  return `APP_NAME = pko-nc e2e
RUN_USER = ${o.runUser}
RUN_MODE = prod
WORK_PATH = ${o.work}
${root ? 'I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\n' : ''}
[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = ${o.port}
ROOT_URL = http://127.0.0.1:${o.port}/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
STATIC_ROOT_PATH = ${o.static}
APP_DATA_PATH = ${o.work}/data

[database]
DB_TYPE = sqlite3
PATH = ${o.work}/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = ${o.work}/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = ${randomBytes(32).toString('hex')}
INTERNAL_TOKEN = ${randomBytes(48).toString('base64url')}
; webhooks to the tests' receivers on 127.0.0.1 (the default, "external", refuses loopback)
ALLOWED_HOST_LIST = loopback

; Gitea as an OAuth2 provider is not needed (API tokens do not use it), and enabling it makes
; every fresh instance generate a 4096-bit RSA signing key: ~3 s of CPU at start (observed on
; Gitea 1.27.3, services/oauth2_provider).
[oauth2]
ENABLED = false

[webhook]
DELIVER_TIMEOUT = 5

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[queue]
TYPE = channel

[mailer]
ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = console
LEVEL = warn
ROOT_PATH = ${o.work}/log
${o.extra}
`;
}

/**
 * Starts a fresh Gitea in a new temp folder (see the module comment) and returns it once its
 * API answers. Admin: `pko-admin` (or `opts.adminName`) with a token of scope `all`.
 * @throws Error with the reason and the server's log when the binary is missing, a setup step
 *   fails, or the API does not answer within 30 s.
 */
export async function startGitea(opts: StartGiteaOptions = {}): Promise<Gitea> {
  const t0 = performance.now();
  const found = giteaDir();
  if ('error' in found) throw new Error(found.error);
  const bin = path.join(found.dir, 'gitea');
  const work = await mkdtemp(path.join(tmpdir(), 'pko-nc-gitea-'));
  const ini = path.join(work, 'app.ini');
  const runUser = userInfo().username;
  const port = await freePort();
  await writeFile(ini, appIni({ work, static: found.dir, port, runUser, extra: opts.extraIni ?? '' }), {
    mode: 0o600,
  });
  let proc: ReturnType<typeof spawn> | undefined;
  const log: string[] = [];
  try {
    let mark = performance.now();
    const lap = (): number => {
      const now = performance.now();
      const ms = now - mark;
      mark = now;
      return ms;
    };
    await giteaCli(bin, ini, work, ['migrate']);
    const migrateMs = lap();
    const adminName = opts.adminName ?? 'pko-admin';
    const password = `pw-${randomBytes(12).toString('hex')}`;
    await giteaCli(bin, ini, work, [
      'admin',
      'user',
      'create',
      '--admin',
      '--username',
      adminName,
      '--password',
      password,
      '--email',
      `${adminName}@example.test`,
      '--must-change-password=false',
    ]);
    const adminMs = lap();
    const token = await giteaCli(bin, ini, work, [
      'admin',
      'user',
      'generate-access-token',
      '--username',
      adminName,
      '--token-name',
      'e2e-admin',
      '--scopes',
      'all',
      '--raw',
    ]);
    if (!/^[0-9a-f]{40}$/.test(token))
      throw new Error(`gitea generate-access-token printed no token: ${token}`);
    const tokenMs = lap();

    const p = spawn(bin, ['--config', ini, '--work-path', work, 'web'], {
      cwd: work,
      env: giteaEnv(work),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc = p;
    p.stdout.setEncoding('utf8').on('data', (c: string) => log.push(c));
    p.stderr.setEncoding('utf8').on('data', (c: string) => log.push(c));
    const url = `http://127.0.0.1:${port}`;
    const exited = new Promise<never>((_, reject) => {
      p.once('exit', (code, signal) => {
        reject(new Error(`gitea web exited (${signal ?? `code ${String(code)}`}) before it answered`));
      });
    });
    exited.catch(() => undefined);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const ready = await Promise.race([
        fetch(`${url}/api/v1/version`).then(
          (r) => r.status === 200,
          () => false,
        ),
        exited,
      ]);
      if (ready) break;
      if (Date.now() > deadline)
        throw new Error(`Gitea did not answer GET /api/v1/version within ${READY_TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const me = await fetch(`${url}/api/v1/user`, { headers: { authorization: `token ${token}` } });
    if (me.status !== 200)
      throw new Error(`Gitea GET /api/v1/user with the admin token answered ${me.status}`);
    const { id } = (await me.json()) as { id: number };
    const webMs = lap();
    return new Gitea({
      url,
      admin: { id, username: adminName, password, token },
      startMs: performance.now() - t0,
      phasesMs: { migrate: migrateMs, admin: adminMs, token: tokenMs, web: webMs },
      proc: p,
      work,
      bin,
      ini,
      log,
    });
  } catch (err) {
    if (proc !== undefined) await stopProcess(proc);
    const serverLog = log.join('').split('\n').slice(-30).join('\n');
    const fileLog = await readFile(path.join(work, 'log', 'gitea.log'), 'utf8').catch(() => '');
    await rm(work, { recursive: true, force: true });
    throw new Error(
      `Gitea ${GITEA_VERSION} (${bin}) did not start: ${(err as Error).message}` +
        (serverLog !== '' ? `\n--- gitea output ---\n${serverLog}` : '') +
        (fileLog !== '' ? `\n--- gitea.log ---\n${fileLog.slice(-4000)}` : ''),
      { cause: err },
    );
  }
}
