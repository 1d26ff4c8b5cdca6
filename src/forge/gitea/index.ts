/**
 * `gitea` (Gitea and Forgejo, API `/api/v1`): commit statuses and the sticky pull-request comment
 * with plain `ProviderHttp` calls. What it does: docs/providers/gitea.md.
 */
import { defineForge } from '../define.ts';
import { giteaAddress } from './address.ts';
import { giteaClient } from './client.ts';
import { giteaComments } from './comment.ts';
import { giteaLimits } from './limits.ts';
import { giteaDiscovery, giteaPulls } from './pulls.ts';
import { giteaStatuses } from './status.ts';

export const gitea = defineForge('gitea', giteaAddress, giteaLimits, {
  client: giteaClient,
  repoKey: (c, r) => c.repoPath(r).toLowerCase(),
  parts: [giteaStatuses, giteaComments, giteaPulls],
  discovery: giteaDiscovery,
});
