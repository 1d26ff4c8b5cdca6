/**
 * Git repositories for real-PKO tests: a working repository in a temporary folder driven through
 * the `git` CLI (commits, branch resets), and an HTTPS server on 127.0.0.1 that serves such
 * repositories read-only through `git http-backend` (the CGI program git ships for smart HTTP).
 *
 * Why a server of our own: PKO v2 refuses `file://` repositories (`invalid URL scheme: file`),
 * and no git host is reachable from the test machine. `git http-backend` is git's own server
 * side of the smart HTTP protocol, so clients (go-git in PKO's operator and agent) talk to real
 * git; the few lines here only translate between Node's HTTP server and CGI (RFC 3875).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Environment for every git command: no user or system configuration, fixed identity. */
function gitEnv(home: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'pko-nc test',
    GIT_AUTHOR_EMAIL: 'test@pko-nc.invalid',
    GIT_COMMITTER_NAME: 'pko-nc test',
    GIT_COMMITTER_EMAIL: 'test@pko-nc.invalid',
  };
}

/** A non-bare git repository with branch `main`, in a folder of its own. */
export class GitRepo {
  /** Working tree. */
  readonly dir: string;
  /** `.git` folder (what a server exports). */
  readonly gitDir: string;
  readonly #env: NodeJS.ProcessEnv;

  private constructor(dir: string, home: string) {
    this.dir = dir;
    this.gitDir = path.join(dir, '.git');
    this.#env = gitEnv(home);
  }

  /** Creates an empty repository under `parent` (a fresh temporary folder when omitted). */
  static async create(parent?: string): Promise<GitRepo> {
    const root = parent ?? (await mkdtemp(path.join(tmpdir(), 'pko-nc-git-')));
    const dir = path.join(root, 'work');
    const home = path.join(root, 'home');
    await mkdir(dir, { recursive: true });
    await mkdir(home, { recursive: true });
    const repo = new GitRepo(dir, home);
    await repo.git('init', '--quiet', '--initial-branch=main');
    // Let clients fetch any commit by SHA, as GitHub and GitLab allow (PKO's agent fetches the
    // exact revision it was given).
    await repo.git('config', 'uploadpack.allowAnySHA1InWant', 'true');
    return repo;
  }

  /** Runs `git <args>` in the working tree; resolves to trimmed stdout. */
  async git(...args: string[]): Promise<string> {
    const { stdout } = await run('git', args, { cwd: this.dir, env: this.#env });
    return stdout.trim();
  }

  /** Writes `files` (path → content), commits them all on the current branch, returns the SHA. */
  async commit(message: string, files: Record<string, string>): Promise<string> {
    for (const [name, content] of Object.entries(files)) {
      const file = path.join(this.dir, name);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, content);
    }
    await this.git('add', '--all');
    await this.git('commit', '--quiet', '--allow-empty', '-m', message);
    return this.head();
  }

  /** SHA of `main`. */
  head(): Promise<string> {
    return this.git('rev-parse', 'refs/heads/main');
  }

  /** Moves `main` (and the working tree) to `sha`, as `git reset --hard` then a force push would. */
  async resetTo(sha: string): Promise<void> {
    await this.git('reset', '--quiet', '--hard', sha);
  }
}

/** An HTTPS git server for {@link GitRepo}s. */
export interface GitHttpsServer {
  /** `https://127.0.0.1:<port>` */
  origin: string;
  /** Clone URL of a repository added with {@link add}. */
  url(name: string): string;
  /**
   * Serves `repo` as `<origin>/pko-nc/<name>.git` (owner/name: Pulumi's URL parser, which PKO v2
   * uses, rejects repository URLs with fewer than two path segments as "invalid Git URL").
   */
  add(name: string, repo: GitRepo): Promise<void>;
  /** Requests answered so far (method, path, status), for diagnostics. */
  log: { method: string; path: string; status: number }[];
  close(): Promise<void>;
}

/**
 * Starts an HTTPS server on 127.0.0.1 (certificate and key in PEM, e.g. from
 * test/support/pki.ts) that runs `git http-backend` for each request. Read-only: pushes are
 * refused by http-backend itself (receive-pack is off for anonymous users).
 */
export async function startGitHttpsServer(tls: { certPem: string; keyPem: string }): Promise<GitHttpsServer> {
  const root = await mkdtemp(path.join(tmpdir(), 'pko-nc-git-http-'));
  const log: GitHttpsServer['log'] = [];
  const server: Server = createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://127.0.0.1');
    // CGI meta-variables (RFC 3875 §4.1) and the HTTP_ headers http-backend reads.
    const env: NodeJS.ProcessEnv = {
      ...gitEnv(root),
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      GATEWAY_INTERFACE: 'CGI/1.1',
      SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.replace(/^\?/, ''),
      REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      ...(req.headers['content-length'] !== undefined
        ? { CONTENT_LENGTH: req.headers['content-length'] }
        : {}),
      ...(req.headers['content-encoding'] !== undefined
        ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] }
        : {}),
      ...(typeof req.headers['git-protocol'] === 'string'
        ? { HTTP_GIT_PROTOCOL: req.headers['git-protocol'] }
        : {}),
    };
    const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString('utf8');
    });
    req.pipe(child.stdin);
    child.stdin.on('error', () => undefined);
    let head = Buffer.alloc(0);
    let headerDone = false;
    let status = 200;
    child.stdout.on('data', (chunk: Buffer) => {
      if (headerDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const crlf = head.indexOf('\r\n\r\n');
      const lf = head.indexOf('\n\n');
      const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1;
      if (end < 0) return;
      headerDone = true;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
        const i = line.indexOf(':');
        if (i <= 0) continue;
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end));
    });
    child.on('close', (code) => {
      log.push({ method: req.method ?? '', path: url.pathname, status: headerDone ? status : 502 });
      if (!headerDone) {
        res
          .writeHead(502, { 'content-type': 'text/plain' })
          .end(`git http-backend exited ${String(code)}: ${stderr}`);
        return;
      }
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `https://127.0.0.1:${port}`;
  return {
    origin,
    url: (name) => `${origin}/pko-nc/${name}.git`,
    add: async (name, repo) => {
      await mkdir(path.join(root, 'pko-nc'), { recursive: true });
      await symlink(repo.gitDir, path.join(root, 'pko-nc', `${name}.git`));
    },
    log,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      });
      await rm(root, { recursive: true, force: true });
    },
  };
}
