/**
 * Shared pieces of the ChangeAttacher tests that drive it with an injected log reader: the
 * Stack, its events, a successful read's result and an Update's result as PKO writes it.
 */
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import type { WorkspaceLogRead } from '../../src/kube/workspace-log.ts';
import { stackEvent } from '../template/fixtures.ts';

export const stack: Stack = { metadata: { name: 'app', namespace: 'team-a', uid: 'stack-uid' }, spec: {} };

/** An event of the run `u1` of {@link stack}. */
export function event(phase: EventIdentity['phase']['kind']): NotificationEvent {
  const identity = {
    stack: 'stack-uid',
    run: { kind: 'update', name: 'u1' },
    phase: { kind: phase },
  } as EventIdentity;
  return stackEvent({ identity, id: eventId(identity), metadata: {} });
}

/** What `readWorkspaceLog` answers after passing `lines` lines to its end (`more` overrides). */
export function logRead(lines: number, more: Partial<WorkspaceLogRead> = {}): WorkspaceLogRead {
  return {
    ok: true,
    pod: 'app-workspace-0',
    lines,
    bytes: 0,
    cutLines: 0,
    end: 'eof',
    restartedDuringRun: false,
    droppedFragment: false,
    message: 'read',
    ...more,
  };
}

/** Marks `update` complete now, as PKO does when its run ended (`endTime`, `Complete=True`). */
export function completeUpdate(update: Update): void {
  const now = new Date().toISOString();
  update.status = {
    ...update.status,
    endTime: now,
    conditions: [
      { type: 'Complete', status: 'True', reason: 'Updated', message: '', lastTransitionTime: now },
    ],
  };
}
