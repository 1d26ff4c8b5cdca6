/**
 * Every git forge other than GitHub (github.int.test.ts), end to end on the real control plane:
 * PKO runs written as PKO v2 writes them (PkoSimulator) → the in-process controller → the forge's
 * contract server (test/forge/<type>/server.ts).
 *
 * Each test: a namespace, the contract server with a repository and an open pull/merge request
 * whose head is the commit (plus a human's comment on it), a Secret + Provider + Alert, a v2 Stack
 * whose `spec.projectRepo` is the repository, then a `preview` run and an `up` run on the commit
 * (start → the pending status appears → finish succeeded → the success status appears). Asserted:
 * the forge's status sequence for our context on the commit, exactly one comment of ours on the
 * pull request (created once, by the preview, showing the preview's result: the `up`
 * run is a deploy, which comments on no pull request it does not name), the human's comment
 * untouched, and every write answered 2xx (these contract servers answer a request the real API
 * would refuse with its 4xx, so a 2xx write is the contract check; only the GitHub server keeps a
 * separate violations list). The tests run one after the other (one file, no `concurrent`).
 */
import { describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startAzureServer } from './azuredevops/server.ts';
import { startBitbucketServer } from './bitbucket/server.ts';
import { startBitbucketServerDC } from './bitbucketserver/server.ts';
import { startGiteaServer } from './gitea/server.ts';
import { startGitLabServer } from './gitlab/server.ts';
import type { ForgeRequest, KitServer } from './kit.ts';

const SHA = '5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2';
const SHORT = SHA.slice(0, 7);
const CLUSTER = 'e2e';
const WAIT_MS = 15_000;
const TEST_MS = 60_000;

/** Default commit status name of Stack `app` in `ns` (templates/commitStatusContext.hbs). */
const contextOf = (ns: string): string => `pko/${CLUSTER}/${ns}/app`;

interface Scenario {
  ns: string;
  obj: Objects;
}

/**
 * Runs `body` with a fresh namespace and the controller watching it (`--cluster-name=e2e`); the
 * controller is stopped afterwards, whatever happens.
 */
async function withController(prefix: string, body: (s: Scenario) => Promise<void>): Promise<void> {
  const ns = await createTestNamespace(prefix);
  const ctl = await startInProcess(ns, { flags: [`--cluster-name=${CLUSTER}`] });
  try {
    await body({ ns, obj: new Objects(ns) });
  } finally {
    await ctl.stop();
  }
}

/**
 * Creates Stack `app` (PKO v2, git source `projectRepo`, branch `main`, Pulumi stack
 * `acme/app/dev`), then runs a `preview` and an `up` on {@link SHA}: each run is started, the
 * forge must show one more status (the pending one) within {@link WAIT_MS}, the run finishes
 * succeeded, the newest status must become `success`, and Alert `alert` must report the run's
 * result delivered (its send, comment step included, is over). `states()` lists the
 * states the forge recorded for our context on the commit, oldest first, in the forge's own words.
 * @returns the requests `forge` received from the `up` run's start until then.
 */
async function previewThenUp(
  { ns, obj }: Scenario,
  alert: string,
  forge: KitServer,
  projectRepo: string,
  states: () => string[],
  words: { pending: string; success: string },
): Promise<ForgeRequest[]> {
  const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
  await sim.createStack('app', { git: { projectRepo, branch: 'main' } }, { stack: 'acme/app/dev' });
  let upFrom = 0;
  for (const type of ['preview', 'up'] as const) {
    upFrom = forge.requests.length;
    const n = states().length;
    const run = await sim.startRun('app', { type, commit: SHA });
    await waitFor(() => Promise.resolve(states().length > n && states().at(-1) === words.pending), {
      timeoutMs: WAIT_MS,
      what: `${words.pending} status for ${type}`,
    });
    await sim.finishRun(run, 'succeeded');
    await waitFor(() => Promise.resolve(states().at(-1) === words.success), {
      timeoutMs: WAIT_MS,
      what: `${words.success} status for ${type}`,
    });
    // The run's send is over (its comment step included) before the next run starts.
    const reason = type === 'preview' ? 'PreviewSucceeded' : 'UpdateSucceeded';
    await waitFor(
      async () => {
        const d = (await obj.get('alerts', alert)).status?.lastDelivery?.[0];
        return d?.message?.includes(reason) === true && d.result === 'Delivered';
      },
      { timeoutMs: WAIT_MS, what: `Alert ${alert}: ${reason} delivered` },
    );
  }
  return forge.requests.slice(upFrom);
}

