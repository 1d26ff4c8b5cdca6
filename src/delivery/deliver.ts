/**
 * One event's delivery to one Alert's Provider, top to bottom: the skip checks (./skip.ts) →
 * prepare (notifier, render) → retries with backoff around {@link DeliveryEngine} `attemptOnce`:
 * lock (the Provider's window) → lease → lookup → mark → gate → pacing → send → record. Every
 * ending goes through {@link Outcomes.settle} (./outcome.ts). The lanes (./lanes.ts) decide which
 * event is next; this module decides what happens to it (docs/delivery.md).
 *
 * Exactly once through failover: an event is recorded before its window slot is freed, so for
 * targets that cannot absorb a repeat at most the window's events per Provider are between "sent"
 * and "recorded" at any time (./class.ts `sendWindow`) — what a leader killed at any moment may
 * send again, each with its same event id. Targets that can be asked (`lookup`) are marked in
 * flight first and asked instead of sent blind.
 */
import type { ResolvedProvider } from '../credential/provider.ts';
import { jitteredBackoff, sleep, type Clock } from '../kube/clock.ts';
import type { ProviderError } from '../notifier/errors.ts';
import type { Verdict } from '../notifier/classify.ts';
import { DEFAULT_PROVIDER_WINDOW, sendWindow } from './class.ts';
import { isInFlight, runRecord } from './ledger-entry.ts';
import type { KeyedSemaphore } from './locks.ts';
import { failureText, retryReason, type DeliveryJob, type DeliveryLedger, type Outcomes } from './outcome.ts';
import type { PreparedSend, Sender } from './send.ts';
import { skipDecision, superseded } from './skip.ts';
import type { DeliveryResult, RetryPolicy } from './types.ts';

/** `held`: try later; `again`: re-evaluate now (cancelled, or the Provider's credentials changed). */
export type Handled = DeliveryResult | 'held' | 'again';

/** A failed attempt: the error and what it means (src/notifier/classify.ts). */
interface Failure {
  error: ProviderError;
  verdict: Verdict;
}

/** Renders tried again after one that ran out of time only, before the event fails. */
const RENDER_TIME_RETRIES = 4;

/** Re-reads a Provider's Secrets on demand (the Provider reconciler). */
export interface CredentialRefresher {
  /**
   * Resolves the Provider `namespace/name` again from its current Secrets and publishes the
   * result; resolves with it (undefined when it is no longer usable).
   */
  refresh(providerKey: string): Promise<ResolvedProvider | undefined>;
}

export interface DeliveryEngineOptions {
  ledger: DeliveryLedger;
  outcomes: Outcomes;
  sender: Sender;
  /** Usable Providers by `namespace/name`. */
  providers: { get(key: string): ResolvedProvider | undefined };
  /** The Providers' windows (shared by every job of the process). */
  windows: KeyedSemaphore;
  clock: Clock;
  retry: RetryPolicy;
  /** Aborted when stopping: no new attempt; backoff and gate waits end. */
  stopping: AbortSignal;
  /** Aborted at the stop deadline: sends on the wire are cancelled. */
  cancelSends: AbortSignal;
  /** Re-reads credentials before an authentication failure is taken as final (case N10). */
  credentials?: CredentialRefresher | undefined;
  /** Whether this process may send now (the leader Lease is surely ours). Default: always. */
  maySend?: (() => boolean) | undefined;
  /** `--provider-window` (./class.ts). */
  providerWindow?: number | undefined;
}

export class DeliveryEngine {
  readonly #o: DeliveryEngineOptions;

  constructor(opts: DeliveryEngineOptions) {
    this.#o = opts;
  }

  /** `--provider-window` W: sends of class `event-id` between "sent" and "recorded" per Provider. */
  get providerWindow(): number {
    return this.#o.providerWindow ?? DEFAULT_PROVIDER_WINDOW;
  }

