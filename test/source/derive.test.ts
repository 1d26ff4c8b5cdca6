import { describe, expect, it } from 'vitest';
import type { Stack, Update } from '../../src/api/pko.ts';
import { runKey } from '../../src/api/event.ts';
import {
  RUN_COMMIT_ANNOTATION,
  RUN_OBSERVED_ANNOTATION,
  eventsForStack,
  eventsFromStack,
  eventsFromUpdate,
  recordedRevisions,
  revisionsToRecord,
  stackPredatesRun,
  updateObservedAt,
} from '../../src/source/derive.ts';
import {
  FAILED_MESSAGE,
  NS,
  PREV_SHA,
  SHA,
  STACK_UID,
  UPDATE_NAME,
  UPDATE_UID,
  cond,
  ctx,
  update,
  v1Stack,
  v2FailedStack,
  v2RunningStack,
} from './fixtures.ts';

const gone = { updateExists: () => false };
const present = { updateExists: () => true };
const HEX64 = '0123456789abcdef'.repeat(4);

describe('eventsFromUpdate', () => {
  it('a running Update yields only <Type>Started, about the Stack', () => {
    const evs = eventsFromUpdate(update('running'), v2RunningStack(), ctx);
    expect(evs).toEqual([
      {
        identity: {
          stack: STACK_UID,
          run: { kind: 'update', name: UPDATE_NAME },
          phase: { kind: 'started' },
        },
        id: `${STACK_UID}/${UPDATE_NAME}/started`,
        involvedObject: {
          apiVersion: 'pulumi.com/v1',
          kind: 'Stack',
          namespace: NS,
          name: 'app-dev',
          uid: STACK_UID,
        },
        labels: { team: 'a', env: 'dev' },
        severity: 'info',
        reason: 'UpdateStarted',
        message: `Update of stack acme/app/dev started: New commit detected: "${SHA}"`,
        timestamp: '2026-08-20T11:00:00Z',
        metadata: {
          revision: SHA,
          commit: SHA,
          repository: 'https://github.com/acme/app.git',
          branch: 'main',
          stack: 'acme/app/dev',
          updateName: UPDATE_NAME,
          updateType: 'up',
        },
        reportingController: 'pko-notification-controller',
      },
    ]);
  });

  it('a succeeded Update yields Started and Succeeded with the run facts', () => {
    const stack = v2FailedStack();
    const { message: _failure, ...last } = stack.status!.lastUpdate!;
    stack.status!.lastUpdate = { ...last, state: 'succeeded', failures: 0 };
    const evs = eventsFromUpdate(update('succeeded'), stack, ctx);
    expect(evs.map((e) => [e.reason, e.severity, e.id, e.timestamp])).toEqual([
      ['UpdateStarted', 'info', `${STACK_UID}/${UPDATE_NAME}/started`, '2026-08-20T11:00:00Z'],
      ['UpdateSucceeded', 'info', `${STACK_UID}/${UPDATE_NAME}/succeeded`, '2026-08-20T11:02:39Z'],
    ]);
    expect(evs[1]!.metadata).toEqual({
      revision: SHA,
      commit: SHA,
      repository: 'https://github.com/acme/app.git',
      branch: 'main',
      stack: 'acme/app/dev',
      updateName: UPDATE_NAME,
      updateType: 'up',
      permalink: 'https://app.pulumi.com/acme/app/dev/updates/42',
      failures: '0',
    });
    expect(evs[1]!.message).toBe(`Update of stack acme/app/dev succeeded: New commit detected: "${SHA}"`);
  });

  it('a failed Update yields Failed (error) with the CLI output cleaned into the message', () => {
    const evs = eventsFromUpdate(update('failed'), v2FailedStack(), ctx);
    const failed = evs.find((e) => e.reason === 'UpdateFailed')!;
    expect(failed.severity).toBe('error');
    expect(failed.id).toBe(`${STACK_UID}/${UPDATE_NAME}/failed`);
    expect(failed.message).toBe(
      'Update of stack acme/app/dev failed:\nup failed: failed to run update: exit status 255\ncode: 255\nstdout: ...\nstderr: error: update failed',
    );
    expect(failed.metadata).toMatchObject({ revision: SHA, commit: SHA, failures: '1' });
    expect(failed.timestamp).toBe('2026-08-20T11:02:39Z'); // Complete's transition: no endTime on failure
  });

  it.each([
    { type: 'preview', reasons: ['PreviewStarted', 'PreviewSucceeded'] },
    { type: 'up', reasons: ['UpdateStarted', 'UpdateSucceeded'] },
    { type: 'destroy', reasons: ['DestroyStarted', 'DestroySucceeded'] },
    { type: 'refresh', reasons: ['RefreshStarted', 'RefreshSucceeded'] },
    { type: 'import', reasons: [] },
    { type: 'Up', reasons: [] },
    { type: 'toString', reasons: [] },
  ])('maps Update type $type', ({ type, reasons }) => {
    expect(eventsFromUpdate(update('succeeded', type), undefined, ctx).map((e) => e.reason)).toEqual(reasons);
  });

  it('an Update without spec.type yields nothing', () => {
    const u = update('succeeded');
    delete u.spec!.type;
    expect(eventsFromUpdate(u, undefined, ctx)).toEqual([]);
  });

  it('Complete=True for an older generation is not done: only Started', () => {
    const u = update('failed');
    u.metadata.generation = 2;
    expect(eventsFromUpdate(u, undefined, ctx).map((e) => e.reason)).toEqual(['UpdateStarted']);
  });

  it('a completed Update whose Failed condition is missing or Unknown says neither success nor failure', () => {
    const u = update('succeeded');
    u.status!.conditions = u.status!.conditions!.filter((c) => c.type !== 'Failed');
    expect(eventsFromUpdate(u, undefined, ctx).map((e) => e.reason)).toEqual(['UpdateStarted']);
    u.status!.conditions.push(cond('Failed', 'Unknown', 'x'));
    expect(eventsFromUpdate(u, undefined, ctx).map((e) => e.reason)).toEqual(['UpdateStarted']);
  });

  describe('F29 aborted runs: not a failure of the commit, and nothing that says success', () => {
    it.each(['aborted', 'canceled', 'aborted-old'] as const)('F29 %s Update yields no events', (outcome) => {
      expect(eventsFromUpdate(update(outcome), v2FailedStack(), ctx)).toEqual([]);
      expect(eventsFromUpdate(update(outcome, 'preview'), undefined, ctx)).toEqual([]);
    });

    it('F29 the new Update PKO starts for the same commit carries the commit status', () => {
      const retry = update('succeeded', 'up', 'app-dev-198c70e9999');
      const stack = v2RunningStack('app-dev-198c70e9999', SHA);
      const evs = eventsFromUpdate(retry, stack, ctx);
      expect(evs.map((e) => [e.reason, e.metadata.commit])).toEqual([
        ['UpdateStarted', SHA],
        ['UpdateSucceeded', SHA],
      ]);
      expect(evs[0]!.id).toBe(`${STACK_UID}/app-dev-198c70e9999/started`);
    });
  });

  describe('identity', () => {
    it('re-observing the same status (relist, resourceVersion bump) yields equal events', () => {
      const a = update('failed');
      const b = structuredClone(a);
      b.metadata.resourceVersion = '99999';
      expect(eventsFromUpdate(b, v2FailedStack(), ctx)).toEqual(eventsFromUpdate(a, v2FailedStack(), ctx));
    });

    it('the run keeps its Started id from running to done', () => {
      const running = eventsFromUpdate(update('running'), v2RunningStack(), ctx);
      const done = eventsFromUpdate(update('failed'), v2FailedStack(), ctx);
      expect(done[0]!.id).toBe(running[0]!.id);
      expect(runKey(done[1]!.identity)).toBe(runKey(running[0]!.identity));
      expect(runKey(done[1]!.identity)).toBe(`${STACK_UID}/${UPDATE_NAME}`);
    });

    it('without the Stack object, the ownerReference gives the same id and involved object', () => {
      const withStack = eventsFromUpdate(update('failed'), v2FailedStack(), ctx);
      const without = eventsFromUpdate(update('failed'), undefined, ctx);
      expect(without.map((e) => e.id)).toEqual(withStack.map((e) => e.id));
      expect(without[1]!.involvedObject).toEqual(withStack[1]!.involvedObject);
      expect(without[1]!.labels).toEqual({}); // the Stack is known only by reference
      // Without the Stack, the commit still comes from the Update's `New commit detected` message.
      expect(without[1]!.metadata).toEqual({
        revision: '9f1c2e7d0a4b5c6d7e8f90112233445566778899',
        commit: '9f1c2e7d0a4b5c6d7e8f90112233445566778899',
        stack: 'acme/app/dev',
        updateName: UPDATE_NAME,
        updateType: 'up',
      });
    });

    it('a Stack re-created under the same name (other uid) is not used for the Update', () => {
      const other = v2FailedStack();
      other.metadata.uid = 'another-uid';
      const evs = eventsFromUpdate(update('failed'), other, ctx);
      expect(evs[0]!.id).toBe(`${STACK_UID}/${UPDATE_NAME}/started`);
      // Nothing of the other Stack is used: no labels, no permalink; the commit comes from the Update message.
      expect(evs[0]!.metadata.commit).toBe('9f1c2e7d0a4b5c6d7e8f90112233445566778899');
      expect(evs[0]!.metadata).not.toHaveProperty('permalink');
      expect(evs[0]!.labels).toEqual({});
    });

    it('an Update with no Stack owner and no Stack given is its own involved object, keyed by its uid', () => {
      const u = update('succeeded');
      u.metadata.ownerReferences = [];
      const evs = eventsFromUpdate(u, undefined, ctx);
      expect(evs[0]!.involvedObject).toEqual({
        apiVersion: 'auto.pulumi.com/v1alpha1',
        kind: 'Update',
        namespace: NS,
        name: UPDATE_NAME,
        uid: UPDATE_UID,
      });
      expect(evs[0]!.labels).toEqual(u.metadata.labels);
      expect(evs[0]!.id).toBe(`${UPDATE_UID}/${UPDATE_NAME}/started`);
    });

    it('a Stack given without an owner reference on the Update is used (fallback)', () => {
      const u = update('failed');
      u.metadata.ownerReferences = [];
      expect(eventsFromUpdate(u, v2FailedStack(), ctx)[1]!.id).toBe(`${STACK_UID}/${UPDATE_NAME}/failed`);
    });
  });

  it('F26 Program source: event produced with the fields that exist, no commit/repository/branch keys', () => {
    const stack = v2FailedStack();
    stack.spec = { stack: 'acme/app/dev', programRef: { name: 'app-program' } };
    stack.status!.lastUpdate!.lastAttemptedCommit = '3';
    const evs = eventsFromUpdate(update('failed'), stack, ctx);
    expect(evs.map((e) => e.reason)).toEqual(['UpdateStarted', 'UpdateFailed']);
    const md = evs[1]!.metadata;
    expect(md).toEqual({
      revision: '3',
      stack: 'acme/app/dev',
      updateName: UPDATE_NAME,
      updateType: 'up',
      failures: '1',
    });
    for (const key of ['commit', 'repository', 'branch', 'permalink', 'pullRequest'])
      expect(key in md).toBe(false);
  });

  it('Flux GitRepository source: repository from the context, branch from the revision', () => {
    const stack = v2FailedStack();
    stack.spec = {
      stack: 'acme/app/dev',
      fluxSource: {
        sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'app' },
        dir: 'infra',
      },
    };
    stack.status!.lastUpdate!.lastAttemptedCommit = `release/1.x@sha1:${SHA.toUpperCase()}`;
    const asked: string[] = [];
    const fluxCtx = {
      ...ctx,
      fluxRepositoryURL: (ns: string, name: string) => {
        asked.push(`${ns}/${name}`);
        return 'https://github.com/acme/app';
      },
      pullRequest: (_ns: string, name: string) => (name === 'app-dev' ? 17 : undefined),
    };
    const md = eventsFromUpdate(update('failed'), stack, fluxCtx)[1]!.metadata;
    expect(asked).toContain(`${NS}/app`);
    expect(md).toMatchObject({
      revision: `release/1.x@sha1:${SHA.toUpperCase()}`,
      commit: SHA,
      repository: 'https://github.com/acme/app',
      branch: 'release/1.x',
      pullRequest: '17',
    });
  });

  it('Flux OCIRepository source: no repository lookup, no commit', () => {
    const stack = v2FailedStack();
    stack.spec = { stack: 'acme/app/dev', fluxSource: { sourceRef: { kind: 'OCIRepository', name: 'app' } } };
    stack.status!.lastUpdate!.lastAttemptedCommit = `v1.2.0@sha256:${HEX64}`;
    const fluxCtx = { ...ctx, fluxRepositoryURL: () => 'https://must-not-be-used.test' };
    const md = eventsFromUpdate(update('failed'), stack, fluxCtx)[1]!.metadata;
    expect(md.revision).toBe(`v1.2.0@sha256:${HEX64}`);
    expect(md.commit).toBeUndefined();
    expect(md.repository).toBeUndefined();
  });
});

