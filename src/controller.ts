/**
 * Wires the controller together: informers (Provider, Alert, Stack, Update), work queues and
 * reconcilers, health and metrics servers, leader election. `main.ts` only parses flags and
 * calls `startController`; tests call it in-process against the real API server.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Alert, Provider } from './api/v1alpha1.ts';
import { GROUP, VERSION } from './api/v1alpha1.ts';
import type { Stack, Update } from './api/pko.ts';
import {
  STACK_GROUP,
  STACK_PLURAL,
  STACK_VERSION,
  UPDATE_GROUP,
  UPDATE_PLURAL,
  UPDATE_VERSION,
} from './api/pko.ts';
import type { KubeObject } from './api/meta.ts';
import type { ControllerOptions } from './config.ts';
import type { Logger } from './log.ts';
import { Informer } from './kube/informer.ts';
import { WorkQueue } from './kube/workqueue.ts';
import { EventRecorder } from './kube/events.ts';
import { LeaderElector } from './kube/leader.ts';
import { startServers } from './kube/health.ts';
import { secretReader } from './credential/secrets.ts';
import type { ResolvedProvider, SecretReader } from './credential/provider.ts';
import { ProviderReconciler } from './reconcile/provider.ts';
import { AlertIndex, AlertReconciler } from './reconcile/alert.ts';
import { keyOf } from './reconcile/common.ts';
import { Ledger } from './delivery/ledger.ts';
import { Dispatcher, type RetryPolicy } from './delivery/dispatcher.ts';
import { DeliveryStatusWriter } from './delivery/status.ts';
import { Router } from './source/router.ts';
import { ProviderHttp } from './notifier/http.ts';
import { createNotifier } from './notifier/registry.ts';
import type { Notifier } from './notifier/types.ts';
import { Redactor } from './credential/redact.ts';
import { renderNotification } from './template/index.ts';

export const CONTROLLER_NAME = 'pko-notification-controller';

export interface ControllerDeps {
  kubeConfig: KubeConfig;
  logger: Logger;
  registry?: Registry;
  /** Override Secret reads (tests use the real API; this exists for the dev control plane's admin client). */
  readSecret?: SecretReader;
  /** Re-check interval for not-ready Providers/Alerts, ms (default 15 s). */
  notReadyRetryMs?: number;
  /** Called when leadership is lost; the process should exit (controller-runtime does the same). */
  onLostLeadership?: () => void;
  /** Delivery retry policy overrides (tests shorten it). */
  retry?: Partial<RetryPolicy>;
  /** Known secret values, shared with the logger; default: a new one. */
  redactor?: Redactor;
  /** Builds notifiers; default: the registry in src/notifier with one HTTP client per Provider. */
  createNotifier?: (p: ResolvedProvider) => Notifier;
}

export interface ControllerHandle {
  /** Ports actually bound (0 when disabled). */
  metricsPort: number;
  probePort: number;
  alertIndex: AlertIndex;
  ledger: Ledger;
  dispatcher: Dispatcher;
  router: Router;
  /** Usable Providers by `namespace/name` (Ready ones only). */
  providers: ReadonlyMap<string, ResolvedProvider>;
  isLeader(): boolean;
  ready(): { ok: boolean; message: string };
  stop(): Promise<void>;
}

/** Drops fields we never read, so 10,000 cached Stacks stay small (managedFields dominate otherwise). */
function slim<T extends KubeObject>(obj: T): T {
  if (obj.metadata) {
    const m = obj.metadata as Record<string, unknown>;
    delete m.managedFields;
    if (obj.metadata.annotations)
      delete obj.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'];
  }
  return obj;
}

function slimStack(s: Stack): Stack {
  slim(s);
  if (s.status) delete s.status.outputs;
  return s;
}

