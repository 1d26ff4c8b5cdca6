/**
 * Case B16 on real parts (issue 36): a previewed program's output can add changes, never hide
 * one. REAL PKO v2.9.0 (operator and agent, test/support/realpko.ts) runs the REAL Pulumi CLI
 * v3.276.0 on a Pulumi YAML program; a REAL Gitea 1.27.3 (test/support/gitea.ts) holds the
 * repository; the controller runs in-process with a `gitea` Provider, an Alert for every Stack
 * and a PullRequestPreview on the base Stack `app` with `spec.gate: {operations: [delete]}`.
 *
 * The program deploys (on `main`) the Values `a` and `prod-db` and a `pkotest:index:Forger`
 * (test/realpko/provider) that forges in every Check. The pull request removes `prod-db`: its
 * preview really deletes it (the CLI prints deletes after the program's resources), while the
 * unchanged Forger writes a forged `Resources:` / `    1 unchanged` summary (a) through the
 * engine's Log RPC, as a program's console.log: the CLI prints it on its stderr, which the agent
 * logs at WARN, and (b) into the CLI's stdout through /proc/<pid>/fd/1, which the agent logs as
 * INFO `pulumi` lines ahead of the real delete (the Forger's own stderr the CLI hides) —
 * what a program author could do (same uid in the workspace container). The YAML language host
 * cannot print, so the provider does it (issue 36 allows that).
 *
 * Expected: the PR head's commit status is `failure` (the gate names `prod-db`, or fails closed on
 * the change set the second summary made incomplete), the comment lists `prod-db`'s delete with
 * the reason and never says "no changes". Measured before the fix (the parser of f2adf8c):
 * `success` "no changes · Preview of stack dev succeeded" and a "**no changes**" comment. The test first checks in the workspace pod's real log that
 * the forgery landed as stated, so a pass is not a forgery that never happened.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import type { ControllerHandle } from '../../src/controller.ts';
import { errorStatusCode } from '../../src/kube/client.ts';
import type { Stack } from '../../src/api/pko.ts';
import { GROUP, Objects, VERSION } from '../support/controller.ts';
import {
  startGitea,
  type Gitea,
  type GiteaComment,
  type GiteaStatus,
  type GiteaUser,
} from '../support/gitea.ts';
import { REALPKO_VERSIONS, createStack, stackSpecBase, type RealPkoPlane } from '../support/realpko.ts';
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

const log = new RunLog('realpko-forged-summary');
const NS = 'realpko-forged';
const ORG = 'acme';
const REPO = 'app';
/** Bound of each wait for a real PKO run and what follows it (generous: 2 shared cores, CPU hogs). */
const RUN_MS = 300_000;
const STEP_MS = 900_000;

/**
 * What the Forger writes (the case's lines): a summary saying nothing changes. A forged banner
 * too would read as a second run (interleaved, so incomplete) to a parser that knows none of
 * this: test/fixtures/agent-logs/10-forged-summary.log has that variant.
 */
const FORGED = ['Resources:', '    1 unchanged'];

const cleanups: (() => Promise<void>)[] = [];
let plane: RealPkoPlane;
let gitea: Gitea;
let bot: GiteaUser;
let alice: GiteaUser;
let controller: ControllerHandle;
let mainSha = '';
const t0 = Date.now();
const timings: Record<string, number> = {};

/** A pkotest resource of the program (named in `options.version`, found in PKO's plugin cache). */
function resource(name: string, type: string, properties: string[]): string[] {
  return [
    `  ${name}:`,
    `    type: pkotest:index:${type}`,
    '    properties:',
    ...properties.map((p) => `      ${p}`),
    '    options:',
    `      version: ${REALPKO_VERSIONS.pkotest}`,
  ];
}

/** The Pulumi YAML program: Value `a`, the Forger and (while `withProdDb`) Value `prod-db`. */
function program(withProdDb: boolean): string {
  return [
    'name: pkonc-forged',
    'runtime: yaml',
    'resources:',
    ...resource('a', 'Value', ['value: one']),
    ...(withProdDb ? resource('prod-db', 'Value', ['value: the production database']) : []),
    ...resource('forger', 'Forger', [
      'during: check',
      'lines:',
      ...FORGED.map((l) => `  - ${JSON.stringify(l)}`),
    ]),
    '',
  ].join('\n');
}

const contextOf = (stack: string): string => `pko/${CLUSTER}/${NS}/${stack}`;

async function botComments(index: number): Promise<GiteaComment[]> {
  return (await gitea.comments(ORG, REPO, index)).filter((c) => c.user.id === bot.id);
}
const waitForComment = commentWaiter(botComments, { timeoutMs: RUN_MS, log });

