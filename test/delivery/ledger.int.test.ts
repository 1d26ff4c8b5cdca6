/**
 * The ledger store (DeliveryLedger objects) on the real API server, its batching driven by an
 * injected clock: `record` resolves once persisted, a restart reads what was written, objects
 * split as they grow (each stays small) and a split interrupted half-way is tidied on load, two
 * writers of one object (an old and a new leader) merge without losing either, and entries of
 * deleted Stacks go.
 */
import { createHash } from 'node:crypto';
import { Registry } from 'prom-client';
import { beforeAll, describe, expect, it } from 'vitest';
import { GROUP, VERSION } from '../../src/api/v1alpha1.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { Ledger, LEDGER_ALERT_UID_LABEL, LEDGER_PLURAL, SPLIT_BYTES } from '../../src/delivery/ledger.ts';
import { entryCovers, runHash, type EventRef } from '../../src/delivery/ledger-entry.ts';
import { FakeClock } from '../kube/fake-clock.ts';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';
import { quietLogger } from './support.ts';

let ns: string;
beforeAll(async () => {
  ns = await createTestNamespace('ledger');
});

const ref = (run: string, rv: number, phase: EventRef['phase'] = 'succeeded'): EventRef => ({
  run: runHash(run),
  rv,
  phase,
});

function ledger(clock: FakeClock = new FakeClock(), flushDelayMs = 10, registry?: Registry): Ledger {
  return new Ledger({
    kubeConfig: kubeConfig('admin'),
    logger: quietLogger(),
    clock,
    flushDelayMs,
    ...(registry ? { registry } : {}),
  });
}

interface Stored {
  metadata: { name: string; ownerReferences?: { kind: string; uid: string }[] };
  spec: { alert: string; shard: string; entries: string };
}

async function stored(alertUid: string): Promise<Stored[]> {
  const list = await kubeRequest<{ items: Stored[] }>(kubeConfig('admin'), {
    method: 'GET',
    path: objectPath({ group: GROUP, version: VERSION, plural: LEDGER_PLURAL, namespace: ns }),
    query: { labelSelector: `${LEDGER_ALERT_UID_LABEL}=${alertUid}` },
  });
  return list.items.sort((a, b) => a.spec.shard.localeCompare(b.spec.shard));
}

const keysOf = (objs: Stored[]): string[] =>
  objs
    .flatMap((o) =>
      o.spec.entries
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => l.slice(0, l.indexOf('='))),
    )
    .sort();

