/**
 * Alert reconciler: compiles the Alert (RE2 regexes, source selectors), checks that sources in
 * other namespaces are allowed, checks its Provider and
 * template ConfigMap, writes `status.observedGeneration` + `Ready`, and publishes the compiled
 * Alert to the routing index. Regexes are compiled here, once per generation — never per event.
 * Templates are compiled and test-rendered in the template sandbox (src/template/sandbox.ts),
 * once per content; the `templateRef` ConfigMap is watched (./template-configmap-informers.ts), so an edit applies
 * at once.
 *
 * Sources outside the Alert's namespace (docs/threat-model.md): refused
 * (`CrossNamespaceForbidden`) unless the controller runs with `--no-cross-namespace-refs=false`;
 * then honoured only for an Alert the admission policy {@link ALERT_SOURCES_POLICY_NAME} checked —
 * in force as shipped, and the Alert created after it (src/preview/admission.ts) — else
 * `CrossNamespaceUnchecked`. Only admission knows who wrote the Alert, and only a writer who may
 * list Stacks in a namespace passes it; an Alert refused here is neither routed nor selecting, so
 * nothing of that namespace is read or recorded on its behalf.
 */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { Alert, Provider } from '../api/v1alpha1.ts';
import type { Informer } from '../kube/informer.ts';
import type { ReconcileResult } from '../kube/workqueue.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { Logger } from '../log.ts';
import { compileAlert, firstCrossNamespaceSource, type CompiledAlert } from '../alert/compile.ts';
import type { AlertIndex } from '../alert/routed.ts';
import type { AlertTemplates, TemplateCompiler } from '../template/index.ts';
import { ALERT_SOURCES_POLICY_NAME, GROUP, VERSION } from '../api/v1alpha1.ts';
import { KubeApiError, kubeRequest, objectPath } from '../kube/client.ts';
import { findCondition, readyCondition, type ReadyState } from '../kube/status.ts';
import { keyOf, settleReady, specChanged, splitKey } from './common.ts';

/** Where the Alert reconciler reads template ConfigMaps (./template-configmap-informers.ts `TemplateConfigMaps`). */
export interface TemplateSource {
  use(alertKey: string, ref: { namespace: string; name: string } | undefined): void;
  data(namespace: string, name: string): Promise<Record<string, string> | undefined>;
}

export interface AlertReconcilerDeps {
  kubeConfig: KubeConfig;
  alerts: Informer<Alert>;
  providers: Informer<Provider>;
  index: AlertIndex;
  recorder: EventRecorder;
  logger: Logger;
  /** `!--no-cross-namespace-refs`: whether sources outside the Alert's namespace may be honoured at all. */
  allowCrossNamespace: boolean;
  /**
   * Whether an Alert created at a time was checked by the admission policy
   * {@link ALERT_SOURCES_POLICY_NAME} (an `AdmissionPolicyCheck` with that name and kind
   * `Alert`). Asked only for Alerts with sources outside their namespace while
   * `allowCrossNamespace`; absent: every such Alert is `CrossNamespaceUnchecked`.
   */
  crossNamespaceAdmission?: AdmissionVerdicts;
  /** Compiles templates (the template sandbox). */
  templates: TemplateCompiler;
  /** Template ConfigMaps, watched. */
  configMaps: TemplateSource;
  now?: () => Date;
}

/**
 * Whether an object created at `created` was checked by an admission policy in force (src/preview/admission.ts
 * `AdmissionPolicyCheck.checked`); `what` names what was checked in the reason.
 */
export interface AdmissionVerdicts {
  checked(
    created: string | Date | undefined,
    what: string,
  ): Promise<{ allowed: true } | { allowed: false; why: string }>;
}

/**
 * How often an Alert selecting other namespaces is checked again, ms: the reuse of one look-up of
 * the policy (src/preview/admission.ts `ADMISSION_CHECK_TTL_MS`).
 */
const CROSS_NAMESPACE_RECHECK_MS = 60_000;

/** Template checks that did not finish (see `retry`) before the last answer stands, per Alert. */
const MAX_UNFINISHED_CHECKS = 5;

export class AlertReconciler {
  readonly #d: AlertReconcilerDeps;
  /** Consecutive unfinished template checks per Alert key (cleared by any finished one). */
  readonly #unfinished = new Map<string, number>();

  constructor(deps: AlertReconcilerDeps) {
    this.#d = deps;
  }

