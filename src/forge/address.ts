/**
 * Forge addresses (docs/providers/README.md, "Addresses"): a git Provider's `address` is either a
 * REPOSITORY URL (every event goes there) or a SCOPE — a host, owner, group or project URL —
 * under which each Stack's own repository (`spec.projectRepo`, or the Flux GitRepository URL)
 * must sit.
 *
 * Accepted spellings, for the Provider address and for Stack repositories alike:
 * `https://host[:port]/path`, `http://…` (self-hosted), `ssh://[user@]host[:port]/path`,
 * scp-like `[user@]host:path`, and `host/path` (taken as https). Userinfo, query and fragment are
 * ignored, hosts compare case-insensitively and without port (an ssh clone URL and an https
 * Provider address name the same server), a trailing `/` and `.git` are dropped, path segments
 * are percent-decoded and compare case-insensitively (the Stack's spelling is kept). What each
 * forge accepts is in its own rules (src/forge/<name>/address.ts); `apiURL`, when set, is always
 * the API base and wins over the guess.
 *
 * Messages quote addresses without userinfo, query or fragment (they may carry credentials).
 * Nothing here does I/O.
 */
import type { GitProviderType } from '../api/v1alpha1.ts';
import { azuredevopsAddress } from './azuredevops/address.ts';
import { bitbucketAddress } from './bitbucket/address.ts';
import { bitbucketserverAddress } from './bitbucketserver/address.ts';
import { giteaAddress } from './gitea/address.ts';
import { githubAddress } from './github/address.ts';
import { gitlabAddress } from './gitlab/address.ts';
import {
  displayURL,
  parseRaw,
  splitPath,
  startsWithI,
  webHost,
  type AddressRules,
  type ApiOverride,
  type RawAddress,
  type Reading,
} from './url.ts';

/** Every forge's address rules (the forge table in ./registry.ts holds the same objects). */
const RULES: { [T in GitProviderType]: AddressRules<T> } = {
  github: githubAddress,
  gitlab: gitlabAddress,
  gitea: giteaAddress,
  bitbucket: bitbucketAddress,
  bitbucketserver: bitbucketserverAddress,
  azuredevops: azuredevopsAddress,
};

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

function parseApiURL(rules: AddressRules, apiURL: string | undefined): ApiOverride | undefined | string {
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
  return rules.apiOverride(u, segments);
}

function hostFor(rules: AddressRules, raw: RawAddress): string {
  const c = rules.canonicalHost(raw.hostname);
  return c !== raw.hostname ? c : webHost(raw);
}

interface Parsed {
  raw: RawAddress;
  api: ApiOverride | undefined;
  reading: Exclude<Reading, { kind: 'error' }>;
  scope: ForgeScope;
}

function parse(type: GitProviderType, address: string, apiURL: string | undefined): Parsed | string {
  const rules = RULES[type];
  const raw = parseRaw(address);
  if (typeof raw === 'string') return `${type} Provider address is invalid: ${raw}`;
  const api = parseApiURL(rules, apiURL);
  if (typeof api === 'string') return `${type} Provider ${api}`;
  const reading = rules.read(raw, api?.root ?? []);
  if (reading.kind === 'error')
    return `${type} Provider address '${raw.display}' is not understood: ${reading.message}`;
  const path = reading.kind === 'repo' ? reading.path : reading.prefix;
  const scope: ForgeScope = {
    host: hostFor(rules, raw),
    apiBase: rules.apiBase(raw, reading.root, api, path),
    webBase: rules.webBase(raw, reading.root),
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
    apiBase: RULES[type].apiBase(p.raw, p.reading.root, p.api, path),
    webBase: p.scope.webBase,
    path,
    id: RULES[type].id(path, idOverride),
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
  const stackReading =
    typeof stackRaw === 'string' ? undefined : RULES[type].read(stackRaw, p.api?.root ?? []);
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

  const sameHost = RULES[type].canonicalHost(stackRaw.hostname) === RULES[type].canonicalHost(p.raw.hostname);
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

/**
 * Whether two repository URLs name the same repository on a `type` forge — e.g. a webhook
 * delivery's `repository.clone_url` and a Stack's `spec.projectRepo`. Any accepted spelling
 * (https, http, ssh, scp-like); hosts compare by the forge's canonical host without port (an ssh
 * and an https URL of one server match); path segments are percent-decoded and compare
 * case-insensitively, a trailing `/` and `.git` ignored. The whole path is compared (a web root
 * such as Gitea's `/gitea` sub-path is on both sides). False when either cannot be read or has
 * no path. Never throws.
 */
export function sameRepository(type: GitProviderType, a: string, b: string): boolean {
  const ra = parseRaw(a);
  const rb = parseRaw(b);
  if (typeof ra === 'string' || typeof rb === 'string') return false;
  const rules = RULES[type];
  const host = (h: string): string => rules.canonicalHost(h);
  return (
    host(ra.hostname) === host(rb.hostname) &&
    ra.segments.length > 0 &&
    ra.segments.length === rb.segments.length &&
    startsWithI(ra.segments, rb.segments)
  );
}
