/**
 * B09 — server-side request forgery with response reflection, on the real control plane:
 * metadata and link-local addresses are refused by default (Ready=False before any send),
 * loopback is refused without `--egress-allow-loopback` (the production default) — at connect
 * time, with nothing reaching the endpoint — Secret headers cannot add any header, and an
 * endpoint's answer is never copied into status or Events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';

const SHA = '0123456789abcdef0123456789abcdef01234567';
/** What an internal endpoint might answer: credentials in JSON, an HTML page. */
const METADATA_BODY = JSON.stringify({
  Code: 'Success',
  AccessKeyId: 'ASIAB09REFLECTED',
  SecretAccessKey: 'b09-reflected-secret-access-key',
  Token: 'IQoJb3JpZ2luX2VjEB09',
});

async function eventsOf(obj: Objects): Promise<string> {
  const list = await obj.core.listNamespacedEvent({ namespace: obj.namespace });
  return JSON.stringify(list.items.map((e) => ({ reason: e.reason, message: e.message })));
}

describe('B09: production defaults (no --egress-allow-loopback)', () => {
  let ns: string;
  let obj: Objects;
  let receiver: TestReceiver;
  let ctl: InProcessController;
  beforeAll(async () => {
    ns = await createTestNamespace('b09');
    obj = new Objects(ns);
    receiver = await startReceiver();
    ctl = await startInProcess(ns, {
      allowLoopback: false,
      deps: { retry: { initialMs: 100, maxMs: 300, maxElapsedMs: 2_000 } },
    });
  });
  afterAll(async () => {
    await ctl.stop();
    await receiver.close();
  });

  it('metadata and link-local addresses, in any form, are Ready=False EgressDenied before any send', async () => {
    const addresses = {
      meta: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
      gcp: 'http://metadata.google.internal/computeMetadata/v1/',
      ecs: 'http://169.254.170.2/v2/credentials',
    };
    for (const [name, address] of Object.entries(addresses)) {
      await obj.provider(name, { type: 'generic', address });
    }
    // The decimal form (169.254.169.254 as one number) never gets as far as the egress check: a
    // host whose last label is numeric is not a valid URL host (src/api/url.ts, one truth for the
    // API server and the controller), refused when applied.
    await expect(
      obj.provider('decimal', { type: 'generic', address: 'http://2852039166/latest/meta-data/' }),
    ).rejects.toThrow(/spec\.address must be an http:\/\/ or https:\/\/ URL/);
    // Likewise IPv4-mapped IPv6 (CEL's isIP() refuses it; the controller's parser agrees). A name
    // that resolves to such an address is refused by the egress policy (test/notifier/egress.test.ts).
    await expect(
      obj.provider('mapped', {
        type: 'generic',
        address: 'http://[::ffff:169.254.169.254]/latest/meta-data/',
      }),
    ).rejects.toThrow(
      /the host must be an ASCII name without xn-- labels, an IPv4 address or a valid \[IPv6\] literal/,
    );
    // In a Secret nothing checks the form at admission: a metadata address in decimal, hex or
    // IPv4-mapped form is not a valid URL to our parser, but what the Provider is told is where
    // it leads (EgressDenied, 169.254.169.254), not merely "not a valid http(s) URL".
    const forms = {
      'dec-secret': 'http://2852039166/latest/meta-data/',
      'hex-secret': 'http://0xa9fea9fe/latest/meta-data/',
      'mapped-secret': 'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
    };
    for (const [name, address] of Object.entries(forms)) {
      await obj.secret(name, { address });
      await obj.provider(name, { type: 'generic', secretRef: { name } });
    }
    for (const name of Object.keys(forms)) {
      const c = await obj.waitReady('providers', name, 'False', 'EgressDenied');
      expect(c.message).toMatch(
        /^key 'address' of Secret '[^']+': (169\.254\.169\.254|::ffff:a9fe:a9fe) is link-local/,
      );
      expect(c.message).not.toMatch(/not a valid/);
      expect(c.message).not.toContain('meta-data');
    }
    await obj.secret('hidden', { address: 'http://169.254.169.254/latest/api/token' });
    await obj.provider('hidden', { type: 'generic', secretRef: { name: 'hidden' } });
    for (const name of [...Object.keys(addresses), 'hidden']) {
      const c = await obj.waitReady('providers', name, 'False', 'EgressDenied');
      expect(c.message).toMatch(/the controller does not connect there/);
    }
    const hidden = await obj.get('providers', 'hidden');
    expect(JSON.stringify(hidden.status)).toContain("the Secret's key 'address'");
    expect(JSON.stringify(hidden.status)).not.toContain('/latest/api/token');
  });

  it('Secret headers cannot add any header (metadata, Host)', async () => {
    await obj.secret('h-meta', { headers: 'Metadata-Flavor: Google\n' });
    await obj.provider('h-meta', {
      type: 'generic',
      address: 'https://hooks.example.com/x',
      secretRef: { name: 'h-meta' },
    });
    expect((await obj.waitReady('providers', 'h-meta', 'False', 'InvalidSecret')).message).toMatch(
      /'Metadata-Flavor' may not be set \(it unlocks cloud metadata services\)/,
    );
  });

  it('loopback is refused at connect time: the receiver on 127.0.0.1 gets nothing, the Provider says why', async () => {
    // A name, so the reconciler cannot judge it: the socket's lookup refuses it.
    const url = receiver.url.replace('127.0.0.1', 'localhost');
    await obj.provider('loop', { type: 'generic', address: `${url}/hook` });
    await obj.alert('to-loop', { providerRef: { name: 'loop' }, eventSources: [{ kind: 'Stack' }] });
    await obj.waitReady('alerts', 'to-loop');
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
    const run = await sim.startRun('app', { type: 'up', commit: SHA });
    await sim.finishRun(run, 'succeeded');
    const failed = await waitFor(
      async () =>
        (await obj.get('alerts', 'to-loop')).status?.lastDelivery?.find((d) => d.result === 'Failed'),
      { timeoutMs: 30_000, what: 'a Failed lastDelivery on to-loop' },
    );
    expect(failed.reason).toBe('DeliveryFailed');
    expect(failed.message).toMatch(/localhost resolves to (127\.0\.0\.1|::1), which is loopback/);
    const p = await obj.waitReady('providers', 'loop', 'False', 'EgressDenied');
    expect(p.message).toMatch(/egress policy/);
    expect(receiver.requests).toHaveLength(0);
    expect(await eventsOf(obj)).toMatch(/DeliveryFailed/);
  });
});

