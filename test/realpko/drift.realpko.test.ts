/**
 * Issue 22 end to end on REAL PKO v2.9.0 (operator and agent; test/support/realpko.ts): a Stack
 * whose Pulumi YAML program created a `pkotest:index:File` (test/realpko/provider: Read returns
 * what is on disk) is deployed by a real `pulumi up`; a DriftDetection selects it and the
 * controller (in-process, as the user `controller` with the shipped ClusterRole and the
 * workspace-logs ClusterRole) creates check Stacks that the real operator runs as real
 * `pulumi preview --refresh` in their own workspaces (the workspace stand-in runs one agent per
 * workspace behind the operator's `WORKSPACE_LOCALHOST`). The file is changed out of band →
 * `DriftDetected` naming the File and its property at a webhook; put back → `DriftResolved`.
 * The controller's clock runs ahead (an offset the test moves) to make the next check due.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import type { ControllerHandle } from '../../src/controller.ts';
import type { DriftDetection } from '../../src/api/v1alpha1.ts';
import { Objects } from '../support/controller.ts';
import { GitRepo, startGitHttpsServer } from '../support/git-repo.ts';
import { REALPKO_VERSIONS, createStack, stackSpecBase, type RealPkoPlane } from '../support/realpko.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import {
  RunLog,
  controllerLauncher,
  getStack,
  requestReconcile,
  startPkoV2Scene,
  tempDir,
  until,
} from './kit.ts';

const log = new RunLog('realpko-drift');
const NS = 'realpko-drift';
const RUN_MS = 300_000;
const MINUTE = 60_000;
const cleanups: (() => Promise<void>)[] = [];
let plane: RealPkoPlane;
let controller: ControllerHandle;
let rcv: TestReceiver;
let filePath: string;
const clock = { offset: 0 };

function program(file: string): string {
  return [
    'name: pkonc-drift',
    'runtime: yaml',
    'resources:',
    '  f:',
    '    type: pkotest:index:File',
    '    properties:',
    `      path: ${file}`,
    '      content: hello-drift',
    '    options:',
    `      version: ${REALPKO_VERSIONS.pkotest}`,
    '',
  ].join('\n');
}

const events = (): { reason: string; message: string; metadata: Record<string, string> }[] =>
  rcv.requests.map(
    (r) => JSON.parse(r.body) as { reason: string; message: string; metadata: Record<string, string> },
  );

const dd = (): Promise<DriftDetection> =>
  kubeRequest<DriftDetection>(plane.admin, {
    method: 'GET',
    path: objectPath({
      group: 'notification.pko.dev',
      version: 'v1alpha1',
      plural: 'driftdetections',
      namespace: NS,
      name: 'hourly',
    }),
  });

/** Makes the next check due and waits until one more check has ended. */
async function nextCheck(): Promise<void> {
  const before = (await dd()).status?.stacks?.[0]?.lastCheckTime;
  clock.offset += 11 * MINUTE;
  controller.drift.queue.add(`${NS}/hourly`);
  await until(
    'a new check ended',
    async () => {
      const e = (await dd()).status?.stacks?.[0];
      return e?.check === undefined && e?.lastCheckTime !== before && e?.result !== 'Deferred' && e;
    },
    { timeoutMs: RUN_MS, intervalMs: 500, log },
  );
}

beforeAll(async () => {
  const scene = await startPkoV2Scene(NS, log, cleanups);
  plane = scene.plane;
  const git = await startGitHttpsServer({ certPem: scene.pki.certPem, keyPem: scene.pki.keyPem });
  cleanups.push(() => git.close());
  filePath = path.join(await tempDir('drift-file'), 'f.txt');
  const repo = await GitRepo.create();
  await git.add('app', repo);
  await repo.commit('a File', { 'Pulumi.yaml': program(filePath) });
  rcv = await startReceiver();
  cleanups.push(() => rcv.close());
  controller = await controllerLauncher(plane, NS, log, {
    deps: { drift: { now: () => Date.now() + clock.offset, random: () => 0 } },
  }).launch();
  cleanups.push(() => controller.stop());
  const obj = new Objects(NS, plane.admin);
  await obj.provider('hook', { type: 'generic', address: `${rcv.url}/hook` });
  await obj.alert('drift', {
    providerRef: { name: 'hook' },
    eventSources: [{ kind: 'Stack' }],
    eventReasons: ['DriftDetected', 'DriftResolved', 'DriftCheckFailed'],
  });
  await obj.waitReady('alerts', 'drift');
  await createStack(plane.admin, NS, 'app', {
    ...stackSpecBase(await tempDir('backend')),
    projectRepo: git.url('app'),
  });
}, 600_000);

afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
}, 120_000);

describe('drift detection on real PKO v2 (issue 22)', () => {
  it('a File changed out of band → DriftDetected naming it and the property; put back → DriftResolved', async () => {
    onTestFailed(() => {
      console.error(`--- run log (tail) ---\n${log.tail(150)}`);
    });
    await until(
      'app deployed',
      async () => {
        const s = await getStack(plane.admin, NS, 'app');
        return (
          s.status?.lastUpdate?.state === 'succeeded' && (s.status.currentUpdate?.name ?? '') === '' && s
        );
      },
      { timeoutMs: RUN_MS, intervalMs: 500, log },
    );
    expect(await readFile(filePath, 'utf8')).toBe('hello-drift');
    await kubeRequest(plane.admin, {
      method: 'POST',
      path: objectPath({
        group: 'notification.pko.dev',
        version: 'v1alpha1',
        plural: 'driftdetections',
        namespace: NS,
      }),
      body: {
        apiVersion: 'notification.pko.dev/v1alpha1',
        kind: 'DriftDetection',
        metadata: { name: 'hourly' },
        spec: { stackNames: ['app'], interval: '10m' },
      },
    });
    // The first check: nothing drifted.
    await until('the first check clean', async () => (await dd()).status?.stacks?.[0]?.result === 'Clean', {
      timeoutMs: RUN_MS,
      intervalMs: 500,
      log,
    });
    expect(events()).toEqual([]);

    // Out of band.
    await writeFile(filePath, 'changed out of band');
    await nextCheck();
    const detected = await until(
      'DriftDetected at the webhook',
      () => events().find((e) => e.reason === 'DriftDetected'),
      {
        timeoutMs: 60_000,
        log,
      },
    );
    expect(detected.message).toContain('pkotest:index:File f: content');
    // The refresh's property line: the deployed value, then what is on disk.
    expect(detected.message).toContain('~ content: "hello-drift" => "changed out of band"');
    expect(detected.metadata['commit']).toMatch(/^[0-9a-f]{40}$/);

    // Put back.
    await writeFile(filePath, 'hello-drift');
    await nextCheck();
    const resolved = await until(
      'DriftResolved at the webhook',
      () => events().find((e) => e.reason === 'DriftResolved'),
      {
        timeoutMs: 60_000,
        log,
      },
    );
    expect(resolved.message).toContain('Drift resolved in stack');
    // Each check Stack was deleted after its check.
    const left = await kubeRequest<{ items: unknown[] }>(plane.admin, {
      method: 'GET',
      path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: NS }),
      query: { labelSelector: 'notification.pko.dev/drift-detection' },
    });
    expect(left.items).toEqual([]);
  }, 900_000);

  it('a check due while the Stack runs is deferred: no check Stack, no event', async () => {
    onTestFailed(() => {
      console.error(`--- run log (tail) ---\n${log.tail(150)}`);
    });
    const before = events().length;
    await requestReconcile(plane.admin, NS, 'app');
    await until(
      'app running',
      async () => ((await getStack(plane.admin, NS, 'app')).status?.currentUpdate?.name ?? '') !== '',
      { timeoutMs: RUN_MS, intervalMs: 100, log },
    );
    clock.offset += 11 * MINUTE;
    controller.drift.queue.add(`${NS}/hourly`);
    const entry = await until(
      'the check deferred',
      async () => {
        const e = (await dd()).status?.stacks?.[0];
        return e?.result === 'Deferred' && e;
      },
      { timeoutMs: 60_000, intervalMs: 100, log },
    );
    expect(entry.message).toMatch(/running|started a run/);
    expect(entry.check).toBeUndefined();
    const checks = await kubeRequest<{ items: unknown[] }>(plane.admin, {
      method: 'GET',
      path: objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: NS }),
      query: { labelSelector: 'notification.pko.dev/drift-detection' },
    });
    expect(checks.items).toEqual([]);
    expect(events().length).toBe(before);
  }, 600_000);
});
