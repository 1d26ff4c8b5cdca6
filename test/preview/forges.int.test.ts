/**
 * Pull-request previews against the GitHub and GitLab contract servers (test/forge/<forge>/
 * server.ts: strict, schema-checked) on the real control plane, with signed webhooks of each
 * forge's shape driving the syncs: preview Stacks created, updated on a new head and deleted on
 * close; untrusted pull requests get one notice; results of a preview run land on the pull
 * request without a pull-request lookup (the event names it). GitHub: unchanged listings are
 * conditional requests answered 304.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { errorMessage, kubeRequest, objectPath } from '../../src/kube/client.ts';
import { SYNC_REQUEST_ANNOTATION } from '../../src/preview/index.ts';
import { FORGES } from '../../src/forge/registry.ts';
import type { PreviewForge } from '../../src/forge/types.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, Objects, VERSION, startInProcess, type InProcessController } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startGitHubServer } from '../forge/github/server.ts';
import { startGitLabServer } from '../forge/gitlab/server.ts';

const WAIT = { timeoutMs: 20_000 };
const sha = (c: string): string => c.repeat(40);

function previewObject(obj: Objects, spec: Record<string, unknown>): Promise<void> {
  return obj.pullRequestPreview('previews', spec);
}

async function lastSync(obj: Objects): Promise<string | undefined> {
  return (await obj.getPullRequestPreview('previews')).status?.lastSyncTime;
}

/** POSTs a delivery to the controller's receiver; returns the status. */
async function deliver(
  ctl: InProcessController,
  ns: string,
  headers: Record<string, string>,
  body: string,
): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${String(ctl.handle.previewWebhookPort)}/hooks/${ns}/previews`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return res.status;
}

describe('previews on the GitHub contract server (ETag polling)', () => {
  it('trusted PR → preview Stack; fork and NONE author → one notice each; unchanged listings are 304; a new head updates, close deletes; results on the PR with no lookup', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_prev0123456789: 'pko-bot' },
    });
    gh.addPullRequest('acme/app', { number: 7, headSha: sha('a'), author: 'alice', association: 'MEMBER' });
    gh.addPullRequest('acme/app', {
      number: 8,
      headSha: sha('b'),
      fork: true,
      headRef: 'main',
      association: 'CONTRIBUTOR',
    });
    gh.addPullRequest('acme/app', { number: 9, headSha: sha('c'), author: 'drive-by', association: 'NONE' });
    gh.addPullRequest('acme/app', { number: 10, headSha: sha('d'), base: 'release' });
    const ns = await createTestNamespace('pv-gh');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=e2e', '--preview-webhook-bind-address=127.0.0.1:0'],
    });
    const secret = randomBytes(12).toString('hex');
    let delivery = 0;
    const hook = async (): Promise<void> => {
      // Each delivery is another event (the receiver's replay key is the body) of acme/app.
      const body = JSON.stringify({
        action: 'synchronize',
        delivery,
        repository: { full_name: 'acme/app', clone_url: `${gh.origin}/acme/app.git` },
      });
      const status = await deliver(
        ctl,
        ns,
        {
          'x-github-event': 'pull_request',
          'x-github-delivery': `d-${String(++delivery)}`,
          'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
        },
        body,
      );
      expect(status).toBe(202);
    };
    try {
      await obj.secret('gh', { token: 'ghp_prev0123456789' });
      await obj.secret('hook', { token: secret });
      await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
      await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
      await obj.waitReady('providers', 'gh');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
      await previewObject(obj, {
        stackRef: { name: 'app' },
        providerRef: { name: 'gh' },
        interval: '10m',
        webhook: { secretRef: { name: 'hook' } },
      });

      const created = await waitFor(async () => sim.findStack('app-pr-7'), {
        ...WAIT,
        what: 'preview Stack of #7',
      });
      expect(created.spec).toMatchObject({ commit: sha('a'), preview: true });
      expect(created.spec?.destroyOnFinalize).toBeUndefined();
      const notice = (n: number) => gh.comments('acme/app', n).filter((c) => c.login === 'pko-bot');
      await waitFor(() => Promise.resolve(notice(8).length === 1 && notice(9).length === 1), {
        ...WAIT,
        what: 'notices on #8 and #9',
      });
      expect(notice(8)[0]?.body).toContain('fork');
      expect(notice(9)[0]?.body).toContain('association NONE');
      for (const n of [8, 9, 10]) expect(await sim.findStack(`app-pr-${String(n)}`)).toBeUndefined();

      // Nothing changed: the next sync's listing is a conditional request answered 304.
      const listings = () => gh.log.filter((r) => r.operationId === 'pulls/list');
      const before = listings().length;
      const synced = await lastSync(obj);
      await new Promise((r) => setTimeout(r, 1100));
      await hook();
      await waitFor(async () => ((await lastSync(obj)) !== synced ? true : undefined), {
        ...WAIT,
        what: 'a second sync',
      });
      // (Any sync in between, e.g. after our own status write, is conditional too: never a 200.)
      const since = listings()
        .slice(before)
        .map((r) => r.status);
      expect(since.length).toBeGreaterThanOrEqual(1);
      expect(new Set(since)).toEqual(new Set([304]));
      expect(notice(8)).toHaveLength(1);

      // A new head: the listing changes (200), the Stack follows.
      gh.updatePullRequest('acme/app', 7, { headSha: sha('e') });
      await hook();
      await waitFor(
        async () => ((await sim.findStack('app-pr-7'))?.spec?.commit === sha('e') ? true : undefined),
        {
          ...WAIT,
          what: 'app-pr-7 at the new head',
        },
      );
      expect(listings().at(-1)?.status).toBe(200);

      // A preview run: statuses of the preview Stack's context, one comment on #7 — and no
      // "pull requests of a commit" lookup: the event names the pull request.
      const run = await sim.startRun('app-pr-7', { type: 'preview', commit: sha('e') });
      await sim.finishRun(run, 'succeeded');
      await waitFor(() => Promise.resolve(gh.statuses('acme/app', sha('e'))[0]?.state === 'success'), {
        ...WAIT,
        what: 'success',
      });
      expect(gh.statuses('acme/app', sha('e'))[0]?.context).toBe(`pko/e2e/${ns}/app-pr-7`);
      const comment = await waitFor(
        () =>
          Promise.resolve(
            gh.comments('acme/app', 7).find((c) => c.login === 'pko-bot' && c.body.includes('succeeded')),
          ),
        { ...WAIT, what: 'the preview comment on #7' },
      );
      expect(comment.body).toContain(`${ns}/app-pr-7`);
      expect(gh.log.some((r) => r.operationId === 'repos/list-pull-requests-associated-with-commit')).toBe(
        false,
      );

      // Closed: deleted.
      gh.updatePullRequest('acme/app', 7, { state: 'closed' });
      await hook();
      await waitFor(async () => ((await sim.findStack('app-pr-7')) === undefined ? true : undefined), {
        ...WAIT,
        what: 'app-pr-7 deleted',
      });
      expect(gh.violations).toEqual([]);
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 90_000);
});

describe('previews on the GitLab contract server', () => {
  it("a Developer's MR → preview Stack; a fork MR and a Reporter's MR → one note each; a new head updates, merge deletes; the preview result is a note on the MR", async () => {
    const BOT = { id: 7, username: 'pko-bot' };
    const DEV = { id: 21, username: 'dev' };
    const REPORTER = { id: 22, username: 'reporter' };
    const gl = await startGitLabServer({ tokens: { 'glpat-preview-token': BOT } });
    gl.project('acme/app');
    gl.addMember('acme/app', DEV, 30);
    gl.addMember('acme/app', REPORTER, 20);
    gl.addMR('acme/app', { iid: 3, sha: sha('1'), author: DEV, source_branch: 'feat' });
    gl.addMR('acme/app', { iid: 4, sha: sha('2'), author: DEV, source_branch: 'main', fork: true });
    gl.addMR('acme/app', { iid: 5, sha: sha('3'), author: REPORTER, source_branch: 'r' });
    gl.addMR('acme/app', {
      iid: 6,
      sha: sha('4'),
      author: DEV,
      source_branch: 'x',
      target_branch: 'release',
    });
    const ns = await createTestNamespace('pv-gl');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=e2e', '--preview-webhook-bind-address=127.0.0.1:0'],
    });
    const secret = randomBytes(12).toString('hex');
    let delivery = 0;
    const hook = async (): Promise<void> => {
      const status = await deliver(
        ctl,
        ns,
        {
          'x-gitlab-event': 'Merge Request Hook',
          'x-gitlab-event-uuid': `gl-${String(++delivery)}`,
          'x-gitlab-token': secret,
        },
        // Each delivery is another event (the receiver's replay key is the body) of acme/app.
        JSON.stringify({
          object_kind: 'merge_request',
          delivery,
          project: { path_with_namespace: 'acme/app', git_http_url: `${gl.url}/acme/app.git` },
        }),
      );
      expect(status).toBe(202);
    };
    try {
      await obj.secret('gl', { token: 'glpat-preview-token' });
      await obj.secret('hook', { token: secret });
      await obj.provider('gl', { type: 'gitlab', address: `${gl.url}/acme`, secretRef: { name: 'gl' } });
      await obj.alert('gl', { providerRef: { name: 'gl' }, eventSources: [{ kind: 'Stack' }] });
      await obj.waitReady('providers', 'gl');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: `${gl.url}/acme/app.git`, branch: 'main' } });
      await previewObject(obj, {
        stackRef: { name: 'app' },
        providerRef: { name: 'gl' },
        interval: '10m',
        webhook: { secretRef: { name: 'hook' } },
      });
      const created = await waitFor(async () => sim.findStack('app-pr-3'), {
        ...WAIT,
        what: 'preview Stack of !3',
      });
      expect(created.spec).toMatchObject({ commit: sha('1'), preview: true });
      const mr = (iid: number) => gl.project('acme/app').mrs.find((m) => m.iid === iid);
      const botNotes = (iid: number) => mr(iid)?.notes.filter((n) => n.author.id === BOT.id) ?? [];
      await waitFor(() => Promise.resolve(botNotes(4).length === 1 && botNotes(5).length === 1), {
        ...WAIT,
        what: 'notes on !4 and !5',
      });
      expect(botNotes(4)[0]?.body).toContain('fork');
      expect(botNotes(5)[0]?.body).toContain('association NONE');
      for (const n of [4, 5, 6]) expect(await sim.findStack(`app-pr-${String(n)}`)).toBeUndefined();

      const m3 = mr(3);
      if (m3 === undefined) throw new Error('no !3');
      m3.sha = sha('9');
      m3.commits.push(sha('9'));
      await hook();
      await waitFor(
        async () => ((await sim.findStack('app-pr-3'))?.spec?.commit === sha('9') ? true : undefined),
        {
          ...WAIT,
          what: 'app-pr-3 at the new head',
        },
      );
      const run = await sim.startRun('app-pr-3', { type: 'preview', commit: sha('9') });
      await sim.finishRun(run, 'failed');
      const note = await waitFor(() => Promise.resolve(botNotes(3).find((n) => n.body.includes('failed'))), {
        ...WAIT,
        what: 'the preview note on !3',
      });
      expect(note.body).toContain(`${ns}/app-pr-3`);
      expect(
        gl
          .project('acme/app')
          .statuses.filter((x) => x.sha === sha('9'))
          .map((x) => x.name),
      ).toContain(`pko/e2e/${ns}/app-pr-3`);
      expect(botNotes(4)).toHaveLength(1);

      m3.state = 'merged';
      await hook();
      await waitFor(async () => ((await sim.findStack('app-pr-3')) === undefined ? true : undefined), {
        ...WAIT,
        what: 'app-pr-3 deleted',
      });
    } finally {
      await ctl.stop();
      await gl.close();
    }
  }, 90_000);
});

describe('a replaced forge client', () => {
  it('is closed only after the notice job that holds it is done (a Provider change does not fail it with CLOSED)', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_replace0123456: 'pko-bot' },
    });
    gh.addPullRequest('acme/app', { number: 9, headSha: sha('c'), author: 'drive-by', association: 'NONE' });
    /** Each client built, with whether it was closed and what its notice calls ended with. */
    const clients: { closed: boolean; notices: string[] }[] = [];
    let open: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const forgeFor = (p: Parameters<NonNullable<(typeof FORGES)['github']['previews']>>[0]) => {
      const real = FORGES.github.previews?.(p, { http: new ProviderHttp(p) });
      if (real === undefined) return undefined;
      const me = { closed: false, notices: [] as string[] };
      clients.push(me);
      const forge: PreviewForge = {
        ...real,
        // The first client's notice waits until the test opens the gate (the job stays running).
        upsertNotice: async (...args) => {
          if (me === clients[0]) await gate;
          return real.upsertNotice(...args).then(
            (url) => {
              me.notices.push('posted');
              return url;
            },
            (err: unknown) => {
              me.notices.push(`failed: ${errorMessage(err)}`);
              throw err;
            },
          );
        },
        close: async () => {
          me.closed = true;
          await real.close();
        },
      };
      return forge;
    };
    const ns = await createTestNamespace('pv-replace');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, {
      flags: ['--cluster-name=e2e'],
      deps: { previews: { forgeFor } },
    });
    try {
      await obj.secret('gh', { token: 'ghp_replace0123456' });
      await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
      await obj.waitReady('providers', 'gh');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
      await previewObject(obj, { stackRef: { name: 'app' }, providerRef: { name: 'gh' }, interval: '10m' });
      await waitFor(async () => ((await lastSync(obj)) !== undefined ? true : undefined), {
        ...WAIT,
        what: 'a first sync (the notice of #9 queued, held)',
      });
      // The Provider changes (its resolved settings do): the next sync builds a new client.
      const admin = kubeConfig('admin');
      await kubeRequest(admin, {
        method: 'PATCH',
        path: objectPath({ group: GROUP, version: VERSION, plural: 'providers', namespace: ns, name: 'gh' }),
        body: { spec: { timeout: '25s' } },
        contentType: 'application/merge-patch+json',
      });
      let asked = 0;
      await waitFor(
        async () => {
          if (clients.length >= 2) return true;
          // Ask for syncs until one sees the changed Provider.
          await kubeRequest(admin, {
            method: 'PATCH',
            path: objectPath({
              group: GROUP,
              version: VERSION,
              plural: 'pullrequestpreviews',
              namespace: ns,
              name: 'previews',
            }),
            body: { metadata: { annotations: { [SYNC_REQUEST_ANNOTATION]: String(++asked) } } },
            contentType: 'application/merge-patch+json',
          });
          return undefined;
        },
        { ...WAIT, intervalMs: 500, what: 'a second forge client after the Provider change' },
      );
      expect(clients[0]?.closed).toBe(false); // its notice job still runs
      open();
      await waitFor(() => Promise.resolve(clients[0]?.notices.length === 1 || undefined), {
        ...WAIT,
        what: 'the held notice done',
      });
      expect(clients[0]?.notices).toEqual(['posted']);
      await waitFor(() => Promise.resolve(clients[0]?.closed === true || undefined), {
        ...WAIT,
        what: 'the replaced client closed once its job is done',
      });
    } finally {
      open();
      await ctl.stop();
      await gh.close();
    }
  }, 90_000);
});
