/**
 * Which {@link DeliveryClass} a Provider's target is: what a repeated send does to it, which
 * decides what delivery may repeat (docs/delivery.md, "Guarantees"). What a failed attempt means is
 * not decided here: every `ProviderError` carries its verdict (src/notifier/classify.ts).
 */
import { isGitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { Notifier } from '../notifier/types.ts';
import type { DeliveryClass } from './types.ts';

/** The {@link DeliveryClass} of a Provider's target with this notifier (./types.ts explains each). */
export function deliveryClass(p: ResolvedProvider, notifier: Notifier): DeliveryClass {
  if (isGitProviderType(p.type)) return 'idempotent';
  if (notifier.findDelivered !== undefined) return 'lookup';
  if (p.type === 'generic' || p.type === 'generic-hmac') return 'event-id';
  return 'once';
}
