/**
 * `gitlab` (GitLab.com or self-managed, REST v4 through `@gitbeaker/rest`): commit statuses and
 * the sticky merge-request note. What it does: docs/providers/gitlab.md.
 */
import { forgeNotifier, repositoryFor, targetOrdering } from '../notifier.ts';
import type { ForgeDefinition } from '../types.ts';
import { gitlabAddress } from './address.ts';
import { gitlabClient } from './client.ts';
import { gitlabComments } from './comment.ts';
import { gitlabLimits } from './limits.ts';
import { gitlabPulls } from './pulls.ts';
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
      {
        repository: (ev) => repositoryFor('gitlab', p, ev, c.secretValues),
        repoKey: (repo) => `${repo.apiBase}\u0000${repo.id}`,
        ...gitlabStatuses(c),
        ...gitlabComments(c),
        ...gitlabPulls(c),
      },
    );
  },
};
