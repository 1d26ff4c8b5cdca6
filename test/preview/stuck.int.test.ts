/**
 * A preview that never starts, on a REAL Gitea (test/support/gitea.ts) and the real control
 * plane: the preview Stack's commit is never run because its workspace never becomes ready — as
 * real PKO v2.9.0 does for a commit its workspace cannot fetch (../shared/facts/realpko.md, "Fork
 * pull requests": the Stack sits at `Reconciling=True StackProcessing: waiting for workspace
 * readiness`). The Stack's and the Workspace's status are written here in PKO's shapes (condition
 * fields as in ../shared/pko-traces/v2.9.0-real/ok-workspace.yaml); the pull request must learn it
 * within `startTimeout`, with the reason, and never wait silently.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { kubeConfig, waitFor } from '../support/cluster.ts';
import { startGitea, type Gitea, type GiteaUser } from '../support/gitea.ts';
import { startGiteaPreviews } from '../support/gitea-previews.ts';
import { grantWorkspaceLogs, installWorkspaceLogs } from '../support/workspace-logs.ts';

const CLUSTER = 'stuck';
const ORG = 'acme';
const admin = kubeConfig('admin');

let gitea: Gitea;
let bot: GiteaUser;
let alice: GiteaUser;

beforeAll(async () => {
  gitea = await startGitea();
  bot = await gitea.createUser('pko-bot');
  alice = await gitea.createUser('alice');
  await gitea.createOrg(ORG);
  await installWorkspaceLogs();
}, 180_000);

afterAll(async () => {
  await gitea.stop();
});

const condition = (type: string, status: string, reason: string, message: string) => ({
  lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  message,
  observedGeneration: 1,
  reason,
  status,
  type,
});

describe('a preview that never starts (real Gitea 1.27.3)', () => {
  it("is reported on the pull request within startTimeout (1m, the floor): failure status and the notice, with the Workspace's and the Stack's reason", async () => {
    const { ns, ctl, sim, repo } = await startGiteaPreviews(gitea, {
      prefix: 'pv-stuck',
      org: ORG,
      repo: 'stuck',
      bot,
      author: alice,
      cluster: CLUSTER,
      prp: { startTimeout: '30s' }, // below the floor: 1m applies
      // The workspace-logs role lets the controller read Workspaces in this namespace.
      prepare: grantWorkspaceLogs,
    });
    try {
      await gitea.createBranch(ORG, repo, 'never');
      const sha = await gitea.commit(ORG, repo, { branch: 'never', file: 'never/Pulumi.yaml' });
      const t0 = Date.now();
      const pr = await gitea.openPull(ORG, repo, { head: 'never', title: 'Never runs', as: alice });
      const stackName = `app-pr-${String(pr.number)}`;
      await waitFor(() => sim.getStack(stackName).catch(() => undefined), {
        timeoutMs: 30_000,
        what: 'the preview Stack',
      });

      // PKO: the Stack waits for its workspace; the Workspace's pod never becomes ready.
      await kubeRequest(admin, {
        method: 'PATCH',
        path: `${objectPath({ group: 'pulumi.com', version: 'v1', plural: 'stacks', namespace: ns, name: stackName })}/status`,
        contentType: 'application/merge-patch+json',
        body: {
          status: {
            conditions: [
              condition('Ready', 'False', 'NotReadyInProgress', 'stack is being processed'),
              condition('Reconciling', 'True', 'StackProcessing', 'waiting for workspace readiness'),
            ],
          },
        },
      });
      const wsPath = objectPath({
        group: 'auto.pulumi.com',
        version: 'v1alpha1',
        plural: 'workspaces',
        namespace: ns,
      });
      await kubeRequest(admin, {
        method: 'POST',
        path: wsPath,
        body: {
          apiVersion: 'auto.pulumi.com/v1alpha1',
          kind: 'Workspace',
          metadata: { name: stackName },
          spec: { stacks: [{ name: 'dev', create: true }] },
        },
      });
      await kubeRequest(admin, {
        method: 'PATCH',
        path: `${wsPath}/${stackName}/status`,
        contentType: 'application/merge-patch+json',
        body: {
          status: {
            observedGeneration: 1,
            conditions: [
              condition(
                'Ready',
                'False',
                'NotReady',
                'init container fetch: unable to checkout commit: object not found',
              ),
            ],
          },
        },
      });

      const context = `pko/${CLUSTER}/${ns}/${stackName}`;
      const status = await waitFor(
        async () =>
          (await gitea.statuses(ORG, repo, sha)).find((x) => x.context === context && x.status === 'failure'),
        {
          timeoutMs: 150_000,
          intervalMs: 1_000,
          what: 'the failure status of the preview that never started',
        },
      );
      const elapsed = Date.now() - t0;
      console.log(`reported ${String(elapsed)} ms after the pull request was opened (startTimeout 1m)`);
      expect(elapsed).toBeGreaterThanOrEqual(60_000);
      expect(elapsed).toBeLessThan(150_000);
      expect(status.description).toMatch(
        /^preview not started after 1m: Workspace app-pr-\d+ Ready=False \(NotReady\): init container fetch: unable to checkout commit: object not found; Stack Reconciling=True \(StackProcessing\): waiting for workspace readiness$/,
      );
      const notice = await waitFor(
        async () =>
          (await gitea.comments(ORG, repo, pr.number)).find(
            (c) => c.user.id === bot.id && c.body.includes('**Preview not running**'),
          ),
        { timeoutMs: 30_000, what: 'the notice saying the preview does not run' },
      );
      expect(notice.body).toContain(
        `preview Stack \`${stackName}\` has waited 1m for PKO to run commit ${sha.slice(0, 7)}`,
      );
      expect(notice.body).toContain('unable to checkout commit: object not found');
    } finally {
      await ctl.stop();
    }
  }, 240_000);
});
