/**
 * `bitbucketserver` (Bitbucket Data Center / Server): build statuses and the sticky pull-request
 * comment with plain `ProviderHttp` calls. What it does: docs/providers/bitbucketserver.md.
 */
import { forgeNotifier, repositoryFor, targetOrdering } from '../notifier.ts';
import type { ForgeDefinition } from '../types.ts';
import { bitbucketserverAddress } from './address.ts';
import { bitbucketServerClient } from './client.ts';
import { bitbucketServerComments } from './comment.ts';
import { bitbucketserverLimits } from './limits.ts';
import { bitbucketServerPulls } from './pulls.ts';
import { bitbucketServerStatuses } from './status.ts';

export const bitbucketserver: ForgeDefinition<'bitbucketserver'> = {
  type: 'bitbucketserver',
  address: bitbucketserverAddress,
  limits: bitbucketserverLimits,
  notifier: (p, deps) => {
    const { http } = deps;
    const c = bitbucketServerClient(p, http);
    return forgeNotifier(
      http,
      {
        pullRequestComment: p.pullRequestComment,
        label: 'bitbucketserver',
        limits: bitbucketserverLimits,
        ...targetOrdering(p, deps),
      },
      {
        repository: (ev) => repositoryFor('bitbucketserver', p, ev, c.secretValues),
        repoKey: (r) => c.repoURL(r).toLowerCase(),
        ...bitbucketServerStatuses(c),
        ...bitbucketServerComments(c),
        ...bitbucketServerPulls(c),
      },
    );
  },
};
