/**
 * PKO's clocks never decide order or eligibility (case N16), and a garbage-collected Update the
 * controller saw is not reported again from the Stack's `lastUpdate` (N20). PKO v2: Updates are
 * ordered by the API server's `creationTimestamp`, not by the time PKO writes into their names or
 * `startTime`. PKO v1 (no Update objects): whether a run is older than a new Alert is decided by
 * the resourceVersion the controller observed it at, not by `lastResyncTime`.
 */
import { describe, expect, it } from 'vitest';
import type { Stack, Update } from '../../src/api/pko.ts';
import { beforeAlert } from '../../src/delivery/skip.ts';
import { eventsForStack, eventsFromStack } from '../../src/source/derive.ts';
import { compareUpdates, SeenUpdates } from '../../src/source/runs.ts';
import { ctx, PREV_SHA, SHA, STACK_UID, update, v1Stack, v2FailedStack } from './fixtures.ts';

const hex = (ms: number): string => ms.toString(16);
/** PKO's clock when run 2 started, and the API server's. */
const PKO_T2 = Date.parse('2026-08-20T11:00:00Z');

/** An Update named from PKO's clock `pkoMs`, created (API server clock) at `created`. */
function up(
  outcome: 'succeeded' | 'failed',
  pkoMs: number,
  created: string,
  message: string,
  uid: string,
): Update {
  const u = update(outcome, 'up', `app-dev-${hex(pkoMs)}`);
  u.metadata.uid = uid;
  u.metadata.creationTimestamp = created;
  if (u.spec) u.spec.message = message;
  if (u.status) u.status.startTime = new Date(pkoMs + 1_000).toISOString();
  return u;
}

describe('N16: PKO v2 — a retry after PKO’s clock jumped back', () => {
  // Run 1 succeeded on PREV_SHA; run 2 (SHA) fails; PKO's clock jumps 10 minutes back; the retry
  // Update (smaller hex name, earlier startTime, later creationTimestamp) succeeds.
  const run1 = up(
    'succeeded',
    PKO_T2 - 3_600_000,
    '2026-08-20T10:00:00Z',
    `New commit detected: "${PREV_SHA}"`,
    'u1',
  );
  const run2 = up('failed', PKO_T2, '2026-08-20T11:00:00Z', `New commit detected: "${SHA}"`, 'u2');
  const retry = up(
    'succeeded',
    PKO_T2 - 600_000 + 70_000,
    '2026-08-20T11:01:10Z',
    'Backoff time elapsed: 1m0s',
    'u3',
  );
  const stack = (): Stack => {
    const s = v2FailedStack();
    if (s.status?.lastUpdate) {
      s.status.lastUpdate = {
        ...s.status.lastUpdate,
        name: retry.metadata.name ?? '',
        state: 'succeeded',
        lastSuccessfulCommit: SHA,
      };
    }
    return s;
  };

  it('the retry sorts after the run it retries (creationTimestamp), whatever its name says', () => {
    expect(retry.metadata.name! < run2.metadata.name!).toBe(true);
    const sorted = [retry, run2, run1].sort(compareUpdates).map((u) => u.metadata.name);
    expect(sorted).toEqual([run1.metadata.name, run2.metadata.name, retry.metadata.name]);
  });

  it("the retry's UpdateSucceeded is delivered (not taken for a repeat of run 1's success)", () => {
    const evs = eventsForStack(stack(), [run1, run2, retry], ctx);
    const results = evs.filter((e) => e.identity.phase.kind !== 'started').map((e) => [e.reason, e.id]);
    expect(results).toEqual([
      ['UpdateSucceeded', `${STACK_UID}/${run1.metadata.name!}/succeeded`],
      ['UpdateFailed', `${STACK_UID}/${run2.metadata.name!}/failed`],
      ['UpdateSucceeded', `${STACK_UID}/${retry.metadata.name!}/succeeded`],
    ]);
  });
});

