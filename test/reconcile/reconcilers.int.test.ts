/**
 * Provider and Alert reconcilers against the real API server, with the controller running as a
 * non-admin user bound to the shipped RBAC rules in config/rbac/ (so the list is tested too).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { ControllerHandle } from '../../src/controller.ts';
import { startInProcess } from '../support/controller.ts';
import type { Condition } from '../../src/api/meta.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';

const GROUP = 'notification.pko.dev';
const VERSION = 'v1alpha1';

let admin: KubeConfig;
let custom: CustomObjectsApi;
let core: CoreV1Api;

async function startFor(namespace: string, extraFlags: string[] = []): Promise<ControllerHandle> {
  return (await startInProcess(namespace, { flags: extraFlags, logLevel: 'silent' })).handle;
}

async function readyCondition(
  plural: 'providers' | 'alerts',
  namespace: string,
  name: string,
): Promise<{
  c: Condition | undefined;
  observedGeneration: number | undefined;
  generation: number | undefined;
}> {
  const obj = (await custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural,
    name,
  })) as {
    metadata: { generation?: number };
    status?: { observedGeneration?: number; conditions?: Condition[] };
  };
  return {
    c: obj.status?.conditions?.find((c) => c.type === 'Ready'),
    observedGeneration: obj.status?.observedGeneration,
    generation: obj.metadata.generation,
  };
}

async function waitReady(
  plural: 'providers' | 'alerts',
  namespace: string,
  name: string,
  status: 'True' | 'False',
  reason?: string,
): Promise<Condition> {
  return waitFor(
    async () => {
      const r = await readyCondition(plural, namespace, name);
      return r.c?.status === status &&
        (reason === undefined || r.c.reason === reason) &&
        r.observedGeneration === r.generation
        ? r.c
        : undefined;
    },
    {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: `${plural} ${namespace}/${name} Ready=${status}${reason ? ` (${reason})` : ''}`,
    },
  );
}

function create(
  plural: 'providers' | 'alerts',
  namespace: string,
  name: string,
  spec: object,
): Promise<unknown> {
  return custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: plural === 'providers' ? 'Provider' : 'Alert',
      metadata: { name },
      spec,
    },
  });
}

beforeAll(() => {
  admin = kubeConfig('admin');
  custom = admin.makeApiClient(CustomObjectsApi);
  core = admin.makeApiClient(CoreV1Api);
});

describe('Provider reconciler', () => {
  let ns: string;
  let ctl: ControllerHandle;
  beforeAll(async () => {
    ns = await createTestNamespace('provider');
    ctl = await startFor(ns);
  });
  afterAll(async () => ctl.stop());

  it('reports SecretNotFound naming the Secret, then turns Ready when the Secret appears (no restart)', async () => {
    await create('providers', ns, 'hook', {
      type: 'generic',
      address: 'https://hooks.example.test/x',
      secretRef: { name: 'hook-creds' },
    });
    const c = await waitReady('providers', ns, 'hook', 'False', 'SecretNotFound');
    expect(c.message).toContain(`Secret '${ns}/hook-creds'`);
    // A Warning Event says the same on the Provider.
    const events = await waitFor(
      async () => {
        const list = await core.listNamespacedEvent({ namespace: ns });
        const e = list.items.find((i) => i.involvedObject.name === 'hook' && i.reason === 'SecretNotFound');
        return e;
      },
      { timeoutMs: 10_000, intervalMs: 100, what: 'SecretNotFound Event' },
    );
    expect(events.type).toBe('Warning');
    expect(events.involvedObject.kind).toBe('Provider');

    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'hook-creds' }, stringData: { token: 'x-token-value\n' } },
    });
    const ready = await waitReady('providers', ns, 'hook', 'True', 'Succeeded');
    expect(ready.observedGeneration).toBeGreaterThan(0);
    await waitFor(() => Promise.resolve(ctl.providers.get(`${ns}/hook`)?.token === 'x-token-value'), {
      timeoutMs: 5000,
      intervalMs: 50,
      what: 'resolved provider with trimmed token',
    });
  });

  it('F10: username without password is refused naming the missing key; password + spec.username is accepted', async () => {
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'user-only' }, stringData: { username: 'bot' } },
    });
    await create('providers', ns, 'gl-user-only', {
      type: 'gitlab',
      address: 'https://gitlab.example.test/g/p',
      secretRef: { name: 'user-only' },
    });
    const c = await waitReady('providers', ns, 'gl-user-only', 'False', 'MissingSecretKey');
    expect(c.message).toContain("no key 'password'");

    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'pass-only' }, stringData: { password: 's3cret-pass' } },
    });
    await create('providers', ns, 'bbs', {
      type: 'bitbucketserver',
      address: 'https://bitbucket.example.test/scm/prj/repo.git',
      username: 'ci-bot',
      secretRef: { name: 'pass-only' },
    });
    await waitReady('providers', ns, 'bbs', 'True');
    const resolved = await waitFor(() => Promise.resolve(ctl.providers.get(`${ns}/bbs`)), {
      timeoutMs: 5000,
      intervalMs: 50,
      what: 'bbs resolved',
    });
    expect(resolved.username).toBe('ci-bot');
    expect(resolved.password).toBe('s3cret-pass');
  });

  it('F24: a retired Office 365 connector URL is refused with what to use instead', async () => {
    await create('providers', ns, 'teams', {
      type: 'msteams',
      address: 'https://acme.webhook.office.com/webhookb2/abc',
    });
    const c = await waitReady('providers', ns, 'teams', 'False', 'RetiredEndpoint');
    expect(c.message).toMatch(/Workflows/);
  });

  it('a certSecretRef without a PEM ca.crt is InvalidCertificate; fixing the Secret makes it Ready', async () => {
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'bad-ca' }, stringData: { 'ca.crt': 'not a certificate' } },
    });
    await create('providers', ns, 'ghe', {
      type: 'generic',
      address: 'https://hooks.example.test/y',
      certSecretRef: { name: 'bad-ca' },
    });
    const c = await waitReady('providers', ns, 'ghe', 'False', 'InvalidCertificate');
    expect(c.message).toContain("'ca.crt'");
  });

  it('does not rewrite status when nothing changed (no write storm on relist)', async () => {
    await create('providers', ns, 'stable', { type: 'generic', address: 'https://hooks.example.test/z' });
    await waitReady('providers', ns, 'stable', 'True');
    const obj1 = (await custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'providers',
      name: 'stable',
    })) as { metadata: { resourceVersion: string } };
    await new Promise((r) => setTimeout(r, 1500));
    const obj2 = (await custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'providers',
      name: 'stable',
    })) as { metadata: { resourceVersion: string } };
    expect(obj2.metadata.resourceVersion).toBe(obj1.metadata.resourceVersion);
  });

  it('serves /healthz, /readyz and /metrics', async () => {
    await waitFor(() => Promise.resolve(ctl.ready().ok), {
      timeoutMs: 10_000,
      intervalMs: 100,
      what: 'controller ready',
    });
    const base = `http://127.0.0.1:${ctl.probePort}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.metricsPort}/metrics`)).text();
    expect(metrics).toContain('pkonc_informer_objects');
  });
});

describe('Alert reconciler', () => {
  let ns: string;
  let ctl: ControllerHandle;
  beforeAll(async () => {
    ns = await createTestNamespace('alert');
    ctl = await startFor(ns);
  });
  afterAll(async () => ctl.stop());

  it('reports ProviderNotFound, then Ready when the Provider is created', async () => {
    await create('alerts', ns, 'a1', {
      providerRef: { name: 'later' },
      eventSources: [{ kind: 'Stack', name: '*' }],
    });
    const c = await waitReady('alerts', ns, 'a1', 'False', 'ProviderNotFound');
    expect(c.message).toContain(`Provider '${ns}/later'`);
    await create('providers', ns, 'later', { type: 'generic', address: 'https://hooks.example.test/a' });
    await waitReady('alerts', ns, 'a1', 'True');
    expect(ctl.alertIndex.get(`${ns}/a1`)).toBeDefined();
  });

  it('reports TemplateNotFound, then InvalidTemplate with the line for a typo, then Ready when fixed — each as the ConfigMap changes, with no change to the Alert', async () => {
    await create('alerts', ns, 'tpl', {
      providerRef: { name: 'later' },
      eventSources: [{ kind: 'Stack' }],
      templateRef: { name: 'alert-templates' },
    });
    await waitReady('alerts', ns, 'tpl', 'False', 'TemplateNotFound');
    // The ConfigMap is watched: creating it is enough (no Alert change; waitReady's 20 s is
    // well under the 60 s poll this replaced).
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: { name: 'alert-templates' },
        data: { message: 'Stack {{stackName}}\nresult: {{stak}}\n' },
      },
    });
    const c = await waitReady('alerts', ns, 'tpl', 'False', 'InvalidTemplate');
    expect(c.message).toContain("template 'message'");
    expect(c.message).toContain('line 2');
    expect(c.message).toContain('stak');
    await core.replaceNamespacedConfigMap({
      namespace: ns,
      name: 'alert-templates',
      body: { metadata: { name: 'alert-templates' }, data: { message: 'Stack {{stackName}}: {{reason}}' } },
    });
    await waitReady('alerts', ns, 'tpl', 'True');
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'alert-templates' });
    await waitReady('alerts', ns, 'tpl', 'False', 'TemplateNotFound');
    expect(ctl.alertIndex.get(`${ns}/tpl`)).toBeUndefined();
  });

  it('records a new Warning Event when the Ready message changes under the same reason, and none for an identical repeat', async () => {
    const warnings = async (): Promise<{ reason?: string; message?: string; count?: number }[]> =>
      (
        await core.listNamespacedEvent({
          namespace: ns,
          fieldSelector: 'involvedObject.kind=Alert,involvedObject.name=msg',
        })
      ).items.filter((e) => e.type === 'Warning');
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'msg-templates' }, data: { message: 'result: {{stak}}\n' } },
    });
    await create('alerts', ns, 'msg', {
      providerRef: { name: 'later' },
      eventSources: [{ kind: 'Stack' }],
      templateRef: { name: 'msg-templates' },
    });
    const first = await waitReady('alerts', ns, 'msg', 'False', 'InvalidTemplate');
    expect(first.message).toContain('stak');
    await waitFor(async () => ((await warnings()).length === 1 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the first InvalidTemplate Event',
    });
    // Same reason, another message: a second Event, so `kubectl describe` shows the new advice.
    await core.replaceNamespacedConfigMap({
      namespace: ns,
      name: 'msg-templates',
      body: { metadata: { name: 'msg-templates' }, data: { message: 'ok\nresult: {{reasn}}\n' } },
    });
    const second = await waitFor(
      async () => {
        const r = await readyCondition('alerts', ns, 'msg');
        return r.c?.reason === 'InvalidTemplate' && r.c.message.includes('reasn') ? r.c : undefined;
      },
      { timeoutMs: 20_000, what: 'the second InvalidTemplate message' },
    );
    const events = await waitFor(
      async () => {
        const w = await warnings();
        return w.some((e) => e.message === second.message) ? w : undefined;
      },
      { timeoutMs: 20_000, what: 'an Event with the second message' },
    );
    expect(events.map((e) => e.reason)).toEqual(['InvalidTemplate', 'InvalidTemplate']);
    expect(events.map((e) => e.message).sort()).toEqual([first.message, second.message].sort());
    // An unchanged condition records nothing more (a relist reconciles it again).
    await new Promise((r) => setTimeout(r, 2_000));
    expect((await warnings()).map((e) => e.count ?? 1)).toEqual([1, 1]);
  });

  it('reports InvalidRegex naming the pattern, and routes nothing with it', async () => {
    await create('alerts', ns, 'bad-re', {
      providerRef: { name: 'later' },
      eventSources: [{ kind: 'Stack' }],
      inclusionList: ['(unclosed'],
    });
    const c = await waitReady('alerts', ns, 'bad-re', 'False', 'InvalidRegex');
    expect(c.message).toContain('(unclosed');
    expect(ctl.alertIndex.get(`${ns}/bad-re`)).toBeUndefined();
  });
});

describe('F18: cross-namespace sources', () => {
  it('an Alert selecting namespace "*" is Ready=False when cross-namespace refs are forbidden', async () => {
    const ns = await createTestNamespace('xns');
    const ctl = await startFor(ns, ['--no-cross-namespace-refs']);
    try {
      await create('providers', ns, 'p', { type: 'generic', address: 'https://hooks.example.test/a' });
      await create('alerts', ns, 'all-ns', {
        providerRef: { name: 'p' },
        eventSources: [{ kind: 'Stack', name: '*', namespace: '*' }],
      });
      const c = await waitReady('alerts', ns, 'all-ns', 'False', 'CrossNamespaceForbidden');
      expect(c.message).toMatch(/cross-namespace/i);
    } finally {
      await ctl.stop();
    }
  });
});
