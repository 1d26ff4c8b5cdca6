/**
 * F08 on the real control plane: an HTTPS endpoint on a private CA. Without `certSecretRef` the
 * send fails TLS verification: the Provider turns Ready=False with reason CertificateError, the
 * event is kept and retried; once the CA Secret is referenced it is delivered exactly once.
 */
import { describe, expect, it } from 'vitest';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { kubeConfig, createTestNamespace, waitFor } from '../support/cluster.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver } from '../support/receiver.ts';
import { makeTestPKI } from '../support/pki.ts';
import { GROUP, Objects, VERSION, startInProcess } from '../support/controller.ts';

describe('F08: private CA', () => {
  it('Ready=False with a certificate reason, nothing lost, delivered once after the CA is added', async () => {
    const pki = await makeTestPKI();
    const receiver = await startReceiver({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    const ns = await createTestNamespace('f08');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns);
    try {
      await obj.provider('hook', { type: 'generic', address: `${receiver.url}/hook` });
      await obj.alert('all', {
        providerRef: { name: 'hook' },
        eventSources: [{ kind: 'Stack' }],
        eventReasons: ['UpdateSucceeded'],
      });
      await obj.waitReady('alerts', 'all');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const run = await sim.startRun('app', {
        type: 'up',
        commit: 'c0ffee0000000000000000000000000000c0ffee',
      });
      await sim.finishRun(run, 'succeeded');

      const c = await obj.waitReady('providers', 'hook', 'False', 'CertificateError');
      expect(c.message).toMatch(/certSecretRef/);
      expect(receiver.requests).toHaveLength(0); // the TLS handshake failed: nothing was accepted

      await obj.secret('ca', { 'ca.crt': pki.caPem });
      await obj.custom.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: 'providers',
          name: 'hook',
          body: { spec: { certSecretRef: { name: 'ca' } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await waitFor(() => Promise.resolve(receiver.requests.length >= 1), {
        timeoutMs: 30_000,
        what: 'delivery over TLS after the CA was added',
      });
      await obj.waitReady('providers', 'hook', 'True');
      await new Promise((r) => setTimeout(r, 1500));
      expect(receiver.requests).toHaveLength(1);
      expect((JSON.parse(receiver.requests[0]!.body) as { reason: string }).reason).toBe('UpdateSucceeded');
    } finally {
      await ctl.stop();
      await receiver.close();
    }
  }, 60_000);
});
