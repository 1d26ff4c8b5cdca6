/**
 * Bitbucket Data Center (Server) addresses: clone URLs `https://HOST[/context]/scm/PROJ/repo.git`,
 * `ssh://git@HOST:7999/proj/repo.git`, browse URLs `https://HOST[/context]/projects/PROJ[/repos/repo]`
 * and personal `…/users/NAME/repos/repo` (project key `~NAME`) → `https://HOST[/context]/rest`. A
 * URL without those markers is a host scope whose path is the context. Project keys are
 * upper-cased (user keys lower-cased). Id `PROJ/repo`; `path` is `[projectKey, repoSlug]`.
 */
import { defaultWebBase, displayURL, enc, type AddressRules, type RawAddress, type Reading } from '../url.ts';

function projectKey(key: string): string {
  return key.startsWith('~') ? key.toLowerCase() : key.toUpperCase();
}

function read(raw: RawAddress): Reading {
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

export const bitbucketserverAddress: AddressRules<'bitbucketserver'> = {
  type: 'bitbucketserver',
  canonicalHost: (h) => h.toLowerCase(),
  apiOverride(u, segments) {
    // Accept `…/rest`, `…/rest/api/1.0`, `…/rest/api/latest`: the base is everything up to `rest`.
    const i = segments.findIndex((s) => s === 'rest');
    if (i < 0) return { base: displayURL(u).replace(/\/+$/, ''), root: [] };
    const root = segments.slice(0, i);
    return {
      base: `${u.protocol}//${u.host.toLowerCase()}${root.map((s) => `/${enc(s)}`).join('')}/rest`,
      root,
    };
  },
  read,
  apiBase: (raw, root, api) => (api ? api.base : `${defaultWebBase(raw, root)}/rest`),
  webBase: defaultWebBase,
  id: (path) => path.join('/'),
};
