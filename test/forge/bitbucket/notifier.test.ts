import { describe, expect, it } from 'vitest';
import { bitbucketLimits } from '../../../src/forge/bitbucket/limits.ts';
import { compileTemplates, renderNotification } from '../../../src/template/index.ts';
import { startBitbucketServer, type BitbucketServer, type BitbucketServerOptions } from './server.ts';
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
import { sha } from '../kit.ts';

const later = useCleanup();
const ACCESS_TOKEN = 'bb-access-token-0123456789';
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
const SHA = sha('c');

async function server(opts: Partial<BitbucketServerOptions> = {}): Promise<BitbucketServer> {
  const s = await startBitbucketServer({
    bearer: { [ACCESS_TOKEN]: BOT },
    basic: { 'pko-bot': { password: 'app-password-xyz', user: BOT } },
    ...opts,
  });
  later(() => s.close());
  s.repo('acme', 'infra');
  return s;
}
function notifier(
  s: BitbucketServer,
  extra: { username?: string; password?: string; token?: string } = { token: ACCESS_TOKEN },
) {
  return forgeNotifier(
    provider({
      type: 'bitbucket',
      address: 'https://bitbucket.org/acme/infra',
      apiURL: `${s.url}/2.0`,
      ...extra,
    }),
    later,
  );
}
const BASE = '/2.0/repositories/acme/infra';

