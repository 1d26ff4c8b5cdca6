/**
 * The Gitea harness (test/support/gitea.ts) against the real Gitea it starts: every helper the
 * end-to-end tests use works, and the Gitea behaviours the `gitea` notifier relies on (or works
 * around) still hold on the version built. Each one is marked "observed on Gitea 1.27.3".
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from './cluster.ts';
import { GITEA_VERSION, startGitea, type Gitea, type GiteaPull, type GiteaUser } from './gitea.ts';
import { startReceiver } from './receiver.ts';

let gitea: Gitea;
/** Set once started: `afterAll` stops it even when `beforeAll` failed half-way. */
let running: Gitea | undefined;
let dev: GiteaUser;

beforeAll(async () => {
  gitea = await startGitea();
  running = gitea;
  dev = await gitea.createUser('dev');
});

afterAll(async () => {
  await running?.stop();
});

describe('Gitea harness', () => {
  it('starts the built version with a working admin token; a wrong token is refused', async () => {
    const { data } = await gitea.api<{ version: string }>('GET', '/version');
    expect(data.version).toBe(GITEA_VERSION);
    const me = await gitea.api<{ login: string; is_admin: boolean }>('GET', '/user');
    expect(me.data).toMatchObject({ login: 'pko-admin', is_admin: true });
    const other = await gitea.api<{ login: string; is_admin: boolean }>('GET', '/user', { as: dev });
    expect(other.data).toMatchObject({ login: 'dev', is_admin: false });
    await gitea.api('GET', '/user', { as: { ...dev, token: '0'.repeat(40) }, expect: [401] });
  });

  it('repositories, commits (contents API and git push), pull requests opened, closed, reopened and merged', async () => {
    await gitea.createRepo('flow');
    const owner = gitea.admin.username;
    await gitea.createBranch(owner, 'flow', 'topic');
    const c1 = await gitea.commit(owner, 'flow', { branch: 'topic' });
    expect(await gitea.branchSha(owner, 'flow', 'topic')).toBe(c1);
    const c2 = await gitea.gitPush(owner, 'flow', 'topic');
    expect(c2).toMatch(/^[0-9a-f]{40}$/);
    expect(await gitea.branchSha(owner, 'flow', 'topic')).toBe(c2);

    const pr = await gitea.openPull(owner, 'flow', { head: 'topic' });
    expect(pr).toMatchObject({ state: 'open', merged: false, head: { ref: 'topic', sha: c2 } });
    const openList = async (): Promise<number[]> =>
      (await gitea.all<GiteaPull>(`/repos/${owner}/flow/pulls?state=open`)).map((p) => p.number);
    expect(await openList()).toEqual([pr.number]);
    expect((await gitea.setPullState(owner, 'flow', pr.number, 'closed')).state).toBe('closed');
    expect(await openList()).toEqual([]);
    expect((await gitea.setPullState(owner, 'flow', pr.number, 'open')).state).toBe('open');
    const merged = await gitea.mergePull(owner, 'flow', pr.number);
    expect(merged).toMatchObject({ state: 'closed', merged: true });
    expect(merged.merge_commit_sha).toMatch(/^[0-9a-f]{40}$/);
    expect(await openList()).toEqual([]);
  });

  it('observed on Gitea 1.27.3: commit statuses are paged (limit 50, Link rel="next"); issue comments are not (limit/page ignored)', async () => {
    await gitea.createRepo('paging');
    const owner = gitea.admin.username;
    const sha = await gitea.branchSha(owner, 'paging', 'main');
    for (let i = 0; i < 51; i++)
      await gitea.postStatus(owner, 'paging', sha, { state: 'success', context: `c/${i}` });
    const page1 = await gitea.api<unknown[]>(
      'GET',
      `/repos/${owner}/paging/commits/${sha}/statuses?limit=50&page=1`,
    );
    expect(page1.data).toHaveLength(50);
    expect(page1.headers.get('x-total-count')).toBe('51');
    expect(page1.headers.get('link')).toMatch(/rel="next"/);
    expect(await gitea.statuses(owner, 'paging', sha)).toHaveLength(51);

    await gitea.createBranch(owner, 'paging', 'topic');
    await gitea.commit(owner, 'paging', { branch: 'topic' });
    const pr = await gitea.openPull(owner, 'paging', { head: 'topic' });
    for (let i = 0; i < 51; i++) await gitea.addComment(owner, 'paging', pr.number, `comment ${i}`, dev);
    const asked = await gitea.api<unknown[]>(
      'GET',
      `/repos/${owner}/paging/issues/${pr.number}/comments?limit=10&page=2`,
    );
    expect(asked.data).toHaveLength(51);
    expect(asked.headers.get('x-total-count')).toBe('51');
    expect(asked.headers.get('link')).toBeNull();
  });

  it('observed on Gitea 1.27.3: a renamed repository answers 301 to the new path on reads and writes; a fork is a repository of its own', async () => {
    await gitea.createRepo('before');
    const owner = gitea.admin.username;
    const sha = await gitea.branchSha(owner, 'before', 'main');
    await gitea.renameRepo(owner, 'before', 'after');
    const get = await gitea.api('GET', `/repos/${owner}/before`, { expect: [301] });
    expect(get.headers.get('location')).toBe(`/api/v1/repos/${owner}/after`);
    const post = await gitea.api('POST', `/repos/${owner}/before/statuses/${sha}`, {
      body: { state: 'success', context: 'x' },
      expect: [301],
    });
    expect(post.headers.get('location')).toBe(`/api/v1/repos/${owner}/after/statuses/${sha}`);
    expect(await gitea.statuses(owner, 'after', sha)).toEqual([]); // the 301 stored nothing

    const fork = await gitea.fork(owner, 'after', dev);
    expect(fork).toMatchObject({ fork: true, full_name: 'dev/after', owner: { login: 'dev' } });
  });

  it('webhooks reach a loopback receiver, signed with HMAC-SHA256 of the body', async () => {
    const rx = await startReceiver();
    try {
      await gitea.createRepo('hooked');
      const owner = gitea.admin.username;
      const hook = await gitea.addWebhook(owner, 'hooked', {
        url: `${rx.url}/hook`,
        secret: 'hook-secret',
        events: ['push', 'status'],
      });
      await gitea.commit(owner, 'hooked', { branch: 'main' });
      const push = await waitFor(
        () => Promise.resolve(rx.requests.find((r) => r.headers['x-gitea-event'] === 'push')),
        { timeoutMs: 15_000, what: `push webhook (hook ${hook.id})` },
      );
      const sig = createHmac('sha256', 'hook-secret').update(push.raw).digest('hex');
      expect(push.headers['x-gitea-signature']).toBe(sig);
      expect(push.headers['x-hub-signature-256']).toBe(`sha256=${sig}`);
    } finally {
      await rx.close();
    }
  });
});
