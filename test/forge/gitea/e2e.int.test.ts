/**
 * The `gitea` Provider end to end against a REAL Gitea (test/support/gitea.ts; built from its Go
 * module by scripts/gitea-build.sh) on the real control plane: PKO runs written as PKO v2 writes
 * them (PkoSimulator) → the in-process controller → Gitea's REST API. Everything is asserted by
 * reading Gitea back (statuses on real commits, comments on real pull requests), never from the
 * controller's own account of what it did.
 *
 * One Gitea for the file; each test has its own namespace, controller and repository. The bot
 * the Provider uses is a plain user with write access to the repository (not an admin), and a
 * second user, `alice`, plays the human reviewer.
 */
import { CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, VERSION } from '../../../src/api/v1alpha1.ts';
import { LEDGER_PLURAL } from '../../../src/delivery/ledger.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../../support/cluster.ts';
import { Objects, startInProcess, type InProcessController } from '../../support/controller.ts';
import {
  startGitea,
  type Gitea,
  type GiteaComment,
  type GiteaStatus,
  type GiteaUser,
} from '../../support/gitea.ts';
import { PkoSimulator, type RunHandle } from '../../support/pko.ts';
import { startProxy } from '../../support/proxy.ts';

const CLUSTER = 'e2e';
const ORG = 'acme';
const WAIT_MS = 20_000;
const TEST_MS = 120_000;
/** Title of the built-in comment once a `preview` run succeeded (templates/pullRequestComment.hbs). */
const PREVIEW_OK = 'Preview of stack acme/app/dev succeeded';
const PREVIEW_FAILED = 'Preview of stack acme/app/dev failed';
const MARKER = /<!-- pko-notification-controller:[^ ]+ -->/;

let gitea: Gitea;
/** Set once started: `afterAll` stops it even when `beforeAll` failed half-way. */
let running: Gitea | undefined;
let bot: GiteaUser;
let alice: GiteaUser;

beforeAll(async () => {
  gitea = await startGitea();
  running = gitea;
  const phases = Object.entries(gitea.phasesMs).map(([k, v]) => `${k} ${(v / 1000).toFixed(2)}`);
  console.log(
    `gitea: started in ${(gitea.startMs / 1000).toFixed(2)} s (${phases.join(', ')}) at ${gitea.url}`,
  );
  bot = await gitea.createUser('pko-bot');
  alice = await gitea.createUser('alice');
  await gitea.createOrg(ORG);
});

afterAll(async () => {
  await running?.stop();
});

/** Default commit status context of Stack `app` in `ns` (templates/commitStatusContext.hbs). */
const contextOf = (ns: string): string => `pko/${CLUSTER}/${ns}/app`;

/** Statuses of `context` on `sha`, oldest first (by id: Gitea orders by whole seconds only). */
async function ours(repo: string, sha: string, context: string): Promise<GiteaStatus[]> {
  const all = await gitea.statuses(ORG, repo, sha);
  return all.filter((s) => s.context === context).sort((a, b) => a.id - b.id);
}

const mine = async (repo: string, index: number): Promise<GiteaComment[]> =>
  (await gitea.comments(ORG, repo, index)).filter((c) => c.user.id === bot.id);

/** A repository in `acme` with the bot and alice as writers, a `feature` branch one commit ahead and a PR. */
async function repoWithPull(name: string): Promise<{ sha: string; pull: number }> {
  await gitea.createRepo(name, { org: ORG });
  await gitea.addCollaborator(ORG, name, bot);
  await gitea.addCollaborator(ORG, name, alice);
  await gitea.createBranch(ORG, name, 'feature');
  const sha = await gitea.commit(ORG, name, { branch: 'feature', file: 'stack/Pulumi.yaml' });
  const pr = await gitea.openPull(ORG, name, { head: 'feature', title: 'Change the stack', as: alice });
  expect(pr.head.sha).toBe(sha);
  return { sha, pull: pr.number };
}

interface Setup {
  ns: string;
  obj: Objects;
  ctl: InProcessController;
  sim: PkoSimulator;
}