describe('bitbucket (Cloud)', () => {
  it("one comment follows the change: the base Stack's deployment of a merge edits the preview comment of the merged pull request whose merge_commit (12 hex) starts the commit; none is created elsewhere", async () => {
    const s = await server();
    const pr = s.addPull('acme', 'infra', { id: 6, sourceCommit: sha('1') });
    await notifier(s).send(previewEvent(sha('1')), rendered('success', { comment: 'preview: +1 to create' }));
    const [previewComment] = pr.comments;
    const merge = sha('2');
    s.addPull('acme', 'infra', { id: 7, sourceCommit: sha('3'), state: 'MERGED', mergeCommit: sha('4') });
    Object.assign(pr, { state: 'MERGED', mergeCommit: merge });
    await notifier(s).send(deployEvent(merge), rendered('success', { comment: 'Deployed: +1 created' }));
    expect(pr.comments.map((c) => [c.id, c.content.raw])).toEqual([
      [previewComment?.id, `${MARKER}\nDeployed: +1 created`],
    ]);
    expect(
      s.requests.some(
        (r) =>
          r.path === `${BASE}/pullrequests` &&
          r.query.get('state') === 'MERGED' &&
          r.query.get('sort') === '-updated_on',
      ),
    ).toBe(true);
    // Merged by sha('4') without a preview comment: nothing is created.
    await notifier(s).send(deployEvent(sha('4')), rendered('success', { comment: 'Deployed again' }));
    expect(s.repo('acme', 'infra').pulls.find((p) => p.id === 7)?.comments).toEqual([]);
  });

  it('INPROGRESS → SUCCESSFUL on a commit, and one sticky comment edited in place over 5 sends', async () => {
    const s = await server();
    s.addPull('acme', 'infra', { id: 4, sourceCommit: SHA });
    const n = notifier(s);
    await n.send(previewEvent(SHA), rendered('pending', { comment: 'preview 1' }));
    for (let i = 2; i <= 5; i++)
      await n.send(previewEvent(SHA), rendered('success', { comment: `preview ${i}` }));

    const statuses = [...s.repo('acme', 'infra').statuses.get(SHA)!.values()];
    expect(statuses).toEqual([
      {
        key: CONTEXT,
        state: 'SUCCESSFUL',
        name: CONTEXT,
        url: 'https://console.example.com/runs/1',
        description: 'Update success',
      },
    ]);
    const posted = s.requests
      .filter((r) => r.path.endsWith('/statuses/build'))
      .map((r) => (r.json as { state: string }).state);
    expect(posted).toEqual(['INPROGRESS', 'SUCCESSFUL']);
    const comments = s.repo('acme', 'infra').pulls[0]!.comments;
    expect(comments).toHaveLength(1);
    expect(comments[0]!.content.raw).toBe(`${MARKER}\npreview 5`);
    expect(s.writes().filter((w) => w.startsWith('PUT'))).toHaveLength(4);
    expect(s.requests.every((r) => r.headers.authorization === `Bearer ${ACCESS_TOKEN}`)).toBe(true);
  });

  it('contexts over 40 characters, fitted by the renderer, become distinct keys ≤ 40; an unfitted one is refused', async () => {
    const s = await server();
    const n = notifier(s);
    const set = compileTemplates(
      {},
      { commitStatusContext: 'pko-notification-controller/{{namespace}}/{{name}}/{{stackName}}' },
    );
    if (!set.ok) throw new Error(set.message);
    const render = (namespace: string, state: 'UpdateSucceeded' | 'UpdateFailed') => {
      const ev = event(SHA);
      return renderNotification(
        set.set,
        {
          ...ev,
          reason: state,
          severity: state === 'UpdateFailed' ? 'error' : 'info',
          involvedObject: { ...ev.involvedObject, kind: 'Stack', namespace, name: `web-${'x'.repeat(30)}` },
        },
        { clusterName: 'c', providerType: 'bitbucket', commentsEnabled: false, limits: bitbucketLimits },
      );
    };
    await n.send(event(SHA), render('team-a', 'UpdateSucceeded'));
    await n.send(event(SHA), render('team-b', 'UpdateFailed'));
    await n.send(event(SHA), render('team-a', 'UpdateSucceeded'));
    const statuses = [...s.repo('acme', 'infra').statuses.get(SHA)!.values()];
    expect(statuses).toHaveLength(2);
    // Keys bounded, names whole: the key is the stable prefix + hash, the name the full context.
    for (const st of statuses) {
      expect(st.key.length).toBeLessThanOrEqual(40);
      expect(st.key).toMatch(/~[0-9a-f]{10}$/);
      expect(st.name).toMatch(/^pko-notification-controller\/team-[ab]\/web-x{30}\/web-x{30}$/);
    }
    expect(new Set(statuses.map((x) => x.key)).size).toBe(2);
    expect(statuses.map((x) => x.state)).toEqual(['SUCCESSFUL', 'FAILED']);
    expect(s.writes()).toHaveLength(2);
    const err = await failure(() =>
      n.send(event(SHA), rendered('success', { context: `pko-notification-controller/${'x'.repeat(30)}` })),
    );
    expect(err.code).toBe('LIMIT_EXCEEDED');
    expect(s.writes()).toHaveLength(2);
  });

  it('without a link, url falls back to the commit page (Bitbucket requires url)', async () => {
    const s = await server();
    await notifier(s).send(event(SHA), {
      message: 'm',
      commitStatus: { state: 'success', context: CONTEXT, description: 'ok', targetURL: undefined },
    });
    expect(s.repo('acme', 'infra').statuses.get(SHA)!.get(CONTEXT)!.url).toBe(
      `https://bitbucket.org/acme/infra/commits/${SHA}`,
    );
  });

  it('F05: the same status is read back by key once and never re-posted', async () => {
    const s = await server();
    await notifier(s).send(event(SHA), rendered('success'));
    const n = notifier(s);
    for (let i = 0; i < 4; i++) await n.send(event(SHA), rendered('success'));
    expect(s.writes()).toEqual([`POST ${BASE}/commit/${SHA}/statuses/build`]);
    expect(s.requests.filter((r) => r.method === 'GET' && r.path.includes('/statuses/build/'))).toHaveLength(
      2,
    );
  });

  it.each(['disabled', 'indexing'] as const)(
    'commit → pull request links %s: open pull requests are listed and matched by source commit',
    async (commitLinks) => {
      const s = await server({ commitLinks });
      for (let i = 1; i <= 70; i++)
        s.addPull('acme', 'infra', { id: i, sourceCommit: i === 66 ? SHA : sha('d') });
      s.addPull('acme', 'infra', { id: 99, sourceCommit: SHA, state: 'MERGED' });
      await notifier(s).send(previewEvent(SHA), rendered('success', { comment: 'x' }));
      expect(
        s
          .repo('acme', 'infra')
          .pulls.filter((p) => p.comments.length > 0)
          .map((p) => p.id),
      ).toEqual([66]);
    },
  );

  it('F16: 250 comments, a human one quoting the marker and a deleted one of ours are skipped; ours is edited', async () => {
    const s = await server();
    s.addPull('acme', 'infra', { id: 8, sourceCommit: SHA });
    for (let i = 0; i < 250; i++) {
      if (i === 1) s.addComment('acme', 'infra', 8, { raw: `see ${MARKER}`, user: HUMAN });
      else if (i === 5) s.addComment('acme', 'infra', 8, { raw: `${MARKER}\nold`, user: BOT, deleted: true });
      else if (i === 240) s.addComment('acme', 'infra', 8, { raw: `${MARKER}\nprevious`, user: BOT });
      else s.addComment('acme', 'infra', 8, { raw: `comment ${i}`, user: i % 3 === 0 ? BOT : HUMAN });
    }
    const n = notifier(s, { username: 'pko-bot', password: 'app-password-xyz' });
    for (let i = 1; i <= 5; i++)
      await n.send(event(SHA, { pullRequest: '8' }), rendered('success', { comment: `run ${i}` }));
    const comments = s.repo('acme', 'infra').pulls[0]!.comments;
    expect(comments).toHaveLength(250);
    expect(comments[1]!.content.raw).toBe(`see ${MARKER}`);
    expect(comments[240]!.content.raw).toBe(`${MARKER}\nrun 5`);
    expect(s.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/comments'))).toHaveLength(3);
    const basic = `Basic ${Buffer.from('pko-bot:app-password-xyz').toString('base64')}`;
    expect(s.requests.every((r) => r.headers.authorization === basic)).toBe(true);
  });

  it('errors: a key the server refuses is final; 401 never shows the secret', async () => {
    const s = await server();
    const n = notifier(s);
    await n.send(event(SHA), rendered('pending'));
    s.failNext({
      status: 400,
      json: { type: 'error', error: { message: 'key: Ensure this value has at most 40 characters' } },
    });
    const e1 = await failure(() => n.send(event(SHA), rendered('success')));
    expect([e1.status, e1.retryable]).toEqual([400, false]);
    expect(s.requests.at(-1)!.method).toBe('POST');
    const e2 = await failure(() =>
      notifier(s, { username: 'pko-bot', password: 'wrong-app-password' }).send(
        event(SHA),
        rendered('success'),
      ),
    );
    expect([e2.status, e2.retryable]).toEqual([401, false]);
    expect(e2.message).not.toContain('wrong-app-password');
  });
});
