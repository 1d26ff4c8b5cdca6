/**
 * Issue 22's stuck Stacks (case N20, extended): a PKO v2 Stack Reconciling with no run in
 * progress for longer than the threshold yields one `StackStalled` with reason `NoProgress`
 * (src/source/derive.ts `stuckSince`), in PKO v2.9 shapes (test/source/fixtures.ts): the wedge on
 * a missing Update this controller never saw (after a restart; the seen case is `UpdateMissing`),
 * not repeated while it lasts, no longer implied once the Stack moves; never for a running
 * Update, a retry backoff, a stall or PKO v1.
 */
import { describe, expect, it } from 'vitest';
import { eventsForStack, stuckSince, type DeriveContext } from '../../src/source/derive.ts';
import {
  cond,
  ctx,
  STACK_UID,
  UPDATE_NAME,
  update,
  v1Stack,
  v2FailedStack,
  v2RunningStack,
} from './fixtures.ts';

const SINCE = Date.parse('2026-08-20T10:59:58Z');
const MIN = 60_000;
const at = (ms: number): DeriveContext => ({ ...ctx, stuck: { nowMs: SINCE + ms, afterMs: 30 * MIN } });
const stalls = (evs: ReturnType<typeof eventsForStack>) =>
  evs.filter((e) => e.identity.phase.kind === 'stalled').map((e) => [e.reason, e.severity, e.id, e.message]);

describe('stuck Stacks (NoProgress)', () => {
  it('currentUpdate names an Update that does not exist and was never seen: nothing before the threshold, one stall after it', () => {
    const s = v2RunningStack();
    expect(stuckSince(s, () => false)).toBe(SINCE);
    expect(stalls(eventsForStack(s, [], at(29 * MIN)))).toEqual([]);
    const after = stalls(eventsForStack(s, [], at(31 * MIN)));
    expect(after).toEqual([
      [
        'StackStalled',
        'error',
        `${STACK_UID}/${UPDATE_NAME}/stalled:NoProgress@3`,
        `Stack acme/app/dev stalled (NoProgress): Reconciling since 2026-08-20T10:59:58.000Z (31 min) and status.currentUpdate names Update ${UPDATE_NAME}, which does not exist`,
      ],
    ]);
    // Its time is when the threshold was reached.
    expect(eventsForStack(s, [], at(31 * MIN)).find((e) => e.reason === 'StackStalled')?.timestamp).toBe(
      '2026-08-20T11:29:58.000Z',
    );
    // Not repeated: hours later it is the same event (same id).
    expect(stalls(eventsForStack(s, [], at(300 * MIN))).map((x) => x[2])).toEqual([after[0]?.[2]]);
  });

  it('cleared when the Stack moves: Ready again, no stall implied', () => {
    const moved = v2FailedStack();
    moved.status = {
      ...moved.status,
      conditions: [cond('Ready', 'True', 'ProcessingCompleted', '2026-08-20T12:00:00Z')],
    };
    expect(stuckSince(moved, () => false)).toBeUndefined();
    expect(stalls(eventsForStack(moved, [], at(300 * MIN)))).toEqual([]);
  });

  it('a running Update is progress, however long it runs', () => {
    expect(stalls(eventsForStack(v2RunningStack(), [update('running')], at(300 * MIN)))).toEqual([]);
  });

  it('a retry backoff (RetryingAfterFailure) is not stuck: the Failed says it', () => {
    expect(stuckSince(v2FailedStack(), () => false)).toBeUndefined();
  });

  it('a seen and gone Update is UpdateMissing only (one stall per wedge, not two)', () => {
    const seen: DeriveContext = { ...at(300 * MIN), updateSeen: () => true };
    expect(stalls(eventsForStack(v2RunningStack(), [], seen)).map((x) => x[2])).toEqual([
      `${STACK_UID}/${UPDATE_NAME}/stalled:UpdateMissing@3`,
    ]);
  });

  it('PKO v1 (no Update objects) and no threshold given: never', () => {
    const v1 = v1Stack('succeeded');
    v1.status = {
      ...v1.status,
      conditions: [cond('Reconciling', 'True', 'StackProcessing', '2024-08-30T09:00:00Z')],
    };
    expect(stuckSince(v1, () => false)).toBeUndefined();
    expect(stalls(eventsForStack(v2RunningStack(), [], ctx))).toEqual([]);
  });
});