describe('eventsFromStack (PKO v2)', () => {
  it('a PKO v2.9 Stack, Update gone (TTL): UpdateFailed fallback with the run facts', () => {
    const evs = eventsFromStack(v2FailedStack(), ctx, gone);
    expect(evs).toEqual([
      {
        identity: { stack: STACK_UID, run: { kind: 'update', name: UPDATE_NAME }, phase: { kind: 'failed' } },
        id: `${STACK_UID}/${UPDATE_NAME}/failed`,
        involvedObject: {
          apiVersion: 'pulumi.com/v1',
          kind: 'Stack',
          namespace: NS,
          name: 'app-dev',
          uid: STACK_UID,
        },
        labels: { team: 'a', env: 'dev' },
        severity: 'error',
        reason: 'UpdateFailed',
        message:
          'Update of stack acme/app/dev failed:\nup failed: failed to run update: exit status 255\ncode: 255\nstdout: ...\nstderr: error: update failed',
        timestamp: '2026-08-20T11:02:40Z',
        metadata: {
          revision: SHA,
          commit: SHA,
          repository: 'https://github.com/acme/app.git',
          branch: 'main',
          stack: 'acme/app/dev',
          updateName: UPDATE_NAME,
          updateType: 'up',
          failures: '1',
        },
        reportingController: 'pko-notification-controller',
      },
    ]);
    expect(FAILED_MESSAGE).toContain('\u001b[31m'); // the raw message did carry colour codes
  });

  it('identity: the same run seen via its Update and via Stack.lastUpdate has the same id', () => {
    const viaUpdate = eventsFromUpdate(update('failed'), v2FailedStack(), ctx).find(
      (e) => e.reason === 'UpdateFailed',
    )!;
    const viaStack = eventsFromStack(v2FailedStack(), ctx, gone)[0]!;
    expect(viaStack.id).toBe(viaUpdate.id);
    expect(viaStack.reason).toBe(viaUpdate.reason);
    expect(viaStack.involvedObject).toEqual(viaUpdate.involvedObject);
    expect(viaStack.metadata.commit).toBe(viaUpdate.metadata.commit);
  });

  it('while the Update exists, the Stack adds nothing for lastUpdate (the Update is the source)', () => {
    const seen: string[] = [];
    const evs = eventsFromStack(v2FailedStack(), ctx, {
      updateExists: (ns, name) => {
        seen.push(`${ns}/${name}`);
        return true;
      },
    });
    expect(evs).toEqual([]);
    expect(seen).toEqual([`${NS}/${UPDATE_NAME}`]);
  });

  it.each([
    { type: 'preview', state: 'succeeded', reason: 'PreviewSucceeded', severity: 'info' },
    { type: 'destroy', state: 'failed', reason: 'DestroyFailed', severity: 'error' },
    { type: 'refresh', state: 'succeeded', reason: 'RefreshSucceeded', severity: 'info' },
    { type: 'up', state: 'unknown', reason: undefined, severity: undefined },
    { type: 'import', state: 'failed', reason: undefined, severity: undefined },
  ])('lastUpdate type $type state $state → $reason', ({ type, state, reason, severity }) => {
    const stack = v2FailedStack();
    stack.status!.lastUpdate = { ...stack.status!.lastUpdate!, type, state };
    const evs = eventsFromStack(stack, ctx, gone);
    expect(evs.map((e) => [e.reason, e.severity])).toEqual(reason ? [[reason, severity]] : []);
  });

  it('currentUpdate whose Update is not known yet: <Type>Started with the Update-derived id', () => {
    const stack = v2RunningStack();
    const evs = eventsFromStack(stack, ctx, gone);
    expect(evs.map((e) => [e.reason, e.id, e.metadata.commit, e.metadata.updateName])).toEqual([
      ['UpdateStarted', `${STACK_UID}/${UPDATE_NAME}/started`, SHA, UPDATE_NAME],
    ]);
    expect(evs[0]!.id).toBe(eventsFromUpdate(update('running'), stack, ctx)[0]!.id);
    expect(eventsFromStack(stack, ctx, present)).toEqual([]);
  });

  it('currentUpdate type is inferred as PKO creates it: preview Stack → Preview, deleting → Destroy', () => {
    const preview = v2RunningStack();
    preview.spec!.preview = true;
    expect(eventsFromStack(preview, ctx, gone).map((e) => e.reason)).toEqual(['PreviewStarted']);
    const deleting = v2RunningStack();
    deleting.metadata.deletionTimestamp = '2026-08-20T12:00:00Z';
    expect(eventsFromStack(deleting, ctx, gone).map((e) => e.reason)).toEqual(['DestroyStarted']);
  });

  it('a Stack with a finished lastUpdate and a new currentUpdate yields both', () => {
    const stack = v2FailedStack();
    stack.status!.currentUpdate = { generation: 3, name: 'app-dev-198c70e9999', commit: PREV_SHA };
    const evs = eventsFromStack(stack, ctx, gone);
    expect(evs.map((e) => e.id)).toEqual([
      `${STACK_UID}/${UPDATE_NAME}/failed`,
      `${STACK_UID}/app-dev-198c70e9999/started`,
    ]);
  });

  it('a currentUpdate that retries the failed lastUpdate (same generation, request and commit) is not a Started', () => {
    const stack = v2FailedStack();
    const last = stack.status!.lastUpdate!;
    stack.status!.currentUpdate = {
      generation: last.generation ?? 0,
      name: 'app-dev-198c70e9999',
      commit: last.lastAttemptedCommit ?? '',
    };
    expect(eventsFromStack(stack, ctx, gone).map((e) => e.id)).toEqual([
      `${STACK_UID}/${UPDATE_NAME}/failed`,
    ]);
  });

  describe('F22 stalled stacks', () => {
    function stalledStack(reason: string, message: string): Stack {
      const stack = v2FailedStack();
      stack.status!.conditions = [
        cond('Ready', 'False', 'NotReadyStalled', '2026-08-20T12:10:00Z'),
        cond('Stalled', 'True', reason, '2026-08-20T12:10:00Z', message),
      ];
      stack.status!.lastUpdate = {
        ...stack.status!.lastUpdate!,
        failures: 3,
        lastResyncTime: '2026-08-20T12:10:00Z',
      };
      return stack;
    }

    it('F22 Stalled=True UpdateFailed after 3 failures → StackStalled (error) about the failed commit', () => {
      const evs = eventsFromStack(
        stalledStack('UpdateFailed', 'up failed 3 times; not retrying until the spec or source changes'),
        ctx,
        present,
      );
      expect(evs).toHaveLength(1);
      const ev = evs[0]!;
      expect(ev).toMatchObject({
        id: `${STACK_UID}/${UPDATE_NAME}/stalled:UpdateFailed@3`,
        identity: {
          stack: STACK_UID,
          run: { kind: 'update', name: UPDATE_NAME },
          phase: { kind: 'stalled', reason: 'UpdateFailed', generation: 3 },
        },
        reason: 'StackStalled',
        severity: 'error',
        message:
          'Stack acme/app/dev stalled (UpdateFailed): up failed 3 times; not retrying until the spec or source changes',
        timestamp: '2026-08-20T12:10:00Z',
        involvedObject: { kind: 'Stack', name: 'app-dev', uid: STACK_UID },
      });
      expect(ev.metadata).toMatchObject({
        revision: SHA,
        commit: SHA,
        updateName: UPDATE_NAME,
        failures: '3',
      });
      expect(runKey(ev.identity)).toBe(`${STACK_UID}/${UPDATE_NAME}`);
    });

    it('F22 with the third Update gone, the UpdateFailed fallback (failure status) comes with it', () => {
      const evs = eventsFromStack(stalledStack('UpdateFailed', 'up failed 3 times'), ctx, gone);
      expect(evs.map((e) => [e.reason, e.severity, e.metadata.commit])).toEqual([
        ['UpdateFailed', 'error', SHA],
        ['StackStalled', 'error', SHA],
      ]);
    });

    it('a stall not caused by a run (SourceUnavailable) marks no commit', () => {
      const ev = eventsFromStack(
        stalledStack('SourceUnavailable', 'could not resolve sourceRef'),
        ctx,
        present,
      )[0]!;
      expect(ev.reason).toBe('StackStalled');
      expect(ev.id).toBe(`${STACK_UID}/${UPDATE_NAME}/stalled:SourceUnavailable@3`);
      expect(ev.metadata.commit).toBeUndefined();
      expect(ev.metadata.updateName).toBeUndefined();
      expect(ev.metadata.repository).toBe('https://github.com/acme/app.git');
    });

    it('the stall identity changes with generation and reason, not with re-observation', () => {
      const a = stalledStack('UpdateFailed', 'x');
      const b = structuredClone(a);
      b.metadata.resourceVersion = '2';
      expect(eventsFromStack(b, ctx, present)).toEqual(eventsFromStack(a, ctx, present));
      b.status!.observedGeneration = 4;
      expect(eventsFromStack(b, ctx, present)[0]!.id).toBe(
        `${STACK_UID}/${UPDATE_NAME}/stalled:UpdateFailed@4`,
      );
    });

    it('Stalled=False or a Reconciling stack yields no StackStalled', () => {
      const s = stalledStack('UpdateFailed', 'x');
      s.status!.conditions![1]!.status = 'False';
      expect(eventsFromStack(s, ctx, present)).toEqual([]);
      expect(eventsFromStack(v2FailedStack(), ctx, present)).toEqual([]);
    });
  });

  it('F03 every revision value of the case: event still produced; commit only for the first three', () => {
    const values: [string, string | undefined][] = [
      [`main@sha1:${SHA}`, SHA],
      [`main/${SHA}`, SHA],
      [SHA, SHA],
      [`v1.2.0@sha256:${HEX64}`, undefined],
      ['3', undefined],
      ['', undefined],
      [`sha256:${HEX64}`, undefined],
      [`${SHA}abc`, undefined],
    ];
    for (const [raw, commit] of values) {
      const stack = v2FailedStack();
      stack.status!.lastUpdate!.lastAttemptedCommit = raw;
      const evs = eventsFromStack(stack, ctx, gone);
      expect(
        evs.map((e) => e.reason),
        raw,
      ).toEqual(['UpdateFailed']);
      expect(evs[0]!.metadata.commit, raw).toBe(commit);
      expect(evs[0]!.metadata.revision, raw).toBe(raw === '' ? undefined : raw);
    }
  });

  it('a Stack with no status yields nothing', () => {
    const s = v2FailedStack();
    delete s.status;
    expect(eventsFromStack(s, ctx, gone)).toEqual([]);
  });
});

