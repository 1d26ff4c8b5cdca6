/**
 * Provider type → notifier factory. Types without an entry are not implemented yet
 * (forges and chat services land in later changes).
 */
import type { GitProviderType, ProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { azuredevops } from './azuredevops.ts';
import { bitbucket } from './bitbucket.ts';
import { bitbucketserver } from './bitbucketserver.ts';
import { generic } from './generic.ts';
import { slack } from './slack.ts';
import { genericHmac } from './generic-hmac.ts';
import { gitea } from './gitea.ts';
import { github } from './github.ts';
import { gitlab } from './gitlab.ts';
import { ProviderHttp } from './http.ts';
import type { Notifier, NotifierFactory } from './types.ts';

/**
 * Every git forge type has a notifier: this record is typed over all of `GIT_PROVIDER_TYPES`, so
 * adding a forge type to the API without an implementation does not compile.
 */
const forgeNotifiers: Record<GitProviderType, NotifierFactory> = {
  github,
  gitlab,
  gitea,
  bitbucket,
  bitbucketserver,
  azuredevops,
};

/** Webhook and chat types; msteams, discord and googlechat are not implemented yet. */
const messageNotifiers: Partial<Record<Exclude<ProviderType, GitProviderType>, NotifierFactory>> = {
  generic,
  'generic-hmac': genericHmac,
  slack,
};

export const notifiers: Partial<Record<ProviderType, NotifierFactory>> = {
  ...forgeNotifiers,
  ...messageNotifiers,
};

/** Whether `type` has a notifier in this build. */
export function hasNotifier(type: ProviderType): boolean {
  return notifiers[type] !== undefined;
}

/**
 * Builds the notifier for `p.type`. Without `deps`, creates the `ProviderHttp` for `p` itself
 * (only once the type is known to be implemented). The notifier owns the HTTP client and closes
 * it in `close()`.
 * @throws Error when the type has no implementation yet, or the factory refuses `p`.
 */
export function createNotifier(p: ResolvedProvider, deps?: { http: ProviderHttp }): Notifier {
  const factory = notifiers[p.type];
  if (factory === undefined) {
    throw new Error(
      `Provider ${p.namespace}/${p.name}: type '${p.type}' has no notifier in this version of pko-notification-controller (implemented: ${Object.keys(notifiers).join(', ')})`,
    );
  }
  const http = deps?.http ?? new ProviderHttp(p);
  try {
    return factory(p, { http });
  } catch (err) {
    if (deps === undefined) void http.close();
    throw err;
  }
}
