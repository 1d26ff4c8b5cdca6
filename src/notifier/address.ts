/**
 * Forge addresses (design §2): a git Provider's `address` is either a REPOSITORY URL (every event
 * goes there) or a SCOPE — a host, owner, group or project URL — under which each Stack's own
 * repository (`spec.projectRepo`, or the Flux GitRepository URL) must sit.
 *
 * Accepted spellings, for the Provider address and for Stack repositories alike:
 * `https://host[:port]/path`, `http://…` (self-hosted), `ssh://[user@]host[:port]/path`,
 * scp-like `[user@]host:path`, and `host/path` (taken as https). Userinfo, query and fragment are
 * ignored, hosts compare case-insensitively and without port (an ssh clone URL and an https
 * Provider address name the same server), a trailing `/` and `.git` are dropped, path segments
 * are percent-decoded and compare case-insensitively (the Stack's spelling is kept).
 *
 * Per forge (`apiURL`, when set, is always the API base and wins over the guess):
 * - github: `https://github.com/OWNER[/REPO]` → API `https://api.github.com`; `*.ghe.com`
 *   (GitHub Enterprise Cloud with data residency) → `https://api.HOST`; any other host is GitHub
 *   Enterprise Server → `https://HOST/api/v3` (case F02). id `OWNER/REPO`.
 * - gitea: `https://HOST/OWNER[/REPO]` → `https://HOST/api/v1`. Under a sub-path, set `apiURL`
 *   (`https://HOST/sub/api/v1`): the sub-path is then stripped from addresses. id `OWNER/REPO`.
 * - gitlab: `https://HOST/GROUP/SUB…/PROJECT` → `https://HOST/api/v4`, id = URL-encoded full
 *   path (`platform%2Finfra%2Fstacks%2Fapp`, case F01). Browse suffixes (`/-/tree/main`) are
 *   dropped. Under a relative root, set `apiURL` (`https://HOST/gitlab/api/v4`): the root is then
 *   stripped from addresses. A path of two or more segments may be a project or a subgroup: it is
 *   the repository unless the Stack's repository lies strictly below it, in which case it acts as
 *   a scope. `https://HOST/groups/GROUP…` is always a scope; `https://HOST/projects/ID` (GitLab's
 *   own redirect URL) names a project by numeric id (`path` is `[ID]`, `id` is `ID`). A single
 *   segment is a top-level group or user namespace (scope).
 * - bitbucket (Cloud): `https://bitbucket.org/WORKSPACE[/REPO]` → `https://api.bitbucket.org/2.0`.
 *   id `WORKSPACE/REPO`.
 * - bitbucketserver (Data Center): clone URLs `https://HOST[/context]/scm/PROJ/repo.git`,
 *   `ssh://git@HOST:7999/proj/repo.git`, browse URLs
 *   `https://HOST[/context]/projects/PROJ[/repos/repo]` and personal `…/users/NAME/repos/repo`
 *   (project key `~NAME`) → `https://HOST[/context]/rest`. A URL without those markers is a host
 *   scope whose path is the context. Project keys are upper-cased (user keys lower-cased). id
 *   `PROJ/repo`; `path` is `[projectKey, repoSlug]`.
 * - azuredevops: `https://dev.azure.com/ORG/PROJECT/_git/REPO`, `https://ORG.visualstudio.com/
 *   [DefaultCollection/]PROJECT/_git/REPO`, `git@ssh.dev.azure.com:v3/ORG/PROJECT/REPO`,
 *   `ORG@vs-ssh.visualstudio.com:v3/ORG/PROJECT/REPO`, `…/ORG/_git/REPO` (project named like the
 *   repository); scopes `https://dev.azure.com/ORG[/PROJECT]` → API
 *   `https://dev.azure.com/ORG/PROJECT/_apis`. Azure DevOps Server: `https://HOST/COLLECTION…/
 *   PROJECT/_git/REPO` (scope: the collection URL). `apiURL` here is the organization/collection
 *   URL (`https://HOST/tfs/Coll`; the project and `/_apis` are appended) or, ending in `/_apis`,
 *   the full base. id `ORG/PROJECT/REPO`; `path` is `[org, project, repo]` (on Server, `org` is the
 *   collection path, e.g. `tfs/DefaultCollection`).
 *
 * Messages quote addresses without userinfo, query or fragment (they may carry credentials).
 * Nothing here does I/O.
 */
