/**
 * Azure DevOps addresses: `https://dev.azure.com/ORG/PROJECT/_git/REPO`,
 * `https://ORG.visualstudio.com/[DefaultCollection/]PROJECT/_git/REPO`,
 * `git@ssh.dev.azure.com:v3/ORG/PROJECT/REPO`, `ORG@vs-ssh.visualstudio.com:v3/ORG/PROJECT/REPO`,
 * `…/ORG/_git/REPO` (project named like the repository); scopes `https://dev.azure.com/ORG[/PROJECT]`
 * → API `https://dev.azure.com/ORG/PROJECT/_apis`. Azure DevOps Server:
 * `https://HOST/COLLECTION…/PROJECT/_git/REPO` (scope: the collection URL). `apiURL` here is the
 * organization/collection URL (`https://HOST/tfs/Coll`; the project and `/_apis` are appended) or,
 * ending in `/_apis`, the full base. Id `ORG/PROJECT/REPO`; `path` is `[org, project, repo]` (on
 * Server, `org` is the collection path, e.g. `tfs/DefaultCollection`).
 */
import {
  defaultWebBase,
  displayURL,
  enc,
  eqi,
  webOrigin,
  type AddressRules,
  type RawAddress,
  type Reading,
} from '../url.ts';

const canonicalHost = (hostname: string): string => {
  const h = hostname.toLowerCase();
  return h === 'ssh.dev.azure.com' || h.endsWith('.visualstudio.com') ? 'dev.azure.com' : h;
};

function read(raw: RawAddress): Reading {
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

export const azuredevopsAddress: AddressRules<'azuredevops'> = {
  type: 'azuredevops',
  canonicalHost,
  apiOverride: (u) => ({ base: displayURL(u).replace(/\/+$/, ''), root: [] }),
  read,
  apiBase(raw, _root, api, path) {
    const [org, project] = path;
    if (api) {
      if (/\/_apis$/i.test(api.base)) return api.base;
      return project === undefined ? `${api.base}/_apis` : `${api.base}/${enc(project)}/_apis`;
    }
    const origin = canonicalHost(raw.hostname) === 'dev.azure.com' ? 'https://dev.azure.com' : webOrigin(raw);
    if (org === undefined) return `${origin}/_apis`;
    const orgPath = org.split('/').map(enc).join('/');
    return project === undefined
      ? `${origin}/${orgPath}/_apis`
      : `${origin}/${orgPath}/${enc(project)}/_apis`;
  },
  webBase: (raw, root) =>
    canonicalHost(raw.hostname) === 'dev.azure.com' ? 'https://dev.azure.com' : defaultWebBase(raw, root),
  id: (path) => path.join('/'),
};
