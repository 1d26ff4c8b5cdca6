/**
 * Provider type → implementation: the git forges (src/forge/registry.ts) and the chat and webhook
 * types (src/notifier/message-providers.ts) in one place, given to the delivery layer as its
 * `ProviderTypes` port (src/delivery/send.ts). docs/architecture.md, "Providers".
 */
import { isGitProviderType, type ProviderType } from './api/v1alpha1.ts';
import type { ResolvedProvider } from './credential/provider.ts';
import type { ProviderTypes } from './delivery/send.ts';
import { FORGES } from './forge/registry.ts';
import { createGitHubNotifier } from './forge/github/index.ts';
import type { Dispatcher } from 'undici';
import { Agent } from './undici.ts';
import { EgressPolicy, type EgressOptions } from './notifier/egress.ts';
import { ProviderHttp } from './notifier/http.ts';
import { MESSAGE_PROVIDERS } from './notifier/message-providers.ts';
import type { Notifier, NotifierFactory, Serialize } from './notifier/types.ts';
import type { ProviderLimits } from './template/rendered.ts';

function entry(type: ProviderType): { limits: ProviderLimits; notifier?: NotifierFactory | undefined } {
  return isGitProviderType(type) ? FORGES[type] : MESSAGE_PROVIDERS[type];
}

/** The field limits of `type` (the renderer fits every field to them). */
export function limitsFor(type: ProviderType): ProviderLimits {
  return entry(type).limits;
}

/** Whether `type` has a notifier in this build. */
export function hasNotifier(type: ProviderType): boolean {
  return entry(type).notifier !== undefined;
}

/**
 * Builds the notifier for `p.type`. Without `deps.http`, creates the `ProviderHttp` for `p` itself
 * (only once the type is known to be implemented). The notifier owns the HTTP client and closes
 * it in `close()`.
 * @throws Error when the type has no implementation yet, or the factory refuses `p`.
 */
export function createNotifier(
  p: ResolvedProvider,
  deps: { http?: ProviderHttp; serialize?: Serialize } = {},
  opts: ProviderTypesOptions = {},
): Notifier {
  const factory = entry(p.type).notifier;
  if (factory === undefined) {
    const implemented = [
      ...Object.keys(FORGES),
      ...Object.entries(MESSAGE_PROVIDERS)
        .filter(([, m]) => m.notifier !== undefined)
        .map(([t]) => t),
    ];
    throw new Error(
      `Provider ${p.namespace}/${p.name}: type '${p.type}' has no notifier in this version of pko-notification-controller (implemented: ${implemented.join(', ')})`,
    );
  }
  const http = deps.http ?? new ProviderHttp(p);
  const d = { http, ...(deps.serialize ? { serialize: deps.serialize } : {}) };
  try {
    if (p.type === 'github' && opts.githubWritePacing === false)
      return createGitHubNotifier(p, d, { pacing: false });
    return factory(p, d);
  } catch (err) {
    if (deps.http === undefined) void http.close();
    throw err;
  }
}

export interface ProviderTypesOptions {
  /**
   * Pace GitHub writes as GitHub's secondary rate limits ask (≥ 1 s between writes; default
   * true). `--github-write-pacing=false` turns it off for GitHub Enterprise Server instances whose
   * rate limits are disabled.
   */
  githubWritePacing?: boolean;
}

/**
 * The provider types the controller uses: every notifier's HTTP client obeys `egress` (where
 * connections may go; src/notifier/egress.ts); `deps.serialize` orders read-modify-write on one
 * target across the process.
 */
export function createProviderTypes(opts: { egress: EgressPolicy } & ProviderTypesOptions): ProviderTypes {
  return {
    create: (p, deps) =>
      createNotifier(
        p,
        {
          http: new ProviderHttp(p, { egress: opts.egress }),
          ...(deps?.serialize ? { serialize: deps.serialize } : {}),
        },
        opts,
      ),
    limits: limitsFor,
  };
}

/** The egress policy of `--egress-*` flags (src/notifier/egress.ts). */
export function egressPolicy(opts: EgressOptions): EgressPolicy {
  return new EgressPolicy(opts);
}

/**
 * An undici dispatcher whose connections obey `egress` (for the controller's own calls on a
 * tenant's behalf that are not a Provider's, e.g. Pulumi Cloud reads: src/enrich/pulumi-cloud.ts).
 */
export function egressDispatcher(egress: EgressPolicy, connectTimeoutMs = 5_000): Dispatcher {
  return new Agent({ connect: egress.connector({ timeout: connectTimeoutMs }) });
}
