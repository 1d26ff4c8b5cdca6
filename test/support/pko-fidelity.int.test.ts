/**
 * The PKO simulator (test/support/pko.ts) against recordings of the real operators
 * (test/fixtures/realpko/, made by the real-pko project): driven through the same scenario, the
 * simulator must write the same kinds of Stack (and Update) versions — same conditions, same
 * `lastUpdate` fields and commit relations, finalizer and outputs — as the real PKO did. Values
 * that differ by nature (SHAs, times, names) are compared by their relations only.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack, Update } from '../../src/api/pko.ts';
import { createTestNamespace, kubeConfig } from './cluster.ts';
import { PkoSimulator } from './pko.ts';
import { StatusRecorder, type RecordedObject } from './realpko.ts';

const SHAS = ['1', '2', '3', '4', '5'].map((d) => d.repeat(40));
const [A, B, C, D, E] = SHAS as [string, string, string, string, string];

function load(name: string): RecordedObject[] {
  const file = path.resolve(import.meta.dirname, '..', 'fixtures', 'realpko', name);
  return (JSON.parse(readFileSync(file, 'utf8')) as { objects: RecordedObject[] }).objects;
}

/** What a stored Stack version looks like, without values that differ by nature. */
function stackShape(s: Stack): string {
  const st = s.status;
  const last = st?.lastUpdate;
  const conds = (st?.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`).join(',');
  const lu =
    last === undefined
      ? 'none'
      : `{${Object.keys(last)
          .filter((k) => k !== 'permalink')
          .sort()
          .join(',')}} ${last.state ?? ''} ${
          last.lastAttemptedCommit === undefined
            ? ''
            : last.lastAttemptedCommit === last.lastSuccessfulCommit
              ? 'attempted=deployed'
              : 'attempted≠deployed'
        }`;
  const fin = ((s.metadata as { finalizers?: string[] }).finalizers ?? []).join(',');
  return `[${conds}] ${lu} fin=${fin} outputs=${st?.['outputs'] !== undefined}`;
}

/** What a stored Update version looks like (conditions, which status fields are set, quoting). */
function updateShape(u: Update): string {
  const st = u.status;
  const conds = (st?.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`).join(',');
  const fields = Object.keys(st ?? {})
    .filter((k) => k !== 'conditions' && k !== 'projectInfo')
    .sort()
    .join(',');
  const msg = st?.message === undefined ? '' : st.message.startsWith('"') ? 'quoted' : 'text';
  return `${u.spec?.type ?? ''} [${conds}] {${fields}} ${msg}`;
}

const shapes = (items: RecordedObject[], kind: 'Stack' | 'Update', name?: string): Set<string> =>
  new Set(
    items
      .filter(
        (i) =>
          i.kind === kind && i.type !== 'DELETED' && (name === undefined || i.object.metadata.name === name),
      )
      .map((i) => (kind === 'Stack' ? stackShape(i.object) : updateShape(i.object))),
  );

let ns: string;
const recorders: StatusRecorder[] = [];
beforeAll(async () => {
  ns = await createTestNamespace('pko-fidelity');
});
afterAll(() => {
  for (const r of recorders) r.stop();
});

describe('the PKO simulator writes what real PKO wrote', () => {
  it('v1.16: first up, no-op poll, new commit, failing commit retried, fix, failure then branch reset, poll', async () => {
    const rec = new StatusRecorder(kubeConfig('admin'), ns, { updates: false });
    recorders.push(rec);
    await rec.start();
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v1' });
    await sim.createStack('app', { git: { projectRepo: 'file:///repo', branch: 'main' } }, { stack: 'dev' });
    const out = (n: number) => ({ greeting: `hello-${n}`, number: n });
    await sim.v1Run('app', { commit: A, state: 'succeeded', permalink: null, outputs: out(1) });
    await sim.v1Poll('app');
    await sim.v1Run('app', { commit: B, state: 'succeeded', permalink: null, outputs: out(2) });
    for (let i = 0; i < 3; i++) await sim.v1Run('app', { commit: C, state: 'failed', message: 'error' });
    await sim.v1Run('app', { commit: D, state: 'succeeded', permalink: null, outputs: out(4) });
    await sim.v1Run('app', { commit: E, state: 'failed', message: 'error' });
    await sim.v1Reset('app');
    await sim.v1Poll('app');
    await new Promise((r) => setTimeout(r, 1000));
    const real = shapes(load('pko-v1.16.0.json'), 'Stack', 'app');
    const simulated = shapes(rec.items, 'Stack', 'app');
    expect([...simulated].filter((s) => !real.has(s))).toEqual([]);
    expect([...real].filter((s) => !simulated.has(s))).toEqual([]);
  });

  it('v2.9: up, failing commit retried until Stalled, fix, preview', async () => {
    const rec = new StatusRecorder(kubeConfig('admin'), ns, { updates: true });
    recorders.push(rec);
    await rec.start();
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack(
      'v2app',
      { git: { projectRepo: 'https://git.example/pko-nc/app.git', branch: 'main' } },
      { stack: 'dev' },
    );
    const ok = await sim.startRun('v2app', { type: 'up', commit: A });
    await sim.finishRun(ok, 'succeeded', { permalink: null, outputs: { n: 1 } });
    for (let i = 0; i < 3; i++) {
      const r = await sim.startRun('v2app', { type: 'up', commit: B });
      await sim.finishRun(r, 'failed', { permalink: null, message: 'up failed: error' });
    }
    const fix = await sim.startRun('v2app', { type: 'up', commit: C });
    await sim.finishRun(fix, 'succeeded', { permalink: null, outputs: { n: 3 } });
    await sim.createStack(
      'v2prev',
      { git: { projectRepo: 'https://git.example/pko-nc/p.git', branch: 'main' } },
      { stack: 'dev', preview: true },
    );
    const p = await sim.startRun('v2prev', { type: 'preview', commit: D });
    await sim.finishRun(p, 'succeeded', { permalink: null });
    await new Promise((r) => setTimeout(r, 1000));
    const recorded = load('pko-v2.9.0.json');
    const real = shapes(recorded, 'Update');
    const simulated = shapes(rec.items, 'Update');
    expect([...simulated].filter((s) => !real.has(s))).toEqual([]);
  });
});
