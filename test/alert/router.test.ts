/**
 * The router without a cluster: Stacks and Updates come from in-memory stand-ins for the two
 * informers (the `on`/`get`/`list` the router uses), Alerts from a real `AlertIndex`, and what it
 * offers is recorded through the `DeliveryQueue` port.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../src/api/meta.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import type { AlertSpec } from '../../src/api/v1alpha1.ts';
import { compileAlert } from '../../src/alert/compile.ts';
import { AlertIndex } from '../../src/alert/routed.ts';
import {
  HELD_FALLBACK_RETRY_MS,
  Router,
  STACK_LAG_WAIT_MS,
  previewGateOf,
  previewThreadOf,
  supersededBy,
  type RouterOptions,
} from '../../src/alert/router.ts';
import type { DeliveryAlert, DeliveryQueue, OfferedEvent } from '../../src/delivery/types.ts';
import { deliveryAlert, quietLogger } from '../delivery/support.ts';
import {
  NS,
  SHA,
  STACK_UID,
  UPDATE_NAME,
  update,
  v2FailedStack,
  v2RunningStack,
} from '../source/fixtures.ts';

type Handler = (...args: never[]) => void;

/** The part of an informer the router uses, over a plain map. */
class MemoryInformer<T extends KubeObject> {
  readonly #objects = new Map<string, T>();
  readonly #handlers = new Map<string, Handler[]>();
  on(event: string, cb: Handler): void {
    this.#handlers.set(event, [...(this.#handlers.get(event) ?? []), cb]);
  }
  get(namespace: string, name: string): T | undefined {
    return this.#objects.get(`${namespace}/${name}`);
  }
  list(): T[] {
    return [...this.#objects.values()];
  }
  add(obj: T): void {
    this.#objects.set(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`, obj);
    for (const h of this.#handlers.get('add') ?? []) (h as (o: T) => void)(obj);
  }
}

class RecordingQueue implements DeliveryQueue {
  readonly offers: { alert: string; stackUid: string; events: OfferedEvent[] }[] = [];
  offer(alert: DeliveryAlert, stackUid: string, events: readonly OfferedEvent[]): void {
    this.offers.push({ alert: alert.name, stackUid, events: [...events] });
  }
}

function routed(name: string, spec: Partial<AlertSpec>) {
  const r = compileAlert(
    {
      apiVersion: 'notification.pko.dev/v1alpha1',
      kind: 'Alert',
      metadata: { name, namespace: NS, uid: `${name}-uid`, generation: 1 },
      spec: { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }], ...spec },
    },
    { allowCrossNamespace: false },
  );
  if (!r.ok) throw new Error(r.message);
  return { ...deliveryAlert({ key: `${NS}/${name}`, uid: `${name}-uid`, name }), compiled: r.alert };
}

function setup(
  enrich?: RouterOptions['enrich'],
  apiHas: (name: string) => boolean = () => false,
  now?: () => number,
  more: Partial<RouterOptions> = {},
) {
  const stacks = new MemoryInformer<Stack>();
  const updates = new MemoryInformer<Update>();
  const alerts = new AlertIndex();
  const queue = new RecordingQueue();
  /** The Update reads from the API server (`updateExistsNow`), by name. */
  const reads: string[] = [];
  const router = new Router({
    kubeConfig: new KubeConfig(),
    stacks,
    updates,
    alerts,
    delivery: queue,
    logger: quietLogger(),
    reportingController: 'pko-notification-controller',
    updateExistsNow: (_ns, name) => {
      reads.push(name);
      return Promise.resolve(apiHas(name));
    },
    ...(enrich ? { enrich } : {}),
    ...(now ? { now } : {}),
    ...more,
  });
  return { stacks, updates, alerts, queue, router, reads };
}