describe('Ledger (DeliveryLedger store)', () => {
  it('batches changes until the clock flushes them, resolves once persisted, and a restart reads them back', async () => {
    const clock = new FakeClock();
    const alert = { namespace: ns, name: 'ops', uid: 'a1111111-0000-4000-8000-000000000001' };
    const l = ledger(clock);
    let persisted = 0;
    const writes = [
      l.record(alert, 'stack-1', ref('s1/run-a', 100)),
      l.record(alert, 'stack-2', ref('s2/run-b', 200, 'failed'), 'thread 42'),
    ].map((p) => p.then(() => persisted++));
    expect(entryCovers(l.entry(alert.uid, 'stack-1'), ref('s1/run-a', 100))).toBe(true); // in memory at once
    await new Promise((r) => setTimeout(r, 100));
    expect([persisted, l.writes]).toEqual([0, 0]); // nothing written until the batch window passes
    await clock.advance(10);
    await Promise.all(writes);
    expect([persisted, l.writes]).toEqual([2, 1]);
    const [obj] = await stored(alert.uid);
    expect(obj?.spec.shard).toBe('');
    expect(obj?.metadata.ownerReferences?.map((o) => [o.kind, o.uid])).toEqual([['Alert', alert.uid]]);
    expect(keysOf([obj as Stored])).toEqual(['stack-1', 'stack-2']);
    await l.close();

    const restarted = ledger();
    await restarted.load(ns);
    expect(entryCovers(restarted.entry(alert.uid, 'stack-1'), ref('s1/run-a', 100))).toBe(true);
    expect(entryCovers(restarted.entry(alert.uid, 'stack-1'), ref('s1/run-c', 101))).toBe(false);
    expect(restarted.entry(alert.uid, 'stack-2')?.runs[0]?.note).toBe('thread 42');
    await restarted.close();
  });

  it('an entry changed while its object is being written goes out with the next write; one unchanged is not written again', async () => {
    const clock = new FakeClock();
    const alert = { namespace: ns, name: 'inflight', uid: 'a9999999-0000-4000-8000-000000000009' };
    const l = ledger(clock);
    const first = l.record(alert, 'stack-1', ref('s1/run-a', 100));
    await clock.advance(10); // the write of run-a leaves (the API server answers in ms, not in one turn)
    const second = l.record(alert, 'stack-1', ref('s1/run-b', 101));
    await first;
    expect(l.writes).toBe(1);
    await clock.advance(10); // run-b's own batch window
    await second;
    expect(l.writes).toBe(2);
    const [obj] = await stored(alert.uid);
    expect(obj?.spec.entries).toContain(runHash('s1/run-b'));
    await new Promise((r) => setTimeout(r, 50));
    expect([l.writes, clock.pending()]).toEqual([2, []]); // nothing left to write, nothing scheduled
    await l.close();
    const restarted = ledger();
    await restarted.load(ns);
    expect(entryCovers(restarted.entry(alert.uid, 'stack-1'), ref('s1/run-b', 101))).toBe(true);
    await restarted.close();
  });

  it('objects split as they grow: each stays under the split size, every entry is kept, a restart finds all', async () => {
    const alert = { namespace: ns, name: 'big', uid: 'a4444444-0000-4000-8000-000000000004' };
    const clock = new FakeClock();
    const registry = new Registry();
    const l = ledger(clock, 10, registry);
    const stacks = Array.from(
      { length: 60 },
      (_, i) => `6f1c2d9e-0000-4000-8000-${String(i).padStart(12, '0')}`,
    );
    const writes = Promise.all(stacks.map((s, i) => l.record(alert, s, ref(`${s}/run-${i}`, 1000 + i))));
    const state = { done: false };
    void writes.then(() => (state.done = true));
    const finished = (): boolean => state.done;
    // Flush, split, flush the halves…: let the clock run until everything is persisted.
    while (!finished()) {
      await clock.advance(10);
      await new Promise((r) => setTimeout(r, 20));
    }
    const objs = await stored(alert.uid);
    expect(objs.length).toBeGreaterThan(2);
    for (const o of objs) expect(Buffer.byteLength(o.spec.entries, 'utf8')).toBeLessThanOrEqual(SPLIT_BYTES);
    expect(keysOf(objs)).toEqual([...stacks].sort());
    // The objects cover the hash space without overlap (a prefix-free set).
    const shards = objs.map((o) => o.spec.shard);
    for (const a of shards) for (const b of shards) if (a !== b) expect(b.startsWith(a)).toBe(false);
    // The gauges, counted when scraped.
    const gauge = async (name: string): Promise<number | undefined> =>
      (await registry.getSingleMetric(name)?.get())?.values[0]?.value;
    expect(await gauge('pkonc_ledger_entries')).toBe(60);
    expect(await gauge('pkonc_ledger_objects')).toBe(objs.length);
    // An entry changed after it was written is written with its new text (only changed entries
    // are formatted again).
    const first = stacks[0] as string;
    const rewritten = { done: false };
    void l.record(alert, first, ref(`${first}/run-next`, 2000)).then(() => (rewritten.done = true));
    const persisted = (): boolean => rewritten.done;
    while (!persisted()) {
      await clock.advance(10);
      await new Promise((r) => setTimeout(r, 20));
    }
    const line = (await stored(alert.uid))
      .flatMap((o) => o.spec.entries.split('\n'))
      .find((x) => x.startsWith(`${first}=`));
    expect(line).toContain(runHash(`${first}/run-next`));
    expect(line).toContain(runHash(`${first}/run-0`));
    await l.close();
    const again = ledger();
    await again.load(ns);
    for (const [i, s] of stacks.entries())
      expect(entryCovers(again.entry(alert.uid, s), ref(`${s}/run-${i}`, 1000 + i))).toBe(true);
    await again.close();
  });

  it('a split interrupted half-way (the whole and one half both stored) is merged and tidied on load', async () => {
    const alert = { namespace: ns, name: 'torn', uid: 'a5555555-0000-4000-8000-000000000005' };
    const write = async (shard: string, entries: string): Promise<void> => {
      await kubeRequest(kubeConfig('admin'), {
        method: 'POST',
        path: objectPath({ group: GROUP, version: VERSION, plural: LEDGER_PLURAL, namespace: ns }),
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'DeliveryLedger',
          metadata: {
            name: Ledger.objectName(alert.uid, shard),
            labels: { [LEDGER_ALERT_UID_LABEL]: alert.uid },
          },
          spec: { alert: alert.name, shard, entries },
        },
      });
    };
    // Stacks whose hash starts with bit 0 and with bit 1.
    const l0 = ledger();
    const bitOf = (s: string): string => (createHash('sha1').update(s).digest().readUInt8(0) >> 7).toString();
    const zero = ['z-a', 'z-b', 'z-c', 'z-d', 'z-e', 'z-f'].filter((s) => bitOf(s) === '0');
    const one = ['z-a', 'z-b', 'z-c', 'z-d', 'z-e', 'z-f'].filter((s) => bitOf(s) === '1');
    const [s0] = zero;
    const [s1] = one;
    if (s0 === undefined || s1 === undefined) throw new Error('test needs uids hashing to both halves');
    const h = runHash('r');
    // The whole: an old state of s0 and the only copy of s1. The half "0": a newer state of s0.
    await write('', `${s0}=0 ${h}.10.1\n${s1}=0 ${h}.11.2`);
    await write('0', `${s0}=0 ${h}.10.3`);
    await l0.load(ns);
    expect(entryCovers(l0.entry(alert.uid, s0), { run: h, rv: 10, phase: 'succeeded' })).toBe(true);
    expect(entryCovers(l0.entry(alert.uid, s1), { run: h, rv: 11, phase: 'succeeded' })).toBe(true);
    const objs = await stored(alert.uid);
    expect(objs.map((o) => o.spec.shard)).toEqual(['0', '1']);
    expect(keysOf(objs)).toEqual([s0, s1].sort());
    await l0.close();
  });

  it('two writers of one object (an old and a new leader) merge on conflict: both entries survive, nothing reopens', async () => {
    const alert = { namespace: ns, name: 'ops', uid: 'a2222222-0000-4000-8000-000000000002' };
    const c1 = new FakeClock();
    const c2 = new FakeClock();
    const one = ledger(c1);
    const two = ledger(c2);
    const first = one.record(alert, 'stack-x', ref('x/r', 300));
    await c1.advance(10);
    await first;
    // `two` has not read the object: its create conflicts (409) and is merged with what is there.
    const second = two.record(alert, 'stack-y', ref('y/r', 400));
    const again = two.record(alert, 'stack-x', ref('x/r', 300, 'started')); // a stale view of x
    await c2.advance(10);
    await Promise.all([second, again]);
    expect(two.conflicts).toBeGreaterThanOrEqual(1);
    const restarted = ledger();
    await restarted.load(ns);
    expect(entryCovers(restarted.entry(alert.uid, 'stack-x'), ref('x/r', 300))).toBe(true);
    expect(entryCovers(restarted.entry(alert.uid, 'stack-y'), ref('y/r', 400))).toBe(true);
    await Promise.all([one.close(), two.close(), restarted.close()]);
  });

  it('a deleted Stack’s entry goes with the next write; pruning after load drops Stacks that no longer exist', async () => {
    const clock = new FakeClock();
    const alert = { namespace: ns, name: 'ops', uid: 'a3333333-0000-4000-8000-000000000003' };
    const l = ledger(clock);
    const writes = ['keep', 'gone-1', 'gone-2'].map((s) => l.record(alert, s, ref(`${s}/r`, 1)));
    await clock.advance(10);
    await Promise.all(writes);
    l.forgetStack('gone-1');
    await clock.advance(10);
    await new Promise((r) => setTimeout(r, 200));
    await clock.advance(10);
    expect(keysOf(await stored(alert.uid))).toEqual(['gone-2', 'keep']);
    await l.close();

    const restarted = ledger();
    await restarted.load(ns);
    expect(restarted.pruneStacks((uid) => uid !== 'gone-2')).toBe(1);
    await restarted.close();
    expect(keysOf(await stored(alert.uid))).toEqual(['keep']);
  });

  it('a --watch-label-selector shard reads and writes only the objects of the Alerts it serves; an Alert served later is read before it is used', async () => {
    const clock = new FakeClock();
    const mine = { namespace: ns, name: 'mine', uid: 'a6666666-0000-4000-8000-000000000006' };
    const theirs = { namespace: ns, name: 'theirs', uid: 'a7777777-0000-4000-8000-000000000007' };
    const first = ledger(clock);
    const writes = [mine, theirs].map((a) => first.record(a, 'shared-stack', ref('shared/r', 7)));
    await clock.advance(10);
    await Promise.all(writes);
    await first.close();
    const before = JSON.stringify(await stored(theirs.uid));

    const shard = ledger(clock);
    await shard.load(ns, (uid) => uid === mine.uid);
    expect(entryCovers(shard.entry(mine.uid, 'shared-stack'), ref('shared/r', 7))).toBe(true);
    expect(shard.entry(theirs.uid, 'shared-stack')).toBeUndefined(); // not read
    // The Stack is deleted and entries of dead Stacks pruned: only this shard's object is written.
    expect(shard.pruneStacks(() => false)).toBe(1);
    shard.forgetStack('shared-stack');
    await clock.advance(10);
    await new Promise((r) => setTimeout(r, 200));
    await clock.advance(10);
    expect(keysOf(await stored(mine.uid))).toEqual([]);
    expect(JSON.stringify(await stored(theirs.uid))).toBe(before); // untouched, same resourceVersion

    // Relabelled into this shard later: its objects are read before anything is decided for it.
    await shard.ready(theirs);
    expect(entryCovers(shard.entry(theirs.uid, 'shared-stack'), ref('shared/r', 7))).toBe(true);
    await shard.close();
  });
});
