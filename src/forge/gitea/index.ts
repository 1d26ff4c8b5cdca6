/**
 * `gitea` (Gitea and Forgejo, API `/api/v1`): commit statuses and the sticky pull-request comment
 * with plain `ProviderHttp` calls. What it does: docs/providers/gitea.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { ForgeAdapter, ForgeDefinition } from '../types.ts';
import type { ForgeRepo } from '../address.ts';
import { forgeNotifier, previewOrdering, repositoryFor, targetOrdering } from '../notifier.ts';
import type { Serialize } from '../../notifier/types.ts';
import { previewForge } from '../preview.ts';
import { giteaAddress } from './address.ts';
import { giteaClient, type GiteaClient, type GiteaPullRequest } from './client.ts';
import { giteaComments } from './comment.ts';
import { giteaLimits } from './limits.ts';
import { giteaDiscovery, giteaPulls } from './pulls.ts';
import { giteaStatuses } from './status.ts';

function adapter(p: ResolvedProvider, c: GiteaClient): ForgeAdapter<ForgeRepo, GiteaPullRequest> {
  return {
    repository: (ev) => repositoryFor('gitea', p, ev, c.secretValues),
    repoKey: (r) => c.repoPath(r).toLowerCase(),
    ...giteaStatuses(c),
    ...giteaComments(c),
    ...giteaPulls(c),
  };
}

export const gitea: ForgeDefinition<'gitea'> = {
  type: 'gitea',
  address: giteaAddress,
  limits: giteaLimits,
  notifier: (p, deps) => {
    const { http } = deps;
    const c = giteaClient(p, http);
    return forgeNotifier(
      http,
      {
        pullRequestComment: p.pullRequestComment,
        label: 'gitea',
        limits: giteaLimits,
        ...targetOrdering(p, deps),
      },
      adapter(p, c),
    );
  },
  previews: (p: ResolvedProvider, deps: { http: ProviderHttp; serialize?: Serialize | undefined }) => {
    const c = giteaClient(p, deps.http);
    return previewForge(deps.http, 'gitea', adapter(p, c), giteaDiscovery(c), previewOrdering(p, deps));
  },
};