describe('Router', () => {
  it('offers a Stack’s events (its Updates’ included) to each Alert that takes them, with that Alert’s metadata', async () => {
    const t = setup();
    t.alerts.set(`${NS}/all`, routed('all', { eventMetadata: { team: 'platform' } }));
    t.alerts.set(`${NS}/successes`, routed('successes', { eventReasons: ['UpdateSucceeded'] }));
    t.alerts.set(`${NS}/failures`, routed('failures', { eventSeverity: 'error' }));
    t.stacks.add(v2FailedStack());
    t.updates.add(update('failed'));
    await t.router.reconcile(`${NS}/app-dev`);

    const byAlert = Object.fromEntries(
      t.queue.offers.map((o) => [o.alert, o.events.map((e) => e.event.reason)]),
    );
    expect(byAlert).toEqual({ all: ['UpdateStarted', 'UpdateFailed'], failures: ['UpdateFailed'] });
    expect(t.queue.offers.every((o) => o.stackUid === STACK_UID)).toBe(true);
    const all = t.queue.offers.find((o) => o.alert === 'all');
    expect(all?.events.every((e) => e.event.metadata.team === 'platform' && e.skip === undefined)).toBe(true);
    expect(
      t.queue.offers.find((o) => o.alert === 'failures')?.events[0]?.event.metadata.team,
    ).toBeUndefined();
  });

  it('a suspended Alert is offered its events marked to be skipped, without copying the Alert', async () => {
    const t = setup();
    const suspended = routed('paused', { suspend: true, eventReasons: ['UpdateFailed'] });
    t.alerts.set(`${NS}/paused`, suspended);
    t.stacks.add(v2FailedStack());
    t.updates.add(update('failed'));
    await t.router.reconcile(`${NS}/app-dev`);
    expect(t.queue.offers).toHaveLength(1);
    expect(t.queue.offers[0]?.events.map((e) => [e.event.reason, e.skip])).toEqual([
      ['UpdateFailed', { reason: 'Suspended', message: 'Alert is suspended' }],
    ]);
    expect(suspended.compiled.spec.suspend).toBe(true);
  });

  it('offers nothing for a Stack no Alert takes, or a Stack it does not know', async () => {
    const t = setup();
    t.alerts.set(`${NS}/other`, routed('other', { eventSources: [{ kind: 'Stack', name: 'web-*' }] }));
    t.stacks.add(v2FailedStack());
    await t.router.reconcile(`${NS}/app-dev`);
    await t.router.reconcile(`${NS}/missing`);
    expect(t.queue.offers).toEqual([]);
  });

  it('enriches only the events some Alert may take (no Secret or log read for uncovered Stacks)', async () => {
    const enriched: string[] = [];
    const t = setup((_stack, ev) => {
      enriched.push(ev.reason);
      return Promise.resolve({ ...ev, message: `${ev.message} (enriched)` });
    });
    t.alerts.set(`${NS}/other`, routed('other', { eventSources: [{ kind: 'Stack', name: 'web-*' }] }));
    t.stacks.add(v2FailedStack());
    t.updates.add(update('failed'));
    await t.router.reconcile(`${NS}/app-dev`);
    expect(enriched).toEqual([]);
    t.alerts.set(`${NS}/failures`, routed('failures', { eventReasons: ['UpdateFailed'] }));
    await t.router.reconcile(`${NS}/app-dev`);
    expect(enriched).toEqual(['UpdateFailed']);
    expect(t.queue.offers.map((o) => o.events.map((e) => e.event.message.endsWith('(enriched)')))).toEqual([
      [true],
    ]);
  });
});

describe('Router: enrichment on behalf of Ready Alerts only (B14)', () => {
  it('B14: an Alert that selects the Stack but is not Ready (only in `selecting`) makes nothing be read', async () => {
    const enriched: string[] = [];
    const t = setup((_stack, ev) => {
      enriched.push(ev.reason);
      return Promise.resolve(ev);
    });
    const waiting = routed('waiting', { eventReasons: ['UpdateFailed'] });
    t.alerts.setSelecting(`${NS}/waiting`, waiting.compiled);
    t.stacks.add(v2FailedStack());
    t.updates.add(update('failed'));
    await t.router.reconcile(`${NS}/app-dev`);
    expect(enriched).toEqual([]);
    expect(t.queue.offers).toEqual([]);
    // Once Ready (allowed), the same event is enriched and offered.
    t.alerts.set(`${NS}/waiting`, waiting);
    await t.router.reconcile(`${NS}/app-dev`);
    expect(enriched).toEqual(['UpdateFailed']);
    expect(t.queue.offers.map((o) => o.alert)).toEqual(['waiting']);
  });
});