export async function startController(
  opts: ControllerOptions,
  deps: ControllerDeps,
): Promise<ControllerHandle> {
  const { kubeConfig: kc, logger } = deps;
  const registry = deps.registry ?? new Registry();
  if (!deps.registry) collectDefaultMetrics({ register: registry });
  const ns = opts.watchNamespace === '' ? undefined : opts.watchNamespace;
  const common = { kubeConfig: kc, namespace: ns, relistIntervalMs: opts.relistIntervalMs, registry };
  const ours = {
    ...common,
    ...(opts.watchLabelSelector !== '' ? { labelSelector: opts.watchLabelSelector } : {}),
  };

  const providers = new Informer<Provider>({
    ...ours,
    name: 'providers',
    group: GROUP,
    version: VERSION,
    plural: 'providers',
    transform: slim,
    logger,
  });
  const alerts = new Informer<Alert>({
    ...ours,
    name: 'alerts',
    group: GROUP,
    version: VERSION,
    plural: 'alerts',
    transform: slim,
    logger,
  });
  const stacks = new Informer<Stack>({
    ...common,
    name: 'stacks',
    group: STACK_GROUP,
    version: STACK_VERSION,
    plural: STACK_PLURAL,
    transform: slimStack,
    logger,
  });
  // PKO v1 clusters have no Update CRD: an absent Update kind means "no Updates", not "not ready"
  // (docs: README, "Event model: PKO v1 and v2").
  const updates = new Informer<Update>({
    ...common,
    name: 'updates',
    group: UPDATE_GROUP,
    version: UPDATE_VERSION,
    plural: UPDATE_PLURAL,
    transform: slim,
    logger,
    optional: {},
  });
  const informers = [providers, alerts, stacks, updates] as const;

  const recorder = new EventRecorder(kc, {
    component: CONTROLLER_NAME,
    logger: logger.child({ component: 'events' }),
  });
  const alertIndex = new AlertIndex();
  const usableProviders = new Map<string, ResolvedProvider>();
  const redactor = deps.redactor ?? new Redactor();
  /** Provider key → what the last failed send said about it (cleared by a successful send). */
  const deliveryProblems = new Map<string, { reason: string; message: string }>();
  const readSecret = deps.readSecret ?? secretReader(kc);

  const providerReconciler = new ProviderReconciler({
    kubeConfig: kc,
    providers,
    readSecret,
    recorder,
    logger: logger.child({ reconciler: 'provider' }),
    ...(deps.notReadyRetryMs !== undefined ? { notReadyRetryMs: deps.notReadyRetryMs } : {}),
    deliveryProblem: (key) => deliveryProblems.get(key),
    onResolved: (key, resolved) => {
      const prev = usableProviders.get(key);
      if (resolved) {
        usableProviders.set(key, resolved);
        redactor.set(key, resolved.secretValues);
      } else {
        usableProviders.delete(key);
      }
      // A Provider that became usable releases held events sooner than the retry timer.
      if (resolved && !prev) router.resyncAll();
    },
  });
  const alertReconciler = new AlertReconciler({
    kubeConfig: kc,
    alerts,
    providers,
    index: alertIndex,
    recorder,
    logger: logger.child({ reconciler: 'alert' }),
    allowCrossNamespace: !opts.noCrossNamespaceRefs,
    ...(deps.notReadyRetryMs !== undefined ? { notReadyRetryMs: deps.notReadyRetryMs } : {}),
  });
  const ledger = new Ledger({
    kubeConfig: kc,
    logger: logger.child({ component: 'ledger' }),
    registry,
    isStackAlive: (uid) => (stacks.hasSynced() ? stackUids.has(uid) : undefined),
  });
  const stackUids = new Set<string>();
  stacks.on('add', (s) => {
    if (s.metadata.uid) stackUids.add(s.metadata.uid);
  });
  stacks.on('delete', (s) => {
    if (s.metadata.uid) stackUids.delete(s.metadata.uid);
  });
  const statusWriter = new DeliveryStatusWriter(kc, logger.child({ component: 'delivery-status' }));
  const dispatcher = new Dispatcher({
    logger: logger.child({ component: 'dispatcher' }),
    ledger,
    recorder,
    alert: (key) => alertIndex.get(key),
    provider: (key) => usableProviders.get(key),
    createNotifier:
      deps.createNotifier ??
      ((p) => {
        const http = new ProviderHttp(p);
        try {
          return createNotifier(p, { http });
        } catch (err) {
          void http.close();
          throw err;
        }
      }),
    onOutcome: (r) => {
      statusWriter.record(r);
    },
    redact: (text) => redactor.redact(text),
    onProviderHealth: (key, problem) => {
      const prev = deliveryProblems.get(key);
      if (problem) deliveryProblems.set(key, problem);
      else deliveryProblems.delete(key);
      if (prev?.reason !== problem?.reason || prev?.message !== problem?.message) providerQueue.add(key);
    },
    render: (alert, p, ev) =>
      renderNotification(alert.templates, ev, {
        clusterName: opts.clusterName,
        providerType: p.type,
        commentsEnabled: p.pullRequestComment,
        onTemplateError: (template, message) => {
          logger.warn(
            { alert: alert.key, template },
            `template failed at render time, used the built-in one: ${message}`,
          );
        },
      }),
    registry,
    ...(deps.retry ? { retry: deps.retry } : {}),
  });
  const router = new Router({
    kubeConfig: kc,
    stacks,
    updates,
    alerts: () => alertIndex.all(),
    dispatcher,
    logger: logger.child({ component: 'router' }),
    reportingController: CONTROLLER_NAME,
    registry,
  });
  alertIndex.onChange(() => {
    router.resyncAll();
  });

  const providerQueue = new WorkQueue({
    name: 'provider',
    concurrency: 2,
    reconcile: (k) => providerReconciler.reconcile(k),
    logger: logger.child({ queue: 'provider' }),
    registry,
  });
  const alertQueue = new WorkQueue({
    name: 'alert',
    concurrency: 2,
    reconcile: (k) => alertReconciler.reconcile(k),
    logger: logger.child({ queue: 'alert' }),
    registry,
  });

  const enqueueAlertsFor = (p: Provider): void => {
    for (const a of alerts.list(p.metadata.namespace)) {
      if (a.spec.providerRef.name === p.metadata.name) alertQueue.add(keyOf(a));
    }
  };
  providers.on('add', (p) => {
    providerQueue.add(keyOf(p));
    enqueueAlertsFor(p);
  });
  providers.on('update', (p, old) => {
    if (p.metadata.generation !== old.metadata.generation || !p.status?.observedGeneration)
      providerQueue.add(keyOf(p));
    enqueueAlertsFor(p);
  });
  providers.on('delete', (p) => {
    providerQueue.add(keyOf(p));
    enqueueAlertsFor(p);
  });
  alerts.on('add', (a) => {
    alertQueue.add(keyOf(a));
  });
  alerts.on('update', (a, old) => {
    if (a.metadata.generation !== old.metadata.generation || !a.status?.observedGeneration)
      alertQueue.add(keyOf(a));
  });
  alerts.on('delete', (a) => {
    alertQueue.add(keyOf(a));
    if (a.metadata.uid) dispatcher.dropAlert(a.metadata.uid);
  });

  const ready = (): { ok: boolean; message: string } => {
    if (leading && !ledgerLoaded) return { ok: false, message: 'loading the delivery ledger' };
    for (const inf of informers) {
      const h = inf.health();
      if (!inf.hasSynced())
        return { ok: false, message: `informer ${inf.name} has not synced: ${h.message}` };
      if (!h.ok) return { ok: false, message: `informer ${inf.name}: ${h.message}` };
    }
    return { ok: true, message: 'ok' };
  };

  const servers = await startServers({
    metricsBindAddress: opts.metricsBindAddress,
    healthProbeBindAddress: opts.healthProbeBindAddress,
    registry,
    checks: { healthz: () => ({ ok: true, message: 'ok' }), readyz: ready },
  });

  for (const inf of informers) inf.start();

  let leading = false;
  let stopped = false;
  const startWork = async (): Promise<void> => {
    leading = true;
    providerQueue.start();
    alertQueue.start();
    // Level-based: after gaining leadership every object is reconciled once.
    for (const p of providers.list()) providerQueue.add(keyOf(p));
    for (const a of alerts.list()) alertQueue.add(keyOf(a));
    // What earlier leaders delivered, before anything is sent.
    for (let attempt = 0; ; attempt++) {
      try {
        await ledger.load(ns);
        break;
      } catch (err) {
        logger.warn(
          { err: err instanceof Error ? err.message : String(err), attempt },
          'cannot read the delivery ledger; retrying',
        );
        await new Promise((r) => setTimeout(r, Math.min(30_000, 500 * 2 ** attempt)));
      }
    }
    ledgerLoaded = true;
    router.start();
  };
  let ledgerLoaded = false;
  const startWorkLogged = (): void => {
    void startWork().catch((err: unknown) => {
      logger.error({ err: err instanceof Error ? err.message : String(err) }, 'cannot start work');
    });
  };
  let elector: LeaderElector | undefined;
  if (opts.leaderElect) {
    elector = new LeaderElector(kc, {
      namespace: opts.leaderElectionNamespace,
      name: opts.leaderElectionID,
      identity: opts.identity,
      leaseDurationMs: opts.leaseDurationMs,
      renewDeadlineMs: opts.renewDeadlineMs,
      retryPeriodMs: opts.retryPeriodMs,
      logger,
    });
    elector.run({
      onStartedLeading: () => {
        logger.info({ identity: opts.identity }, 'became leader');
        void Promise.all(informers.map((i) => i.waitForSync())).then(startWorkLogged);
      },
      onStoppedLeading: () => {
        // stop() releases the Lease on purpose: that is a shutdown, not a lost election.
        if (stopped) return;
        leading = false;
        logger.warn({ identity: opts.identity }, 'lost leadership');
        deps.onLostLeadership?.();
      },
      onNewLeader: (id) => {
        logger.info({ leader: id }, 'leader observed');
      },
    });
  } else {
    void Promise.all(informers.map((i) => i.waitForSync())).then(startWorkLogged);
  }

  return {
    metricsPort: servers.metricsPort,
    probePort: servers.probePort,
    alertIndex,
    ledger,
    dispatcher,
    router,
    providers: usableProviders,
    isLeader: () => leading,
    ready,
    async stop() {
      if (stopped) return;
      stopped = true;
      const deadline = opts.shutdownTimeoutMs;
      const [p, a] = await Promise.all([
        providerQueue.shutdown(deadline),
        alertQueue.shutdown(deadline),
        router.stop(deadline),
      ]);
      if (!p.drained || !a.drained) logger.warn('shutdown deadline reached with work in flight');
      await dispatcher.stop(deadline);
      await ledger.close();
      await statusWriter.close();
      await Promise.all(informers.map((i) => i.stop()));
      if (elector) await elector.stop();
      await servers.close();
      leading = false;
    },
  };
}
