import { describe, expect, it } from 'vitest';
import { AZURE_STATUS_GENRE } from '../../../src/forge/azuredevops/client.ts';
import { startAzureServer, type AzureServer, type AzureServerOptions } from './server.ts';
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
const PAT = 'azure-pat-0123456789abcdef';
const BOT = { id: 'B07B07B0-0000-4000-8000-000000000001', displayName: 'pko bot' };
const HUMAN = { id: 'A11CE000-0000-4000-8000-000000000002', displayName: 'Alice' };
const SHA = sha('f');

async function server(opts: Partial<AzureServerOptions> = {}): Promise<AzureServer> {
  const s = await startAzureServer({ pats: { [PAT]: BOT, 'human-pat-1234567': HUMAN }, ...opts });
  later(() => s.close());
  s.repo('acme', 'Platform', 'infra');
  return s;
}
/** Azure DevOps Server style address on the test server (collection `acme`). */
const notifier = (s: AzureServer, extra: Record<string, unknown> = {}) =>
  forgeNotifier(
    provider({ type: 'azuredevops', address: `${s.url}/acme/Platform/_git/infra`, token: PAT, ...extra }),
    later,
  );
const REPO = '/acme/Platform/_apis/git/repositories/infra';

describe('azuredevops', () => {
  it("one comment follows the change: the base Stack's deployment of a merge edits the preview thread of the completed pull request whose lastMergeCommit it is (pullrequestquery); none is created elsewhere", async () => {
    const s = await server();
    const pr = s.addPull('acme', 'Platform', 'infra', { pullRequestId: 40, sourceCommit: sha('1') });
    await notifier(s).send(previewEvent(sha('1')), rendered('success', { comment: 'preview: +1 to create' }));
    const [thread] = pr.threads;
    s.addPull('acme', 'Platform', 'infra', {
      pullRequestId: 41,
      sourceCommit: sha('3'),
      status: 'completed',
      mergeCommit: sha('4'),
    });
    Object.assign(pr, { status: 'completed', mergeCommit: sha('2') });
    await notifier(s).send(deployEvent(sha('2')), rendered('success', { comment: 'Deployed: +1 created' }));
    expect(pr.threads.map((t) => [t.id, t.comments.map((c) => c.content)])).toEqual([
      [thread?.id, [`${MARKER}\nDeployed: +1 created`]],
    ]);
    await notifier(s).send(deployEvent(sha('4')), rendered('success', { comment: 'Deployed again' }));
    expect(s.repo('acme', 'Platform', 'infra').pulls.find((p) => p.pullRequestId === 41)?.threads).toEqual(
      [],
    );
    const queries = s.requests.filter((r) => r.method === 'POST' && r.path === `${REPO}/pullrequestquery`);
    expect(queries.map((r) => r.json)).toEqual([
      { queries: [{ type: 'lastMergeCommit', items: [sha('2')] }] },
      { queries: [{ type: 'lastMergeCommit', items: [sha('4')] }] },
    ]);
  });

  it('pending → succeeded on a commit, and one sticky thread edited in place over 5 sends', async () => {
    const s = await server();
    s.addPull('acme', 'Platform', 'infra', { pullRequestId: 31, sourceCommit: SHA });
    const n = notifier(s);
    await n.send(previewEvent(SHA), rendered('pending', { comment: 'preview 1' }));
    for (let i = 2; i <= 5; i++)
      await n.send(previewEvent(SHA), rendered('success', { comment: `preview ${i}` }));

    const statuses = s.repo('acme', 'Platform', 'infra').statuses.get(SHA)!;
    expect(statuses.map((x) => [x.state, x.context])).toEqual([
      ['pending', { genre: AZURE_STATUS_GENRE, name: CONTEXT }],
      ['succeeded', { genre: AZURE_STATUS_GENRE, name: CONTEXT }],
    ]);
    expect(statuses[1]).toMatchObject({
      description: 'Update success',
      targetUrl: 'https://console.example.com/runs/1',
    });
    const threads = s.repo('acme', 'Platform', 'infra').pulls[0]!.threads;
    expect(threads).toHaveLength(1);
    expect(threads[0]!.status).toBeUndefined();
    expect(threads[0]!.comments[0]).toMatchObject({ content: `${MARKER}\npreview 5`, author: BOT });
    expect(s.writes().filter((w) => w.startsWith('PATCH'))).toHaveLength(4);
    const basic = `Basic ${Buffer.from(`:${PAT}`).toString('base64')}`;
    expect(s.requests.every((r) => r.headers.authorization === basic)).toBe(true);
    expect(
      s.requests
        .filter((r) => r.path.includes('/_apis/git/'))
        .every((r) => r.query.get('api-version') === '7.1'),
    ).toBe(true);
  });

  it('dev.azure.com address with apiURL: statuses go to {org}/{project}/_apis', async () => {
    const s = await server();
    await notifier(s, {
      address: 'https://dev.azure.com/acme/Platform/_git/infra',
      apiURL: `${s.url}/acme`,
    }).send(event(SHA), rendered('failure'));
    expect(s.writes()).toEqual([`POST ${REPO}/commits/${SHA}/statuses`]);
    expect(
      s
        .repo('acme', 'Platform', 'infra')
        .statuses.get(SHA)!
        .map((x) => x.state),
    ).toEqual(['failed']);
  });

  it('F05/F06: the newest status of our genre+name (beyond the first page) decides; identical → no POST', async () => {
    const s = await server();
    await notifier(s).send(event(SHA), rendered('success'));
    const list = s.repo('acme', 'Platform', 'infra').statuses.get(SHA)!;
    // 250 statuses of other tools (and one of another genre with our name) arrive later.
    for (let i = 0; i < 250; i++) {
      list.push({
        id: 1000 + i,
        state: 'failed',
        description: '',
        targetUrl: '',
        context: { name: `ci/${i}`, genre: 'ci' },
        createdBy: HUMAN,
      });
    }
    list.push({
      id: 5000,
      state: 'failed',
      description: 'x',
      targetUrl: '',
      context: { name: CONTEXT, genre: 'someone-else' },
      createdBy: HUMAN,
    });
    const n = notifier(s);
    await n.send(event(SHA), rendered('success'));
    await n.send(event(SHA), rendered('success'));
    expect(s.writes()).toHaveLength(1);
    const skips = s.requests
      .filter((r) => r.method === 'GET' && r.path.endsWith('/statuses'))
      .map((r) => r.query.get('skip'));
    expect(skips).toEqual(['0', '0', '100', '200']);
  });

  it('PRs: active ones (over several pages) matched by lastMergeSourceCommit', async () => {
    const s = await server();
    for (let i = 1; i <= 130; i++)
      s.addPull('acme', 'Platform', 'infra', { pullRequestId: i, sourceCommit: i === 125 ? SHA : sha('0') });
    s.addPull('acme', 'Platform', 'infra', { pullRequestId: 500, sourceCommit: SHA, status: 'completed' });
    await notifier(s).send(previewEvent(SHA), rendered('success', { comment: 'c' }));
    expect(
      s
        .repo('acme', 'Platform', 'infra')
        .pulls.filter((p) => p.threads.length > 0)
        .map((p) => p.pullRequestId),
    ).toEqual([125]);
  });

  it('F16: threads paged by continuation token; a human thread quoting the marker is never edited', async () => {
    const s = await server({ threadPageSize: 40 });
    s.addPull('acme', 'Platform', 'infra', { pullRequestId: 9, sourceCommit: SHA });
    for (let i = 0; i < 120; i++) {
      if (i === 4) s.addThread('acme', 'Platform', 'infra', 9, { content: `quote ${MARKER}`, author: HUMAN });
      else if (i === 10)
        s.addThread('acme', 'Platform', 'infra', 9, {
          content: `${MARKER}\ndeleted`,
          author: BOT,
          isDeleted: true,
        });
      else if (i === 100)
        s.addThread('acme', 'Platform', 'infra', 9, { content: `${MARKER}\nprevious`, author: BOT });
      else
        s.addThread('acme', 'Platform', 'infra', 9, { content: `thread ${i}`, author: i % 2 ? HUMAN : BOT });
    }
    const n = notifier(s);
    for (let i = 1; i <= 3; i++)
      await n.send(event(SHA, { pullRequest: '9' }), rendered('success', { comment: `v${i}` }));
    const threads = s.repo('acme', 'Platform', 'infra').pulls[0]!.threads;
    expect(threads).toHaveLength(120);
    expect(threads[4]!.comments[0]!.content).toBe(`quote ${MARKER}`);
    expect(threads[100]!.comments[0]!.content).toBe(`${MARKER}\nv3`);
    const tokens = s.requests
      .filter((r) => r.method === 'GET' && r.path.endsWith('/threads'))
      .map((r) => r.query.get('continuationToken'));
    expect(tokens).toEqual([null, '40', '80']);
    expect(s.requests.some((r) => r.path === '/acme/_apis/connectionData')).toBe(true);
  });

  it('credentials: a wrong PAT → 401 final; 203 sign-in page reported as a credentials error', async () => {
    const s = await server();
    const e1 = await failure(() =>
      notifier(s, { token: 'wrong-pat-000000000' }).send(event(SHA), rendered('success')),
    );
    expect([e1.status, e1.retryable]).toEqual([401, false]);
    expect(e1.message).not.toContain('wrong-pat-000000000');
    // Azure DevOps redirects to its sign-in page (203 + HTML) when it does not take the credentials.
    s.failNext({ status: 203, headers: { 'Content-Type': 'text/html' }, text: '<html>Sign In</html>' });
    const e2 = await failure(() => notifier(s).send(event(SHA), rendered('success')));
    expect(e2.status).toBe(203);
    expect(e2.retryable).toBe(false);
    expect(e2.message).toMatch(/sign-in page/);
  });

  it('username + password (PAT) → basic auth with that user', async () => {
    const s = await server();
    await notifier(s, { token: undefined, username: 'me@example.com', password: PAT }).send(
      event(SHA),
      rendered('success'),
    );
    const basic = `Basic ${Buffer.from(`me@example.com:${PAT}`).toString('base64')}`;
    expect(s.requests.every((r) => r.headers.authorization === basic)).toBe(true);
    expect(s.writes()).toHaveLength(1);
  });
});
