/**
 * The ledger store on the real API server, its batching driven by an injected clock: writes
 * happen only when the clock lets a batch flush, `advance` resolves once persisted, a restart
 * reads what was written, two writers of one shard merge (409) without losing either, and
 * entries of Stacks known to be gone are pruned on the next write.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { Ledger, LEDGER_ALERT_UID_LABEL } from '../../src/delivery/ledger.ts';
import { FakeClock } from '../kube/fake-clock.ts';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';
import { quietLogger } from './support.ts';

let ns: string;
beforeAll(async () => {
  ns = await createTestNamespace('ledger');
});

const pos = (run: number, rank = 1) => ({ run, rank, sub: 0 });

function ledger(clock: FakeClock, stacks?: { isAlive(uid: string): boolean | undefined }): Ledger {
  return new Ledger({
    kubeConfig: kubeConfig('admin'),
    logger: quietLogger(),
    clock,
    shards: 2,
    flushDelayMs: 10,
    ...(stacks ? { stacks } : {}),
  });
}

async function ledgerConfigMaps(alertUid: string): Promise<Record<string, string>> {
  const core = kubeConfig('admin').makeApiClient(CoreV1Api);
  const list = await core.listNamespacedConfigMap({
    namespace: ns,
    labelSelector: `${LEDGER_ALERT_UID_LABEL}=${alertUid}`,
  });
  return Object.assign({}, ...list.items.map((cm) => cm.data ?? {})) as Record<string, string>;
}

describe('Ledger (ConfigMap store)', () => {
  it('batches advances until the clock flushes them, resolves once persisted, and a restart reads them back', async () => {
    const clock = new FakeClock();
    const alert = { namespace: ns, name: 'ops', uid: 'a1111111-0000-4000-8000-000000000001' };
    const l = ledger(clock);
    let persisted = 0;
    const writes = [
      l.advance(alert, 'stack-1', pos(100), 's1/run-a/succeeded'),
      l.advance(alert, 'stack-2', pos(200), 's2/run-b/failed'),
    ].map((p) => p.then(() => persisted++));
    expect(l.isDone(alert.uid, 'stack-1', pos(100), 's1/run-a/succeeded')).toBe(true); // in memory at once
    await new Promise((r) => setTimeout(r, 100));
    expect([persisted, l.writes]).toEqual([0, 0]); // nothing written until the batch window passes
    await clock.advance(10);
    await Promise.all(writes);
    expect(persisted).toBe(2);
    expect(await ledgerConfigMaps(alert.uid)).toEqual({
      'stack-1': expect.stringMatching(/^100\.1\.0~[0-9a-f]{8}$/) as unknown,
      'stack-2': expect.stringMatching(/^200\.1\.0~[0-9a-f]{8}$/) as unknown,
    });
    await l.close();

    const restarted = ledger(new FakeClock());
    await restarted.load(ns);
    expect(restarted.isDone(alert.uid, 'stack-1', pos(100), 's1/run-a/succeeded')).toBe(true);
    expect(restarted.isDone(alert.uid, 'stack-1', pos(101), 's1/run-c/succeeded')).toBe(false);
    expect(restarted.position(alert.uid, 'stack-2')).toEqual(pos(200));
    await restarted.close();
  });

  it('two writers of one ConfigMap (an old and a new leader) merge on conflict: both entries survive', async () => {
    const alert = { namespace: ns, name: 'ops', uid: 'a2222222-0000-4000-8000-000000000002' };
    const c1 = new FakeClock();
    const c2 = new FakeClock();
    const one = ledger(c1);
    const two = ledger(c2);
    const first = one.advance(alert, 'stack-x', pos(300), 'x/r/succeeded');
    await c1.advance(10);
    await first;
    // `two` has not read the ConfigMap: its write conflicts (409) and is merged with what is there.
    const second = two.advance(alert, 'stack-y', pos(400), 'y/r/succeeded');
    const again = two.advance(alert, 'stack-x', pos(250), 'x/old/succeeded'); // an older position
    await c2.advance(10);
    await Promise.all([second, again]);
    const data = await ledgerConfigMaps(alert.uid);
    expect(Object.keys(data).sort()).toEqual(['stack-x', 'stack-y']);
    expect(data['stack-x']).toMatch(/^300\.1\.0/); // the watermark never moves back
    await one.close();
    await two.close();
  });

  it('prunes the entries of Stacks known to be gone on the next write', async () => {
    const clock = new FakeClock();
    const alive = new Set(['keep']);
    const alert = { namespace: ns, name: 'ops', uid: 'a3333333-0000-4000-8000-000000000003' };
    const l = ledger(clock, { isAlive: (uid) => alive.has(uid) });
    // Both stacks in one shard: with 2 shards, find a second uid that hashes with 'keep'.
    const peers = ['gone-1', 'gone-2', 'gone-3', 'gone-4', 'gone-5'];
    const writes = [l.advance(alert, 'keep', pos(1), 'k/r/succeeded')];
    for (const p of peers) {
      alive.add(p);
      writes.push(l.advance(alert, p, pos(1), `${p}/r/succeeded`));
    }
    await clock.advance(10);
    await Promise.all(writes);
    expect(Object.keys(await ledgerConfigMaps(alert.uid)).sort()).toEqual(['keep', ...peers].sort());
    for (const p of peers) alive.delete(p);
    const next = l.advance(alert, 'keep', pos(2), 'k/r2/succeeded');
    await clock.advance(10);
    await next;
    const left = Object.keys(await ledgerConfigMaps(alert.uid));
    expect(left).toContain('keep');
    // Pruned in the shard that was written; a gone Stack in the other shard goes with its next write.
    expect(left.length).toBeLessThan(1 + peers.length);
    await l.close();
  });
});
