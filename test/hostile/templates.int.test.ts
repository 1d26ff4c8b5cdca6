/**
 * B01, B02 and live templates on the real control plane (in-process controller): the
 * four-deep `#each` is InvalidTemplate at apply time; a template within the worst case but
 * over budget on a real event fails that Alert's delivery with `TemplateBudgetExceeded` while
 * another Alert on the same Stack delivers; the 84 KB template is InvalidTemplate with a line
 * while `/healthz` keeps answering; a ConfigMap edit changes the next notification, with no
 * restart and no change to the Alert.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess, type InProcessController } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';

const B01 = `{{#each @root.metadata}}{{#each @root.metadata}}{{#each @root.metadata}}{{#each @root.metadata}}{{@key}}={{this}}
{{/each}}{{/each}}{{/each}}{{/each}}`;
/** Within the worst case (64 labels: 4,160 steps), over budget with 300 labels (90,300 steps). */
const LABELS_SQUARED = '{{#each labels}}{{#each @root.labels}}{{@key}} {{/each}}{{/each}}';

function b02Template(): string {
  const deep = `{{${'lower ('.repeat(9_999)}lower message${')'.repeat(9_999)}}}`;
  return `${'Deployment report for the platform team.\n'.repeat(98)}${deep}`;
}

function eventMetadata(n: number): Record<string, string> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`key${String(i)}`, 'v'.repeat(1024)]));
}

let ns: string;
let obj: Objects;
let receiver: TestReceiver;
let ctl: InProcessController;
let sim: PkoSimulator;

beforeAll(async () => {
  ns = await createTestNamespace('tpl');
  obj = new Objects(ns);
  receiver = await startReceiver();
  ctl = await startInProcess(ns);
  sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
});
afterAll(async () => {
  await ctl.stop();
  await receiver.close();
});

interface Received {
  id: string;
  reason: string;
  message: string;
}
const at = (path: string): Received[] =>
  receiver.requests.filter((q) => q.path === path).map((q) => JSON.parse(q.body) as Received);

describe('B01: unbounded render', () => {
  it('the four-deep #each with 64 eventMetadata keys is InvalidTemplate at apply time', async () => {
    await obj.core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'b01' }, data: { message: B01 } },
    });
    await obj.provider('hook', { type: 'generic', address: `${receiver.url}/b01` });
    await obj.alert('b01', {
      providerRef: { name: 'hook' },
      eventSources: [{ kind: 'Stack' }],
      eventMetadata: eventMetadata(64),
      templateRef: { name: 'b01' },
    });
    const c = await obj.waitReady('alerts', 'b01', 'False', 'InvalidTemplate');
    expect(c.message).toMatch(
      /template 'message' \(ConfigMap '[^']+\/b01'\) line 1: on the largest event the API allows/,
    );
    // Which budget runs out first depends on the machine's load; each says what to change.
    expect(c.message).toMatch(/(nested #each multiplies|make it simpler)/);
  });

  it('over budget on a real event: that Alert fails with TemplateBudgetExceeded, another Alert delivers', async () => {
    await obj.core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'squared' }, data: { message: LABELS_SQUARED } },
    });
    await obj.provider('budget', { type: 'generic', address: `${receiver.url}/budget` });
    await obj.provider('other', { type: 'generic', address: `${receiver.url}/other` });
    const labelled = { matchLabels: { 'team.example.com/big': 'yes' } };
    await obj.alert('budget', {
      providerRef: { name: 'budget' },
      eventSources: [{ kind: 'Stack', ...labelled }],
      templateRef: { name: 'squared' },
    });
    await obj.alert('other', {
      providerRef: { name: 'other' },
      eventSources: [{ kind: 'Stack', ...labelled }],
    });
    await obj.waitReady('alerts', 'budget');
    await obj.waitReady('alerts', 'other');
    const labels: Record<string, string> = { 'team.example.com/big': 'yes' };
    for (let i = 0; i < 299; i++) labels[`team.example.com/l${String(i)}`] = `v${String(i)}`;
    await sim.createStack(
      'big',
      { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } },
      { labels },
    );
    const run = await sim.startRun('big', { type: 'up', commit: '0123456789abcdef0123456789abcdef01234567' });
    await sim.finishRun(run, 'succeeded');

    const failed = await waitFor(
      async () =>
        (await obj.get('alerts', 'budget')).status?.lastDelivery?.find((d) => d.result === 'Failed'),
      { timeoutMs: 30_000, what: 'a Failed lastDelivery on budget' },
    );
    expect(failed.reason).toBe('TemplateBudgetExceeded');
    expect(failed.message).toMatch(
      /ran out of their render budget \((steps|time)\): template 'message': template (needs more than 20,000 helper calls and block iterations|render took longer than 250 ms) \(line 1\)/,
    );
    await waitFor(
      () => Promise.resolve(at('/other').some((e) => e.reason === 'UpdateSucceeded') || undefined),
      {
        timeoutMs: 20_000,
        what: 'UpdateSucceeded at the other Alert',
      },
    );
    expect(at('/budget')).toHaveLength(0);
    const events = await obj.core.listNamespacedEvent({ namespace: ns });
    expect(
      events.items.some((e) => e.reason === 'TemplateBudgetExceeded' && e.involvedObject.name === 'budget'),
    ).toBe(true);
  });
});

