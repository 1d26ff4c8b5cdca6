/**
 * Delivery: per (Alert, Stack) a lane that hands that Stack's events to the Alert's Provider in
 * order, one at a time; per Provider a queue with bounded concurrency; per credential a gate that
 * honours `Retry-After`; retries with exponential backoff and jitter; the ledger records each
 * event once handled, so restarts, relists and leader changes neither lose nor repeat it.
 *
 * Level-based: `offer()` is called with the complete set of events a Stack currently implies for
 * an Alert (after every change, relist or restart). Events already in the ledger, or older than
 * the Alert itself (a new Alert does not replay history), are dropped; the rest wait in the lane.
 *
 * Outcomes per event:
 * - delivered — the Provider answered 2xx;
 * - skipped — nothing to send, with a stated reason (git Provider and no commit: F03/F04;
 *   suspended Alert/Provider; a Started whose run has already finished);
 * - failed — a final error (4xx other than 408/409/429, or retries exhausted): a Warning Event on
 *   the Alert, a metric, and the Alert's `status.lastDelivery`;
 * - held — the Provider is not Ready or we are stopping: nothing recorded, retried later.
 * All but held move the ledger watermark.
 */
import { runKey, type NotificationEvent } from '../api/event.ts';
import { isGitProviderType, type ProviderType } from '../api/v1alpha1.ts';
import type { CompiledAlert } from '../alert/matcher.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { redact } from '../credential/redact.ts';
import type { EventRecorder } from '../kube/events.ts';
import { jitteredBackoff, sleep, systemClock, type Clock } from '../kube/clock.ts';
import { counter, histogram } from '../kube/metrics.ts';
import type { Logger } from '../log.ts';
import type { Registry } from 'prom-client';
import PQueue from 'p-queue';
import { parseRevision } from '../source/revision.ts';
import { ProviderError } from '../notifier/errors.ts';
import type { Notifier, RenderedNotification } from '../notifier/types.ts';
import type { TemplateSet } from '../template/index.ts';
import { CredentialGate, credentialKey } from './gate.ts';
import type { Ledger, LedgerAlertRef } from './ledger.ts';
import { comparePositions, positionOf, RESULT_RANK, STARTED_RANK, type EventPosition } from './order.ts';
import { API_VERSION } from '../api/v1alpha1.ts';

/** A Ready Alert as the router and dispatcher use it. */
export interface RoutedAlert {
  /** `namespace/name` */
  key: string;
  uid: string;
  /** `metadata.creationTimestamp` in epoch ms: events older than the Alert are not sent. */
  createdMs: number;
  compiled: CompiledAlert;
  /** The Alert's templates (built-ins overridden by its ConfigMap and the Provider's context). */
  templates: TemplateSet;
}

export type DeliveryResult = 'Delivered' | 'Skipped' | 'Failed';

export interface DeliveryOutcomeReport {
  alertKey: string;
  provider: string;
  result: DeliveryResult;
  reason: string;
  /** Redacted and bounded. */
  message: string;
  event: NotificationEvent;
}

export interface RetryPolicy {
  /** First backoff, ms (default 1 s). */
  initialMs: number;
  /** Backoff cap, ms (default 5 min). */
  maxMs: number;
  /** Give up (final failure) after this long, ms (default 24 h — the Update TTL). */
  maxElapsedMs: number;
}

export interface DispatcherOptions {
  logger: Logger;
  ledger: Ledger;
  recorder: EventRecorder;
  /** Current routed Alert by key (undefined when deleted or not Ready). */
  alert: (key: string) => RoutedAlert | undefined;
  /** Ready Providers by `namespace/name`. */
  provider: (key: string) => ResolvedProvider | undefined;
  /** Builds a notifier for a resolved Provider (throws for unimplemented types). */
  createNotifier: (p: ResolvedProvider) => Notifier;
  /** Renders an event for a Provider (templates); default: the event message only. */
  render?: (alert: RoutedAlert, p: ResolvedProvider, ev: NotificationEvent) => RenderedNotification;
  onOutcome?: (report: DeliveryOutcomeReport) => void;
  registry?: Registry;
  clock?: Clock;
  retry?: Partial<RetryPolicy>;
  /** In-flight sends per Provider (default 4). */
  providerConcurrency?: number;
  /** Re-check interval while a Provider is not Ready, ms (default 5 s). */
  heldRetryMs?: number;
  /**
   * Told what sends reveal about a Provider (`namespace/name`): a TLS, proxy or authentication
   * failure (`CertificateError`, `ProxyError`, `AuthenticationFailed`), or undefined after a success.
   */
  onProviderHealth?: (providerKey: string, problem: { reason: string; message: string } | undefined) => void;
  /** Redacts every secret the controller knows (all Providers'), on top of the Provider's own. */
  redact?: (text: string) => string;
}

