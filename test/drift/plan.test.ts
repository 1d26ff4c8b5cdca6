/**
 * Drift checks, the pure part (src/drift/plan.ts): selection, the interval floor and jitter,
 * readiness, the check Stack, what a recorded PKO v2 agent log of `pulumi preview --refresh`
 * says drifted (test/fixtures/agent-logs/05-drift.log), and the state transitions with the
 * events they imply.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import type { DriftDetection, DriftStackStatus } from '../../src/api/v1alpha1.ts';
import { DRIFT_CHECK_LABEL, isDriftCheck } from '../../src/api/v1alpha1.ts';
import { parseWorkspaceLog } from '../../src/changes/parse.ts';
import {
  JITTER_FRACTION,
  MAX_STACK_NAME,
  MIN_INTERVAL_MS,
  afterCheck,
  analyzeDrift,
  checkOwnedBy,
  checkStack,
  checkStackName,
  deferred,
  firstDue,
  intervalOf,
  matchesSelector,
  nextDue,
  notCheckable,
  propertiesOf,
  readiness,
  selectStacks,
  type CheckOutcome,
} from '../../src/drift/plan.ts';

const SHA = '7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b';

function stack(
  name: string,
  o: Partial<Stack['metadata']> & { spec?: Stack['spec']; status?: Stack['status'] } = {},
): Stack {
  const { spec, status, ...meta } = o;
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, ...meta },
    spec: spec ?? {
      stack: `acme/${name}/dev`,
      projectRepo: 'https://git.example/acme/app.git',
      branch: 'main',
    },
    ...(status ? { status } : {}),
  };
}

function dd(spec: DriftDetection['spec']): DriftDetection {
  return {
    apiVersion: 'notification.pko.dev/v1alpha1',
    kind: 'DriftDetection',
    metadata: { name: 'nightly', namespace: 'ns', uid: 'dd-uid' },
    spec,
  };
}

const readyStatus = (commit = SHA): Stack['status'] => ({
  conditions: [{ type: 'Ready', status: 'True', reason: 'ProcessingCompleted', message: '' }],
  lastUpdate: {
    name: 'app-1',
    type: 'up',
    state: 'succeeded',
    lastAttemptedCommit: commit,
    lastSuccessfulCommit: commit,
  },
});

const driftLog = readFileSync(new URL('../fixtures/agent-logs/05-drift.log', import.meta.url), 'utf8');

describe('selection', () => {
  it('label selectors follow Kubernetes semantics', () => {
    const labels = { team: 'a', tier: 'prod' };
    expect(matchesSelector(labels, {})).toBe(true);
    expect(matchesSelector(labels, { matchLabels: { team: 'a' } })).toBe(true);
    expect(matchesSelector(labels, { matchLabels: { team: 'b' } })).toBe(false);
    expect(
      matchesSelector(labels, { matchExpressions: [{ key: 'tier', operator: 'In', values: ['prod'] }] }),
    ).toBe(true);
    expect(
      matchesSelector(labels, { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['prod'] }] }),
    ).toBe(false);
    expect(
      matchesSelector(labels, { matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['y'] }] }),
    ).toBe(true);
    expect(matchesSelector(labels, { matchExpressions: [{ key: 'x', operator: 'Exists' }] })).toBe(false);
    expect(matchesSelector(labels, { matchExpressions: [{ key: 'x', operator: 'DoesNotExist' }] })).toBe(
      true,
    );
  });

  it('selects by name or label, sorted; never previews, drift checks or PullRequestPreview previews', () => {
    const stacks = [
      stack('b', { labels: { drift: 'on' } }),
      stack('a'),
      stack('c'),
      stack('pv', { labels: { drift: 'on' }, spec: { preview: true } }),
      stack('check', {
        labels: { drift: 'on', [DRIFT_CHECK_LABEL]: 'other' },
        ownerReferences: [
          {
            apiVersion: 'notification.pko.dev/v1alpha1',
            kind: 'DriftDetection',
            name: 'other',
            uid: 'x',
            controller: true,
          },
        ],
      }),
      stack('pr', {
        labels: { drift: 'on' },
        ownerReferences: [
          {
            apiVersion: 'notification.pko.dev/v1alpha1',
            kind: 'PullRequestPreview',
            name: 'p',
            uid: 'y',
            controller: true,
          },
        ],
      }),
      stack('gone', { labels: { drift: 'on' }, deletionTimestamp: '2026-12-01T00:00:00Z' }),
    ];
    const names = selectStacks(
      dd({ stackNames: ['a'], selector: { matchLabels: { drift: 'on' } } }),
      stacks,
    ).map((s) => s.metadata.name);
    expect(names).toEqual(['a', 'b']);
    expect(notCheckable(stacks[3]!)).toMatch(/preview Stack/);
    expect(notCheckable(stacks[4]!)).toMatch(/drift check/);
    expect(notCheckable(stacks[5]!)).toMatch(/pull-request preview/);
    expect(isDriftCheck(stacks[4]!)).toBe(true);
    // A label alone does not make a drift check (anyone may set labels).
    expect(isDriftCheck(stack('x', { labels: { [DRIFT_CHECK_LABEL]: 'nightly' } }))).toBe(false);
  });
});

describe('schedule', () => {
  it('refuses an interval under 10m with a sentence, never raises it', () => {
    expect(intervalOf(dd({ interval: '10m' }))).toBe(MIN_INTERVAL_MS);
    expect(intervalOf(dd({}))).toBe(3_600_000);
    expect(intervalOf(dd({ interval: '9m59s' }))).toMatch(/shorter than 10m.*set 10m or more/);
    expect(intervalOf(dd({ interval: 'soon' }))).toMatch(/^spec.interval: invalid duration/);
  });

  it('jitter stays within 10 % of the interval after it; the first check within the first window', () => {
    const interval = 3_600_000;
    expect(nextDue(1000, interval, () => 0)).toBe(1000 + interval);
    const max = nextDue(1000, interval, () => 0.999999);
    expect(max).toBeLessThan(1000 + interval + interval * JITTER_FRACTION);
    expect(max).toBeGreaterThan(1000 + interval);
    expect(firstDue(1000, interval, () => 0)).toBe(1000);
    expect(firstDue(1000, interval, () => 0.5)).toBe(1000 + interval * JITTER_FRACTION * 0.5);
  });
});

describe('readiness', () => {
  it('Ready at the last successful commit and not running: checkable at that commit', () => {
    expect(readiness(stack('a', { status: readyStatus() }))).toEqual({ commit: SHA });
  });
  it('running (currentUpdate or Reconciling) → deferred for a short retry', () => {
    const running = stack('a', {
      status: { ...readyStatus(), currentUpdate: { name: 'app-2', commit: SHA } },
    });
    expect(readiness(running)).toMatchObject({ running: true });
    const reconciling = stack('a', {
      status: {
        ...readyStatus(),
        conditions: [{ type: 'Reconciling', status: 'True', reason: 'StackProcessing', message: '' }],
      },
    });
    expect(readiness(reconciling)).toMatchObject({ running: true });
  });
  it('never deployed, failed last run or not Ready → waits for the next interval', () => {
    const never = readiness(stack('a'));
    expect('why' in never && !never.running && never.why).toMatch(/no successful deployment/);
    const failed = stack('a', {
      status: {
        conditions: [{ type: 'Ready', status: 'False', reason: 'UpdateFailed', message: '' }],
        lastUpdate: { state: 'failed', lastAttemptedCommit: 'f'.repeat(40), lastSuccessfulCommit: SHA },
      },
    });
    const r = readiness(failed);
    expect('why' in r && !r.running && r.why).toMatch(/not Ready/);
  });
});

describe('the check Stack', () => {
  it('is the base spec with preview, refresh, the commit, no branch, no destroy, Retain; owned and labelled', () => {
    const base = stack('app', {
      spec: {
        stack: 'acme/app/dev',
        projectRepo: 'https://git.example/acme/app.git',
        branch: 'main',
        serviceAccountName: 'app-sa',
        envRefs: { TOKEN: { type: 'Secret', secret: { name: 's', key: 'k' } } },
        destroyOnFinalize: true,
        expectNoRefreshChanges: true,
        continueResyncOnCommitMatch: true,
      },
    });
    const name = checkStackName('app', 'seed');
    const cs = checkStack(base, dd({ stackNames: ['app'] }), name, SHA);
    expect(cs.metadata.name).toMatch(/^app-drift-[0-9a-f]{8}$/);
    expect(cs.spec).toEqual({
      stack: 'acme/app/dev',
      projectRepo: 'https://git.example/acme/app.git',
      commit: SHA,
      serviceAccountName: 'app-sa',
      envRefs: { TOKEN: { type: 'Secret', secret: { name: 's', key: 'k' } } },
      preview: true,
      refresh: true,
      destroyOnFinalize: false,
      workspaceReclaimPolicy: 'Retain',
      continueResyncOnCommitMatch: false,
    });
    expect(isDriftCheck(cs)).toBe(true);
    expect(checkOwnedBy(cs, 'dd-uid')).toBe(true);
    expect(checkOwnedBy(cs, 'other')).toBe(false);
    // The base Stack is not modified.
    expect(base.spec?.branch).toBe('main');
  });

  it('names fit PKO 42 characters and differ per seed', () => {
    const long = 'a-very-long-stack-name-that-goes-on-and-on-forever';
    const n = checkStackName(long, 's1');
    expect(n.length).toBeLessThanOrEqual(MAX_STACK_NAME);
    expect(n).toMatch(/^a-very-long-stack-name-that-drift-[0-9a-f]{8}$/);
    expect(checkStackName(long, 's2')).not.toBe(n);
    expect(checkStackName('ends-with-dash-------------------------x', 's')).not.toMatch(/--drift/);
  });
});

describe('what drifted (recorded PKO v2.9.0 agent log, pulumi preview --refresh)', () => {
  it('05-drift.log: File f drifted in content and size; the root stack is left out', () => {
    const a = analyzeDrift(parseWorkspaceLog(driftLog));
    expect(a.kind).toBe('drifted');
    if (a.kind !== 'drifted') return;
    expect(a.count).toBe(1);
    expect(a.resources).toHaveLength(1);
    expect(a.resources[0]).toMatchObject({
      type: 'pkotest:index:File',
      name: 'f',
      properties: ['content', 'size'],
    });
    expect(a.resources[0]?.diff).toContain('    + changed out of band');
    expect(a.fingerprint).toMatch(/^[0-9a-f]{16}$/);
  });

  it('a refresh with no differences is clean', () => {
    const kept = driftLog.split('\n').filter((l) => !/\t {6}[~+-]|\t {10}[+-]|\t {8}--outputs/.test(l));
    // The update's resource, [id=…] and [urn=…] lines go: the CLI prints no unchanged resource but the root stack.
    kept.splice(
      kept.findIndex((l) => l.includes('~ pkotest:index:File: (update)')),
      3,
    );
    const clean = kept
      .join('\n')
      // The whole summary line goes (its time stamp too, else two entries would join).
      .replace(/\n[^\n]*\tpulumi\t {4}~ 1 to update(?=\n)/, '')
      .replace('2 unchanged', '3 unchanged');
    const set = parseWorkspaceLog(clean);
    expect(set.failed).toBe(false);
    expect(analyzeDrift(set)).toEqual({ kind: 'clean' });
  });

  it('a failed preview is a failed check with the CLI error', () => {
    const log = readFileSync(new URL('../fixtures/agent-logs/06-error-program.log', import.meta.url), 'utf8');
    const a = analyzeDrift(parseWorkspaceLog(log));
    expect(a.kind === 'failed' && a.why).toMatch(/^the check's preview failed: error/);
  });

  it('property names of diff lines', () => {
    expect(
      propertiesOf(['  --outputs:--', '~ content:', '    - a', '~ size   : 11 => 20', '+ tags: {']),
    ).toEqual(['content', 'size', 'tags']);
  });
});

describe('state transitions and their events', () => {
  const a = analyzeDrift(parseWorkspaceLog(driftLog));
  if (a.kind !== 'drifted') throw new Error('fixture does not drift');
  const drifted: CheckOutcome = { kind: 'drifted', analysis: a };
  const step = (prev: DriftStackStatus, outcome: CheckOutcome, check: string): DriftStackStatus =>
    afterCheck(prev, {
      check,
      commit: SHA,
      label: 'acme/app/dev',
      now: Date.UTC(2026, 11, 1, 12),
      next: Date.UTC(2026, 11, 1, 13),
      outcome,
    });
  const fresh: DriftStackStatus = { name: 'app', uid: 'u' };

  it('clean first: no event', () => {
    const e = step(fresh, { kind: 'clean' }, 'c1');
    expect(e).toMatchObject({ result: 'Clean', changedResources: 0, nextCheckTime: '2026-12-01T13:00:00Z' });
    expect(e.lastEvent).toBeUndefined();
  });

  it('drift → DriftDetected naming the resource and property; the same drift again → no new event', () => {
    const e1 = step(fresh, drifted, 'c1');
    expect(e1).toMatchObject({ result: 'Drifted', changedResources: 1, commit: SHA });
    expect(e1.lastEvent).toMatchObject({ reason: 'DriftDetected', check: 'c1', commit: SHA });
    expect(e1.lastEvent?.message).toMatch(
      /^Drift detected in stack acme\/app\/dev at 7a6b5c4: 1 resource differs/,
    );
    expect(e1.lastEvent?.message).toContain('pkotest:index:File f: content, size');
    const e2 = step(e1, drifted, 'c2');
    expect(e2.lastEvent).toEqual(e1.lastEvent);
  });

  it('drift then clean → DriftResolved; clean again → nothing new', () => {
    const e1 = step(fresh, drifted, 'c1');
    const e2 = step(e1, { kind: 'clean' }, 'c2');
    expect(e2.lastEvent).toMatchObject({ reason: 'DriftResolved', check: 'c2' });
    expect(e2.driftFingerprint).toBeUndefined();
    const e3 = step(e2, { kind: 'clean' }, 'c3');
    expect(e3.lastEvent).toEqual(e2.lastEvent);
  });

  it('failed → DriftCheckFailed with the reason, once per streak; the drift state is kept', () => {
    const e1 = step(fresh, drifted, 'c1');
    const e2 = step(e1, { kind: 'failed', why: 'the workspace pod is gone' }, 'c2');
    expect(e2).toMatchObject({
      result: 'Failed',
      message: 'the workspace pod is gone',
      driftFingerprint: e1.driftFingerprint,
    });
    expect(e2.lastEvent).toMatchObject({ reason: 'DriftCheckFailed', check: 'c2' });
    expect(e2.lastEvent?.message).toMatch(/failed: the workspace pod is gone$/);
    const e3 = step(e2, { kind: 'failed', why: 'again' }, 'c3');
    expect(e3.lastEvent).toEqual(e2.lastEvent);
    // The same drift after the failure: not reported again.
    expect(step(e3, drifted, 'c4').lastEvent).toEqual(e2.lastEvent);
  });

  it('deferred keeps the last event and drift, clears the check', () => {
    const e1 = {
      ...step(fresh, drifted, 'c1'),
      check: { name: 'c2', uid: 'x', startTime: '2026-12-01T12:00:00Z' },
    };
    const d = deferred(e1, 'the check was abandoned: the Stack started a run', 0, 60_000);
    expect(d.check).toBeUndefined();
    expect(d).toMatchObject({
      result: 'Deferred',
      lastEvent: e1.lastEvent,
      driftFingerprint: e1.driftFingerprint,
    });
    expect(d.nextCheckTime).toBe('1970-01-01T00:01:00Z');
  });
});
