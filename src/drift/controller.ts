/**
 * The drift check controller (docs/drift.md): one work-queue key per DriftDetection
 * (`namespace/name`, fair across namespaces). A sync of a DriftDetection, for each Stack it
 * selects (./plan.ts):
 * - a check in flight: abandoned without an event when its check Stack is gone or replaced, or
 *   the checked Stack started a run or moved to another commit (the check Stack is deleted,
 *   entry `Deferred`); finished when the check Stack's run is done: its change set is read from
 *   the workspace log (`readChanges`, the same reading and redaction as run events), the entry
 *   moved on and its event recorded (./plan.ts `afterCheck`), the check Stack deleted; failed
 *   after {@link CHECK_TIMEOUT_MS};
 * - else, when due and not suspended: deferred when the Stack runs or is not Ready at a known
 *   commit, else a check Stack is created — at most one per sync (the queue's round-robin across
 *   namespaces then shares the slots fairly), and only while fewer than `maxChecks` checks run in
 *   the cluster and `maxChecksPerNamespace` in the namespace; the others wait for a slot.
 * Check Stacks are created, read and deleted only when this DriftDetection controls them (owner
 * reference) and, for deletion, still the same object (`preconditions.uid`). Every write first
 * asks `mayWrite()` (the leader Lease). After a drift, `spec.remediate` asks PKO to run the
 * Stack (`pulumi.com/reconciliation-request`) only while the admission policy of config/admission
 * guards who may set it (./admission.ts in src/preview: the confused deputy, docs/drift.md).
 */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { Registry } from 'prom-client';
import type { EventChanges } from '../api/event.ts';
import type { Condition } from '../api/meta.ts';
import { stackRef, type Stack, type Update } from '../api/pko.ts';
import {
  DRIFT_CHECK_LABEL,
  GROUP,
  VERSION,
  type DriftDetection,
  type DriftStackStatus,
} from '../api/v1alpha1.ts';
import { errorMessage, errorStatusCode, kubeRequest, objectPath } from '../kube/client.ts';
import type { Informer } from '../kube/informer.ts';
import { counter, gauge } from '../kube/metrics.ts';
import { kubeTime, readyCondition, setCondition, type ReadyState } from '../kube/status.ts';
import { WorkQueue } from '../kube/workqueue.ts';
import type { Logger } from '../log.ts';
import { boundText, cleanMessage } from '../text.ts';
import {
  CHECK_TIMEOUT_MS,
  DEFER_RETRY_MS,
  MAX_STATUS_STACKS,
  afterCheck,
  analyzeDrift,
  checkOwnedBy,
  checkStack,
  checkStackName,
  deferred,
  firstDue,
  intervalNote,
  intervalOf,
  latestDue,
  isDriftCheck,
  isRunning,
  nextDue,
  readiness,
  selectStacks,
  type CheckOutcome,
} from './plan.ts';

/** Annotation that makes PKO run a Stack now (a new value each time). */
export const RECONCILE_REQUEST_ANNOTATION = 'pulumi.com/reconciliation-request';
/** Name of the admission policy and binding that guard `spec.remediate` (config/admission). */
export const REMEDIATION_POLICY_NAME = 'pko-notification-controller-drift-remediation';
/** Default `--drift-max-checks`: check Stacks at once in the cluster. */
export const DEFAULT_MAX_CHECKS = 4;
/** Default `--drift-max-checks-per-namespace`. */
export const DEFAULT_MAX_CHECKS_PER_NAMESPACE = 2;
/** Parallel DriftDetection syncs (fair across namespaces). */
export const DRIFT_WORKERS = 2;
/** Requeue of a DriftDetection with a Stack waiting for a check slot, ms. */
export const SLOT_RETRY_MS = 5_000;

/** Whether remediation of a DriftDetection created at `created` is guarded (src/preview/admission.ts). */
export interface RemediationGuard {
  checked(
    created: string | Date | undefined,
    what: string,
  ): Promise<{ allowed: true } | { allowed: false; why: string }>;
}

