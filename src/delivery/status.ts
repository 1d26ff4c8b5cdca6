/**
 * Writes each Alert's delivery state to `status.lastDelivery` (one entry per Provider): the last
 * outcome, or, while an event is retried, `Retrying` with the attempts so far, the reason and when
 * the next attempt is due (docs/delivery.md, "What kubectl shows"). Batched: at most one status
 * write per Alert per `intervalMs`, whatever the event rate.
 */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { DeliveryOutcome } from '../api/v1alpha1.ts';
import { GROUP, VERSION } from '../api/v1alpha1.ts';
import { patchStatus } from '../kube/status.ts';
import { errorMessage } from '../kube/client.ts';
import { systemClock, type Clock } from '../kube/clock.ts';
import type { Logger } from '../log.ts';
import { boundText } from '../text.ts';
import type { DeliveryOutcomeReport } from './types.ts';

const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

/** The `lastDelivery` entry for a report (bounded, secrets already redacted by the reporter). */
export function outcomeOf(r: DeliveryOutcomeReport, nowMs: number): DeliveryOutcome {
  const o = r.event.involvedObject;
  return {
    provider: r.provider,
    lastAttemptTime: rfc3339(nowMs),
    result: r.result,
    reason: r.reason,
    message: boundText(r.message, 1024, 'utf16'),
    event: boundText(`${r.event.reason} ${o.namespace}/${o.name}`, 512, 'utf16'),
    ...(r.attempts !== undefined ? { attempts: r.attempts } : {}),
    ...(r.nextAttemptMs !== undefined ? { nextAttemptTime: rfc3339(r.nextAttemptMs) } : {}),
  };
}

export class DeliveryStatusWriter {
  readonly #kc: KubeConfig;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #clock: Clock;
  /**
   * Alert key → Provider name → latest outcome not yet written, as reported (turned into a
   * `DeliveryOutcome` when written: a burst reports many per write).
   */
  readonly #pending = new Map<string, Map<string, { r: DeliveryOutcomeReport; atMs: number }>>();
  readonly #timers = new Map<string, unknown>();

  constructor(kc: KubeConfig, logger: Logger, intervalMs = 1000, clock: Clock = systemClock) {
    this.#kc = kc;
    this.#log = logger;
    this.#intervalMs = intervalMs;
    this.#clock = clock;
  }

  record(r: DeliveryOutcomeReport): void {
    let byProvider = this.#pending.get(r.alertKey);
    if (!byProvider) {
      byProvider = new Map();
      this.#pending.set(r.alertKey, byProvider);
    }
    byProvider.set(r.provider, { r, atMs: this.#clock.now() });
    if (this.#timers.has(r.alertKey)) return;
    this.#timers.set(
      r.alertKey,
      this.#clock.setTimeout(() => {
        this.#timers.delete(r.alertKey);
        void this.#flush(r.alertKey);
      }, this.#intervalMs),
    );
  }

  async #flush(alertKey: string): Promise<void> {
    const byProvider = this.#pending.get(alertKey);
    if (!byProvider) return;
    this.#pending.delete(alertKey);
    const i = alertKey.indexOf('/');
    try {
      await patchStatus(
        this.#kc,
        {
          group: GROUP,
          version: VERSION,
          plural: 'alerts',
          namespace: alertKey.slice(0, i),
          name: alertKey.slice(i + 1),
        },
        { lastDelivery: [...byProvider.values()].map(({ r, atMs }) => outcomeOf(r, atMs)) },
      );
    } catch (err) {
      this.#log.warn(
        { alert: alertKey, err: errorMessage(err) },
        'cannot write the Alert lastDelivery status',
      );
    }
  }

  async close(): Promise<void> {
    for (const [key, t] of this.#timers) {
      this.#clock.clearTimeout(t);
      this.#timers.delete(key);
    }
    await Promise.all([...this.#pending.keys()].map((k) => this.#flush(k)));
  }
}
