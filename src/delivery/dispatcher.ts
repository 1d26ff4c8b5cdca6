/**
 * Delivery: per (Alert, Stack) a lane that hands that Stack's events to the Alert's Provider in
 * order, one at a time; retries with exponential backoff and jitter; the ledger records each
 * event once handled, so restarts, relists and leader changes neither lose nor repeat it. Sending
 * itself (render → credential gate → notifier) is the send façade's job (./send.ts).
 *
 * Level-based: `offer()` is called with the complete set of events a Stack currently implies for
 * an Alert (after every change, relist or restart). Events already in the ledger, or older than
 * the Alert itself (a new Alert does not replay history), are dropped; the rest wait in the lane.
 *
 * Outcomes per event (docs/architecture.md, "Delivery"):
 * - delivered — the Provider answered 2xx;
 * - skipped — nothing to send, with a stated reason (git Provider and no commit: cases F03/F04;
 *   suspended Alert or Provider; a Started whose run has already finished);
 * - failed — a final error (4xx other than 408/409/429, retries exhausted, or the Alert's templates
 *   over their render budget): a Warning Event on the Alert, a metric, and the Alert's
 *   `status.lastDelivery`;
 * - held — the Provider is not Ready or we are stopping: nothing recorded, retried later.
 * All but held move the ledger watermark.
 *
 * Shutdown (`stop`): no new attempt starts; sends already on the wire get until the deadline to
 * finish (and are recorded); past it they are cancelled through their `AbortSignal`, recorded as
 * nothing, and sent again by the next leader.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { Registry } from 'prom-client';
import { runKey, type NotificationEvent } from '../api/event.ts';
import { API_VERSION, isGitProviderType } from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { redact } from '../credential/redact.ts';
import type { KubeObject } from '../api/meta.ts';
import { jitteredBackoff, sleep, systemClock, type Clock } from '../kube/clock.ts';
import { counter } from '../kube/metrics.ts';
import type { Logger } from '../log.ts';
import type { LedgerAlertRef } from './ledger.ts';
import { comparePositions, positionOf, RESULT_RANK, STARTED_RANK, type EventPosition } from './order.ts';
import type { PreparedSend, Sender } from './send.ts';
import type {
  DeliveryAlert,
  DeliveryOutcomeReport,
  DeliveryQueue,
  DeliveryResult,
  OfferedEvent,
  RetryPolicy,
} from './types.ts';

/** The ledger as the dispatcher uses it (./ledger.ts `Ledger`). */
export interface DeliveryLedger {
  /** The watermark of (Alert, Stack), if any. */
  position(alertUid: string, stackUid: string): EventPosition | undefined;
  /** Whether the event `eventId` at `pos` was handled for (Alert, Stack). */
  isDone(alertUid: string, stackUid: string, pos: EventPosition, eventId: string): boolean;
  /** Records the event as handled; resolves once persisted; never rejects. */
  advance(alert: LedgerAlertRef, stackUid: string, pos: EventPosition, eventId: string): Promise<void>;
}

/** Where final failures are announced: a Warning Kubernetes Event on the Alert (src/kube/events.ts). */
export interface WarningRecorder {
  event(obj: KubeObject, type: 'Warning', reason: string, message: string): Promise<void>;
}

export interface DispatcherOptions {
  logger: Logger;
  ledger: DeliveryLedger;
  recorder: WarningRecorder;
  /** Current Ready Alerts by key (undefined when deleted or not Ready). */
  alerts: { get(key: string): DeliveryAlert | undefined };
  /** Usable Providers by `namespace/name`. */
  providers: { get(key: string): ResolvedProvider | undefined };
  sender: Sender;
  /** Told every outcome (the Alert's `status.lastDelivery`: ./status.ts). */
  outcomes?: { record(report: DeliveryOutcomeReport): void };
  /** Redacts every secret the controller knows (all Providers'), on top of the Provider's own (src/credential/redact.ts `Redactor`). */
  redactor?: { redact(text: string): string };
  registry?: Registry;
  clock?: Clock;
  retry?: Partial<RetryPolicy>;
  /** Re-check interval while a Provider is not Ready, ms (default 5 s). */
  heldRetryMs?: number;
}

interface Pending {
  offered: OfferedEvent;
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

type Handled = DeliveryResult | 'held';

export class Dispatcher implements DeliveryQueue {
  readonly #o: DispatcherOptions;
  readonly #clock: Clock;
  readonly #retry: RetryPolicy;
  readonly #lanes = new Map<string, Lane>();
  /** Aborted when stopping: no new attempt, backoff and gate waits end. */
  readonly #stopping = new AbortController();
  /** Aborted at the stop deadline: sends on the wire are cancelled. */
  readonly #cancel = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #m;

