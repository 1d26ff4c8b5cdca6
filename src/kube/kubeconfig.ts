/**
 * The cluster connection: reading kubeconfig files (or the in-cluster service account) and
 * authenticating requests to the API server.
 *
 * Why hand-written: `@kubernetes/client-node`'s `KubeConfig` imports its generated API index
 * (2,700 modules); loading it costs a fresh Node 24 process about +80 MiB RSS and 0.4 s CPU,
 * more than the rest of the controller together. Issue 21 sets the controller's idle RSS at
 * ≤ 1.2× Flux's notification-controller, which that import alone breaks. The controller needs
 * only what this module does: find the current cluster and put credentials on a request.
 *
 * What it follows (Kubernetes documentation, "Organizing Cluster Access Using kubeconfig Files"
 * and "Configure Access to Multiple Clusters"; "Accessing the Kubernetes API from a Pod";
 * "Authenticating" → client-go credential plugins; client-go's `clientcmd` loading rules):
 * - `KUBECONFIG` is a list of files (`:`-separated, `;` on Windows); files that do not exist are
 *   skipped; the first file to set a cluster, user or context name wins it; `current-context` is
 *   the first non-empty one. Without `KUBECONFIG`, `~/.kube/config`.
 * - Relative file paths in a file (`certificate-authority`, `client-certificate`, `client-key`,
 *   `tokenFile`, and an `exec.command` containing a path separator) are resolved against the
 *   directory of the file that holds them.
 * - In-cluster: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT` (an IPv6 host in
 *   brackets), the service-account token (re-read, so rotated bound tokens are used) and CA.
 * - Files holding credentials (token files, client certificates and keys, CA files) are read
 *   again at most every {@link FILE_REFRESH_MS}, like client-go's cached file token source; a
 *   changed certificate, key or CA gets a new connection pool.
 * - Credential plugins (`user.exec`, `client.authentication.k8s.io/v1` and `v1beta1`): run with
 *   `KUBERNETES_EXEC_INFO`, bounded in time and output; the credential is cached until its
 *   `expirationTimestamp` (for ever when it has none). Their stderr is never shown or logged: a
 *   plugin may print secrets there.
 * - Not supported, with an error saying so: `auth-provider` (the in-tree gcp/azure/oidc
 *   providers were removed from kubectl in Kubernetes 1.26 in favour of exec plugins), SOCKS
 *   `proxy-url`s, `as-groups`/`as-user-extra` impersonation, interactive plugins.
 * Like client-node (and unlike kubectl) `HTTPS_PROXY`/`NO_PROXY` do not apply to the API server:
 * they are for the controller's egress to forges and chat; use the cluster's `proxy-url`.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { isIPv6 } from 'node:net';
import type { Dispatcher } from 'undici';
import { Agent, ProxyAgent } from '../undici.ts';
import { yaml } from '../text.ts';

/** The current cluster of a kubeconfig: its name there and the API server URL. */
export interface KubeCluster {
  readonly name: string;
  readonly server: string;
}

/**
 * Where credentials go: request headers and the undici `Dispatcher` carrying the TLS and proxy
 * settings. client-node's `RequestContext` has these methods too.
 */
export interface AuthTarget {
  setHeaderParam(key: string, value: string): void;
  setDispatcher(dispatcher: Dispatcher): void;
}

/**
 * A connection to one cluster, as everything in `src/` uses it: `kubeRequest`/`kubeStream`
 * (src/kube/client.ts) ask for the current cluster and authenticate each request. Made by
 * {@link loadKubeConfigFile}/{@link loadInCluster}/{@link loadDefaultKubeConfig}. client-node's
 * `KubeConfig` class satisfies this interface too (tests build their clients with it).
 */
export interface KubeConfig {
  /** The current context's cluster, or null when the current context names none. */
  getCurrentCluster(): KubeCluster | null;
  /**
   * Puts the current user's credentials on `target`: an `Authorization` header (bearer token,
   * basic auth) or `Impersonate-*` headers, and a dispatcher when TLS or proxy settings differ
   * from undici's defaults.
   * @throws Error when a credential file cannot be read or a credential plugin fails.
   */
  applySecurityAuthentication(target: AuthTarget): Promise<void>;
}

