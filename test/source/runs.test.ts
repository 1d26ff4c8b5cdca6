/**
 * Runs as users count them (src/source/runs.ts, eventsForStack in src/source/derive.ts): PKO v2's
 * automatic retries and resyncs of the same commit and spec continue the previous run; v1 outcomes;
 * PKO 2.9's JSON-quoted messages; the ledger's "same event again" rule.
 */
import { describe, expect, it } from 'vitest';
import type { Stack, Update } from '../../src/api/pko.ts';
import { runKey, type NotificationEvent } from '../../src/api/event.ts';
import { entryCovers, recordHandled, runHash, type EventRef } from '../../src/delivery/ledger-entry.ts';
import { eventsForStack } from '../../src/source/derive.ts';
import {
  RunCommits,
  V1FailureTexts,
  currentContinuesLast,
  isContinuation,
  unquoteMessage,
  v1Outcome,
} from '../../src/source/runs.ts';
import {
  FAILED_MESSAGE,
  PREV_SHA,
  SHA,
  STACK_UID,
  cond,
  ctx,
  update,
  v1Stack,
  v2FailedStack,
} from './fixtures.ts';

/** Update `app-dev-<hex of t>` of `type`, with `outcome`, started for `why` (its spec.message). */
function attempt(
  t: number,
  outcome: 'running' | 'succeeded' | 'failed' | 'aborted',
  why: string,
  type = 'up',
  message?: string,
): Update {
  const u = update(outcome, type, `app-dev-${t.toString(16)}`);
  u.spec = { ...u.spec, message: why };
  if (message !== undefined && u.status) u.status.message = message;
  return u;
}

const T = 0x198c70e4c21;
const NEW = `New commit detected: "${SHA}"`;
const BACKOFF = 'Backoff time elapsed: 30s';
const RESYNC = 'Resync time elapsed: 1m0s';
const summary = (evs: { id: string; reason: string }[]): string[] =>
  evs.map((e) => `${e.reason} ${e.id.split('/')[1] ?? ''}`);
const stack = (): Stack => {
  const s = v2FailedStack();
  delete s.status!.lastUpdate; // Updates are present: the Stack's lastUpdate adds nothing here
  s.status!.conditions = [];
  return s;
};
const name = (t: number): string => `app-dev-${t.toString(16)}`;

