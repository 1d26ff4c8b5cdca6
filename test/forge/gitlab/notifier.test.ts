import { describe, expect, it } from 'vitest';
import { startProxy } from '../../support/proxy.ts';
import { startGitLabServer, type GitLabServer, type GitLabServerOptions } from './server.ts';
import {
  CONTEXT,
  MARKER,
  deployEvent,
  event,
  previewEvent,
  failure,
  forgeNotifier,
  provider,
  rendered,
  useCleanup,
} from '../helpers.ts';
import { sha, type ForgeRequest } from '../kit.ts';

const later = useCleanup();
const TOKEN = 'glpat-test-token-000111';
const BOT = { id: 77, username: 'pko-bot' };
const HUMAN = { id: 5, username: 'alice' };
const PATH = 'platform/infra/stacks/app';
const ENCODED = 'platform%2Finfra%2Fstacks%2Fapp';
const SHA = sha('1');

async function server(opts: Partial<GitLabServerOptions> = {}): Promise<GitLabServer> {
  const s = await startGitLabServer({ tokens: { [TOKEN]: BOT, 'human-token': HUMAN }, ...opts });
  later(() => s.close());
  return s;
}

function notifier(
  s: GitLabServer,
  extra: Parameters<typeof provider>[0] extends infer P ? Partial<P> : never = {},
) {
  return forgeNotifier(
    provider({ type: 'gitlab', address: `${s.url}/${PATH}`, token: TOKEN, ...extra }),
    later,
  );
}

