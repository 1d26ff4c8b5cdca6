/**
 * The contract between the delivery layer and one provider type's notifier.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { ProviderHttp } from './http.ts';

/** What a template rendered for this (event, alert, provider) delivery. */
export interface RenderedNotification {
  /** The message text (chat body, commit-status description source, webhook `message`). */
  message: string;
}

export interface Notifier {
  /**
   * Delivers one event. Resolves once the endpoint accepted it.
   * @throws ProviderError (./errors.ts) — `retryable` and `retryAfterMs` drive the retry policy.
   */
  send(ev: NotificationEvent, rendered: RenderedNotification): Promise<void>;
  /** Releases the notifier's resources, including the `ProviderHttp` it was given. Idempotent. */
  close(): Promise<void>;
}

/**
 * Builds the notifier of one provider type. The notifier owns `deps.http` from then on and
 * closes it in `close()`. May throw an `Error` when `p` lacks something the type needs.
 */
export type NotifierFactory = (p: ResolvedProvider, deps: { http: ProviderHttp }) => Notifier;
