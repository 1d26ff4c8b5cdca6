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
import type { KubeConfig } from '../kube/kubeconfig.ts';
import { LRUCache } from 'lru-cache';
import type { Registry } from 'prom-client';
import { stackRef, type Stack } from '../api/pko.ts';
import { GROUP, VERSION, type PullRequestPreview } from '../api/v1alpha1.ts';
import type { ResolvedProvider, SecretReader } from '../credential/provider.ts';
import { errorMessage, kubeRequest, objectPath } from '../kube/client.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { Informer } from '../kube/informer.ts';
import { WorkQueue } from '../kube/workqueue.ts';
import type { Logger } from '../log.ts';
import type { EgressPolicy } from '../notifier/egress.ts';
import type { Serialize } from '../notifier/types.ts';
import { AdmissionPolicyCheck } from './admission.ts';
import { PreviewReconciler, type PreviewReconcilerOptions } from './controller.ts';
import { startWebhookReceiver, type WebhookForge, type WebhookReceiver } from './webhook.ts';

/**
 * Annotation that makes PKO run a Stack now (any new value; the same value again runs nothing).
 * The receiver writes the SHA-256 of the verified push body (64 hex characters).
 */
export const RECONCILE_REQUEST_ANNOTATION = 'pulumi.com/reconciliation-request';
/**
 * Annotation every replica sets on a PullRequestPreview when it received a new verified webhook
 * delivery: the SHA-256 of the body (64 hex characters). The leader's informer sees a changed
 * value and syncs (the forge may reach any replica behind the Service); the same delivery
 * again, wherever and whenever it arrives, writes the same value and causes nothing.
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
  /** The deliveries' lock of one forge target (`Sender.serializeTarget`), for status resolutions. */
  serializeTarget?: Serialize;
  registry?: Registry;
  /** `host:port` of the webhook receiver; '' = none. */
  webhookBindAddress: string;
  webhookMaxBodyBytes: number;
  /**
   * `spec.type` of Provider `namespace/name` as the informer holds it (every replica: the
   * webhook receiver of a replica that does not lead needs it); default: `providers`' type.
   */
  providerType?: (namespace: string, name: string) => string | undefined;
  /** Whether this replica leads (only the leader reconciles); default: always. */
  isLeader?: () => boolean;
  /**
   * Whether this replica may write now (the elector's `holdsLease()`): checked before every
   * preview write — Stacks, PullRequestPreview finalizer and status, Events, forge notices and
   * statuses. Not before the base Stack's reconcile request (`reconcileBaseOnPush`): its value is
   * the push body's digest, the same from any replica, so any replica that receives the push
   * sets it. Default: always.
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
  /** Whether the admission policy is in force (Secret envRefs, reconcileBaseOnPush); one cache for both. */
  readonly #admission: AdmissionPolicyCheck;
  #receiver: WebhookReceiver | undefined;

  constructor(o: PreviewsOptions) {
    this.#o = o;
    this.#admission = new AdmissionPolicyCheck({ kubeConfig: o.kubeConfig });
    this.reconciler = new PreviewReconciler({
      admission: this.#admission,
      kubeConfig: o.kubeConfig,
      previews: o.previews,
      stacks: o.stacks,
      providers: o.providers,
      recorder: o.recorder,
      logger: o.logger,
      clusterName: o.clusterName,
      egress: o.egress,
      ...(o.serializeTarget !== undefined ? { serializeTarget: o.serializeTarget } : {}),
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
    // One read per Secret per SECRET_CACHE_MS, however many requests wait for it (a missing
    // Secret is cached too; a failed read is not).
    const secrets = new LRUCache<string, Promise<string | undefined>>({ max: 1_000, ttl: SECRET_CACHE_MS });
    const readToken = (namespace: string, name: string): Promise<string | undefined> => {
      const key = `${namespace}/${name}`;
      const hit = secrets.get(key);
      if (hit !== undefined) return hit;
      const read = o.readSecret(namespace, name).then((data) => data?.['token']?.trim());
      secrets.set(key, read);
      read.catch(() => {
        if (secrets.get(key) === read) secrets.delete(key);
      });
      return read;
    };
    /** JSON merge patch of one annotation on an object. */
    const annotate = (path: string, annotation: string, value: string): Promise<unknown> =>
      kubeRequest(o.kubeConfig, {
        method: 'PATCH',
        path,
        body: { metadata: { annotations: { [annotation]: value } } },
        contentType: 'application/merge-patch+json',
      });
    this.#receiver = await startWebhookReceiver({
      bindAddress: o.webhookBindAddress,
      maxBodyBytes: o.webhookMaxBodyBytes,
      logger: o.logger,
      ...(o.registry ? { registry: o.registry } : {}),
      // Informer caches only until the Secret read (cached, negative answers too): an unknown
      // target costs no I/O.
      target: (namespace, name) => {
        const prp = o.previews.get(namespace, name);
        const secretName = prp?.spec.webhook?.secretRef?.name;
        if (prp === undefined || secretName === undefined) return undefined;
        // The Provider's type from the informer (every replica has it; only the leader
        // resolves Providers).
        const type =
          o.providerType?.(namespace, prp.spec.providerRef.name) ??
          o.providers.get(`${namespace}/${prp.spec.providerRef.name}`)?.type;
        const forge: WebhookForge | undefined =
          type === 'github' || type === 'gitea' || type === 'gitlab' ? type : undefined;
        if (forge === undefined) return undefined;
        return readToken(namespace, secretName).then((secret) => {
          if (secret === undefined || secret === '') return undefined;
          const base = o.stacks.get(namespace, prp.spec.stackRef.name);
          const branch = prp.spec.branch ?? base?.spec?.branch?.replace(/^refs\/heads\//, '');
          return {
            forge,
            secret,
            branch,
            reconcileBaseOnPush: prp.spec.webhook?.reconcileBaseOnPush === true,
            repository: base?.spec?.projectRepo,
          };
        });
      },
      // Every replica — the leader too — records the delivery on the PullRequestPreview with the
      // body's digest as the value; the leader's informer sees a changed value and syncs. The
      // same delivery again (at any replica, after a restart) writes the same value: the API
      // server stores nothing, no watch event, no sync.
      onDelivery: async (namespace, name, key) => {
        const path = objectPath({
          group: GROUP,
          version: VERSION,
          plural: 'pullrequestpreviews',
          namespace,
          name,
        });
        try {
          await annotate(path, SYNC_REQUEST_ANNOTATION, key);
        } catch (err) {
          if (!(o.isLeader?.() ?? true)) throw err;
          // The leader can still sync now; the annotation only spares repeats.
          o.logger.warn(
            { preview: `${namespace}/${name}`, err: errorMessage(err) },
            'cannot record the webhook delivery on the PullRequestPreview; syncing anyway',
          );
          this.queue.add(`${namespace}/${name}`);
        }
      },
      // The same value for the same push: PKO runs when the annotation's value changes
      // (ReconcileRequestedPredicate), so a redelivered push runs nothing more. Not fenced by the
      // Lease like the other preview writes: the value is the push body's digest, the same from
      // any replica, so a replica that does not lead cannot write anything the leader would not
      // (and a push reaching it still runs the base Stack at once).
      // Honoured only while the admission policy checks that whoever wrote the
      // PullRequestPreview may patch that Stack (confused deputy as in B10, ./admission.ts), as Secret envRefs:
      // otherwise a tenant could make the controller run any Stack of its namespace.
      onPushToBase: async (namespace, name, key) => {
        const prp = o.previews.get(namespace, name);
        if (prp === undefined) return;
        const checked = await this.#admission.checked(
          prp.metadata.creationTimestamp,
          'its spec.webhook.reconcileBaseOnPush was',
        );
        if (!checked.allowed) {
          o.logger.warn(
            { preview: `${namespace}/${name}`, stack: prp.spec.stackRef.name, reason: checked.why },
            'push to the base branch: not asking PKO to run the base Stack, because spec.webhook.reconcileBaseOnPush is honoured only while the admission policy checks it',
          );
          if (this.#mayWrite()) {
            void o.recorder.event(
              { ...prp, apiVersion: `${GROUP}/${VERSION}`, kind: 'PullRequestPreview' },
              'Warning',
              'ReconcileBaseOnPushRefused',
              `not asking PKO to run Stack ${prp.spec.stackRef.name} for the push: ${checked.why}`,
            );
          }
          return;
        }
        await annotate(
          objectPath(stackRef(namespace, prp.spec.stackRef.name)),
          RECONCILE_REQUEST_ANNOTATION,
          key,
        );
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