describe('PKO v2: retries and resyncs continue the previous run', () => {
  it('continuations are told by the message PKO writes', () => {
    expect(isContinuation(attempt(T, 'running', BACKOFF))).toBe(true);
    expect(isContinuation(attempt(T, 'running', RESYNC))).toBe(true);
    expect(isContinuation(attempt(T, 'running', NEW))).toBe(false);
    expect(isContinuation(attempt(T, 'running', 'Sync request: "x"'))).toBe(false);
  });

  it('a failing commit retried until PKO gives up: Started once, Failed once carrying the latest error', () => {
    const evs = eventsForStack(
      stack(),
      [
        attempt(T, 'failed', NEW, 'up', 'up failed: first error'),
        attempt(T + 30_000, 'failed', BACKOFF, 'up', 'up failed: second error'),
        attempt(T + 120_000, 'failed', BACKOFF, 'up', 'up failed: latest error'),
      ],
      ctx,
    );
    expect(summary(evs)).toEqual([`UpdateStarted ${name(T)}`, `UpdateFailed ${name(T)}`]);
    expect(evs[1]!.message).toBe('Update of stack acme/app/dev failed: up failed: latest error');
  });

  it('a retry in flight adds nothing; a retry that succeeds is one Succeeded, without a Started', () => {
    const first = attempt(T, 'failed', NEW);
    expect(summary(eventsForStack(stack(), [first, attempt(T + 30_000, 'running', BACKOFF)], ctx))).toEqual([
      `UpdateStarted ${name(T)}`,
      `UpdateFailed ${name(T)}`,
    ]);
    expect(summary(eventsForStack(stack(), [first, attempt(T + 30_000, 'succeeded', BACKOFF)], ctx))).toEqual(
      [`UpdateStarted ${name(T)}`, `UpdateFailed ${name(T)}`, `UpdateSucceeded ${name(T + 30_000)}`],
    );
  });

  it('resyncs of a deployed commit send nothing; a resync that fails is reported, its retries are not', () => {
    const evs = eventsForStack(
      stack(),
      [
        attempt(T, 'succeeded', NEW),
        attempt(T + 60_000, 'succeeded', RESYNC),
        attempt(T + 120_000, 'failed', RESYNC),
        attempt(T + 150_000, 'failed', BACKOFF),
        attempt(T + 240_000, 'succeeded', BACKOFF),
        attempt(T + 300_000, 'succeeded', RESYNC),
      ],
      ctx,
    );
    expect(summary(evs)).toEqual([
      `UpdateStarted ${name(T)}`,
      `UpdateSucceeded ${name(T)}`,
      `UpdateFailed ${name(T + 120_000)}`,
      `UpdateSucceeded ${name(T + 240_000)}`,
    ]);
  });

  it('previews are counted the same way; a new commit, generation or sync request starts a run', () => {
    const evs = eventsForStack(
      stack(),
      [
        attempt(T, 'failed', NEW, 'preview'),
        attempt(T + 10, 'failed', BACKOFF, 'preview'),
        attempt(T + 20, 'failed', 'Sync request: "now"', 'preview'),
      ],
      ctx,
    );
    expect(summary(evs)).toEqual([
      `PreviewStarted ${name(T)}`,
      `PreviewFailed ${name(T)}`,
      `PreviewStarted ${name(T + 20)}`,
      `PreviewFailed ${name(T + 20)}`,
    ]);
  });

  it('a continuation whose predecessor expired (TTL) reports nothing: its run was reported then', () => {
    expect(
      eventsForStack(
        stack(),
        [attempt(T + 30_000, 'failed', BACKOFF), attempt(T + 90_000, 'failed', BACKOFF)],
        ctx,
      ),
    ).toEqual([]);
    expect(eventsForStack(stack(), [attempt(T + 60_000, 'succeeded', RESYNC)], ctx)).toEqual([]);
  });

  it('F29: the retry after an aborted attempt is that run, reported with its Started', () => {
    const evs = eventsForStack(
      stack(),
      [attempt(T, 'aborted', NEW), attempt(T + 1000, 'succeeded', BACKOFF)],
      ctx,
    );
    expect(summary(evs)).toEqual([`UpdateStarted ${name(T + 1000)}`, `UpdateSucceeded ${name(T + 1000)}`]);
  });

  it('the Stack: no Started for an in-flight retry (same generation, request, commit) or resync', () => {
    const s = v2FailedStack();
    s.status!.currentUpdate = { generation: 3, name: name(T + 5), commit: SHA };
    expect(currentContinuesLast(s)).toBe(true);
    s.status!.currentUpdate.commit = PREV_SHA;
    expect(currentContinuesLast(s)).toBe(false);
    s.status!.currentUpdate = { generation: 3, reconcileRequest: 'now', name: name(T + 5), commit: SHA };
    expect(currentContinuesLast(s)).toBe(false);
  });

  it("a failed Update's reason Unknown (real PKO 2.9) is a failure", () => {
    const u = attempt(T, 'failed', NEW);
    u.status!.conditions = u.status!.conditions!.map((c) =>
      c.type === 'Failed' ? { ...c, reason: 'Unknown' } : c,
    );
    expect(summary(eventsForStack(stack(), [u], ctx))).toEqual([
      `UpdateStarted ${name(T)}`,
      `UpdateFailed ${name(T)}`,
    ]);
  });
});

describe('PKO 2.9 messages', () => {
  it('JSON-quoted messages are shown as the text they encode; anything else unchanged', () => {
    expect(unquoteMessage('"Initial stack update"')).toBe('Initial stack update');
    expect(unquoteMessage(`"New commit detected: \\"${SHA}\\""`)).toBe(`New commit detected: "${SHA}"`);
    expect(unquoteMessage('"a" and "b"')).toBe('"a" and "b"');
    expect(unquoteMessage('"')).toBe('"');
    expect(unquoteMessage(FAILED_MESSAGE)).toBe(FAILED_MESSAGE);
    expect(unquoteMessage(undefined)).toBeUndefined();
    const u = attempt(T, 'succeeded', 'Initial stack update', 'up', '"Initial stack update"');
    const evs = eventsForStack(stack(), [u], ctx);
    expect(evs[1]!.message).toBe('Update of stack acme/app/dev succeeded: Initial stack update');
  });
});

