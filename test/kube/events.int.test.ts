/**
 * EventRecorder against a real API server: create, aggregate repeats, bound messages,
 * never throw.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../../src/kube/clock.ts';
import { EventRecorder } from '../../src/kube/events.ts';
import { createLogger } from '../../src/log.ts';
import type { KubeObject } from '../../src/api/meta.ts';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';
import { configMaps, rest, type KubeListOf } from './rest.ts';

interface Ev extends KubeObject {
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  firstTimestamp?: string;
  lastTimestamp?: string;
  involvedObject: { uid?: string };
}

/** Real timers, but a `now` the test moves forward (to cross the 10-minute window). */
class ShiftedClock implements Clock {
  offsetMs = 0;
  now(): number {
    return Date.now() + this.offsetMs;
  }
  setTimeout(cb: () => void, ms: number): unknown {
    return systemClock.setTimeout(cb, ms);
  }
  clearTimeout(handle: unknown): void {
    systemClock.clearTimeout(handle);
  }
}

const admin = rest(kubeConfig('admin'));

async function eventsFor(ns: string, uid: string): Promise<Ev[]> {
  const list = await admin.get<KubeListOf<Ev>>({ group: '', version: 'v1', plural: 'events', namespace: ns });
  return list.items.filter((e) => e.involvedObject.uid === uid);
}

/** A ConfigMap to hang Events on (as the API returns it: apiVersion, kind, uid set). */
function makeObject(ns: string, name: string): Promise<KubeObject> {
  return admin.create<KubeObject>(configMaps(ns), { metadata: { name } });
}

describe('EventRecorder', () => {
  it('creates an Event, then aggregates repeats within 10 minutes into count/lastTimestamp', async () => {
    const ns = await createTestNamespace('events');
    const obj = await makeObject(ns, 'target');
    const uid = obj.metadata?.uid ?? '';
    const clock = new ShiftedClock();
    const rec = new EventRecorder(kubeConfig('admin'), {
      component: 'pko-notification-controller',
      host: 'pod-1',
      logger: createLogger({ level: 'silent' }),
      clock,
    });

    await rec.event(obj, 'Warning', 'DeliveryFailed', 'github: HTTP 500');
    let evs = await eventsFor(ns, uid);
    expect(evs).toHaveLength(1);
    const first = evs[0]!;
    expect(first.metadata?.name).toMatch(/^target\.[0-9a-f]+$/);
    expect(first).toMatchObject({
      type: 'Warning',
      reason: 'DeliveryFailed',
      message: 'github: HTTP 500',
      count: 1,
      source: { component: 'pko-notification-controller', host: 'pod-1' },
      reportingComponent: 'pko-notification-controller',
      reportingInstance: 'pod-1',
      involvedObject: { apiVersion: 'v1', kind: 'ConfigMap', name: 'target', namespace: ns, uid },
    });

    // Two concurrent repeats and one later one: all folded into the same Event.
    clock.offsetMs += 2_000;
    await Promise.all([
      rec.event(obj, 'Warning', 'DeliveryFailed', 'github: HTTP 500'),
      rec.event(obj, 'Warning', 'DeliveryFailed', 'github: HTTP 500'),
    ]);
    clock.offsetMs += 60_000;
    await rec.event(obj, 'Warning', 'DeliveryFailed', 'github: HTTP 500');
    evs = await eventsFor(ns, uid);
    expect(evs).toHaveLength(1);
    expect(evs[0]!.count).toBe(4);
    expect(new Date(evs[0]!.lastTimestamp!).getTime()).toBeGreaterThan(
      new Date(first.firstTimestamp!).getTime() + 60_000,
    );
    expect(evs[0]!.firstTimestamp).toEqual(first.firstTimestamp);

    // A different message is a different Event.
    await rec.event(obj, 'Normal', 'Delivered', 'github: commit status success');
    expect(await eventsFor(ns, uid)).toHaveLength(2);

    // After the window a repeat starts a new Event.
    clock.offsetMs += 11 * 60_000;
    await rec.event(obj, 'Warning', 'DeliveryFailed', 'github: HTTP 500');
    evs = await eventsFor(ns, uid);
    expect(
      evs
        .filter((e) => e.reason === 'DeliveryFailed')
        .map((e) => e.count)
        .sort(),
    ).toEqual([1, 4]);
  });

  it('bounds messages to 1024 bytes and records cluster-scoped objects in default', async () => {
    const ns = await createTestNamespace('events-bounds');
    const obj = await makeObject(ns, 'long');
    const rec = new EventRecorder(kubeConfig('admin'), {
      component: 'c',
      logger: createLogger({ level: 'silent' }),
    });
    await rec.event(obj, 'Warning', 'Long', 'é'.repeat(5_000));
    const [ev] = await eventsFor(ns, obj.metadata?.uid ?? '');
    expect(Buffer.byteLength(ev?.message ?? '', 'utf8')).toBeLessThanOrEqual(1_024);
    expect(ev?.message?.endsWith('…')).toBe(true);

    const nsObj = await admin.get<KubeObject>({ group: '', version: 'v1', plural: 'namespaces', name: ns });
    await rec.event(nsObj, 'Normal', 'Seen', 'namespace event');
    const inDefault = await eventsFor('default', nsObj.metadata?.uid ?? '');
    expect(inDefault.map((e) => e.reason)).toEqual(['Seen']);
  });

  it('never throws: a denied write is logged without the message text', async () => {
    const ns = await createTestNamespace('events-denied');
    const obj = await makeObject(ns, 'target');
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _e, cb) {
        lines.push(chunk.toString());
        cb();
      },
    });
    const rec = new EventRecorder(kubeConfig('viewer'), {
      component: 'c',
      logger: createLogger({ level: 'info', destination }),
    });
    await expect(
      rec.event(obj, 'Warning', 'DeliveryFailed', 'secret-ish detail xyz'),
    ).resolves.toBeUndefined();
    await expect(rec.event({ kind: 'ConfigMap' }, 'Normal', 'Bad', 'no metadata')).resolves.toBeUndefined();
    const log = lines.join('');
    expect(log).toContain('recording Kubernetes Event failed');
    expect(log).toContain('HTTP 403');
    expect(log).not.toContain('secret-ish detail xyz');
    expect(await eventsFor(ns, obj.metadata?.uid ?? '')).toEqual([]);
  });
});
