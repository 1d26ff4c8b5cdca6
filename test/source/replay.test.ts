/**
 * Recorded real PKO runs replayed through derivation. The `real-pko` project records, with
 * `PKO_NC_RECORD_FIXTURES=1`, every stored version of the Stacks (and Updates) a real PKO v1.16.0
 * and v2.9.0 wrote during its scenarios, and what the controller delivered to a generic webhook
 * (test/fixtures/realpko/*.json). Here each recorded version is fed, in order, to the same pure
 * functions the controller uses — eventsForStack (src/source/derive.ts), positions from the
 * resourceVersions the objects were observed at (src/delivery/order.ts, as the router and
 * dispatcher take them) and the ledger's coverage rules (src/delivery/ledger-entry.ts), with a
 * dispatcher that, like the real one, drops a Started whose run's result is already pending —
 * and the events that come out must be the ones the real run delivered, per Stack and in order.
 * A change to derivation that would make the controller behave differently against real PKO
 * fails here, without a real PKO.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { NotificationEvent } from '../../src/api/event.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import {
  entryCovers,
  recordHandled,
  runHash,
  runRecord,
  stallHash,
  type Entry,
  type EventRef,
} from '../../src/delivery/ledger-entry.ts';
import { comparePositions, parseResourceVersion, positionOf } from '../../src/delivery/order.ts';
import { runKey } from '../../src/api/event.ts';
import { stackNameOfUpdate } from '../../src/alert/router.ts';
import { eventsForStack } from '../../src/source/derive.ts';
import { V1FailureTexts } from '../../src/source/runs.ts';
import { compileTemplates, renderNotification } from '../../src/template/index.ts';
import { limitsFor } from '../../src/provider-types.ts';

interface Recorded {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  kind: 'Stack' | 'Update';
  object: Stack | Update;
}
interface DeliveredRecord {
  id: string;
  reason: string;
  message: string;
  commit?: string;
  stack: string;
}
interface Fixture {
  pko: string;
  objects: Recorded[];
  delivered: DeliveredRecord[];
}

function load(name: string): Fixture {
  const file = path.resolve(import.meta.dirname, '..', 'fixtures', 'realpko', name);
  return JSON.parse(readFileSync(file, 'utf8')) as Fixture;
}

/** What the controller would deliver for this sequence of stored versions (one Alert, every event). */
function replay(f: Fixture): NotificationEvent[] {
  const stacks = new Map<string, Stack>();
  const updates = new Map<string, Update>();
  const texts = new V1FailureTexts();
  const ledger = new Map<string, Entry>();
  const firstSeen = new Map<string, number>();
  const ctx = {
    reportingController: 'pko-notification-controller',
    v1FailureText: (uid: string, commit: string) => texts.text(uid, commit),
  };
  const out: NotificationEvent[] = [];
  for (const item of f.objects) {
    const name = item.object.metadata.name ?? '';
    let stackName: string | undefined;
    if (item.kind === 'Stack') {
      const s = item.object;
      stackName = name;
      if (item.type === 'DELETED') {
        stacks.delete(name);
        texts.forget(s.metadata.uid ?? '');
        continue;
      }
      stacks.set(name, s);
      texts.observe(s);
    } else {
      const u = item.object;
      stackName = stackNameOfUpdate(u);
      if (item.type === 'DELETED') updates.delete(name);
      else updates.set(name, u);
    }
    const stack = stackName === undefined ? undefined : stacks.get(stackName);
    const uid = stack?.metadata.uid;
    if (stack === undefined || uid === undefined) continue;
    const mine = [...updates.values()].filter((u) => stackNameOfUpdate(u) === stackName);
    // The router: each event with the resourceVersion of the Update it names, else the Stack's;
    // the dispatcher: a run's first observation, or the one its ledger record keeps.
    const stackRv = parseResourceVersion(stack.metadata.resourceVersion);
    const updateRv = new Map(
      mine.map((u) => [u.metadata.name ?? '', parseResourceVersion(u.metadata.resourceVersion)]),
    );
    const ref = (ev: NotificationEvent): EventRef => {
      const rk = runKey(ev.identity);
      const phase = ev.identity.phase;
      return {
        run: runHash(rk),
        rv:
          runRecord(ledger.get(uid), runHash(rk))?.rv ??
          firstSeen.get(`${uid}/${rk}`) ??
          Number.MAX_SAFE_INTEGER,
        phase: phase.kind,
        ...(phase.kind === 'stalled' ? { stall: { gen: phase.generation, h: stallHash(ev.id) } } : {}),
        ...(ev.identity.run.kind === 'v1' ? { latestOnly: true } : {}),
      };
    };
    const evs = eventsForStack(stack, mine, ctx);
    for (const ev of evs) {
      const name = ev.metadata.updateName;
      const observed = (name !== undefined ? updateRv.get(name) : undefined) ?? stackRv;
      const k = `${uid}/${runKey(ev.identity)}`;
      const seen = firstSeen.get(k);
      if (observed !== undefined && (seen === undefined || observed < seen)) firstSeen.set(k, observed);
    }
    const items = evs
      .map((ev) => ({ ev, pos: positionOf(ev, ref(ev).rv) }))
      .sort((a, b) => comparePositions(a.pos, b.pos));
    const pendingResults = new Set(
      items
        .filter((i) => i.pos.rank === 1 && !entryCovers(ledger.get(uid), ref(i.ev)))
        .map((i) => runKey(i.ev.identity)),
    );
    for (const i of items) {
      const entry = ledger.get(uid);
      if (entryCovers(entry, ref(i.ev))) continue;
      // The dispatcher skips (and records) a Started whose run's result is already known.
      if (!(i.pos.rank === 0 && pendingResults.has(runKey(i.ev.identity)))) out.push(i.ev);
      ledger.set(uid, recordHandled(entry, ref(i.ev)));
    }
  }
  return out;
}

