/**
 * `github` (github.com and GitHub Enterprise Server, REST through Octokit): commit statuses and
 * the sticky pull-request comment. What it does: docs/providers/github.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { Notifier, NotifierDeps, Serialize } from '../../notifier/types.ts';
import { forgeNotifier, previewOrdering, targetOrdering } from '../notifier.ts';
import type { ForgeAdapter, ForgeDefinition, PreviewForge } from '../types.ts';
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
import { previewForge } from '../preview.ts';
import { githubStatuses } from './status.ts';

export type { GitHubNotifierOptions } from './client.ts';

/**
 * Builds the `github` notifier for `p`, owning `deps.http`.
 * @throws Error when `p` has neither a token/password nor GitHub App keys.
 */
export function createGitHubNotifier(
  p: ResolvedProvider,
  deps: NotifierDeps,
  opts: GitHubNotifierOptions = {},
): Notifier {
  const c = githubClient(p, deps.http, opts);
  return forgeNotifier(
    deps.http,
    {
      pullRequestComment: p.pullRequestComment,
      label: c.label,
      limits: githubLimits,
      ...targetOrdering(p, deps),
    },
    adapter(c),
  );
}

function adapter(c: GitHubClient): ForgeAdapter<GitHubRepo, PullRef> {
  return {
    repository: (ev) => c.repository(ev),
    repoKey: (r) => c.repoKey(r),
    ...githubStatuses(c),
    ...githubComments(c),
    ...githubPulls(c),
  };
}

/** The `github` preview forge of `p` (src/preview/): discovery with conditional requests. */
export function createGitHubPreviewForge(
  p: ResolvedProvider,
  deps: { http: ProviderHttp; serialize?: Serialize | undefined },
  opts: GitHubNotifierOptions = {},
): PreviewForge {
  const c = githubClient(p, deps.http, opts);
  return previewForge(deps.http, c.label, adapter(c), githubDiscovery(c), previewOrdering(p, deps));
}

export const github: ForgeDefinition<'github'> = {
  type: 'github',
  address: githubAddress,
  limits: githubLimits,
  notifier: (p, deps) => createGitHubNotifier(p, deps),
  previews: (p, deps) => createGitHubPreviewForge(p, deps),
};
