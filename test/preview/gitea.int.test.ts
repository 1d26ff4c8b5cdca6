/**
 * Pull-request previews end to end against a REAL Gitea (test/support/gitea.ts) on the real
 * control plane: real pull requests opened, pushed to, relabelled, retargeted and closed; real
 * signed Gitea webhooks reach the controller's receiver; preview Stacks are created, updated and
 * deleted by the in-process controller; PKO v2 preview runs are written by the simulator
 * (test/support/pko.ts); what lands on the pull request is read back from Gitea.
 *
 * The PullRequestPreview polls every 10 minutes, so everything that happens within a test after
 * its first sync is driven by Gitea's webhooks.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import { waitFor } from '../support/cluster.ts';
import { GROUP, Objects, VERSION } from '../support/controller.ts';
import {
  startGitea,
  type Gitea,
  type GiteaComment,
  type GiteaStatus,
  type GiteaUser,
} from '../support/gitea.ts';
import { startGiteaPreviews, type GiteaPreviews } from '../support/gitea-previews.ts';
import { installAdmission } from '../support/admission.ts';
import type { PkoSimulator } from '../support/pko.ts';
import { errorStatusCode } from '../../src/kube/client.ts';

const CLUSTER = 'e2e';
const ORG = 'acme';
const WAIT_MS = 20_000;
const TEST_MS = 180_000;

let gitea: Gitea;
let running: Gitea | undefined;
let bot: GiteaUser;
let alice: GiteaUser;
let mallory: GiteaUser;

beforeAll(async () => {
  gitea = await startGitea();
  running = gitea;
  bot = await gitea.createUser('pko-bot');
  alice = await gitea.createUser('alice');
  mallory = await gitea.createUser('mallory');
  await gitea.createOrg(ORG);
});

afterAll(async () => {
  await running?.stop();
});

function setup(prefix: string, repo: string, prp: Record<string, unknown> = {}): Promise<GiteaPreviews> {
  return startGiteaPreviews(gitea, {
    prefix,
    org: ORG,
    repo,
    bot,
    author: alice,
    cluster: CLUSTER,
    prp,
    stack: {
      spec: {
        destroyOnFinalize: true,
        envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Literal', literal: { value: 'x' } } },
      },
    },
    events: ['pull_request', 'pull_request_label', 'push'],
  });
}

interface Prp {
  metadata: { finalizers?: string[] };
  status?: {
    lastSyncTime?: string;
    activePreviews?: number;
    previews?: {
      number: number;
      headSHA: string;
      state: string;
      stackName?: string;
      reason?: string;
      commentURL?: string;
    }[];
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}

async function getPreview(obj: Objects): Promise<Prp | undefined> {
  try {
    return (await obj.custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: obj.namespace,
      plural: 'pullrequestpreviews',
      name: 'previews',
    })) as Prp;
  } catch (err) {
    if (errorStatusCode(err) === 404) return undefined;
    throw err;
  }
}

function waitForPreview(obj: Objects, ok: (p: Prp) => boolean, what: string): Promise<Prp> {
  return waitFor(
    async () => {
      const p = await getPreview(obj);
      return p !== undefined && ok(p) ? p : undefined;
    },
    { timeoutMs: WAIT_MS, what: `PullRequestPreview ${what}` },
  );
}

function waitForStack(
  sim: PkoSimulator,
  name: string,
  ok: (s: Stack) => boolean,
  what: string,
): Promise<Stack> {
  return waitFor(
    async () => {
      const s = await sim.findStack(name);
      return s !== undefined && s.metadata.deletionTimestamp === undefined && ok(s) ? s : undefined;
    },
    { timeoutMs: WAIT_MS, what: `Stack ${name} ${what}` },
  );
}

function waitForNoStack(sim: PkoSimulator, name: string): Promise<true> {
  return waitFor(async () => ((await sim.findStack(name)) === undefined ? true : undefined), {
    timeoutMs: WAIT_MS,
    what: `Stack ${name} deleted`,
  });
}

const botComments = async (repo: string, index: number): Promise<GiteaComment[]> =>
  (await gitea.comments(ORG, repo, index)).filter((c) => c.user.id === bot.id);

async function ours(repo: string, sha: string, context: string): Promise<GiteaStatus[]> {
  return (await gitea.statuses(ORG, repo, sha))
    .filter((s) => s.context === context)
    .sort((a, b) => a.id - b.id);
}

function waitForStatus(repo: string, sha: string, context: string, state: string): Promise<GiteaStatus[]> {
  return waitFor(
    async () => {
      const s = await ours(repo, sha, context);
      return s.at(-1)?.status === state ? s : undefined;
    },
    { timeoutMs: WAIT_MS, what: `status '${state}' of ${context} on ${sha.slice(0, 7)}` },
  );
}

async function branchWithCommit(repo: string, branch: string): Promise<string> {
  await gitea.createBranch(ORG, repo, branch);
  return gitea.commit(ORG, repo, { branch, file: `${branch}/Pulumi.yaml` });
}

describe('pull-request previews on a real Gitea 1.27.3', () => {
  it(
    'opening, pushing to and closing a real PR creates, updates and deletes its preview Stack (webhook-driven); the PR gets statuses of its own context and one edited comment; P02: a close mid-run resolves the pending status',
    async () => {
      const s = await setup('pv-flow', 'flow');
      try {
        const sha = await branchWithCommit(s.repo, 'feature');
        const t0 = Date.now();
        const pr = await gitea.openPull(ORG, s.repo, { head: 'feature', title: 'Grow the stack', as: alice });
        const stackName = `app-pr-${String(pr.number)}`;
        const created = await waitForStack(s.sim, stackName, () => true, 'created');
        console.log(`preview Stack created ${String(Date.now() - t0)} ms after the PR was opened (webhook)`);
        expect(created.spec).toMatchObject({
          commit: sha,
          preview: true,
          stack: 'acme/app/dev',
        });
        expect(created.spec?.branch).toBeUndefined();
        // The base's destroyOnFinalize: true is not copied; absent is PKO's false.
        expect(created.spec?.destroyOnFinalize).toBeUndefined();
        expect(created.spec?.['envRefs']).toEqual({
          PULUMI_ACCESS_TOKEN: { type: 'Literal', literal: { value: 'x' } },
        });
        expect(created.metadata.labels).toMatchObject({
          'notification.pko.dev/pull-request': String(pr.number),
          'notification.pko.dev/pull-request-preview': 'previews',
        });
        expect(created.metadata.annotations?.['notification.pko.dev/repository']).toBe(
          `${gitea.url}/${ORG}/${s.repo}.git`,
        );
        expect(created.metadata.ownerReferences).toEqual([
          expect.objectContaining({ kind: 'PullRequestPreview', name: 'previews', controller: true }),
        ]);

        // A preview run: the PR's head gets statuses of the preview Stack's own context and one comment.
        const context = `pko/${CLUSTER}/${s.ns}/${stackName}`;
        const run1 = await s.sim.startRun(stackName, { type: 'preview', commit: sha });
        await waitForStatus(s.repo, sha, context, 'pending');
        await s.sim.finishRun(run1, 'succeeded');
        await waitForStatus(s.repo, sha, context, 'success');
        const first = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) =>
              c.body.includes('Preview of stack acme/app/dev succeeded'),
            ),
          { timeoutMs: WAIT_MS, what: 'the preview comment' },
        );
        expect(first.body).toContain(`${s.ns}/${stackName}`);
        expect(first.body).toMatch(/\/previews\/[0-9a-f-]+\)/);
        // The base Stack's context is another one and was not touched.
        expect(await ours(s.repo, sha, `pko/${CLUSTER}/${s.ns}/app`)).toEqual([]);

        // A push moves the PR head: the webhook updates the preview Stack's commit.
        const sha2 = await gitea.gitPush(ORG, s.repo, 'feature', alice);
        await waitForStack(s.sim, stackName, (x) => x.spec?.commit === sha2, `at ${sha2.slice(0, 7)}`);
        const run2 = await s.sim.startRun(stackName, { type: 'preview', commit: sha2 });
        await waitForStatus(s.repo, sha2, context, 'pending');
        await s.sim.finishRun(run2, 'failed');
        await waitForStatus(s.repo, sha2, context, 'failure');
        const edited = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) =>
              c.body.includes('Preview of stack acme/app/dev failed'),
            ),
          { timeoutMs: WAIT_MS, what: 'the comment edited to the failure' },
        );
        expect(edited.id).toBe(first.id);
        expect(edited.body).toContain(sha2.slice(0, 7));
        expect(await botComments(s.repo, pr.number)).toHaveLength(1);
        const status = await waitForPreview(
          s.obj,
          (p) => p.status?.previews?.[0]?.headSHA === sha2,
          'shows the new head',
        );
        expect(status.status?.activePreviews).toBe(1);
        expect(status.status?.previews?.[0]).toMatchObject({ number: pr.number, state: 'Active', stackName });

        // P02: closed while a run is in flight → Stack deleted, pending status resolved.
        const sha3 = await gitea.gitPush(ORG, s.repo, 'feature', alice);
        await waitForStack(s.sim, stackName, (x) => x.spec?.commit === sha3, `at ${sha3.slice(0, 7)}`);
        await s.sim.startRun(stackName, { type: 'preview', commit: sha3 });
        await waitForStatus(s.repo, sha3, context, 'pending');
        await gitea.setPullState(ORG, s.repo, pr.number, 'closed');
        await waitForNoStack(s.sim, stackName);
        const resolved = await waitForStatus(s.repo, sha3, context, 'failure');
        expect(resolved.at(-1)?.description).toContain('preview cancelled: pull request closed');
        // The notice says which (issue 19): Gitea's pull request read by number is closed, unmerged.
        const closedNotice = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) => c.body.includes('**Preview stopped**')),
          { timeoutMs: WAIT_MS, what: 'the notice that the preview stopped' },
        );
        expect(closedNotice.body).toContain(
          `**Preview stopped**: this pull request was closed without merging. Preview Stack \`${stackName}\` was deleted.`,
        );
        await waitForPreview(s.obj, (p) => p.status?.activePreviews === 0, 'no previews');
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    "one comment follows the change: after a merge, the base Stack's up of the merge commit edits the PR's preview comment (same comment id) to say it is deployed, with its own status on the merge commit; Gitea's commits/{sha}/pull names the merged PR",
    async () => {
      const s = await setup('pv-follow', 'follow');
      try {
        const sha = await branchWithCommit(s.repo, 'grow');
        const pr = await gitea.openPull(ORG, s.repo, { head: 'grow', title: 'Grow', as: alice });
        const stackName = `app-pr-${String(pr.number)}`;
        const created = await waitForStack(s.sim, stackName, () => true, 'created');
        expect(created.metadata.annotations?.['notification.pko.dev/base-stack']).toBe('app');
        const run = await s.sim.startRun(stackName, { type: 'preview', commit: sha });
        await s.sim.finishRun(run, 'succeeded');
        const preview = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) =>
              c.body.includes('Preview of stack acme/app/dev succeeded'),
            ),
          { timeoutMs: WAIT_MS, what: 'the preview comment' },
        );

        const merged = await gitea.mergePull(ORG, s.repo, pr.number);
        const mergeSha = merged.merge_commit_sha ?? '';
        expect(mergeSha).toMatch(/^[0-9a-f]{40}$/);
        // Real Gitea names the merged pull request of the merge commit, and none of another commit.
        const byCommit = await gitea.api<{ number: number; merged: boolean }>(
          'GET',
          `/repos/${ORG}/${s.repo}/commits/${mergeSha}/pull`,
        );
        expect(byCommit.data).toMatchObject({ number: pr.number, merged: true });
        expect(
          (await gitea.api('GET', `/repos/${ORG}/${s.repo}/commits/${sha}/pull`, { expect: [200, 404] }))
            .status,
        ).toBe(404);
        await waitForNoStack(s.sim, stackName);
        // Issue 19: the merge removes the preview, and the notice job finds the PR merged into
        // main (one read by number): it posts no "Preview stopped" comment (the PR had no notice
        // to edit). Once it has decided, the PR still has only the preview comment.
        await waitFor(
          () =>
            Promise.resolve(
              s.ctl.logs
                .parsed()
                .some((l) => l.number === pr.number && String(l.msg).startsWith('pull request merged: no')) ||
                undefined,
            ),
          { timeoutMs: WAIT_MS, what: 'the notice job finding the PR merged' },
        );
        await s.ctl.handle.previews.reconciler.notices.idle();
        expect((await botComments(s.repo, pr.number)).map((c) => c.id)).toEqual([preview.id]);

        // PKO deploys the merge commit with the base Stack.
        const up = await s.sim.startRun('app', { type: 'up', commit: mergeSha });
        const baseContext = `pko/${CLUSTER}/${s.ns}/app`;
        await waitForStatus(s.repo, mergeSha, baseContext, 'pending');
        await s.sim.finishRun(up, 'succeeded');
        await waitForStatus(s.repo, mergeSha, baseContext, 'success');
        const deployed = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) =>
              c.body.includes(`**Deployed ${mergeSha.slice(0, 7)}**`),
            ),
          { timeoutMs: WAIT_MS, what: 'the comment edited to the deployment' },
        );
        expect(deployed.id).toBe(preview.id);
        expect(deployed.body).toContain('Update of stack acme/app/dev succeeded');
        expect(
          (await botComments(s.repo, pr.number)).filter((c) =>
            c.body.includes('pko-notification-controller:'),
          ),
        ).toHaveLength(1); // the deployment's comment (it was the preview's), nothing more

        // A failed deployment of a later merge commit of a PR without a preview comment adds none.
        const other = await branchWithCommit(s.repo, 'quiet');
        const pr2 = await gitea.openPull(ORG, s.repo, { head: 'quiet', title: 'Quiet', as: alice });
        await waitForStack(s.sim, `app-pr-${String(pr2.number)}`, (x) => x.spec?.commit === other, 'created');
        const merged2 = await gitea.mergePull(ORG, s.repo, pr2.number);
        const up2 = await s.sim.startRun('app', { type: 'up', commit: merged2.merge_commit_sha ?? '' });
        await s.sim.finishRun(up2, 'failed');
        await waitForStatus(s.repo, merged2.merge_commit_sha ?? '', baseContext, 'failure');
        // The whole send is done (status and comment step) once the Alert records it delivered.
        await waitFor(
          async () => {
            const a = await s.obj.get('alerts', 'all');
            const out = (a.status?.lastDelivery ?? []) as { result: string; event?: string }[];
            return (
              out.some((d) => d.event === `UpdateFailed ${s.ns}/app` && d.result === 'Delivered') || undefined
            );
          },
          { timeoutMs: WAIT_MS, what: 'the failed deployment delivered' },
        );
        expect(
          (await botComments(s.repo, pr2.number)).filter((c) => c.body.includes('Update of stack')),
        ).toEqual([]);
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    "N18: a result for an older head never replaces the newer head's comment (its own commit gets it); an older head whose run is aborted is not left pending: failure 'superseded by <sha>'",
    async () => {
      const s = await setup('pv-n18', 'late');
      try {
        const a = await branchWithCommit(s.repo, 'racy');
        const pr = await gitea.openPull(ORG, s.repo, { head: 'racy', title: 'Race', as: alice });
        const stackName = `app-pr-${String(pr.number)}`;
        const context = `pko/${CLUSTER}/${s.ns}/${stackName}`;
        await waitForStack(s.sim, stackName, () => true, 'created');
        const comment = (): Promise<GiteaComment | undefined> =>
          botComments(s.repo, pr.number).then((cs) => cs.find((c) => c.body.includes('Preview of stack')));
        const delivered = (reason: string): Promise<true> =>
          waitFor(
            async () => {
              const al = await s.obj.get('alerts', 'all');
              const out = (al.status?.lastDelivery ?? []) as { result: string; event?: string }[];
              const hit = out.some(
                (d) => d.event === `${reason} ${s.ns}/${stackName}` && d.result === 'Delivered',
              );
              return hit || undefined;
            },
            { timeoutMs: WAIT_MS, what: `${reason} delivered` },
          );

        // Variant 1: A runs, the head moves to B, A's result comes after the head moved.
        const runA = await s.sim.startRun(stackName, { type: 'preview', commit: a });
        await waitForStatus(s.repo, a, context, 'pending');
        const first = await waitFor(comment, { timeoutMs: WAIT_MS, what: "A's started comment" });
        expect(first.body).toContain(a);
        const b = await gitea.gitPush(ORG, s.repo, 'racy', alice);
        await waitForStack(s.sim, stackName, (x) => x.spec?.commit === b, `at ${b.slice(0, 7)}`);
        await s.sim.finishRun(runA, 'succeeded');
        // A's result is recorded on A's own status: the move's resolution ("superseded by B"
        // while pending) and the delivery take the same lock, so the result is the last word.
        const settled = await waitForStatus(s.repo, a, context, 'success');
        // (Its change set is unavailable here: no workspace pod; R22 says so before the summary.)
        expect(settled.at(-1)?.description).toMatch(
          /^(change set unavailable: .+ · )?Preview of stack acme\/app\/dev succeeded$/,
        );
        await delivered('PreviewSucceeded');
        // A's result is never shown in the comment: it still shows A started.
        expect((await comment())?.body).not.toContain('succeeded');
        const runB = await s.sim.startRun(stackName, { type: 'preview', commit: b });
        const onB = await waitFor(
          async () => ((await comment())?.body.includes(b) === true ? comment() : undefined),
          {
            timeoutMs: WAIT_MS,
            what: "the comment showing B's run",
          },
        );
        expect(onB.id).toBe(first.id);
        expect(onB.body).toContain('Preview of stack acme/app/dev started');
        await s.sim.finishRun(runB, 'succeeded');
        await waitForStatus(s.repo, b, context, 'success');
        await waitFor(async () => (await comment())?.body.includes('succeeded') === true || undefined, {
          timeoutMs: WAIT_MS,
          what: "B's result in the comment",
        });
        expect((await comment())?.body).toContain(b);

        // Variant 2: C's run is aborted when D arrives: C's status does not stay pending.
        const c = await gitea.gitPush(ORG, s.repo, 'racy', alice);
        await waitForStack(s.sim, stackName, (x) => x.spec?.commit === c, `at ${c.slice(0, 7)}`);
        const runC = await s.sim.startRun(stackName, { type: 'preview', commit: c });
        await waitForStatus(s.repo, c, context, 'pending');
        const d = await gitea.gitPush(ORG, s.repo, 'racy', alice);
        await waitForStack(s.sim, stackName, (x) => x.spec?.commit === d, `at ${d.slice(0, 7)}`);
        await s.sim.finishRun(runC, 'aborted');
        const resolved = await waitForStatus(s.repo, c, context, 'failure');
        expect(resolved.at(-1)?.description).toBe(`superseded by ${d.slice(0, 7)}`);
        expect(
          await botComments(s.repo, pr.number).then((cs) =>
            cs.filter((x) => x.body.includes('Preview of stack')),
          ),
        ).toHaveLength(1);
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    'F30: a fork PR and a PR by an author without write access get no preview Stack, and one comment each saying why (never repeated across syncs)',
    async () => {
      const s = await setup('pv-trust', 'trust');
      try {
        // mallory forks and opens a PR from her fork; she has no write access either.
        await gitea.fork(ORG, s.repo, mallory);
        await waitFor(
          async () =>
            (await gitea.api('GET', `/repos/mallory/${s.repo}`, { expect: [200, 404] })).status === 200 ||
            undefined,
          {
            timeoutMs: WAIT_MS,
            what: 'the fork',
          },
        );
        await gitea.commit('mallory', s.repo, { branch: 'main', file: 'evil/Pulumi.yaml', as: mallory });
        const forkPr = await gitea.openPull(ORG, s.repo, {
          head: 'mallory:main',
          title: 'From a fork',
          as: mallory,
        });
        // bob can read (an org member without write) and opens a PR from a branch alice pushed.
        const bob = await gitea.createUser(`bob${randomBytes(2).toString('hex')}`);
        await gitea.addCollaborator(ORG, s.repo, bob, 'read');
        await branchWithCommit(s.repo, 'bob-change');
        const readPr = await gitea.openPull(ORG, s.repo, {
          head: 'bob-change',
          title: 'Read-only author',
          as: bob,
        });

        const p = await waitForPreview(
          s.obj,
          (x) => (x.status?.previews ?? []).filter((e) => e.state === 'Untrusted').length === 2,
          'two untrusted pull requests',
        );
        const fork = p.status?.previews?.find((e) => e.number === forkPr.number);
        expect(fork?.reason).toContain('fork');
        expect(p.status?.previews?.find((e) => e.number === readPr.number)?.reason).toContain(
          `its author ${bob.username} has association NONE`,
        );
        expect(p.status?.activePreviews).toBe(0);
        const forkNotice = await waitFor(async () => (await botComments(s.repo, forkPr.number))[0], {
          timeoutMs: WAIT_MS,
          what: 'the fork notice',
        });
        expect(forkNotice.body).toContain('**No preview**');
        expect(forkNotice.body).toContain('fork');
        const readNotice = await waitFor(async () => (await botComments(s.repo, readPr.number))[0], {
          timeoutMs: WAIT_MS,
          what: 'the read-only notice',
        });
        expect(readNotice.body).toContain('has association NONE');

        // More syncs (webhooks from new pushes) change nothing: still one comment each, no Stack.
        await gitea.commit(ORG, s.repo, { branch: 'bob-change' });
        await waitForPreview(
          s.obj,
          (x) =>
            x.status?.previews?.some((e) => e.number === readPr.number && e.headSHA !== readPr.head.sha) ===
            true,
          'new head seen',
        );
        expect(await botComments(s.repo, forkPr.number)).toHaveLength(1);
        expect(await botComments(s.repo, readPr.number)).toHaveLength(1);
        const stacks = (await s.obj.custom.listNamespacedCustomObject({
          group: 'pulumi.com',
          version: 'v1',
          namespace: s.ns,
          plural: 'stacks',
        })) as { items: Stack[] };
        expect(stacks.items.map((x) => x.metadata.name)).toEqual(['app']);
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    'P01: with required label "preview", removing it deletes the preview Stack and the PR says why; adding it back recreates it. P03: retargeting to an untracked branch deletes it and the PR says so; back to main recreates it, a title edit writes nothing (R07)',
    async () => {
      const s = await setup('pv-label', 'label', { trust: { requiredLabels: ['preview'] } });
      try {
        const label = (
          await gitea.api<{ id: number }>('POST', `/repos/${ORG}/${s.repo}/labels`, {
            body: { name: 'preview', color: '#00aabb' },
            expect: [201],
          })
        ).data;
        const sha = await branchWithCommit(s.repo, 'labelled');
        const pr = await gitea.openPull(ORG, s.repo, { head: 'labelled', as: alice });
        const stackName = `app-pr-${String(pr.number)}`;
        await waitForPreview(
          s.obj,
          (x) => x.status?.previews?.[0]?.state === 'Untrusted',
          'untrusted without the label',
        );
        expect(await s.sim.findStack(stackName)).toBeUndefined();

        await gitea.api('POST', `/repos/${ORG}/${s.repo}/issues/${String(pr.number)}/labels`, {
          body: { labels: [label.id] },
          expect: [200],
        });
        await waitForStack(s.sim, stackName, (x) => x.spec?.commit === sha, 'created once labelled');
        const running = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) => c.body.includes('**Preview running**')),
          { timeoutMs: WAIT_MS, what: 'the notice edited to running' },
        );

        await gitea.api(
          'DELETE',
          `/repos/${ORG}/${s.repo}/issues/${String(pr.number)}/labels/${String(label.id)}`,
          {
            expect: [204],
          },
        );
        await waitForNoStack(s.sim, stackName);
        const stopped = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) => c.body.includes('**Previews stopped**')),
          { timeoutMs: WAIT_MS, what: 'the notice saying previews stopped' },
        );
        expect(stopped.id).toBe(running.id);
        expect(stopped.body).toContain("lacks the label 'preview'");
        // A later sync keeps saying so (it once turned the notice into "No preview" at once, so
        // that a slow reader never saw "Previews stopped").
        const synced = (await getPreview(s.obj))?.status?.lastSyncTime;
        await new Promise((r) => setTimeout(r, 1_100));
        await s.obj.custom.patchNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: s.ns,
          plural: 'pullrequestpreviews',
          name: 'previews',
          body: [
            {
              op: 'add',
              path: '/metadata/annotations',
              value: { 'notification.pko.dev/sync-requested': new Date().toISOString() },
            },
          ],
        });
        await waitForPreview(s.obj, (x) => x.status?.lastSyncTime !== synced, 'synced again');
        const later = (await botComments(s.repo, pr.number)).find((c) => c.id === running.id);
        expect(later?.body).toContain('**Previews stopped**');

        await gitea.api('POST', `/repos/${ORG}/${s.repo}/issues/${String(pr.number)}/labels`, {
          body: { labels: [label.id] },
          expect: [200],
        });
        await waitForStack(s.sim, stackName, (x) => x.spec?.commit === sha, 'recreated');

        // P03: retarget to a branch no PullRequestPreview tracks.
        await gitea.createBranch(ORG, s.repo, 'release');
        await gitea.api('PATCH', `/repos/${ORG}/${s.repo}/pulls/${String(pr.number)}`, {
          body: { base: 'release' },
          expect: [201],
        });
        await waitForNoStack(s.sim, stackName);
        const retargeted = await waitFor(
          async () =>
            (await botComments(s.repo, pr.number)).find((c) => c.body.includes('no longer targets `main`')),
          { timeoutMs: WAIT_MS, what: 'the notice saying the PR left main' },
        );
        expect(retargeted.id).toBe(running.id);
        expect(
          (await botComments(s.repo, pr.number)).filter((c) => c.body.includes('preview-notice')),
        ).toHaveLength(1);

        // R07 on Gitea: retargeted back to main → recreated; a title-only edit (Gitea's 'edited'
        // delivery) syncs and writes nothing.
        await gitea.api('PATCH', `/repos/${ORG}/${s.repo}/pulls/${String(pr.number)}`, {
          body: { base: 'main' },
          expect: [201],
        });
        const back = await waitForStack(s.sim, stackName, (x) => x.spec?.commit === sha, 'recreated on main');
        const beforeTitle = (await getPreview(s.obj))?.status?.lastSyncTime;
        await new Promise((r) => setTimeout(r, 1_100));
        await gitea.api('PATCH', `/repos/${ORG}/${s.repo}/pulls/${String(pr.number)}`, {
          body: { title: 'Only the title changed' },
          expect: [201],
        });
        await waitForPreview(
          s.obj,
          (x) => x.status?.lastSyncTime !== beforeTitle,
          'synced after the title edit',
        );
        expect((await s.sim.getStack(stackName)).metadata.resourceVersion).toBe(
          back.metadata.resourceVersion,
        );
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    'P04: deleting a PullRequestPreview with 3 preview Stacks removes all 3 (finalizer; this control plane runs no garbage collector) and says so in an Event; reconcileBaseOnPush: a push to main asks PKO to run the base Stack',
    async () => {
      // reconcileBaseOnPush is honoured only while the shipped admission policy checks it (confused deputy, as B10).
      await installAdmission();
      const s = await setup('pv-final', 'final', {
        webhook: { secretRef: { name: 'hook' }, reconcileBaseOnPush: true },
      });
      try {
        // A signed push to the base branch sets pulumi.com/reconciliation-request on the base Stack.
        expect(
          (await s.sim.getStack('app')).metadata.annotations?.['pulumi.com/reconciliation-request'],
        ).toBeUndefined();
        await gitea.commit(ORG, s.repo, { branch: 'main', file: 'base/change.txt' });
        await waitFor(
          async () =>
            (await s.sim.getStack('app')).metadata.annotations?.['pulumi.com/reconciliation-request'],
          { timeoutMs: WAIT_MS, what: 'the reconcile request on the base Stack' },
        );

        const numbers: number[] = [];
        for (const b of ['one', 'two', 'three']) {
          await branchWithCommit(s.repo, b);
          numbers.push((await gitea.openPull(ORG, s.repo, { head: b, as: alice })).number);
        }
        const p = await waitForPreview(s.obj, (x) => x.status?.activePreviews === 3, 'three previews');
        expect(p.metadata.finalizers).toContain('notification.pko.dev/preview-stacks');
        await s.obj.custom.deleteNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: s.ns,
          plural: 'pullrequestpreviews',
          name: 'previews',
        });
        for (const n of numbers) await waitForNoStack(s.sim, `app-pr-${String(n)}`);
        await waitFor(async () => ((await getPreview(s.obj)) === undefined ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'the PullRequestPreview gone',
        });
        const events = await s.obj.core.listNamespacedEvent({ namespace: s.ns });
        const msg = events.items.find((e) => e.reason === 'PreviewsDeleted')?.message ?? '';
        expect(msg).toContain('deleted 3 preview Stack(s)');
        for (const n of numbers) expect(msg).toContain(`app-pr-${String(n)}`);
        // The base Stack is untouched.
        expect(await s.sim.findStack('app')).toBeDefined();
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );
});

describe('fork previews allowed explicitly (real Gitea)', () => {
  it(
    "P05: a fork's PR whose head branch is 'main' gets a preview Stack named by the PR number, pinned to the fork's head SHA (never the base main)",
    async () => {
      const s = await setup('pv-fork', 'forked', {
        trust: { allowForks: true, authorAssociations: ['OWNER', 'MEMBER', 'COLLABORATOR', 'NONE'] },
      });
      try {
        const baseMain = await gitea.branchSha(ORG, s.repo, 'main');
        await gitea.fork(ORG, s.repo, mallory);
        await waitFor(
          async () =>
            (await gitea.api('GET', `/repos/mallory/${s.repo}`, { expect: [200, 404] })).status === 200 ||
            undefined,
          { timeoutMs: WAIT_MS, what: 'the fork' },
        );
        const forkHead = await gitea.commit('mallory', s.repo, {
          branch: 'main',
          file: 'fork/Pulumi.yaml',
          as: mallory,
        });
        const pr = await gitea.openPull(ORG, s.repo, {
          head: 'mallory:main',
          title: 'From a fork',
          as: mallory,
        });
        const stack = await waitForStack(
          s.sim,
          `app-pr-${String(pr.number)}`,
          () => true,
          'created for the fork PR',
        );
        expect(stack.spec?.commit).toBe(forkHead);
        expect(stack.spec?.commit).not.toBe(baseMain);
        expect(stack.spec?.branch).toBeUndefined();
        expect(stack.metadata.annotations?.['notification.pko.dev/head-ref']).toBe('main');
        // Gitea keeps the fork's head in the base repository (refs/pull/<n>/head), where PKO fetches it.
        const ref = await gitea.api<{ object: { sha: string } }[]>(
          'GET',
          `/repos/${ORG}/${s.repo}/git/refs/pull/${String(pr.number)}/head`,
        );
        expect(ref.data[0]?.object.sha).toBe(forkHead);
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );
});