const perStack = (evs: { id: string; reason: string; commit?: string | undefined; stack: string }[]) => {
  const m: Record<string, string[]> = {};
  for (const e of evs) (m[e.stack] ??= []).push(`${e.reason} ${e.id} ${e.commit ?? '-'}`);
  return m;
};

describe.each([
  ['pko-v1.16.0.json', 'v1.16.0'],
  ['pko-v2.9.0.json', 'v2.9.0'],
])('replay of a recorded real PKO run (%s)', (file, version) => {
  const f = load(file);

  it('is a recording of that PKO version, with deliveries', () => {
    expect(f.pko).toBe(`v${version.replace(/^v/, '')}`);
    expect(f.objects.length).toBeGreaterThan(20);
    expect(f.delivered.length).toBeGreaterThan(3);
  });

  it('derivation gives exactly the events the real run delivered, per Stack and in order', () => {
    const got = replay(f).map((ev) => ({
      id: ev.id,
      reason: ev.reason,
      commit: ev.metadata.commit,
      stack: ev.involvedObject.name,
    }));
    expect(perStack(got)).toEqual(perStack(f.delivered));
  });

  it('failures carry the CLI error text, as delivered', () => {
    const failed = replay(f).filter((ev) => ev.reason.endsWith('Failed'));
    expect(failed.length).toBeGreaterThan(0);
    for (const ev of failed) expect(ev.message).toContain('doesNotExist');
    for (const d of f.delivered.filter((x) => x.reason.endsWith('Failed')))
      expect(d.message).toContain('doesNotExist');
  });

  it('N19: the commit status description names the program error, never "failed: stderr:"', () => {
    const compiled = compileTemplates(undefined);
    if (!compiled.ok) throw new Error(compiled.message);
    const failed = replay(f).filter((ev) => ev.reason.endsWith('Failed'));
    expect(failed.length).toBeGreaterThan(0);
    for (const ev of failed) {
      const opts = { clusterName: 'c', providerType: 'github' as const, commentsEnabled: false };
      const description = renderNotification(compiled.set, ev, { ...opts, limits: limitsFor('github') })
        .commitStatus?.description;
      // Both versions: the program's own error (PKO v1 ends the output with an empty `stderr:`
      // block; v2 puts the error under `stderr:` with the source location after it).
      expect(description).toMatch(/failed: .*error: resource or variable named "doesNotExist"/);
      expect(description).not.toMatch(/stderr:\s*$/);
      expect(ev.message).not.toMatch(/stderr:\s*$/);
    }
  });
});