describe('eventsFromStack (PKO v1)', () => {
  it('a v1.16 Stack that succeeded yields UpdateSucceeded keyed by (uid, commit), ordered by lastResyncTime', () => {
    const evs = eventsFromStack(v1Stack('succeeded'), ctx, gone);
    expect(evs).toHaveLength(1);
    expect(evs[0]).toMatchObject({
      id: `v1-stack-uid/${encodeURIComponent(`v1:${SHA}`)}/succeeded`,
      identity: {
        stack: 'v1-stack-uid',
        run: { kind: 'v1', commit: SHA, at: '2024-08-30T09:15:00Z' },
        phase: { kind: 'succeeded' },
      },
      reason: 'UpdateSucceeded',
      severity: 'info',
      timestamp: '2024-08-30T09:15:00Z',
      message: 'Update of stack acme/legacy/prod succeeded',
      metadata: {
        revision: SHA,
        commit: SHA,
        repository: 'https://gitlab.com/acme/legacy.git',
        branch: 'master',
        stack: 'acme/legacy/prod',
        updateType: 'up',
        permalink: 'https://app.pulumi.com/acme/legacy/prod/updates/7',
      },
    });
    expect('updateName' in evs[0]!.metadata).toBe(false);
  });

  it('v1 failed → UpdateFailed (error); every retry of the commit (new lastResyncTime) is the same event', () => {
    const first = eventsFromStack(v1Stack('failed', '2024-08-30T09:15:00Z'), ctx, gone)[0]!;
    const again = eventsFromStack(v1Stack('failed', '2024-08-30T09:15:00Z'), ctx, gone)[0]!;
    const retry = eventsFromStack(v1Stack('failed', '2024-08-30T09:20:00Z'), ctx, gone)[0]!;
    expect(first.reason).toBe('UpdateFailed');
    expect(first.severity).toBe('error');
    expect(again).toEqual(first);
    expect(retry.id).toBe(first.id);
    expect(retry.timestamp).toBe('2024-08-30T09:20:00Z');
    expect(first.metadata.commit).toBe(SHA);
  });

  it('v1 failure text: from RetryingAfterFailure while shown, else what was seen for that commit', () => {
    const s = v1Stack('failed');
    s.status!.conditions = [
      cond('Ready', 'False', 'NotReadyInProgress', '2024-08-30T09:15:00Z'),
      cond(
        'Reconciling',
        'True',
        'RetryingAfterFailure',
        '2024-08-30T09:15:00Z',
        'failed to run update: exit status 1\nerror: doesNotExist',
      ),
    ];
    expect(eventsFromStack(s, ctx, gone)[0]!.message).toBe(
      'Update of stack acme/legacy/prod failed:\nfailed to run update: exit status 1\nerror: doesNotExist',
    );
    // PKO retries within milliseconds: the condition says StackProcessing again.
    s.status!.conditions[1] = cond(
      'Reconciling',
      'True',
      'StackProcessing',
      '2024-08-30T09:15:00Z',
      'stack is being processed',
    );
    expect(eventsFromStack(s, ctx, gone)[0]!.message).toBe('Update of stack acme/legacy/prod failed');
    const withMemory = {
      ...ctx,
      v1FailureText: (uid: string, commit: string) =>
        uid === 'v1-stack-uid' && commit === SHA ? 'error: remembered' : undefined,
    };
    expect(eventsFromStack(s, withMemory, gone)[0]!.message).toBe(
      'Update of stack acme/legacy/prod failed: error: remembered',
    );
  });

  it('v1 reset after a failure (succeeded, attempted ≠ deployed: nothing ran) yields nothing; an empty first lastUpdate neither', () => {
    const reset = v1Stack('succeeded');
    reset.status!.lastUpdate!.lastSuccessfulCommit = PREV_SHA;
    expect(eventsFromStack(reset, ctx, gone)).toEqual([]);
    const first = v1Stack('succeeded');
    first.status!.lastUpdate = {};
    expect(eventsFromStack(first, ctx, gone)).toEqual([]);
  });

  it('v1 without lastResyncTime: same identity, creation time; preview Stacks map to Preview*', () => {
    const s = v1Stack('succeeded');
    delete s.status!.lastUpdate!.lastResyncTime;
    s.spec!.preview = true;
    const ev = eventsFromStack(s, ctx, gone)[0]!;
    expect(ev.id).toBe(`v1-stack-uid/${encodeURIComponent(`v1:${SHA}`)}/succeeded`);
    expect(ev.reason).toBe('PreviewSucceeded');
    expect(ev.timestamp).toBe('2024-01-01T00:00:00Z');
  });

  it('v1 uses no Update objects: updateExists is irrelevant', () => {
    expect(eventsFromStack(v1Stack('failed'), ctx, present)).toEqual(
      eventsFromStack(v1Stack('failed'), ctx, gone),
    );
  });
});

