/**
 * The lanes of delivery: per (Alert, Stack) a lane that hands that Stack's events, one at a time
 * and in order, to the delivery engine (./deliver.ts: skip checks → prepare → retries around one
 * attempt → outcome), which records each event in the ledger before the lane moves on, so
 * restarts, relists and leader changes neither lose nor repeat it (docs/delivery.md).
 *
 * Level-based: `offer()` is called with the complete set of events a Stack currently implies for
 * an Alert (after every change, relist or restart). Events the ledger covers are dropped; the rest
 * wait in the lane, ordered by when their run was first observed (./order.ts); a run's Started is
 * dropped once its result is waiting too.
 *
 * Outcomes per event (./outcome.ts; docs/delivery.md, "What kubectl shows"): Delivered, Skipped
 * with a reason (./skip.ts), Failed, Unconfirmed — or held (the Provider is not usable, the event
 * was cancelled, or we are stopping: nothing recorded, tried again later).
 *
 * Exactly once through failover: for targets that cannot absorb a repeat (every class but
 * `idempotent`) at most a window of sends per Provider is between "sent" and "recorded" at any
 * time (`--provider-window` W for `event-id`, one for `once` and `lookup`: ./class.ts
 * `sendWindow`); a lane has one event in flight, so the window spreads over Stacks and the order
 * within a Stack is kept.
 *
 * A backlog waits as data: a Provider works on at most {@link lanesAtWork} lanes at once (4 × its
 * window, at least 16: enough to keep the window full while others render, wait for pacing or
 * a target's lock); the others hold only their waiting events, in arrival order, until a turn
 * frees — not a suspended delivery each with its rendered message and signals (a 10,000-event
 * backlog held ~38 MiB that way: docs/benchmarks.md). A job waiting out a backoff gives its turn
 * back (`DeliveryJob.pause`), so Stacks whose events fail do not hold up the Provider's others.
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
import { runKey } from '../api/event.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { sleep, systemClock, type Clock } from '../kube/clock.ts';
import type { Logger } from '../log.ts';
import { DeliveryEngine, type CredentialRefresher } from './deliver.ts';
import { entryCovers, runHash, type Entry, type EventRef } from './ledger-entry.ts';
import { KeyedSemaphore } from './locks.ts';
import { comparePositions, positionOf, RESULT_RANK, STARTED_RANK } from './order.ts';
import {
  eventRef,
  Outcomes,
  type DeliveryJob,
  type DeliveryLedger,
  type PendingEvent,
  type WarningRecorder,
} from './outcome.ts';
import type { Sender } from './send.ts';
import { beforeAlert } from './skip.ts';
import type {
  DeliveryAlert,
  DeliveryOutcomeReport,
  DeliveryQueue,
  OfferedEvent,
  RetryPolicy,
} from './types.ts';

export type { CredentialRefresher } from './deliver.ts';
export type { DeliveryLedger, WarningRecorder } from './outcome.ts';

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
   * with its same `X-PKO-Event-Id`). Default 16 (./class.ts `DEFAULT_PROVIDER_WINDOW`); `once` and `lookup`
   * targets always 1.
   */
  providerWindow?: number;
}

interface Lane {
  key: string;
  alertKey: string;
  alertUid: string;
  stackUid: string;
  providerKey: string;
  pending: Map<string, PendingEvent>;
  /** Run key → smallest resourceVersion it was observed at (this process). */
  firstSeen: Map<string, number>;
  running: boolean;
  timer: unknown;
  /**
   * Aborted to cancel the lane's current wait or send (B06); renewed afterwards. Made when a job
   * first asks for it: a lane that only waits (a backlog of 10,000 Stacks is 10,000 lanes) holds
   * none, and one that is not running has nothing to cancel.
   */
  cancel?: AbortController | undefined;
  /** Aborted to end the lane's current backoff wait early (Provider usable again); made like `cancel`. */
  wake?: AbortController | undefined;
  /** Gives back the lane's turn at its Provider (set while it holds one). */
  turn?: (() => void) | undefined;
}

/** Lanes a Provider works on at once, for a window of `window` sends in flight: 4 × W, ≥ 16. */
export function lanesAtWork(window: number): number {
  return Math.max(4 * window, 16);
}

