/**
 * The send façade: one event, one Provider — render, credential gate, pacing, notifier. Three
 * collaborators, held as named ports: the templates (src/template), the notifier registry
 * (`ProviderTypes`, implemented by src/provider-types.ts) and the Provider health it reports to
 * (`ProviderHealthSink`, ./health.ts). ./deliver.ts decides what to send and when to retry, in
 * which order the steps run; this module only knows how to do each step once
 * (docs/architecture.md, "Delivery").
 *
 * Per Provider generation one notifier (its HTTP client pooled across sends) and one pacing queue
 * (bounded concurrency; a minimal interval between sends for chat services). Per credential one
 * gate: a `Retry-After` or rate-limit reset holds every Provider that shares the credential.
 */
import PQueue from 'p-queue';
import type { Registry } from 'prom-client';
import type { NotificationEvent } from '../api/event.ts';
import type { ProviderType } from '../api/v1alpha1.ts';
import { credentialKey } from '../credential/key.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { systemClock, type Clock } from '../kube/clock.ts';
import { counter, histogram } from '../kube/metrics.ts';
import type { Logger } from '../log.ts';
import { ProviderError } from '../notifier/errors.ts';
import type { Verdict } from '../notifier/classify.ts';
import type { Notifier, SendContext } from '../notifier/types.ts';
import { TemplateBudgetError } from '../template/budget.ts';
import type { ProviderLimits, RenderedNotification } from '../template/index.ts';
import { CredentialGate } from './gate.ts';
import { problemReason, type ProviderProblem } from './health.ts';
import { KeyedLock } from './locks.ts';
import type { DeliveryAlert, DeliveryClass } from './types.ts';
import { DEFAULT_PROVIDER_WINDOW, deliveryClass, sendWindow } from './class.ts';

/** Provider type → implementation (src/provider-types.ts). */
export interface ProviderTypes {
  /**
   * Builds the notifier of `p.type`, which owns its HTTP client from then on. `deps.serialize`
   * orders read-modify-write on one target across the process (src/notifier/types.ts).
   * @throws Error when the type has no implementation or refuses `p`; the message says why.
   */
  create(
    p: ResolvedProvider,
    deps?: { serialize?: <T>(key: string, fn: () => Promise<T>) => Promise<T> },
  ): Notifier;
  /** The field limits of `type`: what the renderer fits every rendered field to. */
  limits(type: ProviderType): ProviderLimits;
}

/** Where the façade reports what a send revealed about a Provider (./health.ts `ProviderHealth`). */
export interface ProviderHealthSink {
  report(providerKey: string, problem: ProviderProblem | undefined): void;
}

export interface SendPorts {
  notifiers: ProviderTypes;
  health: ProviderHealthSink;
}

export interface SenderOptions {
  ports: SendPorts;
  /** `--cluster-name`, part of default commit status contexts and comment markers. */
  clusterName: string;
  logger: Logger;
  /** Redacts every secret the controller knows (all Providers'), on top of the Provider's own (src/credential/redact.ts `Redactor`). */
  redactor?: { redact(text: string): string };
  registry?: Registry;
  clock?: Clock;
  /** In-flight sends per Provider (default 4; at least the window for class `event-id`). */
  providerConcurrency?: number;
  /** `--provider-window` (./class.ts `sendWindow`): `event-id` Providers send this many at once. */
  providerWindow?: number;
}

/** One event ready to send to one Provider: its notifier and rendered notification. */
export interface PreparedSend {
  providerKey: string;
  provider: ResolvedProvider;
  event: NotificationEvent;
  rendered: RenderedNotification;
  notifier: Notifier;
  /** `credentialKey(provider)`: the gate and pacing key. */
  credential: string;
  /** What a repeat does to this target (./types.ts). */
  cls: DeliveryClass;
}

export type AttemptResult =
  | { kind: 'sent'; note?: string }
  | { kind: 'failed'; error: ProviderError; verdict: Verdict }
  /** `stopping` aborted before the request left: nothing was sent. */
  | { kind: 'stopped' };

/** Minimal interval (ms) between two sends of one Provider, from the chat services' published limits. */
const PACING_MS: Partial<Record<ProviderType, number>> = {
  slack: 1000,
  msteams: 250,
  discord: 500,
  googlechat: 1000,
};

export class Sender {
  readonly #o: SenderOptions;
  readonly #clock: Clock;
  readonly #gate: CredentialGate;
  readonly #notifiers = new Map<string, { p: ResolvedProvider; n: Notifier }>();
  readonly #queues = new Map<string, PQueue>();
  readonly #targets = new KeyedLock();
  readonly #m;

