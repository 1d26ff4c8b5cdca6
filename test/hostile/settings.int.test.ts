/**
 * B07 — settings that cannot work: refused at apply time by the CRD (CEL) where the API server
 * can judge them, else `Ready=False` with a reason that says what to change; no send is ever
 * attempted with them, and the logs stay JSON.
 */
import { ApiException, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';
import { GROUP, Objects, VERSION, startInProcess, type InProcessController } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';

let ns: string;
let obj: Objects;
let custom: CustomObjectsApi;
let seq = 0;

beforeAll(async () => {
  ns = await createTestNamespace('b07');
  obj = new Objects(ns);
  custom = kubeConfig('admin').makeApiClient(CustomObjectsApi);
});

/** The API server's refusal of a Provider with `spec` (dry run), as code and message. */
async function refused(spec: object): Promise<{ code: number; message: string }> {
  try {
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'providers',
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Provider', metadata: { name: `p${++seq}` }, spec },
      dryRun: 'All',
    });
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const raw: unknown = err.body;
    const status = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { message?: string };
    return { code: err.code, message: status.message ?? '' };
  }
  throw new Error(`expected the API server to refuse ${JSON.stringify(spec)}`);
}

describe('B07: refused at apply time (CRD validation)', () => {
  it.each(['0s', '0.0001ms', '1000h', '10000000h', '999ms', '6m'])('timeout %s', async (timeout) => {
    const r = await refused({ type: 'generic', address: 'https://hooks.example.com/x', timeout });
    expect(r.code).toBe(422);
    expect(r.message).toContain('spec.timeout must be a duration from 1s to 5m');
  });

  it.each([
    ['generic', 'https://hooks.example.com:0/x', 'spec.address has a port outside 1 to 65535'],
    ['generic', 'http://hooks.example.com:65536/x', 'spec.address has a port outside 1 to 65535'],
    ['gitea', 'ssh://git@git.example.com:0/acme/app', 'spec.address has a port outside 1 to 65535'],
  ])('%s address %s', async (type, address, message) => {
    const r = await refused({ type, address });
    expect(r.code).toBe(422);
    expect(r.message).toContain(message);
  });

  it('apiURL with port 0', async () => {
    const r = await refused({
      type: 'gitea',
      address: 'https://git.example.com/acme/app',
      apiURL: 'https://git.example.com:0/api/v1',
    });
    expect(r.message).toContain('spec.apiURL has a port outside 1 to 65535');
  });

  it('the boundaries are accepted', async () => {
    for (const timeout of ['1s', '5m', '1000ms', '4m59s']) {
      await obj.provider(`ok-${String(++seq)}`, {
        type: 'generic',
        address: 'https://hooks.example.com:65535/x',
        timeout,
      });
    }
  });
});

describe('B07: what only the controller can judge is Ready=False, and nothing is sent', () => {
  let receiver: TestReceiver;
  let ctl: InProcessController;
  beforeAll(async () => {
    receiver = await startReceiver();
    ctl = await startInProcess(ns);
  });
  afterAll(async () => {
    await ctl.stop();
    await receiver.close();
  });

  it('a CRLF header value, a Content-Length override, a port 0 in the Secret address', async () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      [
        'crlf',
        { headers: 'X-Team: "platform\\r\\nX-Injected: yes"\n' },
        /the value of header 'X-Team' contains a line break \(CR or LF\), which HTTP forbids .*: write it on one line/,
      ],
      [
        'length',
        { headers: 'Content-Length: "0"\n' },
        /header 'Content-Length' may not be set .*: remove it/,
      ],
      ['host', { headers: 'Host: kubernetes.default.svc\n' }, /header 'Host' may not be set/],
    ];
    for (const [name, data] of cases) {
      await obj.secret(`s-${name}`, data);
      await obj.provider(`p-${name}`, {
        type: 'generic',
        address: `${receiver.url}/${name}`,
        secretRef: { name: `s-${name}` },
      });
      await obj.alert(`a-${name}`, { providerRef: { name: `p-${name}` }, eventSources: [{ kind: 'Stack' }] });
    }
    await obj.secret('s-port', { address: 'http://127.0.0.1:0/hook' });
    await obj.provider('p-port', { type: 'generic', secretRef: { name: 's-port' } });
    await obj.alert('a-port', { providerRef: { name: 'p-port' }, eventSources: [{ kind: 'Stack' }] });

    for (const [name, , why] of cases) {
      const c = await obj.waitReady('providers', `p-${name}`, 'False', 'InvalidSecret');
      expect(c.message).toMatch(why);
    }
    const port = await obj.waitReady('providers', 'p-port', 'False', 'InvalidAddress');
    expect(port.message).toMatch(
      /key 'address' of Secret .*: port 0 cannot be connected to: use a port from 1 to 65535/,
    );

    // An event for every Alert: none is sent (the Providers are not usable), nothing crashes.
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
    const run = await sim.startRun('app', { type: 'up', commit: '0123456789abcdef0123456789abcdef01234567' });
    await sim.finishRun(run, 'succeeded');
    await new Promise((r) => setTimeout(r, 3_000));
    expect(receiver.requests).toHaveLength(0);
    expect(ctl.handle.dispatcher.pendingCount).toBeGreaterThan(0); // held, not lost: fixing the Secret sends them

    // Logs stay JSON: every line parses, whatever the Secrets held.
    expect(ctl.logs.lines.length).toBeGreaterThan(0);
    for (const line of ctl.logs.lines) expect(() => JSON.parse(line) as unknown, line).not.toThrow();
    expect(ctl.logs.lines.join('\n')).not.toContain('X-Injected');

    // Fixing a Secret makes the Provider usable and the held event goes out.
    await obj.core.replaceNamespacedSecret({
      namespace: ns,
      name: 's-crlf',
      body: { metadata: { name: 's-crlf' }, stringData: { headers: 'X-Team: platform\n' } },
    });
    await obj.waitReady('providers', 'p-crlf', 'True');
    await new Promise((r) => setTimeout(r, 100));
    const deadline = Date.now() + 20_000;
    while (!receiver.requests.some((q) => q.path === '/crlf') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const sent = receiver.requests.filter((q) => q.path === '/crlf');
    expect(sent.length).toBeGreaterThan(0);
    expect(sent[0]?.headers['x-team']).toBe('platform');
  }, 60_000);
});