describe('Router: a finished run’s commit recorded on its Update', () => {
  it('only for a Stack some Alert served here selects: a shard writes nothing to Stacks it does not serve', async () => {
    const recorded: string[][] = [];
    const t = setup(undefined, () => false, undefined, {
      recordRunCommit: (ns, name, revision, rv) => {
        recorded.push([ns, name, revision, rv]);
        return Promise.resolve();
      },
    });
    // A first run ("Initial stack update" names no commit) that the Stack still names as last.
    const first = update('failed');
    first.metadata.resourceVersion = '41';
    first.spec = { ...first.spec, message: 'Initial stack update' };
    t.stacks.add(v2FailedStack());
    t.updates.add(first);

    await t.router.reconcile(`${NS}/app-dev`);
    t.alerts.set(
      `${NS}/elsewhere`,
      routed('elsewhere', { eventSources: [{ kind: 'Stack', name: 'app-prod' }] }),
    );
    await t.router.reconcile(`${NS}/app-dev`);
    expect(recorded).toEqual([]);

    t.alerts.set(
      `${NS}/dev`,
      routed('dev', { eventSources: [{ kind: 'Stack', name: 'app-*' }], eventSeverity: 'error' }),
    );
    await t.router.reconcile(`${NS}/app-dev`);
    await t.router.reconcile(`${NS}/app-dev`);
    expect(recorded).toEqual([[NS, UPDATE_NAME, SHA, '41']]);
  });

  it('for a Stack an Alert not Ready yet selects (its Provider missing): its runs are delivered once it is', async () => {
    const recorded: string[][] = [];
    const t = setup(undefined, () => false, undefined, {
      recordRunCommit: (ns, name, revision, rv) => {
        recorded.push([ns, name, revision, rv]);
        return Promise.resolve();
      },
    });
    const first = update('failed');
    first.metadata.resourceVersion = '41';
    first.spec = { ...first.spec, message: 'Initial stack update' };
    t.stacks.add(v2FailedStack());
    t.updates.add(first);
    t.alerts.setSelecting(
      `${NS}/prod`,
      routed('prod', { eventSources: [{ kind: 'Stack', name: 'app-prod' }] }).compiled,
    );
    await t.router.reconcile(`${NS}/app-dev`);
    expect(recorded).toEqual([]);

    t.alerts.setSelecting(
      `${NS}/dev`,
      routed('dev', { eventSources: [{ kind: 'Stack', name: 'app-dev' }] }).compiled,
    );
    await t.router.reconcile(`${NS}/app-dev`);
    expect(recorded).toEqual([[NS, UPDATE_NAME, SHA, '41']]);
    expect(t.queue.offers).toEqual([]); // not Ready: nothing offered to it
  });
});

describe('AlertIndex: Alerts selecting before they are Ready', () => {
  it('announces one not Ready when it is new or its generation changed; a Ready one goes through onChange', () => {
    const index = new AlertIndex();
    const heard: string[] = [];
    index.onSelecting((key) => heard.push(key));
    const waiting = routed('waiting', {});
    index.setSelecting(`${NS}/waiting`, waiting.compiled);
    index.setSelecting(`${NS}/waiting`, waiting.compiled); // the same generation again: nothing new
    index.setSelecting(`${NS}/waiting`, { ...waiting.compiled, generation: 2 });
    const ready = routed('ready', {});
    index.set(`${NS}/ready`, ready);
    index.setSelecting(`${NS}/ready`, ready.compiled);
    expect(heard).toEqual([`${NS}/waiting`, `${NS}/waiting`]);
    expect([...index.selecting()].map((c) => c.generation)).toEqual([2, 1]);
    index.setSelecting(`${NS}/waiting`, undefined);
    expect([...index.selecting()]).toHaveLength(1);
  });
});