/**
 * A namespace, the controller watching it, a Secret with the bot's token, a `gitea` Provider
 * with the owner address `<gitea>/acme` (plus `extra` spec), an Alert for every Stack, and
 * Stack `app` whose `spec.projectRepo` is `<gitea>/acme/<repo>.git`: a preview Stack
 * (`spec.preview: true`, whose runs comment on the pull request whose head is their commit)
 * unless `preview` is false.
 */
async function setup(
  prefix: string,
  repo: string,
  extra: Record<string, unknown> = {},
  pulumiStack = 'acme/app/dev',
  preview = true,
): Promise<Setup> {
  const ns = await createTestNamespace(prefix);
  return setupIn(ns, new Objects(ns), repo, extra, pulumiStack, preview);
}

/** Waits until the newest status of `context` on `sha` is `state` (and there are at least `count`). */
function waitForState(
  repo: string,
  sha: string,
  context: string,
  state: string,
  count: number,
): Promise<GiteaStatus[]> {
  return waitFor(
    async () => {
      const s = await ours(repo, sha, context);
      return s.length >= count && s.at(-1)?.status === state ? s : undefined;
    },
    { timeoutMs: WAIT_MS, what: `status #${count} '${state}' of ${context} on ${repo}@${sha.slice(0, 7)}` },
  );
}

/** Waits until the bot's comment on `pull` contains `title`, and returns it. */
function waitForComment(repo: string, pull: number, title: string): Promise<GiteaComment> {
  return waitFor(async () => (await mine(repo, pull)).find((c) => c.body.includes(title)), {
    timeoutMs: WAIT_MS,
    what: `the bot's comment on ${repo}#${pull} showing '${title}'`,
  });
}

/** Runs one PKO run of `type` on `sha`: started → the pending status lands → finished → the result lands. */
async function runOn(
  s: Setup,
  repo: string,
  sha: string,
  type: 'preview' | 'up',
  outcome: 'succeeded' | 'failed',
  count: number,
): Promise<RunHandle> {
  const context = contextOf(s.ns);
  const run = await s.sim.startRun('app', { type, commit: sha });
  await waitForState(repo, sha, context, 'pending', count + 1);
  await s.sim.finishRun(run, outcome);
  await waitForState(repo, sha, context, outcome === 'succeeded' ? 'success' : 'failure', count + 2);
  return run;
}

/** Waits until the Alert reports an event of `reason` delivered, its newest (the send, comment step included, is over). */
async function delivered(s: Setup, reason: string): Promise<void> {
  await waitFor(
    async () => {
      const d = (await s.obj.get('alerts', 'gitea')).status?.lastDelivery?.[0];
      return d?.message?.includes(reason) === true && d.result === 'Delivered' ? true : undefined;
    },
    { timeoutMs: WAIT_MS, what: `the Alert's lastDelivery for ${reason}` },
  );
}

