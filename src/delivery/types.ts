/**
 * The shapes delivery works with, shared by the dispatcher, the send façade and the status
 * writer, and by the layers that hand work to delivery (src/alert) without importing its classes.
 */
import type { NotificationEvent } from '../api/event.ts';
import type { AlertTemplates } from '../template/index.ts';

/** A Ready Alert as delivery sees it (the Alert reconciler builds it; src/alert/routed.ts). */
export interface DeliveryAlert {
  /** `namespace/name` */
  key: string;
  uid: string;
  namespace: string;
  name: string;
  /** `spec.providerRef.name`: a Provider in the Alert's namespace. */
  providerName: string;
  /** `metadata.creationTimestamp` in epoch ms: events older than the Alert are not sent. */
  createdMs: number;
  /**
   * The smallest resourceVersion the controller has seen the Alert at (its creation's when the
   * controller saw it created): a run first observed at a later resourceVersion happened after
   * the Alert, whatever PKO's clock says (case N16; ./skip.ts `beforeAlert`).
   */
  sinceRv?: number | undefined;
  /**
   * The Alert's templates (built-ins overridden by its ConfigMap and the Provider's context),
   * rendered in the template sandbox (src/template/sandbox.ts).
   */
  templates: AlertTemplates;
}

/**
 * An event offered for delivery. With `skip`, it is recorded as skipped with that reason instead
 * of being sent (a suspended Alert: its events move the ledger, so resuming does not replay them).
 */
export interface OfferedEvent {
  event: NotificationEvent;
  skip?: { reason: string; message: string };
  /**
   * resourceVersion of the object snapshot the event was derived from (the Update, or the Stack
   * for what only the Stack shows): the event's run is ordered by the smallest one seen
   * (./order.ts). Absent: ordered after everything observed.
   */
  observed?: number;
}

/** Where the router hands the events a Stack implies for an Alert (the dispatcher). */
export interface DeliveryQueue {
  /**
   * Offers the complete set of events a Stack currently implies for `alert` (already matched and
   * carrying the Alert's metadata). Idempotent: offering the same events again changes nothing.
   */
  offer(alert: DeliveryAlert, stackUid: string, events: readonly OfferedEvent[]): void;
}

/**
 * How an event ended for one Alert: `Delivered` (the endpoint accepted it), `Skipped` (nothing to
 * send, with a reason), `Failed` (a final error, or retries exhausted), `Unconfirmed` (sent, but
 * the outcome is unknown — no answer after the request went out — and sending again could
 * deliver it twice to a target that cannot tell: recorded, not repeated).
 */
export type DeliveryResult = 'Delivered' | 'Skipped' | 'Failed' | 'Unconfirmed';

/** What happened to one event for one Alert, for `status.lastDelivery` and metrics. */
export interface DeliveryOutcomeReport {
  alertKey: string;
  provider: string;
  /** A final result, or `Retrying` while a retryable failure waits for its next attempt. */
  result: DeliveryResult | 'Retrying';
  reason: string;
  /** Redacted and bounded. */
  message: string;
  event: NotificationEvent;
  /** Attempts made so far for this event (sends, not counting lookups). */
  attempts?: number;
  /** `Retrying`: when the next attempt is due, epoch ms. */
  nextAttemptMs?: number;
}

/**
 * What a repeated send does to a provider type's target, which decides what delivery may repeat
 * (docs/delivery.md, "Guarantees"):
 * - `idempotent` — a repeat changes nothing (git forges: statuses and sticky comments are read
 *   before they are written). Sent concurrently; an ambiguous outcome is retried.
 * - `event-id` — receivers can drop a repeat by its `X-PKO-Event-Id` (generic webhooks). Up to
 *   `--provider-window` sends in flight per Provider (one per Stack); an ambiguous outcome is
 *   retried with the same id.
 * - `lookup` — the target can be asked whether it has the event (`Notifier.findDelivered`). One
 *   send in flight per Provider, recorded as in flight before it leaves; an ambiguous outcome or
 *   an in-flight record left by a dead leader is looked up, not sent blind.
 * - `once` — none of these (chat webhooks). One send in flight per Provider; an ambiguous
 *   outcome is recorded as `Unconfirmed` and never repeated.
 */
export type DeliveryClass = 'idempotent' | 'event-id' | 'lookup' | 'once';

export interface RetryPolicy {
  /** First backoff, ms (default 1 s). */
  initialMs: number;
  /** Backoff cap, ms (default 5 min). */
  maxMs: number;
  /** Give up (final failure) after this long, ms (default 24 h — the Update TTL). */
  maxElapsedMs: number;
  /** A Warning Event on the Alert once an event failed this many attempts (default 3). */
  warnAfterAttempts: number;
}