export class Dispatcher implements DeliveryQueue {
  readonly #o: DispatcherOptions;
  readonly #clock: Clock;
  readonly #retry: RetryPolicy;
  readonly #lanes = new Map<string, Lane>();
  readonly #outcomes: Outcomes;
  readonly #engine: DeliveryEngine;
  /** Aborted when stopping: no new attempt, backoff and gate waits end. */
  readonly #stopping = new AbortController();
  /** Aborted at the stop deadline: sends on the wire are cancelled. */
  readonly #cancel = new AbortController();
  readonly #running = new Set<Promise<void>>();
  /** Turns at each Provider (key `namespace/name`): lanes at work hold one, the rest wait in order. */
  readonly #turns = new KeyedSemaphore();
  readonly #lanesAtWork: number;

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
    this.#outcomes = new Outcomes({
      ledger: opts.ledger,
      recorder: opts.recorder,
      logger: opts.logger,
      status: opts.outcomes,
      redactor: opts.redactor,
      registry: opts.registry,
    });
    this.#engine = new DeliveryEngine({
      ledger: opts.ledger,
      outcomes: this.#outcomes,
      sender: opts.sender,
      providers: opts.providers,
      // Sends between "sent" and "recorded" per Provider, by delivery class (./class.ts `sendWindow`).
      windows: new KeyedSemaphore(),
      clock: this.#clock,
      retry: this.#retry,
      stopping: this.#stopping.signal,
      cancelSends: this.#cancel.signal,
      credentials: opts.credentials,
      maySend: opts.maySend,
      providerWindow: opts.providerWindow,
    });
    this.#lanesAtWork = lanesAtWork(this.#engine.providerWindow);
  }

  /** Waits for a turn at the lane's Provider; false when stopping or `signal` came first. */
  async #takeTurn(lane: Lane, signal: AbortSignal): Promise<boolean> {
    if (lane.turn) return true;
    try {
      lane.turn = await this.#turns.acquire(lane.providerKey, this.#lanesAtWork, signal);
      return true;
    } catch {
      return false;
    }
  }

  #giveTurn(lane: Lane): void {
    lane.turn?.();
    lane.turn = undefined;
  }

  /** Lanes holding a turn at their Provider (for tests and metrics). */
  get lanesAtWork(): number {
    let n = 0;
    for (const l of this.#lanes.values()) if (l.turn) n++;
    return n;
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

  #ref(lane: Lane, p: PendingEvent, entry: Entry | undefined): EventRef {
    return eventRef(p, entry, lane.firstSeen.get(p.runKey));
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
      const p: PendingEvent = {
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
    };
    this.#lanes.set(key, lane);
    return lane;
  }

  #kick(lane: Lane): void {
    if (lane.running || lane.timer !== undefined || this.#stopping.signal.aborted) return;
    lane.running = true;
    // Waiting for a turn is a promise and a waiter, not a suspended delivery (see the top).
    const p = this.#turns
      .acquire(lane.providerKey, this.#lanesAtWork, this.#stopping.signal)
      .then(
        (turn) => {
          lane.turn = turn;
          return this.#runLane(lane);
        },
        () => undefined, // stopping: the lane never started
      )
      .catch((err: unknown) => {
        this.#o.logger.error(
          { lane: lane.key, err: err instanceof Error ? err.message : String(err) },
          'delivery lane crashed; retrying',
        );
        this.#later(lane, this.#heldRetryMs);
      })
      .finally(() => {
        this.#giveTurn(lane);
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
  #next(lane: Lane, alertUid: string): PendingEvent | undefined {
    const entry = this.#o.ledger.entry(alertUid, lane.stackUid);
    const items = [...lane.pending.values()]
      .map((p) => ({ p, pos: positionOf(p.offered.event, this.#ref(lane, p, entry).rv) }))
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

  /** The job of delivering `item`, the lane's next event, to `alert`'s Provider. */
  #job(lane: Lane, alert: DeliveryAlert, item: PendingEvent): DeliveryJob {
    const providerKey = `${alert.namespace}/${alert.providerName}`;
    const ev = item.offered.event;
    const logger = this.#o.logger;
    let log: Logger | undefined;
    return {
      alert,
      stackUid: lane.stackUid,
      providerKey,
      item,
      observedRv: () => lane.firstSeen.get(item.runKey),
      waiting: () => lane.pending.values(),
      cancel: () => (lane.cancel ??= new AbortController()).signal,
      wake: () => (lane.wake ??= new AbortController()).signal,
      rewake: () => {
        lane.wake = undefined;
      },
      pause: () => {
        this.#giveTurn(lane);
      },
      resume: (signal) => this.#takeTurn(lane, signal),
      // Made on first use: most events log nothing at the default level, and a pino child costs
      // its bindings' serialisation and redaction up front.
      get log(): Logger {
        log ??= logger.child({ alert: alert.key, provider: providerKey, event: ev.id, reason: ev.reason });
        return log;
      },
      attempts: 0,
    };
  }

  async #runLane(lane: Lane): Promise<void> {
    while (!this.#stopping.signal.aborted) {
      if (this.#lanes.get(lane.key) !== lane) return; // dropped (its Alert deleted) while it waited
      if (lane.cancel?.signal.aborted === true) lane.cancel = undefined;
      if (lane.wake?.signal.aborted === true) lane.wake = undefined;
      const alert = this.#o.alerts.get(lane.alertKey);
      if (!alert || alert.uid !== lane.alertUid) {
        // Alert not Ready (keep the events while it exists, re-check later) or replaced.
        if (!alert) this.#later(lane, this.#heldRetryMs);
        else lane.pending.clear();
        return;
      }
      await this.#o.ledger.ready?.({ namespace: alert.namespace, name: alert.name, uid: alert.uid });
      const item = this.#next(lane, alert.uid);
      if (!item) return;
      const result = await this.#engine.deliver(this.#job(lane, alert, item));
      if (result === 'again') continue;
      if (result === 'held') {
        this.#later(lane, this.#heldRetryMs);
        return;
      }
      lane.pending.delete(item.offered.event.id);
    }
  }

  #lanesWhere(match: (lane: Lane) => boolean): Lane[] {
    return [...this.#lanes.values()].filter(match);
  }

  /** Forgets every waiting event of a deleted Alert and cancels its sends on the wire (B06). */
  dropAlert(alertUid: string): void {
    for (const lane of this.#lanesWhere((l) => l.alertUid === alertUid)) {
      lane.pending.clear();
      if (lane.running) (lane.cancel ??= new AbortController()).abort();
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
      if (lane.running) (lane.wake ??= new AbortController()).abort();
      if (lane.timer !== undefined) {
        this.#clock.clearTimeout(lane.timer);
        lane.timer = undefined;
        this.#kick(lane);
      }
    }
  }

  #interrupt(lane: Lane): void {
    // A running lane may be between its jobs: the next one starts cancelled and looks again.
    if (lane.running) (lane.cancel ??= new AbortController()).abort();
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
