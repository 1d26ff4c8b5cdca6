/**
 * GitLab addresses: `https://HOST/GROUP/SUB…/PROJECT` → `https://HOST/api/v4`, id = the URL-encoded
 * full path (`platform%2Finfra%2Fstacks%2Fapp`, case F01, docs/cases.md). Browse suffixes
 * (`/-/tree/main`) are dropped. Under a relative root, set `apiURL` (`https://HOST/gitlab/api/v4`):
 * the root is then stripped from addresses. A path of two or more segments may be a project or a
 * subgroup: it is the repository unless the Stack's repository lies strictly below it, in which
 * case it acts as a scope. `https://HOST/groups/GROUP…` is always a scope; `https://HOST/projects/ID`
 * (GitLab's own redirect URL) names a project by numeric id (`path` is `[ID]`, `id` is `ID`). A
 * single segment is a top-level group or user namespace (scope).
 */
import {
  apiOverrideBySuffix,
  defaultWebBase,
  enc,
  stripRoot,
  type AddressRules,
  type RawAddress,
  type Reading,
} from '../url.ts';

function read(raw: RawAddress, apiRoot: string[]): Reading {
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

export const gitlabAddress: AddressRules<'gitlab'> = {
  type: 'gitlab',
  canonicalHost: (hostname) => {
    const h = hostname.toLowerCase();
    return h === 'www.gitlab.com' || h === 'altssh.gitlab.com' ? 'gitlab.com' : h;
  },
  apiOverride: apiOverrideBySuffix(['api', 'v4']),
  read,
  apiBase: (raw, root, api) => (api ? api.base : `${defaultWebBase(raw, root)}/api/v4`),
  webBase: defaultWebBase,
  id: (path, override) => override ?? enc(path.join('/')),
};