describe('gitlab', () => {
  it('F01: a subgroup project gets exactly one POST to the URL-encoded full path with state success', async () => {
    const s = await server();
    s.project(PATH);
    await notifier(s).send(event(SHA, { branch: 'main' }), rendered('success'));
    expect(s.writes()).toEqual([`POST /api/v4/projects/${ENCODED}/statuses/${SHA}`]);
    const post = s.requests.find((r) => r.method === 'POST')!;
    expect(post.json).toMatchObject({
      state: 'success',
      name: CONTEXT,
      ref: 'main',
      description: 'Update success',
    });
    expect(post.json).toMatchObject({ target_url: 'https://console.example.com/runs/1' });
    expect(post.headers['private-token']).toBe(TOKEN);
    expect(s.project(PATH).statuses.map((x) => x.status)).toEqual(['success']);
  });

  it("one comment follows the change: the base Stack's deployment of a merge, squash or fast-forwarded head edits the merged MR's preview note; an MR that merely contains the commit, or has no preview note, gets none", async () => {
    const s = await server();
    const HEAD = sha('2');
    const mr = s.addMR(PATH, { iid: 8, sha: HEAD, source_branch: 'feature/y' });
    const n = notifier(s);
    await n.send(previewEvent(HEAD), rendered('success', { comment: 'preview: +1 to create' }));
    const note = mr.notes[0]!;
    const p = s.project(PATH);
    const cases: [string, Partial<typeof mr>][] = [
      [sha('3'), { merge_commit_sha: sha('3') }],
      [sha('4'), { merge_commit_sha: sha('5'), squash_commit_sha: sha('4') }],
      [HEAD, { merge_commit_sha: null }],
    ];
    for (const [deployed, fields] of cases) {
      Object.assign(
        mr,
        { state: 'merged', merge_commit_sha: undefined, squash_commit_sha: undefined },
        fields,
      );
      await notifier(s).send(deployEvent(deployed), rendered('success', { comment: `Deployed ${deployed}` }));
      expect(mr.notes.map((x) => [x.id, x.body])).toEqual([[note.id, `${MARKER}\nDeployed ${deployed}`]]);
    }
    // An MR merged by another commit that contains this one; an MR without a preview note.
    s.addMR(PATH, {
      iid: 9,
      sha: sha('6'),
      state: 'merged',
      commits: [sha('7')],
      merge_commit_sha: sha('8'),
    });
    s.addMR(PATH, { iid: 10, sha: sha('9'), state: 'merged', merge_commit_sha: sha('7') });
    await notifier(s).send(deployEvent(sha('7')), rendered('success', { comment: 'Deployed again' }));
    expect(p.mrs.filter((x) => x.iid !== 8).flatMap((x) => x.notes)).toEqual([]);
  });

  it('pending → success on a commit, and one sticky MR note edited in place over 5 sends', async () => {
    const s = await server();
    s.addMR(PATH, { iid: 7, sha: SHA, source_branch: 'feature/x' });
    const n = notifier(s);
    const ev = previewEvent(SHA); // no branch: the MR's source branch is the ref
    await n.send(ev, rendered('pending', { comment: 'preview 1: running' }));
    for (let i = 2; i <= 5; i++) await n.send(ev, rendered('success', { comment: `preview ${i}: done` }));

    const p = s.project(PATH);
    expect(p.statuses).toHaveLength(1);
    expect(p.statuses[0]).toMatchObject({ status: 'success', name: CONTEXT, ref: 'feature/x' });
    const notes = p.mrs[0]!.notes;
    expect(notes).toHaveLength(1);
    expect(notes[0]!.body).toBe(`${MARKER}\npreview 5: done`);
    expect(notes[0]!.author).toEqual(BOT);
    const writes = s.writes();
    expect(writes.filter((w) => w.includes('/statuses/'))).toHaveLength(2); // running, then success once
    expect(writes.filter((w) => w.startsWith('POST') && w.endsWith('/notes'))).toHaveLength(1);
    expect(writes.filter((w) => w.startsWith('PUT'))).toHaveLength(4);
    // States map: pending → running, success → success.
    const states = s.requests
      .filter((r) => r.path.includes('/statuses/') && r.method === 'POST')
      .map((r) => (r.json as { state: string }).state);
    expect(states).toEqual(['running', 'success']);
  });

  it('F05: re-sending the same status is not posted again, across notifiers (read back from GitLab)', async () => {
    const s = await server();
    s.project(PATH);
    await notifier(s).send(event(SHA, { branch: 'main' }), rendered('success'));
    for (let i = 0; i < 3; i++) await notifier(s).send(event(SHA, { branch: 'main' }), rendered('success'));
    const n = notifier(s);
    for (let i = 0; i < 5; i++) await n.send(event(SHA, { branch: 'main' }), rendered('success'));
    expect(s.writes()).toHaveLength(1);
  });

  it('F06: 45 statuses from other tools and ours last with the same state → no POST (name-filtered query)', async () => {
    const s = await server();
    for (let i = 0; i < 45; i++) s.addStatus(PATH, { sha: SHA, name: `other-tool-${i}`, status: 'success' });
    s.addStatus(PATH, { sha: SHA, name: CONTEXT, status: 'success', description: 'Update success' });
    await notifier(s).send(event(SHA, { branch: 'main' }), rendered('success'));
    expect(s.writes()).toEqual([]);
    const reads = s.requests.filter((r) => r.path.endsWith('/statuses'));
    expect(reads).toHaveLength(1);
    expect(reads[0]!.query.get('name')).toBe(CONTEXT);
  });

  it('F06: a GitLab that ignores the name filter is paged through to the last page', async () => {
    const s = await server({ ignoreNameFilter: true });
    for (let i = 0; i < 245; i++) s.addStatus(PATH, { sha: SHA, name: `other-tool-${i}`, status: 'failed' });
    s.addStatus(PATH, { sha: SHA, name: CONTEXT, status: 'success', description: 'Update success' });
    await notifier(s).send(event(SHA, { branch: 'main' }), rendered('success'));
    expect(s.writes()).toEqual([]);
    const pages = s.requests
      .filter((r) => r.path.endsWith('/statuses'))
      .map((r) => r.query.get('page') ?? '1');
    expect(pages).toEqual(['1', '2', '3']);
  });

  it('F15: 400 "Cannot transition status via :run from :running" counts as delivered, no retry', async () => {
    const s = await server();
    // Ours is already running (from a previous process) with another description.
    s.addStatus(PATH, { sha: SHA, name: CONTEXT, status: 'running', description: 'older text' });
    const n = notifier(s);
    await n.send(event(SHA, { branch: 'main' }), rendered('pending', { description: 'Update running' }));
    const posts = s.requests.filter((r) => r.method === 'POST');
    expect(posts).toHaveLength(1);
    expect(posts[0]!.status).toBe(400);
    // Remembered as delivered: the same status again sends nothing.
    await n.send(event(SHA, { branch: 'main' }), rendered('pending', { description: 'Update running' }));
    expect(s.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it('F15: 400 "Cannot transition status via :enqueue from :pending" on a POST is swallowed; other 400s are final', async () => {
    const s = await server();
    s.project(PATH);
    const n = notifier(s);
    // First send reads (no status), then POSTs: fail the POST with the transition message.
    await n.send(event(sha('2'), { branch: 'main' }), rendered('success'));
    const isPost = (r: ForgeRequest): boolean => r.method === 'POST';
    s.failNext(
      { status: 400, json: { message: 'Cannot transition status via :enqueue from :pending' } },
      1,
      isPost,
    );
    await n.send(event(sha('2'), { branch: 'main' }), rendered('failure'));
    expect(s.requests.at(-1)!.status).toBe(400);
    s.failNext({ status: 400, json: { message: { description: ['is invalid'] } } }, 1, isPost);
    const err = await failure(() => n.send(event(sha('2'), { branch: 'main' }), rendered('pending')));
    expect(err.status).toBe(400);
    expect(err.retryable).toBe(false);
  });

  it('F16: among 250 notes, ours is found and edited; a human note quoting the marker is never touched', async () => {
    const s = await server();
    s.addMR(PATH, { iid: 9, sha: SHA });
    for (let i = 0; i < 250; i++) {
      if (i === 3) s.addNote(PATH, 9, { body: `I saw this: ${MARKER}`, author: HUMAN });
      else if (i === 230) s.addNote(PATH, 9, { body: `${MARKER}\nold preview`, author: BOT });
      else if (i % 50 === 0) s.addNote(PATH, 9, { body: 'merged branch x', author: BOT, system: true });
      else
        s.addNote(PATH, 9, {
          body: `comment ${i}`,
          author: i % 2 === 0 ? HUMAN : { id: 90, username: 'other-bot' },
        });
    }
    const n = notifier(s);
    for (let i = 1; i <= 5; i++)
      await n.send(
        previewEvent(SHA, { branch: 'feature' }),
        rendered('success', { comment: `preview ${i}` }),
      );
    const notes = s.project(PATH).mrs[0]!.notes;
    expect(notes).toHaveLength(250);
    expect(notes.filter((x) => x.body.includes(MARKER))).toHaveLength(2);
    expect(notes[3]!.body).toBe(`I saw this: ${MARKER}`);
    expect(notes[230]!.body).toBe(`${MARKER}\npreview 5`);
    // Listed once (3 pages of 100), then edited by id.
    expect(s.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/notes'))).toHaveLength(3);
    expect(s.writes().filter((w) => w.startsWith('PUT'))).toHaveLength(5);
  });

  it('F16: only a human note carries the marker → ours is created next to it', async () => {
    const s = await server();
    s.addMR(PATH, { iid: 9, sha: SHA });
    s.addNote(PATH, 9, { body: `quoting ${MARKER}`, author: HUMAN });
    await notifier(s).send(event(SHA, { pullRequest: '9' }), rendered('success', { comment: 'preview' }));
    const notes = s.project(PATH).mrs[0]!.notes;
    expect(notes.map((x) => [x.author.username, x.body])).toEqual([
      ['alice', `quoting ${MARKER}`],
      ['pko-bot', `${MARKER}\npreview`],
    ]);
  });

  it('comments only on open MRs whose head is the commit; none → status only', async () => {
    const s = await server();
    s.addMR(PATH, { iid: 1, sha: SHA, state: 'merged' });
    s.addMR(PATH, { iid: 2, sha: sha('9'), commits: [SHA, sha('9')] });
    await notifier(s).send(event(SHA, { branch: 'main' }), rendered('success', { comment: 'x' }));
    expect(s.project(PATH).mrs.flatMap((m) => m.notes)).toEqual([]);
    expect(s.writes()).toEqual([`POST /api/v4/projects/${ENCODED}/statuses/${SHA}`]);
  });

  it('pullRequestComment disabled: merge requests are only read (for their pipeline), no note', async () => {
    const s = await server();
    s.addMR(PATH, { iid: 7, sha: SHA });
    await notifier(s, { pullRequestComment: false }).send(
      event(SHA, { branch: 'main' }),
      rendered('success', { comment: 'x' }),
    );
    expect(s.requests.filter((r) => r.path.includes('merge_requests')).map((r) => r.method)).not.toContain(
      'POST',
    );
    expect(s.requests.some((r) => r.path.includes('/notes'))).toBe(false);
    expect(s.project(PATH).mrs[0]!.notes).toEqual([]);
  });

  it('N09: MR !3 (source feature/x) whose head pipeline 77 runs for the commit: the status POST carries pipeline_id=77 and lands in it', async () => {
    const s = await server();
    // GitLab ran a branch pipeline (70) and the merge request pipeline (77) for the commit.
    s.addPipeline(PATH, { id: 70, sha: SHA, ref: 'feature/x' });
    s.addPipeline(PATH, {
      id: 77,
      sha: SHA,
      ref: 'refs/merge-requests/3/head',
      source: 'merge_request_event',
    });
    s.addMR(PATH, { iid: 3, sha: SHA, source_branch: 'feature/x', head_pipeline_id: 77 });
    await notifier(s).send(event(SHA, { branch: 'feature/x' }), rendered('pending', { comment: 'running' }));
    const post = s.requests.find((r) => r.method === 'POST' && r.path.endsWith(`/statuses/${SHA}`));
    expect(post?.json).toMatchObject({ pipeline_id: 77, ref: 'refs/merge-requests/3/head' });
    const [st] = s.project(PATH).statuses;
    expect([st?.pipeline_id, st?.status]).toEqual([77, 'running']);
    // No detached pipeline was made for the status.
    expect(s.project(PATH).pipelines.map((p) => p.id)).toEqual([70, 77]);
  });

  it('N09: without a merge request pipeline on the commit, ref is used as before', async () => {
    const s = await server();
    s.addPipeline(PATH, { id: 70, sha: SHA, ref: 'feature/x' });
    // The MR's head pipeline ran for an older commit: not this one.
    s.addPipeline(PATH, { id: 60, sha: sha('6'), ref: 'refs/merge-requests/3/head' });
    s.addMR(PATH, { iid: 3, sha: SHA, source_branch: 'feature/x', head_pipeline_id: 60 });
    await notifier(s).send(event(SHA, { branch: 'feature/x' }), rendered('success'));
    const post = s.requests.find((r) => r.method === 'POST' && r.path.endsWith(`/statuses/${SHA}`));
    expect(post?.json).toMatchObject({ ref: 'feature/x' });
    expect(post?.json).not.toHaveProperty('pipeline_id');
    expect(s.project(PATH).statuses.map((x) => x.pipeline_id)).toEqual([70]);
  });

  it('the contract server refuses a pipeline_id with another ref, as GitLab does', async () => {
    const s = await server();
    s.addPipeline(PATH, { id: 77, sha: SHA, ref: 'refs/merge-requests/3/head' });
    const res = await fetch(`${s.url}/api/v4/projects/${ENCODED}/statuses/${SHA}`, {
      method: 'POST',
      headers: { 'PRIVATE-TOKEN': TOKEN, 'content-type': 'application/json' },
      body: JSON.stringify({ state: 'running', name: 'x', ref: 'feature/x', pipeline_id: 77 }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ message: '404 Pipeline for pipeline_id, sha and ref Not Found' });
  });

  it('F14: a note of exactly 1,000,000 characters is accepted', async () => {
    const s = await server();
    s.addMR(PATH, { iid: 3, sha: SHA });
    const body = `${MARKER}\n`;
    const text = 'x'.repeat(1_000_000 - body.length);
    await notifier(s).send(previewEvent(SHA, { branch: 'b' }), rendered('success', { comment: text }));
    const notes = s.project(PATH).mrs[0]!.notes;
    expect(notes).toHaveLength(1);
    expect(notes[0]!.body.length).toBe(1_000_000);
    // One more character (GitLab would answer 400) is refused before any request: final, no retry.
    const before = s.requests.length;
    const err = await failure(() =>
      notifier(s).send(event(SHA, { pullRequest: '3' }), {
        message: 'm',
        comment: { marker: MARKER, body: `${body}${text}y` },
      }),
    );
    expect(err.code).toBe('LIMIT_EXCEEDED');
    expect(err.retryable).toBe(false);
    expect(s.requests.length).toBe(before);
  });

  it("F09: every request (GET /user, statuses, MRs, notes) goes through the Provider's proxy", async () => {
    const s = await server();
    s.addMR(PATH, { iid: 7, sha: SHA });
    const px = await startProxy();
    later(() => px.close());
    const n = notifier(s, { proxy: { address: px.url } });
    await n.send(event(SHA), rendered('pending', { comment: 'a' }));
    await n.send(event(SHA), rendered('success', { comment: 'b' }));
    expect(s.requests.length).toBeGreaterThanOrEqual(6);
    expect(px.seen).toEqual(s.requests.map((r) => `${r.method} ${s.url}${r.url}`));
    expect(s.connections()).toBe(px.seen.length); // the proxy opened every connection the server saw
  });

  it('429 with Retry-After surfaces once as a retryable ProviderError (gitbeaker does not retry on its own)', async () => {
    const s = await server();
    s.project(PATH);
    s.failNext({ status: 429, headers: { 'Retry-After': '7' }, json: { message: 'Too Many Requests' } }, 20);
    const err = await failure(() => notifier(s).send(event(SHA, { branch: 'main' }), rendered('success')));
    expect(err.retryable).toBe(true);
    expect(err.retryAfterMs).toBe(7000);
    expect(s.requests).toHaveLength(1);
  });

  it('401 is final and never shows the token', async () => {
    const s = await server();
    const err = await failure(() =>
      forgeNotifier(
        provider({ type: 'gitlab', address: `${s.url}/${PATH}`, token: 'wrong-token-123456' }),
        later,
      ).send(event(SHA, { branch: 'main' }), rendered('success')),
    );
    expect(err.status).toBe(401);
    expect(err.retryable).toBe(false);
    expect(err.message).not.toContain('wrong-token-123456');
  });

  it('username + password: the password is sent as the access token, never as basic auth', async () => {
    const s = await server();
    s.project(PATH);
    await forgeNotifier(
      provider({ type: 'gitlab', address: `${s.url}/${PATH}`, username: 'ci', password: TOKEN }),
      later,
    ).send(event(SHA, { branch: 'main' }), rendered('success'));
    expect(
      s.requests.every((r) => r.headers['private-token'] === TOKEN && r.headers.authorization === undefined),
    ).toBe(true);
    expect(s.writes()).toHaveLength(1);
  });

  it('refuses a Provider without token or password when built', () => {
    expect(() =>
      forgeNotifier(provider({ type: 'gitlab', address: 'https://gitlab.example.net/a/b' }), later),
    ).toThrow(/needs an access token/);
  });

  it('an owner-level address takes the project from the Stack repository', async () => {
    const s = await server();
    s.project(PATH);
    const n = forgeNotifier(provider({ type: 'gitlab', address: `${s.url}/platform`, token: TOKEN }), later);
    await n.send(event(SHA, { branch: 'main', repository: `${s.url}/${PATH}.git` }), rendered('success'));
    expect(s.writes()).toEqual([`POST /api/v4/projects/${ENCODED}/statuses/${SHA}`]);
    const err = await failure(() =>
      n.send(event(SHA, { branch: 'main', repository: `${s.url}/elsewhere/app.git` }), rendered('success')),
    );
    expect(err.code).toBe('OutsideAddress');
    expect(err.retryable).toBe(false);
  });
});