describe('Router: the Stack ahead of the Update informer', () => {
  const RETRY = 'app-dev-retry';
  /** The failed run's retry (PKO: "Backoff time elapsed"), failed again with the same error. */
  const retry = (): Update => {
    const u = update('failed', 'up', RETRY);
    u.metadata.uid = 'b1c2d3e4-0000-4000-8000-000000000002';
    u.metadata.creationTimestamp = '2026-08-20T11:03:40Z';
    if (u.spec) u.spec.message = 'Backoff time elapsed: 1m0s';
    return u;
  };
  const afterRetry = (): Stack => {
    const s = v2FailedStack();
    if (s.status?.lastUpdate) s.status.lastUpdate = { ...s.status.lastUpdate, name: RETRY, failures: 2 };
    return s;
  };
  const ids = (t: ReturnType<typeof setup>): string[] =>
    t.queue.offers.flatMap((o) => o.events.map((e) => e.event.id.slice(STACK_UID.length + 1)));

  it('a retry its informer has not delivered yet: no fallback event, looked at again; then no new event', async () => {
    const t = setup(undefined, (name) => name === RETRY);
    t.alerts.set(`${NS}/all`, routed('all', {}));
    t.updates.add(update('failed'));
    t.stacks.add(afterRetry());
    // The Stack names the retry; the Update informer has only the first attempt.
    const first = await t.router.reconcile(`${NS}/app-dev`);
    expect(ids(t)).toEqual([`${UPDATE_NAME}/started`, `${UPDATE_NAME}/failed`]);
    expect(first).toEqual({ requeueAfterMs: HELD_FALLBACK_RETRY_MS });
    expect(t.reads).toEqual([RETRY]);
    // The retry arrives: it repeated its run's result, which is no new event (one streak).
    t.updates.add(retry());
    t.queue.offers.length = 0;
    expect(await t.router.reconcile(`${NS}/app-dev`)).toBeUndefined();
    expect(ids(t)).toEqual([`${UPDATE_NAME}/started`, `${UPDATE_NAME}/failed`]);
    expect(t.reads).toEqual([RETRY]);
  });

  it('an Update the API server no longer has: the fallback event is derived, and asked for once', async () => {
    const t = setup(undefined, () => false);
    t.alerts.set(`${NS}/all`, routed('all', {}));
    t.updates.add(update('failed'));
    t.stacks.add(afterRetry());
    expect(await t.router.reconcile(`${NS}/app-dev`)).toBeUndefined();
    expect(ids(t)).toEqual([`${UPDATE_NAME}/started`, `${UPDATE_NAME}/failed`, `${RETRY}/failed`]);
    await t.router.reconcile(`${NS}/app-dev`);
    expect(t.reads).toEqual([RETRY]);
  });

  it('no read when the informer holds the Update, or holds none of the Stack’s (all gone: TTL)', async () => {
    const t = setup(undefined, () => true);
    t.alerts.set(`${NS}/all`, routed('all', {}));
    t.stacks.add(v2FailedStack());
    await t.router.reconcile(`${NS}/app-dev`);
    expect(ids(t)).toEqual([`${UPDATE_NAME}/failed`]);
    t.updates.add(update('failed'));
    await t.router.reconcile(`${NS}/app-dev`);
    expect(t.reads).toEqual([]);
  });
});

