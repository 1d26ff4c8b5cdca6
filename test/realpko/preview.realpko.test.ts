/**
 * Issue 19 end to end: what a pull request's preview would change, on the real control plane
 * with REAL PKO v2.9.0 (operator and agent; test/support/realpko.ts), a REAL Gitea 1.27.3
 * (test/support/gitea.ts) and the controller in-process with a `gitea` Provider, an Alert for
 * every Stack and a PullRequestPreview on the base Stack `app`, which deploys `main`.
 *
 * - The program is Pulumi YAML with resources of the cloud-free test provider
 *   `pulumi-resource-pkotest` (test/realpko/provider): the real agent runs a real `pulumi up`
 *   for `app` and a real `pulumi preview --diff` for each preview Stack, against the same
 *   file backend (a preview changes no state).
 * - PKO v2 clones only `https` repositories: the workspaces clone through a TLS front
 *   (test/support/tls-front.ts) to Gitea; the controller talks to Gitea's API directly.
 * - The base Stack's workspace and the preview Stacks' workspaces live at once: the workspace
 *   stand-in runs one agent per workspace behind the router at the operator's
 *   `WORKSPACE_LOCALHOST` (test/support/workspace-router.ts).
 * - The change set is read through the real API server's `pods/log` (the kubelet stand-in
 *   serves the real agent's output), as the user `controller` with the shipped default
 *   ClusterRole and the shipped workspace-logs ClusterRole (config/workspace-logs) bound in the
 *   namespace.
 * - Gitea's signed webhooks drive the PullRequestPreview (its poll is a backstop).
 *
 * The steps are `it` blocks of one scenario, in order, sharing the pull requests: the base up;
 * PR 1's preview and a second push; a fork's PR; PR 1 merged (the base Stack's real `up` of the
 * merge commit edits PR 1's comment to "Deployed", and no second comment of ours appears);
 * `spec.gate` failing a PR that deletes `b` and passing once `b` is back; and `spec.startTimeout`
 * reporting a PR whose workspace cannot install (a plugin version not in the plugin cache) with
 * the reason PKO's Workspace gives.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { ControllerHandle } from '../../src/controller.ts';
import { errorStatusCode } from '../../src/kube/client.ts';
import type { Stack } from '../../src/api/pko.ts';
import { GROUP, Objects, VERSION, type LogCapture } from '../support/controller.ts';
import {
  startGitea,
  type Gitea,
  type GiteaComment,
  type GiteaPull,
  type GiteaStatus,
  type GiteaUser,
} from '../support/gitea.ts';
import {
  REALPKO_VERSIONS,
  createStack,
  requestReconcile,
  stackSpecBase,
  type PkoV2,
  type RealPkoPlane,
} from '../support/realpko.ts';
import { startTlsFront } from '../support/tls-front.ts';
import {
  CLUSTER,
  RunLog,
  commentWaiter,
  controllerLauncher,
  getStack,
  report,
  startPkoV2Scene,
  tempDir,
  until,
} from './kit.ts';

const log = new RunLog('realpko-preview');
const NS = 'realpko-preview';
const ORG = 'acme';
const REPO = 'app';
/** Value of a Secret the base Stack references (`envRefs`). */
const APP_TOKEN = 'tok-e2e-5f3a9c1d7b';
/** Bound of each wait for a real PKO run and what follows it (generous: 2 shared cores, CPU hogs). */
const RUN_MS = 300_000;
const STEP_MS = 900_000;

const cleanups: (() => Promise<void>)[] = [];
let plane: RealPkoPlane;
let pko: PkoV2;
let gitea: Gitea;
let bot: GiteaUser;
let alice: GiteaUser;
let controller: ControllerHandle;
/** The controller's log lines (JSON). */
let controllerLogs: LogCapture;
let obj: Objects;
const t0 = Date.now();
const timings: Record<string, number> = {};

/** The scenario's shared state, filled in by the steps in order. */
const state: {
  pr?: GiteaPull;
  head1?: string;
  head2?: string;
  commentId?: number;
  mainSha?: string;
  /** The fork pull request's head. */
  forkHead?: string;
  /** The merge commit of PR 1 on main. */
  mergeSha?: string;
  /** The base Stack's `spec.projectRepo` (through the TLS front). */
  projectRepo?: string;
} = {};

