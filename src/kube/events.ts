/**
 * Kubernetes Events (core/v1) for our objects, with client-go style aggregation of repeats.
 *
 * An Event is named `<object name>.<hex>` in the object's namespace (`default` for
 * cluster-scoped objects, as client-go does). A repeat of the same (object uid, type, reason,
 * message) within 10 minutes of the previous one patches `count` and `lastTimestamp` of the
 * existing Event instead of creating another. Messages are cut to 1024 UTF-8 bytes, ending in
 * '…'. Recording never throws: failures are logged (without the message text) and dropped —
 * Events are informational and must not break a reconcile. Needs RBAC `create`, `patch` on
 * `events`.
 */
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from './kubeconfig.ts';
import type { KubeObject } from '../api/meta.ts';
import type { Logger } from '../log.ts';
import { errorMessage, errorStatusCode, kubeRequest, objectPath } from './client.ts';
import { systemClock, type Clock } from './clock.ts';
import { kubeTime } from './status.ts';

/** Repeats within this window are folded into one Event. */
export const EVENT_AGGREGATION_WINDOW_MS = 10 * 60_000;
/** Upper bound for `message`, in UTF-8 bytes. */
export const EVENT_MESSAGE_MAX_BYTES = 1024;
const MAX_TRACKED = 4096;

export interface EventRecorderOptions {
  /** `source.component` / `reportingComponent`, e.g. 'pko-notification-controller'. */
  component: string;
  /** `source.host` / `reportingInstance`, e.g. the pod name. */
  host?: string;
  logger: Logger;
  clock?: Clock;
}

interface Tracked {
  namespace: string;
  name: string;
  count: number;
  lastMs: number;
}

export class EventRecorder {
  private readonly kc: KubeConfig;
  private readonly opts: EventRecorderOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** Aggregation key → the Event that carries it (LRU order: oldest first). */
  private readonly tracked = new Map<string, Tracked>();
  /** Aggregation key → tail of the chain of calls for it, so repeats never race. */
  private readonly chains = new Map<string, Promise<void>>();

  constructor(kc: KubeConfig, opts: EventRecorderOptions) {
    this.kc = kc;
    this.opts = opts;
    this.clock = opts.clock ?? systemClock;
    this.log = opts.logger.child({ component: 'event-recorder' });
  }

  /**
   * Records an Event about `obj` (needs `apiVersion`, `kind`, `metadata.name`, `metadata.uid`;
   * `metadata.namespace` for namespaced objects). Resolves when the Event was written or the
   * failure logged; never rejects.
   */
  event(obj: KubeObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const name = obj.metadata?.name;
    const uid = obj.metadata?.uid;
    if (obj.apiVersion === undefined || obj.kind === undefined || name === undefined || uid === undefined) {
      this.log.error(
        { kind: obj.kind, name, reason },
        'event not recorded: object lacks apiVersion/kind/name/uid',
      );
      return Promise.resolve();
    }
    const msg = boundMessage(message);
    const key = JSON.stringify([uid, type, reason, msg]);
    const prev = this.chains.get(key) ?? Promise.resolve();
    const next = prev.then(() => this.record(obj, key, type, reason, msg));
    this.chains.set(key, next);
    void next.then(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
    return next;
  }

  private async record(
    obj: KubeObject,
    key: string,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const now = this.clock.now();
    const ts = kubeTime(new Date(now));
    const objName = obj.metadata?.name ?? '';
    const ctx = { kind: obj.kind, object: `${obj.metadata?.namespace ?? ''}/${objName}`, type, reason };
    try {
      const seen = this.tracked.get(key);
      if (seen !== undefined && now - seen.lastMs < EVENT_AGGREGATION_WINDOW_MS) {
        try {
          await kubeRequest<unknown>(this.kc, {
            method: 'PATCH',
            path: objectPath({
              group: '',
              version: 'v1',
              plural: 'events',
              namespace: seen.namespace,
              name: seen.name,
            }),
            body: { count: seen.count + 1, lastTimestamp: ts },
            contentType: 'application/merge-patch+json',
          });
          seen.count++;
          seen.lastMs = now;
          this.touch(key, seen);
          return;
        } catch (err) {
          if (errorStatusCode(err) !== 404) throw err;
          // The Event expired (default TTL 1 h) or was deleted: start a new one.
        }
      }
      const namespace = obj.metadata?.namespace ?? 'default';
      const name = `${objName.slice(0, 253 - 25)}.${now.toString(16)}${randomBytes(4).toString('hex')}`;
      const involvedObject: Record<string, string> = {
        apiVersion: obj.apiVersion ?? '',
        kind: obj.kind ?? '',
        name: objName,
        uid: obj.metadata?.uid ?? '',
      };
      if (obj.metadata?.namespace !== undefined) involvedObject['namespace'] = obj.metadata.namespace;
      if (obj.metadata?.resourceVersion !== undefined) {
        involvedObject['resourceVersion'] = obj.metadata.resourceVersion;
      }
      const source: Record<string, string> = { component: this.opts.component };
      const reporting: Record<string, string> = { reportingComponent: this.opts.component };
      if (this.opts.host !== undefined) {
        source['host'] = this.opts.host;
        reporting['reportingInstance'] = this.opts.host;
      }
      await kubeRequest<unknown>(this.kc, {
        method: 'POST',
        path: objectPath({ group: '', version: 'v1', plural: 'events', namespace }),
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name, namespace },
          involvedObject,
          type,
          reason,
          message,
          count: 1,
          firstTimestamp: ts,
          lastTimestamp: ts,
          source,
          ...reporting,
        },
      });
      this.touch(key, { namespace, name, count: 1, lastMs: now });
    } catch (err) {
      this.log.warn({ ...ctx, err: errorMessage(err) }, 'recording Kubernetes Event failed');
    }
  }

  private touch(key: string, t: Tracked): void {
    this.tracked.delete(key);
    this.tracked.set(key, t);
    if (this.tracked.size > MAX_TRACKED) {
      const oldest = this.tracked.keys().next();
      if (oldest.done !== true) this.tracked.delete(oldest.value);
    }
  }
}

/** Cuts `message` to at most 1024 UTF-8 bytes, on a code-point boundary, ending in '…'. */
export function boundMessage(message: string, maxBytes = EVENT_MESSAGE_MAX_BYTES): string {
  if (Buffer.byteLength(message, 'utf8') <= maxBytes) return message;
  const ellipsis = '…';
  let budget = maxBytes - Buffer.byteLength(ellipsis, 'utf8');
  let out = '';
  for (const ch of message) {
    const n = Buffer.byteLength(ch, 'utf8');
    if (n > budget) break;
    out += ch;
    budget -= n;
  }
  return out + ellipsis;
}
