/**
 * Prints the notifications of a drift check as the built-in templates render them (the examples
 * in docs/drift.md): the recorded PKO v2.9.0 agent log of `pulumi preview --refresh` on a
 * drifted pkotest File (test/fixtures/agent-logs/05-drift.log) → the drift analysis
 * (src/drift/plan.ts) → the DriftDetected and DriftResolved events (src/drift/events.ts) →
 * renderNotification for Slack and GitHub (commit status and pull-request comment).
 *
 *   npx node scripts/render-drift-examples.ts
 */
import { readFileSync } from 'node:fs';
import type { NotificationEvent } from '../src/api/event.ts';
import type { Stack } from '../src/api/pko.ts';
import type { DriftDetection } from '../src/api/v1alpha1.ts';
import { parseWorkspaceLog } from '../src/changes/parse.ts';
import { driftEvent } from '../src/drift/events.ts';
import { afterCheck, analyzeDrift } from '../src/drift/plan.ts';
import { limitsFor } from '../src/provider-types.ts';
import { compileTemplates, renderNotification, type RenderedNotification } from '../src/template/index.ts';

export const EXAMPLE_SHA = '7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b';

/** The DriftDetected and DriftResolved events of the recorded drift, for Stack `app` (acme/app/dev). */
export function exampleEvents(): { detected: NotificationEvent; resolved: NotificationEvent } {
  const log = readFileSync(new URL('../test/fixtures/agent-logs/05-drift.log', import.meta.url), 'utf8');
  const set = parseWorkspaceLog(log);
  const a = analyzeDrift(set);
  if (a.kind !== 'drifted') throw new Error('the recording shows no drift');
  const stack: Stack = {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name: 'app', namespace: 'team-a', uid: '0d7c1f9e-4b53-4a7e-9a44-2f0f3b7c9d11' },
    spec: { stack: 'acme/app/dev', projectRepo: 'https://github.com/acme/app.git', branch: 'main' },
  };
  const dd: DriftDetection = {
    apiVersion: 'notification.pko.dev/v1alpha1',
    kind: 'DriftDetection',
    metadata: { name: 'nightly', namespace: 'team-a' },
    spec: {},
  };
  const t = Date.UTC(2026, 11, 1, 15, 25);
  const common = { commit: EXAMPLE_SHA, label: 'acme/app/dev', next: t + 3_600_000 };
  const e1 = afterCheck(
    { name: 'app', uid: stack.metadata.uid ?? '' },
    { ...common, check: 'app-drift-3f9a1c2e', now: t, outcome: { kind: 'drifted', analysis: a } },
  );
  const e2 = afterCheck(e1, {
    ...common,
    check: 'app-drift-b71d04aa',
    now: t + 3_600_000,
    outcome: { kind: 'clean' },
  });
  if (e1.lastEvent === undefined || e2.lastEvent === undefined) throw new Error('no events');
  const ctx = { reportingController: 'pko-notification-controller' };
  return {
    detected: driftEvent(stack, dd, e1.lastEvent, ctx),
    resolved: driftEvent(stack, dd, e2.lastEvent, ctx),
  };
}

/** `ev` rendered by the built-in templates for Provider type `type` on cluster `prod`. */
export function renderExample(ev: NotificationEvent, type: 'slack' | 'github'): RenderedNotification {
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  return renderNotification(r.set, ev, {
    clusterName: 'prod',
    providerType: type,
    commentsEnabled: true,
    limits: limitsFor(type),
  });
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const { detected, resolved } = exampleEvents();
  for (const [name, ev] of [
    ['DriftDetected', detected],
    ['DriftResolved', resolved],
  ] as const) {
    const slack = renderExample(ev, 'slack');
    const gh = renderExample(ev, 'github');
    console.log(`## ${name}: Slack message\n\n${slack.message}\n`);
    console.log(`## ${name}: GitHub commit status\n\n${JSON.stringify(gh.commitStatus, null, 2)}\n`);
    console.log(`## ${name}: GitHub pull-request comment\n\n${gh.comment?.body ?? '(none)'}\n`);
  }
}
