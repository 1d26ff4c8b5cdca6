/**
 * `bitbucket` (Bitbucket Cloud): build statuses and the sticky pull-request comment with plain
 * `ProviderHttp` calls. What it does: docs/providers/bitbucket.md.
 */
import { forgeNotifier, repositoryFor, targetOrdering } from '../notifier.ts';
import type { ForgeDefinition } from '../types.ts';
import { bitbucketAddress } from './address.ts';
import { bitbucketClient } from './client.ts';
import { bitbucketComments } from './comment.ts';
import { bitbucketLimits } from './limits.ts';
import { bitbucketPulls } from './pulls.ts';
import { bitbucketStatuses } from './status.ts';

export const bitbucket: ForgeDefinition<'bitbucket'> = {
  type: 'bitbucket',
  address: bitbucketAddress,
  limits: bitbucketLimits,
  notifier: (p, deps) => {
    const { http } = deps;
    const c = bitbucketClient(p, http);
    return forgeNotifier(
      http,
      {
        pullRequestComment: p.pullRequestComment,
        label: 'bitbucket',
        limits: bitbucketLimits,
        ...targetOrdering(p, deps),
      },
      {
        repository: (ev) => repositoryFor('bitbucket', p, ev, c.secretValues),
        repoKey: (r) => c.repoURL(r).toLowerCase(),
        ...bitbucketStatuses(c),
        ...bitbucketComments(c),
        ...bitbucketPulls(c),
      },
    );
  },
};
