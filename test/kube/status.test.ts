import { describe, expect, it } from 'vitest';
import type { Condition } from '../../src/api/meta.ts';
import { findCondition, kubeTime, readyCondition, setCondition } from '../../src/kube/status.ts';

const t0 = new Date('2026-01-02T03:04:05.678Z');
const t1 = new Date('2026-01-02T04:00:00.000Z');

describe('setCondition', () => {
  it('appends a new condition with lastTransitionTime at second precision', () => {
    const out = setCondition(undefined, { type: 'Ready', status: 'True', reason: 'Ok', message: 'fine' }, t0);
    expect(out).toEqual([
      {
        type: 'Ready',
        status: 'True',
        reason: 'Ok',
        message: 'fine',
        lastTransitionTime: '2026-01-02T03:04:05Z',
      },
    ]);
  });

  it('keeps lastTransitionTime when the status is unchanged but updates reason, message, generation', () => {
    const first = setCondition([], { type: 'Ready', status: 'False', reason: 'A', message: 'a' }, t0);
    const out = setCondition(
      first,
      { type: 'Ready', status: 'False', reason: 'B', message: 'b', observedGeneration: 3 },
      t1,
    );
    expect(out).toEqual([
      {
        type: 'Ready',
        status: 'False',
        reason: 'B',
        message: 'b',
        observedGeneration: 3,
        lastTransitionTime: '2026-01-02T03:04:05Z',
      },
    ]);
  });

  it('moves lastTransitionTime when the status changes, replacing by type and keeping others in place', () => {
    const conds: Condition[] = [
      {
        type: 'Stalled',
        status: 'False',
        reason: 'X',
        message: '',
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
      {
        type: 'Ready',
        status: 'False',
        reason: 'A',
        message: 'a',
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
    ];
    const snapshot = structuredClone(conds);
    const out = setCondition(conds, { type: 'Ready', status: 'True', reason: 'Ok', message: '' }, t1);
    expect(out.map((c) => c.type)).toEqual(['Stalled', 'Ready']);
    expect(out[1]).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Ok',
      message: '',
      lastTransitionTime: kubeTime(t1),
    });
    expect(out[0]).toBe(conds[0]);
    expect(conds).toEqual(snapshot); // input not modified
  });

  it('findCondition finds by type', () => {
    const conds = setCondition(undefined, { type: 'Ready', status: 'Unknown', reason: 'R', message: '' }, t0);
    expect(findCondition(conds, 'Ready')?.status).toBe('Unknown');
    expect(findCondition(conds, 'Other')).toBeUndefined();
    expect(findCondition(undefined, 'Ready')).toBeUndefined();
  });
});

describe('readyCondition', () => {
  it('is the Ready condition of the state at the generation, its message bounded to 1,024 UTF-16 units', () => {
    expect(readyCondition({ ready: true, reason: 'Succeeded', message: 'ok' }, 4)).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Succeeded',
      message: 'ok',
      observedGeneration: 4,
    });
    const long = readyCondition({ ready: false, reason: 'Failed', message: '€'.repeat(2_000) }, 1);
    expect(long.status).toBe('False');
    expect(long.message.length).toBeLessThanOrEqual(1_024);
    expect(long.message.startsWith('€'.repeat(1_000))).toBe(true);
  });
});