it('derivation is deterministic: no clock, Date timestamps normalised', () => {
  const s = v2FailedStack();
  delete s.status!.lastUpdate!.lastResyncTime;
  s.status!.conditions = [];
  s.metadata.creationTimestamp = new Date('2026-08-01T00:00:00Z');
  const a = eventsFromStack(s, ctx, gone);
  const b = eventsFromStack(s, ctx, gone);
  expect(a).toEqual(b);
  expect(a[0]!.timestamp).toBe('2026-08-01T00:00:00.000Z');
  expect(PREV_SHA).not.toBe(a[0]!.metadata.commit); // lastSuccessfulCommit is not the run's commit
});

describe('commit of a run the Stack has moved past', () => {
  it("takes the revision from the Update's message when the Stack no longer names the run", async () => {
    const { revisionFromUpdateMessage } = await import('../../src/source/derive.ts');
    expect(revisionFromUpdateMessage('New commit detected: "9f1c2e7d0a4b5c6d7e8f90112233445566778899"')).toBe(
      '9f1c2e7d0a4b5c6d7e8f90112233445566778899',
    );
    expect(revisionFromUpdateMessage('Initial stack update')).toBeUndefined();
    expect(revisionFromUpdateMessage(undefined)).toBeUndefined();
  });
});

describe('commit of a first run once the Stack has moved on (PKO v2, stress round 0)', () => {
  const A = 'a'.repeat(40);
  const B = 'b'.repeat(40);
  /** A done Update as PKO v2.9 writes it (test/support and /work/shared/pko-traces/v2.9.0-real). */
  const run = (
    name: string,
    outcome: 'succeeded' | 'failed' | 'aborted',
    message: string,
    created: string,
  ): Update => {
    const u = update(outcome, 'up', name);
    u.metadata.creationTimestamp = created;
    u.spec = { ...u.spec, message };
    if (u.status && outcome === 'succeeded') u.status.message = JSON.stringify(message);
    return u;
  };
  const stackAfter = (last: NonNullable<NonNullable<Stack['status']>['lastUpdate']>): Stack => {
    const s = v2FailedStack();
    s.status = {
      observedGeneration: 3,
      conditions: [cond('Ready', 'True', 'ProcessingCompleted')],
      lastUpdate: last,
    };
    return s;
  };
  const commitsOf = (evs: ReturnType<typeof eventsForStack>): Record<string, string | undefined> =>
    Object.fromEntries(evs.map((e) => [e.id.slice(STACK_UID.length + 1), e.metadata.commit]));
  const first = (outcome: 'succeeded' | 'failed'): Update =>
    run('app-dev-first', outcome, 'Initial stack update', '2026-08-20T10:00:00Z');

  it('a succeeded first run followed by a new commit: PKO records its commit nowhere; the note says so', () => {
    const second = run('app-dev-second', 'succeeded', `New commit detected: "${B}"`, '2026-08-20T10:05:00Z');
    const stack = stackAfter({
      generation: 3,
      name: 'app-dev-second',
      type: 'up',
      state: 'succeeded',
      lastAttemptedCommit: B,
      lastSuccessfulCommit: B,
    });
    const evs = eventsForStack(stack, [first('succeeded'), second], ctx);
    const lost = evs.find((e) => e.id.endsWith('app-dev-first/succeeded'));
    expect(lost?.metadata.commit).toBeUndefined();
    expect(lost?.noCommitReason).toBe(
      `PKO names the commit of run app-dev-first ("Initial stack update") only while it is the Stack's current or last run, and this controller did not see it then`,
    );
    // What a process that saw the first run current remembers (RunCommits) is used.
    const seen = eventsForStack(stack, [first('succeeded'), second], { ...ctx, updateCommit: () => A });
    expect(seen.find((e) => e.id.endsWith('app-dev-first/succeeded'))?.metadata.commit).toBe(A);
  });

  it('a failed first run and its retry that succeeded: the retry ran the same commit', () => {
    const retry = run('app-dev-retry', 'succeeded', 'Backoff time elapsed: 10s', '2026-08-20T10:05:00Z');
    const stack = stackAfter({
      generation: 3,
      name: 'app-dev-retry',
      type: 'up',
      state: 'succeeded',
      lastAttemptedCommit: A,
      lastSuccessfulCommit: A,
    });
    const evs = eventsForStack(stack, [first('failed'), retry], ctx);
    expect(commitsOf(evs)).toEqual({
      'app-dev-first/started': A,
      'app-dev-first/failed': A,
      'app-dev-retry/succeeded': A,
    });
  });

  it('a succeeded first run, then a failed new commit: lastSuccessfulCommit is the first run’s', () => {
    const second = run('app-dev-second', 'failed', `New commit detected: "${B}"`, '2026-08-20T10:05:00Z');
    const stack = stackAfter({
      generation: 3,
      name: 'app-dev-second',
      type: 'up',
      state: 'failed',
      lastAttemptedCommit: B,
      lastSuccessfulCommit: A,
      failures: 0,
    });
    const evs = eventsForStack(stack, [first('succeeded'), second], ctx);
    expect(commitsOf(evs)).toEqual({
      'app-dev-first/started': A,
      'app-dev-first/succeeded': A,
      'app-dev-second/started': B,
      'app-dev-second/failed': B,
    });
  });

  it('through a resync: the newest success before the failed run, and the run it resynced', () => {
    const resync = run('app-dev-resync', 'succeeded', 'Resync time elapsed: 1m0s', '2026-08-20T10:05:00Z');
    const third = run('app-dev-third', 'failed', `New commit detected: "${B}"`, '2026-08-20T10:10:00Z');
    const stack = stackAfter({
      generation: 3,
      name: 'app-dev-third',
      type: 'up',
      state: 'failed',
      lastAttemptedCommit: B,
      lastSuccessfulCommit: A,
      failures: 0,
    });
    const evs = eventsForStack(stack, [third, first('succeeded'), resync], ctx);
    expect(commitsOf(evs)['app-dev-first/succeeded']).toBe(A);
  });

  it('no link across an aborted run, nor to an Update of another Stack', () => {
    const aborted = run('app-dev-aborted', 'aborted', 'Initial stack update', '2026-08-20T10:03:00Z');
    const retry = run('app-dev-retry', 'succeeded', 'Backoff time elapsed: 10s', '2026-08-20T10:05:00Z');
    const stack = stackAfter({
      generation: 3,
      name: 'app-dev-retry',
      type: 'up',
      state: 'succeeded',
      lastAttemptedCommit: A,
      lastSuccessfulCommit: A,
    });
    const firstRun = first('failed');
    expect(recordedRevisions(stack, [firstRun, aborted, retry]).get('app-dev-first')).toBeUndefined();
    const other = first('failed');
    other.metadata.ownerReferences = [
      { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'x', uid: 'other' },
    ];
    expect(recordedRevisions(stack, [other, retry]).has('app-dev-first')).toBe(false);
    expect(recordedRevisions(stack, [firstRun, retry]).get('app-dev-first')).toBe(A);
  });
});

