/**
 * Case N16 end to end on the real control plane: PKO's clocks never decide order or eligibility.
 * PKO v2: run 2 fails, PKO's clock jumps 10 minutes back, and the retry Update (smaller hex name,
 * earlier times) succeeds — its UpdateSucceeded is delivered. PKO v1: PKO's clock is 10 minutes
 * behind when a new Alert is created and the next run happens — that run is delivered, not
 * skipped as BeforeAlert. The in-process controller sends to a generic webhook receiver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';

const GIT = { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } };
const [C1, C2] = ['1'.repeat(40), '2'.repeat(40)];
const TEN_MINUTES = 600_000;

let receiver: TestReceiver;
let ctl: InProcessController;
let ns: string;
let obj: Objects;

beforeAll(async () => {
  receiver = await startReceiver();
  ns = await createTestNamespace('n16');
  obj = new Objects(ns);
  ctl = await startInProcess(ns);
}, 60_000);
afterAll(async () => {
  await ctl.stop();
  await receiver.close();
});

/** `reason stack` of every delivered event, in arrival order. */
const delivered = (): string[] =>
  receiver.requests.map((r) => {
    const b = JSON.parse(r.body) as { reason: string; involvedObject: { name: string } };
    return `${b.reason} ${b.involvedObject.name}`;
  });
const arrived = (what: string): Promise<true> =>
  waitFor(() => Promise.resolve(delivered().includes(what) ? (true as const) : undefined), {
    timeoutMs: 30_000,
    what,
  });

describe('N16', () => {
  it('PKO v2: after PKO’s clock jumps back, the retry’s UpdateSucceeded is delivered', async () => {
    await obj.secret('hook-v2', { address: `${receiver.url}/v2` });
    await obj.provider('hook-v2', { type: 'generic', secretRef: { name: 'hook-v2' } });
    await obj.alert('v2', {
      providerRef: { name: 'hook-v2' },
      eventSources: [{ kind: 'Stack', name: 'web' }],
    });
    await obj.waitReady('alerts', 'v2');
    let pkoNow = Date.now();
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2', clock: { now: () => pkoNow } });
    await sim.createStack('web', GIT);
    const run1 = await sim.startRun('web', { type: 'up', commit: C1 });
    await arrived('UpdateStarted web');
    await sim.finishRun(run1, 'succeeded');
    await arrived('UpdateSucceeded web');
    pkoNow = Date.now();
    const run2 = await sim.startRun('web', { type: 'up', commit: C2 });
    await sim.finishRun(run2, 'failed', { message: 'error: boom' });
    await arrived('UpdateFailed web');
    // PKO retries after its backoff (≥ seconds): the API server stamps the retry's creation a
    // later second than run 2's (creationTimestamp has 1 s resolution).
    const run2Created = (await sim.listUpdates('web')).find((u) => u.metadata.name === run2.name)?.metadata
      .creationTimestamp;
    await waitFor(
      () =>
        Promise.resolve(
          new Date().toISOString().slice(0, 19) > String(run2Created).slice(0, 19) || undefined,
        ),
      { timeoutMs: 5_000, intervalMs: 50, what: 'the next second' },
    );
    // PKO's clock jumps back: the retry's name (and times) sort before run 2's.
    pkoNow = Date.now() - TEN_MINUTES;
    const retryName = `web-${pkoNow.toString(16)}`;
    expect(retryName < run2.name).toBe(true);
    const retry = await sim.startRun('web', { type: 'up', commit: C2, name: retryName });
    expect(retry.message).toMatch(/^Backoff time elapsed/);
    await sim.finishRun(retry, 'succeeded');
    await waitFor(
      () => Promise.resolve(delivered().filter((d) => d === 'UpdateSucceeded web').length === 2 || undefined),
      { timeoutMs: 30_000, what: "the retry's UpdateSucceeded" },
    );
    const ids = receiver.requests
      .filter((r) => r.path.startsWith('/v2'))
      .map((r) => JSON.parse(r.body) as { reason: string; metadata: { updateName?: string } })
      .filter((b) => b.reason === 'UpdateSucceeded')
      .map((b) => b.metadata.updateName);
    expect(ids).toEqual([run1.name, retryName]);
  }, 90_000);

  it('PKO v1: with PKO’s clock 10 minutes behind, the first run after a new Alert is delivered', async () => {
    const sim = new PkoSimulator(kubeConfig('admin'), ns, {
      version: 'v1',
      clock: { now: () => Date.now() - TEN_MINUTES },
    });
    await sim.createStack('api', GIT);
    await obj.secret('hook-v1', { address: `${receiver.url}/v1` });
    await obj.provider('hook-v1', { type: 'generic', secretRef: { name: 'hook-v1' } });
    await obj.alert('v1', {
      providerRef: { name: 'hook-v1' },
      eventSources: [{ kind: 'Stack', name: 'api' }],
    });
    await obj.waitReady('alerts', 'v1');
    const alert = await obj.get('alerts', 'v1');
    const stack = await sim.v1Run('api', { commit: C1, state: 'succeeded' });
    // PKO stamped the run before the Alert existed, by its own clock.
    expect(Date.parse(stack.status?.lastUpdate?.lastResyncTime ?? '')).toBeLessThan(
      Date.parse((alert.metadata as { creationTimestamp?: string }).creationTimestamp ?? ''),
    );
    await arrived('UpdateSucceeded api');
    const last = await waitFor(async () => (await obj.get('alerts', 'v1')).status?.lastDelivery?.[0], {
      what: 'lastDelivery of Alert v1',
    });
    expect([last.result, last.reason]).toEqual(['Delivered', 'Delivered']);
  }, 90_000);
});
