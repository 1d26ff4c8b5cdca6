/**
 * B01, B02, B03 against the controller as a real process under the Deployment's heap limit
 * (`--max-old-space-size=160`), all at once: an Alert whose template is over budget on real
 * events, one with the four-deep `#each`, one with the 84 KB template, and a receiver answering
 * 200 with 30 MB to each of 8 events. Meanwhile another Alert gets a steady stream of events.
 *
 * Asserted: the process stays up and healthy, the 8 large-answer events are delivered once
 * each, the budget Alert fails with its reason, the template Alerts are InvalidTemplate, and
 * every event of the other Alert is delivered. Measured and printed (not asserted: timing
 * belongs to bench/): the other Alert's delivery latency before and during the attack, the
 * peak V8 heap and resident memory, and /healthz answers.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, bindControllerRole } from '../support/controller.ts';
import { startControllerProcess, stopAll, type ControllerProcess } from '../support/controller-process.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver } from '../support/receiver.ts';

afterAll(async () => {
  await stopAll();
});

const B01 = `{{#each @root.metadata}}{{#each @root.metadata}}{{#each @root.metadata}}{{#each @root.metadata}}{{@key}}={{this}}
{{/each}}{{/each}}{{/each}}{{/each}}`;
const LABELS_SQUARED = '{{#each labels}}{{#each @root.labels}}{{@key}} {{/each}}{{/each}}';
const REPO = { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } };

function sha(i: number): string {
  return i.toString(16).padStart(40, 'a');
}

function b02Template(): string {
  const deep = `{{${'lower ('.repeat(9_999)}lower message${')'.repeat(9_999)}}}`;
  return `${'Deployment report for the platform team.\n'.repeat(98)}${deep}`;
}

interface Sample {
  heap: number;
  rss: number;
}

/** Polls /metrics and /healthz until stopped: peak heap and RSS, health answers. */
function monitor(p: ControllerProcess): {
  stop(): Promise<{ peak: Sample; healthy: number; unhealthy: number }>;
} {
  const peak: Sample = { heap: 0, rss: 0 };
  let healthy = 0;
  let unhealthy = 0;
  const state = { running: true };
  const loop = (async () => {
    while (state.running) {
      try {
        const text = await (
          await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`, { signal: AbortSignal.timeout(2_000) })
        ).text();
        const heap = Number(/^nodejs_heap_size_used_bytes (\d+)/m.exec(text)?.[1] ?? 0);
        peak.heap = Math.max(peak.heap, heap);
        peak.rss = Math.max(peak.rss, await p.rssBytes());
        const h = await fetch(`http://127.0.0.1:${p.probePort}/healthz`, {
          signal: AbortSignal.timeout(1_000),
        });
        if (h.ok) healthy++;
        else unhealthy++;
      } catch {
        unhealthy++;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    async stop() {
      state.running = false;
      await loop;
      return { peak, healthy, unhealthy };
    },
  };
}

describe('B01–B03 under --max-old-space-size=160 (real process)', () => {
  it('survives all three at once; other Alerts keep delivering', async () => {
    const ns = await createTestNamespace('b0x-proc');
    const obj = new Objects(ns);
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    const fast = await startReceiver();
    const big = await startReceiver();
    const THIRTY_MB = 'x'.repeat(30 * 1024 * 1024);
    big.respondWith(Array.from({ length: 8 }, () => ({ status: 200, body: THIRTY_MB })));
    await bindControllerRole();
    const p = await startControllerProcess({
      kubeconfig: inject('controllerKubeconfig'),
      nodeArgs: ['--max-old-space-size=160'],
      args: [`--watch-namespace=${ns}`, '--log-level=info'],
    });
    await p.waitReady(30_000);
    try {
      // The unaffected Alert and its baseline latency.
      await obj.provider('other', { type: 'generic', address: `${fast.url}/other` });
      await obj.alert('other', {
        providerRef: { name: 'other' },
        eventSources: [{ kind: 'Stack', name: 'steady' }],
        eventReasons: ['UpdateSucceeded'],
      });
      await obj.waitReady('alerts', 'other');
      await sim.createStack('steady', REPO);
      let seq = 0;
      const steadyRun = async (): Promise<number> => {
        const run = await sim.startRun('steady', { type: 'up', commit: sha(++seq) });
        const finished = Date.now();
        await sim.finishRun(run, 'succeeded');
        const got = await waitFor(
          () =>
            Promise.resolve(
              fast.requests.find(
                (q) =>
                  (JSON.parse(q.body) as { metadata: { updateName?: string } }).metadata.updateName ===
                  run.name,
              ),
            ),
          { timeoutMs: 30_000, intervalMs: 20, what: `the other Alert's event for ${run.name}` },
        );
        return got.time - finished;
      };
      const baseline: number[] = [];
      for (let i = 0; i < 3; i++) baseline.push(await steadyRun());
      const rssBefore = await p.rssBytes();

      const watch = monitor(p);
      // B03: 8 events whose endpoint answers 30 MB each.
      await obj.provider('big', { type: 'generic', address: `${big.url}/b03` });
      await obj.alert('b03', {
        providerRef: { name: 'big' },
        eventSources: [{ kind: 'Stack', name: 'b03-*' }],
        eventReasons: ['UpdateSucceeded'],
      });
      // B01 at delivery time (fits the worst case, not 300 labels) and at apply time; B02.
      await obj.core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'squared' }, data: { message: LABELS_SQUARED } },
      });
      await obj.core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'b01' }, data: { message: B01 } },
      });
      await obj.core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'b02' }, data: { message: b02Template() } },
      });
      await obj.provider('sink', { type: 'generic', address: `${fast.url}/sink` });
      await obj.alert('budget', {
        providerRef: { name: 'sink' },
        eventSources: [{ kind: 'Stack', name: 'labelled' }],
        eventReasons: ['UpdateSucceeded'],
        templateRef: { name: 'squared' },
      });
      await obj.alert('b01', {
        providerRef: { name: 'sink' },
        eventSources: [{ kind: 'Stack' }],
        eventMetadata: Object.fromEntries(
          Array.from({ length: 64 }, (_, i) => [`k${String(i)}`, 'v'.repeat(1024)]),
        ),
        templateRef: { name: 'b01' },
      });
      await obj.alert('b02', {
        providerRef: { name: 'sink' },
        eventSources: [{ kind: 'Stack' }],
        templateRef: { name: 'b02' },
      });
      await obj.waitReady('alerts', 'b03');
      await obj.waitReady('alerts', 'budget');

      const labels = Object.fromEntries(
        Array.from({ length: 300 }, (_, i) => [`team.example.com/l${String(i)}`, 'x']),
      );
      await sim.createStack('labelled', REPO, { labels });
      const attack = (async () => {
        const l = await sim.startRun('labelled', { type: 'up', commit: sha(1000) });
        await sim.finishRun(l, 'succeeded');
        await Promise.all(
          Array.from({ length: 8 }, async (_, i) => {
            await sim.createStack(`b03-${String(i)}`, REPO);
            const run = await sim.startRun(`b03-${String(i)}`, { type: 'up', commit: sha(2000 + i) });
            await sim.finishRun(run, 'succeeded');
          }),
        );
      })();
      const during: number[] = [];
      for (let i = 0; i < 8; i++) during.push(await steadyRun());
      await attack;

      await waitFor(() => Promise.resolve(big.requests.length >= 8 || undefined), {
        timeoutMs: 60_000,
        what: `8 deliveries to the 30 MB endpoint (have ${String(big.requests.length)})`,
      });
      const failed = await waitFor(
        async () =>
          (await obj.get('alerts', 'budget')).status?.lastDelivery?.find((d) => d.result === 'Failed'),
        { timeoutMs: 30_000, what: 'TemplateBudgetExceeded on the budget Alert' },
      );
      expect(failed.reason).toBe('TemplateBudgetExceeded');
      expect((await obj.waitReady('alerts', 'b01', 'False', 'InvalidTemplate')).message).toMatch(
        /nested #each multiplies/,
      );
      expect((await obj.waitReady('alerts', 'b02', 'False', 'InvalidTemplate')).message).toMatch(
        /over the limit of 32,768 bytes/,
      );
      await new Promise((r) => setTimeout(r, 2_000)); // anything more would show now
      const { peak, healthy, unhealthy } = await watch.stop();

      const ids = big.requests.map((q) => (JSON.parse(q.body) as { id: string }).id);
      expect(ids).toHaveLength(8);
      expect(new Set(ids).size).toBe(8);
      expect(during).toHaveLength(8);
      await p.waitReady(5_000);
      expect(unhealthy).toBe(0);
      expect(fast.requests.filter((q) => q.path === '/sink')).toHaveLength(0);

      const ms = (xs: number[]) => xs.map((x) => String(x)).join(', ');
      console.log(
        `[B01–B03 under --max-old-space-size=160] other Alert latency, ms: before ${ms(baseline)}; during ${ms(during)} ` +
          `(max ${String(Math.max(...during))}); peak heap used ${(peak.heap / 1048576).toFixed(1)} MiB, ` +
          `peak RSS ${(peak.rss / 1048576).toFixed(1)} MiB (${(rssBefore / 1048576).toFixed(1)} MiB before the attack); /healthz ${String(healthy)} ok, ${String(unhealthy)} failed`,
      );
    } catch (err) {
      console.log(p.logs().slice(-200).join('\n'));
      console.log(JSON.stringify(fast.requests.map((q) => [q.path, q.body.slice(0, 300)])));
      console.log(
        JSON.stringify(big.requests.map((q) => [q.time, q.headers['x-pko-event-id'], q.body.slice(0, 200)])),
      );
      throw err;
    } finally {
      p.kill('SIGTERM');
      await p.exited;
      await fast.close();
      await big.close();
    }
  }, 180_000);
});
