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

/** Default of `--provider-window`: events of class `event-id` in flight per Provider. */
export const DEFAULT_PROVIDER_WINDOW = 16;

/**
 * How many events of one Provider may be between "sent" and "recorded" at once — the most a
 * leader killed at any moment can leave to be sent again (docs/delivery.md, "Guarantees"):
 * `event-id` targets drop a repeat by its `X-PKO-Event-Id`, so up to `providerWindow`; `once` and
 * `lookup` targets one (a repeat is a second post, or must be looked up); `idempotent` targets are
 * not windowed (a repeat changes nothing; their notifiers serialize per target).
 */
export function sendWindow(cls: DeliveryClass, providerWindow: number): number | undefined {
  switch (cls) {
    case 'idempotent':
      return undefined;
    case 'event-id':
      return providerWindow;
    case 'lookup':
    case 'once':
      return 1;
  }
}
