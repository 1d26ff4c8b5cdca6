/**
 * The default answer classification: what a failed attempt means, from the `ProviderError`'s HTTP
 * status and code (src/notifier/errors.ts). Per-forge tables (bodies such as GitHub's "issue is
 * locked" or Azure DevOps' sign-in page) plug in through `SendPorts.classify` and fall back to
 * this one. Also: which {@link DeliveryClass} a Provider's target is.
 */
import { isGitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { ProviderError } from '../notifier/errors.ts';
import type { Notifier } from '../notifier/types.ts';
import type { DeliveryClass, DeliveryVerdict } from './types.ts';

/**
 * - code `ABORTED` → `cancelled` (our own cancellation: shutdown, a deleted or suspended object);
 * - `ambiguous` → `ambiguous` (may have arrived: the delivery class decides);
 * - `TLS` → `network` + CertificateError, `PROXY` → `network` + ProxyError;
 * - 429, or a wait named by the answer → `rate-limit` (retry after it);
 * - 401 → `auth-expired` + AuthenticationFailed; 403 → `permission` + AuthenticationFailed;
 * - 404/410 → `not-found`; 423 → `locked`; 408/409/5xx → `server` (retry); other 4xx → `validation`;
 * - no status: `TIMEOUT`/`NETWORK`/`CLOSED` → `network` (retry), anything else keeps `retryable`.
 */
export function defaultVerdict(err: ProviderError): DeliveryVerdict {
  const after = err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {};
  if (err.code === 'ABORTED') return { kind: 'cancelled', retry: true };
  if (err.ambiguous) return { kind: 'ambiguous', retry: true, ...after };
  if (err.code === 'TLS') return { kind: 'network', retry: true, providerCondition: 'CertificateError' };
  if (err.code === 'PROXY') return { kind: 'network', retry: err.retryable, providerCondition: 'ProxyError' };
  const s = err.status;
  if (s === 429 || (err.retryAfterMs !== undefined && err.retryable))
    return { kind: 'rate-limit', retry: true, ...after };
  if (s === 401) return { kind: 'auth-expired', retry: false, providerCondition: 'AuthenticationFailed' };
  if (s === 403) return { kind: 'permission', retry: false, providerCondition: 'AuthenticationFailed' };
  if (s === 404 || s === 410) return { kind: 'not-found', retry: false };
  if (s === 423) return { kind: 'locked', retry: false };
  if (s !== undefined && (s === 408 || s === 409 || s >= 500))
    return { kind: 'server', retry: true, ...after };
  if (s !== undefined && s >= 400) return { kind: 'validation', retry: false };
  if (err.code === 'TIMEOUT' || err.code === 'NETWORK' || err.code === 'CLOSED')
    return { kind: 'network', retry: true };
  return { kind: 'internal', retry: err.retryable, ...after };
}

/** The {@link DeliveryClass} of a Provider's target with this notifier (types.ts explains each). */
export function deliveryClass(p: ResolvedProvider, notifier: Notifier): DeliveryClass {
  if (isGitProviderType(p.type)) return 'idempotent';
  if (notifier.findDelivered !== undefined) return 'lookup';
  if (p.type === 'generic' || p.type === 'generic-hmac') return 'event-id';
  return 'once';
}