describe('the commit the leader records on a finished Update (notification.pko.dev/commit)', () => {
  const A = 'a'.repeat(40);
  const B = 'b'.repeat(40);
  const first = (outcome: 'running' | 'succeeded' | 'aborted'): Update => {
    const u = update(outcome, 'up', 'app-dev-first');
    u.spec = { ...u.spec, message: 'Initial stack update' };
    u.metadata.creationTimestamp = '2026-08-20T10:00:00Z';
    u.metadata.resourceVersion = '1200';
    return u;
  };
  const lastIsFirst = (): Stack => {
    const s = v2FailedStack();
    s.status = {
      observedGeneration: 3,
      lastUpdate: {
        name: 'app-dev-first',
        type: 'up',
        state: 'succeeded',
        lastAttemptedCommit: A,
        lastSuccessfulCommit: A,
      },
    };
    return s;
  };

  it('chooses a finished commit-less run whose commit is known, once', () => {
    expect(revisionsToRecord(lastIsFirst(), [first('succeeded')], ctx)).toEqual([
      { name: 'app-dev-first', revision: A, resourceVersion: '1200' },
    ]);
    const annotated = first('succeeded');
    annotated.metadata.annotations = { [RUN_COMMIT_ANNOTATION]: A };
    expect(revisionsToRecord(lastIsFirst(), [annotated], ctx)).toEqual([]);
  });

  it('never a running or aborted Update, one whose message names its commit, or one whose commit is unknown', () => {
    const running = v2RunningStack('app-dev-first', A);
    expect(revisionsToRecord(running, [first('running')], ctx)).toEqual([]);
    expect(revisionsToRecord(lastIsFirst(), [first('aborted')], ctx)).toEqual([]);
    const named = update('succeeded', 'up', 'app-dev-first');
    expect(revisionsToRecord(lastIsFirst(), [named], ctx)).toEqual([]);
    const movedOn = v2FailedStack();
    movedOn.status = {
      observedGeneration: 3,
      lastUpdate: {
        name: 'app-dev-second',
        type: 'up',
        state: 'succeeded',
        lastAttemptedCommit: B,
        lastSuccessfulCommit: B,
      },
    };
    expect(revisionsToRecord(movedOn, [first('succeeded')], ctx)).toEqual([]);
    // What this process remembers from the Stack counts.
    expect(revisionsToRecord(movedOn, [first('succeeded')], { ...ctx, updateCommit: () => A })).toEqual([
      { name: 'app-dev-first', revision: A, resourceVersion: '1200' },
    ]);
  });

  it('every replica derives the run’s commit from the annotation once the Stack moved on; an oversized one is ignored', () => {
    const movedOn = v2FailedStack();
    movedOn.status = {
      observedGeneration: 3,
      lastUpdate: {
        name: 'app-dev-second',
        type: 'up',
        state: 'succeeded',
        lastAttemptedCommit: B,
        lastSuccessfulCommit: B,
      },
    };
    const annotated = first('succeeded');
    annotated.metadata.annotations = { [RUN_COMMIT_ANNOTATION]: A };
    const evs = eventsForStack(movedOn, [annotated], ctx);
    expect(evs.find((e) => e.id.endsWith('app-dev-first/succeeded'))?.metadata.commit).toBe(A);
    annotated.metadata.annotations = { [RUN_COMMIT_ANNOTATION]: 'x'.repeat(257) };
    const ignored = eventsForStack(movedOn, [annotated], ctx);
    expect(ignored.find((e) => e.id.endsWith('app-dev-first/succeeded'))?.metadata.revision).toBeUndefined();
  });
});

