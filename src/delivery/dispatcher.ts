/**
 * Delivery: per (Alert, Stack) a lane that hands that Stack's events to the Alert's Provider in
 * order, one at a time; retries with exponential backoff and jitter; the ledger records each
 * event once handled, so restarts, relists and leader changes neither lose nor repeat it
 * (docs/delivery.md). Sending itself (render → credential gate → notifier) is the send façade's
 * job (./send.ts).
 *
 * Level-based: `offer()` is called with the complete set of events a Stack currently implies for
 * an Alert (after every change, relist or restart). Events the ledger covers are dropped; the rest
 * wait in the lane, ordered by when their run was first observed (./order.ts).
 *
 * Outcomes per event (docs/delivery.md, "Outcomes"):
 * - Delivered — the Provider answered 2xx (or, for a target that can be asked, already had it);
 * - Skipped — nothing to send, with a stated reason (git Provider and no commit: cases F03/F04;
 *   suspended Alert or Provider; older than the Alert; a Started whose run already finished);
 * - Failed — a final error (a 4xx that will not change, retries exhausted, or the Alert's
 *   templates over their render budget): a Warning Event on the Alert;
 * - Unconfirmed — sent, no answer, and the target cannot tell a repeat: not sent again (N08);
 * - held — the Provider is not usable, the event was cancelled, or we are stopping: nothing
 *   recorded, tried again later.
 * While an event is retried, the Alert's status says so (attempts, next attempt, reason), and a
 * Warning Event follows after `warnAfterAttempts` failures (one message per Provider and
 * error, so the Event recorder folds repeats).
 *
 * Exactly once through failover: an event is recorded before the lane moves on, and for targets
 * that cannot absorb a repeat (every class but `idempotent`) at most a window of sends per
 * Provider is between "sent" and "recorded" at any time (`--provider-window` W for `event-id`,
 * one for `once` and `lookup`: ./verdict.ts `sendWindow`) — a leader killed at any moment leaves
 * at most those to be sent again, each with its same event id. Targets that can be asked
 * (`lookup`) are asked instead.
 *
 * Work follows the object (case B06): deleting or suspending an Alert or a Provider cancels its
 * lanes' waits and sends on the wire at once (`cancelAlert`, `cancelProvider`, `dropAlert`); a
 * Provider that becomes usable again ends its lanes' backoff waits (`wakeProvider`).
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
import { ProviderError, withoutRetryPromise } from '../notifier/errors.ts';
import type { Verdict } from '../notifier/classify.ts';
import {
  entryCovers,
  isInFlight,
  runHash,
  runRecord,
  stallHash,
  type Entry,
  type EventRef,
} from './ledger-entry.ts';
import type { LedgerAlertRef } from './ledger.ts';
import { KeyedSemaphore } from './locks.ts';
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
import { DEFAULT_PROVIDER_WINDOW, sendWindow } from './verdict.ts';

/** The ledger as the dispatcher uses it (./ledger.ts `Ledger`). */
export interface DeliveryLedger {
  /** What is recorded for (Alert, Stack), if anything. */
  entry(alertUid: string, stackUid: string): Entry | undefined;
  /** Records `q` as handled (with the run's note); resolves once persisted; never rejects. */
  record(alert: LedgerAlertRef, stackUid: string, q: EventRef, note?: string): Promise<void>;
  /** Records `q` as about to be sent; resolves once persisted; never rejects. */
  markInFlight(alert: LedgerAlertRef, stackUid: string, q: EventRef): Promise<void>;
  /** Resolves once the Alert's entries are in memory (read on demand for an Alert served later). */
  ready?(alert: LedgerAlertRef): Promise<void>;
}

/** Where final failures are announced: a Warning Kubernetes Event on the Alert (src/kube/events.ts). */
export interface WarningRecorder {
  event(obj: KubeObject, type: 'Warning', reason: string, message: string): Promise<void>;
}

