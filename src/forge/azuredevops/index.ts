/**
 * `azuredevops` (Azure DevOps Services and Server, Git REST API 7.1): commit statuses and the
 * sticky pull-request comment thread with plain `ProviderHttp` calls. What it does:
 * docs/providers/azuredevops.md.
 */
import { forgeNotifier, repositoryFor, targetOrdering } from '../notifier.ts';
import type { ForgeDefinition } from '../types.ts';
import { azuredevopsAddress } from './address.ts';
import { azureClient } from './client.ts';
import { azureComments } from './comment.ts';
import { azuredevopsLimits } from './limits.ts';
import { azurePulls } from './pulls.ts';
import { azureStatuses } from './status.ts';

export const azuredevops: ForgeDefinition<'azuredevops'> = {
  type: 'azuredevops',
  address: azuredevopsAddress,
  limits: azuredevopsLimits,
  notifier: (p, deps) => {
    const { http } = deps;
    const c = azureClient(p, http);
    return forgeNotifier(
      http,
      {
        pullRequestComment: p.pullRequestComment,
        label: 'azuredevops',
        limits: azuredevopsLimits,
        ...targetOrdering(p, deps),
      },
      {
        repository: (ev) => repositoryFor('azuredevops', p, ev, c.secretValues),
        repoKey: (r) => c.repoURL(r).toLowerCase(),
        ...azureStatuses(c),
        ...azureComments(c),
        ...azurePulls(c),
      },
    );
  },
};