describe('Router: an Update ahead of its Stack (PKO names the run in the Stack first)', () => {
  const NEXT = 'app-dev-next';
  /** The run of a new generation: PKO's message names no commit, only the Stack does. */
  const next = (): Update => {
    const u = update('running', 'up', NEXT);
    u.metadata.uid = 'b1c2d3e4-0000-4000-8000-000000000003';
    u.metadata.creationTimestamp = '2026-08-20T12:00:00Z';
    u.metadata.resourceVersion = '501';
    if (u.spec) u.spec.message = 'New stack generation: 4';
    return u;
  };
  const first = (): Update => ({
    ...update('failed'),
    metadata: { ...update('failed').metadata, resourceVersion: '470' },
  });
  /** The Stack as it was before PKO saved currentUpdate for the new run (rv 500). */
  const stale = (): Stack => ({
    ...v2FailedStack(),
    metadata: { ...v2FailedStack().metadata, resourceVersion: '480' },
  });
  const naming = (): Stack => {
    const s = v2RunningStack(NEXT);
    s.metadata.resourceVersion = '500';
    return s;
  };
  const offered = (t: ReturnType<typeof setup>): string[] =>
    t.queue.offers.flatMap((o) =>
      o.events.map((e) => `${e.event.id.slice(STACK_UID.length + 1)} ${e.event.metadata.commit ?? '-'}`),
    );

  /** The first run known, the Stack before PKO named the next run, then that run's Update; a clock to move. */
  const aheadOfStale = () => {
    const clock = { ms: 1_000_000 };
    const t = setup(
      undefined,
      () => true,
      () => clock.ms,
    );
    t.alerts.set(`${NS}/all`, routed('all', {}));
    t.updates.add(first());
    t.stacks.add(stale());
    t.updates.add(next());
    return { t, clock };
  };

  it('waits for the Stack version that names the run, then sends its Started with the commit', async () => {
    const { t, clock } = aheadOfStale();
    const wait = await t.router.reconcile(`${NS}/app-dev`);
    expect(offered(t)).toEqual([`${UPDATE_NAME}/started ${SHA}`, `${UPDATE_NAME}/failed ${SHA}`]);
    expect(wait).toEqual({ requeueAfterMs: STACK_LAG_WAIT_MS });
    clock.ms += 1_000;
    t.queue.offers.length = 0;
    t.stacks.add(naming());
    expect(await t.router.reconcile(`${NS}/app-dev`)).toBeUndefined();
    expect(offered(t)).toContain(`${NEXT}/started ${SHA}`);
  });

  it('a Stack that never names it: the run goes without a commit once the wait is over', async () => {
    const { t, clock } = aheadOfStale();
    expect(await t.router.reconcile(`${NS}/app-dev`)).toEqual({ requeueAfterMs: STACK_LAG_WAIT_MS });
    expect(offered(t).filter((e) => e.startsWith(NEXT))).toEqual([]);
    clock.ms += 10_000;
    expect(await t.router.reconcile(`${NS}/app-dev`)).toEqual({ requeueAfterMs: STACK_LAG_WAIT_MS - 10_000 });
    clock.ms += STACK_LAG_WAIT_MS;
    await t.router.reconcile(`${NS}/app-dev`);
    expect(offered(t).filter((e) => e.startsWith(NEXT))).toEqual([`${NEXT}/started -`]);
  });
});

describe('previewThreadOf (docs/previews.md, "One comment follows the change")', () => {
  const ev = (reason: string) => ({ reason }) as Parameters<typeof previewThreadOf>[1];
  const stack = (meta: Partial<Stack['metadata']>): Stack => ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { namespace: NS, name: 'app', ...meta },
  });
  const previewOwner = [
    {
      apiVersion: 'notification.pko.dev/v1alpha1',
      kind: 'PullRequestPreview',
      name: 'p',
      uid: 'u',
      controller: true,
    },
  ];
  const bases = (ns: string, name: string) => ns === NS && name === 'app';

  it('a preview Stack controlled by a PullRequestPreview takes its base-stack annotation (a DNS label)', () => {
    const annotated = (base: string) =>
      stack({
        name: 'app-pr-7',
        ownerReferences: previewOwner,
        annotations: { 'notification.pko.dev/base-stack': base },
      });
    expect(previewThreadOf(annotated('app'), ev('PreviewSucceeded'), bases)).toEqual({
      baseStack: 'app',
      merged: false,
    });
    expect(previewThreadOf(annotated('../other'), ev('PreviewSucceeded'), bases)).toBeUndefined();
    // Not controlled by a PullRequestPreview: the annotation is ignored (anyone may set it).
    const forged = stack({ name: 'x', annotations: { 'notification.pko.dev/base-stack': 'app' } });
    expect(previewThreadOf(forged, ev('PreviewSucceeded'), bases)).toBeUndefined();
  });

  it("only a base Stack's finished up/destroy results follow the merged pull request", () => {
    for (const r of ['UpdateSucceeded', 'UpdateFailed', 'DestroySucceeded', 'DestroyFailed'])
      expect(previewThreadOf(stack({}), ev(r), bases)).toEqual({ baseStack: 'app', merged: true });
    for (const r of ['UpdateStarted', 'RefreshSucceeded', 'PreviewSucceeded', 'StackStalled'])
      expect(previewThreadOf(stack({}), ev(r), bases)).toBeUndefined();
    expect(previewThreadOf(stack({ name: 'other' }), ev('UpdateSucceeded'), bases)).toBeUndefined();
    expect(previewThreadOf(stack({}), ev('UpdateSucceeded'), undefined)).toBeUndefined();
  });
});

