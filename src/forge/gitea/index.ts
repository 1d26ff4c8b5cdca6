/**
 * `gitea` (Gitea and Forgejo, API `/api/v1`): commit statuses and the sticky pull-request comment
 * with plain `ProviderHttp` calls. What it does: docs/providers/gitea.md.
 */
import type { ForgeDefinition } from '../types.ts';
import { forgeNotifier, repositoryFor, targetOrdering } from '../notifier.ts';
import { giteaAddress } from './address.ts';
import { giteaClient } from './client.ts';
import { giteaComments } from './comment.ts';
import { giteaLimits } from './limits.ts';
import { giteaPulls } from './pulls.ts';
import { giteaStatuses } from './status.ts';

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
      {
        repository: (ev) => repositoryFor('gitea', p, ev, c.secretValues),
        repoKey: (r) => c.repoPath(r).toLowerCase(),
        ...giteaStatuses(c),
        ...giteaComments(c),
        ...giteaPulls(c),
      },
    );
  },
};