describe('PKO v1 outcomes', () => {
  it('failed, deployed, reset-without-run, nothing yet', () => {
    expect(v1Outcome(v1Stack('failed'))).toEqual({ phase: 'failed', commit: SHA });
    expect(v1Outcome(v1Stack('succeeded'))).toEqual({ phase: 'succeeded', commit: SHA });
    const reset = v1Stack('succeeded');
    reset.status!.lastUpdate!.lastSuccessfulCommit = PREV_SHA;
    expect(v1Outcome(reset)).toBeUndefined();
    const fresh = v1Stack('failed');
    fresh.status!.lastUpdate = {};
    expect(v1Outcome(fresh)).toBeUndefined();
  });

  it('V1FailureTexts keeps the text of the failing commit per Stack, bounded, until the Stack goes', () => {
    const texts = new V1FailureTexts(20);
    const s = v1Stack('failed');
    texts.observe(s); // no RetryingAfterFailure condition: nothing to keep
    expect(texts.size).toBe(0);
    s.status!.conditions = [cond('Reconciling', 'True', 'RetryingAfterFailure', undefined, 'x'.repeat(50))];
    texts.observe(s);
    expect(texts.text('v1-stack-uid', SHA)).toBe('x'.repeat(20));
    expect(texts.text('v1-stack-uid', PREV_SHA)).toBeUndefined();
    const v2 = v2FailedStack();
    v2.status!.conditions = [cond('Reconciling', 'True', 'RetryingAfterFailure', undefined, 'v2 text')];
    texts.observe(v2); // v2 Stacks carry lastUpdate.message: not kept
    expect(texts.text(STACK_UID, SHA)).toBeUndefined();
    texts.forget('v1-stack-uid');
    expect(texts.size).toBe(0);
  });
});

describe('ledger: the same event again is done', () => {
  // As the dispatcher builds it: PKO v1 outcomes replace each other (latestOnly).
  const ref = (ev: NotificationEvent, rv: number): EventRef => ({
    run: runHash(runKey(ev.identity)),
    rv,
    phase: ev.identity.phase.kind,
    latestOnly: ev.identity.run.kind === 'v1',
  });

  it('a v1 failure seen again at a later lastResyncTime is covered; another outcome is not', () => {
    const at = (t: string, state: 'succeeded' | 'failed') => eventsForStack(v1Stack(state, t), [], ctx)[0]!;
    const first = at('2024-08-30T09:15:00Z', 'failed');
    const retry = at('2024-08-30T09:15:07Z', 'failed');
    const entry = recordHandled(undefined, ref(first, 10));
    // Observed later (a new resourceVersion), the same event all the same.
    expect(retry.id).toBe(first.id);
    expect(entryCovers(entry, ref(retry, 20))).toBe(true);
    const fixed = at('2024-08-30T09:16:00Z', 'succeeded');
    expect(entryCovers(entry, ref(fixed, 30))).toBe(false);
    const after = recordHandled(entry, ref(fixed, 30));
    // Failing again later is a new event (the last one handled was the success).
    const again = at('2024-08-30T09:17:00Z', 'failed');
    expect(entryCovers(after, ref(again, 40))).toBe(false);
    // ...and once handled, that failure seen again is done.
    expect(entryCovers(recordHandled(after, ref(again, 40)), ref(again, 50))).toBe(true);
  });
});

describe('PKO v2: the commit of a run the Stack no longer names', () => {
  it('is the one the Stack named while the run was current or last (RunCommits), bounded per Stack', () => {
    const first = attempt(T, 'succeeded', 'Initial stack update');
    const s = stack();
    s.status!.currentUpdate = { name: first.metadata.name!, generation: 1, commit: SHA };
    const commits = new RunCommits();
    commits.observe(s);
    // The Stack moved on two runs: neither current nor last names the first one any more.
    s.status!.currentUpdate = { name: name(T + 2), generation: 1, commit: PREV_SHA };
    s.status!.lastUpdate = { name: name(T + 1), lastAttemptedCommit: PREV_SHA, state: 'succeeded' };
    const without = eventsForStack(s, [first], ctx);
    expect(without.find((e) => e.reason === 'UpdateSucceeded')?.metadata.commit).toBeUndefined();
    const withMemory = eventsForStack(s, [first], {
      ...ctx,
      updateCommit: (uid, n) => commits.commit(uid, n),
    });
    expect(withMemory.find((e) => e.reason === 'UpdateSucceeded')?.metadata.commit).toBe(SHA);

    for (let i = 0; i < RunCommits.PER_STACK; i++) {
      s.status!.currentUpdate = { name: name(T + 10 + i), generation: 1, commit: PREV_SHA };
      commits.observe(s);
    }
    expect(commits.commit(s.metadata.uid!, first.metadata.name!)).toBeUndefined();
    commits.forget(s.metadata.uid!);
    expect(commits.commit(s.metadata.uid!, name(T + 20))).toBeUndefined();
  });
});
