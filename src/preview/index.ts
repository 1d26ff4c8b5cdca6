/**
 * The preview controller assembled (docs/previews.md): the PullRequestPreview work queue and
 * reconciler, what queues a key (PullRequestPreview changes, a change of its base Stack's spec,
 * a deleted preview Stack, a Provider that became usable, a verified webhook delivery), and the
 * optional webhook receiver. The composition root (src/controller.ts) builds it and starts it
 * as leader.
 *
 * Fairness (case B12): {@link PREVIEW_WORKERS} syncs run in parallel, taken round-robin across
 * namespaces, and one namespace never holds more than all workers but one (src/kube/workqueue.ts
 * `fairBy`); each sync is bounded (./controller.ts) and its notices go to a separate fair queue
 * (./notices.ts).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { LRUCache } from 'lru-cache';
import type { Registry } from 'prom-client';
import { STACK_GROUP, STACK_PLURAL, STACK_VERSION, type Stack } from '../api/pko.ts';
import { GROUP, VERSION, isGitProviderType, type PullRequestPreview } from '../api/v1alpha1.ts';
import type { ResolvedProvider, SecretReader } from '../credential/provider.ts';
import { errorMessage, kubeRequest, objectPath } from '../kube/client.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { Informer } from '../kube/informer.ts';
import { WorkQueue } from '../kube/workqueue.ts';
import type { Logger } from '../log.ts';
import type { EgressPolicy } from '../notifier/egress.ts';
import { PreviewReconciler, type PreviewReconcilerOptions } from './controller.ts';
import { startWebhookReceiver, type WebhookForge, type WebhookReceiver } from './webhook.ts';

/** Annotation that makes PKO run a Stack now (any new value). */
export const RECONCILE_REQUEST_ANNOTATION = 'pulumi.com/reconciliation-request';
/**
 * Annotation a replica that is not the leader sets on a PullRequestPreview when it received a
 * verified webhook delivery: the leader's informer sees the change and syncs (the forge may
 * reach any replica behind the Service).
 */
export const SYNC_REQUEST_ANNOTATION = 'notification.pko.dev/sync-requested';
/** How long a webhook Secret read is reused (unsigned requests cannot make us read it more often). */
const SECRET_CACHE_MS = 10_000;
/** Parallel PullRequestPreview syncs (fair across namespaces). */
export const PREVIEW_WORKERS = 4;

/** The namespace of a `namespace/name` key (the fairness group of the preview queue). */
const namespaceOf = (key: string): string => key.slice(0, key.indexOf('/'));

export interface PreviewsOptions {
  kubeConfig: KubeConfig;
  previews: Informer<PullRequestPreview>;
  stacks: Informer<Stack>;
  providers: { get(key: string): ResolvedProvider | undefined; onUsable(l: (key: string) => void): void };
  readSecret: SecretReader;
  recorder: Pick<EventRecorder, 'event'>;
  logger: Logger;
  clusterName: string;
  /** Where forge connections may go (the same policy as deliveries). */
  egress: EgressPolicy;
  registry?: Registry;
  /** `host:port` of the webhook receiver; '' = none. */
  webhookBindAddress: string;
  webhookMaxBodyBytes: number;
  /** Whether this replica leads (only the leader reconciles); default: always. */
  isLeader?: () => boolean;
  /**
   * Whether this replica may write now (the elector's `holdsLease()`): checked before every
   * preview write — Stacks, PullRequestPreview finalizer and status, Events, forge notices and
   * statuses, the base Stack's reconcile request. Default: always.
   */
  mayWrite?: () => boolean;
  /** Test hooks: forge access, clock, not-ready retry, sync deadline, forge timeout ceiling, fencing. */
  reconciler?: Partial<
    Pick<
      PreviewReconcilerOptions,
      'forgeFor' | 'now' | 'notReadyRetryMs' | 'syncDeadlineMs' | 'forgeTimeoutCeilingMs' | 'mayWrite'
    >
  >;
  now?: () => number;
}

export class Previews {
  readonly queue: WorkQueue;
  readonly reconciler: PreviewReconciler;
  readonly #o: PreviewsOptions;
  #receiver: WebhookReceiver | undefined;

  constructor(o: PreviewsOptions) {
    this.#o = o;
    this.reconciler = new PreviewReconciler({
      kubeConfig: o.kubeConfig,
      previews: o.previews,
      stacks: o.stacks,
      providers: o.providers,
      recorder: o.recorder,
      logger: o.logger,
      clusterName: o.clusterName,
      egress: o.egress,
      ...o.reconciler,
      mayWrite: () => this.#mayWrite(),
    });
    this.queue = new WorkQueue({
      name: 'preview',
      concurrency: PREVIEW_WORKERS,
      fairBy: namespaceOf,
      reconcile: (k) => this.reconciler.reconcile(k),
      logger: o.logger.child({ queue: 'preview' }),
      ...(o.registry ? { registry: o.registry } : {}),
    });
    const keyOf = (p: PullRequestPreview): string => `${p.metadata.namespace ?? ''}/${p.metadata.name ?? ''}`;
    o.previews.on('add', (p: PullRequestPreview) => {
      this.queue.add(keyOf(p));
    });
    o.previews.on('update', (p: PullRequestPreview, old: PullRequestPreview) => {
      // Our own status writes change neither the generation nor the deletion/finalizers.
      if (
        p.metadata.generation !== old.metadata.generation ||
        p.metadata.deletionTimestamp !== old.metadata.deletionTimestamp ||
        p.metadata.annotations?.[SYNC_REQUEST_ANNOTATION] !==
          old.metadata.annotations?.[SYNC_REQUEST_ANNOTATION] ||
        p.status?.observedGeneration === undefined
      )
        this.queue.add(keyOf(p));
    });
    const forStack = (s: Stack): void => {
      const ns = s.metadata.namespace ?? '';
      for (const p of o.previews.list(ns))
        if (p.spec.stackRef.name === s.metadata.name) this.queue.add(keyOf(p));
    };
    o.stacks.on('update', (s: Stack, old: Stack) => {
      if (s.metadata.generation !== old.metadata.generation) forStack(s);
    });
    o.stacks.on('add', forStack);
    // A preview Stack deleted by someone else is recreated at once.
    o.stacks.on('delete', (s: Stack) => {
      const owner = s.metadata.ownerReferences?.find((r) => r.kind === 'PullRequestPreview');
      if (owner !== undefined) this.queue.add(`${s.metadata.namespace ?? ''}/${owner.name}`);
    });
    o.providers.onUsable((key) => {
      const i = key.indexOf('/');
      const ns = key.slice(0, i);
      for (const p of o.previews.list(ns))
        if (p.spec.providerRef.name === key.slice(i + 1)) this.queue.add(keyOf(p));
    });
  }

