/**
 * Collaborators for the dispatcher and send façade unit tests, all behind the ports those
 * classes declare (nothing global is touched): an in-memory ledger using the real entry algebra,
 * a recording Event recorder, a scripted notifier, and builders for Alerts and events.
 */
import { Writable } from 'node:stream';
import {
  eventId,
  runKey,
  type EventPhase,
  type NotificationEvent,
  type RunRef,
} from '../../src/api/event.ts';
import type { KubeObject } from '../../src/api/meta.ts';
import type { DeliveryLedger, WarningRecorder } from '../../src/delivery/lanes.ts';
import {
  recordHandled,
  recordInFlight,
  runHash,
  type Entry,
  type EventRef,
} from '../../src/delivery/ledger-entry.ts';
import type { LedgerAlertRef } from '../../src/delivery/ledger.ts';
import type { DeliveryAlert } from '../../src/delivery/types.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import type { Notifier, RenderedNotification, SendContext, SendOutcome } from '../../src/notifier/types.ts';
import { compileTemplates, inlineTemplates } from '../../src/template/index.ts';

/** A logger that writes nowhere. */
export function quietLogger(): Logger {
  return createLogger({
    level: 'silent',
    destination: new Writable({
      write: (_c, _e, cb) => {
        cb();
      },
    }),
  });
}

/** The ledger's contract in memory (same entry algebra as the DeliveryLedger store). */
export class MemoryLedger implements DeliveryLedger {
  readonly entries = new Map<string, Entry>();
  /** `recorded(run, phase)` of every event recorded as handled, in order. */
  readonly advanced: string[] = [];
  /** The same for every in-flight mark. */
  readonly inFlight: string[] = [];
  /** Notes stored with `record`, in order. */
  readonly notes: string[] = [];
  #paused: Promise<void> | undefined;

  /**
   * Holds every `record` (not persisted, not resolved) until the returned function is called: a
   * slow ledger write.
   */
  pause(): () => void {
    let resume!: () => void;
    this.#paused = new Promise((r) => {
      resume = r;
    });
    return () => {
      this.#paused = undefined;
      resume();
    };
  }

  entry(alertUid: string, stackUid: string): Entry | undefined {
    return this.entries.get(`${alertUid}/${stackUid}`);
  }
  async record(alert: LedgerAlertRef, stackUid: string, q: EventRef, note?: string): Promise<void> {
    await this.#paused;
    const key = `${alert.uid}/${stackUid}`;
    this.entries.set(key, recordHandled(this.entries.get(key), q, note));
    this.advanced.push(`${q.run}/${q.phase}`);
    if (note !== undefined) this.notes.push(note);
  }
  markInFlight(alert: LedgerAlertRef, stackUid: string, q: EventRef): Promise<void> {
    const key = `${alert.uid}/${stackUid}`;
    this.entries.set(key, recordInFlight(this.entries.get(key), q));
    this.inFlight.push(`${q.run}/${q.phase}`);
    return Promise.resolve();
  }
}

/** How {@link MemoryLedger} lists an event of Stack `stack-uid`, run `run`. */
export function recorded(run: string, phase: string, stack = 'stack-uid'): string {
  return `${runHash(runKey({ stack, run: { kind: 'update', name: run }, phase: { kind: 'started' } }))}/${phase}`;
}

export class RecordingRecorder implements WarningRecorder {
  readonly events: { reason: string; message: string }[] = [];
  event(_obj: KubeObject, _type: 'Warning', reason: string, message: string): Promise<void> {
    this.events.push({ reason, message });
    return Promise.resolve();
  }
}

/** What a scripted send does: resolve (optionally leaving a run note), reject, or wait until released or cancelled. */
export type Step = 'ok' | { note: string } | Error | 'hang';

/** A notifier whose sends follow `steps` (then `ok`), recording each send and its signal. */
export class ScriptedNotifier implements Notifier {
  readonly sends: {
    id: string;
    rendered: RenderedNotification;
    signal: AbortSignal | undefined;
    ctx: SendContext | undefined;
  }[] = [];
  readonly steps: Step[];
  closed = false;
  #release: (() => void)[] = [];

  constructor(steps: Step[] = []) {
    this.steps = steps;
  }

  send(
    ev: NotificationEvent,
    rendered: RenderedNotification,
    signal?: AbortSignal,
    ctx?: SendContext,
  ): Promise<SendOutcome | undefined> {
    this.sends.push({ id: ev.id, rendered, signal, ctx });
    const step = this.steps.shift() ?? 'ok';
    if (step === 'ok') return Promise.resolve(undefined);
    if (step instanceof Error) return Promise.reject(step);
    if (step !== 'hang') return Promise.resolve({ note: step.note });
    return new Promise((resolve, reject) => {
      this.#release.push(() => {
        resolve(undefined);
      });
      signal?.addEventListener('abort', () => {
        reject(Object.assign(new Error('cancelled'), { cancelled: true }));
      });
    });
  }

  /** Lets every hanging send finish. */
  release(): void {
    for (const r of this.#release.splice(0)) r();
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}

export function deliveryAlert(overrides: Partial<DeliveryAlert> = {}): DeliveryAlert {
  const t = compileTemplates();
  if (!t.ok) throw new Error(t.message);
  return {
    key: 'team-a/ops',
    uid: 'alert-uid',
    namespace: 'team-a',
    name: 'ops',
    providerName: 'hook',
    createdMs: 0,
    templates: inlineTemplates(t.set),
    ...overrides,
  };
}

/** An event of Stack `stack-uid`, run `run` (an Update name with hex millis), phase `phase`. */
export function runEvent(
  run: string,
  phase: EventPhase['kind'] & ('started' | 'succeeded' | 'failed'),
  metadata: Record<string, string> = {},
): NotificationEvent {
  const r: RunRef = { kind: 'update', name: run };
  const identity = { stack: 'stack-uid', run: r, phase: { kind: phase } };
  return {
    identity,
    id: eventId(identity),
    involvedObject: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      namespace: 'team-a',
      name: 'app',
      uid: 'stack-uid',
    },
    labels: {},
    severity: phase === 'failed' ? 'error' : 'info',
    reason:
      phase === 'started' ? 'UpdateStarted' : phase === 'succeeded' ? 'UpdateSucceeded' : 'UpdateFailed',
    message: `Update ${phase}`,
    timestamp: '2026-01-01T00:00:00Z',
    metadata: { updateName: run, ...metadata },
    reportingController: 'pko-notification-controller',
  };
}