/** Our statuses of `context` on `sha`, oldest first. */
async function statuses(sha: string, context: string): Promise<GiteaStatus[]> {
  return (await gitea.statuses(ORG, REPO, sha))
    .filter((s) => s.context === context)
    .sort((a, b) => a.id - b.id);
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
  const scene = await startPkoV2Scene(NS, log, cleanups);
  ({ plane } = scene);
  gitea = await startGitea();
  cleanups.push(() => gitea.stop());
  bot = await gitea.createUser('pko-bot');
  alice = await gitea.createUser('alice');
  await gitea.createOrg(ORG);
  await gitea.createRepo(REPO, { org: ORG });
  // Admin: Gitea shows other users' permissions (who may get a preview) to repository admins only.
  await gitea.addCollaborator(ORG, REPO, bot, 'admin');
  await gitea.addCollaborator(ORG, REPO, alice);
  mainSha = await gitea.writeFile(ORG, REPO, {
    branch: 'main',
    file: 'Pulumi.yaml',
    content: program(true),
    message: 'program: a, prod-db and the forger',
  });
  const front = await startTlsFront(gitea.url, scene.pki);
  cleanups.push(() => front.close());

  const launcher = controllerLauncher(plane, NS, log, {
    flags: ['--preview-webhook-bind-address=127.0.0.1:0'],
  });
  controller = await launcher.launch();
  cleanups.push(() => controller.stop());

  const obj = new Objects(NS, plane.admin);
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
  await createStack(plane.admin, NS, 'app', {
    ...stackSpecBase(await tempDir('backend')),
    projectRepo: `${front.url}/${ORG}/${REPO}.git`,
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
        gate: { operations: ['delete'] },
      },
    },
  });
  await gitea.addWebhook(ORG, REPO, {
    url: `http://127.0.0.1:${String(controller.previewWebhookPort)}/hooks/${NS}/previews`,
    secret: hookSecret,
    events: ['pull_request', 'push'],
  });
  mark('setup');
}, 600_000);

afterAll(async () => {
  for (const fn of cleanups.reverse())
    await fn().catch((err: unknown) => {
      log.add(`cleanup: ${(err as Error).message}`);
    });
  await report({ name: 'forged summary (B16)', timings });
}, 120_000);

describe('B16 on real PKO v2 and real Gitea: a program forging Pulumi summary lines cannot hide a delete', () => {
  it(
    'B16: a PR deleting prod-db while the program forges "Resources: 1 unchanged" (engine log and the CLI\'s stdout via /proc) gets a failure status (the gate fails closed); the comment lists the delete of prod-db, never "no changes"',
    async () => {
      onTestFailed(() => {
        console.error(`--- run log (tail) ---\n${log.tail(160)}`);
      });
      await until(
        'app succeeded on main',
        async () =>
          (await getStack(plane.admin, NS, 'app')).status?.lastUpdate?.lastSuccessfulCommit === mainSha,
        { timeoutMs: RUN_MS, intervalMs: 500, log },
      );
      mark('base up');

      await gitea.createBranch(ORG, REPO, 'drop-db', 'main', alice);
      const head = await gitea.writeFile(ORG, REPO, {
        branch: 'drop-db',
        file: 'Pulumi.yaml',
        content: program(false),
        message: 'tidy up',
        as: alice,
      });
      const pr = await gitea.openPull(ORG, REPO, { head: 'drop-db', title: 'Tidy up', as: alice });
      const name = `app-pr-${String(pr.number)}`;
      await until('preview Stack created', () => stackOrNone(name), { timeoutMs: RUN_MS, log });
      const final = await until(
        `a final status of ${name} on the PR head`,
        async () => (await statuses(head, contextOf(name))).find((s) => s.status !== 'pending'),
        { timeoutMs: RUN_MS, log },
      );
      mark('final status');
      const comment = await waitForComment(
        pr.number,
        (c) => c.body.includes(head) && c.body.includes('<summary>Output</summary>'),
        'the final preview comment',
      );
      log.add(
        `status: ${final.status} ${final.description}\ncomment ${String(comment.id)}:\n${comment.body}`,
      );

      // The forgery happened as stated: in the workspace pod's log (read through the real API
      // server), forged INFO `pulumi` lines from the CLI's stdout ahead of the real delete, and
      // the same lines at WARN (the engine log, which the CLI prints on its stderr).
      const podLog = await plane.admin
        .makeApiClient(CoreV1Api)
        .readNamespacedPodLog({ name: `${name}-workspace-0`, namespace: NS, container: 'pulumi' });
      const lines = podLog.split('\n').map((l) => l.split('\t'));
      const at = (level: string, msg: string): number =>
        lines.findIndex((f) => f[1] === level && f[2] === 'pulumi' && f[3]?.trimEnd() === msg);
      const forgedSummary = at('INFO', 'Resources:');
      const deleteLine = lines.findIndex((f) => f[1] === 'INFO' && f[3]?.includes('(delete)') === true);
      expect(forgedSummary, 'a forged INFO `Resources:` line').toBeGreaterThanOrEqual(0);
      expect(deleteLine, 'the real delete line').toBeGreaterThan(forgedSummary);
      expect(at('INFO', '    1 unchanged')).toBeGreaterThan(forgedSummary);
      expect(at('WARN', 'Resources:'), 'the engine-log copy at WARN').toBeGreaterThanOrEqual(0);

      // The gate fails on the delete it names, read in a change set the second summary made
      // incomplete (measured before the fix: `success` "no changes · Preview … succeeded").
      expect(final.status).toBe('failure');
      expect(final.description).toMatch(
        /^gate: 1 to delete or more: pkotest:index:Value::prod-db \(change set incomplete: /,
      );
      expect(final.description).not.toContain('no changes');
      // The comment lists the delete, says why the set is incomplete, and never "no changes".
      expect(comment.body).toContain('**🚧 gate:');
      expect(comment.body).toContain('-1 to delete');
      expect(comment.body).toMatch(/`prod-db` \(`pkotest:index:Value`\)/);
      expect(comment.body).toContain("the program printed text that looks like Pulumi's summary");
      expect(comment.body).not.toContain('no changes');
      expect((await statuses(head, contextOf(name))).map((s) => s.status)).toEqual(['pending', 'failure']);
      mark('B16 checked');
    },
    STEP_MS,
  );
});