  /** Whether this replica may write now: the elector's Lease (and the test hook), checked before every preview write. */
  #mayWrite(): boolean {
    return (this.#o.mayWrite?.() ?? true) && (this.#o.reconciler?.mayWrite?.() ?? true);
  }

  /** Bound port of the webhook receiver (0 when off). */
  get webhookPort(): number {
    return this.#receiver?.port ?? 0;
  }

  /** Starts the webhook receiver (when configured); call before {@link start}. */
  async listen(): Promise<void> {
    const o = this.#o;
    if (o.webhookBindAddress === '') return;
    const secrets = new LRUCache<string, { value: string | undefined }>({ max: 1_000, ttl: SECRET_CACHE_MS });
    const readToken = async (namespace: string, name: string): Promise<string | undefined> => {
      const key = `${namespace}/${name}`;
      const hit = secrets.get(key);
      if (hit !== undefined) return hit.value;
      const value = (await o.readSecret(namespace, name))?.['token']?.trim();
      secrets.set(key, { value });
      return value;
    };
    this.#receiver = await startWebhookReceiver({
      bindAddress: o.webhookBindAddress,
      maxBodyBytes: o.webhookMaxBodyBytes,
      logger: o.logger,
      target: async (namespace, name) => {
        const prp = o.previews.get(namespace, name);
        const secretName = prp?.spec.webhook?.secretRef?.name;
        if (prp === undefined || secretName === undefined) return undefined;
        const provider = o.providers.get(`${namespace}/${prp.spec.providerRef.name}`);
        if (provider === undefined || !isGitProviderType(provider.type)) return undefined;
        const forge: WebhookForge | undefined =
          provider.type === 'github' || provider.type === 'gitea' || provider.type === 'gitlab'
            ? provider.type
            : undefined;
        if (forge === undefined) return undefined;
        const secret = await readToken(namespace, secretName);
        if (secret === undefined || secret === '') return undefined;
        const base = o.stacks.get(namespace, prp.spec.stackRef.name);
        const branch = prp.spec.branch ?? base?.spec?.branch?.replace(/^refs\/heads\//, '');
        return { forge, secret, branch, reconcileBaseOnPush: prp.spec.webhook?.reconcileBaseOnPush === true };
      },
      onDelivery: (namespace, name) => {
        if (o.isLeader?.() ?? true) {
          this.queue.add(`${namespace}/${name}`);
          return;
        }
        // Not the leader: tell it through the object (best effort; the poll is the fallback).
        kubeRequest(o.kubeConfig, {
          method: 'PATCH',
          path: objectPath({
            group: GROUP,
            version: VERSION,
            plural: 'pullrequestpreviews',
            namespace,
            name,
          }),
          body: {
            metadata: {
              annotations: { [SYNC_REQUEST_ANNOTATION]: new Date(o.now?.() ?? Date.now()).toISOString() },
            },
          },
          contentType: 'application/merge-patch+json',
        }).catch((err: unknown) => {
          o.logger.warn(
            { preview: `${namespace}/${name}`, err: errorMessage(err) },
            'cannot pass the webhook delivery to the leader',
          );
        });
      },
      onPushToBase: async (namespace, name) => {
        const prp = o.previews.get(namespace, name);
        if (prp === undefined) return;
        // A write like every preview write: only by the replica that holds the Lease (PKO's own
        // poll of the branch still runs the base Stack when another replica got the push).
        if (!this.#mayWrite()) {
          o.logger.info(
            { preview: `${namespace}/${name}` },
            'push to the base branch: not holding the Lease, the base Stack is not asked to run',
          );
          return;
        }
        await kubeRequest(o.kubeConfig, {
          method: 'PATCH',
          path: objectPath({
            group: STACK_GROUP,
            version: STACK_VERSION,
            plural: STACK_PLURAL,
            namespace,
            name: prp.spec.stackRef.name,
          }),
          body: {
            metadata: {
              annotations: {
                [RECONCILE_REQUEST_ANNOTATION]: new Date(o.now?.() ?? Date.now()).toISOString(),
              },
            },
          },
          contentType: 'application/merge-patch+json',
        });
      },
    });
  }

  /** Starts reconciling (as leader), queueing every PullRequestPreview once. */
  start(): void {
    this.queue.start();
    for (const p of this.#o.previews.list())
      this.queue.add(`${p.metadata.namespace ?? ''}/${p.metadata.name ?? ''}`);
  }

  async stop(deadlineMs: number): Promise<{ drained: boolean }> {
    const r = await this.queue.shutdown(deadlineMs);
    await this.#receiver?.close();
    await this.reconciler.close(deadlineMs);
    return r;
  }
}
