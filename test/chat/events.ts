/** Events of one run for chat notifier tests: Started, Succeeded, Failed of an Update. */
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { EventReason, ProviderType } from '../../src/api/v1alpha1.ts';
import { limitsFor } from '../../src/provider-types.ts';
import { compileTemplates, renderNotification } from '../../src/template/index.ts';
import type { RenderedNotification } from '../../src/template/rendered.ts';
import { sampleEvent } from '../notifier/fixtures.ts';

const REASONS: Record<'started' | 'succeeded' | 'failed', [EventReason, 'info' | 'error']> = {
  started: ['UpdateStarted', 'info'],
  succeeded: ['UpdateSucceeded', 'info'],
  failed: ['UpdateFailed', 'error'],
};

/** An event of run `run` (an Update name) of Stack `stack` in phase `phase`. */
export function runEvent(
  phase: 'started' | 'succeeded' | 'failed',
  run = 'update-abc',
  stack = '6f1c2d9e-0000-4000-8000-000000000001',
): NotificationEvent {
  const identity: EventIdentity = { stack, run: { kind: 'update', name: run }, phase: { kind: phase } };
  const [reason, severity] = REASONS[phase];
  return {
    ...sampleEvent,
    identity,
    id: eventId(identity),
    reason,
    severity,
    metadata: { ...sampleEvent.metadata, permalink: 'https://app.pulumi.com/acme/app/dev/updates/7' },
  };
}

/** The message the built-in templates render for `ev` on `type` (the real renderer, fitted to the type's limits). */
export function renderFor(type: ProviderType, ev: NotificationEvent): RenderedNotification {
  const r = compileTemplates();
  if (!r.ok) throw new Error(`${r.template}: ${r.message}`);
  return renderNotification(r.set, ev, {
    clusterName: 'prod',
    providerType: type,
    commentsEnabled: false,
    limits: limitsFor(type),
  });
}

/** A failed run whose output is `output` (the source puts it after the summary line). */
export function failedWith(output: string, run = 'update-abc'): NotificationEvent {
  const ev = runEvent('failed', run);
  return { ...ev, message: `Update of stack acme/app/dev failed:\n${output}` };
}
