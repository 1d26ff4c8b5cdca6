/**
 * Reading forge addresses, the part every forge shares: URL and scp-like syntax, hosts, paths,
 * `apiURL` roots — and the `AddressRules` interface each forge implements in
 * src/forge/<name>/address.ts (which form is a repository, which a scope, where the API lives).
 * src/forge/address.ts puts them together. Nothing here does I/O.
 */
import type { GitProviderType } from '../api/v1alpha1.ts';

/** An address as written: scheme, host, port and decoded path segments. */
export interface RawAddress {
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
export function displayURL(u: URL): string {
  const host = u.port ? `${u.hostname}:${u.port}` : u.hostname;
  return `${u.protocol}//${host.toLowerCase()}${u.pathname === '/' ? '' : u.pathname}`;
}

export function splitPath(path: string): string[] | string {
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

export function parseRaw(input: string): RawAddress | string {
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
export function webOrigin(raw: RawAddress): string {
  if (raw.scheme === 'ssh') return `https://${raw.hostname}`;
  return `${raw.scheme}://${raw.hostname}${raw.port ? `:${raw.port}` : ''}`;
}

export function webHost(raw: RawAddress): string {
  return raw.scheme === 'ssh' || raw.port === '' ? raw.hostname : `${raw.hostname}:${raw.port}`;
}

export const eqi = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

export function startsWithI(segments: readonly string[], prefix: readonly string[]): boolean {
  return prefix.length <= segments.length && prefix.every((p, i) => eqi(p, segments[i] ?? ''));
}

/** An `apiURL` as the address rules use it. */
export interface ApiOverride {
  /** apiURL without trailing slash. */
  base: string;
  /** Path segments of the web root implied by apiURL (e.g. `['gitlab']` for `/gitlab/api/v4`). */
  root: string[];
}

/** A forge-level reading of an address: a repository or a scope prefix, plus where its web root is. */
export type Reading =
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

/** How one forge reads addresses (src/forge/<name>/address.ts). */
export interface AddressRules<T extends GitProviderType = GitProviderType> {
  readonly type: T;
  /** Host identity for the "same forge" check, aliases of the big SaaS forges folded (`www.github.com` → `github.com`). */
  canonicalHost(hostname: string): string;
  /**
   * The API base and web root an `apiURL` names (its path parsed: `segments`); usually the
   * forge's API suffix (`/api/v4`) is cut off to find the web root ({@link apiOverrideBySuffix}).
   */
  apiOverride(u: URL, segments: string[]): ApiOverride;
  /** A repository (`path`), a scope (`prefix`) or an error, for a Provider address or a Stack repository. */
  read(raw: RawAddress, apiRoot: string[]): Reading;
  /** The API base for repository `path` (or a scope's prefix) under web root `root`; `api` wins when set. */
  apiBase(
    raw: RawAddress,
    root: readonly string[],
    api: ApiOverride | undefined,
    path: readonly string[],
  ): string;
  /** The web root without trailing slash. */
  webBase(raw: RawAddress, root: readonly string[]): string;
  /** The forge's id of the repository in API paths (see `ForgeRepo.id`). */
  id(path: readonly string[], override: string | undefined): string;
}

/** `encodeURIComponent`. */
export function enc(s: string): string {
  return encodeURIComponent(s);
}

/** `/a/b` for root segments `['a', 'b']` (each encoded). */
export function rootPath(root: readonly string[]): string {
  return root.map((s) => `/${enc(s)}`).join('');
}

/** The web root of an address: its origin and root path. */
export function defaultWebBase(raw: RawAddress, root: readonly string[]): string {
  return `${webOrigin(raw)}${rootPath(root)}`;
}

/** `apiOverride` for forges whose API lives at a fixed suffix below the web root (GitHub `api/v3`, GitLab `api/v4`, Gitea `api/v1`). */
export function apiOverrideBySuffix(suffix: readonly string[]): AddressRules['apiOverride'] {
  return (u, segments) => {
    const base = displayURL(u).replace(/\/+$/, '');
    if (segments.length >= suffix.length) {
      const tail = segments.slice(segments.length - suffix.length);
      if (tail.every((s, i) => eqi(s, suffix[i] ?? '')))
        return { base, root: segments.slice(0, segments.length - suffix.length) };
    }
    return { base, root: [] };
  };
}

/** Removes the web root (from apiURL) when the path starts with it; returns the rest and the root actually removed. */
export function stripRoot(segments: string[], root: string[]): { rest: string[]; root: string[] } {
  return root.length > 0 && startsWithI(segments, root)
    ? { rest: segments.slice(root.length), root: segments.slice(0, root.length) }
    : { rest: segments, root: [] };
}

/** `OWNER/REPO` forges (GitHub, Gitea, Bitbucket Cloud): two segments a repository, fewer a scope. */
export function ownerRepo(raw: RawAddress, apiRoot: string[], hint = ''): Reading {
  const { rest: s, root } = stripRoot(raw.segments, apiRoot);
  if (s.length === 2) return { kind: 'repo', path: s, root, ambiguous: false };
  if (s.length < 2) return { kind: 'scope', prefix: s, root };
  return { kind: 'error', message: `expected https://HOST/OWNER or https://HOST/OWNER/REPO${hint}` };
}
