/**
 * Drift events as the built-in templates render them (the examples of docs/drift.md come from
 * scripts/render-drift-examples.ts, which this test runs): the recorded PKO v2.9.0 drift → the
 * Slack message names the resource and its property lines; on GitHub the commit status of the
 * deployed commit has its own `/drift` context, failure while drifted, success once resolved.
 */
import { describe, expect, it } from 'vitest';
import { EXAMPLE_SHA, exampleEvents, renderExample } from '../../scripts/render-drift-examples.ts';

describe('drift notifications (built-in templates)', () => {
  const { detected, resolved } = exampleEvents();

  it('DriftDetected: error severity, the Stack as involved object, the deployed commit', () => {
    expect(detected).toMatchObject({
      reason: 'DriftDetected',
      severity: 'error',
      involvedObject: { kind: 'Stack', namespace: 'team-a', name: 'app' },
      metadata: { commit: EXAMPLE_SHA, branch: 'main', stack: 'acme/app/dev', driftDetection: 'nightly' },
    });
    expect(detected.id).toBe(`${detected.involvedObject.uid}/drift%3Aapp-drift-3f9a1c2e/failed`);
    expect(resolved).toMatchObject({ reason: 'DriftResolved', severity: 'info' });
  });

  it('Slack: the head line, the resource with its properties, the property lines', () => {
    const m = renderExample(detected, 'slack').message;
    expect(m).toContain(
      'Drift detected in stack acme/app/dev at 7a6b5c4: 1 resource differs from the deployed state',
    );
    expect(m).toContain('pkotest:index:File f: content, size');
    expect(m).toContain('+ changed out of band');
    expect(m).toContain('Commit: 7a6b5c4 (main)');
    expect(renderExample(resolved, 'slack').message).toContain('Drift resolved in stack acme/app/dev');
  });

  it('GitHub: a commit status of its own (…/drift): failure while drifted, success once resolved', () => {
    const d = renderExample(detected, 'github').commitStatus;
    expect(d).toMatchObject({ state: 'failure', context: 'pko/prod/team-a/app/drift' });
    expect(d?.description).toMatch(/^Drift detected in stack acme\/app\/dev at 7a6b5c4/);
    const r = renderExample(resolved, 'github').commitStatus;
    expect(r).toMatchObject({ state: 'success', context: 'pko/prod/team-a/app/drift' });
  });
});
