/**
 * `gitlab` (GitLab.com or self-managed, REST v4 through `@gitbeaker/rest`): commit statuses and
 * the sticky merge-request note. What it does: docs/providers/gitlab.md.
 */
import { defineForge } from '../define.ts';
import { gitlabAddress } from './address.ts';
import { gitlabClient } from './client.ts';
import { gitlabComments } from './comment.ts';
import { gitlabLimits } from './limits.ts';
import { gitlabDiscovery, gitlabPulls } from './pulls.ts';
import { gitlabStatuses } from './status.ts';

export const gitlab = defineForge('gitlab', gitlabAddress, gitlabLimits, {
  client: gitlabClient,
  repoKey: (_c, repo) => `${repo.apiBase}\u0000${repo.id}`,
  parts: [gitlabStatuses, gitlabComments, gitlabPulls],
  discovery: gitlabDiscovery,
});
