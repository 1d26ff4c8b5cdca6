/**
 * The PullRequestPreview gate end to end on a REAL Gitea (test/support/gitea.ts) and the real
 * control plane: the controller carries `spec.gate` onto the preview Stack, PKO v2 preview runs
 * are written by the simulator (test/support/pko.ts), the change set comes from the workspace
 * pod's log — a recording of the real agent (test/fixtures/agent-logs/04-delete.log, 02-update.log)
 * served by the kubelet stand-in through the API server's `pods/log` — and the commit status is
 * read back from Gitea.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import { kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, VERSION } from '../support/controller.ts';
import { startGitea, type Gitea, type GiteaStatus, type GiteaUser } from '../support/gitea.ts';
import { startGiteaPreviews } from '../support/gitea-previews.ts';
import { KubeletStandIn, placeWorkspacePod } from '../support/kubelet-standin.ts';
import {
  grantWorkspaceLogs,
  installWorkspaceLogs,
  playPreviewRun,
  recordedPreview,
} from '../support/workspace-logs.ts';

const CLUSTER = 'gate';
const ORG = 'acme';
const WAIT_MS = 30_000;
const admin = kubeConfig('admin');

let gitea: Gitea;
let bot: GiteaUser;
let alice: GiteaUser;
let kubelet: KubeletStandIn;

beforeAll(async () => {
  gitea = await startGitea();
  bot = await gitea.createUser('pko-bot');
  alice = await gitea.createUser('alice');
  await gitea.createOrg(ORG);
  await installWorkspaceLogs();
  kubelet = await KubeletStandIn.start({ kubeConfig: admin });
}, 180_000);

afterAll(async () => {
  await kubelet.close();
  await gitea.stop();
});

async function ours(repo: string, sha: string, context: string): Promise<GiteaStatus[]> {
  return (await gitea.statuses(ORG, repo, sha))
    .filter((s) => s.context === context)
    .sort((a, b) => a.id - b.id);
}

function finalStatus(repo: string, sha: string, context: string): Promise<GiteaStatus> {
  return waitFor(
    async () => {
      const last = (await ours(repo, sha, context)).at(-1);
      return last !== undefined && last.status !== 'pending' ? last : undefined;
    },
    { timeoutMs: WAIT_MS, what: `a final status of ${context} on ${sha.slice(0, 7)}` },
  );
}

describe('the PullRequestPreview gate on a real Gitea 1.27.3', () => {
  it('a preview that would delete a gated type gets a failure status naming it; an unknown change set fails closed; a gate moved to other types passes; the comment says why', async () => {
    const { ns, obj, ctl, sim, repo } = await startGiteaPreviews(gitea, {
      prefix: 'pv-gate',
      org: ORG,
      repo: 'gated',
      bot,
      author: alice,
      cluster: CLUSTER,
      prp: { gate: { operations: ['delete', 'replace'], resourceTypes: ['pkotest:*'] } },
      prepare: grantWorkspaceLogs,
    });
    try {
      await gitea.createBranch(ORG, repo, 'shrink');
      const sha1 = await gitea.commit(ORG, repo, { branch: 'shrink', file: 'shrink/Pulumi.yaml' });
      const pr = await gitea.openPull(ORG, repo, { head: 'shrink', title: 'Drop b', as: alice });
      const stackName = `app-pr-${String(pr.number)}`;
      const context = `pko/${CLUSTER}/${ns}/${stackName}`;
      const stackWith = (ok: (s: Stack) => boolean, what: string): Promise<Stack> =>
        waitFor(
          async () => {
            const s = await sim.getStack(stackName).catch(() => undefined);
            return s !== undefined && ok(s) ? s : undefined;
          },
          { timeoutMs: WAIT_MS, what: `Stack ${stackName} ${what}` },
        );
      const created = await stackWith(() => true, 'created');
      expect(JSON.parse(created.metadata.annotations?.['notification.pko.dev/gate'] ?? 'null')).toEqual({
        operations: ['delete', 'replace'],
        resourceTypes: ['pkotest:*'],
      });

      // 1. No workspace log to read: the gate fails closed.
      const run1 = await sim.startRun(stackName, { type: 'preview', commit: sha1 });
      await sim.finishRun(run1, 'succeeded', { permalink: null });
      const closed = await finalStatus(repo, sha1, context);
      expect(closed.status).toBe('failure');
      expect(closed.description).toMatch(/^gate: change set unavailable: /);

      // 2. The real agent's log of a preview that deletes `b`: failure naming it.
      const pod = await placeWorkspacePod(admin, ns, created, { nodeName: kubelet.nodeName });
      const sha2 = await gitea.gitPush(ORG, repo, 'shrink', alice);
      await stackWith((s) => s.spec?.commit === sha2, `at ${sha2.slice(0, 7)}`);
      const run = { stack: stackName, pod, lines: recordedPreview('04-delete.log') };
      await playPreviewRun(sim, kubelet, { ...run, commit: sha2 });
      const gated = await finalStatus(repo, sha2, context);
      expect([gated.status, gated.description]).toEqual([
        'failure',
        'gate: 1 to delete: pkotest:index:Value::b',
      ]);
      const comment = await waitFor(
        async () =>
          (await gitea.comments(ORG, repo, pr.number)).find(
            (c) => c.user.id === bot.id && c.body.includes('🚧 gate: 1 to delete'),
          ),
        { timeoutMs: WAIT_MS, what: 'the comment naming the gate' },
      );
      expect(comment.body).toContain('**-1 to delete**');

      // 3. The gate moved to other types: the annotation follows, and the same change passes.
      await obj.custom.patchNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'pullrequestpreviews',
        name: 'previews',
        body: [{ op: 'replace', path: '/spec/gate/resourceTypes', value: ['aws:rds/*'] }],
      });
      await stackWith(
        (s) => s.metadata.annotations?.['notification.pko.dev/gate']?.includes('aws:rds/*') === true,
        'carrying the new gate',
      );
      const sha3 = await gitea.gitPush(ORG, repo, 'shrink', alice);
      await stackWith((s) => s.spec?.commit === sha3, `at ${sha3.slice(0, 7)}`);
      await playPreviewRun(sim, kubelet, { ...run, commit: sha3 });
      const passed = await finalStatus(repo, sha3, context);
      expect(passed.status).toBe('success');
      expect(passed.description).toMatch(/^-1 to delete · Preview of stack/);
    } finally {
      await ctl.stop();
    }
  }, 240_000);
});