describe('previewGateOf', () => {
  const ev = (reason: string) => ({ reason }) as Parameters<typeof previewGateOf>[1];
  const owner = [
    {
      apiVersion: 'notification.pko.dev/v1alpha1',
      kind: 'PullRequestPreview',
      name: 'p',
      uid: 'u',
      controller: true,
    },
  ];
  const stack = (annotations: Record<string, string>, owned = true): Stack => ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { namespace: NS, name: 'app-pr-1', annotations, ...(owned ? { ownerReferences: owner } : {}) },
  });
  const gate = { 'notification.pko.dev/gate': '{"operations":["delete"]}' };

  it("a preview Stack's preview results carry its gate; a broken annotation is carried as invalid (fails closed)", () => {
    expect(previewGateOf(stack(gate), ev('PreviewSucceeded'))).toEqual({ gate: { operations: ['delete'] } });
    expect(previewGateOf(stack(gate), ev('PreviewFailed'))).toEqual({ gate: { operations: ['delete'] } });
    expect(previewGateOf(stack({ 'notification.pko.dev/gate': 'nope' }), ev('PreviewSucceeded'))).toEqual({
      invalid: 'the gate annotation is not JSON',
    });
  });

  it('nothing for other events, Stacks no PullRequestPreview controls, or no annotation', () => {
    expect(previewGateOf(stack(gate), ev('PreviewStarted'))).toBeUndefined();
    expect(previewGateOf(stack(gate), ev('UpdateSucceeded'))).toBeUndefined();
    expect(previewGateOf(stack(gate, false), ev('PreviewSucceeded'))).toBeUndefined();
    expect(previewGateOf(stack({}), ev('PreviewSucceeded'))).toBeUndefined();
  });
});

describe('supersededBy (N18)', () => {
  const A = 'a'.repeat(40);
  const B = 'b'.repeat(40);
  const owner = [
    {
      apiVersion: 'notification.pko.dev/v1alpha1',
      kind: 'PullRequestPreview',
      name: 'p',
      uid: 'u',
      controller: true,
    },
  ];
  const stack = (commit: string, owned = true): Stack => ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { namespace: NS, name: 'app-pr-1', ...(owned ? { ownerReferences: owner } : {}) },
    spec: { commit },
  });
  const ev = (commit: string) => ({ metadata: { commit } }) as unknown as Parameters<typeof supersededBy>[1];

  it("names the preview Stack's pinned head when the event is about another commit", () => {
    expect(supersededBy(stack(B), ev(A))).toBe(B);
    expect(supersededBy(stack(B), ev(B))).toBeUndefined();
    expect(supersededBy(stack(B.toUpperCase()), ev(B))).toBeUndefined();
  });

  it('nothing for a Stack no PullRequestPreview controls (a branch Stack deploys whatever comes)', () => {
    expect(supersededBy(stack(B, false), ev(A))).toBeUndefined();
    expect(supersededBy(stack('main'), ev(A))).toBeUndefined();
  });
});
