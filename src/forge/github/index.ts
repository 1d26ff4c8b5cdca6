/**
 * `github` (github.com and GitHub Enterprise Server, REST through Octokit): commit statuses and
 * the sticky pull-request comment. What it does: docs/providers/github.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { Notifier, NotifierDeps, Serialize } from '../../notifier/types.ts';
import { forgeDefinition, notifierOf, previewForgeOf, type ForgeParts } from '../define.ts';
import type { PreviewForge } from '../types.ts';
import { githubAddress } from './address.ts';
import {
  githubClient,
  type GitHubClient,
  type GitHubNotifierOptions,
  type GitHubRepo,
  type PullRef,
} from './client.ts';
import { githubComments } from './comment.ts';
import { githubLimits } from './limits.ts';
import { githubDiscovery, githubPulls } from './pulls.ts';
import { githubStatuses } from './status.ts';

export type { GitHubNotifierOptions } from './client.ts';

const parts: ForgeParts<'github', GitHubClient, GitHubRepo, PullRef> = {
  type: 'github',
  address: githubAddress,
  limits: githubLimits,
  client: (p, http) => githubClient(p, http),
  label: (c) => c.label,
  repository: (_p, c, ev) => c.repository(ev),
  repoKey: (c, r) => c.repoKey(r),
  parts: [githubStatuses, githubComments, githubPulls],
  discovery: githubDiscovery,
};

/**
 * Builds the `github` notifier for `p`, owning `deps.http`.
 * @throws Error when `p` has neither a token/password nor GitHub App keys.
 */
export function createGitHubNotifier(
  p: ResolvedProvider,
  deps: NotifierDeps,
  opts: GitHubNotifierOptions = {},
): Notifier {
  return notifierOf(parts, p, deps, githubClient(p, deps.http, opts));
}

/** The `github` preview forge of `p` (src/preview/): discovery with conditional requests. */
export function createGitHubPreviewForge(
  p: ResolvedProvider,
  deps: { http: ProviderHttp; serialize?: Serialize | undefined },
  opts: GitHubNotifierOptions = {},
): PreviewForge {
  return previewForgeOf(parts, githubDiscovery, p, deps, githubClient(p, deps.http, opts));
}

export const github = forgeDefinition(parts);