/**
 * The `up` run (a deploy) wrote its two statuses and nothing else: no comment on the pull request
 * whose head is its commit (every status write's path names the commit; no comment write does).
 */
function expectStatusWritesOnly(up: ForgeRequest[]): void {
  const writes = up.filter(isWrite);
  expect(writes.map((r) => `${r.method} ${r.path}`)).toHaveLength(2);
  expect(writes.every((r) => r.path.includes(SHA))).toBe(true);
}

/**
 * Title of the built-in comment once the `preview` run succeeded (templates/pullRequestComment.hbs);
 * an `up` run's would say `Update of stack … succeeded`.
 */
const PREVIEW_TITLE = 'Preview of stack acme/app/dev succeeded';

/** Returns our comment from `find`, which must show the preview's result (waited for up to {@link WAIT_MS}). */
function waitForPreviewComment<T>(find: () => T | undefined, text: (c: T) => string): Promise<T> {
  return waitFor(
    () => {
      const c = find();
      return Promise.resolve(c !== undefined && text(c).includes(PREVIEW_TITLE) ? c : undefined);
    },
    { timeoutMs: WAIT_MS, what: 'sticky comment showing the preview result' },
  );
}

const isWrite = (r: ForgeRequest): boolean => r.method !== 'GET' && r.method !== 'HEAD';
const ok = (r: ForgeRequest): boolean => r.status !== undefined && r.status >= 200 && r.status < 300;

/** Writes the server answered with something other than 2xx, as `METHOD path → status`. */
function failedWrites(s: KitServer): string[] {
  return s.requests
    .filter((r) => isWrite(r) && !ok(r))
    .map((r) => `${r.method} ${r.path} → ${String(r.status)}`);
}

/** Requests refused for their credentials (401/403) or their shape (400/422). */
function refused(s: KitServer): string[] {
  return s.requests
    .filter((r) => [400, 401, 403, 422].includes(r.status ?? 0))
    .map((r) => `${r.method} ${r.path} → ${String(r.status)}`);
}

/** JSON body field of a request. */
function bodyField(r: ForgeRequest, key: string): unknown {
  return r.json !== null && typeof r.json === 'object' ? (r.json as Record<string, unknown>)[key] : undefined;
}