interface Pending {
  ev: NotificationEvent;
  pos: EventPosition;
}

interface Lane {
  key: string;
  alertKey: string;
  stackUid: string;
  pending: Map<string, Pending>;
  running: boolean;
  timer: unknown;
}

/** Minimal interval (ms) between two sends of one Provider, from facts/forges.md. */
const PACING_MS: Partial<Record<ProviderType, number>> = {
  slack: 1000,
  msteams: 250,
  discord: 500,
  googlechat: 1000,
};

export class Dispatcher {
  readonly #o: DispatcherOptions;
  readonly #clock: Clock;
  readonly #retry: RetryPolicy;
  readonly #lanes = new Map<string, Lane>();
  readonly #queues = new Map<string, PQueue>();
  readonly #notifiers = new Map<string, { p: ResolvedProvider; n: Notifier }>();
  readonly #gate: CredentialGate;
  readonly #abort = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #m;

  constructor(opts: DispatcherOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? systemClock;
    this.#gate = new CredentialGate(this.#clock);
    this.#retry = { initialMs: 1000, maxMs: 300_000, maxElapsedMs: 86_400_000, ...opts.retry };
    const r = opts.registry;
    this.#m = {
      outcomes: counter(r, 'pkonc_deliveries_total', 'Events handled per Provider type and result', [
        'provider_type',
        'result',
        'reason',
      ]),
      attempts: counter(r, 'pkonc_delivery_attempts_total', 'Send attempts per Provider type and outcome', [
        'provider_type',
        'outcome',
      ]),
      duration: histogram(
        r,
        'pkonc_delivery_duration_seconds',
        'Time of one send attempt',
        ['provider_type'],
        [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      ),
    };
  }

