/**
 * The contract between the delivery layer and one provider type's notifier.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { RenderedNotification } from '../template/rendered.ts';
import type { ProviderHttp } from './http.ts';

export type { CommitState, RenderedNotification } from '../template/rendered.ts';

/** What delivery tells a send besides the event (docs/delivery.md, "Run notes"). */
export interface SendContext {
  /**
   * The note a previous send of this event's run left (see {@link SendOutcome.note}), e.g. the id
   * of the chat message a run's Started posted, for its result to thread under — after a
   * restart or a leader change too. Undefined when none was left or the run's record is gone.
   */
  runNote?: string;
}

/** What a send may hand back to delivery. */
export interface SendOutcome {
  /**
   * A note kept with the event's run in the delivery ledger and given back as
   * {@link SendContext.runNote} to later sends of the same run: at most 128 UTF-8 bytes, no line
   * breaks. Stored in the same write that records the event as delivered; forgotten with the run.
   */
  note?: string;
}

export interface Notifier {
  /**
   * Delivers one event. Resolves once the endpoint accepted it. `rendered` already fits the
   * provider type's limits (the renderer fitted it; notifiers do not cut again).
   * @param signal cancels the send (shutdown past its deadline, the Alert or Provider deleted or
   *   suspended): every request of this send is aborted and the send rejects with a
   *   `ProviderError` of code `ABORTED`.
   * @throws ProviderError (./errors.ts) — `retryable` and `retryAfterMs` drive the retry policy;
   *   `ambiguous` says the request may have arrived although no answer did.
   */
  send(
    ev: NotificationEvent,
    rendered: RenderedNotification,
    signal?: AbortSignal,
    ctx?: SendContext,
    // Most notifiers leave nothing: their `async send` resolves without a value.
    // eslint-disable-next-line @typescript-eslint/no-invalid-void-type
  ): Promise<SendOutcome | undefined | void>;
  /**
   * Optional: whether the target already holds `ev` (e.g. a chat message carrying its id in
   * message metadata). Delivery asks before sending an event that may have been sent already —
   * one recorded as in flight by a leader that died, or one whose previous attempt ended
   * ambiguously — and records it as delivered instead of sending it twice.
   * @throws ProviderError when the target cannot be asked (delivery then retries the question).
   */
  findDelivered?(ev: NotificationEvent, signal?: AbortSignal): Promise<boolean>;
  /** Releases the notifier's resources, including the `ProviderHttp` it was given. Idempotent. */
  close(): Promise<void>;
}

/**
 * Runs `fn` while no other call for the same `key` runs, across every notifier of the process
 * (FIFO per key). Notifiers use it for read-modify-write on one external object — one pull
 * request's sticky comment, one commit status context — so that concurrent deliveries to it from
 * several Alerts or Providers sharing a credential are ordered (case N03).
 */
export type Serialize = <T>(key: string, fn: () => Promise<T>) => Promise<T>;

/**
 * Builds the notifier of one provider type. The notifier owns `deps.http` from then on and
 * closes it in `close()`. May throw an `Error` when `p` lacks something the type needs.
 */
export type NotifierFactory = (p: ResolvedProvider, deps: NotifierDeps) => Notifier;

export interface NotifierDeps {
  http: ProviderHttp;
  /** Process-wide per-target serialization (default: none, each call runs at once). */
  serialize?: Serialize;
}
