/**
 * The composition root: constructs the informers (Provider, Alert, Stack, Update), the indexes,
 * reconcilers, router, send façade, dispatcher and ledger, and connects them; then runs them
 * under leader election with the health and metrics servers. No behaviour lives here
 * (docs/architecture.md shows the same graph). `main.ts` only parses flags and calls
 * `startController`; tests call it in-process against the real API server.
 */
import type { KubeConfig } from './kube/kubeconfig.ts';
import { Registry, collectDefaultMetrics } from './kube/prom.ts';
import type { Alert, DriftDetection, Provider, PullRequestPreview } from './api/v1alpha1.ts';
import { ALERT_SOURCES_POLICY_NAME, GROUP, VERSION } from './api/v1alpha1.ts';
import type { Stack, Update } from './api/pko.ts';
import {
  STACK_GROUP,
  STACK_PLURAL,
  STACK_VERSION,
  UPDATE_GROUP,
  UPDATE_PLURAL,
  UPDATE_VERSION,
} from './api/pko.ts';
import type { ControllerOptions } from './config.ts';
import type { Logger } from './log.ts';
import { Informer } from './kube/informer.ts';
import { WorkQueue, type WorkQueueOptions } from './kube/workqueue.ts';
import { EventRecorder } from './kube/events.ts';
import { LeaderElector } from './kube/leader.ts';
import { startServers, type Check } from './kube/health.ts';
import { slim } from './kube/slim.ts';
import { registerStatusMetrics } from './kube/status-metrics.ts';
import { gauge } from './kube/metrics.ts';
import { secretReader } from './credential/secrets.ts';
import { ProviderIndex } from './credential/providers.ts';
import type { ResolvedProvider } from './credential/provider.ts';
import { Redactor } from './credential/redact.ts';
import { ProviderReconciler, watchProviders } from './reconcile/provider.ts';
import { AlertReconciler, requeueAlertsUsing, watchAlerts } from './reconcile/alert.ts';
import { TemplateConfigMaps } from './reconcile/template-configmap-informers.ts';
import { lazyBuiltinsInline } from './template/engine.ts';
import { TemplateSandbox } from './template/sandbox.ts';
import { keyOf } from './reconcile/common.ts';
import { AlertIndex } from './alert/routed.ts';
import { Router } from './alert/router.ts';
import { ChangeAttacher } from './enrich/changes.ts';
import { LiveStacks, slimStack } from './source/stacks.ts';
import { RUN_COMMIT_ANNOTATION, RUN_OBSERVED_ANNOTATION } from './source/derive.ts';
import { kubeRequest, objectPath } from './kube/client.ts';
import { Ledger } from './delivery/ledger.ts';
import { Dispatcher } from './delivery/lanes.ts';
import { ProviderHealth } from './delivery/health.ts';
import { Sender, type ProviderTypes } from './delivery/send.ts';
import { DeliveryStatusWriter } from './delivery/status.ts';
import type { RetryPolicy } from './delivery/types.ts';
import { createProviderTypes, egressDispatcher, egressPolicy } from './provider-types.ts';
import { Previews, type PreviewsOptions } from './preview/index.ts';
import { resolveClusterName } from './kube/cluster-name.ts';
import { DriftController, REMEDIATION_POLICY_NAME, type DriftControllerOptions } from './drift/controller.ts';
import { driftEventsFor } from './drift/events.ts';
import { AdmissionPolicyCheck } from './preview/admission.ts';

export const CONTROLLER_NAME = 'pko-notification-controller';