  /** The Provider from the cache, else from the API (the cache may lag an `apply` of both at once). */
  async #provider(namespace: string, name: string): Promise<Provider | 'lagging' | undefined> {
    const cached = this.#d.providers.get(namespace, name);
    if (cached) return cached;
    try {
      await kubeRequest(this.#d.kubeConfig, {
        method: 'GET',
        path: objectPath({ group: GROUP, version: VERSION, plural: 'providers', namespace, name }),
      });
      return 'lagging';
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) return undefined;
      throw err;
    }
  }

  /** Why the cross-namespace sources of `alert` are not honoured (admission did not check them), or undefined. */
  async #crossNamespaceUnchecked(alert: Alert): Promise<string | undefined> {
    const check = this.#d.crossNamespaceAdmission;
    if (check === undefined) return 'the controller runs without the admission check of Alerts';
    try {
      const v = await check.checked(alert.metadata.creationTimestamp, 'its eventSources were');
      return v.allowed ? undefined : v.why;
    } catch (err) {
      return `cannot check the admission policy: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  async reconcile(key: string): Promise<ReconcileResult | undefined> {
    const { namespace, name } = splitKey(key);
    const alert = this.#d.alerts.get(namespace, name);
    if (!alert || alert.metadata.deletionTimestamp) {
      this.#unfinished.delete(key);
      this.#d.configMaps.use(key, undefined);
      this.#d.index.set(key, undefined);
      this.#d.index.setSelecting(key, undefined);
      return undefined;
    }
    let state: ReadyState;
    let compiled: CompiledAlert | undefined;
    let templates: AlertTemplates | undefined;
    let c:
      ReturnType<typeof compileAlert> | { ok: false; reason: 'CrossNamespaceUnchecked'; message: string } =
      compileAlert(alert, {
        allowCrossNamespace: this.#d.allowCrossNamespace,
      });
    // Sources outside the namespace, allowed by the flag: honoured only if admission checked them.
    const cross = c.ok ? firstCrossNamespaceSource(c.alert) : undefined;
    if (c.ok && cross !== undefined) {
      const why = await this.#crossNamespaceUnchecked(alert);
      if (why !== undefined) {
        c = {
          ok: false,
          reason: 'CrossNamespaceUnchecked',
          message:
            `eventSources[${cross.index}].namespace ${JSON.stringify(cross.namespace)} selects events outside the Alert's namespace ` +
            `${JSON.stringify(namespace)}, which this controller honours only for Alerts that ValidatingAdmissionPolicy ` +
            `${ALERT_SOURCES_POLICY_NAME} admitted (their writer may list Stacks there): ${why}`,
        };
      }
    }
    const provider = c.ok ? await this.#provider(namespace, alert.spec.providerRef.name) : undefined;
    const ref = alert.spec.templateRef;
    this.#d.configMaps.use(key, ref ? { namespace, name: ref.name } : undefined);
    const templateData = ref ? await this.#d.configMaps.data(namespace, ref.name) : {};
    if (!c.ok) {
      state = { ready: false, reason: c.reason, message: c.message };
    } else if (provider === 'lagging') {
      // Created together with the Alert: our cache has not seen it yet. Check again shortly.
      return { requeueAfterMs: 500 };
    } else if (!provider) {
      state = {
        ready: false,
        reason: 'ProviderNotFound',
        message: `Provider '${namespace}/${alert.spec.providerRef.name}' (spec.providerRef) not found`,
      };
    } else if (templateData === undefined) {
      // The watch brings the ConfigMap when it is created: no polling.
      state = {
        ready: false,
        reason: 'TemplateNotFound',
        message: `ConfigMap '${namespace}/${alert.spec.templateRef?.name ?? ''}' (spec.templateRef) not found`,
      };
    } else {
      const context = provider.spec.commitStatus?.context;
      const t = await this.#d.templates.compile(
        templateData,
        context !== undefined ? { commitStatusContext: context } : {},
      );
      if (!t.ok && t.retry === true && (this.#unfinished.get(key) ?? 0) < MAX_UNFINISHED_CHECKS) {
        // The template check did not finish (out of time under load, or its worker was replaced):
        // not a verdict, so the Alert keeps its state and is checked again shortly — a few times,
        // then the last answer stands.
        this.#unfinished.set(key, (this.#unfinished.get(key) ?? 0) + 1);
        this.#d.logger.info({ alert: key, why: t.message }, 'template check did not finish; checking again');
        return { requeueAfterMs: 2_000 };
      }
      this.#unfinished.delete(key);
      if (!t.ok) {
        const where =
          t.template === 'commitStatusContext' && context !== undefined
            ? `Provider '${namespace}/${provider.metadata.name ?? ''}' spec.commitStatus.context`
            : `template '${t.template}'${alert.spec.templateRef ? ` (ConfigMap '${namespace}/${alert.spec.templateRef.name}')` : ''}`;
        state = {
          ready: false,
          reason: 'InvalidTemplate',
          // A built-in template's failure names it itself, and no ConfigMap: it is not the tenant's.
          message:
            t.builtin === true
              ? t.message
              : `${where}${t.line !== null ? ` line ${t.line}` : ''}: ${t.message}`,
        };
      } else {
        compiled = c.alert;
        templates = t.templates;
        state = {
          ready: true,
          reason: 'Succeeded',
          message: alert.spec.suspend ? 'Alert is ready (suspended: nothing is routed)' : 'Alert is ready',
        };
      }
      // A Provider that is not Ready: the Alert says so in its own condition, and stays routed —
      // its events are held and go out as soon as the Provider is usable again.
      const pc = provider.status?.conditions?.find((x) => x.type === 'Ready');
      if (state.ready && pc?.status === 'False') {
        state = {
          ready: false,
          reason: 'ProviderNotReady',
          message: `Provider '${namespace}/${alert.spec.providerRef.name}' is not ready (${pc.reason}): ${pc.message}; events are held until it is`,
        };
      }
    }
    this.#d.index.set(
      key,
      compiled && templates && alert.metadata.uid !== undefined
        ? {
            key,
            uid: alert.metadata.uid,
            namespace,
            name,
            providerName: alert.spec.providerRef.name,
            createdMs: new Date(alert.metadata.creationTimestamp ?? 0).getTime(),
            // The index keeps the smallest one seen (src/alert/routed.ts): eligibility by observation.
            sinceRv: /^[1-9]\d{0,15}$/.test(alert.metadata.resourceVersion ?? '')
              ? Number(alert.metadata.resourceVersion)
              : undefined,
            compiled,
            templates,
          }
        : undefined,
    );
    // Selecting before Ready (after the Ready index is set, so only an Alert left out of it is
    // announced as new): the runs of its Stacks get their commits recorded meanwhile.
    this.#d.index.setSelecting(key, c.ok ? c.alert : undefined);
    const previous = findCondition(alert.status?.conditions, 'Ready');
    const transitioned = await settleReady(this.#d, 'Alert', alert, state, { alert: key });
    // settleReady reports a new reason; a new message under the same reason (a missing binding now
    // present, but the Alert older than it) is new advice too, so it gets its own Warning Event —
    // an identical repeat does not (and the recorder folds those).
    const message = readyCondition(state, alert.metadata.generation ?? 0).message;
    if (!transitioned && !state.ready && previous?.status === 'False' && previous.message !== message) {
      this.#d.logger.warn({ alert: key, reason: state.reason }, state.message);
      await this.#d.recorder.event(
        { apiVersion: alert.apiVersion, kind: 'Alert', metadata: alert.metadata },
        'Warning',
        state.reason,
        state.message,
      );
    }
    // An Alert selecting other namespaces is checked again when the look-up of the policy expires:
    // a policy deleted or changed since stops it, one installed later does not start it.
    if (cross !== undefined) return { requeueAfterMs: CROSS_NAMESPACE_RECHECK_MS };
    // A missing Provider comes back through the Provider informer (it re-queues referencing
    // Alerts), a missing or changed ConfigMap through its watch: nothing to poll.
    return undefined;
  }
}

/**
 * Queues an Alert when it is added or deleted, and when its spec changed (generation) or it has no
 * status yet; `delivery` forgets the waiting events of a deleted Alert.
 */
export function watchAlerts(
  alerts: Informer<Alert>,
  queue: { add(key: string): void },
  delivery: { dropAlert(alertUid: string): void },
): void {
  alerts.on('add', (a) => {
    queue.add(keyOf(a));
  });
  alerts.on('update', (a, old) => {
    if (specChanged(a, old)) queue.add(keyOf(a));
  });
  alerts.on('delete', (a) => {
    queue.add(keyOf(a));
    if (a.metadata.uid) delivery.dropAlert(a.metadata.uid);
  });
}

/** Queues the Alerts of `namespace` whose `spec.templateRef` names ConfigMap `name` (it changed). */
export function requeueAlertsUsing(
  alerts: Informer<Alert>,
  queue: { add(key: string): void },
  namespace: string,
  name: string,
): void {
  for (const a of alerts.list(namespace)) {
    if (a.spec.templateRef?.name === name) queue.add(keyOf(a));
  }
}
