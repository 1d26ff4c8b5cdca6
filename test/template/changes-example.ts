/**
 * The example comment shown in docs/previews.md and templates/README.md: the update preview of
 * the recording test/fixtures/agent-logs/02-update.log rendered by the built-in templates for
 * GitHub. test/template/changes.test.ts keeps both documents equal to this rendering.
 */
import { readFileSync } from 'node:fs';
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import { parseWorkspaceLog } from '../../src/changes/parse.ts';
import { limitsFor } from '../../src/provider-types.ts';
import { compileTemplates, renderNotification } from '../../src/template/index.ts';

const SHA = '0c3f5e9a1b2d4c6e8f0a1b2c3d4e5f6a7b8c9d0e';

/** The rendered example: the comment body and the commit status description. */
export function exampleRendering(): { comment: string; status: string; message: string } {
  const text = readFileSync(new URL('../fixtures/agent-logs/02-update.log', import.meta.url), 'utf8');
  const preview = text.slice(0, text.indexOf('\n', text.indexOf('\tpreview completed')) + 1);
  const identity: EventIdentity = {
    stack: 'stack-uid',
    run: { kind: 'update', name: 'app-pr-7-018f2a' },
    phase: { kind: 'succeeded' },
  };
  const ev: NotificationEvent = {
    identity,
    id: eventId(identity),
    involvedObject: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      namespace: 'team-a',
      name: 'app-pr-7',
      uid: 'stack-uid',
    },
    labels: {},
    severity: 'info',
    reason: 'PreviewSucceeded',
    message: 'Preview of stack dev succeeded',
    timestamp: '2026-12-01T15:24:32Z',
    metadata: {
      revision: SHA,
      commit: SHA,
      repository: 'https://github.com/acme/app',
      branch: 'feature',
      stack: 'dev',
      updateName: 'app-pr-7-018f2a',
      updateType: 'preview',
      pullRequest: '7',
    },
    reportingController: 'pko-notification-controller',
    changes: { set: parseWorkspaceLog(preview) },
  };
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  const out = renderNotification(r.set, ev, {
    clusterName: 'prod',
    providerType: 'github',
    commentsEnabled: true,
    limits: limitsFor('github'),
  });
  return {
    comment: out.comment?.body ?? '',
    status: out.commitStatus?.description ?? '',
    message: out.message,
  };
}
