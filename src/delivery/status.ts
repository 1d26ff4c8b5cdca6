/**
 * Writes each Alert's last delivery outcome to `status.lastDelivery` (one entry per Provider),
 * batched: at most one status write per Alert per `intervalMs`, whatever the event rate.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { DeliveryOutcome } from '../api/v1alpha1.ts';
import { GROUP, VERSION } from '../api/v1alpha1.ts';
import { patchStatus } from '../kube/status.ts';
import { errorMessage } from '../kube/client.ts';
import type { Logger } from '../log.ts';
import { boundText } from '../text.ts';
import type { DeliveryOutcomeReport } from './types.ts';

export class DeliveryStatusWriter {
  readonly #kc: KubeConfig;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #pending = new Map<string, DeliveryOutcome>();
  readonly #timers = new Map<string, NodeJS.Timeout>();

  constructor(kc: KubeConfig, logger: Logger, intervalMs = 1000) {
    this.#kc = kc;
    this.#log = logger;
    this.#intervalMs = intervalMs;
  }

  record(r: DeliveryOutcomeReport): void {
    this.#pending.set(r.alertKey, {
      provider: r.provider,
      lastAttemptTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      result: r.result,
      reason: r.reason,
      message: boundText(r.message, 1024, 'utf16'),
    });
    if (this.#timers.has(r.alertKey)) return;
    this.#timers.set(
      r.alertKey,
      setTimeout(() => {
        this.#timers.delete(r.alertKey);
        void this.#flush(r.alertKey);
      }, this.#intervalMs),
    );
  }

  async #flush(alertKey: string): Promise<void> {
    const outcome = this.#pending.get(alertKey);
    if (!outcome) return;
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
        { lastDelivery: [outcome] },
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
      clearTimeout(t);
      this.#timers.delete(key);
    }
    await Promise.all([...this.#pending.keys()].map((k) => this.#flush(k)));
  }
}
