/**
 * Gitea (and Forgejo) addresses: `https://HOST/OWNER[/REPO]` → `https://HOST/api/v1`. Under a
 * sub-path, set `apiURL` (`https://HOST/sub/api/v1`): the sub-path is then stripped from
 * addresses. Id `OWNER/REPO`.
 */
import { apiOverrideBySuffix, defaultWebBase, ownerRepo, type AddressRules } from '../url.ts';

export const giteaAddress: AddressRules<'gitea'> = {
  type: 'gitea',
  canonicalHost: (h) => h.toLowerCase(),
  apiOverride: apiOverrideBySuffix(['api', 'v1']),
  read: (raw, apiRoot) =>
    ownerRepo(
      raw,
      apiRoot,
      ' (if Gitea is served under a sub-path, set apiURL, e.g. https://HOST/SUBPATH/api/v1)',
    ),
  apiBase: (raw, root, api) => (api ? api.base : `${defaultWebBase(raw, root)}/api/v1`),
  webBase: defaultWebBase,
  id: (path) => path.join('/'),
};