import type { GitProviderType } from '../api/v1alpha1.ts';

/** A resolved forge repository: where its API lives and how the forge names it. */
export interface ForgeRepo {
  type: GitProviderType;
  /** Web host, lower-case, with `:port` when not the scheme's default (ssh addresses: host only). */
  host: string;
  /** API base without trailing slash, e.g. `https://api.github.com`, `https://h/api/v4`. */
  apiBase: string;
  /** Web root without trailing slash, e.g. `https://github.com`, `https://h/gitlab`. */
  webBase: string;
  /** Owner/group…/repo segments; bitbucketserver `[projectKey, repoSlug]`; azuredevops `[org, project, repo]`. */
  path: string[];
  /**
   * The forge's id for the repository in API paths: GitHub/Gitea `owner/repo`; GitLab the
   * URL-encoded full path (`a%2Fb%2Fc`) or numeric id; Bitbucket `workspace/repo`; Bitbucket
   * Data Center `PROJ/repo`; Azure DevOps `org/project/repo`.
   */
  id: string;
}

/** What a Provider address designates. */
export interface ForgeScope {
  host: string;
  apiBase: string;
  webBase: string;
  /** The repository path (`isRepository`) or the owner/group/project prefix repositories must start with. */
  prefix: string[];
  isRepository: boolean;
  /**
   * GitLab only: the address is taken as a repository but may name a subgroup (two or more
   * segments, no `.git`); a Stack repository strictly below it makes it a scope.
   */
  ambiguous: boolean;
}

export type ParseAddressResult = { ok: true; scope: ForgeScope } | { ok: false; message: string };

export type ResolveRepositoryResult =
  | { ok: true; repo: ForgeRepo }
  | { ok: false; reason: 'NoRepository' | 'OutsideAddress' | 'InvalidAddress'; message: string };

// ---------------------------------------------------------------------------------------------
// Generic URL parsing

interface RawAddress {
  /** `ssh` for ssh://, git://, scp-like forms. */
  scheme: 'http' | 'https' | 'ssh';
  /** Lower-case host name without port (IPv6 in brackets). */
  hostname: string;
  /** Non-default port, or ''. */
  port: string;
  /** Decoded, non-empty path segments, `.git` removed from the last one. */
  segments: string[];
  gitSuffix: boolean;
  /** Safe to show: no userinfo, query or fragment. */
  display: string;
}

const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;
/** scp-like `[user@]host:path` (host without `/`, path not starting with `//`). */
const SCP = /^(?:[^@/\s]+@)?([^:/\s]+):(?!\/\/)(.*)$/;

/** `u` without userinfo, query and fragment. */
function displayURL(u: URL): string {
  const host = u.port ? `${u.hostname}:${u.port}` : u.hostname;
  return `${u.protocol}//${host.toLowerCase()}${u.pathname === '/' ? '' : u.pathname}`;
}

function splitPath(path: string): string[] | string {
  const out: string[] = [];
  for (const s of path.split('/')) {
    if (s === '') continue;
    try {
      out.push(decodeURIComponent(s));
    } catch {
      return `path segment '${s}' is not valid percent-encoding`;
    }
  }
  return out;
}