  constructor(opts: SenderOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? systemClock;
    this.#gate = new CredentialGate(this.#clock);
    const r = opts.registry;
    this.#m = {
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

  /**
   * Renders `ev` for `alert` and Provider `p` (in the template sandbox) and finds its notifier
   * (kept per Provider generation). Rendering happens once per event, whatever the number of
   * attempts.
   * @returns the prepared send, or a final `ProviderError` whose code is the reason:
   *   `NotImplemented` when the Provider type has no notifier or refuses the Provider,
   *   `TemplateBudgetExceeded` when a template of the Alert ran out of its render budget
   *   (docs/threat-model.md; `retryable` when only time ran out), `TemplateFailed` when the
   *   templates cannot be rendered at all.
   */
  async prepare(
    alert: DeliveryAlert,
    providerKey: string,
    p: ResolvedProvider,
    ev: NotificationEvent,
  ): Promise<PreparedSend | ProviderError> {
    let notifier: Notifier;
    try {
      notifier = this.#notifier(providerKey, p);
    } catch (err) {
      return new ProviderError(err instanceof Error ? err.message : String(err), {
        code: 'NotImplemented',
        retryable: false,
        secretValues: p.secretValues,
      });
    }
    let rendered: RenderedNotification;
    try {
      rendered = await alert.templates.render(ev, {
        clusterName: this.#o.clusterName,
        providerType: p.type,
        commentsEnabled: p.pullRequestComment,
        limits: this.#o.ports.notifiers.limits(p.type),
        onTemplateError: (template, message) => {
          this.#o.logger.warn(
            { alert: alert.key, template },
            `template failed at render time, used the built-in one: ${message}`,
          );
        },
      });
    } catch (err) {
      const budget = err instanceof TemplateBudgetError;
      const what = err instanceof Error ? err.message : String(err);
      return new ProviderError(
        budget && !err.builtin
          ? `the Alert's templates ran out of their render budget (${err.kind}): ${what}; change the templateRef ConfigMap`
          : what,
        {
          code: budget ? 'TemplateBudgetExceeded' : 'TemplateFailed',
          // Out of time may be a loaded machine rather than the template (steps and output are
          // counted exactly): the dispatcher renders again a few times before it gives up.
          retryable: budget && err.kind === 'time',
          secretValues: p.secretValues,
        },
      );
    }
    return {
      providerKey,
      provider: p,
      event: ev,
      rendered,
      notifier,
      credential: credentialKey(p),
      cls: deliveryClass(p, notifier),
    };
  }

  /**
   * Asks the target whether it already holds the event (`Notifier.findDelivered`, with the run's
   * note in `ctx`), through the credential gate. `true`/`false`, or the failure that kept it from
   * answering.
   */
  async lookup(
    s: PreparedSend,
    signal: AbortSignal,
    ctx: SendContext = {},
  ): Promise<boolean | ProviderError> {
    if (s.notifier.findDelivered === undefined) return false;
    await this.#gate.wait(s.credential, signal);
    try {
      return await s.notifier.findDelivered(s.event, signal, ctx);
    } catch (err) {
      const pe = this.#asProviderError(err, s.provider);
      if (pe.retryAfterMs !== undefined) this.#gate.block(s.credential, this.#clock.now() + pe.retryAfterMs);
      return pe;
    }
  }

  /**
   * Waits until the credential's gate is open: a `Retry-After` or rate-limit reset told to any
   * Provider sharing `s.credential` holds them all until then. Ends early when `stopping` aborts.
   */
  async passGate(s: PreparedSend, stopping: AbortSignal): Promise<void> {
    await this.#gate.wait(s.credential, stopping);
  }

