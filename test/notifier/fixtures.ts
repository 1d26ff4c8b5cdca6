/** Shared fixtures for notifier tests: a ResolvedProvider builder and a sample event. */
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';

export function resolved(
  overrides: Partial<ResolvedProvider> & Pick<ResolvedProvider, 'address'>,
): ResolvedProvider {
  return {
    namespace: 'team-a',
    name: 'hook',
    type: 'generic',
    addressFromSecret: false,
    headers: {},
    timeoutMs: 5_000,
    suspend: false,
    pullRequestComment: true,
    secretValues: [],
    ...overrides,
  };
}

const IDENTITY: EventIdentity = {
  stack: '6f1c2d9e-0000-4000-8000-000000000001',
  run: { kind: 'update', name: 'update-abc' },
  phase: { kind: 'succeeded' },
};

export const sampleEvent: NotificationEvent = {
  identity: IDENTITY,
  id: eventId(IDENTITY),
  involvedObject: {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Update',
    namespace: 'team-a',
    name: 'update-abc',
    uid: '6f1c2d9e-0000-4000-8000-0000000000aa',
  },
  labels: { app: 'web' },
  severity: 'info',
  reason: 'UpdateSucceeded',
  message: 'raw message from the source',
  timestamp: '2026-05-01T12:00:00Z',
  metadata: {
    revision: 'main@sha1:0123456789abcdef0123456789abcdef01234567',
    commit: '0123456789abcdef0123456789abcdef01234567',
    branch: undefined,
  },
  reportingController: 'pko-notification-controller',
};
