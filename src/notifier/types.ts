/**
 * The contract between the delivery layer and one provider type's notifier.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { RenderedNotification } from '../template/rendered.ts';
import type { ProviderHttp } from './http.ts';

export type { CommitState, RenderedNotification } from '../template/rendered.ts';

export interface Notifier {
  /**
   * Delivers one event. Resolves once the endpoint accepted it. `rendered` already fits the
   * provider type's limits (the renderer fitted it; notifiers do not cut again).
   * @param signal cancels the send (shutdown past its deadline): every request of this send is
   *   aborted and the send rejects with a `ProviderError` of code `ABORTED`.
   * @throws ProviderError (./errors.ts) — `retryable` and `retryAfterMs` drive the retry policy.
   */
  send(ev: NotificationEvent, rendered: RenderedNotification, signal?: AbortSignal): Promise<void>;
  /** Releases the notifier's resources, including the `ProviderHttp` it was given. Idempotent. */
  close(): Promise<void>;
}

/**
 * Builds the notifier of one provider type. The notifier owns `deps.http` from then on and
 * closes it in `close()`. May throw an `Error` when `p` lacks something the type needs.
 */
export type NotifierFactory = (p: ResolvedProvider, deps: { http: ProviderHttp }) => Notifier;
