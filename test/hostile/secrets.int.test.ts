/**
 * B05 — secrets that appear inside other values: a token inside a `headers` value, basic-auth
 * credentials, a cookie, credentials and a query token in a Secret-held URL. Endpoints echo the
 * parts (not the whole values) in recognised error messages, which are shown; then logs, Events,
 * status and metrics are scanned for every part and its encoded forms.
 */
import { describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver } from '../support/receiver.ts';

const TOKEN = 'leak-TOKEN-7777';
const BASIC_USER = 'ci-bot-b05';
const BASIC_PASS = 'basic-pass-B05-91';
const COOKIE = 'cookie-secret-B05-x1';
const URL_PASS = 'url-pass-B05-77';
const QUERY_TOKEN = 'query-token-B05-55';
const GITEA_TOKEN = 'gitea-token-B05-3131';

function forms(v: string): string[] {
  return [v, encodeURIComponent(v), Buffer.from(v).toString('base64')];
}

describe('B05: secrets inside other values', () => {
  it('no part of any secret in logs, Events, status or metrics, though endpoints echo them', async () => {
    const ns = await createTestNamespace('b05');
    const obj = new Objects(ns);
    const receiver = await startReceiver();
    const basic = Buffer.from(`${BASIC_USER}:${BASIC_PASS}`).toString('base64');
    // Recognised error shapes (shown in status), each echoing parts of the credentials.
    const echo = JSON.stringify({
      message: `bad credentials: token=${TOKEN} user=${BASIC_USER}:${BASIC_PASS} pass=${BASIC_PASS} session=${COOKIE} pw=${URL_PASS} q=${QUERY_TOKEN} t=${GITEA_TOKEN}`,
    });
    receiver.respondWith(Array.from({ length: 100 }, () => ({ status: 401, body: echo })));
    const ctl = await startInProcess(ns, {
      deps: { retry: { initialMs: 100, maxMs: 300, maxElapsedMs: 1_500 } },
    });
    try {
      // A forge Provider (its answers' recognised messages are shown): its own token, and the
      // bearer token and a cookie in Secret headers.
      await obj.secret('forge', {
        token: GITEA_TOKEN,
        headers: `X-Gateway-Auth: Bearer ${TOKEN}\nCookie: session=${COOKIE}; theme=dark\n`,
      });
      await obj.provider('forge', {
        type: 'gitea',
        address: `${receiver.url}/acme/app`,
        secretRef: { name: 'forge' },
      });
      // The case's values: Secret headers 'Authorization: Bearer leak-TOKEN-7777', on a webhook
      // whose Secret address carries a query token.
      await obj.secret('hook', {
        address: `${receiver.url}/hook?token=${QUERY_TOKEN}`,
        headers: `Authorization: Bearer ${TOKEN}\n`,
      });
      await obj.provider('hook', { type: 'generic', secretRef: { name: 'hook' } });
      // Credentials in a Secret-held URL (fetch refuses to send such a URL: the failure must not show them).
      await obj.secret('urlcreds', {
        address: `http://ci:${URL_PASS}@${receiver.url.slice('http://'.length)}/creds`,
      });
      await obj.provider('urlcreds', { type: 'generic', secretRef: { name: 'urlcreds' } });
      await obj.secret('basic', { headers: `Authorization: Basic ${basic}\n` });
      await obj.provider('basic', {
        type: 'generic',
        address: `${receiver.url}/basic`,
        secretRef: { name: 'basic' },
      });
      await obj.secret('chat', { token: `xoxb-${TOKEN}` });
      await obj.provider('chat', {
        type: 'slack',
        address: `${receiver.url}/api/chat.postMessage`,
        channel: 'ops',
        secretRef: { name: 'chat' },
      });
      for (const p of ['forge', 'hook', 'basic', 'urlcreds', 'chat']) {
        await obj.alert(`to-${p}`, { providerRef: { name: p }, eventSources: [{ kind: 'Stack' }] });
        await obj.waitReady('alerts', `to-${p}`);
      }
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: `${receiver.url}/acme/app`, branch: 'main' } });
      const run = await sim.startRun('app', {
        type: 'up',
        commit: '0123456789abcdef0123456789abcdef01234567',
      });
      await sim.finishRun(run, 'failed', { message: 'up failed\nerror: auth failed' });
      for (const p of ['forge', 'hook', 'basic', 'urlcreds', 'chat']) {
        await waitFor(
          async () =>
            (await obj.get('alerts', `to-${p}`)).status?.lastDelivery?.some((d) => d.result === 'Failed'),
          { timeoutMs: 30_000, what: `a Failed lastDelivery on to-${p}` },
        );
      }
      // The secrets were really sent (so a leak would have had something to leak).
      const auth = receiver.requests.map((q) => q.headers.authorization ?? '');
      expect(auth).toContain(`Bearer ${TOKEN}`);
      expect(auth).toContain(`Basic ${basic}`);
      expect(receiver.requests.some((q) => q.headers['x-gateway-auth'] === `Bearer ${TOKEN}`)).toBe(true);
      expect(receiver.requests.some((q) => q.path.includes(QUERY_TOKEN))).toBe(true);

      const logs = ctl.logs.lines.join('\n');
      const events = JSON.stringify(
        (await obj.core.listNamespacedEvent({ namespace: ns })).items.map((e) => ({
          reason: e.reason,
          message: e.message,
        })),
      );
      const statuses = JSON.stringify(
        await Promise.all([
          ...['forge', 'hook', 'basic', 'urlcreds', 'chat'].map((p) => obj.get('providers', p)),
          ...['forge', 'hook', 'basic', 'urlcreds', 'chat'].map((p) => obj.get('alerts', `to-${p}`)),
        ]),
      );
      const metrics = await (await fetch(`http://127.0.0.1:${ctl.handle.metricsPort}/metrics`)).text();
      // The scan looks at real failure text: the recognised echo was shown, redacted.
      expect(statuses).toContain('The endpoint said: bad credentials: token=[redacted]');
      expect(events).toMatch(/DeliveryFailed/);
      expect(metrics).toContain('pkonc_deliveries_total');
      const parts = [
        TOKEN,
        `${BASIC_USER}:${BASIC_PASS}`,
        BASIC_PASS,
        COOKIE,
        URL_PASS,
        QUERY_TOKEN,
        GITEA_TOKEN,
      ];
      for (const s of parts) {
        for (const f of forms(s)) {
          expect(logs, `log contains ${s}`).not.toContain(f);
          expect(events, `Events contain ${s}`).not.toContain(f);
          expect(statuses, `status contains ${s}`).not.toContain(f);
          expect(metrics, `metrics contain ${s}`).not.toContain(f);
        }
      }
    } finally {
      await ctl.stop();
      await receiver.close();
    }
  }, 60_000);
});