/** How long a credential file read is reused before reading it again, ms (client-go: 1 min). */
export const FILE_REFRESH_MS = 60_000;
/** A credential plugin is killed after this long, ms. */
export const EXEC_TIMEOUT_MS = 60_000;
/** A credential plugin writing more than this to stdout is killed, bytes. */
export const EXEC_MAX_OUTPUT = 1024 * 1024;

/** Where the service-account files are in a pod (fixed by Kubernetes). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Options shared by the loaders. */
export interface LoaderOptions {
  /** Clock for file refreshes and credential expiry, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

// --- kubeconfig file shapes (the fields used; https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/)

interface ExecConfig {
  command: string;
  args: string[];
  env: { name: string; value: string }[];
  apiVersion: string;
  installHint: string | undefined;
  provideClusterInfo: boolean;
  interactiveMode: string | undefined;
}

interface ClusterEntry {
  name: string;
  server: string;
  caFile: string | undefined;
  caData: Buffer | undefined;
  insecureSkipTLSVerify: boolean;
  tlsServerName: string | undefined;
  proxyURL: string | undefined;
}

interface UserEntry {
  name: string;
  token: string | undefined;
  tokenFile: string | undefined;
  certFile: string | undefined;
  certData: Buffer | undefined;
  keyFile: string | undefined;
  keyData: Buffer | undefined;
  username: string | undefined;
  password: string | undefined;
  impersonate: string | undefined;
  impersonateUID: string | undefined;
  exec: ExecConfig | undefined;
  /** Why this user cannot be used (thrown when the current context picks it). */
  invalid: string | undefined;
}

interface ContextEntry {
  name: string;
  cluster: string;
  user: string;
}

/** One file's entries, relative paths already resolved. */
interface ParsedFile {
  clusters: ClusterEntry[];
  users: UserEntry[];
  contexts: ContextEntry[];
  currentContext: string;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(o: Obj, key: string, where: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new Error(`${where}: ${key} must be a string`);
  return v;
}

function bool(o: Obj, key: string, where: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw new Error(`${where}: ${key} must be true or false`);
  return v;
}

function base64(o: Obj, key: string, where: string): Buffer | undefined {
  const v = str(o, key, where);
  return v === undefined ? undefined : Buffer.from(v, 'base64');
}

/** The named entries of a kubeconfig list (`clusters`, `users`, `contexts`). */
function namedList(doc: Obj, list: string, inner: string): { name: string; body: Obj; where: string }[] {
  const raw = doc[list];
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new Error(`${list} must be a list`);
  return raw.map((e: unknown, i) => {
    if (!isObj(e) || typeof e.name !== 'string' || e.name === '')
      throw new Error(`${list}[${i}] needs a name`);
    const body = e[inner] ?? {};
    if (!isObj(body)) throw new Error(`${list}[${i}] (${e.name}): ${inner} must be a map`);
    return { name: e.name, body, where: `${inner} ${e.name}` };
  });
}

function absolute(dir: string, file: string | undefined): string | undefined {
  return file === undefined || isAbsolute(file) ? file : join(dir, file);
}

function parseExec(o: Obj, dir: string, where: string): ExecConfig {
  const command = str(o, 'command', where);
  if (command === undefined) throw new Error(`${where}: exec.command is required`);
  const apiVersion = str(o, 'apiVersion', where) ?? '';
  if (
    apiVersion !== 'client.authentication.k8s.io/v1' &&
    apiVersion !== 'client.authentication.k8s.io/v1beta1'
  ) {
    throw new Error(
      `${where}: exec.apiVersion ${JSON.stringify(apiVersion)} is not supported; use client.authentication.k8s.io/v1 or v1beta1`,
    );
  }
  const args = o.args ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string'))
    throw new Error(`${where}: exec.args must be a list of strings`);
  const envRaw = o.env ?? [];
  if (!Array.isArray(envRaw)) throw new Error(`${where}: exec.env must be a list`);
  const env = envRaw.map((e: unknown) => {
    if (!isObj(e) || typeof e.name !== 'string' || typeof e.value !== 'string')
      throw new Error(`${where}: exec.env entries need a name and a value (strings)`);
    return { name: e.name, value: e.value };
  });
  return {
    // client-go: a relative command with a path separator is relative to the kubeconfig file;
    // a bare name is looked up on PATH.
    command: !isAbsolute(command) && command.includes(sep) ? join(dir, command) : command,
    args,
    env,
    apiVersion,
    installHint: str(o, 'installHint', where),
    provideClusterInfo: bool(o, 'provideClusterInfo', where),
    interactiveMode: str(o, 'interactiveMode', where),
  };
}

/**
 * A kubeconfig file's document: JSON (valid YAML, which kubectl and client-go read too) with
 * `JSON.parse`, anything else with the YAML library — loaded only then (../text.ts `yaml`).
 */
function parseDocument(text: string): unknown {
  if (text.trimStart().startsWith('{')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      // A YAML flow mapping (`{a: b}`) is not JSON: the YAML parser reads it.
    }
  }
  return yaml().parse(text) as unknown;
}