  #stopping(): boolean {
    return this.#abort.signal.aborted;
  }

  /** Events waiting in lanes (for tests and metrics). */
  get pendingCount(): number {
    let n = 0;
    for (const l of this.#lanes.values()) n += l.pending.size;
    return n;
  }

  /**
   * Offers the events a Stack currently implies for `alert` (already filtered by the matcher and
   * carrying the Alert's metadata). Idempotent: offering the same events again changes nothing.
   */
  offer(alert: RoutedAlert, stackUid: string, events: readonly NotificationEvent[]): void {
    if (this.#abort.signal.aborted) return;
    const laneKey = `${alert.uid}/${stackUid}`;
    let lane = this.#lanes.get(laneKey);
    for (const ev of events) {
      const pos = positionOf(ev);
      if (this.#o.ledger.isDone(alert.uid, stackUid, pos, ev.id)) continue;
      if (!this.#o.ledger.position(alert.uid, stackUid) && (Date.parse(ev.timestamp) || 0) < alert.createdMs)
        continue;
      if (!lane) {
        lane = {
          key: laneKey,
          alertKey: alert.key,
          stackUid,
          pending: new Map(),
          running: false,
          timer: undefined,
        };
        this.#lanes.set(laneKey, lane);
      }
      lane.alertKey = alert.key;
      lane.pending.set(ev.id, { ev, pos });
    }
    if (lane) this.#kick(lane);
  }

  #kick(lane: Lane): void {
    if (lane.running || lane.timer !== undefined || this.#abort.signal.aborted) return;
    lane.running = true;
    const p = this.#runLane(lane)
      .catch((err: unknown) => {
        this.#o.logger.error(
          { lane: lane.key, err: err instanceof Error ? err.message : String(err) },
          'delivery lane crashed; retrying',
        );
        this.#later(lane, this.#o.heldRetryMs ?? 5000);
      })
      .finally(() => {
        lane.running = false;
        this.#running.delete(p);
        if (lane.pending.size === 0 && lane.timer === undefined) this.#lanes.delete(lane.key);
        else if (lane.timer === undefined) this.#kick(lane);
      });
    this.#running.add(p);
  }

  #later(lane: Lane, ms: number): void {
    if (lane.timer !== undefined || this.#abort.signal.aborted) return;
    lane.timer = this.#clock.setTimeout(() => {
      lane.timer = undefined;
      this.#kick(lane);
    }, ms);
  }

  /** Next event of a lane in position order, dropping what is done and Started of finished runs. */
  #next(lane: Lane, alertUid: string): Pending | undefined {
    const items = [...lane.pending.values()].sort((a, b) => comparePositions(a.pos, b.pos));
    const finishedRuns = new Set(
      items.filter((i) => i.pos.rank === RESULT_RANK).map((i) => runKey(i.ev.identity)),
    );
    for (const item of items) {
      if (this.#o.ledger.isDone(alertUid, lane.stackUid, item.pos, item.ev.id)) {
        lane.pending.delete(item.ev.id);
        continue;
      }
      if (item.pos.rank === STARTED_RANK && finishedRuns.has(runKey(item.ev.identity))) {
        // The run finished before we got to announce its start: send only the result.
        lane.pending.delete(item.ev.id);
        continue;
      }
      return item;
    }
    return undefined;
  }

  async #runLane(lane: Lane): Promise<void> {
    while (!this.#abort.signal.aborted) {
      const alert = this.#o.alert(lane.alertKey);
      if (!alert || !lane.key.startsWith(`${alert.uid}/`)) {
        // Alert deleted, replaced, or not Ready: keep the events while it exists, re-check later.
        if (!alert) this.#later(lane, this.#o.heldRetryMs ?? 5000);
        else lane.pending.clear();
        return;
      }
      const item = this.#next(lane, alert.uid);
      if (!item) return;
      // A Started still being retried is dropped as soon as its run's result is known.
      const superseded = (): boolean =>
        item.pos.rank === STARTED_RANK &&
        [...lane.pending.values()].some(
          (o) => o.pos.rank === RESULT_RANK && runKey(o.ev.identity) === runKey(item.ev.identity),
        );
      const result = await this.#deliver(alert, item.ev, superseded);
      if (result === 'held') {
        this.#later(lane, this.#o.heldRetryMs ?? 5000);
        return;
      }
      const ref: LedgerAlertRef = {
        namespace: alert.compiled.namespace,
        name: alert.compiled.name,
        uid: alert.uid,
      };
      await this.#o.ledger.advance(ref, lane.stackUid, item.pos, item.ev.id);
      lane.pending.delete(item.ev.id);
    }
  }

  #report(
    alert: RoutedAlert,
    p: ResolvedProvider | undefined,
    ev: NotificationEvent,
    result: DeliveryResult,
    reason: string,
    message: string,
  ): void {
    this.#m.outcomes.inc({ provider_type: p?.type ?? 'unknown', result, reason });
    this.#o.onOutcome?.({
      alertKey: alert.key,
      provider: alert.compiled.spec.providerRef.name,
      result,
      reason,
      message: this.#o.redact ? this.#o.redact(message) : message,
      event: ev,
    });
  }

  #notifier(key: string, p: ResolvedProvider): Notifier {
    const cached = this.#notifiers.get(key);
    if (cached?.p === p) return cached.n;
    if (cached) void cached.n.close();
    const n = this.#o.createNotifier(p);
    this.#notifiers.set(key, { p, n });
    return n;
  }

  #queue(key: string, p: ResolvedProvider): PQueue {
    let q = this.#queues.get(key);
    if (!q) {
      const pacing = PACING_MS[p.type];
      q = new PQueue({
        concurrency: this.#o.providerConcurrency ?? 4,
        ...(pacing !== undefined ? { intervalCap: 1, interval: pacing } : {}),
      });
      this.#queues.set(key, q);
    }
    return q;
  }

  async #deliver(
    alert: RoutedAlert,
    ev: NotificationEvent,
    superseded: () => boolean = () => false,
  ): Promise<'Delivered' | 'Skipped' | 'Failed' | 'held'> {
    const providerKey = `${alert.compiled.namespace}/${alert.compiled.spec.providerRef.name}`;
    const log = this.#o.logger.child({
      alert: alert.key,
      provider: providerKey,
      event: ev.id,
      reason: ev.reason,
    });
    const p = this.#o.provider(providerKey);
    if (!p) return 'held';
    if (alert.compiled.spec.suspend === true || p.suspend) {
      this.#report(
        alert,
        p,
        ev,
        'Skipped',
        'Suspended',
        `${alert.compiled.spec.suspend === true ? 'Alert' : 'Provider'} is suspended`,
      );
      return 'Skipped';
    }
    if (isGitProviderType(p.type) && !ev.metadata.commit) {
      // F03/F04: a commit status needs a real SHA. Explained once: the ledger then moves past it.
      const why = parseRevision(ev.metadata.revision).reason ?? 'the event has no git commit';
      const message = `not sent to ${p.type} Provider ${providerKey}: ${why}`;
      log.info({ skipReason: 'NoCommit' }, message);
      this.#report(alert, p, ev, 'Skipped', 'NoCommit', message);
      return 'Skipped';
    }
    let notifier: Notifier;
    try {
      notifier = this.#notifier(providerKey, p);
    } catch (err) {
      return this.#fail(
        alert,
        p,
        ev,
        'NotImplemented',
        redact(err instanceof Error ? err.message : String(err), p.secretValues),
        log,
      );
    }
    const rendered: RenderedNotification = this.#o.render
      ? this.#o.render(alert, p, ev)
      : { message: ev.message };
    const cred = credentialKey(p);
    const started = this.#clock.now();
    for (let attempt = 0; ; attempt++) {
      await this.#gate.wait(cred, this.#abort.signal);
      if (this.#stopping()) return 'held';
      if (attempt > 0 && superseded()) {
        this.#m.outcomes.inc({ provider_type: p.type, result: 'Skipped', reason: 'Superseded' });
        log.info('run finished while its start was being retried: sending only the result');
        return 'Skipped';
      }
      if (this.#o.provider(providerKey) !== p) return 'held'; // Provider changed or went away: re-resolve.
      const t0 = this.#clock.now();
      try {
        await this.#queue(providerKey, p).add(() => notifier.send(ev, rendered));
        this.#m.duration.observe({ provider_type: p.type }, (this.#clock.now() - t0) / 1000);
        this.#m.attempts.inc({ provider_type: p.type, outcome: 'success' });
        this.#o.onProviderHealth?.(providerKey, undefined);
        log.debug({ attempt }, 'delivered');
        this.#report(alert, p, ev, 'Delivered', 'Delivered', `${ev.reason} delivered to ${p.type}`);
        return 'Delivered';
      } catch (err) {
        const pe =
          err instanceof ProviderError
            ? err
            : new ProviderError(err instanceof Error ? err.message : String(err), {
                retryable: true,
                code: 'INTERNAL',
                secretValues: p.secretValues,
              });
        this.#m.attempts.inc({ provider_type: p.type, outcome: pe.code });
        if (pe.retryAfterMs !== undefined) this.#gate.block(cred, this.#clock.now() + pe.retryAfterMs);
        const problem =
          pe.code === 'TLS'
            ? 'CertificateError'
            : pe.code === 'PROXY'
              ? 'ProxyError'
              : pe.status === 401 || (pe.status === 403 && pe.retryAfterMs === undefined)
                ? 'AuthenticationFailed'
                : undefined;
        if (problem)
          this.#o.onProviderHealth?.(providerKey, {
            reason: problem,
            message: this.#o.redact ? this.#o.redact(pe.message) : pe.message,
          });
        const elapsed = this.#clock.now() - started;
        if (!pe.retryable) return this.#fail(alert, p, ev, 'DeliveryFailed', pe.message, log);
        if (elapsed >= this.#retry.maxElapsedMs) {
          return this.#fail(
            alert,
            p,
            ev,
            'RetriesExhausted',
            `gave up after ${Math.round(elapsed / 1000)} s: ${pe.message}`,
            log,
          );
        }
        const delay = Math.max(
          jitteredBackoff(attempt, this.#retry.initialMs, this.#retry.maxMs),
          pe.retryAfterMs ?? 0,
        );
        log.warn(
          { attempt, retryInMs: delay, code: pe.code, status: pe.status },
          `delivery failed, retrying: ${pe.message}`,
        );
        await sleep(this.#clock, delay, this.#abort.signal);
        if (this.#stopping()) return 'held';
      }
    }
  }

  async #fail(
    alert: RoutedAlert,
    p: ResolvedProvider,
    ev: NotificationEvent,
    reason: string,
    message: string,
    log: Logger,
  ): Promise<'Failed'> {
    const own = redact(
      `${ev.reason} for ${ev.involvedObject.namespace}/${ev.involvedObject.name} not delivered: ${message}`,
      p.secretValues,
    );
    const text = this.#o.redact ? this.#o.redact(own) : own;
    log.error({ failReason: reason }, text);
    this.#report(alert, p, ev, 'Failed', reason, text);
    await this.#o.recorder.event(
      {
        apiVersion: API_VERSION,
        kind: 'Alert',
        metadata: { namespace: alert.compiled.namespace, name: alert.compiled.name, uid: alert.uid },
      },
      'Warning',
      reason,
      text,
    );
    return 'Failed';
  }

  /** Forgets every waiting event of a deleted Alert (its lanes would otherwise wait forever). */
  dropAlert(alertUid: string): void {
    for (const [key, lane] of this.#lanes) {
      if (!key.startsWith(`${alertUid}/`)) continue;
      lane.pending.clear();
      if (lane.timer !== undefined) this.#clock.clearTimeout(lane.timer);
      lane.timer = undefined;
      if (!lane.running) this.#lanes.delete(key);
    }
  }

  /** Stops sending: in-flight sends finish or are abandoned after `deadlineMs`; nothing is recorded for held events. */
  async stop(deadlineMs = 10_000): Promise<void> {
    this.#abort.abort();
    for (const lane of this.#lanes.values()) {
      if (lane.timer !== undefined) this.#clock.clearTimeout(lane.timer);
      lane.timer = undefined;
    }
    await Promise.race([Promise.allSettled([...this.#running]), sleep(systemClock, deadlineMs)]);
    await Promise.allSettled([...this.#notifiers.values()].map((x) => x.n.close()));
  }
}
