/**
 * The informer against a real kube-apiserver, on ConfigMaps (core group, no CRD needed).
 */
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { Informer } from '../../src/kube/informer.ts';
import { createLogger } from '../../src/log.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { configMaps, rest, type ConfigMap } from './rest.ts';

type CM = ConfigMap;

const informers: Informer<CM>[] = [];
afterEach(async () => {
  await Promise.all(informers.splice(0).map((i) => i.stop()));
});

interface Recorded {
  kind: 'add' | 'update' | 'delete' | 'relist';
  name: string;
  data?: Record<string, string> | undefined;
  oldData?: Record<string, string> | undefined;
}

function newInformer(
  namespace: string,
  extra: Partial<ConstructorParameters<typeof Informer<CM>>[0]> = {},
): { inf: Informer<CM>; events: Recorded[] } {
  const inf = new Informer<CM>({
    name: 'configmaps',
    kubeConfig: kubeConfig('admin'),
    group: '',
    version: 'v1',
    plural: 'configmaps',
    namespace,
    logger: createLogger({ level: 'silent' }),
    backoff: { initialMs: 200, maxMs: 2_000 },
    ...extra,
  });
  const events: Recorded[] = [];
  const name = (o: CM): string => o.metadata?.name ?? '';
  inf.on('add', (o) => events.push({ kind: 'add', name: name(o), data: o.data }));
  inf.on('update', (o, old) =>
    events.push({ kind: 'update', name: name(o), data: o.data, oldData: old.data }),
  );
  inf.on('delete', (o) => events.push({ kind: 'delete', name: name(o), data: o.data }));
  inf.on('relist', () => events.push({ kind: 'relist', name: '' }));
  informers.push(inf);
  return { inf, events };
}

const admin = rest(kubeConfig('admin'));

/** Polls a synchronous condition (via the shared waitFor). */
async function until(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  await waitFor(() => Promise.resolve(cond()), { what, timeoutMs });
}

async function createCM(
  namespace: string,
  name: string,
  data: Record<string, string>,
  labels?: Record<string, string>,
): Promise<void> {
  await admin.create(configMaps(namespace), { metadata: { name, ...(labels ? { labels } : {}) }, data });
}

async function replaceCM(namespace: string, name: string, data: Record<string, string>): Promise<void> {
  await admin.replace(configMaps(namespace, name), { metadata: { name }, data });
}

