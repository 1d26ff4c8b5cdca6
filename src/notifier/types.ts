/**
 * The contract between the delivery layer and one provider type's notifier.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { ProviderHttp } from './http.ts';

/** Forge-neutral commit status state; each forge maps it (GitLab: pending→running, failure→failed). */
export type CommitState = 'pending' | 'success' | 'failure';

/** What the templates rendered for this (event, alert, provider) delivery (src/template). */
export interface RenderedNotification {
  /** The message text (chat body, webhook `message`). */
  message: string;
  /**
   * Git forges: the commit status to set on `ev.metadata.commit` (always present for git
   * Provider types). `description` is already bounded by the renderer to the forge's limit
   * (GitHub 140 characters); `targetURL` is the permalink when there is one.
   */
  commitStatus?: { state: CommitState; context: string; description: string; targetURL: string | undefined };
  /**
   * Git forges with pull-request comments on: the sticky comment. `marker` is the hidden HTML
   * comment that identifies it (unique per cluster, namespace and Stack); `body` contains it and
   * fits the forge's comment limit (src/notifier/limits.ts).
   */
  comment?: { marker: string; body: string };
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
