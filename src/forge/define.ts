/**
 * One git forge as one descriptor (`ForgeParts`): its type, address rules, limits, API client and
 * the parts its notifier and preview forge run. `defineForge` turns it into the
 * `ForgeDefinition` the forge table (./registry.ts) holds, so every forge's notifier and preview
 * forge are wired the same way (./notifier.ts `forgeNotifier`, ./preview.ts `previewForge`).
 */
import type { NotificationEvent } from '../api/event.ts';
import type { GitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { ProviderHttp } from '../notifier/http.ts';
import type { Notifier, NotifierDeps, Serialize } from '../notifier/types.ts';
import type { ProviderLimits } from '../template/rendered.ts';
import type { ForgeRepo } from './address.ts';
import { forgeNotifier, repositoryFor, targetOrdering } from './notifier.ts';
import { previewForge } from './preview.ts';
import type {
  CommentPart,
  ForgeAdapter,
  ForgeDefinition,
  PreviewForge,
  PullRequestDiscovery,
  PullRequestPart,
  StatusPart,
} from './types.ts';
import type { AddressRules } from './url.ts';

/**
 * A forge's descriptor. `C` is its API client (built per notifier and per preview forge over the
 * Provider's `ProviderHttp`), `R` its repository, `P` its pull request.
 */
export interface ForgeParts<T extends GitProviderType, C, R, P extends { id: string }> {
  type: T;
  /** How Provider addresses and Stack repositories name a repository (./<name>/address.ts). */
  address: AddressRules<T>;
  /** Field limits the renderer fits and the notifier asserts (./<name>/limits.ts). */
  limits: ProviderLimits;
  /** @throws Error when the Provider lacks what the client needs (credentials). */
  client: (p: ResolvedProvider, http: ProviderHttp) => C;
  /** How the Provider is named in messages; default: the type. */
  label?: (c: C) => string;
  /** The repository of an event. @throws ProviderError (see ./notifier.ts `repositoryFor`). */
  repository: (p: ResolvedProvider, c: C, ev: NotificationEvent) => R;
  /** Stable identity of a repository for cache and ordering keys. */
  repoKey: (c: C, repo: R) => string;
  /** The notifier's parts over the client: commit statuses, the sticky comment, pull requests. */
  parts: readonly [
    statuses: (c: C) => StatusPart<R, P>,
    comments: (c: C) => CommentPart<R, P>,
    pulls: (c: C) => PullRequestPart<R, P>,
  ];
  /** Open pull requests for the preview controller; absent: previews unsupported. */
  discovery?: (c: C) => PullRequestDiscovery<R>;
}

/**
 * What a forge whose repositories come from the Provider's address and the Stack's repository
 * (./notifier.ts `repositoryFor`) gives {@link defineForge}: its client and parts.
 */
export type AddressedParts<C extends { secretValues: readonly string[] }, P extends { id: string }> = Omit<
  ForgeParts<GitProviderType, C, ForgeRepo, P>,
  'type' | 'address' | 'limits' | 'repository'
>;

/** The notifier's parts of `parts` over client `c`. */
function adapterOf<T extends GitProviderType, C, R, P extends { id: string }>(
  parts: ForgeParts<T, C, R, P>,
  p: ResolvedProvider,
  c: C,
): ForgeAdapter<R, P> {
  const [statuses, comments, pulls] = parts.parts;
  return {
    repository: (ev) => parts.repository(p, c, ev),
    repoKey: (r) => parts.repoKey(c, r),
    ...statuses(c),
    ...comments(c),
    ...pulls(c),
  };
}

/**
 * The notifier of Provider `p` (owning `deps.http`), over client `c` (default: `parts.client`).
 * @throws Error from `parts.client`.
 */
export function notifierOf<T extends GitProviderType, C, R, P extends { id: string }>(
  parts: ForgeParts<T, C, R, P>,
  p: ResolvedProvider,
  deps: NotifierDeps,
  c: C = parts.client(p, deps.http),
): Notifier {
  return forgeNotifier(
    deps.http,
    {
      pullRequestComment: p.pullRequestComment,
      label: parts.label?.(c) ?? parts.type,
      limits: parts.limits,
      ...targetOrdering(p, deps),
    },
    adapterOf(parts, p, c),
  );
}

/**
 * The preview forge of Provider `p` (owning `deps.http`), over client `c` (default:
 * `parts.client`), with the forge's `discovery`.
 * @throws Error from `parts.client`.
 */
export function previewForgeOf<T extends GitProviderType, C, R, P extends { id: string }>(
  parts: ForgeParts<T, C, R, P>,
  discovery: (c: C) => PullRequestDiscovery<R>,
  p: ResolvedProvider,
  deps: { http: ProviderHttp; serialize?: Serialize | undefined },
  c: C = parts.client(p, deps.http),
): PreviewForge {
  return previewForge(
    deps.http,
    parts.label?.(c) ?? parts.type,
    adapterOf(parts, p, c),
    discovery(c),
    targetOrdering(p, deps),
  );
}

/** The forge table's entry for `parts`: previews only where it has `discovery`. */
export function forgeDefinition<T extends GitProviderType, C, R, P extends { id: string }>(
  parts: ForgeParts<T, C, R, P>,
): ForgeDefinition<T> {
  const { discovery } = parts;
  return {
    type: parts.type,
    address: parts.address,
    limits: parts.limits,
    notifier: (p, deps) => notifierOf(parts, p, deps),
    ...(discovery === undefined ? {} : { previews: (p, deps) => previewForgeOf(parts, discovery, p, deps) }),
  };
}

/**
 * The forge table's entry of forge `type` with `address` rules and `limits` whose repositories
 * come from the Provider's address and the Stack's repository (./notifier.ts `repositoryFor`).
 */
export function defineForge<
  T extends GitProviderType,
  C extends { secretValues: readonly string[] },
  P extends { id: string },
>(
  type: T,
  address: AddressRules<T>,
  limits: ProviderLimits,
  parts: AddressedParts<C, P>,
): ForgeDefinition<T> {
  return forgeDefinition({
    ...parts,
    type,
    address,
    limits,
    repository: (p, c, ev) => repositoryFor(type, p, ev, c.secretValues),
  });
}