/** Parses one kubeconfig file's text; `dir` resolves its relative paths. */
function parseKubeconfig(text: string, dir: string): ParsedFile {
  const doc = parseDocument(text);
  if (doc === null || doc === undefined) return { clusters: [], users: [], contexts: [], currentContext: '' };
  if (!isObj(doc)) throw new Error('not a kubeconfig (expected a map)');
  const clusters = namedList(doc, 'clusters', 'cluster').map(({ name, body, where }) => {
    const server = str(body, 'server', where) ?? '';
    return {
      name,
      server,
      caFile: absolute(dir, str(body, 'certificate-authority', where)),
      caData: base64(body, 'certificate-authority-data', where),
      insecureSkipTLSVerify: bool(body, 'insecure-skip-tls-verify', where),
      tlsServerName: str(body, 'tls-server-name', where),
      proxyURL: str(body, 'proxy-url', where),
    };
  });
  // An unusable user fails only when the current context picks it (kubectl too loads a file
  // whose other users it could not serve).
  const users = namedList(doc, 'users', 'user').map(({ name, body, where }): UserEntry => {
    try {
      return parseUser(name, body, where, dir);
    } catch (err) {
      return { ...emptyUser(name), invalid: (err as Error).message };
    }
  });
  const contexts = namedList(doc, 'contexts', 'context').map(({ name, body, where }) => ({
    name,
    cluster: str(body, 'cluster', where) ?? '',
    user: str(body, 'user', where) ?? '',
  }));
  const cc = doc['current-context'];
  return { clusters, users, contexts, currentContext: typeof cc === 'string' ? cc : '' };
}

/** One `users[]` entry. @throws Error for settings that cannot be served. */
function parseUser(name: string, body: Obj, where: string, dir: string): UserEntry {
  if (body['auth-provider'] !== undefined && body['auth-provider'] !== null) {
    const ap = body['auth-provider'];
    const provider = isObj(ap) && typeof ap.name === 'string' ? ap.name : '';
    throw new Error(
      `${where}: auth-provider${provider !== '' ? ` ${provider}` : ''} is not supported (kubectl removed the in-tree auth providers in Kubernetes 1.26); use an exec credential plugin (e.g. gke-gcloud-auth-plugin, kubelogin) or a token`,
    );
  }
  for (const key of ['as-groups', 'as-user-extra']) {
    if (body[key] !== undefined && body[key] !== null)
      throw new Error(`${where}: ${key} impersonation is not supported; use as (Impersonate-User) only`);
  }
  const execRaw = body.exec;
  if (execRaw !== undefined && execRaw !== null && !isObj(execRaw))
    throw new Error(`${where}: exec must be a map`);
  const user: UserEntry = {
    name,
    token: str(body, 'token', where),
    tokenFile: absolute(dir, str(body, 'tokenFile', where)),
    certFile: absolute(dir, str(body, 'client-certificate', where)),
    certData: base64(body, 'client-certificate-data', where),
    keyFile: absolute(dir, str(body, 'client-key', where)),
    keyData: base64(body, 'client-key-data', where),
    username: str(body, 'username', where),
    password: str(body, 'password', where),
    impersonate: str(body, 'as', where),
    impersonateUID: str(body, 'as-uid', where),
    exec: isObj(execRaw) ? parseExec(execRaw, dir, where) : undefined,
    invalid: undefined,
  };
  // client-go's validation: one of bearer token and basic auth.
  if (
    (user.token !== undefined || user.tokenFile !== undefined) &&
    (user.username !== undefined || user.password !== undefined)
  ) {
    throw new Error(`${where}: both a token and username/password are set; only one is allowed`);
  }
  return user;
}

