/**
 * The PullRequestPreview gate end to end on a REAL Gitea (test/support/gitea.ts) and the real
 * control plane: the controller carries `spec.gate` onto the preview Stack, PKO v2 preview runs
 * are written by the simulator (test/support/pko.ts), the change set comes from the workspace
 * pod's log — a recording of the real agent (test/fixtures/agent-logs/04-delete.log, 02-update.log)
 * served by the kubelet stand-in through the API server's `pods/log` — and the commit status is
 * read back from Gitea.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RbacAuthorizationV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import type { Stack } from '../../src/api/pko.ts';
import { installCRDs, readCRDs } from '../../src/kube/crds.ts';
import { kubeRequest } from '../../src/kube/client.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, Objects, VERSION, bindControllerRole, startInProcess } from '../support/controller.ts';
import { startGitea, type Gitea, type GiteaStatus, type GiteaUser } from '../support/gitea.ts';
import { KubeletStandIn, placeWorkspacePod } from '../support/kubelet-standin.ts';
import { ROOT, kustomize } from '../support/kubectl.ts';
import { PkoSimulator } from '../support/pko.ts';

const CLUSTER = 'gate';
const ORG = 'acme';
const WAIT_MS = 30_000;
const LOGS_ROLE = 'pko-notification-controller-workspace-logs';
const admin = kubeConfig('admin');

let gitea: Gitea;
let bot: GiteaUser;
let alice: GiteaUser;
let kubelet: KubeletStandIn;

/** The preview run of a recording of the real agent: its lines from the banner to the run's end. */
function recordedPreview(file: string): string[] {
  const lines = readFileSync(new URL(`../fixtures/agent-logs/${file}`, import.meta.url), 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  const start = lines.findIndex((l) => l.includes('\tPreviewing update ('));
  const end = lines.findIndex((l) => l.includes('\tpreview completed'));
  return lines.slice(start, end + 1);
}

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
  kubelet = await KubeletStandIn.start({ kubeConfig: admin });
}, 180_000);

afterAll(async () => {
  await kubelet.close();
  await gitea.stop();
});

/** The shipped workspace-logs ClusterRole bound to the user `controller` in `ns`, in force. */
async function grantLogs(ns: string): Promise<void> {
  await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: 'workspace-logs' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: LOGS_ROLE },
      subjects: [{ kind: 'User', name: 'controller', apiGroup: 'rbac.authorization.k8s.io' }],
    },
  });
  await waitFor(
    async () => {
      const review = await kubeRequest<{ status?: { allowed?: boolean } }>(kubeConfig('controller'), {
        method: 'POST',
        path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { namespace: ns, verb: 'get', resource: 'pods', subresource: 'log' } },
        },
      });
      return review.status?.allowed === true;
    },
    { timeoutMs: WAIT_MS, what: `get pods/log allowed for the user controller in ${ns}` },
  );
}

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
    const repo = 'gated';
    await gitea.createRepo(repo, { org: ORG });
    await gitea.addCollaborator(ORG, repo, bot, 'admin');
    await gitea.addCollaborator(ORG, repo, alice);
    const ns = await createTestNamespace('pv-gate');
    await grantLogs(ns);
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
            webhook: { secretRef: { name: 'hook' } },
            gate: { operations: ['delete', 'replace'], resourceTypes: ['pkotest:*'] },
          },
        },
      });
      await gitea.createBranch(ORG, repo, 'shrink');
      const sha1 = await gitea.commit(ORG, repo, { branch: 'shrink', file: 'shrink/Pulumi.yaml' });
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
        { timeoutMs: WAIT_MS, what: 'the first sync' },
      );
      await gitea.addWebhook(ORG, repo, {
        url: `http://127.0.0.1:${String(ctl.handle.previewWebhookPort)}/hooks/${ns}/previews`,
        secret: hookSecret,
        events: ['pull_request', 'push'],
      });
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
      kubelet.setLog(ns, pod, 'pulumi', []);
      const sha2 = await gitea.gitPush(ORG, repo, 'shrink', alice);
      await stackWith((s) => s.spec?.commit === sha2, `at ${sha2.slice(0, 7)}`);
      await new Promise((r) => setTimeout(r, 1_100)); // sinceTime is in whole seconds
      const run2 = await sim.startRun(stackName, { type: 'preview', commit: sha2 });
      for (const line of recordedPreview('04-delete.log')) kubelet.append(ns, pod, 'pulumi', line);
      await sim.finishRun(run2, 'succeeded', { permalink: null });
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
      kubelet.setLog(ns, pod, 'pulumi', []);
      const sha3 = await gitea.gitPush(ORG, repo, 'shrink', alice);
      await stackWith((s) => s.spec?.commit === sha3, `at ${sha3.slice(0, 7)}`);
      await new Promise((r) => setTimeout(r, 1_100));
      const run3 = await sim.startRun(stackName, { type: 'preview', commit: sha3 });
      for (const line of recordedPreview('04-delete.log')) kubelet.append(ns, pod, 'pulumi', line);
      await sim.finishRun(run3, 'succeeded', { permalink: null });
      const passed = await finalStatus(repo, sha3, context);
      expect(passed.status).toBe('success');
      expect(passed.description).toMatch(/^-1 to delete · Preview of stack/);
    } finally {
      await ctl.stop();
    }
  }, 240_000);
});