export interface ControllerDeps {
  kubeConfig: KubeConfig;
  logger: Logger;
  registry?: Registry;
  /** Re-check interval for not-ready Providers/Alerts, ms (default 15 s). */
  notReadyRetryMs?: number;
  /** Re-read interval of ready Providers' Secrets, ms (default: `--secret-refresh-interval`). */
  secretRefreshMs?: number;
  /** Called when leadership is lost; the process should exit (controller-runtime does the same). */
  onLostLeadership?: () => void;
  /** Delivery retry policy overrides (tests shorten it). */
  retry?: Partial<RetryPolicy>;
  /** Known secret values, shared with the logger; default: a new one. */
  redactor?: Redactor;
  /** Provider type → notifier and limits; default: src/provider-types.ts. */
  notifiers?: ProviderTypes;
  /** Test hooks of the drift controller (clock, jitter source, retry and deadline of checks). */
  drift?: Partial<
    Pick<DriftControllerOptions, 'now' | 'random' | 'deferRetryMs' | 'checkTimeoutMs' | 'remediation'>
  >;
  /** Test hooks of the preview controller (forge access, clock, not-ready retry). */
  previews?: PreviewsOptions['reconciler'];
}

export interface ControllerHandle {
  /** The cluster name in use: `--cluster-name`, else derived from the kube-system namespace UID. */
  clusterName: string;
  /** Ports actually bound (0 when disabled). */
  metricsPort: number;
  probePort: number;
  alertIndex: AlertIndex;
  ledger: Ledger;
  dispatcher: Dispatcher;
  router: Router;
  /** Usable Providers by `namespace/name` (Ready ones only). */
  providers: ReadonlyMap<string, ResolvedProvider>;
  /** The pull-request preview controller (src/preview/). */
  previews: Previews;
  /** The drift check controller (src/drift/). */
  drift: DriftController;
  /** Bound port of the preview webhook receiver (0 when off). */
  previewWebhookPort: number;
  isLeader(): boolean;
  ready(): Check;
  stop(): Promise<void>;
}

/** The four informers, watching `opts.watchNamespace`; ours also honour `--watch-label-selector`. */
function informers(opts: ControllerOptions, kc: KubeConfig, logger: Logger, registry: Registry) {
  const common = {
    kubeConfig: kc,
    namespace: opts.watchNamespace === '' ? undefined : opts.watchNamespace,
    relistIntervalMs: opts.relistIntervalMs,
    registry,
    logger,
  };
  const ours = {
    ...common,
    ...(opts.watchLabelSelector !== '' ? { labelSelector: opts.watchLabelSelector } : {}),
    group: GROUP,
    version: VERSION,
    transform: slim,
  };
  return {
    providers: new Informer<Provider>({ ...ours, name: 'providers', plural: 'providers' }),
    alerts: new Informer<Alert>({ ...ours, name: 'alerts', plural: 'alerts' }),
    // Optional: a cluster whose CRDs predate PullRequestPreview still runs everything else.
    previews: new Informer<PullRequestPreview>({
      ...ours,
      name: 'pullrequestpreviews',
      plural: 'pullrequestpreviews',
      optional: {},
    }),
    // Optional too: a cluster whose CRDs predate DriftDetection runs everything else.
    detections: new Informer<DriftDetection>({
      ...ours,
      name: 'driftdetections',
      plural: 'driftdetections',
      optional: {},
    }),
    stacks: new Informer<Stack>({
      ...common,
      name: 'stacks',
      group: STACK_GROUP,
      version: STACK_VERSION,
      plural: STACK_PLURAL,
      transform: slimStack,
    }),
    // PKO v1 clusters have no Update CRD: an absent Update kind means "no Updates", not "not
    // ready" (docs/events.md, "Optional CRDs").
    updates: new Informer<Update>({
      ...common,
      name: 'updates',
      group: UPDATE_GROUP,
      version: UPDATE_VERSION,
      plural: UPDATE_PLURAL,
      transform: slim,
      optional: {},
    }),
  };
}