function parseRaw(input: string): RawAddress | string {
  const text = input.trim();
  if (text === '') return 'it is empty';
  const scheme = SCHEME.exec(text)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    let u: URL;
    try {
      u = new URL(text);
    } catch {
      return 'it is not a valid URL';
    }
    let kind: RawAddress['scheme'];
    if (scheme === 'https' || scheme === 'http') kind = scheme;
    else if (['ssh', 'git', 'git+ssh', 'ssh+git'].includes(scheme)) kind = 'ssh';
    else return `scheme '${scheme}' is not supported (use https://, http://, ssh:// or user@host:path)`;
    const hostname = u.hostname.toLowerCase();
    if (hostname === '') return 'it has no host';
    const defaultPort = kind === 'https' ? '443' : kind === 'http' ? '80' : '22';
    const port = u.port === defaultPort ? '' : u.port;
    return finish(kind, hostname, port, u.pathname, displayURL(u));
  }
  // `user:token@host/path` without a scheme is an https URL with credentials, not scp-like
  // `user@host:path`: read it as https (userinfo is then dropped from every message).
  if (/^[^@/\s:]+:[^@/\s]*@[^/\s:]+(:\d+)?\/\S/.test(text)) return parseRaw(`https://${text}`);
  const scp = SCP.exec(text);
  if (scp) {
    const [, host = '', path = ''] = scp;
    const h = host.toLowerCase();
    return finish('ssh', h, '', path, `${h}:${path.split(/[?#]/)[0] ?? ''}`);
  }
  if (/^[^/\s]+\.[^/\s]+\/\S/.test(text)) return parseRaw(`https://${text}`);
  return 'it is neither a URL (https://…, ssh://…) nor an scp-like address (user@host:path)';
}

