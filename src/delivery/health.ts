/**
 * What sends reveal about a Provider that its spec cannot show: a TLS verification failure, a
 * proxy failure, rejected credentials, an address the egress policy refuses, or an address that
 * answers as something other than the API (an HTML page, a login or SSO redirect: case N13). The
 * send façade reports after every attempt; the Provider reconciler shows the problem as
 * `Ready=False` (`CertificateError`, `ProxyError`, `AuthenticationFailed`, `EgressDenied`,
 * `NotTheAPI`) until a send
 * succeeds. The Provider stays usable meanwhile: its events keep being retried, and the first
 * successful send clears the problem.
 */
import type { ProviderError } from '../notifier/errors.ts';

export type ProviderProblemReason =
  'CertificateError' | 'ProxyError' | 'AuthenticationFailed' | 'EgressDenied' | 'NotTheAPI';

export interface ProviderProblem {
  reason: ProviderProblemReason;
  /** Redacted. */
  message: string;
}

/**
 * The Provider problem a failed send reveals, if any: a connection the egress policy refused (the
 * address resolved somewhere the controller does not connect) → EgressDenied; otherwise the
 * condition of its verdict (src/notifier/classify.ts) — TLS → CertificateError, proxy →
 * ProxyError, rejected or expired credentials (401, a 203 sign-in page, a 403 that is neither a
 * rate limit nor a locked target) → AuthenticationFailed.
 */
export function problemReason(err: ProviderError): ProviderProblemReason | undefined {
  if (err.code === 'EGRESS_DENIED') return 'EgressDenied';
  return err.verdict.condition;
}

/** Provider problems by `namespace/name`, with a listener for changes. */
export class ProviderHealth {
  readonly #problems = new Map<string, ProviderProblem>();
  readonly #listeners: ((providerKey: string) => void)[] = [];

  /** Records what the last send said about `providerKey` (undefined: it worked); listeners hear of changes. */
  report(providerKey: string, problem: ProviderProblem | undefined): void {
    const prev = this.#problems.get(providerKey);
    if (problem) this.#problems.set(providerKey, problem);
    else this.#problems.delete(providerKey);
    if (prev?.reason !== problem?.reason || prev?.message !== problem?.message) {
      for (const l of this.#listeners) l(providerKey);
    }
  }

  /** The current problem of `providerKey`, if any. */
  problem(providerKey: string): ProviderProblem | undefined {
    return this.#problems.get(providerKey);
  }

  onChange(listener: (providerKey: string) => void): void {
    this.#listeners.push(listener);
  }
}
