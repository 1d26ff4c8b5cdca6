/**
 * The pure parts of src/kube/workspace-log.ts: which run a Stack and its Update name, and the
 * `sinceTime` sent for it. Reading through the API server: workspace-log.int.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Stack, Update, UpdateSpec, UpdateStatus } from '../../src/api/pko.ts';
import { sinceTimeOf, workspacePodName, workspaceRunOf } from '../../src/kube/workspace-log.ts';

const stack: Stack = { metadata: { name: 'app', namespace: 'team-a', uid: 'u-1' } };
const update = (status: UpdateStatus, spec: UpdateSpec = { workspaceName: 'app' }): Update => ({
  metadata: { name: 'app-3f2a', namespace: 'team-a' },
  spec,
  status,
});

describe('sinceTimeOf', () => {
  it('cuts to whole seconds (down) in UTC', () => {
    expect(sinceTimeOf('2026-12-01T13:58:29Z')).toBe('2026-12-01T13:58:29Z');
    expect(sinceTimeOf('2026-12-01T13:58:29.999Z')).toBe('2026-12-01T13:58:29Z');
    expect(sinceTimeOf('2026-12-01T14:58:29.5+01:00')).toBe('2026-12-01T13:58:29Z');
  });
});

describe('workspaceRunOf', () => {
  it("names the Update's Workspace, the Stack's uid and the start", () => {
    expect(workspaceRunOf(stack, update({ startTime: '2026-12-01T13:58:29Z' }))).toEqual({
      namespace: 'team-a',
      stackName: 'app',
      stackUid: 'u-1',
      workspaceName: 'app',
      startTime: '2026-12-01T13:58:29Z',
    });
    expect(workspacePodName('app')).toBe('app-workspace-0');
  });

  it('falls back to the Stack name (PKO v2 names the Workspace after the Stack)', () => {
    const run = workspaceRunOf(stack, update({ startTime: '2026-12-01T13:58:29Z' }, {}));
    expect(typeof run === 'string' ? run : run.workspaceName).toBe('app');
  });

  it('says why there is no run: not started, no uid, another namespace', () => {
    expect(workspaceRunOf(stack, update({}))).toMatch(/has not started/);
    expect(workspaceRunOf(stack, update({ startTime: 'yesterday' }))).toMatch(/has not started/);
    expect(
      workspaceRunOf(
        { metadata: { name: 'app', namespace: 'team-a' } },
        update({ startTime: '2026-12-01T13:58:29Z' }),
      ),
    ).toMatch(/no namespace, name or uid/);
    expect(
      workspaceRunOf(stack, {
        ...update({ startTime: '2026-12-01T13:58:29Z' }),
        metadata: { name: 'x', namespace: 'team-b' },
      }),
    ).toMatch(/another namespace/);
  });
});
