/**
 * Provider reconciler: validates the spec and the referenced Secrets and writes
 * `status.observedGeneration` plus a `Ready` condition. It sends nothing.
 *
 * Secrets are not watched (that needs list/watch on every Secret of the cluster, a cost and a
 * risk; RBAC gives `get` only). Instead they are read again (case N10): every
 * `secretRefreshMs` for a Provider that references one — a rotated token or a changed address
 * takes effect then, and a deleted Secret makes the Provider `Ready=False/SecretNotFound` and
 * stops its sends — and at once through `refresh()`, which delivery calls on a 401/403 before it
 * takes the failure as final. A Provider that is not ready is re-checked every `notReadyRetryMs`,
 * so creating the missing Secret turns it Ready without a restart.
 */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { Alert, Provider } from '../api/v1alpha1.ts';
import type { Informer } from '../kube/informer.ts';
import type { ReconcileResult } from '../kube/workqueue.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { Logger } from '../log.ts';
import { resolveProvider, type ResolvedProvider, type SecretReader } from '../credential/provider.ts';
import type { ReadyState } from '../kube/status.ts';
import { keyOf, settleReady, specChanged, splitKey } from './common.ts';

export interface ProviderReconcilerDeps {
  kubeConfig: KubeConfig;
  providers: Informer<Provider>;
  readSecret: SecretReader;
  recorder: EventRecorder;
  logger: Logger;
  /** Re-check interval for a Provider that is not ready, milliseconds (default 15 s). */
  notReadyRetryMs?: number;
  /** Re-read interval of a ready Provider's Secrets, milliseconds (default 30 s). */
  secretRefreshMs?: number;
  now?: () => Date;
  /**
   * What deliveries last learned about a Provider that its spec cannot show (a TLS verification
   * failure, rejected credentials; src/delivery/health.ts); undefined when the last send worked.
   */
  health?: { problem(key: string): { reason: string; message: string } | undefined };
  /** Told after every reconcile whether the Provider is usable (src/credential/providers.ts). */
  index: {
    set(key: string, resolved: ResolvedProvider | undefined): void;
    get(key: string): ResolvedProvider | undefined;
  };
  /**
   * The egress policy (src/notifier/egress.ts): an address it refuses by its host alone (a
   * literal address, a denied host name) makes the Provider `Ready=False` (`EgressDenied`) before
   * any send. Names that resolve to a refused address are refused when connecting.
   */
  egress?: { refuseURL(url: string): { message: string } | undefined };
}

/** Why the Provider's endpoints are refused by the egress policy, in words naming the field, or undefined. */
function egressProblem(
  p: ResolvedProvider,
  egress: NonNullable<ProviderReconcilerDeps['egress']>,
): string | undefined {
  const checks: [string, string | undefined][] = [
    [p.addressFromSecret ? "the Secret's key 'address'" : 'spec.address', p.address],
    ['spec.apiURL', p.apiURL],
    ["the proxy (key 'address' of spec.proxySecretRef)", p.proxy?.address],
  ];
  for (const [where, url] of checks) {
    if (url === undefined) continue;
    const denied = egress.refuseURL(url);
    if (denied) {
      return `${where}: ${denied.message}; the controller does not connect there (egress policy, docs/threat-model.md): use another address`;
    }
  }
  return undefined;
}

/**
 * An address the URL rules refuse but a client would still reach (`http://2852039166/`,
 * `http://0xa9fea9fe/`, `http://[::ffff:a9fe:a9fe]/`: WHATWG reads each as 169.254.169.254): when
 * the egress policy refuses where it leads, that is what the Provider's condition says — not
 * merely "not a valid URL", which hides that it points at a metadata or loopback address.
 */
function invalidButRefused(
  invalid: { url: string; where: string },
  egress: NonNullable<ProviderReconcilerDeps['egress']>,
): string | undefined {
  let u: URL;
  try {
    u = new URL(invalid.url);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
  const denied = egress.refuseURL(u.href);
  return denied === undefined
    ? undefined
    : `${invalid.where}: ${denied.message}; the controller does not connect there (egress policy, docs/threat-model.md): use another address`;
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
      this.#d.index.set(key, undefined);
      return undefined;
    }
    let result = await resolveProvider(provider, this.#d.readSecret);
    const refused = !this.#d.egress
      ? undefined
      : result.ok
        ? egressProblem(result.provider, this.#d.egress)
        : result.invalidURL !== undefined
          ? invalidButRefused(result.invalidURL, this.#d.egress)
          : undefined;
    if (refused !== undefined) result = { ok: false, reason: 'EgressDenied', message: refused };
    // A delivery problem makes the Provider not Ready, but it stays usable: its events keep
    // being retried, and the first successful send (e.g. once the CA is added) clears it.
    const problem = result.ok ? this.#d.health?.problem(key) : undefined;
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
    const transitioned = await settleReady(this.#d, 'Provider', provider, state, { provider: key });
    if (transitioned && state.ready) this.#d.logger.info({ provider: key }, 'provider ready');
    this.#d.index.set(key, result.ok ? result.provider : undefined);
    if (!result.ok) return { requeueAfterMs: this.#d.notReadyRetryMs ?? 15_000 };
    const s = provider.spec;
    const readsSecrets =
      s.secretRef !== undefined || s.certSecretRef !== undefined || s.proxySecretRef !== undefined;
    return readsSecrets ? { requeueAfterMs: this.#d.secretRefreshMs ?? 30_000 } : undefined;
  }

  /**
   * Reads the Provider and its Secrets again now (delivery calls it on a 401/403 before taking the
   * failure as final); resolves with the Provider as now usable, or undefined.
   */
  async refresh(key: string): Promise<ResolvedProvider | undefined> {
    try {
      await this.reconcile(key);
    } catch (err) {
      this.#d.logger.warn(
        { provider: key, err: err instanceof Error ? err.message : String(err) },
        'cannot read the Provider’s Secrets again',
      );
    }
    return this.#d.index.get(key);
  }
}

/** What the informers tell the Provider and Alert queues (controller-runtime's generation predicate). */
export interface Queue {
  add(key: string): void;
}

/**
 * Queues a Provider when it is added or deleted, and when its spec changed (generation) or it has
 * no status yet; the Alerts that reference it are queued on every change (they check it).
 */
export function watchProviders(
  providers: Informer<Provider>,
  alerts: Informer<Alert>,
  queues: { providers: Queue; alerts: Queue },
): void {
  const alertsOf = (p: Provider): void => {
    for (const a of alerts.list(p.metadata.namespace)) {
      if (a.spec.providerRef.name === p.metadata.name) queues.alerts.add(keyOf(a));
    }
  };
  providers.on('add', (p) => {
    queues.providers.add(keyOf(p));
    alertsOf(p);
  });
  providers.on('update', (p, old) => {
    if (specChanged(p, old)) queues.providers.add(keyOf(p));
    alertsOf(p);
  });
  providers.on('delete', (p) => {
    queues.providers.add(keyOf(p));
    alertsOf(p);
  });
}
