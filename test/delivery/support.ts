/**
 * Collaborators for the dispatcher and send façade unit tests, all behind the ports those
 * classes declare (nothing global is touched): an in-memory ledger using the real entry algebra,
 * a recording Event recorder, a scripted notifier, and builders for Alerts and events.
 */
import { Writable } from 'node:stream';
import { eventId, type EventPhase, type NotificationEvent, type RunRef } from '../../src/api/event.ts';
import type { KubeObject } from '../../src/api/meta.ts';
import type { DeliveryLedger, WarningRecorder } from '../../src/delivery/dispatcher.ts';
import { applyHandled, entryCovers, type Entry } from '../../src/delivery/ledger-entry.ts';
import type { LedgerAlertRef } from '../../src/delivery/ledger.ts';
import type { EventPosition } from '../../src/delivery/order.ts';
import type { DeliveryAlert } from '../../src/delivery/types.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import type { Notifier, RenderedNotification } from '../../src/notifier/types.ts';
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

/** The ledger's contract in memory (same entry algebra as the ConfigMap store). */
export class MemoryLedger implements DeliveryLedger {
  readonly entries = new Map<string, Entry>();
  readonly advanced: string[] = [];

  position(alertUid: string, stackUid: string): EventPosition | undefined {
    return this.entries.get(`${alertUid}/${stackUid}`)?.pos;
  }
  isDone(alertUid: string, stackUid: string, pos: EventPosition, id: string): boolean {
    return entryCovers(this.entries.get(`${alertUid}/${stackUid}`), pos, id);
  }
  advance(alert: LedgerAlertRef, stackUid: string, pos: EventPosition, id: string): Promise<void> {
    const key = `${alert.uid}/${stackUid}`;
    this.entries.set(key, applyHandled(this.entries.get(key), pos, id));
    this.advanced.push(id);
    return Promise.resolve();
  }
}

export class RecordingRecorder implements WarningRecorder {
  readonly events: { reason: string; message: string }[] = [];
  event(_obj: KubeObject, _type: 'Warning', reason: string, message: string): Promise<void> {
    this.events.push({ reason, message });
    return Promise.resolve();
  }
}

/** What a scripted send does: resolve, reject, or wait until released or cancelled. */
export type Step = 'ok' | Error | 'hang';

/** A notifier whose sends follow `steps` (then `ok`), recording each send and its signal. */
export class ScriptedNotifier implements Notifier {
  readonly sends: { id: string; rendered: RenderedNotification; signal: AbortSignal | undefined }[] = [];
  readonly steps: Step[];
  closed = false;
  #release: (() => void)[] = [];

  constructor(steps: Step[] = []) {
    this.steps = steps;
  }

  send(ev: NotificationEvent, rendered: RenderedNotification, signal?: AbortSignal): Promise<void> {
    this.sends.push({ id: ev.id, rendered, signal });
    const step = this.steps.shift() ?? 'ok';
    if (step === 'ok') return Promise.resolve();
    if (step instanceof Error) return Promise.reject(step);
    return new Promise((resolve, reject) => {
      this.#release.push(resolve);
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
