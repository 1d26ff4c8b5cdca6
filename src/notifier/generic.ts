/**
 * `generic` provider: POSTs the event as JSON to `address`, in Flux's generic webhook payload
 * shape (notification-controller's `eventv1.Event`: involvedObject, severity, timestamp,
 * message, reason, metadata, reportingController) plus our stable event `id`.
 *
 * Headers: `Content-Type: application/json`, `X-PKO-Event-Id: <id>` (delivery is at-least-once
 * across a crash between send and ledger write, so receivers may deduplicate on it), the
 * Secret's `headers`, and HTTP basic auth when the Secret has `username` and `password` (unless
 * the Secret's `headers` already set `Authorization`).
 */
import type { NotificationEvent } from '../api/event.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import type { ProviderHttp } from './http.ts';
import type { Notifier, NotifierFactory, RenderedNotification } from './types.ts';

/** Header carrying `NotificationEvent.id`, for receiver-side deduplication. */
export const EVENT_ID_HEADER = 'X-PKO-Event-Id';

/**
 * The exact JSON body sent by `generic` and `generic-hmac`:
 * `{ involvedObject: {apiVersion, kind, namespace, name, uid}, severity, timestamp, message,
 * reason, metadata, reportingController, id }`, `message` being the rendered message and
 * `metadata` holding only the defined keys.
 */
export function genericPayload(ev: NotificationEvent, rendered: RenderedNotification): string {
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(ev.metadata)) if (v !== undefined) metadata[k] = v;
  const { apiVersion, kind, namespace, name, uid } = ev.involvedObject;
  return JSON.stringify({
    involvedObject: { apiVersion, kind, namespace, name, uid },
    severity: ev.severity,
    timestamp: ev.timestamp,
    message: rendered.message,
    reason: ev.reason,
    metadata,
    reportingController: ev.reportingController,
    id: ev.id,
  });
}

/**
 * A webhook notifier posting `genericPayload` to `p.address`; `sign(body)` returns extra
 * headers computed from the exact body (generic-hmac's signature), or nothing.
 */
export function webhookNotifier(
  p: ResolvedProvider,
  http: ProviderHttp,
  sign: (body: string) => Record<string, string> = () => ({}),
): Notifier {
  const hasAuthHeader = Object.keys(p.headers).some((k) => k.toLowerCase() === 'authorization');
  const basic =
    p.username !== undefined && p.password !== undefined && !hasAuthHeader
      ? { Authorization: `Basic ${Buffer.from(`${p.username}:${p.password}`, 'utf8').toString('base64')}` }
      : {};
  return {
    async send(ev, rendered, signal) {
      const body = genericPayload(ev, rendered);
      await http.request(p.address, {
        method: 'POST',
        headers: {
          ...basic,
          'Content-Type': 'application/json',
          [EVENT_ID_HEADER]: ev.id,
          ...sign(body),
        },
        body,
        // The receiver's reply is not read (docs/threat-model.md, "Endpoints").
        responseBody: 'discard',
        ...(signal !== undefined ? { signal } : {}),
      });
    },
    close: () => http.close(),
  };
}

/** Factory of the `generic` provider type. */
export const generic: NotifierFactory = (p, { http }) => webhookNotifier(p, http);
