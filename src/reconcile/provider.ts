/**
 * Provider reconciler: validates the spec and the referenced Secrets and writes
 * `status.observedGeneration` plus a `Ready` condition. It sends nothing.
 *
 * Secrets are not watched (caching every Secret of the cluster is a cost and a risk): a
 * Provider that is not ready is re-checked every `notReadyRetryMs`, so creating the missing
 * Secret turns it Ready without a restart.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Provider } from '../api/v1alpha1.ts';
import type { Informer } from '../kube/informer.ts';
import type { ReconcileResult } from '../kube/workqueue.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { Logger } from '../log.ts';
import { resolveProvider, type ResolvedProvider, type SecretReader } from '../credential/provider.ts';
import { splitKey, writeReady, type ReadyState } from './common.ts';

export interface ProviderReconcilerDeps {
  kubeConfig: KubeConfig;
  providers: Informer<Provider>;
  readSecret: SecretReader;
  recorder: EventRecorder;
  logger: Logger;
  /** Re-check interval for a Provider that is not ready, milliseconds (default 15 s). */
  notReadyRetryMs?: number;
  now?: () => Date;
  /**
   * What deliveries last learned about the Provider that its spec cannot show (a TLS
   * verification failure, rejected credentials); undefined when the last send worked.
   */
  deliveryProblem?: (key: string) => { reason: string; message: string } | undefined;
  /** Called after every reconcile with the key and whether the Provider is usable. */
  onResolved?: (key: string, resolved: ResolvedProvider | undefined) => void;
}

export class ProviderReconciler {
  readonly #d: ProviderReconcilerDeps;

  constructor(deps: ProviderReconcilerDeps) {
    this.#d = deps;
  }

  async reconcile(key: string): Promise<ReconcileResult | undefined> {
    const { namespace, name } = splitKey(key);
    const provider = this.#d.providers.get(namespace, name);
    if (!provider || provider.metadata.deletionTimestamp) {
      this.#d.onResolved?.(key, undefined);
      return undefined;
    }
    const result = await resolveProvider(provider, this.#d.readSecret);
    // A delivery problem makes the Provider not Ready, but it stays usable: its events keep
    // being retried, and the first successful send (e.g. once the CA is added) clears it.
    const problem = result.ok ? this.#d.deliveryProblem?.(key) : undefined;
    const state: ReadyState = !result.ok
      ? { ready: false, reason: result.reason, message: result.message }
      : problem
        ? { ready: false, reason: problem.reason, message: problem.message }
        : {
            ready: true,
            reason: 'Succeeded',
            message: provider.spec.suspend
              ? 'Provider is ready (suspended: nothing is sent)'
              : 'Provider is ready',
          };
    const { transitioned } = await writeReady(
      this.#d.kubeConfig,
      'providers',
      provider,
      state,
      (this.#d.now ?? (() => new Date()))(),
    );
    if (transitioned) {
      if (state.ready) this.#d.logger.info({ provider: key }, 'provider ready');
      else this.#d.logger.warn({ provider: key, reason: state.reason }, state.message);
      if (!state.ready) {
        await this.#d.recorder.event(
          { apiVersion: provider.apiVersion, kind: 'Provider', metadata: provider.metadata },
          'Warning',
          state.reason,
          state.message,
        );
      }
    }
    this.#d.onResolved?.(key, result.ok ? result.provider : undefined);
    return result.ok ? undefined : { requeueAfterMs: this.#d.notReadyRetryMs ?? 15_000 };
  }
}