describe('Informer (ConfigMaps)', () => {
  it('lists in pages, then sees add, update and delete through the watch', async () => {
    const ns = await createTestNamespace('informer-basic');
    for (let i = 0; i < 7; i++) await createCM(ns, `pre-${i}`, { i: String(i) });
    const registry = new Registry();
    const { inf, events } = newInformer(ns, { pageSize: 3, registry });
    inf.start();
    await inf.waitForSync(AbortSignal.timeout(20_000));
    expect(inf.hasSynced()).toBe(true);
    expect(inf.size()).toBe(7);
    expect(
      events
        .filter((e) => e.kind === 'add')
        .map((e) => e.name)
        .sort(),
    ).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => `pre-${i}`));
    expect(events.filter((e) => e.kind === 'relist')).toHaveLength(1);
    // LIST items carry no apiVersion/kind; the informer fills them in from the list.
    expect(inf.get(ns, 'pre-0')).toMatchObject({ apiVersion: 'v1', kind: 'ConfigMap' });
    expect(inf.list(ns)).toHaveLength(7);
    expect(inf.list('other-namespace')).toEqual([]);
    expect(inf.health()).toEqual({ ok: true, message: 'ok' });

    await createCM(ns, 'live', { v: '1' });
    await until(() => events.some((e) => e.kind === 'add' && e.name === 'live'), 'add of live');
    expect(inf.get(ns, 'live')?.data).toEqual({ v: '1' });

    await replaceCM(ns, 'live', { v: '2' });
    await until(() => events.some((e) => e.kind === 'update' && e.name === 'live'), 'update of live');
    expect(events.find((e) => e.kind === 'update')).toEqual({
      kind: 'update',
      name: 'live',
      data: { v: '2' },
      oldData: { v: '1' },
    });

    await admin.delete(configMaps(ns, 'live'));
    await until(() => events.some((e) => e.kind === 'delete' && e.name === 'live'), 'delete of live');
    expect(inf.get(ns, 'live')).toBeUndefined();
    expect(inf.size()).toBe(7);
    expect(await registry.metrics()).toContain('pkonc_informer_objects{informer="configmaps"} 7');
  });

  it('applies transform before caching and before handlers, and honours the label selector', async () => {
    const ns = await createTestNamespace('informer-transform');
    const { inf, events } = newInformer(ns, {
      labelSelector: 'app=watched',
      transform: (cm) => {
        const { big: _big, ...kept } = cm.data ?? {};
        return { ...cm, data: kept };
      },
    });
    await createCM(ns, 'ignored', { x: '1' });
    await createCM(ns, 'kept', { small: 's', big: 'x'.repeat(100_000) }, { app: 'watched' });
    inf.start();
    await inf.waitForSync();
    expect(inf.list().map((c) => c.metadata?.name)).toEqual(['kept']);
    expect(inf.get(ns, 'kept')?.data).toEqual({ small: 's' });
    expect(events[0]).toEqual({ kind: 'add', name: 'kept', data: { small: 's' } });

    await createCM(ns, 'kept-2', { big: 'y', other: 'o' }, { app: 'watched' });
    await until(() => inf.get(ns, 'kept-2') !== undefined, 'kept-2 cached');
    expect(inf.get(ns, 'kept-2')?.data).toEqual({ other: 'o' });
    expect(inf.get(ns, 'ignored')).toBeUndefined();
  });

  it('a handler that throws is logged and does not stop the informer or other handlers', async () => {
    const ns = await createTestNamespace('informer-throw');
    const { inf, events } = newInformer(ns);
    inf.on('add', () => {
      throw new Error('handler bug');
    });
    inf.start();
    await inf.waitForSync();
    await createCM(ns, 'a', {});
    await createCM(ns, 'b', {});
    await until(() => events.filter((e) => e.kind === 'add').length === 2, 'two adds');
    expect(inf.health().ok).toBe(true);
  });

  it('relist emits delete for an object deleted while the watch was down, and nothing for unchanged ones', async () => {
    const ns = await createTestNamespace('informer-relist');
    await createCM(ns, 'stays', { a: '1' });
    await createCM(ns, 'goes', { a: '1' });
    await createCM(ns, 'changes', { a: '1' });
    const { inf, events } = newInformer(ns);
    inf.start();
    await inf.waitForSync();
    expect(inf.size()).toBe(3);

    await inf.stop(); // watch down; the cache is kept
    await admin.delete(configMaps(ns, 'goes'));
    await replaceCM(ns, 'changes', { a: '2' });
    await createCM(ns, 'new', { a: '1' });
    events.length = 0;

    inf.start();
    await inf.relist();
    expect(events.filter((e) => e.kind !== 'relist')).toEqual(
      expect.arrayContaining([
        { kind: 'delete', name: 'goes', data: { a: '1' } },
        { kind: 'update', name: 'changes', data: { a: '2' }, oldData: { a: '1' } },
        { kind: 'add', name: 'new', data: { a: '1' } },
      ]),
    );
    expect(events.filter((e) => e.kind !== 'relist')).toHaveLength(3);
    expect(
      inf
        .list(ns)
        .map((c) => c.metadata?.name)
        .sort(),
    ).toEqual(['changes', 'new', 'stays']);

    // A forced relist with nothing changed emits only 'relist'.
    events.length = 0;
    await inf.relist();
    expect(events).toEqual([{ kind: 'relist', name: '' }]);
  });

  it('marks itself unhealthy while the API denies it, and recovers without a restart', async () => {
    const ns = await createTestNamespace('informer-rbac');
    const rbac = { group: 'rbac.authorization.k8s.io', version: 'v1', namespace: ns };
    await admin.create(
      { ...rbac, plural: 'roles' },
      {
        metadata: { name: 'cm-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch'] }],
      },
    );
    const registry = new Registry();
    const inf = new Informer<CM>({
      name: 'denied',
      // 'viewer' has no grants; 'controller' is bound cluster-wide by other test files.
      kubeConfig: kubeConfig('viewer'),
      group: '',
      version: 'v1',
      plural: 'configmaps',
      namespace: ns,
      logger: createLogger({ level: 'silent' }),
      backoff: { initialMs: 100, maxMs: 500 },
      registry,
    });
    informers.push(inf);
    inf.start();
    await until(() => !inf.health().ok, 'informer unhealthy');
    const unhealthy = inf.health();
    expect(unhealthy.message).toContain('HTTP 403 Forbidden');
    expect(unhealthy.message).toContain(`/api/v1/namespaces/${ns}/configmaps`);
    expect(inf.hasSynced()).toBe(false);

    await admin.create(
      { ...rbac, plural: 'rolebindings' },
      {
        metadata: { name: 'cm-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'viewer' }],
      },
    );
    await inf.waitForSync(AbortSignal.timeout(20_000));
    expect(inf.health()).toEqual({ ok: true, message: 'ok' });
    expect(await registry.metrics()).toMatch(/pkonc_informer_restarts_total\{informer="denied"\} [1-9]/);
  });

  it('waitForSync rejects when its signal aborts; relist rejects when not running', async () => {
    const { inf } = newInformer('no-such-namespace-here');
    await expect(inf.relist()).rejects.toThrow(/not running/);
    const ac = new AbortController();
    const waiting = inf.waitForSync(ac.signal);
    ac.abort(new Error('gave up'));
    await expect(waiting).rejects.toThrow('gave up');
  });
});
