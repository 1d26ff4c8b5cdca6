/** Events for template tests. */
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';

const IDENTITY: EventIdentity = {
  stack: 'uid-1',
  run: { kind: 'update', name: 'update-1' },
  phase: { kind: 'failed' },
};

export const COMMIT = '1111111111111111111111111111111111111111';

export function stackEvent(overrides: Partial<NotificationEvent> = {}): NotificationEvent {
  return {
    identity: IDENTITY,
    id: eventId(IDENTITY),
    involvedObject: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      namespace: 'team-a',
      name: 'app',
      uid: 'uid-1',
    },
    labels: { team: 'a' },
    severity: 'error',
    reason: 'UpdateFailed',
    message: 'Update of stack acme/app/dev failed:\nerror: resource failed',
    timestamp: '2026-05-01T12:00:00Z',
    metadata: {
      revision: `main@sha1:${COMMIT}`,
      commit: COMMIT,
      repository: 'https://github.com/acme/app',
      branch: 'main',
      stack: 'acme/app/dev',
      updateName: 'update-1',
      updateType: 'up',
      permalink: 'https://app.pulumi.com/acme/app/dev/updates/7',
      failures: '2',
    },
    reportingController: 'pko-notification-controller',
    ...overrides,
  };
}

/** An Update from a Program source: no commit, no repository (case F26). */
export function bareEvent(overrides: Partial<NotificationEvent> = {}): NotificationEvent {
  return stackEvent({
    reason: 'UpdateSucceeded',
    severity: 'info',
    message: 'Update of stack team-a/app succeeded',
    metadata: { revision: '3', updateName: 'update-2', updateType: 'up' },
    labels: {},
    ...overrides,
  });
}

/** Whether every fenced code block in `md` is closed (CommonMark: a closing fence is a line of ≥ as many backticks). */
export function fencesBalanced(md: string): boolean {
  let open: number | null = null;
  for (const line of md.split('\n')) {
    const m = /^ {0,3}(`{3,})(.*)$/.exec(line);
    if (!m) continue;
    const len = m[1]?.length ?? 0;
    if (open === null) {
      if (!(m[2] ?? '').includes('`')) open = len;
    } else if (len >= open && (m[2] ?? '').trim() === '') {
      open = null;
    }
  }
  return open === null;
}