  /**
   * One send: takes a slot in the Provider's pacing queue (bounded concurrency; a minimal
   * interval for chat services) and sends. A failure that names a wait (`Retry-After`, rate-limit
   * reset) closes the gate for the credential until then; every outcome is reported to the
   * Provider health.
   * @param stopping a send still queued when it aborts sends nothing (result `stopped`).
   * @param cancel any of them aborted aborts a send already on the wire (it fails with code
   *   `ABORTED`); listened to directly, not through `AbortSignal.any` (cheaper per send).
   * @param ctx what delivery tells the notifier (the run's note).
   */
  async send(
    s: PreparedSend,
    stopping: AbortSignal,
    cancel: readonly AbortSignal[],
    ctx: SendContext = {},
  ): Promise<AttemptResult> {
    if (stopping.aborted) return { kind: 'stopped' };
    const type = s.provider.type;
    let started = 0;
    try {
      // Not p-queue's `signal`: it would abandon a running send (reject while the request goes
      // on). A queued send that starts after `stopping` sends nothing; a running one finishes or
      // is cancelled through `cancel`.
      const task = async (): Promise<{ note: string | undefined } | undefined> => {
        if (stopping.aborted) return undefined;
        started = this.#clock.now();
        // A signal of this send's own, so nothing below ties per-request signals to the
        // dispatcher's long-lived ones.
        const own = new AbortController();
        const abort = (): void => {
          own.abort();
        };
        for (const c of cancel) {
          if (c.aborted) own.abort();
          else c.addEventListener('abort', abort, { once: true });
        }
        try {
          const out = await s.notifier.send(s.event, s.rendered, own.signal, ctx);
          return { note: out?.note };
        } finally {
          for (const c of cancel) c.removeEventListener('abort', abort);
        }
      };
      // The delivery window (./class.ts) already bounds an unpaced class below the queue's
      // concurrency: the queue would never hold the send, so it is skipped (p-queue's bookkeeping
      // was ~3 % of a burst's busy time).
      const sent = this.#windowBounded(s) ? await task() : await this.#queue(s).add(task);
      if (!sent) return { kind: 'stopped' };
      this.#m.duration.observe({ provider_type: type }, (this.#clock.now() - started) / 1000);
      this.#m.attempts.inc({ provider_type: type, outcome: 'success' });
      this.#o.ports.health.report(s.providerKey, undefined);
      return sent.note !== undefined ? { kind: 'sent', note: sent.note } : { kind: 'sent' };
    } catch (err) {
      const pe = this.#asProviderError(err, s.provider);
      // The classification travels with the error (src/notifier/classify.ts).
      const verdict = pe.verdict;
      this.#m.attempts.inc({ provider_type: type, outcome: pe.code });
      if (pe.retryAfterMs !== undefined) this.#gate.block(s.credential, this.#clock.now() + pe.retryAfterMs);
      const reason = problemReason(pe);
      if (reason) this.#o.ports.health.report(s.providerKey, { reason, message: this.#redact(pe.message) });
      return { kind: 'failed', error: pe, verdict };
    }
  }

  /** Closes every notifier (and its HTTP client). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#notifiers.values()].map((x) => x.n.close()));
    this.#notifiers.clear();
  }

  #redact(text: string): string {
    return this.#o.redactor ? this.#o.redactor.redact(text) : text;
  }

  #asProviderError(err: unknown, p: ResolvedProvider): ProviderError {
    return err instanceof ProviderError
      ? err
      : new ProviderError(err instanceof Error ? err.message : String(err), {
          retryable: true,
          code: 'INTERNAL',
          secretValues: p.secretValues,
        });
  }

  /**
   * Runs `fn` holding the lock of one forge target (a commit status context or a pull request's
   * comment: the keys of src/forge/notifier.ts), as every notifier of this Sender does: the
   * preview controller's status resolutions take it too, so a resolution and a delivery to the
   * same status never interleave (case N18).
   */
  serializeTarget<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.#targets.run(key, fn);
  }

  #notifier(key: string, p: ResolvedProvider): Notifier {
    const cached = this.#notifiers.get(key);
    if (cached?.p === p) return cached.n;
    if (cached) void cached.n.close();
    const n = this.#o.ports.notifiers.create(p, {
      serialize: (k, fn) => this.#targets.run(k, fn),
    });
    this.#notifiers.set(key, { p, n });
    return n;
  }

  #queue(s: PreparedSend): PQueue {
    let q = this.#queues.get(s.providerKey);
    if (q?.concurrency !== this.#concurrency(s)) q = undefined; // a Provider whose type changed
    if (!q) {
      const pacing = PACING_MS[s.provider.type];
      q = new PQueue({
        concurrency: this.#concurrency(s),
        ...(pacing !== undefined ? { intervalCap: 1, interval: pacing } : {}),
      });
      this.#queues.set(s.providerKey, q);
    }
    return q;
  }

  /**
   * Whether the dispatcher's window alone bounds `s`'s sends: a windowed class without pacing (the
   * queue's concurrency is never below the window, {@link Sender.#concurrency}).
   */
  #windowBounded(s: PreparedSend): boolean {
    if (PACING_MS[s.provider.type] !== undefined) return false;
    return sendWindow(s.cls, this.#o.providerWindow ?? DEFAULT_PROVIDER_WINDOW) !== undefined;
  }

  /** Sends at once per Provider: the dispatcher's window for the class, at least `providerConcurrency`. */
  #concurrency(s: PreparedSend): number {
    const window = sendWindow(s.cls, this.#o.providerWindow ?? DEFAULT_PROVIDER_WINDOW) ?? 0;
    return Math.max(this.#o.providerConcurrency ?? 4, window);
  }
}