/** Re-reads a Provider's Secrets on demand (the Provider reconciler). */
export interface CredentialRefresher {
  /**
   * Resolves the Provider `namespace/name` again from its current Secrets and publishes the
   * result; resolves with it (undefined when it is no longer usable).
   */
  refresh(providerKey: string): Promise<ResolvedProvider | undefined>;
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
  /** Re-reads credentials before an authentication failure is taken as final (case N10). */
  credentials?: CredentialRefresher;
  /** Told every outcome (the Alert's `status.lastDelivery`: ./status.ts). */
  outcomes?: { record(report: DeliveryOutcomeReport): void };
  /** Redacts every secret the controller knows (all Providers'), on top of the Provider's own (src/credential/redact.ts `Redactor`). */
  redactor?: { redact(text: string): string };
  registry?: Registry;
  clock?: Clock;
  retry?: Partial<RetryPolicy>;
  /** Re-check interval while a Provider is not Ready, ms (default 5 s). */
  heldRetryMs?: number;
  /**
   * Whether this process may send now (leader election: the Lease is surely still ours,
   * src/kube/leader.ts `holdsLease`). Asked right before every send and lookup; when false the
   * event is held — a starved leader that lost its Lease without noticing yet never sends beside
   * its successor. Default: always.
   */
  maySend?: () => boolean;
  /**
   * `--provider-window`: events of class `event-id` (generic webhooks) between "sent" and
   * "recorded" per Provider at once — what a leader killed at any moment may send again (each
   * with its same `X-PKO-Event-Id`). Default 16 (./verdict.ts `DEFAULT_PROVIDER_WINDOW`); `once`
   * and `lookup` targets always 1.
   */
  providerWindow?: number;
}

interface Pending {
  offered: OfferedEvent;
  runKey: string;
  runHash: string;
  /** No entry existed and the event is older than the Alert: recorded as skipped, not sent. */
  beforeAlert: boolean;
}

interface Lane {
  key: string;
  alertKey: string;
  alertUid: string;
  stackUid: string;
  providerKey: string;
  pending: Map<string, Pending>;
  /** Run key → smallest resourceVersion it was observed at (this process). */
  firstSeen: Map<string, number>;
  running: boolean;
  timer: unknown;
  /** Aborted to cancel the lane's current wait or send (B06); renewed afterwards. */
  cancel: AbortController;
  /** Aborted to end the lane's current backoff wait early (Provider usable again). */
  wake: AbortController;
}

/** `held`: try later; `again`: re-evaluate now (cancelled, or the Provider's credentials changed). */
type Handled = DeliveryResult | 'held' | 'again';

interface Failure {
  error: ProviderError;
  verdict: Verdict;
}

/** Renders tried again after one that ran out of time only, before the event fails. */
const RENDER_TIME_RETRIES = 4;

/** Order of a run not observed yet: after everything observed. */
const UNOBSERVED = Number.MAX_SAFE_INTEGER;

export class Dispatcher implements DeliveryQueue {
  readonly #o: DispatcherOptions;
  readonly #clock: Clock;
  readonly #retry: RetryPolicy;
  readonly #lanes = new Map<string, Lane>();
  /** Sends between "sent" and "recorded" per Provider, by delivery class (./verdict.ts `sendWindow`). */
  readonly #windows = new KeyedSemaphore();
  /** Aborted when stopping: no new attempt, backoff and gate waits end. */
  readonly #stopping = new AbortController();
  /** Aborted at the stop deadline: sends on the wire are cancelled. */
  readonly #cancel = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #m;

  constructor(opts: DispatcherOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? systemClock;
    this.#retry = {
      initialMs: 1000,
      maxMs: 300_000,
      maxElapsedMs: 86_400_000,
      warnAfterAttempts: 3,
      ...opts.retry,
    };
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