export interface DriftControllerOptions {
  kubeConfig: KubeConfig;
  detections: Pick<Informer<DriftDetection>, 'get' | 'list' | 'on'>;
  stacks: Pick<Informer<Stack>, 'get' | 'list' | 'on'>;
  updates: Pick<Informer<Update>, 'get'>;
  /**
   * The change set of a finished run of `stack` (src/enrich/changes.ts `ChangeAttacher.changesOf`:
   * the workspace log, redacted of the Stack's Secret values), or why none.
   */
  readChanges: (stack: Stack, update: Update) => Promise<EventChanges>;
  logger: Logger;
  registry?: Registry;
  /** Check Stacks at once in the cluster (default {@link DEFAULT_MAX_CHECKS}). */
  maxChecks?: number;
  /** Check Stacks at once in one namespace (default {@link DEFAULT_MAX_CHECKS_PER_NAMESPACE}). */
  maxChecksPerNamespace?: number;
  /** Whether this replica may write now (the leader Lease); default always. */
  mayWrite?: () => boolean;
  /** Guards `spec.remediate`; absent: remediation is always refused. */
  remediation?: RemediationGuard;
  now?: () => number;
  random?: () => number;
  /** Retry of a deferred check, ms (default {@link DEFER_RETRY_MS}). */
  deferRetryMs?: number;
  /** Deadline of one check, ms (default {@link CHECK_TIMEOUT_MS}). */
  checkTimeoutMs?: number;
  /** Called after a DriftDetection's status changed a Stack's last event (the router re-derives). */
  onEvent?: (namespace: string, stackName: string) => void;
}

const namespaceOf = (key: string): string => key.slice(0, key.indexOf('/'));

/** A resourceVersion as a number (etcd revision), or undefined when it is not one. */
function rvNumber(rv: string | undefined): number | undefined {
  return rv !== undefined && /^[1-9]\d{0,15}$/.test(rv) ? Number(rv) : undefined;
}

/** Drift checks of every DriftDetection (see the module comment). */
export class DriftController {
  readonly #o: DriftControllerOptions;
  readonly queue: WorkQueue;
  readonly #now: () => number;
  readonly #random: () => number;
  /** Check Stacks created by this process and not yet in the informer: `namespace/name`. */
  readonly #created = new Map<string, number>();
  /**
   * The status this process last wrote per DriftDetection uid, with the resourceVersion the write
   * produced: used while the informer still holds an older version (a sync right after a write
   * must not act on the entries before it, e.g. take its own deleted check Stack for a deleted one).
   */
  readonly #written = new Map<string, { rv: number; status: DriftDetection['status'] }>();
  readonly #m;

