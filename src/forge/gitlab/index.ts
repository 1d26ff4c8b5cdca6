/**
 * `gitlab` (GitLab.com or self-managed, REST v4 through `@gitbeaker/rest`): commit statuses and
 * the sticky merge-request note. What it does: docs/providers/gitlab.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { ForgeRepo } from '../address.ts';
import { forgeNotifier, repositoryFor, previewOrdering, targetOrdering } from '../notifier.ts';
import { previewForge } from '../preview.ts';
import type { ForgeAdapter, ForgeDefinition } from '../types.ts';
import { gitlabAddress } from './address.ts';
import { gitlabClient, type GitLabClient, type MergeRequest } from './client.ts';
import { gitlabComments } from './comment.ts';
import { gitlabLimits } from './limits.ts';
import { gitlabDiscovery, gitlabPulls } from './pulls.ts';
import { gitlabStatuses } from './status.ts';

export const gitlab: ForgeDefinition<'gitlab'> = {
  type: 'gitlab',
  address: gitlabAddress,
  limits: gitlabLimits,
  notifier: (p, deps) => {
    const { http } = deps;
    const c = gitlabClient(p, http);
    return forgeNotifier(
      http,
      {
        pullRequestComment: p.pullRequestComment,
        label: 'gitlab',
        limits: gitlabLimits,
        ...targetOrdering(p, deps),
      },
      adapter(p, c),
    );
  },
  previews: (p, deps) => {
    const c = gitlabClient(p, deps.http);
    return previewForge(deps.http, 'gitlab', adapter(p, c), gitlabDiscovery(c), previewOrdering(p, deps));
  },
};

function adapter(p: ResolvedProvider, c: GitLabClient): ForgeAdapter<ForgeRepo, MergeRequest> {
  return {
    repository: (ev) => repositoryFor('gitlab', p, ev, c.secretValues),
    repoKey: (repo) => `${repo.apiBase}\u0000${repo.id}`,
    ...gitlabStatuses(c),
    ...gitlabComments(c),
    ...gitlabPulls(c),
  };
}