/** Reads and parses one file. @throws Error (the caller names the file). */
function readKubeconfigFile(file: string): ParsedFile {
  return parseKubeconfig(readFileSync(file, 'utf8'), dirname(resolve(file)));
}

/** kubectl's merge: the first file to set a name wins it; the first non-empty current-context wins. */
function merge(files: readonly ParsedFile[]): ParsedFile {
  const out: ParsedFile = { clusters: [], users: [], contexts: [], currentContext: '' };
  for (const f of files) {
    for (const key of ['clusters', 'users', 'contexts'] as const) {
      const have = new Set(out[key].map((e) => e.name));
      for (const e of f[key]) if (!have.has(e.name)) (out[key] as (typeof e)[]).push(e);
    }
    if (out.currentContext === '') out.currentContext = f.currentContext;
  }
  return out;
}

/** A credential file's content, read again once older than {@link FILE_REFRESH_MS}. */
class RefreshedFile {
  readonly #path: string;
  readonly #now: () => number;
  #content: Buffer | undefined;
  #readAt = 0;
  constructor(path: string, now: () => number) {
    this.#path = path;
    this.#now = now;
  }
  /** @throws Error naming the file when it cannot be read (and was never read). */
  get(): Buffer {
    const now = this.#now();
    if (this.#content === undefined || now - this.#readAt >= FILE_REFRESH_MS) {
      try {
        this.#content = readFileSync(this.#path);
      } catch (err) {
        // A file being swapped (kubelet's atomic symlink update) keeps the last good content.
        if (this.#content === undefined)
          throw new Error(`cannot read ${this.#path}: ${(err as Error).message}`, { cause: err });
      }
      this.#readAt = now;
    }
    return this.#content;
  }
}

/** An ExecCredential's `status`, as used. */
interface ExecStatus {
  token: string | undefined;
  cert: Buffer | undefined;
  key: Buffer | undefined;
  /** ms since the epoch; undefined = does not expire. */
  expiresAt: number | undefined;
}

/** TLS material and proxy of one connection pool. */
interface PoolKey {
  ca: Buffer | undefined;
  cert: Buffer | undefined;
  key: Buffer | undefined;
}

function sameBuf(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.equals(b));
}

/** A kubeconfig's current cluster and user, ready to authenticate requests. */
class LoadedKubeConfig implements KubeConfig {
  readonly #cluster: ClusterEntry;
  readonly #user: UserEntry;
  readonly #now: () => number;
  readonly #files = new Map<string, RefreshedFile>();
  #pool: { key: PoolKey; dispatcher: Dispatcher | undefined } | undefined;
  #exec: { status: ExecStatus } | undefined;
  #execRunning: Promise<ExecStatus> | undefined;

  constructor(cluster: ClusterEntry, user: UserEntry, now: () => number) {
    this.#cluster = cluster;
    this.#user = user;
    this.#now = now;
    const proxy = cluster.proxyURL;
    if (proxy !== undefined) {
      let scheme: string;
      try {
        scheme = new URL(proxy).protocol;
      } catch {
        throw new Error(`cluster ${cluster.name}: proxy-url is not a URL`);
      }
      if (scheme.startsWith('socks'))
        throw new Error(
          `cluster ${cluster.name}: proxy-url with scheme ${scheme.slice(0, -1)} is not supported (SOCKS proxies are not); use an http:// or https:// proxy (HTTP CONNECT)`,
        );
      if (scheme !== 'http:' && scheme !== 'https:')
        throw new Error(
          `cluster ${cluster.name}: proxy-url scheme ${scheme.slice(0, -1)} is not supported; use http:// or https://`,
        );
    }
    try {
      new URL(cluster.server);
    } catch {
      throw new Error(`cluster ${cluster.name}: server ${JSON.stringify(cluster.server)} is not a URL`);
    }
  }

