import { describe, expect, it } from 'vitest';
import { MAX_REDIRECTS } from '../../../src/notifier/redirect.ts';
import { startGiteaServer, type GiteaServer } from './server.ts';
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
  resolvedFromSecret,
  useCleanup,
} from '../helpers.ts';
import { sha } from '../kit.ts';

const later = useCleanup();
const TOKEN = 'gitea-token-abcdef0123';
const BOT = { id: 42, login: 'pko-bot' };
const HUMAN = { id: 7, login: 'bob' };
const SHA = sha('a');

async function server(): Promise<GiteaServer> {
  const s = await startGiteaServer({
    tokens: { [TOKEN]: BOT, 'human-token-x': HUMAN },
    passwords: { 'pko-bot': 's3cret-pass' },
  });
  later(() => s.close());
  s.repo('acme', 'infra');
  return s;
}
const address = (s: GiteaServer): string => `${s.url}/acme/infra`;

describe('gitea', () => {
  it('pending → success on a commit, and one sticky comment edited in place over 5 sends', async () => {
    const s = await server();
    s.addPull('acme', 'infra', { number: 12, sha: SHA });
    const n = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
    await n.send(previewEvent(SHA), rendered('pending', { comment: 'preview 1' }));
    for (let i = 2; i <= 5; i++)
      await n.send(previewEvent(SHA), rendered('success', { comment: `preview ${i}` }));

    const statuses = s.repo('acme', 'infra').statuses.get(SHA)!;
    expect(statuses.map((x) => [x.context, x.status])).toEqual([
      [CONTEXT, 'pending'],
      [CONTEXT, 'success'],
    ]);
    expect(statuses[1]).toMatchObject({
      description: 'Update success',
      target_url: 'https://console.example.com/runs/1',
    });
    const comments = s.repo('acme', 'infra').pulls[0]!.comments;
    expect(comments).toHaveLength(1);
    expect(comments[0]).toMatchObject({ body: `${MARKER}\npreview 5`, user: BOT });
    expect(
      s.writes().filter((w) => w.startsWith('PATCH /api/v1/repos/acme/infra/issues/comments/')),
    ).toHaveLength(4);
    expect(s.requests.every((r) => r.headers.authorization === `token ${TOKEN}`)).toBe(true);
  });

  it("one comment follows the change: the base Stack's deployment of a merge edits the comment its preview wrote on the merged PR, creates none on a merged PR without one, and asks nothing for other Stacks", async () => {
    const s = await server();
    const HEAD = sha('b');
    const MERGE = sha('c');
    const pr = s.addPull('acme', 'infra', { number: 12, sha: HEAD });
    const p = provider({ type: 'gitea', address: address(s), token: TOKEN });
    await forgeNotifier(p, later).send(
      event(HEAD, { pullRequest: '12' }),
      rendered('success', { comment: 'preview: +1 to create' }),
    );
    const previewComment = pr.comments[0]!;
    Object.assign(pr, { state: 'closed', merged: true, merge_commit_sha: MERGE });

    // A restart in between: nothing cached, the comment is found by its marker and edited.
    const n = forgeNotifier(p, later);
    await n.send(deployEvent(MERGE), rendered('success', { comment: 'Deployed: +1 created' }));
    expect(pr.comments).toEqual([{ ...previewComment, body: `${MARKER}\nDeployed: +1 created` }]);
    expect(
      s
        .repo('acme', 'infra')
        .statuses.get(MERGE)
        ?.map((x) => x.status),
    ).toEqual(['success']);

    // A merged pull request whose preview wrote no comment gets none.
    const MERGE2 = sha('d');
    const other = s.addPull('acme', 'infra', { number: 13, sha: sha('e'), state: 'closed' });
    Object.assign(other, { merged: true, merge_commit_sha: MERGE2 });
    await n.send(deployEvent(MERGE2), rendered('success', { comment: 'Deployed again' }));
    expect(other.comments).toEqual([]);
    expect(s.requests.some((r) => r.path.endsWith(`/commits/${MERGE2}/pull`))).toBe(true);

    // An ordinary Stack's event on a merge commit does not ask which pull request it merged.
    const MERGE3 = sha('f');
    await n.send(event(MERGE3), rendered('success', { comment: 'plain' }));
    expect(s.requests.some((r) => r.path.endsWith(`/commits/${MERGE3}/pull`))).toBe(false);
    // A commit that merged nothing: 404, nothing written beyond the status.
    const before = s.writes().length;
    await n.send(deployEvent(sha('0')), rendered('success', { comment: 'nothing merged' }));
    expect(s.writes().slice(before)).toEqual([`POST /api/v1/repos/acme/infra/statuses/${sha('0')}`]);
  });

  it('N17: after a restart, a comment listing over the 8 MiB read limit fails the comment step; never a second sticky comment', async () => {
    const s = await server();
    s.addPull('acme', 'infra', { number: 12, sha: SHA });
    const p = provider({ type: 'gitea', address: address(s), token: TOKEN });
    await forgeNotifier(p, later).send(previewEvent(SHA), rendered('pending', { comment: 'first' }));
    // A restart (nothing cached), and the listing answers valid JSON padded past 8 MiB.
    const n = forgeNotifier(p, later);
    const listing = (r: { method: string; path: string }): boolean =>
      r.method === 'GET' && /\/issues\/12\/comments$/.test(r.path);
    s.failNext({ status: 200, text: `[${' '.repeat(9 * 1024 * 1024)}]` }, 1, listing);
    const e = await failure(() => n.send(previewEvent(SHA), rendered('success', { comment: 'second' })));
    expect(e.code).toBe('RESPONSE_TOO_LARGE');
    expect(e.message).toMatch(
      /^the commit status is set, but the comment on pull request #12 failed: GET .* answered 200 with a body over 8 MiB/,
    );
    expect(
      s
        .repo('acme', 'infra')
        .statuses.get(SHA)!
        .map((x) => x.status),
    ).toEqual(['pending', 'success']);
    const comments = s.repo('acme', 'infra').pulls[0]!.comments;
    expect(comments.map((c) => c.body)).toEqual([`${MARKER}\nfirst`]);
  });

  it('F05/F06: an identical newest status (found on the last page) is not posted again', async () => {
    const s = await server();
    const n0 = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
    await n0.send(event(SHA), rendered('success'));
    // 120 statuses of other tools arrive after ours: ours is on the last page (newest first).
    for (let i = 0; i < 120; i++) {
      s.repo('acme', 'infra')
        .statuses.get(SHA)!
        .push({
          id: 10_000 + i,
          status: 'success',
          context: `ci/${i}`,
          description: '',
          target_url: '',
          creator: HUMAN,
        });
    }
    const n = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
    await n.send(event(SHA), rendered('success'));
    await n.send(event(SHA), rendered('success'));
    expect(s.writes()).toHaveLength(1);
    expect(s.requests.filter((r) => r.path.endsWith('/statuses')).map((r) => r.query.get('page'))).toEqual([
      '1',
      '1',
      '2',
      '3',
    ]);
  });

  it("PRs: open ones are listed across pages and matched by head.sha (Gitea's commit→PR endpoint only knows merged ones)", async () => {
    const s = await server();
    for (let i = 1; i <= 120; i++) s.addPull('acme', 'infra', { number: i, sha: sha(i === 117 ? 'a' : 'b') });
    s.addPull('acme', 'infra', { number: 200, sha: SHA, state: 'closed' });
    const n = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
    await n.send(previewEvent(SHA), rendered('success', { comment: 'hello' }));
    const withComments = s
      .repo('acme', 'infra')
      .pulls.filter((p) => p.comments.length > 0)
      .map((p) => p.number);
    expect(withComments).toEqual([117]);
  });

  it('F16: a human comment quoting the marker is never edited; ours is created and then edited', async () => {
    const s = await server();
    s.addPull('acme', 'infra', { number: 3, sha: SHA });
    s.addComment('acme', 'infra', 3, { body: `look: ${MARKER}`, user: HUMAN });
    const n = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
    await n.send(event(SHA, { pullRequest: '3' }), rendered('success', { comment: 'one' }));
    await n.send(event(SHA, { pullRequest: '3' }), rendered('success', { comment: 'two' }));
    // A fresh notifier (restart) finds ours by marker + author.
    await forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later).send(
      event(SHA, { pullRequest: '3' }),
      rendered('success', { comment: 'three' }),
    );
    expect(s.repo('acme', 'infra').pulls[0]!.comments.map((c) => [c.user.login, c.body])).toEqual([
      ['bob', `look: ${MARKER}`],
      ['pko-bot', `${MARKER}\nthree`],
    ]);
  });

  it('F10: a token with a trailing newline in the Secret is sent trimmed', async () => {
    const s = await server();
    const p = await resolvedFromSecret({ type: 'gitea', address: address(s) }, { token: `${TOKEN}\n` });
    await forgeNotifier(p, later).send(event(SHA), rendered('success'));
    expect(s.requests.map((r) => r.headers.authorization)).toEqual([`token ${TOKEN}`, `token ${TOKEN}`]);
    expect(s.writes()).toHaveLength(1);
  });

  it('F10a: spec.username + Secret password → basic auth', async () => {
    const s = await server();
    const p = await resolvedFromSecret(
      { type: 'gitea', address: address(s), username: 'pko-bot' },
      { password: 's3cret-pass' },
    );
    await forgeNotifier(p, later).send(event(SHA), rendered('failure'));
    const expected = `Basic ${Buffer.from('pko-bot:s3cret-pass').toString('base64')}`;
    expect(s.requests.every((r) => r.headers.authorization === expected)).toBe(true);
    expect(
      s
        .repo('acme', 'infra')
        .statuses.get(SHA)!
        .map((x) => x.status),
    ).toEqual(['failure']);
  });

  it('errors: 401 final without the token; 503 retryable', async () => {
    const s = await server();
    const bad = forgeNotifier(
      provider({ type: 'gitea', address: address(s), token: 'nope-token-999' }),
      later,
    );
    const e1 = await failure(() => bad.send(event(SHA), rendered('success')));
    expect([e1.status, e1.retryable]).toEqual([401, false]);
    expect(e1.message).not.toContain('nope-token-999');
    s.failNext({ status: 503, headers: { 'Retry-After': '3' }, text: 'maintenance' });
    const e2 = await failure(() =>
      forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later).send(
        event(SHA),
        rendered('success'),
      ),
    );
    expect([e2.status, e2.retryable, e2.retryAfterMs]).toEqual([503, true, 3000]);
  });

  describe('N07: renamed or transferred repositories (Gitea answers 301 on the old path for every method)', () => {
    it('N07: the status and the comment land on the moved repository, with the method and body kept; later calls go straight there', async () => {
      const s = await server();
      s.addPull('acme', 'infra', { number: 4, sha: SHA });
      const n = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
      await n.send(previewEvent(SHA), rendered('pending', { comment: 'started' }));
      s.moveRepo('acme', 'infra', 'platform', 'infra-v2');
      await n.send(previewEvent(SHA), rendered('success', { comment: 'done' }));

      const moved = s.repo('platform', 'infra-v2');
      expect(moved.statuses.get(SHA)!.map((x) => x.status)).toEqual(['pending', 'success']);
      expect(moved.pulls[0]!.comments.map((c) => c.body)).toEqual([`${MARKER}\ndone`]);
      const after = s.requests.slice(s.requests.findIndex((r) => r.status === 301));
      expect(after.map((r) => `${r.method} ${r.path} → ${String(r.status)}`)).toEqual([
        // The status POST is redirected and repeated there (same method and body); the move is
        // remembered, so the next calls go straight to the new path.
        `POST /api/v1/repos/acme/infra/statuses/${SHA} → 301`,
        `POST /api/v1/repos/platform/infra-v2/statuses/${SHA} → 201`,
        'GET /api/v1/repos/platform/infra-v2/pulls → 200',
        expect.stringMatching(/^PATCH \/api\/v1\/repos\/platform\/infra-v2\/issues\/comments\/\d+ → 200$/),
      ]);
      const repost = after.find((r) => r.method === 'POST' && r.status === 201);
      expect(repost?.json).toMatchObject({ state: 'success', context: CONTEXT });

      // A new notifier (restart) finds the move again from the first answer.
      const n2 = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
      await n2.send(previewEvent(SHA), rendered('failure', { comment: 'failed' }));
      expect(moved.statuses.get(SHA)!.map((x) => x.status)).toEqual(['pending', 'success', 'failure']);
      expect(moved.pulls[0]!.comments.map((c) => c.body)).toEqual([`${MARKER}\nfailed`]);
    });

    it('a redirect to another origin is not followed: final REDIRECT error, no request (nor credentials) sent there', async () => {
      const s = await server();
      const other = await startGiteaServer({ tokens: { [TOKEN]: BOT } });
      later(() => other.close());
      other.repo('acme', 'infra');
      const elsewhere = { status: 301, headers: { Location: `${other.url}/api/v1/repos/acme/infra` } };
      s.failNext(elsewhere, 2);
      const n = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
      const e = await failure(() => n.send(event(SHA), rendered('success')));
      expect([e.code, e.retryable, e.verdict.kind]).toEqual(['REDIRECT', false, 'redirect']);
      expect(e.message).toMatch(/another origin .*credentials are only sent where the Provider points/);
      expect(other.requests).toEqual([]);
      expect(s.writes()).toEqual([]);
    });

    it(`redirects are followed at most ${String(MAX_REDIRECTS)} hops`, async () => {
      const s = await server();
      const hop = { status: 301, headers: { Location: '/api/v1/repos/acme/elsewhere' } };
      s.failNext(hop, 10);
      const n = forgeNotifier(provider({ type: 'gitea', address: address(s), token: TOKEN }), later);
      const e = await failure(() => n.send(event(SHA), rendered('success')));
      expect([e.code, e.retryable]).toEqual(['REDIRECT', false]);
      expect(e.message).toMatch(/more than 5 times/);
      // The first answer, then MAX_REDIRECTS hops.
      expect(s.requests).toHaveLength(1 + MAX_REDIRECTS);
    });
  });
});