  constructor(opts: DriftControllerOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    this.#random = opts.random ?? Math.random;
    this.queue = new WorkQueue({
      name: 'driftdetection',
      concurrency: DRIFT_WORKERS,
      reconcile: (k) => this.reconcile(k),
      logger: opts.logger,
      fairBy: namespaceOf,
      ...(opts.registry ? { registry: opts.registry } : {}),
    });
    this.#m = {
      checks: counter(opts.registry, 'pkonc_drift_checks_total', 'Drift checks ended, by result', ['result']),
      inFlight: gauge(opts.registry, 'pkonc_drift_checks_in_flight', 'Drift check Stacks that exist now', []),
    };
    const key = (o: { metadata?: { namespace?: string; name?: string } }): string =>
      `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
    opts.detections.on('add', (d) => {
      this.queue.add(key(d));
    });
    opts.detections.on('update', (d, old) => {
      if (d.metadata.generation !== old.metadata.generation) this.queue.add(key(d));
    });
    const onStack = (s: Stack): void => {
      const ns = s.metadata.namespace ?? '';
      if (isDriftCheck(s)) {
        this.#created.delete(key(s));
        this.queue.add(`${ns}/${s.metadata.labels?.[DRIFT_CHECK_LABEL] ?? ''}`);
        return;
      }
      // A base Stack changed: every DriftDetection of its namespace looks (cheap: informer reads).
      for (const d of opts.detections.list(ns)) this.queue.add(key(d));
    };
    opts.stacks.on('add', onStack);
    opts.stacks.on('update', onStack);
    opts.stacks.on('delete', onStack);
  }

  start(): void {
    this.queue.start();
    for (const d of this.#o.detections.list())
      this.queue.add(`${d.metadata.namespace ?? ''}/${d.metadata.name ?? ''}`);
  }

  async stop(deadlineMs: number): Promise<void> {
    await this.queue.shutdown(deadlineMs);
  }

  /** Whether a DriftDetection with `uid` is in the informer. */
  #known(uid: string): boolean {
    return this.#o.detections.list().some((d) => d.metadata.uid === uid);
  }

  #mayWrite(): boolean {
    return this.#o.mayWrite?.() ?? true;
  }

  /** Check Stacks now (the informer's, plus ones just created): in the cluster and in `ns`. */
  #inFlight(ns: string): { cluster: number; namespace: number } {
    const now = this.#now();
    let cluster = 0;
    let namespace = 0;
    const seen = new Set<string>();
    for (const s of this.#o.stacks.list()) {
      if (!isDriftCheck(s)) continue;
      const k = `${s.metadata.namespace ?? ''}/${s.metadata.name ?? ''}`;
      seen.add(k);
      cluster++;
      if (s.metadata.namespace === ns) namespace++;
    }
    for (const [k, at] of this.#created) {
      if (seen.has(k) || now - at > 60_000) {
        this.#created.delete(k);
        continue;
      }
      cluster++;
      if (namespaceOf(k) === ns) namespace++;
    }
    this.#m.inFlight.set(cluster);
    return { cluster, namespace };
  }

  async reconcile(key: string): Promise<{ requeueAfterMs?: number } | undefined> {
    const ns = namespaceOf(key);
    const name = key.slice(ns.length + 1);
    const cached = this.#o.detections.get(ns, name);
    if (cached === undefined || cached.metadata.deletionTimestamp !== undefined) {
      if (cached === undefined)
        for (const [uid] of this.#written) if (!this.#known(uid)) this.#written.delete(uid);
      return undefined;
    }
    let dd: DriftDetection = cached;
    const mine = this.#written.get(cached.metadata.uid ?? '');
    if (mine !== undefined) {
      const rv = rvNumber(cached.metadata.resourceVersion);
      if (rv !== undefined && rv < mine.rv) dd = { ...cached, status: mine.status ?? {} };
      else this.#written.delete(cached.metadata.uid ?? '');
    }
    if (!this.#mayWrite()) return { requeueAfterMs: 2_000 };
    const now = this.#now();
    const interval = intervalOf(dd);
    if (typeof interval === 'string') {
      await this.#writeStatus(dd, { ready: false, reason: 'IntervalTooShort', message: interval });
      return undefined;
    }
    const label = (s: Stack): string => s.spec?.stack ?? `${ns}/${s.metadata.name ?? ''}`;
    const selected = selectStacks(dd, this.#o.stacks.list(ns));
    const prevByUid = new Map((dd.status?.stacks ?? []).map((e) => [e.uid, e]));
    const remediate = dd.spec.remediate === true ? await this.#remediationVerdict(dd) : undefined;
    const entries: DriftStackStatus[] = [];
    let startedOne = false;
    let waiting = false;
    let soonest = Number.POSITIVE_INFINITY;
    const selectedUids = new Set<string>();
    for (const base of selected) {
      const sUid = base.metadata.uid ?? '';
      selectedUids.add(sUid);
      const prev: DriftStackStatus = prevByUid.get(sUid) ?? { name: base.metadata.name ?? '', uid: sUid };
      let e = prev;
      if (e.check !== undefined) {
        e = await this.#inFlightStep(dd, base, e, { now, interval, label: label(base), remediate });
      } else if (dd.spec.suspend !== true) {
        const due = e.nextCheckTime !== undefined ? Date.parse(e.nextCheckTime) : NaN;
        if (Number.isNaN(due)) {
          e = { ...e, nextCheckTime: kubeTime(new Date(firstDue(now, interval, this.#random))) };
        } else if (due > latestDue(now, interval)) {
          // Planned under a longer interval (e.g. one stored above the ceiling): planned again.
          e = { ...e, nextCheckTime: kubeTime(new Date(nextDue(now, interval, this.#random))) };
        } else if (due <= now) {
          const r = readiness(base);
          if ('why' in r) {
            e = deferred(
              e,
              r.why,
              now,
              r.running
                ? now + (this.#o.deferRetryMs ?? DEFER_RETRY_MS)
                : nextDue(now, interval, this.#random),
            );
          } else {
            const slots = this.#inFlight(ns);
            if (
              startedOne ||
              slots.cluster >= (this.#o.maxChecks ?? DEFAULT_MAX_CHECKS) ||
              slots.namespace >= (this.#o.maxChecksPerNamespace ?? DEFAULT_MAX_CHECKS_PER_NAMESPACE)
            ) {
              waiting = true;
            } else {
              e = await this.#startCheck(dd, base, e, r.commit, now);
              startedOne = e.check !== undefined;
            }
          }
        }
      }
      if (e.check !== undefined) soonest = Math.min(soonest, now + 30_000);
      const next = e.nextCheckTime !== undefined ? Date.parse(e.nextCheckTime) : NaN;
      if (e.check === undefined && !Number.isNaN(next)) soonest = Math.min(soonest, next);
      if (e.lastEvent !== undefined && e.lastEvent !== prev.lastEvent) this.#o.onEvent?.(ns, e.name);
      entries.push(e);
    }
    // Checks of Stacks no longer selected (deleted, relabelled): abandoned, no event.
    for (const e of dd.status?.stacks ?? []) {
      if (selectedUids.has(e.uid) || e.check === undefined) continue;
      await this.#deleteCheck(dd, ns, e.check.name, e.check.uid);
    }
    const listed = entries.slice(0, MAX_STATUS_STACKS);
    await this.#writeStatus(
      dd,
      {
        ready: true,
        reason: dd.spec.suspend === true ? 'Suspended' : 'Succeeded',
        message:
          dd.spec.suspend === true
            ? `suspended: no new checks of the ${String(selected.length)} selected Stacks`
            : `${String(selected.length)} Stack${selected.length === 1 ? '' : 's'} selected, ` +
              (intervalNote(dd) ?? `checked every ${dd.spec.interval ?? '1h'}`),
      },
      { stacks: listed, stacksOmitted: entries.length - listed.length },
      remediate,
    );
    if (startedOne || waiting) return { requeueAfterMs: startedOne ? 0 : SLOT_RETRY_MS };
    return Number.isFinite(soonest) ? { requeueAfterMs: Math.max(1_000, soonest - now) } : undefined;
  }

  async #remediationVerdict(
    dd: DriftDetection,
  ): Promise<{ allowed: true } | { allowed: false; why: string }> {
    if (this.#o.remediation === undefined)
      return { allowed: false, why: 'the controller runs without the remediation admission check' };
    try {
      return await this.#o.remediation.checked(dd.metadata.creationTimestamp, 'its spec.remediate was');
    } catch (err) {
      return { allowed: false, why: `cannot check the admission policy: ${errorMessage(err)}` };
    }
  }

  /** Creates the check Stack of `base` at `commit`; the entry names it. A name clash defers. */
  async #startCheck(
    dd: DriftDetection,
    base: Stack,
    e: DriftStackStatus,
    commit: string,
    now: number,
  ): Promise<DriftStackStatus> {
    const ns = base.metadata.namespace ?? '';
    const name = checkStackName(
      base.metadata.name ?? '',
      `${dd.metadata.uid ?? ''}/${base.metadata.uid ?? ''}/${commit}/${String(now)}/${String(this.#random())}`,
    );
    const body = checkStack(base, dd, name, commit);
    if (!this.#mayWrite()) throw new Error('not holding the leader Lease: no check Stack created');
    // The slot is taken before the create is sent: the two workers reconcile DriftDetections of
    // different namespaces at once, and a slot counted only once the create has answered let
    // both see a free one (4 checks ran with --drift-max-checks=3). Released if the create fails.
    const slot = `${ns}/${name}`;
    this.#created.set(slot, now);
    try {
      const created = await kubeRequest<Stack>(this.#o.kubeConfig, {
        method: 'POST',
        path: objectPath(stackRef(ns)),
        body,
      });
      return {
        ...e,
        commit,
        check: { name, uid: created.metadata.uid ?? '', startTime: kubeTime(new Date(now)) },
      };
    } catch (err) {
      this.#created.delete(slot);
      const why =
        errorStatusCode(err) === 409
          ? `a Stack named ${name} already exists; the check is tried again later`
          : `the check Stack could not be created: ${errorMessage(err)}`;
      this.#o.logger.warn(
        {
          driftDetection: `${ns}/${dd.metadata.name ?? ''}`,
          stack: base.metadata.name,
          err: errorMessage(err),
        },
        'drift check not started',
      );
      return deferred(e, why, now, now + (this.#o.deferRetryMs ?? DEFER_RETRY_MS));
    }
  }

  /** One look at a check in flight (see the module comment). */
  async #inFlightStep(
    dd: DriftDetection,
    base: Stack,
    e: DriftStackStatus,
    o: {
      now: number;
      interval: number;
      label: string;
      remediate: { allowed: true } | { allowed: false; why: string } | undefined;
    },
  ): Promise<DriftStackStatus> {
    const check = e.check;
    if (check === undefined) return e;
    const ns = base.metadata.namespace ?? '';
    const retry = o.now + (this.#o.deferRetryMs ?? DEFER_RETRY_MS);
    const cs = this.#o.stacks.get(ns, check.name);
    const justCreated = this.#created.has(`${ns}/${check.name}`);
    if (cs === undefined && justCreated) return e; // the informer has not seen our create yet
    if (cs === undefined || cs.metadata.uid !== check.uid || !checkOwnedBy(cs, dd.metadata.uid ?? '')) {
      return deferred(e, 'the check was abandoned: its check Stack was deleted', o.now, retry);
    }
    const commit = e.commit ?? '';
    if (isRunning(base) || base.status?.lastUpdate?.lastSuccessfulCommit !== commit) {
      await this.#deleteCheck(dd, ns, check.name, check.uid);
      return deferred(
        e,
        isRunning(base)
          ? 'the check was abandoned: the Stack started a run'
          : 'the check was abandoned: the Stack moved to another commit',
        o.now,
        retry,
      );
    }
    const outcome = await this.#outcome(cs);
    let result: CheckOutcome | undefined = outcome;
    if (result === undefined) {
      const started = Date.parse(check.startTime);
      if (o.now - started < (this.#o.checkTimeoutMs ?? CHECK_TIMEOUT_MS)) return e;
      result = {
        kind: 'failed',
        why: `the check's preview did not finish within ${String(Math.round((this.#o.checkTimeoutMs ?? CHECK_TIMEOUT_MS) / 60_000))} minutes`,
      };
    }
    await this.#deleteCheck(dd, ns, check.name, check.uid);
    this.#m.checks.inc({
      result: result.kind === 'drifted' ? 'Drifted' : result.kind === 'clean' ? 'Clean' : 'Failed',
    });
    let next = afterCheck(e, {
      check: check.name,
      commit,
      label: o.label,
      now: o.now,
      next: nextDue(o.now, o.interval, this.#random),
      outcome: result,
    });
    if (result.kind === 'drifted' && o.remediate !== undefined && next.lastEvent?.check === check.name) {
      next = await this.#remediate(dd, base, next, check.name, o.remediate);
    }
    return next;
  }

  /** The outcome of check Stack `cs` once its run is done; undefined while it runs. */
  async #outcome(cs: Stack): Promise<CheckOutcome | undefined> {
    const last = cs.status?.lastUpdate;
    const stalled = cs.status?.conditions?.find((c) => c.type === 'Stalled' && c.status === 'True');
    if (stalled !== undefined && (last?.state === undefined || last.state === 'failed')) {
      return {
        kind: 'failed',
        why: `the check Stack stalled (${stalled.reason}): ${boundText(stalled.message, 500)}`,
      };
    }
    if (last?.name === undefined || (last.state !== 'succeeded' && last.state !== 'failed')) return undefined;
    if (
      isRunning(cs) &&
      cs.status?.currentUpdate?.name !== undefined &&
      cs.status.currentUpdate.name !== last.name
    )
      return undefined;
    if (last.state === 'failed') {
      const text = cleanMessage(last.message ?? '');
      const line =
        text
          .split('\n')
          .filter((l) => /error/i.test(l))
          .pop() ??
        text.split('\n').pop() ??
        '';
      return { kind: 'failed', why: `the check's preview failed: ${boundText(line.trim(), 1000)}` };
    }
    const update = this.#o.updates.get(cs.metadata.namespace ?? '', last.name);
    if (update === undefined) return { kind: 'failed', why: `the check's Update ${last.name} is gone` };
    const changes = await this.#o.readChanges(cs, update);
    if (changes.set === undefined) return { kind: 'failed', why: changes.unavailable };
    const a = analyzeDrift(changes.set);
    if (a.kind === 'failed') return a;
    return a.kind === 'clean' ? { kind: 'clean' } : { kind: 'drifted', analysis: a };
  }

  /** Asks PKO to run `base` after drift, when the admission policy guards it; the entry says what happened. */
  async #remediate(
    dd: DriftDetection,
    base: Stack,
    e: DriftStackStatus,
    check: string,
    verdict: { allowed: true } | { allowed: false; why: string },
  ): Promise<DriftStackStatus> {
    if (!verdict.allowed) {
      return {
        ...e,
        message: boundText(`${e.message ?? ''}\nremediation refused: ${verdict.why}`, 4000, 'utf16'),
      };
    }
    if (!this.#mayWrite()) throw new Error('not holding the leader Lease: no remediation requested');
    try {
      await kubeRequest(this.#o.kubeConfig, {
        method: 'PATCH',
        path: objectPath(stackRef(base.metadata.namespace ?? '', base.metadata.name ?? '')),
        // The uid makes the patch apply only to the Stack that was checked.
        body: {
          metadata: {
            uid: base.metadata.uid,
            annotations: { [RECONCILE_REQUEST_ANNOTATION]: `drift-${check}` },
          },
        },
        contentType: 'application/merge-patch+json',
      });
      this.#o.logger.info(
        {
          driftDetection: `${dd.metadata.namespace ?? ''}/${dd.metadata.name ?? ''}`,
          stack: base.metadata.name,
        },
        'drift remediation: asked PKO to run the Stack',
      );
      return {
        ...e,
        message: boundText(`${e.message ?? ''}\nremediation: asked PKO to run the Stack`, 4000, 'utf16'),
      };
    } catch (err) {
      return {
        ...e,
        message: boundText(`${e.message ?? ''}\nremediation failed: ${errorMessage(err)}`, 4000, 'utf16'),
      };
    }
  }

  /** Deletes check Stack `name` if this DriftDetection controls it and it is still `uid`. */
  async #deleteCheck(dd: DriftDetection, ns: string, name: string, uid: string): Promise<void> {
    const cs = this.#o.stacks.get(ns, name);
    if (cs !== undefined && (cs.metadata.uid !== uid || !checkOwnedBy(cs, dd.metadata.uid ?? ''))) return;
    if (!this.#mayWrite()) throw new Error('not holding the leader Lease: check Stack not deleted');
    try {
      await kubeRequest(this.#o.kubeConfig, {
        method: 'DELETE',
        path: objectPath(stackRef(ns, name)),
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } },
      });
    } catch (err) {
      const code = errorStatusCode(err);
      if (code !== 404 && code !== 409) throw err;
    }
  }

  async #writeStatus(
    dd: DriftDetection,
    ready: ReadyState,
    stacks?: { stacks: DriftStackStatus[]; stacksOmitted: number },
    remediate?: { allowed: true } | { allowed: false; why: string },
  ): Promise<void> {
    const generation = dd.metadata.generation ?? 0;
    const nowDate = new Date(this.#now());
    let conditions: Condition[] = setCondition(
      dd.status?.conditions,
      readyCondition(ready, generation),
      nowDate,
    );
    if (remediate !== undefined) {
      conditions = setCondition(
        conditions,
        {
          type: 'Remediation',
          status: remediate.allowed ? 'True' : 'False',
          reason: remediate.allowed ? 'Enabled' : 'Refused',
          message: remediate.allowed
            ? 'after drift, PKO is asked to run the Stack'
            : boundText(`remediation is refused: ${remediate.why}`, 1024, 'utf16'),
          observedGeneration: generation,
        },
        nowDate,
      );
    } else {
      conditions = conditions.filter((c) => c.type !== 'Remediation');
    }
    const status: Record<string, unknown> = { observedGeneration: generation, conditions };
    if (stacks !== undefined) {
      status.stacks = stacks.stacks;
      status.stacksOmitted = stacks.stacksOmitted > 0 ? stacks.stacksOmitted : null;
    }
    const same =
      JSON.stringify({ ...dd.status, stacksOmitted: dd.status?.stacksOmitted ?? null }) ===
      JSON.stringify({ ...dd.status, ...status });
    if (same) return;
    if (!this.#mayWrite()) throw new Error('not holding the leader Lease: status not written');
    try {
      const written = await kubeRequest<DriftDetection>(this.#o.kubeConfig, {
        method: 'PATCH',
        path: `${objectPath({ group: GROUP, version: VERSION, plural: 'driftdetections', namespace: dd.metadata.namespace ?? '', name: dd.metadata.name ?? '' })}/status`,
        body: { status },
        contentType: 'application/merge-patch+json',
      });
      const rv = rvNumber(written.metadata.resourceVersion);
      if (rv !== undefined) this.#written.set(dd.metadata.uid ?? '', { rv, status: written.status });
    } catch (err) {
      if (errorStatusCode(err) === 404) return;
      throw err;
    }
  }
}
