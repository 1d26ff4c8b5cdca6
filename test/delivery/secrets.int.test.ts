/**
 * F23 — secret hygiene. Known token, HMAC key and webhook URL values are configured, deliveries
 * fail with 401 and 500 (the receivers even echo the request back), and then logs, Kubernetes
 * Events, object status, metric labels and error messages are scanned for those values.
 */
import { describe, expect, it } from 'vitest';
import { kubeConfig, createTestNamespace, waitFor } from '../support/cluster.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver } from '../support/receiver.ts';
import { Objects, startInProcess } from '../support/controller.ts';

const TOKEN = 'ghp_F23secretTokenValue0123456789abcdef';
const HMAC_KEY = 'hmac-F23-secret-signing-key-9876';
const WEBHOOK_PATH = '/services/T0F23/B0F23/XXXXsecretWEBHOOKpath';
const HEADER_SECRET = 'Bearer f23-header-secret-value';

function forms(v: string): string[] {
  return [v, encodeURIComponent(v), Buffer.from(v).toString('base64')];
}

describe('F23: secret hygiene', () => {
  it('no token, HMAC key or webhook URL in logs, Events, status, metrics or error messages', async () => {
    const ns = await createTestNamespace('f23');
    const obj = new Objects(ns);
    const failing401 = await startReceiver();
    const failing500 = await startReceiver();
    const echo = (status: number) =>
      Array.from({ length: 200 }, () => ({
        status,
        body: `denied: token=${TOKEN} key=${HMAC_KEY} url=${WEBHOOK_PATH} auth=${HEADER_SECRET}`,
      }));
    failing401.respondWith(echo(401));
    failing500.respondWith(echo(500));
    const webhookURL = `${failing500.url}${WEBHOOK_PATH}`;
    const secrets = [TOKEN, HMAC_KEY, webhookURL, WEBHOOK_PATH, HEADER_SECRET];
    const ctl = await startInProcess(ns, {
      deps: { retry: { initialMs: 100, maxMs: 300, maxElapsedMs: 1500 } },
    });
    try {
      await obj.secret('hmac', { token: HMAC_KEY, headers: `Authorization: ${HEADER_SECRET}\n` });
      await obj.provider('signed', {
        type: 'generic-hmac',
        address: `${failing401.url}/signed`,
        secretRef: { name: 'hmac' },
      });
      await obj.secret('hook-url', { address: webhookURL });
      await obj.provider('hook', { type: 'generic', secretRef: { name: 'hook-url' } });
      await obj.secret('gh', { token: `${TOKEN}\n` });
      await obj.provider('gh', {
        type: 'github',
        address: `${failing401.url}/acme/app`,
        secretRef: { name: 'gh' },
      });
      await obj.secret('slack', { address: `https://hooks.slack.example${WEBHOOK_PATH}` });
      await obj.provider('slack', { type: 'slack', secretRef: { name: 'slack' } });
      for (const p of ['signed', 'hook', 'gh', 'slack']) {
        await obj.alert(`to-${p}`, { providerRef: { name: p }, eventSources: [{ kind: 'Stack' }] });
        await obj.waitReady('alerts', `to-${p}`);
      }
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: `${failing401.url}/acme/app`, branch: 'main' } });
      const run = await sim.startRun('app', {
        type: 'up',
        commit: '0123456789abcdef0123456789abcdef01234567',
      });
      await sim.finishRun(run, 'failed', { message: `up failed\nstderr: error: auth failed` });

      // Every Alert ends with a final failure recorded in its status.
      for (const p of ['signed', 'hook', 'gh', 'slack']) {
        await waitFor(
          async () =>
            (await obj.get('alerts', `to-${p}`)).status?.lastDelivery?.some((d) => d.result === 'Failed'),
          { timeoutMs: 30_000, what: `a Failed lastDelivery on to-${p}` },
        );
      }
      expect(failing401.requests.length).toBeGreaterThan(0);
      expect(failing500.requests.length).toBeGreaterThan(0);

      const logs = ctl.logs.lines.join('\n');
      const eventsList = await obj.core.listNamespacedEvent({ namespace: ns });
      const events = JSON.stringify(
        eventsList.items.map((e) => ({ reason: e.reason, message: e.message, note: e.involvedObject })),
      );
      const statuses = JSON.stringify(
        await Promise.all([
          ...['signed', 'hook', 'gh', 'slack'].map((p) => obj.get('providers', p)),
          ...['signed', 'hook', 'gh', 'slack'].map((p) => obj.get('alerts', `to-${p}`)),
        ]),
      );
      const metrics = await (await fetch(`http://127.0.0.1:${ctl.handle.metricsPort}/metrics`)).text();

      // The scan must look at real failure text, not empty strings.
      expect(logs).toMatch(/answered 401|answered 500/);
      expect(events).toMatch(/DeliveryFailed|RetriesExhausted|NotImplemented/);
      expect(statuses).toMatch(/"result":"Failed"/);
      expect(metrics).toContain('pkonc_deliveries_total');
      for (const s of secrets) {
        for (const f of forms(s)) {
          expect(logs, `log contains ${s}`).not.toContain(f);
          expect(events, `Events contain ${s}`).not.toContain(f);
          expect(statuses, `status contains ${s}`).not.toContain(f);
          expect(metrics, `metrics contain ${s}`).not.toContain(f);
        }
      }
    } finally {
      await ctl.stop();
      await failing401.close();
      await failing500.close();
    }
  }, 60_000);
});