describe('forges end to end (preview then update on a commit)', () => {
  it(
    "gitlab (F01): subgroup project; running → success per run, each a single POST to the URL-encoded full path; one MR note, the preview's; the up run writes none",
    async () => {
      const TOKEN = 'glpat-e2eToken0123456789';
      const BOT = { id: 77, username: 'pko-bot' };
      const HUMAN = { id: 5, username: 'alice' };
      const PATH = 'platform/infra/stacks/app';
      const ENCODED = 'platform%2Finfra%2Fstacks%2Fapp';
      const gl = await startGitLabServer({ tokens: { [TOKEN]: BOT } });
      try {
        gl.addMR(PATH, { iid: 7, sha: SHA, source_branch: 'feature/x' });
        const human = gl.addNote(PATH, 7, { body: 'LGTM', author: HUMAN });
        await withController('fe-gitlab', async ({ ns, obj }) => {
          const context = contextOf(ns);
          await obj.secret('gl', { token: `${TOKEN}\n` });
          // F01: the Provider names the project inside subgroups; the Stack's repository is the
          // same project's clone URL.
          await obj.provider('gl', {
            type: 'gitlab',
            address: `${gl.url}/${PATH}`,
            secretRef: { name: 'gl' },
          });
          await obj.alert('gl', { providerRef: { name: 'gl' }, eventSources: [{ kind: 'Stack' }] });
          await obj.waitReady('alerts', 'gl');

          const statusPath = `/api/v4/projects/${ENCODED}/statuses/${SHA}`;
          // GitLab moves one status running → success in place, so the sequence is read from the
          // accepted POSTs (each answered 201 with the status as GitLab then holds it).
          const posts = (): ForgeRequest[] =>
            gl.requests.filter(
              (r) =>
                r.method === 'POST' && r.path === statusPath && ok(r) && bodyField(r, 'name') === context,
            );
          const states = (): string[] => posts().map((r) => String(bodyField(r, 'state')));
          const up = await previewThenUp({ ns, obj }, 'gl', gl, `${gl.url}/${PATH}.git`, states, {
            pending: 'running',
            success: 'success',
          });

          expect(states()).toEqual(['running', 'success', 'running', 'success']);
          // F01: exactly one POST with state success per run, all to the encoded full path.
          expect(posts().filter((r) => bodyField(r, 'state') === 'success')).toHaveLength(2);
          expect(gl.requests.filter((r) => r.method === 'POST' && r.path.includes('/statuses/')).length).toBe(
            4,
          );
          expect(posts().every((r) => bodyField(r, 'ref') === 'main')).toBe(true);
          const stored = gl.project(PATH).statuses.filter((s) => s.name === context);
          expect(stored.map((s) => s.status)).toEqual(['success', 'success']);
          expect(stored[1]!.target_url).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);

          const notes = (): { id: number; body: string; author: { id: number } }[] =>
            gl.project(PATH).mrs[0]!.notes.filter((n) => n.author.id === BOT.id);
          const ours = await waitForPreviewComment(
            () => notes()[0],
            (n) => n.body,
          );
          expect(notes()).toHaveLength(1);
          expect(ours.body).toContain(SHORT);
          const notesPath = `/api/v4/projects/${ENCODED}/merge_requests/7/notes`;
          expect(gl.writes().filter((w) => w === `POST ${notesPath}`)).toHaveLength(1);
          expectStatusWritesOnly(up);
          expect(gl.project(PATH).mrs[0]!.notes.find((n) => n.id === human.id)).toMatchObject({
            body: 'LGTM',
            author: HUMAN,
          });
          expect(failedWrites(gl)).toEqual([]);
          expect(refused(gl)).toEqual([]);
          expect(gl.requests.every((r) => r.headers['private-token'] === TOKEN)).toBe(true);
        });
      } finally {
        await gl.close();
      }
    },
    TEST_MS,
  );

  it(
    "gitea: owner address; pending → success per run; one pull request comment, the preview's; the up run writes none",
    async () => {
      const TOKEN = 'gitea-e2eToken0123456789';
      const BOT = { id: 42, login: 'pko-bot' };
      const HUMAN = { id: 7, login: 'bob' };
      const gt = await startGiteaServer({ tokens: { [TOKEN]: BOT } });
      try {
        gt.repo('acme', 'app');
        gt.addPull('acme', 'app', { number: 12, sha: SHA });
        const human = gt.addComment('acme', 'app', 12, { body: 'LGTM', user: HUMAN });
        await withController('fe-gitea', async ({ ns, obj }) => {
          const context = contextOf(ns);
          await obj.secret('gt', { token: TOKEN });
          // An owner URL: the Stack's repository (spec.projectRepo) is used, and must sit under it.
          await obj.provider('gt', { type: 'gitea', address: `${gt.url}/acme`, secretRef: { name: 'gt' } });
          await obj.alert('gt', { providerRef: { name: 'gt' }, eventSources: [{ kind: 'Stack' }] });
          await obj.waitReady('alerts', 'gt');

          const ours = (): { status: string; target_url: string; description: string }[] =>
            (gt.repo('acme', 'app').statuses.get(SHA) ?? []).filter((s) => s.context === context);
          const states = (): string[] => ours().map((s) => s.status);
          const up = await previewThenUp({ ns, obj }, 'gt', gt, `${gt.url}/acme/app.git`, states, {
            pending: 'pending',
            success: 'success',
          });

          expect(states()).toEqual(['pending', 'success', 'pending', 'success']);
          expect(ours()[3]!.target_url).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);
          expect(ours().every((s) => s.description !== '')).toBe(true);

          const pull = gt.repo('acme', 'app').pulls[0]!;
          const mine = (): { id: number; body: string }[] =>
            pull.comments.filter((c) => c.user.id === BOT.id);
          const comment = await waitForPreviewComment(
            () => mine()[0],
            (c) => c.body,
          );
          expect(mine()).toHaveLength(1);
          expect(comment.body).toContain(SHORT);
          expect(
            gt.writes().filter((w) => w === 'POST /api/v1/repos/acme/app/issues/12/comments'),
          ).toHaveLength(1);
          expectStatusWritesOnly(up);
          expect(pull.comments.find((c) => c.id === human.id)).toMatchObject({ body: 'LGTM', user: HUMAN });
          expect(failedWrites(gt)).toEqual([]);
          expect(refused(gt)).toEqual([]);
          expect(gt.requests.every((r) => r.headers.authorization === `token ${TOKEN}`)).toBe(true);
        });
      } finally {
        await gt.close();
      }
    },
    TEST_MS,
  );

  it(
    "bitbucket (Cloud): workspace address with apiURL; INPROGRESS → SUCCESSFUL per run; one pull request comment, the preview's; the up run writes none",
    async () => {
      const TOKEN = 'bb-e2e-access-token-0123456789';
      const BOT = {
        uuid: '{b0b0b0b0-0000-4000-8000-000000000001}',
        account_id: '5f0:bot',
        display_name: 'pko bot',
      };
      const HUMAN = {
        uuid: '{a1a1a1a1-0000-4000-8000-000000000002}',
        account_id: '5f0:alice',
        display_name: 'Alice',
      };
      const bb = await startBitbucketServer({ bearer: { [TOKEN]: BOT } });
      try {
        bb.repo('acme', 'app');
        bb.addPull('acme', 'app', { id: 4, sourceCommit: SHA });
        const human = bb.addComment('acme', 'app', 4, { raw: 'LGTM', user: HUMAN });
        await withController('fe-bb', async ({ ns, obj }) => {
          const context = contextOf(ns);
          expect(context.length).toBeLessThanOrEqual(40); // sent as the key unchanged
          await obj.secret('bb', { token: TOKEN });
          // Bitbucket Cloud repositories live on bitbucket.org and its API on api.bitbucket.org,
          // whatever the address says; the contract server listens on 127.0.0.1, so apiURL points
          // the API there while the address and the Stack's repository keep their real form.
          await obj.provider('bb', {
            type: 'bitbucket',
            address: 'https://bitbucket.org/acme',
            apiURL: `${bb.url}/2.0`,
            secretRef: { name: 'bb' },
          });
          await obj.alert('bb', { providerRef: { name: 'bb' }, eventSources: [{ kind: 'Stack' }] });
          await obj.waitReady('alerts', 'bb');

          const buildPath = `/2.0/repositories/acme/app/commit/${SHA}/statuses/build`;
          // The same key overwrites on Bitbucket: the sequence is read from the accepted POSTs.
          const posts = (): ForgeRequest[] =>
            bb.requests.filter(
              (r) => r.method === 'POST' && r.path === buildPath && ok(r) && bodyField(r, 'key') === context,
            );
          const states = (): string[] => posts().map((r) => String(bodyField(r, 'state')));
          const up = await previewThenUp(
            { ns, obj },
            'bb',
            bb,
            'https://bitbucket.org/acme/app.git',
            states,
            {
              pending: 'INPROGRESS',
              success: 'SUCCESSFUL',
            },
          );

          expect(states()).toEqual(['INPROGRESS', 'SUCCESSFUL', 'INPROGRESS', 'SUCCESSFUL']);
          const stored = bb.repo('acme', 'app').statuses.get(SHA)?.get(context);
          expect(stored).toMatchObject({ state: 'SUCCESSFUL', name: context });
          expect(stored?.url).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);

          const pull = bb.repo('acme', 'app').pulls[0]!;
          const mine = (): { id: number; content: { raw: string } }[] =>
            pull.comments.filter((c) => c.user.uuid === BOT.uuid && !c.deleted);
          const comment = await waitForPreviewComment(
            () => mine()[0],
            (c) => c.content.raw,
          );
          expect(mine()).toHaveLength(1);
          expect(comment.content.raw).toContain(SHORT);
          const commentsPath = '/2.0/repositories/acme/app/pullrequests/4/comments';
          expect(bb.writes().filter((w) => w === `POST ${commentsPath}`)).toHaveLength(1);
          expectStatusWritesOnly(up);
          expect(pull.comments.find((c) => c.id === human.id)).toMatchObject({
            content: { raw: 'LGTM' },
            user: HUMAN,
            deleted: false,
          });
          expect(failedWrites(bb)).toEqual([]);
          expect(refused(bb)).toEqual([]);
          expect(bb.requests.every((r) => r.headers.authorization === `Bearer ${TOKEN}`)).toBe(true);
        });
      } finally {
        await bb.close();
      }
    },
    TEST_MS,
  );

  it(
    "bitbucketserver (Data Center, F10): clone URL address, spec.username + Secret password → basic auth; INPROGRESS → SUCCESSFUL per run; one comment, the preview's; the up run writes none",
    async () => {
      const PASSWORD = 'dc-e2e-password-123456';
      const BOT = { name: 'pko-bot', slug: 'pko-bot', id: 11 };
      const HUMAN = { name: 'carol', slug: 'carol', id: 12 };
      const dc = await startBitbucketServerDC({ basic: { 'pko-bot': { password: PASSWORD, user: BOT } } });
      try {
        dc.addPull('PROJ', 'app', { id: 21, latestCommit: SHA });
        const human = dc.addComment('PROJ', 'app', 21, { text: 'LGTM', author: HUMAN });
        await withController('fe-bbdc', async ({ ns, obj }) => {
          const context = contextOf(ns);
          // F10 (a): the Secret holds only the password; the user name comes from spec.username.
          await obj.secret('dc', { password: PASSWORD });
          await obj.provider('dc', {
            type: 'bitbucketserver',
            address: `${dc.url}/scm/PROJ/app.git`,
            username: 'pko-bot',
            secretRef: { name: 'dc' },
          });
          await obj.alert('dc', { providerRef: { name: 'dc' }, eventSources: [{ kind: 'Stack' }] });
          await obj.waitReady('alerts', 'dc');

          const buildsPath = `/rest/api/latest/projects/PROJ/repos/app/commits/${SHA}/builds`;
          // The same key overwrites on Bitbucket Data Center: the sequence is read from the accepted POSTs.
          const posts = (): ForgeRequest[] =>
            dc.requests.filter(
              (r) => r.method === 'POST' && r.path === buildsPath && ok(r) && bodyField(r, 'key') === context,
            );
          const states = (): string[] => posts().map((r) => String(bodyField(r, 'state')));
          // The Stack's clone URL spells the project key in lower case, as Bitbucket accepts.
          const up = await previewThenUp({ ns, obj }, 'dc', dc, `${dc.url}/scm/proj/app.git`, states, {
            pending: 'INPROGRESS',
            success: 'SUCCESSFUL',
          });

          expect(states()).toEqual(['INPROGRESS', 'SUCCESSFUL', 'INPROGRESS', 'SUCCESSFUL']);
          const stored = dc.builds.get(SHA)?.get(context);
          expect(stored).toMatchObject({ state: 'SUCCESSFUL', name: context });
          expect(stored?.url).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);

          const mine = (): { id: number; text: string; version: number }[] =>
            dc.comments('PROJ', 'app', 21).filter((c) => c.author.name === BOT.name);
          const comment = await waitForPreviewComment(
            () => mine()[0],
            (c) => c.text,
          );
          expect(mine()).toHaveLength(1);
          expect(comment.text).toContain(SHORT);
          const commentsPath = '/rest/api/latest/projects/PROJ/repos/app/pull-requests/21/comments';
          expect(dc.writes().filter((w) => w === `POST ${commentsPath}`)).toHaveLength(1);
          expectStatusWritesOnly(up);
          expect(dc.comments('PROJ', 'app', 21).find((c) => c.id === human.id)).toMatchObject({
            text: 'LGTM',
            version: 0,
            author: HUMAN,
          });
          expect(failedWrites(dc)).toEqual([]);
          expect(refused(dc)).toEqual([]);
          // F10 (a): every call is HTTP basic with spec.username and the Secret's password.
          const basic = `Basic ${Buffer.from(`pko-bot:${PASSWORD}`).toString('base64')}`;
          expect(dc.requests.every((r) => r.headers.authorization === basic)).toBe(true);
        });
      } finally {
        await dc.close();
      }
    },
    TEST_MS,
  );

  it(
    "azuredevops: dev.azure.com project address with apiURL; pending → succeeded per run; one comment thread, the preview's; the up run writes none",
    async () => {
      const PAT = 'azure-e2e-pat-0123456789abcdef';
      const BOT = { id: 'B07B07B0-0000-4000-8000-000000000001', displayName: 'pko bot' };
      const HUMAN = { id: 'A11CE000-0000-4000-8000-000000000002', displayName: 'Alice' };
      const az = await startAzureServer({ pats: { [PAT]: BOT } });
      try {
        az.repo('acme', 'Platform', 'app');
        az.addPull('acme', 'Platform', 'app', { pullRequestId: 31, sourceCommit: SHA });
        const human = az.addThread('acme', 'Platform', 'app', 31, { content: 'LGTM', author: HUMAN });
        await withController('fe-azure', async ({ ns, obj }) => {
          const context = contextOf(ns);
          await obj.secret('az', { token: PAT });
          // Azure DevOps Services addresses are on dev.azure.com; the contract server listens on
          // 127.0.0.1, so apiURL (the organization URL) points the API there while the address
          // and the Stack's repository keep their real form.
          await obj.provider('az', {
            type: 'azuredevops',
            address: 'https://dev.azure.com/acme/Platform',
            apiURL: `${az.url}/acme`,
            secretRef: { name: 'az' },
          });
          await obj.alert('az', { providerRef: { name: 'az' }, eventSources: [{ kind: 'Stack' }] });
          await obj.waitReady('alerts', 'az');

          const ours = (): { state: string; targetUrl: string; context: { name: string; genre: string } }[] =>
            (az.repo('acme', 'Platform', 'app').statuses.get(SHA) ?? []).filter(
              (s) => s.context.name === context,
            );
          const states = (): string[] => ours().map((s) => s.state);
          const up = await previewThenUp(
            { ns, obj },
            'az',
            az,
            'https://dev.azure.com/acme/Platform/_git/app',
            states,
            {
              pending: 'pending',
              success: 'succeeded',
            },
          );

          expect(states()).toEqual(['pending', 'succeeded', 'pending', 'succeeded']);
          expect(new Set(ours().map((s) => s.context.genre))).toEqual(
            new Set(['pko-notification-controller']),
          );
          expect(ours()[3]!.targetUrl).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);

          const pull = az.repo('acme', 'Platform', 'app').pulls[0]!;
          const mine = (): { id: number; comments: { id: number; content: string }[] }[] =>
            pull.threads.filter((t) => t.comments[0]?.author.id === BOT.id && !t.isDeleted);
          const thread = await waitForPreviewComment(
            () => mine()[0],
            (t) => t.comments[0]?.content ?? '',
          );
          expect(mine()).toHaveLength(1);
          expect(thread.comments).toHaveLength(1);
          expect(thread.comments[0]!.content).toContain(SHORT);
          const threadsPath = '/acme/Platform/_apis/git/repositories/app/pullRequests/31/threads';
          expect(az.writes().filter((w) => w === `POST ${threadsPath}`)).toHaveLength(1);
          expectStatusWritesOnly(up);
          expect(pull.threads.find((t) => t.id === human.id)?.comments).toEqual([
            expect.objectContaining({ content: 'LGTM', author: HUMAN, isDeleted: false }),
          ]);
          expect(failedWrites(az)).toEqual([]);
          expect(refused(az)).toEqual([]);
          expect(az.requests.every((r) => r.status !== 203)).toBe(true);
        });
      } finally {
        await az.close();
      }
    },
    TEST_MS,
  );
});