describe('updateObservedAt: the resourceVersion an annotated Update counts as observed at', () => {
  const at = (rv: string | undefined, before?: string): Update => {
    const u = update('succeeded');
    if (rv !== undefined) u.metadata.resourceVersion = rv;
    if (before !== undefined) u.metadata.annotations = { [RUN_OBSERVED_ANNOTATION]: before };
    return u;
  };
  it('the version before our annotation, never a larger or unusable one', () => {
    expect(updateObservedAt(at('1300'))).toBe('1300');
    expect(updateObservedAt(at('1300', '1200'))).toBe('1200');
    expect(updateObservedAt(at('1300', '1400'))).toBe('1300');
    expect(updateObservedAt(at('1300', 'abc'))).toBe('1300');
    expect(updateObservedAt(at('1300', '0'))).toBe('1300');
    expect(updateObservedAt(at(undefined, '1200'))).toBe('1200');
  });
});

describe('stackPredatesRun: a Stack read before the version that names its new run', () => {
  // PKO v2 saves currentUpdate {name, commit} (rv 500 here), then creates the Update (rv 501).
  const run = (): Update => {
    const u = update('running', 'up', 'app-dev-next');
    u.metadata.resourceVersion = '501';
    if (u.spec) u.spec.message = 'New stack generation: 4';
    return u;
  };
  const before = (): Stack => ({
    ...v2FailedStack(),
    metadata: { ...v2FailedStack().metadata, resourceVersion: '480' },
  });
  const naming = (): Stack => {
    const s = v2RunningStack('app-dev-next');
    s.metadata.resourceVersion = '500';
    return s;
  };
  it('true for the Stack version before PKO named the run, whose commit nothing else names', () => {
    expect(stackPredatesRun(before(), run())).toBe(true);
  });
  it('false once the Stack names it (current or last), or when its message or our annotation names the commit', () => {
    expect(stackPredatesRun(naming(), run())).toBe(false);
    const last = before();
    if (last.status?.lastUpdate) last.status.lastUpdate.name = 'app-dev-next';
    expect(stackPredatesRun(last, run())).toBe(false);
    const told = run();
    if (told.spec) told.spec.message = `New commit detected: "${SHA}"`;
    expect(stackPredatesRun(before(), told)).toBe(false);
    const annotated = run();
    annotated.metadata.annotations = { [RUN_COMMIT_ANNOTATION]: SHA };
    expect(stackPredatesRun(before(), annotated)).toBe(false);
  });
  it('false for a Stack version newer than the Update (it moved past the run), another Stack’s Update, or versions that do not compare', () => {
    const newer = before();
    newer.metadata.resourceVersion = '502';
    expect(stackPredatesRun(newer, run())).toBe(false);
    const other = before();
    other.metadata.uid = 'another-uid';
    expect(stackPredatesRun(other, run())).toBe(false);
    const opaque = before();
    opaque.metadata.resourceVersion = 'abc';
    expect(stackPredatesRun(opaque, run())).toBe(false);
    const unversioned = run();
    delete unversioned.metadata.resourceVersion;
    expect(stackPredatesRun(before(), unversioned)).toBe(false);
    // Decimal, not string, order: "99" < "100".
    const small = before();
    small.metadata.resourceVersion = '99';
    const big = run();
    big.metadata.resourceVersion = '100';
    expect(stackPredatesRun(small, big)).toBe(true);
  });
});