describe('N16: PKO v1 — PKO’s clock ten minutes behind when a new Alert is created', () => {
  const created = Date.parse('2026-11-30T12:20:00Z');
  // The run right after the Alert: PKO stamps lastResyncTime 10 minutes behind the cluster.
  const stack = v1Stack('succeeded', '2026-11-30T12:11:00Z');
  const [ev] = eventsFromStack(stack, ctx, { updateExists: () => false });

  it('the run observed after the Alert (a later resourceVersion) is eligible, not BeforeAlert', () => {
    if (ev === undefined) throw new Error('no v1 event');
    expect(Date.parse(ev.timestamp)).toBeLessThan(created);
    expect(beforeAlert(ev, 1_205, { createdMs: created, sinceRv: 1_200 })).toBe(false);
  });

  it('history observed before the Alert stays history; without observation the time decides', () => {
    if (ev === undefined) throw new Error('no v1 event');
    expect(beforeAlert(ev, 1_100, { createdMs: created, sinceRv: 1_200 })).toBe(true);
    expect(beforeAlert(ev, undefined, { createdMs: created, sinceRv: 1_200 })).toBe(true);
    expect(beforeAlert(ev, 1_205, { createdMs: created })).toBe(true);
  });
});

describe('N20: a resync continuation whose Update was garbage-collected', () => {
  // Y0 succeeded (its Update already gone: resync period > TTL), Y1 resyncs it and succeeds.
  const y1 = up('succeeded', PKO_T2 + 7_200_000, '2026-08-20T13:00:00Z', 'Resync time elapsed: 2h0m0s', 'y1');
  const stack = (): Stack => {
    const s = v2FailedStack();
    if (s.status?.lastUpdate) {
      s.status.lastUpdate = {
        ...s.status.lastUpdate,
        name: y1.metadata.name ?? '',
        state: 'succeeded',
        lastAttemptedCommit: SHA,
        lastSuccessfulCommit: SHA,
      };
    }
    return s;
  };

  it('while Y1 exists: nothing (its run was reported through Y0)', () => {
    expect(eventsForStack(stack(), [y1], ctx)).toEqual([]);
  });

  it('once Y1 is gone: no UpdateSucceeded from lastUpdate, since the controller saw Y1', () => {
    const seen = new SeenUpdates();
    seen.observe(y1);
    const withSeen = { ...ctx, updateSeen: (uid: string, name: string) => seen.seen(uid, name) };
    expect(eventsForStack(stack(), [], withSeen)).toEqual([]);
  });

  it('a Stack wedged with currentUpdate naming that missing Update (PKO #1292): one StackStalled, not repeated, cleared when the Stack moves', () => {
    const seen = new SeenUpdates();
    seen.observe(y1);
    const withSeen = { ...ctx, updateSeen: (uid: string, name: string) => seen.seen(uid, name) };
    const wedged = stack();
    if (wedged.status) wedged.status.currentUpdate = { generation: 3, name: y1.metadata.name!, commit: SHA };
    const first = eventsForStack(wedged, [], withSeen);
    // No Started for the missing Update; one StackStalled naming it.
    expect(first.map((e) => [e.reason, e.severity, e.id])).toEqual([
      ['StackStalled', 'error', `${STACK_UID}/${y1.metadata.name!}/stalled:UpdateMissing@3`],
    ]);
    expect(first[0]?.message).toMatch(/names Update app-dev-[0-9a-f]+, which no longer exists/);
    expect(first[0]?.metadata.commit).toBeUndefined(); // no commit: git Providers post no status for it
    // Seen again (every Stack write): the same event, which the ledger has handled.
    expect(eventsForStack(wedged, [], withSeen).map((e) => e.id)).toEqual(first.map((e) => e.id));
    // The Stack moves on (PKO cleared currentUpdate): nothing is implied any more.
    expect(eventsForStack(stack(), [], withSeen)).toEqual([]);
  });

  it('an Update the controller never saw (down for its whole life) is still reported from lastUpdate', () => {
    const evs = eventsForStack(stack(), [], ctx);
    expect(evs.map((e) => [e.reason, e.id])).toEqual([
      ['UpdateSucceeded', `${STACK_UID}/${y1.metadata.name!}/succeeded`],
    ]);
  });
});
