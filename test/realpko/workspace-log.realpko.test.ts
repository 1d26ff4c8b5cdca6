/**
 * The real PKO v2.9.0 agent's output, read back through the API server's `pods/log`: the
 * workspace stand-in (test/support/workspace-standin.ts) puts the workspace pod on the kubelet
 * stand-in's Node and appends every line the real agent writes to that pod's `pulumi` log
 * (test/support/kubelet-standin.ts), so `readWorkspaceLog` (src/kube/workspace-log.ts) runs its
 * production path — ownership checks on the objects the real operator made, then `pods/log`
 * proxied by the real kube-apiserver — against the real agent's zap lines. The reader runs as
 * the test user `controller` with the shipped default ClusterRole and the workspace-logs
 * ClusterRole (config/components/workspace-logs) bound in the Stack's namespace.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { Stack, Update } from '../../src/api/pko.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { readWorkspaceLog, workspaceRunOf } from '../../src/kube/workspace-log.ts';
import { GitRepo, startGitHttpsServer } from '../support/git-repo.ts';
import type { KubeletStandIn } from '../support/kubelet-standin.ts';
import { createStack, stackSpecBase, yamlProgram, type RealPkoPlane } from '../support/realpko.ts';
import { RunLog, getStack, startPkoV2Scene, tempDir, until } from './kit.ts';

const log = new RunLog('realpko-workspace-log');
const NS = 'realpko-wslog';
const cleanups: (() => Promise<void>)[] = [];
let plane: RealPkoPlane;
let kubelet: KubeletStandIn;
let gitUrl: string;

beforeAll(async () => {
  // Real PKO v2 for NS; the optional workspace-logs ClusterRole, as shipped, bound to `controller` in NS only.
  const scene = await startPkoV2Scene(NS, log, cleanups);
  ({ plane, kubelet } = scene);
  const git = await startGitHttpsServer({ certPem: scene.pki.certPem, keyPem: scene.pki.keyPem });
  cleanups.push(() => git.close());
  const repo = await GitRepo.create();
  await git.add('app', repo);
  await repo.commit('first commit of app', yamlProgram(1));
  gitUrl = git.url('app');
}, 300_000);

afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
});

describe('workspace log of a real PKO v2 run', () => {
  it("reads the real agent's lines of an up through pods/log, after checking the operator's owner chain", async () => {
    onTestFailed(() => {
      console.error(`--- run log (tail) ---\n${log.tail()}`);
    });
    await createStack(plane.admin, NS, 'app', {
      ...stackSpecBase(await tempDir('backend')),
      projectRepo: gitUrl,
    });
    const stack: Stack = await until(
      'app succeeded',
      async () => {
        const s = await getStack(plane.admin, NS, 'app');
        return (
          s.status?.lastUpdate?.state === 'succeeded' && (s.status.currentUpdate?.name ?? '') === '' && s
        );
      },
      { timeoutMs: 150_000, intervalMs: 500, log },
    );
    const update = await kubeRequest<Update>(plane.admin, {
      method: 'GET',
      path: objectPath({
        group: 'auto.pulumi.com',
        version: 'v1alpha1',
        plural: 'updates',
        namespace: NS,
        name: stack.status?.lastUpdate?.name ?? '',
      }),
    });
    const run = workspaceRunOf(stack, update);
    if (typeof run === 'string') throw new Error(run);
    expect(run.workspaceName).toBe('app');

    const lines: string[] = [];
    const result = await readWorkspaceLog(
      run,
      (l) => {
        lines.push(l);
      },
      { kubeConfig: plane.controller },
    );
    expect(result, result.message).toMatchObject({
      ok: true,
      pod: 'app-workspace-0',
      end: 'eof',
      cutLines: 0,
    });
    // The CLI's lines as the agent logged them: zap development format, logger `pulumi`.
    const cli = lines
      .filter((l) => /^\S+Z\tINFO\tpulumi\t/.test(l))
      .map((l) => l.split('\t').slice(3).join('\t'));
    // The CLI's display of the up, in order (a plan-free program: one Stack resource, outputs).
    const at = (re: RegExp): number => cli.findIndex((l) => re.test(l));
    const order = [
      /^Updating \(dev\):$/,
      /^\+ pulumi:pulumi:Stack: \(create\)$/,
      /^\s+greeting: "hello-1"$/,
      /^Resources:$/,
      /^\s+\+ 1 created$/,
    ].map(at);
    expect(
      order.every((i) => i >= 0),
      cli.join('\n'),
    ).toBe(true);
    expect([...order].sort((x, y) => x - y)).toEqual(order);
    expect(kubelet.requests.map((r) => [r.namespace, r.pod, r.container])).toEqual([
      [NS, 'app-workspace-0', 'pulumi'],
    ]);
  }, 240_000);
});