/** Pulumi YAML program: pkotest Values `name: value` (no outputs). */
function program(values: Record<string, string>): string {
  return [
    'name: pkonc-preview',
    'runtime: yaml',
    'resources:',
    ...Object.entries(values).flatMap(([name, value]) => [
      `  ${name}:`,
      '    type: pkotest:index:Value',
      '    properties:',
      `      value: ${value}`,
      // Named, so that PKO's `pulumi install` finds it in the plugin cache instead of asking GitHub.
      '    options:',
      `      version: ${REALPKO_VERSIONS.pkotest}`,
    ]),
    '',
  ].join('\n');
}

const previewStack = (n: number): string => `app-pr-${String(n)}`;
const contextOf = (stack: string): string => `pko/${CLUSTER}/${NS}/${stack}`;

async function botComments(index: number): Promise<GiteaComment[]> {
  return (await gitea.comments(ORG, REPO, index)).filter((c) => c.user.id === bot.id);
}

/** Waits (RUN_MS) for a comment of ours on pull request `pr` that `predicate` accepts. */
const waitForComment = commentWaiter(botComments, { timeoutMs: RUN_MS, log });

/** Our statuses of `context` on `sha`, oldest first. */
async function statuses(sha: string, context: string): Promise<GiteaStatus[]> {
  return (await gitea.statuses(ORG, REPO, sha))
    .filter((s) => s.context === context)
    .sort((a, b) => a.id - b.id);
}

/** Waits (RUN_MS) for a status of ours of `context` on `sha` that `predicate` accepts. */
function waitForStatus(
  sha: string,
  context: string,
  predicate: (s: GiteaStatus) => boolean,
  what: string,
): Promise<GiteaStatus> {
  return until(what, async () => (await statuses(sha, context)).find(predicate), { timeoutMs: RUN_MS, log });
}

async function stackOrNone(name: string): Promise<Stack | undefined> {
  try {
    return await getStack(plane.admin, NS, name);
  } catch (err) {
    if (errorStatusCode(err) === 404) return undefined;
    throw err;
  }
}

function mark(step: string): void {
  timings[step] = Math.round((Date.now() - t0) / 100) / 10;
  log.add(`--- ${step} at ${String(timings[step])} s`);
}

beforeAll(async () => {
  // Real PKO v2 for NS; the optional workspace-logs ClusterRole, as shipped, bound to `controller` in NS.
  const scene = await startPkoV2Scene(NS, log, cleanups);
  ({ plane, pko } = scene);

  gitea = await startGitea();
  cleanups.push(() => gitea.stop());
  bot = await gitea.createUser('pko-bot');
  alice = await gitea.createUser('alice');
  await gitea.createOrg(ORG);
  await gitea.createRepo(REPO, { org: ORG });
  // Admin: Gitea shows other users' permissions (who may get a preview) to repository admins only.
  await gitea.addCollaborator(ORG, REPO, bot, 'admin');
  await gitea.addCollaborator(ORG, REPO, alice);
  state.mainSha = await gitea.writeFile(ORG, REPO, {
    branch: 'main',
    file: 'Pulumi.yaml',
    content: program({ a: 'one', b: 'bee' }),
    message: 'program: a and b',
  });
  const front = await startTlsFront(gitea.url, scene.pki);
  cleanups.push(() => front.close());

  // Gitea listens on 127.0.0.1 (allowed by the launcher).
  const launcher = controllerLauncher(plane, NS, log, {
    flags: ['--preview-webhook-bind-address=127.0.0.1:0'],
  });
  controllerLogs = launcher.logs;
  controller = await launcher.launch();
  cleanups.push(() => controller.stop());

  obj = new Objects(NS, plane.admin);
  const hookSecret = randomBytes(16).toString('hex');
  await obj.secret('gitea-token', { token: bot.token });
  await obj.secret('hook', { token: hookSecret });
  await obj.provider('gitea', {
    type: 'gitea',
    address: `${gitea.url}/${ORG}`,
    secretRef: { name: 'gitea-token' },
  });
  await obj.alert('all', { providerRef: { name: 'gitea' }, eventSources: [{ kind: 'Stack', name: '*' }] });
  await obj.waitReady('providers', 'gitea');
  await obj.waitReady('alerts', 'all');

  state.projectRepo = `${front.url}/${ORG}/${REPO}.git`;
  // A Secret the Stack references: its value must never reach the forge (the fork step puts it
  // in the program as plain text, which Pulumi does not mask).
  await obj.secret('app-token', { token: APP_TOKEN });
  const base = stackSpecBase(await tempDir('backend'));
  await createStack(plane.admin, NS, 'app', {
    ...base,
    projectRepo: state.projectRepo,
    envRefs: {
      ...(base['envRefs'] as Record<string, unknown>),
      APP_TOKEN: { type: 'Secret', secret: { name: 'app-token', key: 'token' } },
    },
  });
  await obj.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: NS,
    plural: 'pullrequestpreviews',
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'PullRequestPreview',
      metadata: { name: 'previews' },
      spec: {
        stackRef: { name: 'app' },
        providerRef: { name: 'gitea' },
        interval: '1m',
        webhook: { secretRef: { name: 'hook' } },
        // Forks of collaborators are previewed too (the fork step below).
        trust: { allowForks: true },
      },
    },
  });
  await gitea.addWebhook(ORG, REPO, {
    url: `http://127.0.0.1:${String(controller.previewWebhookPort)}/hooks/${NS}/previews`,
    secret: hookSecret,
    events: ['pull_request', 'pull_request_label', 'push'],
  });
  mark('setup');
}, 600_000);

