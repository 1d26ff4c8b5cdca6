/**
 * `bitbucketserver` (Bitbucket Data Center / Server): build statuses and the sticky pull-request
 * comment with plain `ProviderHttp` calls. What it does: docs/providers/bitbucketserver.md.
 */
import { defineForge } from '../define.ts';
import { bitbucketserverAddress } from './address.ts';
import { bitbucketServerClient } from './client.ts';
import { bitbucketServerComments } from './comment.ts';
import { bitbucketserverLimits } from './limits.ts';
import { bitbucketServerPulls } from './pulls.ts';
import { bitbucketServerStatuses } from './status.ts';

export const bitbucketserver = defineForge('bitbucketserver', bitbucketserverAddress, bitbucketserverLimits, {
  client: bitbucketServerClient,
  repoKey: (c, r) => c.repoURL(r).toLowerCase(),
  parts: [bitbucketServerStatuses, bitbucketServerComments, bitbucketServerPulls],
});
