/**
 * Reading a PKO v2 run's output from its workspace pod through the real kube-apiserver's
 * `pods/log` (src/kube/workspace-log.ts): the API server proxies the request to a kubelet
 * stand-in (test/support/kubelet-standin.ts) registered as the pod's Node, so the client path is
 * the production one. The pods are owned as PKO v2.9.0 owns them (pod → StatefulSet
 * `<ws>-workspace` → Workspace `<ws>` → Stack, labels `auto.pulumi.com/component=workspace`,
 * `auto.pulumi.com/workspace-name`). The reader runs as the test user `controller`, bound to the
 * shipped ClusterRole (config/rbac) everywhere and to the shipped workspace-logs ClusterRole
 * (config/components/workspace-logs) by a RoleBinding in the namespaces where it may read logs.
 *
 * Log lines are zap development-format agent lines (`<time>\tINFO\tpulumi\t<CLI line>`), small
 * samples written here: parsing them is the change-set parser's business.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';
import {
  KubeletStandIn,
  placeWorkspacePod,
  type LogEntry,
  type WorkspacePlacement,
} from '../support/kubelet-standin.ts';
import { WORKSPACE_LOGS_ROLE, grantWorkspaceLogs, installWorkspaceLogs } from '../support/workspace-logs.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import {
  readWorkspaceLog,
  sinceTimeOf,
  workspaceRunOf,
  type WorkspaceLogOptions,
  type WorkspaceLogResult,
  type WorkspaceRun,
} from '../../src/kube/workspace-log.ts';
import type { Stack, Update } from '../../src/api/pko.ts';

const admin = kubeConfig('admin');
let kubelet: KubeletStandIn;

/** A zap development-format agent line for a CLI line. */
const agentLine = (t: Date, cli: string): string => `${t.toISOString()}\tINFO\tpulumi\t${cli}`;

beforeAll(async () => {
  await installWorkspaceLogs();
  kubelet = await KubeletStandIn.start({ kubeConfig: admin });
}, 60_000);

afterAll(async () => {
  await kubelet.close();
});

const post = <T>(path: string, body: unknown): Promise<T> =>
  kubeRequest<T>(admin, { method: 'POST', path, body });

interface Made {
  stack: Stack;
  run: (startTime: Date) => WorkspaceRun;
  pod: string;
}

/**
 * A Stack and, unless `withPod` is false, the objects PKO v2.9.0 makes for it: Workspace (owned
 * by the Stack), StatefulSet (owned by the Workspace), pod `<ws>-workspace-0` (owned by the
 * StatefulSet) on the kubelet stand-in's Node (or `nodeName`): {@link placeOn}.
 */
async function pkoStack(
  ns: string,
  name: string,
  o: { withPod?: boolean; nodeName?: string } & Omit<WorkspacePlacement, 'nodeName'> = {},
): Promise<Made> {
  const stack = await post<Stack>(
    objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: ns }),
    {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name },
      spec: { stack: 'dev', projectRepo: 'https://git.example/app.git', branch: 'main' },
    },
  );
  const pod = `${name}-workspace-0`;
  if (o.withPod !== false)
    await placeWorkspacePod(admin, ns, stack, { ...o, nodeName: o.nodeName ?? kubelet.nodeName });
  return {
    stack,
    pod,
    run: (startTime) => {
      const update: Update = {
        metadata: { name: `${name}-1a2b3c`, namespace: ns },
        spec: { workspaceName: name, stackName: 'dev', type: 'preview' },
        status: { startTime: startTime.toISOString() },
      };
      const r = workspaceRunOf(stack, update);
      if (typeof r === 'string') throw new Error(r);
      return r;
    },
  };
}

/** Reads as the test user `controller`, collecting the lines. */
async function read(
  run: WorkspaceRun,
  opts: Partial<WorkspaceLogOptions> = {},
): Promise<{ result: WorkspaceLogResult; lines: string[]; cut: boolean[] }> {
  const lines: string[] = [];
  const cut: boolean[] = [];
  const result = await readWorkspaceLog(
    run,
    (l, c) => {
      lines.push(l);
      cut.push(c === true);
    },
    { kubeConfig: kubeConfig('controller'), ...opts },
  );
  return { result, lines, cut };
}

/** Requests the stand-in saw for one pod. */
const seen = (ns: string, pod: string): Record<string, string>[] =>
  kubelet.requests
    .filter((r) => r.namespace === ns && r.pod === pod)
    .map((r) => ({ container: r.container, ...r.query }));