afterAll(async () => {
  for (const fn of cleanups.reverse())
    await fn().catch((err: unknown) => {
      log.add(`cleanup: ${(err as Error).message}`);
    });
  await report({ name: 'preview e2e', timings });
}, 120_000);

describe('a pull request preview on real PKO v2 and real Gitea (issue 19)', () => {
  it(
    'the base Stack `app` deploys main with a real up',
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(120)}`);
      });
      const stack = await until(
        'app succeeded on main',
        async () => {
          const s = await getStack(plane.admin, NS, 'app');
          return s.status?.lastUpdate?.state === 'succeeded' && s;
        },
        { timeoutMs: RUN_MS, intervalMs: 500, log },
      );
      expect(stack.status?.lastUpdate?.lastSuccessfulCommit).toBe(state.mainSha);
      // The up's applied change set reached main's commit status (the base Stack's own context).
      const done = await waitForStatus(
        state.mainSha ?? '',
        contextOf('app'),
        (s) => s.status === 'success',
        'success status of app on main',
      );
      // The CLI counts the root `pulumi:pulumi:Stack` resource among the created (as its summary says).
      expect(done.description).toMatch(/^\+3 created\b/);
      mark('base up');
    },
    STEP_MS,
  );

  it(
    "opening a PR runs a real preview whose change set lands in the PR's one comment and its commit status",
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(120)}`);
      });
      await gitea.createBranch(ORG, REPO, 'feature', 'main', alice);
      const head1 = await gitea.writeFile(ORG, REPO, {
        branch: 'feature',
        file: 'Pulumi.yaml',
        content: program({ a: 'two', b: 'bee', c: 'see' }),
        message: 'change a, add c',
        as: alice,
      });
      state.head1 = head1;
      const pr = await gitea.openPull(ORG, REPO, { head: 'feature', title: 'Change a, add c', as: alice });
      state.pr = pr;
      const name = previewStack(pr.number);
      const created = await until('preview Stack created', () => stackOrNone(name), {
        timeoutMs: RUN_MS,
        log,
      });
      // Retain (src/preview/stack.ts): the pod, and the log the change set is read from, outlive the run.
      expect(created.spec).toMatchObject({
        commit: head1,
        preview: true,
        stack: 'dev',
        workspaceReclaimPolicy: 'Retain',
      });
      mark('preview Stack created');

      const ctx = contextOf(name);
      const success = await waitForStatus(
        head1,
        ctx,
        (s) => s.status === 'success',
        `success status of ${name} on the PR head`,
      );
      mark('preview status success');
      // One run for the head: the spec was written once (PKO drops zero values when it adds its
      // finalizer; a controller putting them back made a new generation and a second preview).
      expect((await getStack(plane.admin, NS, name)).metadata.generation).toBe(1);
      expect(success.description).toMatch(/^\+1 to create, ~1 to update\b/);
      expect((await statuses(head1, ctx)).map((s) => [s.status, s.description])).toEqual([
        ['pending', 'Preview of stack dev started'],
        ['success', '+1 to create, ~1 to update · Preview of stack dev succeeded'],
      ]);
      const comment = await waitForComment(
        pr.number,
        (c) => c.body.includes('to create'),
        'the preview comment with the change set',
      );
      mark('preview comment');
      log.add(`comment ${String(comment.id)}:\n${comment.body}`);
      expect(comment.body).toContain('+1 to create, ~1 to update');
      // Both resources by name, with their type, and the changed property's line.
      expect(comment.body).toMatch(/`c` \(`pkotest:index:Value`\)/);
      expect(comment.body).toMatch(/`a` \(`pkotest:index:Value`\)/);
      expect(comment.body).toContain('~ value: "one" => "two"');
      expect(comment.body).not.toMatch(/`b` \(/);
      expect(comment.body).toContain(head1);
      // One comment of ours on the PR.
      expect((await botComments(pr.number)).map((c) => c.id)).toEqual([comment.id]);
      state.commentId = comment.id;
    },
    STEP_MS,
  );

  it(
    'a second push edits the same comment with the new counts and SHA',
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(120)}`);
      });
      const pr = state.pr;
      if (!pr || state.commentId === undefined || state.head1 === undefined)
        throw new Error('the PR step did not pass');
      const head2 = await gitea.writeFile(ORG, REPO, {
        branch: 'feature',
        file: 'Pulumi.yaml',
        content: program({ a: 'two', b: 'bee', c: 'see', d: 'dee' }),
        message: 'add d',
        as: alice,
      });
      state.head2 = head2;
      const name = previewStack(pr.number);
      await until(
        'preview Stack on the new head',
        async () => (await stackOrNone(name))?.spec?.commit === head2,
        { timeoutMs: RUN_MS, log },
      );
      const success = await waitForStatus(
        head2,
        contextOf(name),
        (s) => s.status === 'success',
        `success status of ${name} on the new head`,
      );
      expect(success.description).toMatch(/^\+2 to create, ~1 to update\b/);
      expect((await getStack(plane.admin, NS, name)).metadata.generation).toBe(2);
      const edited = await waitForComment(
        pr.number,
        (c) => c.body.includes(head2) && c.body.includes('to create'),
        'the comment edited for the new head',
      );
      mark('second preview comment');
      log.add(`comment ${String(edited.id)}:\n${edited.body}`);
      expect(edited.id).toBe(state.commentId);
      expect(edited.body).toContain('+2 to create, ~1 to update');
      expect(edited.body).toMatch(/`d` \(`pkotest:index:Value`\)/);
      expect(edited.body).toMatch(/`c` \(`pkotest:index:Value`\)/);
      expect(edited.body).toContain('~ value: "one" => "two"');
      expect(edited.body).not.toContain(state.head1);
      expect((await botComments(pr.number)).map((c) => c.id)).toEqual([state.commentId]);
      expect(pko.standIn.errors).toEqual([]);
      expect(pko.router.unrouted).toEqual([]);
    },
    STEP_MS,
  );

  it(
    "a fork's pull request (trust.allowForks) is previewed from the base repository by SHA, its change set in its own comment",
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(120)}`);
      });
      // alice (a collaborator) forks; her fork's main changes b (to a Secret's text) and adds e.
      await gitea.fork(ORG, REPO, alice);
      await until(
        'the fork',
        async () =>
          (await gitea.api('GET', `/repos/${alice.username}/${REPO}`, { expect: [200, 404] })).status === 200,
        { timeoutMs: RUN_MS, log },
      );
      const forkHead = await gitea.writeFile(alice.username, REPO, {
        branch: 'main',
        file: 'Pulumi.yaml',
        // b's new value is the text of a Secret the Stack references: Pulumi shows it in the clear.
        content: program({ a: 'one', b: APP_TOKEN, e: 'ee' }),
        message: 'change b, add e',
        as: alice,
      });
      state.forkHead = forkHead;
      const pr = await gitea.openPull(ORG, REPO, {
        head: `${alice.username}:main`,
        title: 'From a fork',
        as: alice,
      });
      const name = previewStack(pr.number);
      const created = await until('fork preview Stack created', () => stackOrNone(name), {
        timeoutMs: RUN_MS,
        log,
      });
      // The base repository, pinned to the fork's head (Gitea keeps it under refs/pull/<n>/head).
      expect(created.spec).toMatchObject({ commit: forkHead, preview: true, projectRepo: state.projectRepo });
      const success = await waitForStatus(
        forkHead,
        contextOf(name),
        (s) => s.status === 'success',
        `success status of ${name} on the fork's head`,
      );
      expect(success.description).toMatch(/^\+1 to create, ~1 to update\b/);
      expect((await getStack(plane.admin, NS, name)).metadata.generation).toBe(1);
      const comment = await waitForComment(
        pr.number,
        (c) => c.body.includes('to create'),
        "the fork PR's preview comment",
      );
      mark('fork preview comment');
      log.add(`comment ${String(comment.id)}:\n${comment.body}`);
      expect(comment.body).toContain('+1 to create, ~1 to update');
      expect(comment.body).toMatch(/`e` \(`pkotest:index:Value`\)/);
      expect(comment.body).toMatch(/`b` \(`pkotest:index:Value`\)/);
      // Redacted before the first post (forges keep a comment's edit history); still shown as changed.
      expect(comment.body).toContain('~ value: "bee" => "[redacted]"');
      expect(comment.body).not.toContain(APP_TOKEN);
      expect(success.description).not.toContain(APP_TOKEN);
      expect(comment.body).toContain(forkHead);
      expect((await botComments(pr.number)).map((c) => c.id)).toEqual([comment.id]);
      // The first PR's comment is its own, untouched.
      const first = (await botComments(state.pr?.number ?? 0)).map((c) => c.id);
      expect(first).toEqual([state.commentId]);
      expect(pko.standIn.errors).toEqual([]);
    },
    STEP_MS,
  );
  it(
    "merging PR 1: the base Stack's real up of the merge commit edits the PR's same comment to what it deployed",
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(160)}`);
      });
      const pr = state.pr;
      if (!pr || state.commentId === undefined || state.head2 === undefined)
        throw new Error('the PR steps did not pass');
      // Gitea answers 405 while it computes mergeability: mergePull retries.
      const merged = await gitea.mergePull(ORG, REPO, pr.number);
      expect(merged.merged).toBe(true);
      const mergeSha = merged.merge_commit_sha;
      if (mergeSha === null)
        throw new Error(`Gitea shows PR ${String(pr.number)} merged without a merge commit`);
      state.mergeSha = mergeSha;
      expect(await gitea.branchSha(ORG, REPO, 'main')).toBe(mergeSha);
      // PKO polls the branch every minute (resyncFrequencySeconds); ask it at once instead.
      await requestReconcile(plane.admin, NS, 'app');
      const stack = await until(
        'app deployed the merge commit',
        async () => {
          const s = await getStack(plane.admin, NS, 'app');
          return s.status?.lastUpdate?.lastSuccessfulCommit === mergeSha && s;
        },
        { timeoutMs: RUN_MS, intervalMs: 500, log },
      );
      expect(stack.status?.lastUpdate?.state).toBe('succeeded');
      // The merge commit's own status, under the base Stack's context: what the up applied
      // (main had a and b; the merge changes a and adds c and d).
      const done = await waitForStatus(
        mergeSha,
        contextOf('app'),
        (s) => s.status === 'success',
        'success status of app on the merge commit',
      );
      expect(done.description).toMatch(/^\+2 created, ~1 updated\b/);
      const deployed = await waitForComment(
        pr.number,
        (c) => c.body.includes('Deployed'),
        "PR 1's comment edited to the deployment",
      );
      mark('merged comment');
      log.add(`comment ${String(deployed.id)}:\n${deployed.body}`);
      // The same comment the previews wrote, and still the only one of ours on the PR.
      expect(deployed.id).toBe(state.commentId);
      expect(deployed.body).toContain(
        `**Deployed ${mergeSha.slice(0, 7)}**: +2 created, ~1 updated · this pull request was merged; this comment showed its preview before.`,
      );
      expect(deployed.body).toMatch(/`c` \(`pkotest:index:Value`\)/);
      expect(deployed.body).toMatch(/`d` \(`pkotest:index:Value`\)/);
      expect(deployed.body).toMatch(/`a` \(`pkotest:index:Value`\)/);
      expect(deployed.body).toContain('~ value: "one" => "two"');
      expect(deployed.body).toContain(mergeSha);
      // The preview's text is gone: the comment says what was applied, not what would be.
      expect(deployed.body).not.toContain('to create');
      expect(deployed.body).not.toContain(state.head2);
      // The PR is merged: the controller deletes its preview Stack.
      await until(
        'preview Stack of PR 1 deleted',
        async () => (await stackOrNone(previewStack(pr.number))) === undefined,
        {
          timeoutMs: RUN_MS,
          log,
        },
      );
      mark('merged preview deleted');
      // Issue 19: the controller reads PR 1 by number, finds it merged into main and posts no
      // "Preview stopped" notice (the deployment is reported in the preview's comment).
      await until(
        'the notice job finding PR 1 merged',
        () =>
          Promise.resolve(
            controllerLogs
              .parsed()
              .some((l) => l.number === pr.number && String(l.msg).startsWith('pull request merged: no')),
          ),
        { timeoutMs: RUN_MS, log },
      );
      await controller.previews.reconciler.notices.idle();
      // Exactly one comment of ours on the merged PR: the preview's, now the deployment's.
      expect((await botComments(pr.number)).map((c) => c.id)).toEqual([state.commentId]);
      expect(pko.standIn.errors).toEqual([]);
    },
    STEP_MS,
  );

  it(
    "a gate on deletes fails the preview's commit status of a PR that deletes `b`; restoring `b` passes it",
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(160)}`);
      });
      if (state.mergeSha === undefined || state.forkHead === undefined)
        throw new Error('the merge step did not pass');
      await obj.custom.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: NS,
          plural: 'pullrequestpreviews',
          name: 'previews',
          body: { spec: { gate: { operations: ['delete', 'replace'] } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      // The existing preview (the fork's) is re-annotated with the gate, without a new run.
      const fork = previewStack(2);
      const annotated = await until(
        `${fork} annotated with the gate`,
        async () => {
          const s = await stackOrNone(fork);
          return s?.metadata.annotations?.['notification.pko.dev/gate'] !== undefined && s;
        },
        { timeoutMs: RUN_MS, log },
      );
      expect(JSON.parse(annotated.metadata.annotations?.['notification.pko.dev/gate'] ?? '')).toMatchObject({
        operations: ['delete', 'replace'],
      });
      expect(annotated.metadata.generation).toBe(1);

      await gitea.createBranch(ORG, REPO, 'drop-b', 'main', alice);
      const dropHead = await gitea.writeFile(ORG, REPO, {
        branch: 'drop-b',
        file: 'Pulumi.yaml',
        content: program({ a: 'two', c: 'see', d: 'dee' }),
        message: 'drop b',
        as: alice,
      });
      const pr = await gitea.openPull(ORG, REPO, { head: 'drop-b', title: 'Drop b', as: alice });
      const name = previewStack(pr.number);
      const ctx = contextOf(name);
      const failed = await waitForStatus(
        dropHead,
        ctx,
        (s) => s.status !== 'pending',
        `failure status of ${name} on the head that deletes b`,
      );
      mark('gate failure status');
      expect([failed.status, failed.description]).toEqual([
        'failure',
        'gate: 1 to delete: pkotest:index:Value::b',
      ]);
      const gated = await waitForComment(
        pr.number,
        (c) => c.body.includes('to delete'),
        'the gated preview comment',
      );
      log.add(`comment ${String(gated.id)}:\n${gated.body}`);
      expect(gated.body).toContain('**🚧 gate: 1 to delete: pkotest:index:Value::b**');
      expect(gated.body).toContain('-1 to delete');
      expect(gated.body).toMatch(/`b` \(`pkotest:index:Value`\)/);
      expect(gated.body).toContain(dropHead);

      // b comes back (and e is added): nothing gated is planned, the status is the ordinary one.
      const restoreHead = await gitea.writeFile(ORG, REPO, {
        branch: 'drop-b',
        file: 'Pulumi.yaml',
        content: program({ a: 'two', b: 'bee', c: 'see', d: 'dee', e: 'ee' }),
        message: 'keep b after all, add e',
        as: alice,
      });
      const passed = await waitForStatus(
        restoreHead,
        ctx,
        (s) => s.status !== 'pending',
        `status of ${name} on the head that restores b`,
      );
      mark('gate passes');
      expect([passed.status, passed.description]).toEqual([
        'success',
        '+1 to create · Preview of stack dev succeeded',
      ]);
      const edited = await waitForComment(
        pr.number,
        (c) => c.body.includes(restoreHead) && c.body.includes('to create'),
        'the comment edited for the restoring head',
      );
      log.add(`comment ${String(edited.id)}:\n${edited.body}`);
      expect(edited.id).toBe(gated.id);
      expect(edited.body).not.toContain('gate:');
      expect(edited.body).toContain('+1 to create');
      // The fork's preview ran once: the gate's annotation made no new run.
      expect((await getStack(plane.admin, NS, fork)).metadata.generation).toBe(1);
      expect((await statuses(state.forkHead, contextOf(fork))).map((s) => s.status)).toEqual([
        'pending',
        'success',
      ]);
      expect(pko.standIn.errors).toEqual([]);
    },
    STEP_MS,
  );
  it(
    "a PR whose workspace cannot install is reported after startTimeout with the reason PKO's Workspace gives",
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(160)}`);
      });
      await obj.custom.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: NS,
          plural: 'pullrequestpreviews',
          name: 'previews',
          body: { spec: { startTimeout: '1m' } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await gitea.createBranch(ORG, REPO, 'new-plugin', 'main', alice);
      // A plugin version the workspace's plugin cache does not hold: `pulumi install` would
      // download it, which fails offline, and PKO's Workspace never becomes ready.
      const head = await gitea.writeFile(ORG, REPO, {
        branch: 'new-plugin',
        file: 'Pulumi.yaml',
        content: program({ a: 'two', b: 'bee' }).replaceAll(
          `version: ${REALPKO_VERSIONS.pkotest}`,
          'version: 99.0.0',
        ),
        message: 'pkotest 99',
        as: alice,
      });
      const opened = Date.now();
      const pr = await gitea.openPull(ORG, REPO, { head: 'new-plugin', title: 'pkotest 99', as: alice });
      const name = previewStack(pr.number);
      const failed = await waitForStatus(
        head,
        contextOf(name),
        (s) => s.status === 'failure',
        `failure status of ${name} on a head PKO never runs`,
      );
      mark('not started status');
      const waitedMs = Date.now() - opened;
      log.add(`not started after ${String(waitedMs)} ms: ${failed.description}`);
      expect(waitedMs).toBeGreaterThanOrEqual(60_000);
      // The reason is the real Workspace's Ready condition, as PKO wrote it.
      const ws = (await obj.custom.getNamespacedCustomObject({
        group: 'auto.pulumi.com',
        version: 'v1alpha1',
        namespace: NS,
        plural: 'workspaces',
        name,
      })) as {
        status?: { conditions?: { type: string; status: string; reason: string; message?: string }[] };
      };
      const ready = ws.status?.conditions?.find((c) => c.type === 'Ready');
      log.add(`Workspace ${name} Ready: ${JSON.stringify(ready)}`);
      expect(ready?.status).toBe('False');
      const said = `Workspace ${name} Ready=False (${ready?.reason ?? ''})`;
      expect(failed.description).toMatch(/^preview not started after 1m: /);
      expect(failed.description).toContain(said);
      const stack = await getStack(plane.admin, NS, name);
      expect(stack.status?.lastUpdate?.lastAttemptedCommit).not.toBe(head);
      expect(stack.status?.currentUpdate?.commit).not.toBe(head);
      const notice = await waitForComment(
        pr.number,
        (c) => c.body.includes('**Preview not running**'),
        'the "Preview not running" notice',
      );
      log.add(`comment ${String(notice.id)}:\n${notice.body}`);
      expect(notice.body).toContain(
        `**Preview not running**: preview Stack \`${name}\` has waited 1m for PKO to run commit ${head.slice(0, 7)}: ${said}`,
      );
      expect((await botComments(pr.number)).map((c) => c.id)).toEqual([notice.id]);
    },
    STEP_MS,
  );
});
