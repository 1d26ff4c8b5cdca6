/** Events of one run for chat notifier tests: Started, Succeeded, Failed of an Update. */
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { EventReason } from '../../src/api/v1alpha1.ts';
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