  /** Decides what happens to `job`'s event: skipped with a reason, or sent with retries. */
  async deliver(job: DeliveryJob): Promise<Handled> {
    const p = this.#o.providers.get(job.providerKey);
    const skip = skipDecision({
      offered: job.item.offered,
      beforeAlert: job.item.beforeAlert,
      providerKey: job.providerKey,
      provider: p,
    });
    if (skip === 'held') return 'held';
    if (skip) return this.#o.outcomes.settle(job, p, { result: 'Skipped', ...skip });
    if (!p) return 'held'; // (the skip checks hold a missing Provider)
    const prepared = await this.#prepare(job, p);
    if (prepared === 'again') return 'again';
    if (!('notifier' in prepared))
      return this.#o.outcomes.settle(job, p, {
        result: 'Failed',
        reason: prepared.code,
        message: prepared.message,
      });
    return this.#withRetries(job, prepared);
  }

  /**
   * Finds the notifier and renders, once per event. A render that ran out of time only (a loaded
   * machine: a CPU-starved worker thread, one still starting) is tried again before the event is
   * given up as TemplateBudgetExceeded.
   */
  async #prepare(job: DeliveryJob, p: ResolvedProvider): Promise<PreparedSend | ProviderError | 'again'> {
    const ev = job.item.offered.event;
    let prepared = await this.#o.sender.prepare(job.alert, job.providerKey, p, ev);
    for (let i = 0; !('notifier' in prepared) && prepared.retryable && i < RENDER_TIME_RETRIES; i++) {
      job.log.warn({ attempt: i + 1 }, `rendering again: ${prepared.message}`);
      const stop = this.#stop(job);
      await sleep(this.#o.clock, jitteredBackoff(i, this.#o.retry.initialMs, this.#o.retry.maxMs), stop);
      if (stop.aborted) return 'again';
      prepared = await this.#o.sender.prepare(job.alert, job.providerKey, p, ev);
    }
    return prepared;
  }

  /** Attempts until delivered, a final error, or the retry time runs out; backoff in between. */
  async #withRetries(job: DeliveryJob, s: PreparedSend): Promise<Handled> {
    const { provider: p } = s;
    const { outcomes } = this.#o;
    const started = this.#o.clock.now();
    let warned = false;
    /** The last attempt may have arrived: ask the target before sending (class `lookup`). */
    let unsure = false;
    for (let round = 0; ; round++) {
      if (aborted(job.cancel()) || this.#o.stopping.aborted) return 'again';
      const stale =
        round > 0 ? superseded(job.item.offered.event, job.item.runKey, job.waiting()) : undefined;
      if (stale && stale !== 'held') {
        job.log.info('run finished while its start was being retried: sending only the result');
        return outcomes.settle(job, p, { result: 'Skipped', ...stale });
      }
      if (this.#o.providers.get(s.providerKey) !== p) return 'again'; // Provider changed: re-resolve.

      const outcome = await this.#attemptOnce(job, s, unsure);
      if (typeof outcome === 'string') return outcome;

      const { error: pe, verdict } = outcome;
      // Cancelled (shutdown deadline, Alert or Provider deleted/suspended): not a failure.
      if (verdict.kind === 'aborted' || aborted(this.#o.cancelSends) || aborted(job.cancel())) return 'again';
      if (verdict.kind === 'ambiguous') {
        if (s.cls === 'once') return outcomes.settle(job, p, { result: 'Unconfirmed', error: pe });
        if (s.cls === 'lookup') unsure = true;
      }
      if ((verdict.kind === 'auth' || verdict.kind === 'permission') && this.#o.credentials !== undefined) {
        // Case N10: a rotated credential shows as 401/403 before our periodic re-read sees it.
        const fresh = await this.#o.credentials.refresh(s.providerKey);
        if (fresh !== undefined && fresh !== p && !sameCredentials(fresh, p)) {
          job.log.info('credentials changed in the Secret: sending again with the new ones');
          return 'again';
        }
      }
      const elapsed = this.#o.clock.now() - started;
      if (!verdict.retry) {
        const message = failureText('DeliveryFailed', pe);
        return outcomes.settle(job, p, { result: 'Failed', reason: 'DeliveryFailed', message });
      }
      if (elapsed >= this.#o.retry.maxElapsedMs) {
        const message = failureText('RetriesExhausted', pe, elapsed);
        return outcomes.settle(job, p, { result: 'Failed', reason: 'RetriesExhausted', message });
      }
      const delay = Math.max(
        jitteredBackoff(round, this.#o.retry.initialMs, this.#o.retry.maxMs),
        verdict.retryAfterMs ?? 0,
      );
      outcomes.retrying(job, p, pe, verdict, this.#o.clock.now() + delay);
      job.log.warn(
        { attempts: job.attempts, retryInMs: delay, code: pe.code, status: pe.status, verdict: verdict.kind },
        `delivery failed, retrying: ${pe.message}`,
      );
      if (!warned && job.attempts >= this.#o.retry.warnAfterAttempts) {
        warned = true;
        // One message per Provider and error (not per event or attempt): the Event recorder folds
        // repeats into one Event with a count.
        void outcomes.warn(
          job.alert,
          retryReason(verdict),
          `deliveries to Provider ${s.providerKey} fail and are retried: ${outcomes.redact(pe.message, p)}`,
        );
      }
      job.pause(); // a waiting job leaves its turn to the Provider's other Stacks
      await sleep(this.#o.clock, delay, AbortSignal.any([this.#stop(job), job.wake()]));
      if (aborted(this.#o.stopping)) return 'held';
      if (aborted(job.wake())) job.rewake();
      if (!(await job.resume(this.#stop(job)))) return aborted(this.#o.stopping) ? 'held' : 'again';
    }
  }

  /** One attempt, in protocol order; returns the event's fate, or the failure to retry or settle. */
  async #attemptOnce(job: DeliveryJob, s: PreparedSend, unsure: boolean): Promise<Handled | Failure> {
    const { ledger, outcomes, sender } = this.#o;
    const stop = this.#stop(job);
    // Lock: a slot of the Provider's window, held until the event is recorded (or not sent).
    const window = sendWindow(s.cls, this.providerWindow);
    let release = (): void => undefined;
    if (window !== undefined) {
      try {
        release = await this.#o.windows.acquire(s.providerKey, window, stop);
      } catch {
        return 'again';
      }
    }
    try {
      // Lease: a starved leader that lost its Lease without noticing yet never sends beside its successor.
      if (this.#o.maySend?.() === false) {
        job.log.warn('not sending: the leader Lease may have passed to another replica (renewals are late)');
        return 'held';
      }
      const entry = outcomes.entry(job);
      const ref = outcomes.ref(job, entry);
      const note = runRecord(entry, job.item.runHash)?.note;
      const ctx = note !== undefined ? { runNote: note } : {};
      const alertRef = { namespace: job.alert.namespace, name: job.alert.name, uid: job.alert.uid };
      const ev = s.event;
      // Lookup: a target that can be asked, and the event may be there already.
      if (s.cls === 'lookup' && (unsure || isInFlight(entry, ref))) {
        const found = await sender.lookup(s, stop, ctx);
        if (typeof found !== 'boolean') return { error: found, verdict: found.verdict };
        if (found) {
          const message = `${ev.reason} found at ${s.provider.type}`;
          await outcomes.settle(job, s.provider, {
            result: 'Delivered',
            reason: 'AlreadyDelivered',
            message,
          });
          return 'Delivered';
        }
      }
      // Mark: the next leader asks the target instead of sending blind.
      if (s.cls === 'lookup') await ledger.markInFlight(alertRef, job.stackUid, ref);
      // Gate: a Retry-After or rate-limit reset of the credential holds every Provider sharing it.
      await sender.passGate(s, stop);
      // Pacing and send: a slot in the Provider's queue, then the request.
      job.attempts++;
      const r = await sender.send(s, stop, [this.#o.cancelSends, job.cancel()], ctx);
      if (r.kind === 'stopped') return 'again';
      if (r.kind === 'failed') return { error: r.error, verdict: r.verdict };
      // Record, before the window slot is freed: a leader killed now repeats at most the window.
      const message = `${ev.reason} delivered to ${s.provider.type}`;
      const settled: { result: 'Delivered'; reason: 'Delivered'; message: string; note?: string } = {
        result: 'Delivered',
        reason: 'Delivered',
        message,
      };
      if (r.note !== undefined) settled.note = r.note;
      return await outcomes.settle(job, s.provider, settled);
    } finally {
      release();
    }
  }

  /** Ends waits when stopping or when the job is cancelled. */
  #stop(job: DeliveryJob): AbortSignal {
    return AbortSignal.any([this.#o.stopping, job.cancel()]);
  }
}

/** A function, not the property: TypeScript would narrow `signal.aborted` across awaits. */
function aborted(signal: AbortSignal): boolean {
  return signal.aborted;
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