  constructor(opts: DispatcherOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? systemClock;
    this.#retry = { initialMs: 1000, maxMs: 300_000, maxElapsedMs: 86_400_000, ...opts.retry };
    this.#m = {
      outcomes: counter(
        opts.registry,
        'pkonc_deliveries_total',
        'Events handled per Provider type and result',
        ['provider_type', 'result', 'reason'],
      ),
    };
  }

  get #heldRetryMs(): number {
    return this.#o.heldRetryMs ?? 5000;
  }

  /** Events waiting in lanes (for tests and metrics). */
  get pendingCount(): number {
    let n = 0;
    for (const l of this.#lanes.values()) n += l.pending.size;
    return n;
  }

  offer(alert: DeliveryAlert, stackUid: string, events: readonly OfferedEvent[]): void {
    if (this.#stopping.signal.aborted) return;
    const laneKey = `${alert.uid}/${stackUid}`;
    let lane = this.#lanes.get(laneKey);
    for (const offered of events) {
      const ev = offered.event;
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
      lane.pending.set(ev.id, { offered, pos });
    }
    if (lane) this.#kick(lane);
  }

  #kick(lane: Lane): void {
    if (lane.running || lane.timer !== undefined || this.#stopping.signal.aborted) return;
    lane.running = true;
    const p = this.#runLane(lane)
      .catch((err: unknown) => {
        this.#o.logger.error(
          { lane: lane.key, err: err instanceof Error ? err.message : String(err) },
          'delivery lane crashed; retrying',
        );
        this.#later(lane, this.#heldRetryMs);
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
    if (lane.timer !== undefined || this.#stopping.signal.aborted) return;
    lane.timer = this.#clock.setTimeout(() => {
      lane.timer = undefined;
      this.#kick(lane);
    }, ms);
  }

  /** Next event of a lane in position order, dropping what is done and Started of finished runs. */
  #next(lane: Lane, alertUid: string): Pending | undefined {
    const items = [...lane.pending.values()].sort((a, b) => comparePositions(a.pos, b.pos));
    const finishedRuns = new Set(
      items.filter((i) => i.pos.rank === RESULT_RANK).map((i) => runKey(i.offered.event.identity)),
    );
    for (const item of items) {
      const ev = item.offered.event;
      if (this.#o.ledger.isDone(alertUid, lane.stackUid, item.pos, ev.id)) {
        lane.pending.delete(ev.id);
        continue;
      }
      if (item.pos.rank === STARTED_RANK && finishedRuns.has(runKey(ev.identity))) {
        // The run finished before we got to announce its start: send only the result.
        lane.pending.delete(ev.id);
        continue;
      }
      return item;
    }
    return undefined;
  }

  async #runLane(lane: Lane): Promise<void> {
    while (!this.#stopping.signal.aborted) {
      const alert = this.#o.alerts.get(lane.alertKey);
      if (!alert || !lane.key.startsWith(`${alert.uid}/`)) {
        // Alert deleted, replaced, or not Ready: keep the events while it exists, re-check later.
        if (!alert) this.#later(lane, this.#heldRetryMs);
        else lane.pending.clear();
        return;
      }
      const item = this.#next(lane, alert.uid);
      if (!item) return;
      const ev = item.offered.event;
      const run = runKey(ev.identity);
      // A Started still being retried is dropped as soon as its run's result is known.
      const superseded = (): boolean =>
        item.pos.rank === STARTED_RANK &&
        [...lane.pending.values()].some(
          (o) => o.pos.rank === RESULT_RANK && runKey(o.offered.event.identity) === run,
        );
      const result = await this.#handle(alert, item.offered, superseded);
      if (result === 'held') {
        this.#later(lane, this.#heldRetryMs);
        return;
      }
      const ref: LedgerAlertRef = { namespace: alert.namespace, name: alert.name, uid: alert.uid };
      await this.#o.ledger.advance(ref, lane.stackUid, item.pos, ev.id);
      lane.pending.delete(ev.id);
    }
  }

  #report(
    alert: DeliveryAlert,
    p: ResolvedProvider | undefined,
    ev: NotificationEvent,
    result: DeliveryResult,
    reason: string,
    message: string,
  ): void {
    this.#m.outcomes.inc({ provider_type: p?.type ?? 'unknown', result, reason });
    this.#o.outcomes?.record({
      alertKey: alert.key,
      provider: alert.providerName,
      result,
      reason,
      message: this.#o.redactor ? this.#o.redactor.redact(message) : message,
      event: ev,
    });
  }

  /** Decides what to do with one event: skip it with a reason, or send it with retries. */
  async #handle(alert: DeliveryAlert, offered: OfferedEvent, superseded: () => boolean): Promise<Handled> {
    const ev = offered.event;
    const providerKey = `${alert.namespace}/${alert.providerName}`;
    const log = this.#o.logger.child({
      alert: alert.key,
      provider: providerKey,
      event: ev.id,
      reason: ev.reason,
    });
    const p = this.#o.providers.get(providerKey);
    if (!p) return 'held';
    if (offered.skip) {
      this.#report(alert, p, ev, 'Skipped', offered.skip.reason, offered.skip.message);
      return 'Skipped';
    }
    if (p.suspend) {
      this.#report(alert, p, ev, 'Skipped', 'Suspended', 'Provider is suspended');
      return 'Skipped';
    }
    if (isGitProviderType(p.type) && !ev.metadata.commit) {
      // Cases F03/F04: a commit status needs a real SHA. Explained once: the ledger then moves past it.
      const why = ev.noCommitReason ?? 'the event has no git commit';
      const message = `not sent to ${p.type} Provider ${providerKey}: ${why}`;
      log.info({ skipReason: 'NoCommit' }, message);
      this.#report(alert, p, ev, 'Skipped', 'NoCommit', message);
      return 'Skipped';
    }
    const prepared = await this.#o.sender.prepare(alert, providerKey, p, ev);
    if (!('notifier' in prepared)) return this.#fail(alert, p, ev, prepared.code, prepared.message, log);
    return this.#sendWithRetries(alert, prepared, superseded, log);
  }

  async #sendWithRetries(
    alert: DeliveryAlert,
    s: PreparedSend,
    superseded: () => boolean,
    log: Logger,
  ): Promise<Handled> {
    const { provider: p, event: ev } = s;
    const started = this.#clock.now();
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0 && superseded()) {
        this.#m.outcomes.inc({ provider_type: p.type, result: 'Skipped', reason: 'Superseded' });
        log.info('run finished while its start was being retried: sending only the result');
        return 'Skipped';
      }
      if (this.#o.providers.get(s.providerKey) !== p) return 'held'; // Provider changed or went away: re-resolve.
      const r = await this.#o.sender.attempt(s, this.#stopping.signal, this.#cancel.signal);
      if (r.kind === 'stopped') return 'held';
      if (r.kind === 'sent') {
        log.debug({ attempt }, 'delivered');
        this.#report(alert, p, ev, 'Delivered', 'Delivered', `${ev.reason} delivered to ${p.type}`);
        return 'Delivered';
      }
      const pe = r.error;
      // Cancelled at the shutdown deadline: not a failure of the Provider; the next leader sends it.
      if (this.#cancel.signal.aborted) return 'held';
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
      await sleep(this.#clock, delay, this.#stopping.signal);
      if (this.#stopping.signal.aborted) return 'held';
    }
  }

  async #fail(
    alert: DeliveryAlert,
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
    const text = this.#o.redactor ? this.#o.redactor.redact(own) : own;
    log.error({ failReason: reason }, text);
    this.#report(alert, p, ev, 'Failed', reason, text);
    await this.#o.recorder.event(
      {
        apiVersion: API_VERSION,
        kind: 'Alert',
        metadata: { namespace: alert.namespace, name: alert.name, uid: alert.uid },
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

  /**
   * Stops sending. No new attempt starts (retry and rate-limit waits end at once); sends on the
   * wire get `deadlineMs` to finish — a finished send is recorded in the ledger — and are then
   * cancelled through their `AbortSignal` (nothing recorded: the next leader sends them again).
   * Resolves once every lane has settled (or 1 s after the cancellation at the latest) and the
   * notifiers are closed.
   */
  async stop(deadlineMs = 10_000): Promise<void> {
    this.#stopping.abort();
    for (const lane of this.#lanes.values()) {
      if (lane.timer !== undefined) this.#clock.clearTimeout(lane.timer);
      lane.timer = undefined;
    }
    const settled = Promise.allSettled([...this.#running]).then(() => true);
    const inTime = await Promise.race([settled, sleep(this.#clock, deadlineMs).then(() => false)]);
    if (!inTime) {
      this.#o.logger.warn(
        { sends: this.#running.size, deadlineMs },
        'shutdown deadline reached: cancelling sends in flight (the next leader sends them again)',
      );
      this.#cancel.abort();
      await Promise.race([settled, sleep(this.#clock, 1000)]);
    }
    await this.#o.sender.close();
  }
}
