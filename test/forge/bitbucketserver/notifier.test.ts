import { beforeAll, describe, expect, it } from 'vitest';
import { makeTestPKI, type TestPKI } from '../../support/pki.ts';
import { startBitbucketServerDC, type BbsServer, type BbsServerOptions } from './server.ts';
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
const BOT = { name: 'pko-bot', slug: 'pko-bot', id: 11 };
const HUMAN = { name: 'carol', slug: 'carol', id: 12 };
const PASSWORD = 'dc-password-123456';
const HTTP_TOKEN = 'BBDC-http-access-token-abc';
const SHA = sha('e');

let pki: TestPKI;
beforeAll(async () => {
  pki = await makeTestPKI();
});

async function server(opts: Partial<BbsServerOptions> = {}): Promise<BbsServer> {
  const s = await startBitbucketServerDC({
    context: '/bitbucket',
    basic: { 'pko-bot': { password: PASSWORD, user: BOT }, carol: { password: 'carol-pw', user: HUMAN } },
    bearer: { [HTTP_TOKEN]: BOT },
    ...opts,
  });
  later(() => s.close());
  s.pulls('PROJ', 'infra');
  return s;
}
const address = (s: BbsServer): string => `${s.url}/bitbucket/scm/proj/infra.git`;
const basic = (s: BbsServer, extra: Record<string, unknown> = {}) =>
  forgeNotifier(
    provider({
      type: 'bitbucketserver',
      address: address(s),
      username: 'pko-bot',
      password: PASSWORD,
      ...extra,
    }),
    later,
  );
const REPO = '/bitbucket/rest/api/latest/projects/PROJ/repos/infra';

