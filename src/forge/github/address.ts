/**
 * GitHub addresses: `https://github.com/OWNER[/REPO]` → API `https://api.github.com`;
 * `*.ghe.com` (GitHub Enterprise Cloud with data residency) → `https://api.HOST`; any other host
 * is GitHub Enterprise Server → `https://HOST/api/v3` (case F02, docs/cases.md). `apiURL` wins
 * over the guess. Id `OWNER/REPO`.
 */
import {
  apiOverrideBySuffix,
  defaultWebBase,
  ownerRepo,
  rootPath,
  webOrigin,
  type AddressRules,
} from '../url.ts';

const canonicalHost = (hostname: string): string => {
  const h = hostname.toLowerCase();
  return h === 'www.github.com' || h === 'ssh.github.com' ? 'github.com' : h;
};

export const githubAddress: AddressRules<'github'> = {
  type: 'github',
  canonicalHost,
  apiOverride: apiOverrideBySuffix(['api', 'v3']),
  read: (raw, apiRoot) =>
    ownerRepo(raw, apiRoot, ' (use the repository URL https://HOST/OWNER/REPO, not a page inside it)'),
  apiBase(raw, root, api) {
    if (api) return api.base;
    const h = raw.hostname;
    if (canonicalHost(h) === 'github.com') return 'https://api.github.com';
    if (h.endsWith('.ghe.com')) return `https://api.${h}`;
    return `${webOrigin(raw)}${rootPath(root)}/api/v3`;
  },
  webBase: (raw, root) =>
    canonicalHost(raw.hostname) === 'github.com' ? 'https://github.com' : defaultWebBase(raw, root),
  id: (path) => path.join('/'),
};