  #ref(lane: Lane, p: Pending, entry: Entry | undefined): EventRef {
    const ev = p.offered.event;
    const phase = ev.identity.phase;
    const rec = runRecord(entry, p.runHash);
    return {
      run: p.runHash,
      rv: rec?.rv ?? lane.firstSeen.get(p.runKey) ?? UNOBSERVED,
      phase: phase.kind,
      ...(phase.kind === 'stalled' ? { stall: { gen: phase.generation, h: stallHash(ev.id) } } : {}),
      ...(ev.identity.run.kind === 'v1' ? { latestOnly: true } : {}),
    };
  }

  #position(lane: Lane, p: Pending, entry: Entry | undefined): EventPosition {
    return positionOf(p.offered.event, this.#ref(lane, p, entry).rv);
  }

  offer(alert: DeliveryAlert, stackUid: string, events: readonly OfferedEvent[]): void {
    if (this.#stopping.signal.aborted) return;
    const laneKey = `${alert.uid}/${stackUid}`;
    let lane = this.#lanes.get(laneKey);
    const entry = this.#o.ledger.entry(alert.uid, stackUid);
    for (const offered of events) {
      const ev = offered.event;
      const rk = runKey(ev.identity);
      lane ??= this.#newLane(laneKey, alert, stackUid);
      if (offered.observed !== undefined) {
        const seen = lane.firstSeen.get(rk);
        if (seen === undefined || offered.observed < seen) lane.firstSeen.set(rk, offered.observed);
      }
      const p: Pending = {
        offered,
        runKey: rk,
        runHash: runHash(rk),
        // The run's first observation, not this snapshot's (a later write of an old run's object).
        beforeAlert: entry === undefined && beforeAlert(ev, lane.firstSeen.get(rk), alert),
      };
      if (entryCovers(entry, this.#ref(lane, p, entry))) {
        lane.pending.delete(ev.id);
        continue;
      }
      const prev = lane.pending.get(ev.id);
      // A lane already working on the event keeps its first verdict on "before the Alert".
      lane.pending.set(ev.id, prev ? { ...p, beforeAlert: prev.beforeAlert } : p);
    }
    if (!lane) return;
    lane.alertKey = alert.key;
    lane.providerKey = `${alert.namespace}/${alert.providerName}`;
    if (lane.pending.size === 0 && !lane.running && lane.timer === undefined) {
      this.#lanes.delete(laneKey);
      return;
    }
    this.#kick(lane);
  }

  #newLane(key: string, alert: DeliveryAlert, stackUid: string): Lane {
    const lane: Lane = {
      key,
      alertKey: alert.key,
      alertUid: alert.uid,
      stackUid,
      providerKey: `${alert.namespace}/${alert.providerName}`,
      pending: new Map(),
      firstSeen: new Map(),
      running: false,
      timer: undefined,
      cancel: new AbortController(),
      wake: new AbortController(),
    };
    this.#lanes.set(key, lane);
    return lane;
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
        if (this.#lanes.get(lane.key) !== lane) return;
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
    const entry = this.#o.ledger.entry(alertUid, lane.stackUid);
    const items = [...lane.pending.values()]
      .map((p) => ({ p, pos: this.#position(lane, p, entry) }))
      .sort((a, b) => comparePositions(a.pos, b.pos));
    const finishedRuns = new Set(items.filter((i) => i.pos.rank === RESULT_RANK).map((i) => i.p.runKey));
    for (const { p, pos } of items) {
      const ev = p.offered.event;
      if (entryCovers(entry, this.#ref(lane, p, entry))) {
        lane.pending.delete(ev.id);
        continue;
      }
      if (pos.rank === STARTED_RANK && finishedRuns.has(p.runKey)) {
        // The run finished before we got to announce its start: send only the result.
        this.#o.logger.debug({ event: ev.id }, 'Started not sent: the run’s result is known already');
        lane.pending.delete(ev.id);
        continue;
      }
      return p;
    }
    return undefined;
  }

  async #runLane(lane: Lane): Promise<void> {
    while (!this.#stopping.signal.aborted) {
      if (lane.cancel.signal.aborted) lane.cancel = new AbortController();
      if (lane.wake.signal.aborted) lane.wake = new AbortController();
      const alert = this.#o.alerts.get(lane.alertKey);
      if (!alert || alert.uid !== lane.alertUid) {
        // Alert not Ready (keep the events while it exists, re-check later) or replaced.
        if (!alert) this.#later(lane, this.#heldRetryMs);
        else lane.pending.clear();
        return;
      }
      await this.#o.ledger.ready?.(this.#ledgerRef(alert));
      const item = this.#next(lane, alert.uid);
      if (!item) return;
      const result = await this.#handle(lane, alert, item);
      if (result === 'again') continue;
      if (result === 'held') {
        this.#later(lane, this.#heldRetryMs);
        return;
      }
      lane.pending.delete(item.offered.event.id);
    }
  }

  #report(
    alert: DeliveryAlert,
    p: ResolvedProvider | undefined,
    ev: NotificationEvent,
    result: DeliveryOutcomeReport['result'],
    reason: string,
    message: string,
    extra: Pick<DeliveryOutcomeReport, 'attempts' | 'nextAttemptMs'> = {},
  ): void {
    if (result !== 'Retrying') this.#m.outcomes.inc({ provider_type: p?.type ?? 'unknown', result, reason });
    this.#o.outcomes?.record({
      alertKey: alert.key,
      provider: alert.providerName,
      result,
      reason,
      message: this.#redact(message, p),
      event: ev,
      ...extra,
    });
  }

  #redact(text: string, p: ResolvedProvider | undefined): string {
    const own = p ? redact(text, p.secretValues) : text;
    return this.#o.redactor ? this.#o.redactor.redact(own) : own;
  }

  #ledgerRef(alert: DeliveryAlert): LedgerAlertRef {
    return { namespace: alert.namespace, name: alert.name, uid: alert.uid };
  }

  async #skip(
    lane: Lane,
    alert: DeliveryAlert,
    p: ResolvedProvider | undefined,
    item: Pending,
    reason: string,
    message: string,
  ): Promise<'Skipped'> {
    const ev = item.offered.event;
    const entry = this.#o.ledger.entry(alert.uid, lane.stackUid);
    await this.#o.ledger.record(this.#ledgerRef(alert), lane.stackUid, this.#ref(lane, item, entry));
    // Explained once per event (the ledger then moves past it): the reasons a user acts on at
    // info, routine ones at debug.
    const level = reason === 'NoCommit' || reason === 'BeforeAlert' ? 'info' : 'debug';
    this.#o.logger[level]({ alert: alert.key, event: ev.id, skipReason: reason }, message);
    this.#report(alert, p, ev, 'Skipped', reason, message);
    return 'Skipped';
  }

  /** Decides what to do with one event: skip it with a reason, or send it with retries. */
  async #handle(lane: Lane, alert: DeliveryAlert, item: Pending): Promise<Handled> {
    const { offered } = item;
    const ev = offered.event;
    const providerKey = `${alert.namespace}/${alert.providerName}`;
    const log = this.#o.logger.child({
      alert: alert.key,
      provider: providerKey,
      event: ev.id,
      reason: ev.reason,
    });
    const p = this.#o.providers.get(providerKey);
    if (offered.skip) return this.#skip(lane, alert, p, item, offered.skip.reason, offered.skip.message);
    if (item.beforeAlert) {
      return this.#skip(
        lane,
        alert,
        p,
        item,
        'BeforeAlert',
        `${ev.reason} of ${ev.timestamp} not sent: it happened before the Alert was created (a new Alert does not replay history)`,
      );
    }
    if (!p) return 'held';
    if (p.suspend) return this.#skip(lane, alert, p, item, 'Suspended', 'Provider is suspended');
    if (isGitProviderType(p.type) && !ev.metadata.commit) {
      // Cases F03/F04: a commit status needs a real SHA. Explained once: the ledger then moves past it.
      const why = ev.noCommitReason ?? 'the event has no git commit';
      return this.#skip(
        lane,
        alert,
        p,
        item,
        'NoCommit',
        `not sent to ${p.type} Provider ${providerKey}: ${why}`,
      );
    }
    let prepared = await this.#o.sender.prepare(alert, providerKey, p, ev);
    // A render that ran out of time only (a loaded machine: a CPU-starved worker thread, one
    // still starting) is tried again before the event is given up as TemplateBudgetExceeded.
    for (let i = 0; !('notifier' in prepared) && prepared.retryable && i < RENDER_TIME_RETRIES; i++) {
      log.warn({ attempt: i + 1 }, `rendering again: ${prepared.message}`);
      const stop = AbortSignal.any([this.#stopping.signal, lane.cancel.signal]);
      await sleep(this.#clock, jitteredBackoff(i, this.#retry.initialMs, this.#retry.maxMs), stop);
      if (stop.aborted) return 'again';
      prepared = await this.#o.sender.prepare(alert, providerKey, p, ev);
    }
    if (!('notifier' in prepared))
      return this.#fail(lane, alert, item, p, prepared.code, prepared.message, log);
    return this.#sendWithRetries(lane, alert, item, prepared, log);
  }

  async #sendWithRetries(
    lane: Lane,
    alert: DeliveryAlert,
    item: Pending,
    s: PreparedSend,
    log: Logger,
  ): Promise<Handled> {
    const { provider: p, event: ev } = s;
    const run = item.runKey;
    const started = this.#clock.now();
    const window = sendWindow(s.cls, this.#o.providerWindow ?? DEFAULT_PROVIDER_WINDOW);
    let attempts = 0;
    let warned = false;
    /** The last attempt may have arrived: ask the target before sending (class `lookup`). */
    let unsure = false;
    for (let round = 0; ; round++) {
      if (lane.cancel.signal.aborted || this.#stopping.signal.aborted) return 'again';
      if (
        round > 0 &&
        item.offered.event.identity.phase.kind === 'started' &&
        [...lane.pending.values()].some(
          (o) => o.runKey === run && o.offered.event.identity.phase.kind !== 'started',
        )
      ) {
        log.info('run finished while its start was being retried: sending only the result');
        return this.#skip(
          lane,
          alert,
          p,
          item,
          'Superseded',
          'the run finished before its start was delivered',
        );
      }
      if (this.#o.providers.get(s.providerKey) !== p) return 'again'; // Provider changed: re-resolve.

      const stop = AbortSignal.any([this.#stopping.signal, lane.cancel.signal]);
      let release: () => void = () => undefined;
      if (window !== undefined) {
        try {
          release = await this.#windows.acquire(s.providerKey, window, stop);
        } catch {
          return 'again';
        }
      }
      let outcome: Handled | Failure;
      try {
        outcome = await this.#attemptOnce(lane, alert, item, s, stop, unsure, () => ++attempts, log);
      } finally {
        release();
      }
      if (typeof outcome === 'string') return outcome;

      const { error: pe, verdict } = outcome;
      // Cancelled (shutdown deadline, Alert or Provider deleted/suspended): not a failure.
      if (verdict.kind === 'aborted' || aborted(this.#cancel.signal) || aborted(lane.cancel.signal))
        return 'again';
      if (verdict.kind === 'ambiguous') {
        if (s.cls === 'once') return this.#unconfirmed(lane, alert, item, p, pe, attempts, log);
        if (s.cls === 'lookup') unsure = true;
      }
      if ((verdict.kind === 'auth' || verdict.kind === 'permission') && this.#o.credentials !== undefined) {
        // Case N10: a rotated credential shows as 401/403 before our periodic re-read sees it.
        const fresh = await this.#o.credentials.refresh(s.providerKey);
        if (fresh !== undefined && fresh !== p && !sameCredentials(fresh, p)) {
          log.info('credentials changed in the Secret: sending again with the new ones');
          return 'again';
        }
      }
      const elapsed = this.#clock.now() - started;
      if (!verdict.retry)
        return this.#fail(
          lane,
          alert,
          item,
          p,
          'DeliveryFailed',
          failureText('DeliveryFailed', pe),
          log,
          attempts,
        );
      if (elapsed >= this.#retry.maxElapsedMs) {
        return this.#fail(
          lane,
          alert,
          item,
          p,
          'RetriesExhausted',
          failureText('RetriesExhausted', pe, elapsed),
          log,
          attempts,
        );
      }
      const delay = Math.max(
        jitteredBackoff(round, this.#retry.initialMs, this.#retry.maxMs),
        verdict.retryAfterMs ?? 0,
      );
      const reason = retryReason(verdict);
      this.#report(alert, p, ev, 'Retrying', reason, failureText('Retrying', pe), {
        attempts,
        nextAttemptMs: this.#clock.now() + delay,
      });
      log.warn(
        { attempts, retryInMs: delay, code: pe.code, status: pe.status, verdict: verdict.kind },
        `delivery failed, retrying: ${pe.message}`,
      );
      if (!warned && attempts >= this.#retry.warnAfterAttempts) {
        warned = true;
        // One message per Provider and error (not per event or attempt): the Event recorder folds
        // repeats into one Event with a count.
        void this.#warn(
          alert,
          reason,
          `deliveries to Provider ${s.providerKey} fail and are retried: ${this.#redact(pe.message, p)}`,
        );
      }
      await sleep(
        this.#clock,
        delay,
        AbortSignal.any([this.#stopping.signal, lane.cancel.signal, lane.wake.signal]),
      );
      if (aborted(this.#stopping.signal)) return 'held';
      if (aborted(lane.wake.signal)) lane.wake = new AbortController();
    }
  }

  /**
   * One attempt under the Provider's window: for a `lookup` target whose event may be there
   * already, ask first; mark it in flight; send; record. Returns the event's fate, or the failure.
   */
  async #attemptOnce(
    lane: Lane,
    alert: DeliveryAlert,
    item: Pending,
    s: PreparedSend,
    stop: AbortSignal,
    unsure: boolean,
    count: () => number,
    log: Logger,
  ): Promise<Handled | Failure> {
    const { provider: p, event: ev } = s;
    const entry = this.#o.ledger.entry(alert.uid, lane.stackUid);
    const ref = this.#ref(lane, item, entry);
    const note = runRecord(entry, item.runHash)?.note;
    const ctx = note !== undefined ? { runNote: note } : {};
    if (this.#o.maySend?.() === false) {
      log.warn('not sending: the leader Lease may have passed to another replica (renewals are late)');
      return 'held';
    }
    if (s.cls === 'lookup' && (unsure || isInFlight(entry, ref))) {
      const found = await this.#o.sender.lookup(s, stop, ctx);
      if (found instanceof ProviderError) return { error: found, verdict: found.verdict };
      if (found) {
        await this.#o.ledger.record(this.#ledgerRef(alert), lane.stackUid, ref);
        log.info('the target already has the event (sent before the outcome was known): not sent again');
        this.#report(alert, p, ev, 'Delivered', 'AlreadyDelivered', `${ev.reason} found at ${p.type}`);
        return 'Delivered';
      }
    }
    if (s.cls === 'lookup') await this.#o.ledger.markInFlight(this.#ledgerRef(alert), lane.stackUid, ref);
    const attempts = count();
    const r = await this.#o.sender.attempt(
      s,
      stop,
      AbortSignal.any([this.#cancel.signal, lane.cancel.signal]),
      ctx,
    );
    if (r.kind === 'stopped') return 'again';
    if (r.kind === 'failed') return { error: r.error, verdict: r.verdict };
    // Recorded before the Provider's next send may start (the window): a leader killed now
    // repeats at most this one event.
    await this.#record(alert, lane, item, r.note, log);
    log.debug({ attempts }, 'delivered');
    this.#report(alert, p, ev, 'Delivered', 'Delivered', `${ev.reason} delivered to ${p.type}`, { attempts });
    return 'Delivered';
  }

  async #record(
    alert: DeliveryAlert,
    lane: Lane,
    item: Pending,
    note: string | undefined,
    log: Logger,
  ): Promise<void> {
    const entry = this.#o.ledger.entry(alert.uid, lane.stackUid);
    const ref = this.#ref(lane, item, entry);
    try {
      await this.#o.ledger.record(this.#ledgerRef(alert), lane.stackUid, ref, note);
    } catch (err) {
      // A note out of bounds (a notifier bug): keep the delivery, drop the note.
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'run note not kept');
      await this.#o.ledger.record(this.#ledgerRef(alert), lane.stackUid, ref);
    }
  }

  async #unconfirmed(
    lane: Lane,
    alert: DeliveryAlert,
    item: Pending,
    p: ResolvedProvider,
    pe: ProviderError,
    attempts: number,
    log: Logger,
  ): Promise<'Unconfirmed'> {
    const ev = item.offered.event;
    await this.#record(alert, lane, item, undefined, log);
    const text = this.#redact(
      `${ev.reason} for ${ev.involvedObject.namespace}/${ev.involvedObject.name} may or may not have arrived (${failureText('Unconfirmed', pe)}); not sent again, because ${p.type} cannot tell a repeat`,
      p,
    );
    log.warn({ result: 'Unconfirmed' }, text);
    this.#report(alert, p, ev, 'Unconfirmed', 'AmbiguousOutcome', text, { attempts });
    await this.#warn(alert, 'AmbiguousOutcome', text);
    return 'Unconfirmed';
  }

  async #warn(alert: DeliveryAlert, reason: string, message: string): Promise<void> {
    await this.#o.recorder.event(
      {
        apiVersion: API_VERSION,
        kind: 'Alert',
        metadata: { namespace: alert.namespace, name: alert.name, uid: alert.uid },
      },
      'Warning',
      reason,
      message,
    );
  }

  async #fail(
    lane: Lane,
    alert: DeliveryAlert,
    item: Pending,
    p: ResolvedProvider,
    reason: string,
    message: string,
    log: Logger,
    attempts = 0,
  ): Promise<'Failed'> {
    const ev = item.offered.event;
    const text = this.#redact(
      `${ev.reason} for ${ev.involvedObject.namespace}/${ev.involvedObject.name} not delivered: ${message}`,
      p,
    );
    await this.#record(alert, lane, item, undefined, log);
    log.error({ failReason: reason }, text);
    this.#report(alert, p, ev, 'Failed', reason, text, { attempts });
    await this.#warn(alert, reason, text);
    return 'Failed';
  }

  #lanesWhere(match: (lane: Lane) => boolean): Lane[] {
    return [...this.#lanes.values()].filter(match);
  }

  /** Forgets every waiting event of a deleted Alert and cancels its sends on the wire (B06). */
  dropAlert(alertUid: string): void {
    for (const lane of this.#lanesWhere((l) => l.alertUid === alertUid)) {
      lane.pending.clear();
      lane.cancel.abort();
      if (lane.timer !== undefined) this.#clock.clearTimeout(lane.timer);
      lane.timer = undefined;
      this.#lanes.delete(lane.key);
    }
  }

  /**
   * Cancels the current wait or send of every lane of Alert `alertKey` (suspended, changed or not
   * Ready any more): each lane looks at the Alert again at once (B06).
   */
  cancelAlert(alertKey: string): void {
    for (const lane of this.#lanesWhere((l) => l.alertKey === alertKey)) this.#interrupt(lane);
  }

  /** Cancels the current wait or send of every lane delivering to Provider `providerKey` (deleted, suspended, not usable). */
  cancelProvider(providerKey: string): void {
    for (const lane of this.#lanesWhere((l) => l.providerKey === providerKey)) this.#interrupt(lane);
  }

  /** Ends the backoff waits of lanes delivering to `providerKey` (usable again): they try now. */
  wakeProvider(providerKey: string): void {
    for (const lane of this.#lanesWhere((l) => l.providerKey === providerKey)) {
      lane.wake.abort();
      if (lane.timer !== undefined) {
        this.#clock.clearTimeout(lane.timer);
        lane.timer = undefined;
        this.#kick(lane);
      }
    }
  }

  #interrupt(lane: Lane): void {
    lane.cancel.abort();
    if (lane.timer !== undefined) {
      this.#clock.clearTimeout(lane.timer);
      lane.timer = undefined;
      this.#kick(lane);
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

/** A function, not the property: TypeScript would narrow `signal.aborted` across awaits. */
function aborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/**
 * Whether an event happened before its Alert existed (a new Alert does not replay history), by
 * observation first (case N16): a run the controller first observed at a resourceVersion after
 * the Alert's ({@link DeliveryAlert.sinceRv}) is after it, whatever time PKO stamped on it — a
 * PKO clock minutes behind must not make the first run after a new Alert "older" than it. Only
 * when observation cannot tell (no resourceVersion, or one before the Alert's first-seen one,
 * which may be later than its creation after a restart) does the event's time decide, against
 * the Alert's `creationTimestamp`.
 */
export function beforeAlert(
  ev: NotificationEvent,
  observed: number | undefined,
  alert: Pick<DeliveryAlert, 'createdMs' | 'sinceRv'>,
): boolean {
  if (observed !== undefined && alert.sinceRv !== undefined && observed > alert.sinceRv) return false;
  return (Date.parse(ev.timestamp) || 0) < alert.createdMs;
}

/**
 * What the controller writes about a failed attempt (Alert `lastDelivery`, Warning Events, logs),
 * by outcome, so that no message contradicts itself about retrying:
 * - `Retrying`: the error's own message (it says it will retry, and when);
 * - `RetriesExhausted`: `gave up after N s of retries: …` without the error's promise to retry;
 * - `DeliveryFailed` (a final error) and `Unconfirmed` (not sent again): the message without it.
 */
export function failureText(
  outcome: 'Retrying' | 'RetriesExhausted' | 'DeliveryFailed' | 'Unconfirmed',
  pe: ProviderError,
  elapsedMs = 0,
): string {
  switch (outcome) {
    case 'Retrying':
      return pe.message;
    case 'RetriesExhausted':
      return `gave up after ${String(Math.round(elapsedMs / 1000))} s of retries: ${withoutRetryPromise(pe.message)}`;
    case 'DeliveryFailed':
      return withoutRetryPromise(pe.message);
    case 'Unconfirmed':
      return `no answer after it was sent: ${withoutRetryPromise(pe.message)}`;
  }
}

/** The reason shown while an event is retried (the Alert's status). */
function retryReason(v: Verdict): string {
  switch (v.kind) {
    case 'rateLimited':
      return 'RateLimited';
    case 'ambiguous':
      return 'NoAnswer';
    case 'unreachable':
      return v.condition ?? 'NetworkError';
    case 'server':
      return 'ServerError';
    case 'conflict':
      return 'Conflict';
    default:
      return 'DeliveryRetrying';
  }
}

/** Whether two resolutions of one Provider carry the same credentials and endpoint. */
function sameCredentials(a: ResolvedProvider, b: ResolvedProvider): boolean {
  return (
    a.address === b.address &&
    a.token === b.token &&
    a.password === b.password &&
    a.username === b.username &&
    JSON.stringify(a.headers) === JSON.stringify(b.headers) &&
    a.githubApp?.privateKey === b.githubApp?.privateKey
  );
}