export async function startController(
  opts: ControllerOptions,
  deps: ControllerDeps,
): Promise<ControllerHandle> {
  const { kubeConfig: kc, logger } = deps;
  const registry = deps.registry ?? new Registry();
  if (!deps.registry) collectDefaultMetrics({ register: registry });
  const namespace = opts.watchNamespace === '' ? undefined : opts.watchNamespace;
  const notReady = deps.notReadyRetryMs !== undefined ? { notReadyRetryMs: deps.notReadyRetryMs } : {};
  const child = (bindings: Record<string, string>): Logger => logger.child(bindings);

  // Part of every default commit-status context: never a name two clusters share by default (N15).
  // Throws ClusterNameError (the caller refuses to start) when it cannot be derived.
  const cluster = await resolveClusterName(kc, opts.clusterName);
  const clusterName = cluster.name;
  logger.info(
    {
      clusterName,
      source: cluster.source,
      ...(cluster.uid !== undefined ? { kubeSystemUID: cluster.uid } : {}),
    },
    cluster.source === 'flag'
      ? `cluster name ${clusterName} (--cluster-name)`
      : `cluster name ${clusterName}, derived from the kube-system namespace UID ${cluster.uid ?? ''}; set --cluster-name to choose one`,
  );

  // Where Provider connections may go (--egress-* flags).
  const egress = egressPolicy(opts.egress);

  // Caches and indexes.
  const inf = informers(opts, kc, logger, registry);
  const all = [inf.providers, inf.alerts, inf.previews, inf.detections, inf.stacks, inf.updates] as const;
  const redactor = deps.redactor ?? new Redactor();
  const providerIndex = new ProviderIndex(redactor);
  const alertIndex = new AlertIndex();
  const health = new ProviderHealth();
  const liveStacks = new LiveStacks(inf.stacks);
  const recorder = new EventRecorder(kc, {
    component: CONTROLLER_NAME,
    logger: child({ component: 'events' }),
  });

  // Reconcilers: validate Providers and Alerts, publish them to the indexes.
  const providerReconciler = new ProviderReconciler({
    kubeConfig: kc,
    providers: inf.providers,
    readSecret: secretReader(kc),
    recorder,
    logger: child({ reconciler: 'provider' }),
    health,
    index: providerIndex,
    secretRefreshMs: deps.secretRefreshMs ?? opts.secretRefreshMs,
    egress,
    ...notReady,
  });
  // Tenant templates are compiled and rendered in worker threads, never on this event loop; the
  // built-in ones (an Alert with no templateRef and a Provider with no commitStatus.context) here.
  const sandboxLog = child({ component: 'template-sandbox' });
  const sandbox = new TemplateSandbox({
    onWorkerReplaced: (lane, why) => {
      sandboxLog.warn({ lane }, `template worker replaced: ${why}`);
    },
  });
  const configMaps = new TemplateConfigMaps({
    kubeConfig: kc,
    logger: child({ component: 'template-configmaps' }),
    relistIntervalMs: opts.relistIntervalMs,
    // Called on watch events only, after the queue below exists.
    onChange: (ns, name) => {
      requeueAlertsUsing(inf.alerts, alertQueue, ns, name);
    },
  });
  const alertReconciler = new AlertReconciler({
    kubeConfig: kc,
    alerts: inf.alerts,
    providers: inf.providers,
    index: alertIndex,
    recorder,
    logger: child({ reconciler: 'alert' }),
    allowCrossNamespace: !opts.noCrossNamespaceRefs,
    // Sources in other namespaces only for Alerts the admission policy checked.
    crossNamespaceAdmission: new AdmissionPolicyCheck({
      kubeConfig: kc,
      name: ALERT_SOURCES_POLICY_NAME,
      kind: 'Alert',
    }),
    templates: lazyBuiltinsInline(sandbox),
    configMaps,
  });
  // The Provider and Alert queues: two workers each, a log and metrics labelled with the kind.
  const queueOf = (name: 'provider' | 'alert', reconcile: WorkQueueOptions['reconcile']): WorkQueue =>
    new WorkQueue({ name, concurrency: 2, reconcile, logger: child({ queue: name }), registry });
  const providerQueue = queueOf('provider', (k) => providerReconciler.reconcile(k));
  const alertQueue = queueOf('alert', (k) => alertReconciler.reconcile(k));

  // Delivery: ledger, send façade, dispatcher, Alert status.
  const ledger = new Ledger({
    kubeConfig: kc,
    logger: child({ component: 'ledger' }),
    registry,
    // A Provider's window slot is free again only once its event is recorded, so the batching
    // delay is on every windowed event's path: 1 ms still batches what is recorded together,
    // 5 ms (the default) cost 5 ms per event (docs/benchmarks.md).
    flushDelayMs: 1,
  });
  const statusWriter = new DeliveryStatusWriter(kc, child({ component: 'delivery-status' }));
  const sender = new Sender({
    ports: {
      notifiers: deps.notifiers ?? createProviderTypes({ egress, githubWritePacing: opts.githubWritePacing }),
      health,
    },
    clusterName,
    logger: child({ component: 'sender' }),
    redactor,
    registry,
    providerWindow: opts.providerWindow,
  });
  const dispatcher = new Dispatcher({
    logger: child({ component: 'dispatcher' }),
    ledger,
    recorder,
    alerts: alertIndex,
    providers: providerIndex,
    sender,
    credentials: providerReconciler,
    outcomes: statusWriter,
    redactor,
    registry,
    ...(deps.retry ? { retry: deps.retry } : {}),
    // Sends only while the Lease is surely ours (the elector is created below).
    maySend: () => elector?.holdsLease() ?? true,
    providerWindow: opts.providerWindow,
  });

  registerStatusMetrics(registry, {
    sources: [
      { kind: 'Provider', list: () => inf.providers.list() },
      { kind: 'Alert', list: () => inf.alerts.list() },
      { kind: 'PullRequestPreview', list: () => inf.previews.list() },
    ],
    pending: () => dispatcher.pendingCount,
  });
  // 1 while this replica holds the Lease (always 1 without --leader-elect): leader changes show
  // as changes of this gauge across replicas (docs/metrics.md).
  const leaderGauge = gauge(
    registry,
    'pkonc_leader',
    'Whether this replica is the leader (1) or waits for the Lease (0).',
    [],
  );

  // A finished PKO v2 run's change set (workspace log → parse → Secrets removed), on its events.
  const changeAttacher = new ChangeAttacher({
    kubeConfig: kc,
    update: (ns, name) => inf.updates.get(ns, name),
    readSecret: secretReader(kc),
    logger: child({ component: 'changes' }),
    // Pulumi Cloud reads (PKO v1, or a cut log) connect where Providers may.
    cloud: { dispatcher: egressDispatcher(egress) },
    warn: (stack, reason, message) => {
      void recorder.event(
        { ...stack, apiVersion: stack.apiVersion ?? 'pulumi.com/v1', kind: 'Stack' },
        'Warning',
        reason,
        message,
      );
    },
  });

  // Drift checks: DriftDetection → check Stacks → drift events in its status (src/drift).
  const drift = new DriftController({
    kubeConfig: kc,
    detections: inf.detections,
    stacks: inf.stacks,
    updates: inf.updates,
    readChanges: (stack, update) => changeAttacher.changesOf(stack, update),
    logger: child({ component: 'drift' }),
    registry,
    maxChecks: opts.driftMaxChecks,
    maxChecksPerNamespace: opts.driftMaxChecksPerNamespace,
    mayWrite: () => elector?.holdsLease() ?? true,
    remediation: new AdmissionPolicyCheck({
      kubeConfig: kc,
      name: REMEDIATION_POLICY_NAME,
      kind: 'DriftDetection',
    }),
    ...deps.drift,
  });

  // Routing: Stack and Update changes → events → matching Alerts → delivery.
  const router = new Router({
    enrich: (stack, ev) => changeAttacher.attach(stack, ev),
    moreEvents: (stack) =>
      driftEventsFor(stack, inf.detections.list(stack.metadata.namespace ?? ''), {
        reportingController: CONTROLLER_NAME,
      }),
    kubeConfig: kc,
    stacks: inf.stacks,
    updates: inf.updates,
    alerts: alertIndex,
    delivery: dispatcher,
    logger: child({ component: 'router' }),
    reportingController: CONTROLLER_NAME,
    registry,
    isPreviewBase: (ns, name) => inf.previews.list(ns).some((p) => p.spec.stackRef.name === name),
    // Only while the Lease is surely ours, like the dispatcher's sends.
    recordRunCommit: async (ns, name, revision, resourceVersion) => {
      if (elector !== undefined && !elector.holdsLease()) throw new Error('not holding the Lease');
      await kubeRequest<unknown>(kc, {
        method: 'PATCH',
        path: objectPath({
          group: UPDATE_GROUP,
          version: UPDATE_VERSION,
          plural: UPDATE_PLURAL,
          namespace: ns,
          name,
        }),
        // Conditioned on the version read: the one stored is the one PKO wrote last.
        body: {
          metadata: {
            resourceVersion,
            annotations: { [RUN_COMMIT_ANNOTATION]: revision, [RUN_OBSERVED_ANNOTATION]: resourceVersion },
          },
        },
        contentType: 'application/merge-patch+json',
      });
    },
    stuckAfterMs: opts.stackStuckAfterMs,
  });

  // Pull-request previews: PullRequestPreview → preview Stacks; results flow through the router.
  const previews = new Previews({
    kubeConfig: kc,
    previews: inf.previews,
    stacks: inf.stacks,
    providers: providerIndex,
    readSecret: secretReader(kc),
    recorder,
    logger: child({ component: 'preview' }),
    clusterName,
    egress,
    registry,
    // Status resolutions and deliveries to the same status never interleave (N18).
    serializeTarget: (k, fn) => sender.serializeTarget(k, fn),
    webhookBindAddress: opts.previewWebhookBindAddress,
    webhookMaxBodyBytes: opts.previewWebhookMaxBodyBytes,
    isLeader: () => state.leading,
    providerType: (ns, name) => inf.providers.get(ns, name)?.spec.type,
    // Writes only while the Lease is surely ours, like the dispatcher's sends.
    mayWrite: () => elector?.holdsLease() ?? true,
    ...(deps.previews ? { reconciler: deps.previews } : {}),
  });

  // Connections.
  watchProviders(inf.providers, inf.alerts, { providers: providerQueue, alerts: alertQueue });
  watchAlerts(inf.alerts, alertQueue, dispatcher);
  alertIndex.onChange((key, alert) => {
    // Deleted, suspended, replaced or changed: its waits and sends end now (B06).
    dispatcher.cancelAlert(key);
    if (alert) router.resyncAll();
  });
  // An Alert waiting for its Provider or template: the Stacks it selects get their runs' commits
  // recorded (src/alert/router.ts), including runs finished before it was compiled.
  alertIndex.onSelecting(() => {
    router.resyncAll();
  });
  providerIndex.onChange((key, resolved) => {
    // Deleted, not usable (e.g. its Secret deleted) or suspended: its sends stop now (B06,
    // N10); changed settings (a rotated token) or usable again: held events go now.
    if (resolved === undefined || resolved.suspend) dispatcher.cancelProvider(key);
    else dispatcher.wakeProvider(key);
  });
  // A Provider that became usable releases held events sooner than the retry timer.
  providerIndex.onUsable(() => {
    router.resyncAll();
  });
  // A DriftDetection's status holds drift events: its Stacks' events are derived again.
  inf.detections.on('update', (d) => {
    for (const e of d.status?.stacks ?? [])
      if (e.lastEvent !== undefined) router.queue.add(`${d.metadata.namespace ?? ''}/${e.name}`);
  });
  inf.detections.on('add', (d) => {
    for (const e of d.status?.stacks ?? [])
      if (e.lastEvent !== undefined) router.queue.add(`${d.metadata.namespace ?? ''}/${e.name}`);
  });
  // A deleted Stack's entries go (no per-entry liveness scans on writes).
  liveStacks.onDelete((uid) => {
    ledger.forgetStack(uid);
  });
  health.onChange((key) => {
    providerQueue.add(key);
  });

  // Lifecycle.
  const state = { leading: false, ledgerLoaded: false, stopped: false };
  const ready = (): Check => {
    if (state.leading && !state.ledgerLoaded) return { ok: false, message: 'loading the delivery ledger' };
    for (const i of all) {
      const h = i.health();
      if (!i.hasSynced()) return { ok: false, message: `informer ${i.name} has not synced: ${h.message}` };
      if (!h.ok) return { ok: false, message: `informer ${i.name}: ${h.message}` };
    }
    return { ok: true, message: 'ok' };
  };
  const servers = await startServers({
    metricsBindAddress: opts.metricsBindAddress,
    healthProbeBindAddress: opts.healthProbeBindAddress,
    registry,
    checks: { healthz: () => ({ ok: true, message: 'ok' }), readyz: ready },
  });
  await previews.listen();
  for (const i of all) i.start();

  /** After the informers synced, as leader: reconcile everything once, read the ledger, then route. */
  const startWork = async (): Promise<void> => {
    await Promise.all(all.map((i) => i.waitForSync()));
    state.leading = true;
    providerQueue.start();
    alertQueue.start();
    for (const p of inf.providers.list()) providerQueue.add(keyOf(p));
    for (const a of inf.alerts.list()) alertQueue.add(keyOf(a));
    // A --watch-label-selector shard reads only the ledger of the Alerts it serves (others are
    // read when first served): it never writes another shard's DeliveryLedger objects.
    const served =
      opts.watchLabelSelector !== ''
        ? new Set(inf.alerts.list().map((a) => a.metadata.uid ?? ''))
        : undefined;
    await ledger.loadWithRetry(namespace, served ? (uid) => served.has(uid) : undefined);
    const pruned = ledger.pruneStacks((uid) => liveStacks.isAlive(uid) !== false);
    if (pruned > 0) logger.info({ entries: pruned }, 'delivery-ledger entries of deleted Stacks dropped');
    state.ledgerLoaded = true;
    router.start();
    previews.start();
    drift.start();
  };
  const startWorkLogged = (): void => {
    startWork().catch((err: unknown) => {
      logger.error({ err: err instanceof Error ? err.message : String(err) }, 'cannot start work');
    });
  };
  const elector = opts.leaderElect
    ? new LeaderElector(kc, {
        namespace: opts.leaderElectionNamespace,
        name: opts.leaderElectionID,
        identity: opts.identity,
        leaseDurationMs: opts.leaseDurationMs,
        renewDeadlineMs: opts.renewDeadlineMs,
        retryPeriodMs: opts.retryPeriodMs,
        logger,
      })
    : undefined;
  if (elector) {
    elector.run({
      onStartedLeading: () => {
        leaderGauge.set(1);
        logger.info({ identity: opts.identity }, 'became leader');
        startWorkLogged();
      },
      onStoppedLeading: () => {
        // stop() releases the Lease on purpose: that is a shutdown, not a lost election.
        if (state.stopped) return;
        state.leading = false;
        leaderGauge.set(0);
        logger.warn({ identity: opts.identity }, 'lost leadership');
        deps.onLostLeadership?.();
      },
      onNewLeader: (id) => {
        logger.info({ leader: id }, 'leader observed');
      },
    });
  } else {
    leaderGauge.set(1);
    startWorkLogged();
  }

  return {
    clusterName,
    metricsPort: servers.metricsPort,
    probePort: servers.probePort,
    alertIndex,
    ledger,
    dispatcher,
    router,
    providers: providerIndex.all,
    previews,
    drift,
    previewWebhookPort: previews.webhookPort,
    isLeader: () => state.leading,
    ready,
    async stop() {
      if (state.stopped) return;
      state.stopped = true;
      const deadline = opts.shutdownTimeoutMs;
      const [p, a, pr] = await Promise.all([
        providerQueue.shutdown(deadline),
        alertQueue.shutdown(deadline),
        previews.stop(deadline),
        drift.stop(deadline),
        router.stop(deadline),
      ]);
      changeAttacher.stop();
      if (!p.drained || !a.drained || !pr.drained)
        logger.warn('shutdown deadline reached with work in flight');
      await dispatcher.stop(deadline);
      await configMaps.stop();
      await sandbox.close();
      await ledger.close();
      await statusWriter.close();
      await Promise.all(all.map((i) => i.stop()));
      if (elector) await elector.stop();
      await servers.close();
      state.leading = false;
    },
  };
}
