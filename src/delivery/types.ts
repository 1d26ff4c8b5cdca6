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
}

/** Where the router hands the events a Stack implies for an Alert (the dispatcher). */
export interface DeliveryQueue {
  /**
   * Offers the complete set of events a Stack currently implies for `alert` (already matched and
   * carrying the Alert's metadata). Idempotent: offering the same events again changes nothing.
   */
  offer(alert: DeliveryAlert, stackUid: string, events: readonly OfferedEvent[]): void;
}

export type DeliveryResult = 'Delivered' | 'Skipped' | 'Failed';

/** What happened to one event for one Alert, for `status.lastDelivery` and metrics. */
export interface DeliveryOutcomeReport {
  alertKey: string;
  provider: string;
  result: DeliveryResult;
  reason: string;
  /** Redacted and bounded. */
  message: string;
  event: NotificationEvent;
}

export interface RetryPolicy {
  /** First backoff, ms (default 1 s). */
  initialMs: number;
  /** Backoff cap, ms (default 5 min). */
  maxMs: number;
  /** Give up (final failure) after this long, ms (default 24 h — the Update TTL). */
  maxElapsedMs: number;
}