describe('bitbucketserver (Data Center)', () => {
  it("one comment follows the change: the base Stack's deployment of a merge edits the preview comment of the merged pull request whose properties.mergeCommit is the commit; none is created elsewhere", async () => {
    const s = await server();
    const pr = s.addPull('PROJ', 'infra', { id: 30, latestCommit: sha('1') });
    await basic(s).send(previewEvent(sha('1')), rendered('success', { comment: 'preview: +1 to create' }));
    const [previewComment] = s.comments('PROJ', 'infra', 30);
    s.addPull('PROJ', 'infra', { id: 31, latestCommit: sha('3'), state: 'MERGED', mergeCommit: sha('4') });
    Object.assign(pr, { state: 'MERGED', mergeCommit: sha('2') });
    await basic(s).send(deployEvent(sha('2')), rendered('success', { comment: 'Deployed: +1 created' }));
    const after = s.comments('PROJ', 'infra', 30);
    expect(after.map((c) => [c.id, c.text])).toEqual([
      [previewComment?.id, `${MARKER}\nDeployed: +1 created`],
    ]);
    await basic(s).send(deployEvent(sha('4')), rendered('success', { comment: 'Deployed again' }));
    expect(s.comments('PROJ', 'infra', 31)).toEqual([]);
    expect(
      s.requests.filter((r) => r.path === `${REPO}/pull-requests` && r.query.get('state') === 'MERGED'),
    ).toHaveLength(2);
  });

  it('INPROGRESS → SUCCESSFUL on a commit, and one sticky comment edited in place over 5 sends', async () => {
    const s = await server();
    s.addPull('PROJ', 'infra', { id: 21, latestCommit: SHA });
    const n = basic(s);
    await n.send(previewEvent(SHA), rendered('pending', { comment: 'preview 1' }));
    for (let i = 2; i <= 5; i++)
      await n.send(previewEvent(SHA), rendered('success', { comment: `preview ${i}` }));

    expect([...s.builds.get(SHA)!.values()].map((b) => [b.key, b.state, b.name, b.url])).toEqual([
      [CONTEXT, 'SUCCESSFUL', CONTEXT, 'https://console.example.com/runs/1'],
    ]);
    const posted = s.requests
      .filter((r) => r.path.endsWith('/builds'))
      .map((r) => (r.json as { state: string }).state);
    expect(posted).toEqual(['INPROGRESS', 'SUCCESSFUL']);
    const comments = s.comments('PROJ', 'infra', 21);
    expect(comments).toHaveLength(1);
    expect(comments[0]).toMatchObject({ text: `${MARKER}\npreview 5`, author: BOT, version: 4 });
    expect(s.writes().filter((w) => w.startsWith(`PUT ${REPO}/pull-requests/21/comments/`))).toHaveLength(4);
  });

  it('F10a: spec.username + Secret password → HTTP basic auth', async () => {
    const s = await server();
    const p = await resolvedFromSecret(
      { type: 'bitbucketserver', address: address(s), username: 'pko-bot' },
      { password: PASSWORD },
    );
    await forgeNotifier(p, later).send(event(SHA), rendered('success'));
    const expected = `Basic ${Buffer.from(`pko-bot:${PASSWORD}`).toString('base64')}`;
    expect(s.requests.length).toBeGreaterThan(0);
    expect(s.requests.every((r) => r.headers.authorization === expected)).toBe(true);
    expect(s.builds.get(SHA)!.get(CONTEXT)!.state).toBe('SUCCESSFUL');
  });

  it('an HTTP access token is sent as Bearer', async () => {
    const s = await server();
    s.addPull('PROJ', 'infra', { id: 2, latestCommit: SHA });
    await forgeNotifier(
      provider({ type: 'bitbucketserver', address: address(s), token: HTTP_TOKEN }),
      later,
    ).send(previewEvent(SHA), rendered('success', { comment: 'x' }));
    expect(s.requests.every((r) => r.headers.authorization === `Bearer ${HTTP_TOKEN}`)).toBe(true);
    expect(s.comments('PROJ', 'infra', 2)).toHaveLength(1);
  });

  it('F08: on a private CA, calls fail TLS verification without ca.crt and succeed with it', async () => {
    const s = await server({ tls: { certPem: pki.certPem, keyPem: pki.keyPem } });
    s.addPull('PROJ', 'infra', { id: 5, latestCommit: SHA });
    const without = await failure(() =>
      basic(s).send(previewEvent(SHA), rendered('success', { comment: 'c' })),
    );
    expect(without.code).toBe('TLS');
    expect(without.retryable).toBe(true);
    const wrongCA = await failure(() =>
      basic(s, { tls: { ca: pki.otherCaPem } }).send(previewEvent(SHA), rendered('success')),
    );
    expect(wrongCA.code).toBe('TLS');
    expect(s.requests).toHaveLength(0);

    await basic(s, { tls: { ca: pki.caPem } }).send(previewEvent(SHA), rendered('success', { comment: 'c' }));
    expect(s.builds.get(SHA)!.get(CONTEXT)!.state).toBe('SUCCESSFUL');
    expect(s.comments('PROJ', 'infra', 5)).toHaveLength(1);
    // whoami, build statuses, builds, PRs of the commit, activities, comment: all over verified TLS.
    expect(s.requests.map((r) => r.path.replace(/\d{2,}|[0-9a-f]{40}/g, 'N'))).toEqual([
      '/bitbucket/rest/build-status/1.0/commits/N',
      `${REPO}/commits/N/builds`,
      `${REPO}/commits/N/pull-requests`,
      '/bitbucket/plugins/servlet/applinks/whoami',
      `${REPO}/pull-requests/5/activities`,
      `${REPO}/pull-requests/5/comments`,
    ]);
  });

  it('F05/F06: other builds over several pages, ours newest with the same state → no POST', async () => {
    const s = await server();
    await basic(s).send(event(SHA), rendered('failure', { description: 'Update failed' }));
    const byKey = s.builds.get(SHA)!;
    for (let i = 0; i < 150; i++) {
      byKey.set(`ci-${i}`, {
        key: `ci-${i}`,
        state: 'SUCCESSFUL',
        name: `ci ${i}`,
        url: 'https://ci',
        description: '',
        dateAdded: i,
      });
    }
    const n = basic(s);
    await n.send(event(SHA), rendered('failure', { description: 'Update failed' }));
    await n.send(event(SHA), rendered('failure', { description: 'Update failed' }));
    expect(s.writes()).toEqual([`POST ${REPO}/commits/${SHA}/builds`]);
    const listing = s.requests.filter((r) => r.path.includes('/build-status/'));
    expect(listing.map((r) => r.query.get('start'))).toEqual(['0', '0', '100']);
  });

  it('F16: a human comment quoting the marker is never edited; a stale version (409) is re-read once', async () => {
    const s = await server();
    s.addPull('PROJ', 'infra', { id: 30, latestCommit: SHA });
    for (let i = 0; i < 130; i++) {
      if (i === 2) s.addComment('PROJ', 'infra', 30, { text: `quoting ${MARKER}`, author: HUMAN });
      else s.addComment('PROJ', 'infra', 30, { text: `chatter ${i}`, author: i % 2 ? HUMAN : BOT });
    }
    const a = basic(s);
    await a.send(event(SHA, { pullRequest: '30' }), rendered('success', { comment: 'one' }));
    // Another process edits our comment: a's cached version is now stale.
    await basic(s).send(event(SHA, { pullRequest: '30' }), rendered('success', { comment: 'two' }));
    await a.send(event(SHA, { pullRequest: '30' }), rendered('success', { comment: 'three' }));
    const comments = s.comments('PROJ', 'infra', 30);
    expect(comments).toHaveLength(131);
    expect(comments[2]!.text).toBe(`quoting ${MARKER}`);
    expect(comments.filter((c) => c.text.includes(MARKER)).map((c) => [c.author.name, c.text])).toEqual([
      ['carol', `quoting ${MARKER}`],
      ['pko-bot', `${MARKER}\nthree`],
    ]);
    expect(s.requests.filter((r) => r.method === 'PUT').map((r) => r.status)).toEqual([200, 409, 200]);
  });

  it('a comment over 32,768 characters (the server would answer 400) is refused before any request, as a final error', async () => {
    const s = await server();
    s.addPull('PROJ', 'infra', { id: 3, latestCommit: SHA });
    const err = await failure(() =>
      basic(s).send(event(SHA), {
        message: 'm',
        comment: { marker: MARKER, body: `${MARKER}${'y'.repeat(32_768)}` },
      }),
    );
    expect([err.code, err.retryable]).toEqual(['LIMIT_EXCEEDED', false]);
    expect(s.requests).toHaveLength(0);
  });
});