describe('gitea end to end (real Gitea 1.27.3)', () => {
  it(
    "statuses on real commits (Started → pending, Succeeded → success, Failed → failure) and one sticky comment on a real PR, the previews', edited in place across runs and a git push; the deploy run writes none",
    async () => {
      const repo = 'app';
      const { sha, pull } = await repoWithPull(repo);
      const human = await gitea.addComment(ORG, repo, pull, 'LGTM, deploy it', alice);
      // A deploy Stack on which previews are run too (PKO v2 Update objects of type preview).
      const s = await setup('gt-e2e', repo, {}, 'acme/app/dev', false);
      try {
        const context = contextOf(s.ns);
        await runOn(s, repo, sha, 'preview', 'succeeded', 0);
        const first = await waitForComment(repo, pull, PREVIEW_OK);
        await runOn(s, repo, sha, 'up', 'succeeded', 2);
        await delivered(s, 'UpdateSucceeded');

        const statuses = await ours(repo, sha, context);
        expect(statuses.map((x) => x.status)).toEqual(['pending', 'success', 'pending', 'success']);
        expect(statuses.every((x) => x.creator?.id === bot.id)).toBe(true);
        expect(statuses.every((x) => x.description !== '')).toBe(true);
        expect(statuses[3]!.target_url).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);
        // Gitea's own roll-up for the commit (and for the branch) agrees.
        const combined = await gitea.api<{ state: string; sha: string }>(
          'GET',
          `/repos/${ORG}/${repo}/commits/feature/status`,
        );
        expect(combined.data).toMatchObject({ state: 'success', sha });

        // One comment of ours, the preview's: the deploy run (its result delivered) left it alone.
        expect(await mine(repo, pull)).toEqual([first]);
        expect(first.body).toMatch(MARKER);
        expect(first.body).toContain(sha.slice(0, 7));

        // A push to the PR branch over git/HTTP moves the PR head; a failed preview on the new
        // commit sets failure there and edits the same comment.
        const sha2 = await gitea.gitPush(ORG, repo, 'feature', alice);
        expect((await gitea.getPull(ORG, repo, pull)).head.sha).toBe(sha2);
        await runOn(s, repo, sha2, 'preview', 'failed', 0);
        expect((await ours(repo, sha2, context)).map((x) => x.status)).toEqual(['pending', 'failure']);
        const failed = await waitForComment(repo, pull, PREVIEW_FAILED);
        expect(failed.id).toBe(first.id);
        expect(failed.body).toContain(sha2.slice(0, 7));
        expect(await mine(repo, pull)).toHaveLength(1);
        // The first commit keeps its own history; the human's comment was never touched.
        expect((await ours(repo, sha, context)).map((x) => x.status)).toEqual([
          'pending',
          'success',
          'pending',
          'success',
        ]);
        const comments = await gitea.comments(ORG, repo, pull);
        expect(comments.find((c) => c.id === human.id)).toMatchObject({
          body: 'LGTM, deploy it',
          updated_at: human.updated_at,
        });
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    'F05/F06: with 120 statuses of other tools around ours (3 pages of 50) and the ledger lost, a restarted controller re-sends the result but Gitea gets no second status or comment',
    async () => {
      const repo = 'busy';
      const { sha, pull } = await repoWithPull(repo);
      const ci = await gitea.createUser('ci-bot');
      await gitea.addCollaborator(ORG, repo, ci);
      const seed = async (from: number): Promise<void> => {
        for (let i = from; i < from + 60; i++) {
          await gitea.postStatus(ORG, repo, sha, { state: 'success', context: `ci/check-${i}` }, ci);
        }
      };
      // The bot reaches Gitea through a recording forward proxy (Provider proxySecretRef), so the
      // requests it makes are visible without touching the controller.
      const proxy = await startProxy();
      const ns0 = { proxySecretRef: { name: 'proxy' } };
      let s: Setup | undefined;
      try {
        await seed(0);
        s = await setupWithProxy('gt-pages', repo, ns0, proxy.url);
        const context = contextOf(s.ns);
        const run = await runOn(s, repo, sha, 'preview', 'succeeded', 0);
        const comment = await waitForComment(repo, pull, PREVIEW_OK);
        await seed(60);
        expect(await gitea.statuses(ORG, repo, sha)).toHaveLength(122);

        // Lose the ledger (as a crash between a send and its ledger write would, for one event)
        // and restart: the run's result is derived again and delivered again.
        await s.ctl.stop();
        const custom = kubeConfig('admin').makeApiClient(CustomObjectsApi);
        const where = { group: GROUP, version: VERSION, namespace: s.ns, plural: LEDGER_PLURAL };
        const ledger = (await custom.listNamespacedCustomObject(where)) as { items: unknown[] };
        expect(ledger.items.length).toBeGreaterThan(0);
        await custom.deleteCollectionNamespacedCustomObject(where);
        await waitFor(
          async () =>
            ((await custom.listNamespacedCustomObject(where)) as { items: unknown[] }).items.length === 0 ||
            undefined,
          { timeoutMs: WAIT_MS, what: 'the DeliveryLedger objects to be gone' },
        );
        const before = proxy.seen.length;
        s.ctl = await startInProcess(s.ns, { flags: [`--cluster-name=${CLUSTER}`] });
        const ctl = s.ctl;
        await waitFor(
          () =>
            Promise.resolve(
              ctl.logs
                .parsed()
                .some(
                  (l) =>
                    l['msg'] === 'delivered' &&
                    l['reason'] === 'PreviewSucceeded' &&
                    String(l['event']).includes(run.name),
                ),
            ),
          { timeoutMs: WAIT_MS, what: 'the restarted controller delivering PreviewSucceeded again' },
        );
        const after = proxy.seen.slice(before);
        // It read every page of the commit's statuses (ours is on none of the first page's 50
        // whichever way Gitea orders them) and wrote nothing.
        const statusPages = after.filter(
          (r) => r.startsWith('GET ') && r.includes(`/commits/${sha}/statuses`),
        );
        expect(statusPages.map((r) => new URL(r.slice(4)).searchParams.get('page'))).toEqual(['1', '2', '3']);
        expect(after.filter((r) => !r.startsWith('GET '))).toEqual([]);
        expect((await ours(repo, sha, context)).map((x) => x.status)).toEqual(['pending', 'success']);
        expect(await gitea.statuses(ORG, repo, sha)).toHaveLength(122);
        const comments = await mine(repo, pull);
        expect(comments).toHaveLength(1);
        expect(comments[0]).toMatchObject({
          id: comment.id,
          body: comment.body,
          updated_at: comment.updated_at,
        });
      } finally {
        await s?.ctl.stop();
        await proxy.close();
      }
    },
    TEST_MS,
  );

  it(
    'N07: a repository renamed mid-run (Gitea answers 301 for every method on the old path): the result lands on the renamed repository and the comment is edited in place',
    async () => {
      const repo = 'old-name';
      const { sha, pull } = await repoWithPull(repo);
      const s = await setup('gt-rename', repo);
      try {
        const context = contextOf(s.ns);
        const run = await s.sim.startRun('app', { type: 'preview', commit: sha });
        await waitForState(repo, sha, context, 'pending', 1);
        const started = await waitForComment(repo, pull, 'Preview of stack acme/app/dev started');

        await gitea.renameRepo(ORG, repo, 'new-name');
        // What Gitea answers on the old path (observed on Gitea 1.27.3): 301 to the new path for
        // reads AND writes — a client that follows a 301 the browser way turns the POST into a GET.
        const moved = await gitea.api('POST', `/repos/${ORG}/${repo}/statuses/${sha}`, {
          body: { state: 'success', context: 'probe' },
          expect: [301],
        });
        expect(moved.headers.get('location')).toBe(`/api/v1/repos/${ORG}/new-name/statuses/${sha}`);

        await s.sim.finishRun(run, 'succeeded');
        const statuses = await waitForState('new-name', sha, context, 'success', 2);
        expect(statuses.map((x) => x.status)).toEqual(['pending', 'success']);
        const done = await waitForComment('new-name', pull, PREVIEW_OK);
        expect(done.id).toBe(started.id);
        expect(await mine('new-name', pull)).toHaveLength(1);
        // Delivered, not failed with a redirect error (the Alert status is written in batches).
        const last = await waitFor(
          async () => {
            const d = (await s.obj.get('alerts', 'gitea')).status?.lastDelivery?.[0];
            return d?.message?.includes('PreviewSucceeded') === true ? d : undefined;
          },
          { timeoutMs: WAIT_MS, what: "the Alert's lastDelivery for PreviewSucceeded" },
        );
        expect(last).toMatchObject({ result: 'Delivered', reason: 'Delivered' });
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    'N01 on a real forge: hostile text in the comment mentions nobody and references no issue (Gitea renders it, a raw control does both)',
    async () => {
      const repo = 'hostile';
      const { sha, pull } = await repoWithPull(repo);
      const issue = (
        await gitea.api<{ number: number }>('POST', `/repos/${ORG}/${repo}/issues`, {
          body: { title: 'an unrelated issue' },
          as: alice,
          expect: [201],
        })
      ).data.number;
      const hostile = `acme/app/dev @alice #${String(issue)} !${String(pull)} <b>x</b> [x](javascript:alert(1)) *b*`;
      const s = await setup('gt-hostile', repo, {}, hostile);
      const refs = async (): Promise<number> =>
        (
          await gitea.api<{ type: string }[] | null>(
            'GET',
            `/repos/${ORG}/${repo}/issues/${String(issue)}/timeline`,
          )
        ).data // Gitea answers null for an empty timeline.
          ?.filter((e) => e.type.endsWith('_ref')).length ?? 0;
      const render = async (text: string): Promise<string> =>
        (
          await gitea.api<string>('POST', '/markdown', {
            body: { Text: text, Mode: 'gfm', Context: `${gitea.url}/${ORG}/${repo}` },
          })
        ).data;
      try {
        const run = await s.sim.startRun('app', { type: 'preview', commit: sha });
        await waitForState(repo, sha, contextOf(s.ns), 'pending', 1);
        await s.sim.finishRun(run, 'failed', {
          message: `preview failed: exit status 1\nstderr: error: cc @alice, see #${String(issue)}\n<script>alert(1)</script>`,
        });
        await waitForState(repo, sha, contextOf(s.ns), 'failure', 2);
        const ours = await waitForComment(repo, pull, 'failed');
        // Gitea 1.27.3 renders a mention as a link to the user's page (observed).
        const mention = new RegExp(`href="${gitea.url}/alice"`);
        const html = await render(ours.body);
        expect(html).not.toMatch(mention);
        expect(html).not.toMatch(new RegExp(`/issues/${String(issue)}"`));
        expect(html).not.toMatch(/<script|<b>x<\/b>|<em>b<\/em>|href="javascript/);
        // The hostile stack name is shown, escaped, in the title.
        expect(html).toMatch(/@.?alice/);
        expect(await refs()).toBe(0);

        // Control: the same words unescaped, commented by the bot, do mention and reference.
        const raw = await gitea.addComment(ORG, repo, pull, `cc @alice, see #${String(issue)}`, bot);
        expect(await render(raw.body)).toMatch(mention);
        await waitFor(async () => ((await refs()) > 0 ? true : undefined), {
          timeoutMs: WAIT_MS,
          what: 'the control comment to reference the issue',
        });
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );

  it(
    'a pull request from a fork: the status is set on the fork head commit in the base repository and the comment goes on the base PR',
    async () => {
      const repo = 'forked';
      await gitea.createRepo(repo, { org: ORG });
      await gitea.addCollaborator(ORG, repo, bot);
      const fork = await gitea.fork(ORG, repo, alice);
      expect(fork).toMatchObject({ fork: true, full_name: `alice/${repo}` });
      await gitea.createBranch('alice', repo, 'fix', 'main', alice);
      const sha = await gitea.commit('alice', repo, { branch: 'fix', as: alice });
      const pr = await gitea.openPull(ORG, repo, { head: 'alice:fix', title: 'Fix from a fork', as: alice });
      expect(pr.head.sha).toBe(sha);
      const s = await setup('gt-fork', repo);
      try {
        await runOn(s, repo, sha, 'preview', 'succeeded', 0);
        const c = await waitForComment(repo, pr.number, PREVIEW_OK);
        expect(c.body).toContain(sha.slice(0, 7));
        expect(await mine(repo, pr.number)).toHaveLength(1);
        // The fork itself got nothing: the Stack's repository is the base one.
        expect(await gitea.statuses('alice', repo, sha)).toEqual([]);
      } finally {
        await s.ctl.stop();
      }
    },
    TEST_MS,
  );
});

/** {@link setup} with the Provider's traffic through a forward proxy at `proxyUrl`. */
async function setupWithProxy(
  prefix: string,
  repo: string,
  extra: Record<string, unknown>,
  proxyUrl: string,
): Promise<Setup> {
  const ns = await createTestNamespace(prefix);
  const obj = new Objects(ns);
  await obj.secret('proxy', { address: proxyUrl });
  return setupIn(ns, obj, repo, extra);
}

/** {@link setup} in an existing namespace `ns` (whose Secrets `obj` may already have created). */
async function setupIn(
  ns: string,
  obj: Objects,
  repo: string,
  extra: Record<string, unknown>,
  pulumiStack = 'acme/app/dev',
  preview = true,
): Promise<Setup> {
  const ctl = await startInProcess(ns, { flags: [`--cluster-name=${CLUSTER}`] });
  await obj.secret('gitea', { token: bot.token });
  await obj.provider('gitea', {
    type: 'gitea',
    address: `${gitea.url}/${ORG}`,
    secretRef: { name: 'gitea' },
    ...extra,
  });
  await obj.alert('gitea', { providerRef: { name: 'gitea' }, eventSources: [{ kind: 'Stack' }] });
  await obj.waitReady('alerts', 'gitea');
  const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
  await sim.createStack(
    'app',
    { git: { projectRepo: `${gitea.url}/${ORG}/${repo}.git`, branch: 'feature' } },
    { stack: pulumiStack, preview },
  );
  return { ns, obj, ctl, sim };
}
