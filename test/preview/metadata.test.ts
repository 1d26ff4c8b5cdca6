/**
 * Events of a preview Stack name their pull request (`metadata.pullRequest`) from the Stack's
 * label, so the forge needs no "pull requests of this commit" lookup (src/alert/router.ts
 * `pullRequestOf` as the derivation's `pullRequest` hook).
 */
import { describe, expect, it } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import { pullRequestOf } from '../../src/alert/router.ts';
import { eventsForStack } from '../../src/source/derive.ts';

const owned = (labels: Record<string, string>, kind = 'PullRequestPreview'): Stack => ({
  apiVersion: 'pulumi.com/v1',
  kind: 'Stack',
  metadata: {
    name: 'app-pr-7',
    namespace: 'team',
    uid: 'u1',
    labels,
    ownerReferences: [{ apiVersion: 'notification.pko.dev/v1alpha1', kind, name: 'previews', uid: 'p1' }],
  },
  spec: {
    stack: 'acme/app/dev',
    projectRepo: 'https://git.example.com/acme/app.git',
    commit: 'a'.repeat(40),
    preview: true,
  },
  status: {
    lastUpdate: {
      name: 'app-pr-7-1',
      type: 'preview',
      state: 'succeeded',
      lastAttemptedCommit: 'a'.repeat(40),
      permalink: 'https://app.pulumi.com/acme/app/dev/previews/x',
    },
  },
});

describe('pullRequest metadata of preview Stacks', () => {
  it('is the pull-request label of a Stack owned by a PullRequestPreview', () => {
    expect(pullRequestOf(owned({ 'notification.pko.dev/pull-request': '7' }))).toBe('7');
  });

  it('is absent for a Stack not owned by a PullRequestPreview, or a label that is not a number', () => {
    expect(pullRequestOf(owned({ 'notification.pko.dev/pull-request': '7' }, 'Workspace'))).toBeUndefined();
    expect(pullRequestOf(owned({ 'notification.pko.dev/pull-request': '07' }))).toBeUndefined();
    expect(pullRequestOf(owned({ 'notification.pko.dev/pull-request': '7; rm' }))).toBeUndefined();
    expect(pullRequestOf(undefined)).toBeUndefined();
  });

  it('reaches the derived events through the derivation hook', () => {
    const stack = owned({ 'notification.pko.dev/pull-request': '7' });
    const events = eventsForStack(stack, [], {
      reportingController: 'test',
      pullRequest: () => pullRequestOf(stack),
    });
    expect(events.length).toBeGreaterThan(0);
    for (const ev of events) expect(ev.metadata.pullRequest).toBe('7');
  });
});