function finish(
  scheme: RawAddress['scheme'],
  hostname: string,
  port: string,
  rawPath: string,
  display: string,
): RawAddress | string {
  const path = rawPath.split(/[?#]/)[0] ?? '';
  const segments = splitPath(path);
  if (typeof segments === 'string') return segments;
  let gitSuffix = false;
  const last = segments.at(-1);
  if (last !== undefined && /\.git$/i.test(last)) {
    gitSuffix = true;
    const stem = last.slice(0, -4);
    if (stem === '') segments.pop();
    else segments[segments.length - 1] = stem;
  }
  return { scheme, hostname, port, segments, gitSuffix, display };
}

/** Web origin of a raw address: its own for http(s); `https://host` for ssh forms. */
function webOrigin(raw: RawAddress): string {
  if (raw.scheme === 'ssh') return `https://${raw.hostname}`;
  return `${raw.scheme}://${raw.hostname}${raw.port ? `:${raw.port}` : ''}`;
}

function webHost(raw: RawAddress): string {
  return raw.scheme === 'ssh' || raw.port === '' ? raw.hostname : `${raw.hostname}:${raw.port}`;
}

const eqi = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

function startsWithI(segments: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= segments.length && prefix.every((p, i) => eqi(p, segments[i] ?? ''));
}

/** Host identity used for the "same forge" check (aliases of the big SaaS forges folded). */
function canonicalHost(type: GitProviderType, hostname: string): string {
  const h = hostname.toLowerCase();
  switch (type) {
    case 'github':
      return h === 'www.github.com' || h === 'ssh.github.com' ? 'github.com' : h;
    case 'gitlab':
      return h === 'www.gitlab.com' || h === 'altssh.gitlab.com' ? 'gitlab.com' : h;
    case 'bitbucket':
      return h === 'www.bitbucket.org' || h === 'altssh.bitbucket.org' ? 'bitbucket.org' : h;
    case 'azuredevops':
      return h === 'ssh.dev.azure.com' || h.endsWith('.visualstudio.com') ? 'dev.azure.com' : h;
    default:
      return h;
  }
}

// ---------------------------------------------------------------------------------------------
// apiURL

interface ApiOverride {
  /** apiURL without trailing slash. */
  base: string;
  /** Path segments of the web root implied by apiURL (e.g. `['gitlab']` for `/gitlab/api/v4`). */
  root: string[];
}

/** Path suffix of the API base below the web root, per forge. */
const API_SUFFIX: Partial<Record<GitProviderType, string[]>> = {
  github: ['api', 'v3'],
  gitlab: ['api', 'v4'],
  gitea: ['api', 'v1'],
  bitbucketserver: ['rest'],
};

function parseApiURL(type: GitProviderType, apiURL: string | undefined): ApiOverride | undefined | string {
  if (apiURL === undefined || apiURL.trim() === '') return undefined;
  let u: URL;
  try {
    u = new URL(apiURL.trim());
  } catch {
    return 'apiURL is not a valid URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:')
    return `apiURL '${displayURL(u)}' must be an http(s) URL`;
  const segments = splitPath(u.pathname);
  if (typeof segments === 'string') return `apiURL '${displayURL(u)}': ${segments}`;
  let base = displayURL(u).replace(/\/+$/, '');
  let root: string[] = [];
  const suffix = API_SUFFIX[type];
  if (type === 'bitbucketserver') {
    // Accept `…/rest`, `…/rest/api/1.0`, `…/rest/api/latest`: the base is everything up to `rest`.
    const i = segments.findIndex((s) => s === 'rest');
    if (i >= 0) {
      root = segments.slice(0, i);
      base = `${u.protocol}//${u.host.toLowerCase()}${root.map((s) => `/${encodeURIComponent(s)}`).join('')}/rest`;
    }
  } else if (suffix && segments.length >= suffix.length) {
    const tail = segments.slice(segments.length - suffix.length);
    if (tail.every((s, i) => eqi(s, suffix[i] ?? '')))
      root = segments.slice(0, segments.length - suffix.length);
  }
  return { base, root };
}

// ---------------------------------------------------------------------------------------------
// Per-forge interpretation

/** A forge-level reading of an address: a repository or a scope prefix, plus where its web root is. */
type Reading =
  | {
      kind: 'repo';
      path: string[];
      /** Forge id override (GitLab numeric ids). */
      id?: string;
      /** Path segments of the web root (sub-path / context path). */
      root: string[];
      ambiguous: boolean;
    }
  | { kind: 'scope'; prefix: string[]; root: string[] }
  | { kind: 'error'; message: string };

/** Removes the web root (from apiURL) when the path starts with it; returns the rest and the root actually removed. */
function stripRoot(segments: string[], root: string[]): { rest: string[]; root: string[] } {
  return root.length > 0 && startsWithI(segments, root)
    ? { rest: segments.slice(root.length), root: segments.slice(0, root.length) }
    : { rest: segments, root: [] };
}

function ownerRepo(type: GitProviderType, raw: RawAddress, apiRoot: string[]): Reading {
  const { rest: s, root } = stripRoot(raw.segments, apiRoot);
  if (s.length === 2) return { kind: 'repo', path: s, root, ambiguous: false };
  if (s.length < 2) return { kind: 'scope', prefix: s, root };
  const hint =
    type === 'gitea'
      ? ' (if Gitea is served under a sub-path, set apiURL, e.g. https://HOST/SUBPATH/api/v1)'
      : type === 'github'
        ? ' (use the repository URL https://HOST/OWNER/REPO, not a page inside it)'
        : '';
  return { kind: 'error', message: `expected https://HOST/OWNER or https://HOST/OWNER/REPO${hint}` };
}

function gitlab(raw: RawAddress, apiRoot: string[]): Reading {
  const { rest, root } = stripRoot(raw.segments, apiRoot);
  let s = rest;
  const dash = s.indexOf('-');
  if (dash >= 0) s = s.slice(0, dash);
  if (s[0] === 'groups') return { kind: 'scope', prefix: s.slice(1), root };
  if (s[0] === 'projects' && s.length === 2 && /^\d+$/.test(s[1] ?? '')) {
    const id = s[1] ?? '';
    return { kind: 'repo', path: [id], id, root, ambiguous: false };
  }
  if (s.length >= 2) return { kind: 'repo', path: s, root, ambiguous: !raw.gitSuffix };
  return { kind: 'scope', prefix: s, root };
}

function projectKey(key: string): string {
  return key.startsWith('~') ? key.toLowerCase() : key.toUpperCase();
}

function bitbucketServer(raw: RawAddress): Reading {
  const s = raw.segments;
  if (raw.scheme === 'ssh') {
    // ssh://git@host:7999/PROJ/repo.git (no context path over ssh)
    const [key, slug] = s;
    if (s.length === 2 && key !== undefined && slug !== undefined) {
      return { kind: 'repo', path: [projectKey(key), slug], root: [], ambiguous: false };
    }
    if (s.length === 1 && key !== undefined) return { kind: 'scope', prefix: [projectKey(key)], root: [] };
    return { kind: 'error', message: 'expected ssh://git@HOST:PORT/PROJECT/REPO.git' };
  }
  const markerAt = s.findIndex((x) => x === 'scm' || x === 'projects' || x === 'users');
  if (markerAt < 0) return { kind: 'scope', prefix: [], root: s };
  const root = s.slice(0, markerAt);
  const marker = s[markerAt];
  const rest = s.slice(markerAt + 1);
  const bad: Reading = {
    kind: 'error',
    message:
      'expected https://HOST[/CONTEXT]/scm/PROJECT/REPO.git, https://HOST[/CONTEXT]/projects/PROJECT[/repos/REPO] or https://HOST[/CONTEXT]/users/USER[/repos/REPO]',
  };
  if (marker === 'scm') {
    const [key, slug] = rest;
    if (rest.length === 2 && key !== undefined && slug !== undefined) {
      return { kind: 'repo', path: [projectKey(key), slug], root, ambiguous: false };
    }
    if (rest.length === 1 && key !== undefined) return { kind: 'scope', prefix: [projectKey(key)], root };
    return bad;
  }
  const owner = rest[0];
  if (owner === undefined) return bad;
  const key = marker === 'users' ? projectKey(`~${owner}`) : projectKey(owner);
  if (rest.length === 1 || (rest.length === 2 && rest[1] === 'repos'))
    return { kind: 'scope', prefix: [key], root };
  if (rest[1] === 'repos' && rest[2] !== undefined) {
    return { kind: 'repo', path: [key, rest[2]], root, ambiguous: false };
  }
  return bad;
}

function azure(raw: RawAddress): Reading {
  const h = raw.hostname;
  const bad = (): Reading => ({
    kind: 'error',
    message:
      'expected https://dev.azure.com/ORG/PROJECT/_git/REPO, git@ssh.dev.azure.com:v3/ORG/PROJECT/REPO or https://dev.azure.com/ORG[/PROJECT]',
  });
  let s = raw.segments;
  if (raw.scheme === 'ssh' && (h === 'ssh.dev.azure.com' || h.endsWith('.visualstudio.com'))) {
    if (s[0] !== 'v3' || s.length !== 4) return bad();
    return { kind: 'repo', path: s.slice(1), root: [], ambiguous: false };
  }
  const cloud = h === 'dev.azure.com' || h.endsWith('.visualstudio.com');
  if (h.endsWith('.visualstudio.com')) {
    const org = h.slice(0, -'.visualstudio.com'.length);
    if (s[0] !== undefined && eqi(s[0], 'DefaultCollection')) s = s.slice(1);
    s = [org, ...s];
  }
  const git = s.indexOf('_git');
  if (cloud) {
    const [org, project] = s;
    if (git < 0) {
      if (s.length <= 2) return { kind: 'scope', prefix: s, root: [] };
      return bad();
    }
    const repo = s[git + 1];
    if (org === undefined || repo === undefined || git > 2 || git === 0) return bad();
    return {
      kind: 'repo',
      path: [org, git === 1 ? repo : (project ?? repo), repo],
      root: [],
      ambiguous: false,
    };
  }
  // Azure DevOps Server: COLLECTION…/PROJECT/_git/REPO
  if (git < 0)
    return s.length === 0
      ? { kind: 'scope', prefix: [], root: [] }
      : { kind: 'scope', prefix: [s.join('/')], root: [] };
  const repo = s[git + 1];
  if (repo === undefined || git === 0) return bad();
  const project = git >= 2 ? (s[git - 1] ?? repo) : repo;
  const collection = s.slice(0, git >= 2 ? git - 1 : git).join('/');
  return { kind: 'repo', path: [collection, project, repo], root: [], ambiguous: false };
}

function read(type: GitProviderType, raw: RawAddress, api: ApiOverride | undefined): Reading {
  const root = api?.root ?? [];
  switch (type) {
    case 'github':
    case 'gitea':
    case 'bitbucket':
      return ownerRepo(type, raw, root);
    case 'gitlab':
      return gitlab(raw, root);
    case 'bitbucketserver':
      return bitbucketServer(raw);
    case 'azuredevops':
      return azure(raw);
  }
}

// ---------------------------------------------------------------------------------------------
// Bases and ids

function enc(s: string): string {
  return encodeURIComponent(s);
}

function rootPath(root: readonly string[]): string {
  return root.map((s) => `/${enc(s)}`).join('');
}

function apiBaseFor(
  type: GitProviderType,
  raw: RawAddress,
  root: readonly string[],
  api: ApiOverride | undefined,
  path: readonly string[],
): string {
  const origin = webOrigin(raw);
  switch (type) {
    case 'github': {
      if (api) return api.base;
      const h = raw.hostname;
      if (canonicalHost('github', h) === 'github.com') return 'https://api.github.com';
      if (h.endsWith('.ghe.com')) return `https://api.${h}`;
      return `${origin}${rootPath(root)}/api/v3`;
    }
    case 'gitea':
      return api ? api.base : `${origin}${rootPath(root)}/api/v1`;
    case 'gitlab':
      return api ? api.base : `${origin}${rootPath(root)}/api/v4`;
    case 'bitbucket':
      return api ? api.base : 'https://api.bitbucket.org/2.0';
    case 'bitbucketserver':
      return api ? api.base : `${origin}${rootPath(root)}/rest`;
    case 'azuredevops': {
      const [org, project] = path;
      if (api) {
        if (/\/_apis$/i.test(api.base)) return api.base;
        return project === undefined ? `${api.base}/_apis` : `${api.base}/${enc(project)}/_apis`;
      }
      const azOrigin =
        canonicalHost('azuredevops', raw.hostname) === 'dev.azure.com' ? 'https://dev.azure.com' : origin;
      if (org === undefined) return `${azOrigin}/_apis`;
      const orgPath = org.split('/').map(enc).join('/');
      return project === undefined
        ? `${azOrigin}/${orgPath}/_apis`
        : `${azOrigin}/${orgPath}/${enc(project)}/_apis`;
    }
  }
}

function webBaseFor(type: GitProviderType, raw: RawAddress, root: readonly string[]): string {
  if (type === 'github' && canonicalHost('github', raw.hostname) === 'github.com')
    return 'https://github.com';
  if (type === 'bitbucket' && canonicalHost('bitbucket', raw.hostname) === 'bitbucket.org')
    return 'https://bitbucket.org';
  if (type === 'azuredevops' && canonicalHost('azuredevops', raw.hostname) === 'dev.azure.com')
    return 'https://dev.azure.com';
  return `${webOrigin(raw)}${rootPath(root)}`;
}

function hostFor(type: GitProviderType, raw: RawAddress): string {
  const c = canonicalHost(type, raw.hostname);
  return c !== raw.hostname ? c : webHost(raw);
}

function idFor(type: GitProviderType, path: readonly string[], override: string | undefined): string {
  if (override !== undefined) return override;
  return type === 'gitlab' ? enc(path.join('/')) : path.join('/');
}

// ---------------------------------------------------------------------------------------------
// Public API

interface Parsed {
  raw: RawAddress;
  api: ApiOverride | undefined;
  reading: Exclude<Reading, { kind: 'error' }>;
  scope: ForgeScope;
}

function parse(type: GitProviderType, address: string, apiURL: string | undefined): Parsed | string {
  const raw = parseRaw(address);
  if (typeof raw === 'string') return `${type} Provider address is invalid: ${raw}`;
  const api = parseApiURL(type, apiURL);
  if (typeof api === 'string') return `${type} Provider ${api}`;
  const reading = read(type, raw, api);
  if (reading.kind === 'error')
    return `${type} Provider address '${raw.display}' is not understood: ${reading.message}`;
  const path = reading.kind === 'repo' ? reading.path : reading.prefix;
  const scope: ForgeScope = {
    host: hostFor(type, raw),
    apiBase: apiBaseFor(type, raw, reading.root, api, path),
    webBase: webBaseFor(type, raw, reading.root),
    prefix: [...path],
    isRepository: reading.kind === 'repo',
    ambiguous: reading.kind === 'repo' && reading.ambiguous,
  };
  return { raw, api, reading, scope };
}

/**
 * Parses a git Provider's `address` (and optional `apiURL`) into what it designates: a
 * repository (`isRepository`, `prefix` = its path) or a scope (`prefix` = owner/group/project
 * segments, possibly empty for a whole host). See the module comment for every accepted form.
 * Never throws; `message` names the address without credentials.
 */
export function parseForgeAddress(
  type: GitProviderType,
  address: string,
  apiURL?: string,
): ParseAddressResult {
  const p = parse(type, address, apiURL);
  return typeof p === 'string' ? { ok: false, message: p } : { ok: true, scope: p.scope };
}

function repoOf(type: GitProviderType, p: Parsed, path: string[], idOverride: string | undefined): ForgeRepo {
  return {
    type,
    host: p.scope.host,
    apiBase: apiBaseFor(type, p.raw, p.reading.root, p.api, path),
    webBase: p.scope.webBase,
    path,
    id: idFor(type, path, idOverride),
  };
}

/**
 * The repository an event goes to.
 *
 * - Address is a repository: that repository, whatever the Stack's (`stackRepository` ignored),
 *   except for an ambiguous GitLab address (see module comment) with the Stack's repository
 *   strictly below it.
 * - Address is a scope: the Stack's repository, which must be on the same forge host (ports and
 *   ssh/https spelling ignored) and under the scope's prefix (segments compared
 *   case-insensitively; the Stack's spelling is kept). The API and web bases are the Provider's.
 *
 * Failures: `InvalidAddress` (the Provider address or apiURL cannot be read), `NoRepository` (a
 * scope address and the Stack has no repository, or one that is not a repository URL of this
 * forge), `OutsideAddress` (the Stack's repository is on another host or outside the prefix; the
 * message names both, without credentials). Never throws.
 */
export function resolveRepository(
  type: GitProviderType,
  address: string,
  apiURL: string | undefined,
  stackRepository: string | undefined,
): ResolveRepositoryResult {
  const p = parse(type, address, apiURL);
  if (typeof p === 'string') return { ok: false, reason: 'InvalidAddress', message: p };
  const { reading, scope } = p;

  const addressRepo: ResolveRepositoryResult | undefined =
    reading.kind === 'repo' ? { ok: true, repo: repoOf(type, p, [...reading.path], reading.id) } : undefined;
  if (addressRepo && !scope.ambiguous) return addressRepo;

  const stackText = stackRepository?.trim() ?? '';
  if (stackText === '') {
    if (addressRepo) return addressRepo;
    return {
      ok: false,
      reason: 'NoRepository',
      message: `${type} Provider address '${p.raw.display}' names an owner/group, not a repository, and the Stack has no repository URL (spec.projectRepo or a Flux GitRepository) to pick one under it`,
    };
  }

  const stackRaw = parseRaw(stackText);
  const stackReading = typeof stackRaw === 'string' ? undefined : read(type, stackRaw, p.api);
  if (typeof stackRaw === 'string' || stackReading === undefined || stackReading.kind !== 'repo') {
    if (addressRepo) return addressRepo;
    const why =
      typeof stackRaw === 'string'
        ? stackRaw
        : stackReading?.kind === 'error'
          ? stackReading.message
          : 'it names an owner/group, not a repository';
    const shown =
      typeof stackRaw === 'string' ? 'the Stack repository' : `Stack repository '${stackRaw.display}'`;
    return { ok: false, reason: 'NoRepository', message: `${shown} is not a ${type} repository URL: ${why}` };
  }

  const sameHost = canonicalHost(type, stackRaw.hostname) === canonicalHost(type, p.raw.hostname);
  const prefix = reading.kind === 'repo' ? reading.path : reading.prefix;
  const under = sameHost && startsWithI(stackReading.path, prefix);

  if (addressRepo) {
    // Ambiguous GitLab address: a group only if the Stack's project lies strictly below it.
    if (under && stackReading.path.length > prefix.length && stackReading.id === undefined) {
      return { ok: true, repo: repoOf(type, p, [...stackReading.path], undefined) };
    }
    return addressRepo;
  }
  if (!under) {
    const where = sameHost ? `outside '${p.raw.display}'` : `on another host than '${p.raw.display}'`;
    return {
      ok: false,
      reason: 'OutsideAddress',
      message: `Stack repository '${stackRaw.display}' is ${where}: the ${type} Provider address only covers repositories under it`,
    };
  }
  return { ok: true, repo: repoOf(type, p, [...stackReading.path], stackReading.id) };
}
