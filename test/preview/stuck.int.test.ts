/**
 * A preview that never starts, on a REAL Gitea (test/support/gitea.ts) and the real control
 * plane: the preview Stack's commit is never run because its workspace never becomes ready — as
 * real PKO v2.9.0 does for a commit its workspace cannot fetch (../shared/facts/realpko.md, "Fork
 * pull requests": the Stack sits at `Reconciling=True StackProcessing: waiting for workspace
 * readiness`). The Stack's and the Workspace's status are written here in PKO's shapes (condition
 * fields as in ../shared/pko-traces/v2.9.0-real/ok-workspace.yaml); the pull request must learn it
 * within `startTimeout`, with the reason, and never wait silently.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RbacAuthorizationV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { installCRDs, readCRDs } from '../../src/kube/crds.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, Objects, VERSION, bindControllerRole, startInProcess } from '../support/controller.ts';
import { startGitea, type Gitea, type GiteaUser } from '../support/gitea.ts';
import { ROOT, kustomize } from '../support/kubectl.ts';
import { PkoSimulator } from '../support/pko.ts';

const CLUSTER = 'stuck';
const ORG = 'acme';
const LOGS_ROLE = 'pko-notification-controller-workspace-logs';
const admin = kubeConfig('admin');

let gitea: Gitea;
let bot: GiteaUser;
let alice: GiteaUser;

beforeAll(async () => {
  gitea = await startGitea();
  bot = await gitea.createUser('pko-bot');
  alice = await gitea.createUser('alice');
  await gitea.createOrg(ORG);
  await installCRDs(
    admin,
    await readCRDs([path.resolve(ROOT, '..', 'shared', 'pko-crds', 'auto.pulumi.com_workspaces.yaml')]),
  );
  await bindControllerRole();
  const rendered = (await kustomize('config/workspace-logs')) as {
    kind: string;
    metadata: { name: string };
    rules?: V1PolicyRule[];
  }[];
  const role = rendered.find((o) => o.kind === 'ClusterRole' && o.metadata.name === LOGS_ROLE);
  if (!role?.rules) throw new Error('config/workspace-logs renders no workspace-logs ClusterRole');
  await admin
    .makeApiClient(RbacAuthorizationV1Api)
    .createClusterRole({ body: { metadata: { name: LOGS_ROLE }, rules: role.rules } })
    .catch(() => undefined);
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
    const repo = 'stuck';
    await gitea.createRepo(repo, { org: ORG });
    await gitea.addCollaborator(ORG, repo, bot, 'admin');
    await gitea.addCollaborator(ORG, repo, alice);
    const ns = await createTestNamespace('pv-stuck');
    // The workspace-logs role lets the controller read Workspaces in this namespace.
    await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'workspace-logs' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: LOGS_ROLE },
        subjects: [{ kind: 'User', name: 'controller', apiGroup: 'rbac.authorization.k8s.io' }],
      },
    });
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: [`--cluster-name=${CLUSTER}`, '--preview-webhook-bind-address=127.0.0.1:0'],
    });
    try {
      const hookSecret = randomBytes(16).toString('hex');
      await obj.secret('gitea-token', { token: bot.token });
      await obj.secret('hook', { token: hookSecret });
      await obj.provider('gitea', {
        type: 'gitea',
        address: `${gitea.url}/${ORG}`,
        secretRef: { name: 'gitea-token' },
      });
      await obj.alert('all', {
        providerRef: { name: 'gitea' },
        eventSources: [{ kind: 'Stack', name: '*' }],
      });
      const sim = new PkoSimulator(admin, ns, { version: 'v2' });
      await sim.createStack('app', {
        git: { projectRepo: `${gitea.url}/${ORG}/${repo}.git`, branch: 'main' },
      });
      await obj.waitReady('providers', 'gitea');
      await obj.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'pullrequestpreviews',
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'PullRequestPreview',
          metadata: { name: 'previews' },
          spec: {
            stackRef: { name: 'app' },
            providerRef: { name: 'gitea' },
            interval: '10m',
            startTimeout: '30s', // below the floor: 1m applies
            webhook: { secretRef: { name: 'hook' } },
          },
        },
      });
      await waitFor(
        async () => {
          const got = (await obj.custom.getNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: ns,
            plural: 'pullrequestpreviews',
            name: 'previews',
          })) as { status?: { lastSyncTime?: string } };
          return got.status?.lastSyncTime;
        },
        { timeoutMs: 30_000, what: 'the first sync' },
      );
      await gitea.addWebhook(ORG, repo, {
        url: `http://127.0.0.1:${String(ctl.handle.previewWebhookPort)}/hooks/${ns}/previews`,
        secret: hookSecret,
        events: ['pull_request', 'push'],
      });
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