describe('B09: answers are never reflected into status or Events (loopback allowed, as in development)', () => {
  it('a 403 with credentials in its body: nothing of it in status, Events or logs', async () => {
    const ns = await createTestNamespace('b09-reflect');
    const obj = new Objects(ns);
    const receiver = await startReceiver();
    receiver.respondWith(Array.from({ length: 50 }, () => ({ status: 403, body: METADATA_BODY })));
    const ctl = await startInProcess(ns, {
      deps: { retry: { initialMs: 100, maxMs: 300, maxElapsedMs: 2_000 } },
    });
    try {
      await obj.provider('hook', { type: 'generic', address: `${receiver.url}/hook` });
      await obj.secret('gitea', { token: 'gitea-token-b09' });
      await obj.provider('forge', {
        type: 'gitea',
        address: `${receiver.url}/acme/app`,
        secretRef: { name: 'gitea' },
      });
      for (const p of ['hook', 'forge']) {
        await obj.alert(`to-${p}`, { providerRef: { name: p }, eventSources: [{ kind: 'Stack' }] });
        await obj.waitReady('alerts', `to-${p}`);
      }
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: `${receiver.url}/acme/app`, branch: 'main' } });
      const run = await sim.startRun('app', { type: 'up', commit: SHA });
      await sim.finishRun(run, 'failed');
      for (const p of ['hook', 'forge']) {
        await waitFor(
          async () =>
            (await obj.get('alerts', `to-${p}`)).status?.lastDelivery?.some((d) => d.result === 'Failed'),
          { timeoutMs: 30_000, what: `a Failed lastDelivery on to-${p}` },
        );
      }
      const statuses = JSON.stringify(
        await Promise.all(['to-hook', 'to-forge'].map((a) => obj.get('alerts', a))),
      );
      const providers = JSON.stringify(
        await Promise.all(['hook', 'forge'].map((p) => obj.get('providers', p))),
      );
      const events = await eventsOf(obj);
      const logs = ctl.logs.lines.join('\n');
      expect(statuses).toMatch(/answered 403 Forbidden/);
      for (const text of [statuses, providers, events, logs]) {
        for (const leak of [
          'ASIAB09REFLECTED',
          'b09-reflected-secret-access-key',
          'IQoJb3JpZ2luX2VjEB09',
          'AccessKeyId',
        ]) {
          expect(text).not.toContain(leak);
        }
      }
    } finally {
      await ctl.stop();
      await receiver.close();
    }
  }, 60_000);
});
