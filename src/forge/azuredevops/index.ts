/**
 * `azuredevops` (Azure DevOps Services and Server, Git REST API 7.1): commit statuses and the
 * sticky pull-request comment thread with plain `ProviderHttp` calls. What it does:
 * docs/providers/azuredevops.md.
 */
import { defineForge } from '../define.ts';
import { azuredevopsAddress } from './address.ts';
import { azureClient } from './client.ts';
import { azureComments } from './comment.ts';
import { azuredevopsLimits } from './limits.ts';
import { azurePulls } from './pulls.ts';
import { azureStatuses } from './status.ts';

export const azuredevops = defineForge('azuredevops', azuredevopsAddress, azuredevopsLimits, {
  client: azureClient,
  repoKey: (c, r) => c.repoURL(r).toLowerCase(),
  parts: [azureStatuses, azureComments, azurePulls],
});
