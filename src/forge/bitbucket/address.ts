/**
 * Bitbucket Cloud addresses: `https://bitbucket.org/WORKSPACE[/REPO]` →
 * `https://api.bitbucket.org/2.0`. Id `WORKSPACE/REPO`.
 */
import { defaultWebBase, displayURL, ownerRepo, type AddressRules } from '../url.ts';

const canonicalHost = (hostname: string): string => {
  const h = hostname.toLowerCase();
  return h === 'www.bitbucket.org' || h === 'altssh.bitbucket.org' ? 'bitbucket.org' : h;
};

export const bitbucketAddress: AddressRules<'bitbucket'> = {
  type: 'bitbucket',
  canonicalHost,
  apiOverride: (u) => ({ base: displayURL(u).replace(/\/+$/, ''), root: [] }),
  read: (raw, apiRoot) => ownerRepo(raw, apiRoot),
  apiBase: (_raw, _root, api) => (api ? api.base : 'https://api.bitbucket.org/2.0'),
  webBase: (raw, root) =>
    canonicalHost(raw.hostname) === 'bitbucket.org' ? 'https://bitbucket.org' : defaultWebBase(raw, root),
  id: (path) => path.join('/'),
};