describe('B02: unbounded compile', () => {
  it('84 KB, 10,000 deep: InvalidTemplate with a line, while /healthz answers', async () => {
    let healthy = 0;
    let unhealthy = 0;
    // Every probe is awaited before counting (under load a window can end with all of them in flight).
    const probes: Promise<unknown>[] = [];
    const probe = (): void => {
      probes.push(
        fetch(`http://127.0.0.1:${ctl.handle.probePort}/healthz`, { signal: AbortSignal.timeout(1_000) })
          .then((r) => (r.ok ? healthy++ : unhealthy++))
          .catch(() => unhealthy++),
      );
    };
    probe();
    const poll = setInterval(probe, 50);
    try {
      await obj.core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'b02' }, data: { message: b02Template() } },
      });
      await obj.alert('b02', {
        providerRef: { name: 'other' },
        eventSources: [{ kind: 'Stack' }],
        templateRef: { name: 'b02' },
      });
      const c = await obj.waitReady('alerts', 'b02', 'False', 'InvalidTemplate');
      expect(c.message).toMatch(
        /template 'message' \(ConfigMap '[^']+\/b02'\) line \d+: template is [\d,]+ bytes, over the limit of 32,768 bytes/,
      );
    } finally {
      clearInterval(poll);
    }
    await Promise.allSettled(probes);
    expect(healthy).toBeGreaterThan(0);
    expect(unhealthy).toBe(0);
  });
});

describe('templates seen live (issue 12, point 4)', () => {
  it('a ConfigMap edit changes the next notification: no restart, no Alert change', async () => {
    await obj.core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'live' }, data: { message: 'v1 {{reason}} {{stackName}}' } },
    });
    await obj.provider('live', { type: 'generic', address: `${receiver.url}/live` });
    await obj.alert('live', {
      providerRef: { name: 'live' },
      eventSources: [{ kind: 'Stack', name: 'live-*' }],
      templateRef: { name: 'live' },
    });
    await obj.waitReady('alerts', 'live');
    await sim.createStack('live-app', {
      git: { projectRepo: 'https://github.com/acme/app', branch: 'main' },
    });
    const first = await sim.startRun('live-app', {
      type: 'up',
      commit: '1111111111111111111111111111111111111111',
    });
    await sim.finishRun(first, 'succeeded');
    await waitFor(() => Promise.resolve(at('/live').find((e) => e.reason === 'UpdateSucceeded')), {
      timeoutMs: 20_000,
      what: 'the first UpdateSucceeded',
    });
    expect(at('/live').find((e) => e.reason === 'UpdateSucceeded')?.message).toBe(
      'v1 UpdateSucceeded live-app',
    );

    const generation = (await obj.get('alerts', 'live')).metadata.generation;
    const before = ctl.handle.alertIndex.get(`${ns}/live`)?.templates.key;
    await obj.core.replaceNamespacedConfigMap({
      namespace: ns,
      name: 'live',
      body: { metadata: { name: 'live' }, data: { message: 'v2 {{emoji}} {{reason}}' } },
    });
    // The watch brings the edit: the Alert's templates are swapped in memory (by content key).
    await waitFor(
      () => {
        const key = ctl.handle.alertIndex.get(`${ns}/live`)?.templates.key;
        return Promise.resolve(key !== undefined && key !== before ? key : undefined);
      },
      { timeoutMs: 20_000, what: 'the edited templates in use' },
    );
    const second = await sim.startRun('live-app', {
      type: 'up',
      commit: '2222222222222222222222222222222222222222',
    });
    await sim.finishRun(second, 'failed');
    const got = await waitFor(() => Promise.resolve(at('/live').find((e) => e.reason === 'UpdateFailed')), {
      timeoutMs: 20_000,
      what: 'the UpdateFailed after the edit',
    });
    expect(got.message).toBe('v2 ❌ UpdateFailed');
    expect((await obj.get('alerts', 'live')).metadata.generation).toBe(generation);
  });
});
