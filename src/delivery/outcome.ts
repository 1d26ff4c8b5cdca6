/**
 * How an event's delivery ends, in one place: {@link Outcomes.settle} records the event in the
 * ledger (so the lane moves on and no later leader sends it again), logs it, reports it to the
 * Alert's `status.lastDelivery` and the `pkonc_deliveries_total` metric, and announces failures
 * as Warning Events on the Alert. `retrying` reports an attempt that will be retried (not
 * recorded). docs/delivery.md, "What kubectl shows".
 */
import type { Registry } from 'prom-client';
import { API_VERSION } from '../api/v1alpha1.ts';
import type { KubeObject } from '../api/meta.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { redact } from '../credential/redact.ts';
import { counter } from '../kube/metrics.ts';
import type { Logger } from '../log.ts';
import type { Verdict } from '../notifier/classify.ts';
import { withoutRetryPromise, type ProviderError } from '../notifier/errors.ts';
import { runRecord, stallHash, type Entry, type EventRef } from './ledger-entry.ts';
import type { LedgerAlertRef } from './ledger.ts';
import type { DeliveryAlert, DeliveryOutcomeReport, DeliveryResult, OfferedEvent } from './types.ts';

/** The ledger as delivery uses it (./ledger.ts `Ledger`). */
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

/** Order of a run not observed yet: after everything observed. */
export const UNOBSERVED = Number.MAX_SAFE_INTEGER;

/** One event waiting in a lane (./lanes.ts). */
export interface PendingEvent {
  offered: OfferedEvent;
  runKey: string;
  runHash: string;
  /** No entry existed and the event is older than the Alert: recorded as skipped, not sent. */
  beforeAlert: boolean;
}

/**
 * One event's delivery to one Alert's Provider, from the lane's pick to its outcome: what every
 * step of ./deliver.ts and {@link Outcomes.settle} read.
 */
export interface DeliveryJob {
  alert: DeliveryAlert;
  stackUid: string;
  /** `namespace/name` of the Alert's Provider. */
  providerKey: string;
  item: PendingEvent;
  /** The smallest resourceVersion this process observed the event's run at, if any. */
  observedRv(): number | undefined;
  /** The other events waiting in the lane (a run's result waiting makes its Started superseded). */
  waiting(): Iterable<PendingEvent>;
  /** Aborted to cancel this job's wait or send (Alert or Provider changed: B06); renewed by the lane. */
  cancel(): AbortSignal;
  /** Aborted to end this job's backoff wait early (Provider usable again). */
  wake(): AbortSignal;
  /** Renews the wake signal after it fired. */
  rewake(): void;
  /**
   * Gives the lane's turn at its Provider back (./lanes.ts: a Provider works on a bounded number
   * of lanes at once) while the job waits out a backoff, so that Stacks whose events fail do not
   * hold up the Provider's other Stacks.
   */
  pause(): void;
  /**
   * Takes a turn again after {@link pause} (no-op when holding one); false when `signal` aborted
   * first (nothing held then).
   */
  resume(signal: AbortSignal): Promise<boolean>;
  log: Logger;
  /** Sends made so far (not counting lookups). */
  attempts: number;
}

/**
 * The ledger reference of a waiting event: its run, phase, and the run's place in the order
 * (./order.ts) — the resourceVersion the ledger recorded for the run, else the smallest this
 * process observed it at (`observedRv`), else after everything observed.
 */
export function eventRef(
  item: PendingEvent,
  entry: Entry | undefined,
  observedRv: number | undefined,
): EventRef {
  const ev = item.offered.event;
  const phase = ev.identity.phase;
  return {
    run: item.runHash,
    rv: runRecord(entry, item.runHash)?.rv ?? observedRv ?? UNOBSERVED,
    phase: phase.kind,
    ...(phase.kind === 'stalled' ? { stall: { gen: phase.generation, h: stallHash(ev.id) } } : {}),
    ...(ev.identity.run.kind === 'v1' ? { latestOnly: true } : {}),
  };
}

/** How a job ended, as {@link Outcomes.settle} takes it. */
export type Settlement =
  | { result: 'Delivered'; reason: 'Delivered' | 'AlreadyDelivered'; message: string; note?: string }
  | { result: 'Skipped'; reason: string; message: string }
  | { result: 'Failed'; reason: string; message: string }
  | { result: 'Unconfirmed'; error: ProviderError };

export interface OutcomesOptions {
  ledger: DeliveryLedger;
  recorder: WarningRecorder;
  logger: Logger;
  /** Told every outcome (the Alert's `status.lastDelivery`: ./status.ts). */
  status?: { record(report: DeliveryOutcomeReport): void } | undefined;
  /** Redacts every secret the controller knows (src/credential/redact.ts `Redactor`). */
  redactor?: { redact(text: string): string } | undefined;
  registry?: Registry | undefined;
}

export class Outcomes {
  readonly #o: OutcomesOptions;
  readonly #handled;