/** Times relative to a base: the pod exists before the run starts, as with PKO. */
function timeline(): { before: Date; start: Date; during: (s: number) => Date } {
  const base = Math.floor(Date.now() / 1000) * 1000;
  return {
    before: new Date(base + 500),
    start: new Date(base + 2_300),
    during: (s) => new Date(base + 3_000 + s * 1000),
  };
}

describe('readWorkspaceLog through pods/log', () => {
  it("passes the run's lines since its start; the API server forwarded container, sinceTime and limitBytes", async () => {
    const ns = await createTestNamespace('wslog-read');
    await grantWorkspaceLogs(ns);
    const made = await pkoStack(ns, 'app');
    const t = timeline();
    const mine = [
      agentLine(t.during(0), 'Previewing update (dev):'),
      agentLine(t.during(0), '    + pkotest:index:Thing: (create)'),
      agentLine(t.during(1), 'Resources:'),
      agentLine(t.during(1), '    + 1 to create'),
    ];
    const entries: LogEntry[] = [
      { time: t.before, line: agentLine(t.before, 'Updating (dev): an earlier run') },
      ...mine.map((line, i) => ({ time: t.during(i < 2 ? 0 : 1), line })),
    ];
    kubelet.setLog(ns, made.pod, 'pulumi', entries);
    kubelet.setLog(ns, made.pod, 'bootstrap', [{ time: t.during(0), line: 'not the agent' }]);

    const { result, lines } = await read(made.run(t.start), { maxBytes: 65_536 });
    expect(result).toMatchObject({ ok: true, pod: 'app-workspace-0', lines: 4, cutLines: 0, end: 'eof' });
    expect(lines).toEqual(mine);
    // sinceTime in whole seconds (the start was at .300 s); the earlier run's line, 1.8 s before, is filtered.
    expect(seen(ns, made.pod)).toEqual([
      { container: 'pulumi', sinceTime: sinceTimeOf(t.start.toISOString()), limitBytes: '65536' },
    ]);
    expect(sinceTimeOf(t.start.toISOString())).toMatch(/:\d\dZ$/);
  });

  it('never requests the log of a pod not owned by the Stack’s Workspace', async () => {
    const ns = await createTestNamespace('wslog-owner');
    await grantWorkspaceLogs(ns);
    const other = await pkoStack(ns, 'other', { withPod: false });
    const cases: [string, Made][] = [
      // Labels right, owner chain right, but the Workspace belongs to another Stack.
      ['workspace of another stack', await pkoStack(ns, 'app', { workspaceOwner: other.stack })],
      // Owner chain right, PKO's labels missing.
      ['no PKO labels', await pkoStack(ns, 'plain', { podLabels: { app: 'plain' } })],
      // PKO's labels naming another Workspace.
      [
        'labels of another workspace',
        await pkoStack(ns, 'mislabelled', {
          podLabels: { 'auto.pulumi.com/component': 'workspace', 'auto.pulumi.com/workspace-name': 'other' },
        }),
      ],
    ];
    // A pod whose StatefulSet owner reference points at a StatefulSet that is not there (uid).
    const forged = await pkoStack(ns, 'forged', { withPod: false });
    await post(objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns }), {
      metadata: {
        name: forged.pod,
        labels: { 'auto.pulumi.com/component': 'workspace', 'auto.pulumi.com/workspace-name': 'forged' },
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'StatefulSet',
            name: 'forged-workspace',
            uid: '0d3c1f6e-0000-4000-8000-000000000000',
            controller: true,
          },
        ],
      },
      spec: { nodeName: kubelet.nodeName, containers: [{ name: 'pulumi', image: 'pulumi/pulumi:3.276.0' }] },
    });
    cases.push(['owner StatefulSet missing', forged]);
    const t = timeline();

    for (const [what, made] of cases) {
      kubelet.setLog(ns, made.pod, 'pulumi', [{ time: t.during(0), line: 'SECRET=another app' }]);
      const { result, lines } = await read(made.run(t.start));
      expect(result, what).toMatchObject({ ok: false, reason: 'NotOwned', lines: 0 });
      expect(result.ok ? '' : result.message, what).toMatch(/^refused to read pod /);
      expect(lines, what).toEqual([]);
      expect(seen(ns, made.pod), what).toEqual([]);
    }
  });

  it('names the missing permission: pods without the component, pods/log with a partial Role', async () => {
    // Only the shipped default ClusterRole (config/rbac): no pods at all.
    const bare = await createTestNamespace('wslog-denied');
    const a = await pkoStack(bare, 'app');
    const t = timeline();
    kubelet.setLog(bare, a.pod, 'pulumi', [{ time: t.during(0), line: agentLine(t.during(0), 'x') }]);
    const denied = await read(a.run(t.start));
    expect(denied.result).toMatchObject({
      ok: false,
      reason: 'Forbidden',
      permission: { verb: 'get', apiGroup: '', resource: 'pods', namespace: bare },
    });
    expect(denied.result.ok ? '' : denied.result.message).toContain(
      `may not get pods in namespace ${bare}; grant the ClusterRole ${WORKSPACE_LOGS_ROLE}`,
    );

    // Everything of the component but pods/log.
    const partial = await createTestNamespace('wslog-partial');
    await grantWorkspaceLogs(partial, {
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
        { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['get'] },
        { apiGroups: ['auto.pulumi.com'], resources: ['workspaces'], verbs: ['get'] },
      ],
    });
    const b = await pkoStack(partial, 'app');
    const tb = timeline();
    kubelet.setLog(partial, b.pod, 'pulumi', [{ time: tb.during(0), line: agentLine(tb.during(0), 'x') }]);
    const noLog = await read(b.run(tb.start));
    expect(noLog.result).toMatchObject({
      ok: false,
      reason: 'Forbidden',
      permission: { verb: 'get', apiGroup: '', resource: 'pods/log', namespace: partial },
    });
    expect(seen(bare, a.pod)).toEqual([]);
    expect(seen(partial, b.pod)).toEqual([]);
  });

  it('pod gone, pod replaced after the start, nothing since the start (rotated)', async () => {
    const ns = await createTestNamespace('wslog-gone');
    await grantWorkspaceLogs(ns);
    const gone = await pkoStack(ns, 'gone', { withPod: false });
    expect((await read(gone.run(new Date()))).result).toMatchObject({ ok: false, reason: 'PodNotFound' });

    // The pod was created after the run started: the run's lines were in its predecessor.
    const made = await pkoStack(ns, 'app');
    kubelet.setLog(ns, made.pod, 'pulumi', [
      { time: new Date(), line: agentLine(new Date(), 'a later run') },
    ]);
    const replaced = await read(made.run(new Date(Date.now() - 3_600_000)));
    expect(replaced.result).toMatchObject({ ok: false, reason: 'PodReplaced' });
    expect(replaced.lines).toEqual([]);

    // Only lines from before the start: the run's are gone.
    const t = timeline();
    kubelet.setLog(ns, made.pod, 'pulumi', [{ time: t.before, line: agentLine(t.before, 'earlier') }]);
    const rotated = await read(made.run(t.start));
    expect(rotated.result).toMatchObject({ ok: false, reason: 'LogEmpty' });
    expect(rotated.result.ok ? '' : rotated.result.message).toMatch(/holds no line since .*rotated/);
    expect(seen(ns, made.pod).length).toBe(1);
  });

  it('cuts an enormous line and counts it; the lines after it are whole', async () => {
    const ns = await createTestNamespace('wslog-long');
    await grantWorkspaceLogs(ns);
    const made = await pkoStack(ns, 'app');
    const t = timeline();
    const huge = agentLine(t.during(0), `    ~ data: "${'é'.repeat(600_000)}"`);
    kubelet.setLog(ns, made.pod, 'pulumi', [
      { time: t.during(0), line: agentLine(t.during(0), 'before') },
      { time: t.during(0), line: huge },
      { time: t.during(0), line: agentLine(t.during(0), 'after') },
    ]);
    const { result, lines, cut } = await read(made.run(t.start), { maxLineBytes: 16_384 });
    expect(result).toMatchObject({ ok: true, lines: 3, cutLines: 1, end: 'eof' });
    expect(cut).toEqual([false, true, false]); // the sink is told which line was cut
    expect(lines[0]).toMatch(/\tbefore$/);
    expect(lines[2]).toMatch(/\tafter$/);
    expect(Buffer.byteLength(lines[1] ?? '')).toBeLessThanOrEqual(16_384);
    expect(Buffer.byteLength(lines[1] ?? '')).toBeGreaterThan(16_380);
    expect(huge.startsWith(lines[1] ?? 'x')).toBe(true); // cut at a character boundary: no U+FFFD
  });

  it('a 50 MB log stays within the cap, also from a node that ignores limitBytes', async () => {
    const ns = await createTestNamespace('wslog-huge');
    await grantWorkspaceLogs(ns);
    const total = 50 * 1024 * 1024;
    const line = Buffer.from(
      agentLine(new Date(), `    + pkotest:index:Thing: (create) ${'x'.repeat(900)}\n`),
    );
    const cap = 1024 * 1024;
    for (const honour of [true, false]) {
      const node = await KubeletStandIn.start({
        kubeConfig: admin,
        namePrefix: 'kubelet-huge',
        honourLimitBytes: honour,
      });
      try {
        const made = await pkoStack(ns, honour ? 'honours' : 'ignores', { nodeName: node.nodeName });
        const t = timeline();
        node.setGenerator(ns, made.pod, 'pulumi', function* () {
          for (let sent = 0; sent < total; sent += line.byteLength) yield line;
        });
        const heapBefore = process.memoryUsage().heapUsed;
        let peak = 0;
        const lines: number[] = [];
        const result = await readWorkspaceLog(
          made.run(t.start),
          (l) => {
            lines.push(l.length);
            peak = Math.max(peak, process.memoryUsage().heapUsed - heapBefore);
          },
          { kubeConfig: kubeConfig('controller'), maxBytes: cap, timeoutMs: 60_000 },
        );
        expect(result, `honour=${honour}`).toMatchObject({ ok: true, end: 'byteLimit' });
        expect(result.ok && result.bytes).toBe(cap);
        // Only whole lines: the fragment at the cap is dropped.
        expect(lines.length).toBe(Math.floor(cap / line.byteLength));
        expect(node.requests.map((r) => r.query['limitBytes'])).toEqual([String(cap)]);
        // The read was cut, not drained: the node wrote far less than the log.
        expect(node.bytesWritten, `honour=${honour}`).toBeLessThan(total / 2);
        // Bounded memory: no sign of the 50 MB being held.
        expect(peak).toBeLessThan(32 * 1024 * 1024);
      } finally {
        await node.close();
      }
    }
  }, 120_000);

  it('a node that does not answer ends in Timeout within the deadline', async () => {
    const ns = await createTestNamespace('wslog-stall');
    await grantWorkspaceLogs(ns);
    const made = await pkoStack(ns, 'app');
    const t = timeline();
    let release = (): void => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    kubelet.setGenerator(ns, made.pod, 'pulumi', async function* () {
      await released;
      yield Buffer.from('too late\n');
    });
    try {
      const started = Date.now();
      const { result, lines } = await read(made.run(t.start), { timeoutMs: 4_000 });
      expect(result).toMatchObject({ ok: false, reason: 'Timeout', lines: 0 });
      expect(lines).toEqual([]);
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(seen(ns, made.pod).length).toBe(1);
    } finally {
      release();
    }
  });

  it('a node that breaks off mid-line: the whole lines so far, the fragment dropped', async () => {
    const ns = await createTestNamespace('wslog-broken');
    await grantWorkspaceLogs(ns);
    const made = await pkoStack(ns, 'app');
    const t = timeline();
    kubelet.setGenerator(ns, made.pod, 'pulumi', async function* () {
      yield Buffer.from(`${agentLine(t.during(0), 'Previewing update (dev):')}\n`);
      yield Buffer.from(`${agentLine(t.during(0), '    + pkotest:index:Thing: (create)')}\n`);
      yield Buffer.from(agentLine(t.during(0), 'Resources:').slice(0, 20));
      // Sent before the connection breaks (a node failing before any byte is a plain failure).
      await new Promise((r) => setTimeout(r, 500));
      throw new Error('node went away');
    });
    const { result, lines } = await read(made.run(t.start));
    // The API server ends its answer cleanly when the node's connection breaks: it looks like
    // the end of the log, and only the missing newline tells.
    expect(result).toMatchObject({ ok: true, end: 'eof', lines: 2, droppedFragment: true });
    expect(result.message).toMatch(/ended inside a line/);
    expect(lines.map((l) => l.split('\t')[3])).toEqual([
      'Previewing update (dev):',
      '    + pkotest:index:Thing: (create)',
    ]);
  });

  it('a pod replaced while its log was read: PodReplaced, its lines not trusted', async () => {
    const ns = await createTestNamespace('wslog-swap');
    await grantWorkspaceLogs(ns);
    const made = await pkoStack(ns, 'app');
    const t = timeline();
    kubelet.setLog(ns, made.pod, 'pulumi', [
      { time: t.during(0), line: agentLine(t.during(0), 'Previewing update (dev):') },
    ]);
    const podPath = objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns, name: made.pod });
    const original = await kubeRequest<{
      metadata: { uid: string; labels: Record<string, string>; ownerReferences: unknown[] };
    }>(admin, { method: 'GET', path: podPath });
    const stop = new AbortController();
    const result = await readWorkspaceLog(
      made.run(t.start),
      async () => {
        // Deleted (no kubelet: at once) and made again under the same name, with the same owner.
        await kubeRequest(admin, { method: 'DELETE', path: podPath, query: { gracePeriodSeconds: 0 } });
        await post(objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns }), {
          metadata: {
            name: made.pod,
            labels: original.metadata.labels,
            ownerReferences: original.metadata.ownerReferences,
          },
          spec: {
            nodeName: kubelet.nodeName,
            containers: [{ name: 'pulumi', image: 'pulumi/pulumi:3.276.0' }],
          },
        });
        stop.abort();
      },
      { kubeConfig: kubeConfig('controller'), follow: true, signal: stop.signal, timeoutMs: 30_000 },
    );
    expect(result).toMatchObject({ ok: false, reason: 'PodReplaced', lines: 1 });
  });

  it('a container that started after the run did: restartedDuringRun', async () => {
    const ns = await createTestNamespace('wslog-restart');
    await grantWorkspaceLogs(ns);
    const made = await pkoStack(ns, 'app');
    const t = timeline();
    const podPath = objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns, name: made.pod });
    const status = (startedAt: Date): unknown => ({
      status: {
        containerStatuses: [
          {
            name: 'pulumi',
            image: 'pulumi/pulumi:3.276.0',
            imageID: '',
            ready: true,
            restartCount: 1,
            state: { running: { startedAt: startedAt.toISOString().replace(/\.\d{3}Z$/, 'Z') } },
          },
        ],
      },
    });
    kubelet.setLog(ns, made.pod, 'pulumi', [
      { time: t.during(1), line: agentLine(t.during(1), 'Resources:') },
    ]);
    const patch = (startedAt: Date): Promise<unknown> =>
      kubeRequest(admin, {
        method: 'PATCH',
        path: `${podPath}/status`,
        contentType: 'application/merge-patch+json',
        body: status(startedAt),
      });

    await patch(t.during(0));
    const restarted = await read(made.run(t.start));
    expect(restarted.result).toMatchObject({ ok: true, lines: 1, restartedDuringRun: true });
    expect(restarted.result.message).toMatch(/restarted during the run/);

    await patch(t.before);
    const steady = await read(made.run(t.start));
    expect(steady.result).toMatchObject({ ok: true, lines: 1, restartedDuringRun: false });
  });

  it('follows the log while the run is in progress and stops when told', async () => {
    const ns = await createTestNamespace('wslog-follow');
    await grantWorkspaceLogs(ns);
    const made = await pkoStack(ns, 'app');
    const t = timeline();
    kubelet.setLog(ns, made.pod, 'pulumi', [
      { time: t.during(0), line: agentLine(t.during(0), 'Previewing update (dev):') },
    ]);
    const stop = new AbortController();
    const lines: string[] = [];
    const done = readWorkspaceLog(
      made.run(t.start),
      (l) => {
        lines.push(l);
        // Each line arriving makes the "agent" write the next, until the summary; then the run ends.
        if (l.endsWith('Previewing update (dev):'))
          kubelet.append(ns, made.pod, 'pulumi', agentLine(t.during(1), 'Resources:'), t.during(1));
        if (l.endsWith('Resources:'))
          kubelet.append(ns, made.pod, 'pulumi', agentLine(t.during(1), '    + 1 to create'), t.during(1));
        if (l.endsWith('to create'))
          setTimeout(() => {
            stop.abort();
          }, 200);
      },
      { kubeConfig: kubeConfig('controller'), follow: true, signal: stop.signal, timeoutMs: 60_000 },
    );
    const result = await done;
    expect(result).toMatchObject({ ok: true, lines: 3, end: 'stopped' });
    expect(lines.map((l) => l.split('\t')[3])).toEqual([
      'Previewing update (dev):',
      'Resources:',
      '    + 1 to create',
    ]);
    expect(seen(ns, made.pod)[0]).toMatchObject({ follow: 'true', container: 'pulumi' });

    // Following ends by itself when the container ends (the node closes the stream).
    const second = readWorkspaceLog(made.run(t.start), () => undefined, {
      kubeConfig: kubeConfig('controller'),
      follow: true,
      timeoutMs: 60_000,
    });
    await waitUntil(() => seen(ns, made.pod).length === 2);
    kubelet.endFollow(ns, made.pod, 'pulumi');
    expect(await second).toMatchObject({ ok: true, lines: 3, end: 'eof' });

    // A deadline ends a follow that nothing stops.
    const third = await readWorkspaceLog(made.run(t.start), () => undefined, {
      kubeConfig: kubeConfig('controller'),
      follow: true,
      timeoutMs: 4_000,
    });
    expect(third).toMatchObject({ ok: true, lines: 3, end: 'deadline' });
  }, 90_000);
});

async function waitUntil(cond: () => boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