  getCurrentCluster(): KubeCluster {
    return { name: this.#cluster.name, server: this.#cluster.server };
  }

  async applySecurityAuthentication(target: AuthTarget): Promise<void> {
    const u = this.#user;
    let cert = u.certData ?? (u.certFile !== undefined ? this.#file(u.certFile) : undefined);
    let key = u.keyData ?? (u.keyFile !== undefined ? this.#file(u.keyFile) : undefined);
    // client-go: a tokenFile wins over a token (the file is what rotates).
    if (u.tokenFile !== undefined)
      target.setHeaderParam('Authorization', `Bearer ${this.#file(u.tokenFile).toString('utf8').trim()}`);
    else if (u.token !== undefined) target.setHeaderParam('Authorization', `Bearer ${u.token}`);
    else if (u.username !== undefined || u.password !== undefined) {
      const basic = Buffer.from(`${u.username ?? ''}:${u.password ?? ''}`).toString('base64');
      target.setHeaderParam('Authorization', `Basic ${basic}`);
    }
    if (u.exec !== undefined && u.token === undefined && u.tokenFile === undefined) {
      const status = await this.#execCredential(u.exec);
      if (status.token !== undefined) target.setHeaderParam('Authorization', `Bearer ${status.token}`);
      if (status.cert !== undefined && status.key !== undefined) {
        cert = status.cert;
        key = status.key;
      }
    }
    if (u.impersonate !== undefined) target.setHeaderParam('Impersonate-User', u.impersonate);
    if (u.impersonateUID !== undefined) target.setHeaderParam('Impersonate-Uid', u.impersonateUID);
    const c = this.#cluster;
    const ca = c.caData ?? (c.caFile !== undefined ? this.#file(c.caFile) : undefined);
    const dispatcher = this.#dispatcher({ ca, cert, key });
    if (dispatcher !== undefined) target.setDispatcher(dispatcher);
  }

  #file(path: string): Buffer {
    let f = this.#files.get(path);
    if (f === undefined) {
      f = new RefreshedFile(path, this.#now);
      this.#files.set(path, f);
    }
    return f.get();
  }

  /** The connection pool for this TLS material; a new one (the old closed) when it changed. */
  #dispatcher(key: PoolKey): Dispatcher | undefined {
    const p = this.#pool;
    if (
      p !== undefined &&
      sameBuf(p.key.ca, key.ca) &&
      sameBuf(p.key.cert, key.cert) &&
      sameBuf(p.key.key, key.key)
    )
      return p.dispatcher;
    const c = this.#cluster;
    const tls = {
      ...(key.ca !== undefined ? { ca: key.ca } : {}),
      ...(key.cert !== undefined ? { cert: key.cert } : {}),
      ...(key.key !== undefined ? { key: key.key } : {}),
      ...(c.insecureSkipTLSVerify ? { rejectUnauthorized: false } : {}),
      ...(c.tlsServerName !== undefined ? { servername: c.tlsServerName } : {}),
    };
    // Keep-alive probes after 30 s like client-go, under cloud load balancers' 60 s idle cut.
    const connect = { ...tls, keepAlive: true, keepAliveInitialDelay: 30_000 };
    let dispatcher: Dispatcher | undefined;
    if (c.proxyURL !== undefined) dispatcher = new ProxyAgent({ uri: c.proxyURL, requestTls: tls });
    else if (Object.keys(tls).length > 0) dispatcher = new Agent({ connect });
    // Requests still running on the old pool finish; it closes after them.
    void p?.dispatcher?.close().catch(() => undefined);
    this.#pool = { key, dispatcher };
    return dispatcher;
  }

  /** The cached credential while it has not expired, else the plugin's new one. */
  async #execCredential(exec: ExecConfig): Promise<ExecStatus> {
    const cached = this.#exec?.status;
    if (cached !== undefined && (cached.expiresAt === undefined || cached.expiresAt > this.#now()))
      return cached;
    this.#execRunning ??= runExecPlugin(exec, this.#user.name, this.#cluster).finally(() => {
      this.#execRunning = undefined;
    });
    const status = await this.#execRunning;
    this.#exec = { status };
    return status;
  }
}

/**
 * Runs a credential plugin and parses its ExecCredential. Bounded by {@link EXEC_TIMEOUT_MS}
 * and {@link EXEC_MAX_OUTPUT}. Errors name the user and the command, never the plugin's stderr
 * or stdout (either may hold credentials).
 */
function runExecPlugin(exec: ExecConfig, userName: string, cluster: ClusterEntry): Promise<ExecStatus> {
  const what = `credential plugin ${JSON.stringify(exec.command)} of user ${userName}`;
  if (exec.interactiveMode === 'Always')
    return Promise.reject(
      new Error(`${what}: interactiveMode Always needs a terminal; a controller has none`),
    );
  const spec: Obj = { interactive: false };
  if (exec.provideClusterInfo) {
    spec.cluster = {
      server: cluster.server,
      ...(cluster.tlsServerName !== undefined ? { 'tls-server-name': cluster.tlsServerName } : {}),
      ...(cluster.insecureSkipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
      ...(cluster.caData !== undefined
        ? { 'certificate-authority-data': cluster.caData.toString('base64') }
        : cluster.caFile !== undefined && existsSync(cluster.caFile)
          ? { 'certificate-authority-data': readFileSync(cluster.caFile).toString('base64') }
          : {}),
      ...(cluster.proxyURL !== undefined ? { 'proxy-url': cluster.proxyURL } : {}),
    };
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    KUBERNETES_EXEC_INFO: JSON.stringify({ apiVersion: exec.apiVersion, kind: 'ExecCredential', spec }),
  };
  for (const e of exec.env) env[e.name] = e.value;
  return new Promise<ExecStatus>((resolvePromise, reject) => {
    const child = spawn(exec.command, exec.args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let size = 0;
    let failure: string | undefined;
    const timer = setTimeout(() => {
      failure = `did not finish within ${EXEC_TIMEOUT_MS / 1000} s`;
      child.kill('SIGKILL');
    }, EXEC_TIMEOUT_MS);
    child.stdout.on('data', (b: Buffer) => {
      size += b.length;
      if (size > EXEC_MAX_OUTPUT) {
        failure ??= `wrote more than ${EXEC_MAX_OUTPUT} bytes to stdout`;
        child.kill('SIGKILL');
        return;
      }
      chunks.push(b);
    });
    // Drained and dropped: a plugin may print credentials on stderr.
    child.stderr.resume();
    child.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const hint =
        err.code === 'ENOENT' && exec.installHint !== undefined ? ` (${exec.installHint.trim()})` : '';
      reject(new Error(`${what} could not be started: ${err.code ?? err.message}${hint}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (failure !== undefined) {
        reject(new Error(`${what} ${failure}`));
        return;
      }
      if (code !== 0) {
        reject(
          new Error(
            `${what} failed (${code !== null ? `exit code ${code}` : `signal ${signal ?? '?'}`}); its stderr is not shown because it may hold credentials — run the command by hand to see it`,
          ),
        );
        return;
      }
      try {
        resolvePromise(parseExecCredential(Buffer.concat(chunks).toString('utf8'), exec.apiVersion));
      } catch (err) {
        reject(new Error(`${what}: ${(err as Error).message}`));
      }
    });
  });
}

/** The `status` of a plugin's ExecCredential output. @throws Error saying what is wrong (never the content). */
function parseExecCredential(text: string, apiVersion: string): ExecStatus {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error('output is not a JSON ExecCredential');
  }
  if (!isObj(doc) || doc.kind !== 'ExecCredential')
    throw new Error('output is not an ExecCredential (kind ExecCredential expected)');
  if (doc.apiVersion !== apiVersion)
    throw new Error(
      `output has apiVersion ${JSON.stringify(doc.apiVersion)}; the kubeconfig asked for ${apiVersion}`,
    );
  const st = doc.status;
  if (!isObj(st)) throw new Error('output has no status');
  const token = typeof st.token === 'string' && st.token !== '' ? st.token : undefined;
  const certPem = typeof st.clientCertificateData === 'string' ? st.clientCertificateData : '';
  const keyPem = typeof st.clientKeyData === 'string' ? st.clientKeyData : '';
  if ((certPem === '') !== (keyPem === ''))
    throw new Error('output has only one of status.clientCertificateData and status.clientKeyData');
  if (token === undefined && certPem === '')
    throw new Error('output has neither status.token nor status.clientCertificateData/clientKeyData');
  let expiresAt: number | undefined;
  if (typeof st.expirationTimestamp === 'string' && st.expirationTimestamp !== '') {
    expiresAt = Date.parse(st.expirationTimestamp);
    if (Number.isNaN(expiresAt)) throw new Error('status.expirationTimestamp is not an RFC 3339 time');
  }
  return {
    token,
    cert: certPem !== '' ? Buffer.from(certPem) : undefined,
    key: keyPem !== '' ? Buffer.from(keyPem) : undefined,
    expiresAt,
  };
}

/** The connection of `parsed`'s current context; null when it names no existing context and cluster. */
function fromParsed(parsed: ParsedFile, now: () => number): KubeConfig | null {
  const ctx = parsed.contexts.find((c) => c.name === parsed.currentContext);
  if (ctx === undefined) return null;
  const cluster = parsed.clusters.find((c) => c.name === ctx.cluster);
  if (cluster === undefined) return null;
  // A context without a user (or naming a missing one) sends no credentials, as in kubectl.
  const user = parsed.users.find((u) => u.name === ctx.user) ?? emptyUser(ctx.user);
  if (user.invalid !== undefined) throw new Error(user.invalid);
  return new LoadedKubeConfig(cluster, user, now);
}

function emptyUser(name: string): UserEntry {
  return {
    name,
    token: undefined,
    tokenFile: undefined,
    certFile: undefined,
    certData: undefined,
    keyFile: undefined,
    keyData: undefined,
    username: undefined,
    password: undefined,
    impersonate: undefined,
    impersonateUID: undefined,
    exec: undefined,
    invalid: undefined,
  };
}

/**
 * Loads one kubeconfig file (`--kubeconfig`).
 * @returns null when its current context names no cluster.
 * @throws Error for unreadable files, YAML errors and unsupported settings of the current
 *   context's cluster or user (the caller names the file).
 */
export function loadKubeConfigFile(file: string, opts: LoaderOptions = {}): KubeConfig | null {
  return fromParsed(readKubeconfigFile(file), opts.now ?? Date.now);
}

/**
 * Loads `KUBECONFIG` (a list of files, merged as kubectl does) or, when unset or empty,
 * `~/.kube/config`.
 * @returns null when no file exists or the merged current context names no cluster.
 * @throws Error naming the file for unreadable files, YAML errors and unsupported settings.
 */
export function loadDefaultKubeConfig(
  opts: LoaderOptions & { env?: NodeJS.ProcessEnv; home?: string } = {},
): KubeConfig | null {
  const env = opts.env ?? process.env;
  const list = (env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  const files = list.length > 0 ? list : [join(opts.home ?? homedir(), '.kube', 'config')];
  const parsed = files
    .filter((f) => existsSync(f))
    .map((f) => {
      try {
        return readKubeconfigFile(f);
      } catch (err) {
        throw new Error(`${f}: ${(err as Error).message}`, { cause: err });
      }
    });
  if (parsed.length === 0) return null;
  return fromParsed(merge(parsed), opts.now ?? Date.now);
}

/**
 * The in-cluster connection (client-go's `InClusterConfig`): server
 * `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the service-account token at
 * `<prefix>/var/run/secrets/kubernetes.io/serviceaccount/token` (read again every
 * {@link FILE_REFRESH_MS}: bound tokens rotate) and the `ca.crt` beside it (system roots when
 * it is absent, as client-go).
 * @returns null when `KUBERNETES_SERVICE_HOST` or `KUBERNETES_SERVICE_PORT` is unset.
 */
export function loadInCluster(
  opts: LoaderOptions & { prefix?: string; env?: NodeJS.ProcessEnv } = {},
): KubeConfig | null {
  const env = opts.env ?? process.env;
  const host = env.KUBERNETES_SERVICE_HOST ?? '';
  const port = env.KUBERNETES_SERVICE_PORT ?? '';
  if (host === '' || port === '') return null;
  const dir = `${opts.prefix ?? ''}${SERVICE_ACCOUNT_DIR}`;
  const caFile = `${dir}/ca.crt`;
  const cluster: ClusterEntry = {
    name: 'inCluster',
    server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    caFile: existsSync(caFile) && statSync(caFile).isFile() ? caFile : undefined,
    caData: undefined,
    insecureSkipTLSVerify: false,
    tlsServerName: undefined,
    proxyURL: undefined,
  };
  return new LoadedKubeConfig(
    cluster,
    { ...emptyUser('inClusterUser'), tokenFile: `${dir}/token` },
    opts.now ?? Date.now,
  );
}

/** Whether `kc` was made by this module (it keeps its own connection pool per TLS material). */
export function isLoadedKubeConfig(kc: KubeConfig): boolean {
  return kc instanceof LoadedKubeConfig;
}