  constructor(opts: OutcomesOptions) {
    this.#o = opts;
    this.#handled = counter(
      opts.registry,
      'pkonc_deliveries_total',
      'Events handled per Provider type and result',
      ['provider_type', 'result', 'reason'],
    );
  }

  /** The ledger reference of `job`'s event ({@link eventRef}). */
  ref(job: DeliveryJob, entry = this.entry(job)): EventRef {
    return eventRef(job.item, entry, job.observedRv());
  }

  /** What the ledger holds for `job`'s (Alert, Stack). */
  entry(job: DeliveryJob): Entry | undefined {
    return this.#o.ledger.entry(job.alert.uid, job.stackUid);
  }

  /**
   * Ends `job`: records its event in the ledger (resolves once persisted), logs, reports the
   * outcome and, for `Failed` and `Unconfirmed`, raises a Warning Event on the Alert.
   * @param p the Provider as resolved for the job (its secrets are redacted from every text).
   */
  async settle(job: DeliveryJob, p: ResolvedProvider | undefined, s: Settlement): Promise<DeliveryResult> {
    const ev = job.item.offered.event;
    const what = `${ev.reason} for ${ev.involvedObject.namespace}/${ev.involvedObject.name}`;
    const attempts = { attempts: job.attempts };
    switch (s.result) {
      case 'Delivered':
        await this.#record(job, s.note);
        if (s.reason === 'AlreadyDelivered')
          job.log.info(
            'the target already has the event (sent before the outcome was known): not sent again',
          );
        else if (this.#o.logger.isLevelEnabled('debug')) job.log.debug(attempts, 'delivered');
        this.#report(job, p, 'Delivered', s.reason, s.message, s.reason === 'Delivered' ? attempts : {});
        break;
      case 'Skipped': {
        await this.#record(job);
        // Explained once per event (the ledger then moves past it): the reasons a user acts on at
        // info, routine ones at debug.
        const level = s.reason === 'NoCommit' || s.reason === 'BeforeAlert' ? 'info' : 'debug';
        this.#o.logger[level]({ alert: job.alert.key, event: ev.id, skipReason: s.reason }, s.message);
        this.#report(job, p, 'Skipped', s.reason, s.message);
        break;
      }
      case 'Failed': {
        const text = this.#redact(`${what} not delivered: ${s.message}`, p);
        await this.#record(job);
        job.log.error({ failReason: s.reason }, text);
        this.#report(job, p, 'Failed', s.reason, text, attempts);
        await this.warn(job.alert, s.reason, text);
        break;
      }
      case 'Unconfirmed': {
        await this.#record(job);
        const text = this.#redact(
          `${what} may or may not have arrived (${failureText('Unconfirmed', s.error)}); not sent again, because ${p?.type ?? 'the target'} cannot tell a repeat`,
          p,
        );
        job.log.warn({ result: 'Unconfirmed' }, text);
        this.#report(job, p, 'Unconfirmed', 'AmbiguousOutcome', text, attempts);
        await this.warn(job.alert, 'AmbiguousOutcome', text);
        break;
      }
    }
    return s.result;
  }

  /** Reports an attempt that failed and is retried at `nextAttemptMs` (nothing recorded). */
  retrying(
    job: DeliveryJob,
    p: ResolvedProvider,
    pe: ProviderError,
    verdict: Verdict,
    nextAttemptMs: number,
  ): void {
    this.#report(job, p, 'Retrying', retryReason(verdict), failureText('Retrying', pe), {
      attempts: job.attempts,
      nextAttemptMs,
    });
  }

  /** A Warning Event on the Alert (the Event recorder folds repeats of one message into a count). */
  async warn(alert: DeliveryAlert, reason: string, message: string): Promise<void> {
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

  /** `text` without `p`'s secrets nor any other Provider's. */
  redact(text: string, p: ResolvedProvider | undefined): string {
    return this.#redact(text, p);
  }

  async #record(job: DeliveryJob, note?: string): Promise<void> {
    const alert: LedgerAlertRef = {
      namespace: job.alert.namespace,
      name: job.alert.name,
      uid: job.alert.uid,
    };
    const ref = this.ref(job);
    try {
      await this.#o.ledger.record(alert, job.stackUid, ref, note);
    } catch (err) {
      // A note out of bounds (a notifier bug): keep the delivery, drop the note.
      job.log.error({ err: err instanceof Error ? err.message : String(err) }, 'run note not kept');
      await this.#o.ledger.record(alert, job.stackUid, ref);
    }
  }

  #report(
    job: DeliveryJob,
    p: ResolvedProvider | undefined,
    result: DeliveryOutcomeReport['result'],
    reason: string,
    message: string,
    extra: Pick<DeliveryOutcomeReport, 'attempts' | 'nextAttemptMs'> = {},
  ): void {
    if (result !== 'Retrying') this.#handled.inc({ provider_type: p?.type ?? 'unknown', result, reason });
    this.#o.status?.record({
      alertKey: job.alert.key,
      provider: job.alert.providerName,
      result,
      reason,
      message: this.#redact(message, p),
      event: job.item.offered.event,
      ...extra,
    });
  }

  #redact(text: string, p: ResolvedProvider | undefined): string {
    const own = p ? redact(text, p.secretValues) : text;
    return this.#o.redactor ? this.#o.redactor.redact(own) : own;
  }
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
export function retryReason(v: Verdict): string {
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
