/**
 * The template ConfigMap informer pool: the ConfigMaps Alerts name in `spec.templateRef`, watched
 * one by one: for each referenced (namespace, name) an informer with `fieldSelector=metadata.name=<name>` in that
 * namespace, started when the first Alert names it and stopped when the last one stops. So a
 * change to a template applies at once (no restart, no polling), and the controller never caches
 * the cluster's other ConfigMaps (which hold other tenants' data and can be large).
 *
 * Cost: one LIST + WATCH per distinct referenced ConfigMap (Alerts sharing one share it). These
 * informers keep no metrics of their own (one `informer` label per ConfigMap would be unbounded).
 */
import type { KubeObject, ObjectMeta } from '../api/meta.ts';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import { Informer } from '../kube/informer.ts';
import type { Logger } from '../log.ts';

export interface TemplateConfigMapsOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  relistIntervalMs?: number;
  /** A watched ConfigMap was created, changed or deleted: re-check the Alerts that name it. */
  onChange: (namespace: string, name: string) => void;
  /** How long `data()` waits for a new watch's first LIST, ms (default 10 000). */
  syncTimeoutMs?: number;
}

interface Watched {
  informer: Informer<ConfigMap>;
  users: Set<string>;
}

/** A ConfigMap as cached here: metadata and `data`. */
interface ConfigMap extends KubeObject {
  metadata: ObjectMeta;
  data?: Record<string, string>;
}

const keyOf = (namespace: string, name: string): string => `${namespace}/${name}`;

/** Only what templates need is cached: `data` and the metadata the informer diffs on. */
function slimConfigMap<T extends ConfigMap>(cm: T): T {
  const { name, namespace, uid, resourceVersion } = cm.metadata;
  return {
    apiVersion: cm.apiVersion,
    kind: cm.kind,
    metadata: { name, namespace, uid, resourceVersion },
    data: cm.data ?? {},
  } as T;
}

export class TemplateConfigMaps {
  readonly #o: TemplateConfigMapsOptions;
  readonly #watched = new Map<string, Watched>();
  /** Alert key → the ConfigMap key it names. */
  readonly #byAlert = new Map<string, string>();
  #stopped = false;

  constructor(opts: TemplateConfigMapsOptions) {
    this.#o = opts;
  }

  /** Number of ConfigMaps watched (for tests and metrics). */
  get size(): number {
    return this.#watched.size;
  }

  /**
   * Records that Alert `alertKey` names `ref` (or no ConfigMap): starts a watch on a ConfigMap
   * newly named, stops the one no Alert names any more.
   */
  use(alertKey: string, ref: { namespace: string; name: string } | undefined): void {
    const next = ref === undefined ? undefined : keyOf(ref.namespace, ref.name);
    const prev = this.#byAlert.get(alertKey);
    if (prev === next) return;
    if (prev !== undefined) {
      this.#byAlert.delete(alertKey);
      const w = this.#watched.get(prev);
      w?.users.delete(alertKey);
      if (w && w.users.size === 0) {
        this.#watched.delete(prev);
        void w.informer.stop();
      }
    }
    if (ref === undefined || next === undefined || this.#stopped) return;
    this.#byAlert.set(alertKey, next);
    let w = this.#watched.get(next);
    if (!w) {
      const informer = new Informer<ConfigMap>({
        name: 'template-configmap',
        kubeConfig: this.#o.kubeConfig,
        group: '',
        version: 'v1',
        plural: 'configmaps',
        namespace: ref.namespace,
        fieldSelector: `metadata.name=${ref.name}`,
        transform: slimConfigMap,
        logger: this.#o.logger.child({ configMap: next }),
        ...(this.#o.relistIntervalMs !== undefined ? { relistIntervalMs: this.#o.relistIntervalMs } : {}),
      });
      const changed = (): void => {
        this.#o.onChange(ref.namespace, ref.name);
      };
      informer.on('add', changed);
      informer.on('update', changed);
      informer.on('delete', changed);
      informer.start();
      w = { informer, users: new Set() };
      this.#watched.set(next, w);
    }
    w.users.add(alertKey);
  }

  /**
   * The `data` of ConfigMap `namespace/name` from its watch (started by {@link use}), or
   * undefined when it does not exist. Waits for a new watch's first LIST.
   * @throws Error when the watch has not listed within `syncTimeoutMs`, or when nobody `use`s it.
   */
  async data(namespace: string, name: string): Promise<Record<string, string> | undefined> {
    const w = this.#watched.get(keyOf(namespace, name));
    if (!w) throw new Error(`ConfigMap ${keyOf(namespace, name)} is not watched`);
    if (!w.informer.hasSynced()) {
      const timeout = AbortSignal.timeout(this.#o.syncTimeoutMs ?? 10_000);
      await w.informer.waitForSync(timeout).catch((err: unknown) => {
        throw new Error(
          `cannot read ConfigMap ${keyOf(namespace, name)}: ${w.informer.health().message || (err instanceof Error ? err.message : String(err))}`,
        );
      });
    }
    const cm = w.informer.get(namespace, name);
    return cm === undefined ? undefined : { ...(cm.data ?? {}) };
  }

  /** Stops every watch. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const all = [...this.#watched.values()];
    this.#watched.clear();
    this.#byAlert.clear();
    await Promise.all(all.map((w) => w.informer.stop()));
  }
}
