/**
 * `bitbucket` (Bitbucket Cloud): build statuses and the sticky pull-request comment with plain
 * `ProviderHttp` calls. What it does: docs/providers/bitbucket.md.
 */
import { defineForge } from '../define.ts';
import { bitbucketAddress } from './address.ts';
import { bitbucketClient } from './client.ts';
import { bitbucketComments } from './comment.ts';
import { bitbucketLimits } from './limits.ts';
import { bitbucketPulls } from './pulls.ts';
import { bitbucketStatuses } from './status.ts';

export const bitbucket = defineForge('bitbucket', bitbucketAddress, bitbucketLimits, {
  client: bitbucketClient,
  repoKey: (c, r) => c.repoURL(r).toLowerCase(),
  parts: [bitbucketStatuses, bitbucketComments, bitbucketPulls],
});
