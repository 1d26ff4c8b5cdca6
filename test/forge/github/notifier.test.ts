/**
 * The `github` notifier against the GitHub contract server (./github-server.ts), which checks
 * every request against GitHub's OpenAPI description: commit statuses (F05, F06, F13), the sticky
 * pull-request comment (F16), GitHub Enterprise bases (F02), private CA (F08), proxy (F09),
 * GitHub App authentication, secondary rate limits (F20), and API calls per status.
 */
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { fetch as fetchUndici } from 'undici';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NotificationEvent } from '../../../src/api/event.ts';
import type { ResolvedProvider } from '../../../src/credential/provider.ts';
import { problemReason } from '../../../src/delivery/health.ts';
import { ProviderError } from '../../../src/notifier/errors.ts';
import { createGitHubNotifier, type GitHubNotifierOptions } from '../../../src/forge/github/index.ts';
import { githubLimits } from '../../../src/forge/github/limits.ts';
import { compileTemplates, renderNotification } from '../../../src/template/index.ts';
import { ProviderHttp } from '../../../src/notifier/http.ts';
import { createNotifier, hasNotifier } from '../../../src/provider-types.ts';
import type { Notifier, RenderedNotification } from '../../../src/notifier/types.ts';
import { makeTestPKI, type TestPKI } from '../../support/pki.ts';
import { event, previewEvent, resolvedFromSecret } from '../helpers.ts';
import { startProxy, type TestProxy } from '../../support/proxy.ts';
import { resolved } from '../../notifier/fixtures.ts';
import {
  gitHubContract,
  startGitHubServer,
  type GitHubContractServer,
  type GitHubServerOptions,
} from './server.ts';

const REPO = 'acme/app';
const CONTEXT = 'pko/prod/team-a/web';
const MARKER = '<!-- pko-notification-controller: prod/team-a/web -->';
const LINK = 'https://app.pulumi.com/acme/web/dev/updates/12';

let pki: TestPKI;
beforeAll(async () => {
  pki = await makeTestPKI();
  gitHubContract(); // load the OpenAPI description once, outside any test's timeout
}, 60_000);

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const sha = (n: number | string): string => createHash('sha1').update(`commit-${n}`).digest('hex');
/** A fresh credential per test: throttling and rate-limit state are per credential and process-wide. */
const newToken = (): string => `ghp_${randomBytes(12).toString('hex')}`;

async function server(opts: GitHubServerOptions = {}): Promise<GitHubContractServer> {
  const s = await startGitHubServer(opts);
  cleanups.push(() => s.close());
  return s;
}
async function proxy(): Promise<TestProxy> {
  const p = await startProxy();
  cleanups.push(() => p.close());
  return p;
}

/** A github Provider on `s` authenticated by `token` (login `pko-bot` on the server). */
function provider(
  s: GitHubContractServer,
  token: string,
  overrides: Partial<ResolvedProvider> = {},
): ResolvedProvider {
  s.addToken(token, 'pko-bot');
  return resolved({
    type: 'github',
    name: 'github',
    address: `https://github.com/${REPO}`,
    apiURL: s.apiBase,
    token,
    secretValues: [token],
    ...overrides,
  });
}

interface Built {
  notifier: Notifier;
  /** Every URL the Provider's HTTP client fetched. */
  urls: string[];
}
function build(p: ResolvedProvider, opts: GitHubNotifierOptions = { pacing: false }): Built {
  const urls: string[] = [];
  const http = new ProviderHttp(p, {
    fetch: (input, init) => {
      urls.push(typeof input === 'string' ? input : input instanceof URL ? input.toString() : input.url);
      return fetchUndici(input, init);
    },
  });
  const notifier = createGitHubNotifier(p, { http }, opts);
  cleanups.push(() => notifier.close());
  return { notifier, urls };
}

function status(
  state: 'pending' | 'success' | 'failure',
  description: string,
  targetURL: string | undefined = LINK,
): RenderedNotification {
  return { message: description, commitStatus: { state, context: CONTEXT, description, targetURL } };
}
function withComment(r: RenderedNotification, body: string): RenderedNotification {
  return { ...r, comment: { marker: MARKER, body: `${MARKER}\n${body}` } };
}
async function failure(fn: () => Promise<unknown>): Promise<ProviderError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError');
}
const posts = (s: GitHubContractServer): number =>
  s.apiCalls().filter((e) => e.operationId === 'repos/create-commit-status').length;

describe('contract server', () => {
  it('rejects what GitHub would reject and records a violation', async () => {
    const s = await server();
    const token = newToken();
    s.addToken(token, 'pko-bot');
    const call = (method: string, path: string, body?: unknown): Promise<Response> =>
      fetch(`${s.apiBase}${path}`, {
        method,
        headers: { authorization: `token ${token}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    expect((await call('POST', `/repos/${REPO}/statuses/${sha(1)}`, { state: 'bogus' })).status).toBe(422);
    expect(
      (
        await call('POST', `/repos/${REPO}/statuses/${sha(1)}`, {
          state: 'success',
          description: 'x'.repeat(141),
        })
      ).status,
    ).toBe(422);
    expect((await call('GET', `/repos/${REPO}/no-such-endpoint`)).status).toBe(404);
    expect((await call('GET', `/repos/${REPO}/issues/abc/comments`)).status).toBe(404);
    expect((await call('POST', `/repos/${REPO}/issues/1/comments`, { text: 'no body field' })).status).toBe(
      422,
    );
    expect(s.violations.map((v) => v.status)).toEqual([422, 422, 404, 404, 422]);
    expect(s.violations[0]?.reason).toMatch(/state/);
    expect(s.violations[1]?.reason).toMatch(/140/);
  });

  it('is registered as the github notifier type', () => {
    expect(hasNotifier('github')).toBe(true);
  });
});

describe('commit statuses', () => {
  it('posts pending then success on the commit, paced as GitHub asks', async () => {
    const s = await server();
    const p = provider(s, newToken());
    const n = createNotifier(p); // registry path, production options (pacing on)
    cleanups.push(() => n.close());
    const t0 = Date.now();
    await n.send(event(sha(1)), status('pending', 'Update started'));
    await n.send(event(sha(1)), status('success', 'Update succeeded: 3 changed'));
    const elapsed = Date.now() - t0;

    const list = s.statuses(REPO, sha(1));
    expect(list.map((x) => [x.state, x.description, x.context, x.creator])).toEqual([
      ['success', 'Update succeeded: 3 changed', CONTEXT, 'pko-bot'],
      ['pending', 'Update started', CONTEXT, 'pko-bot'],
    ]);
    expect(list[0]?.target_url).toBe(LINK);
    expect(posts(s)).toBe(2);
    expect(elapsed).toBeGreaterThanOrEqual(900); // ≥ 1 s between writes with one credential
    expect(s.violations).toEqual([]);
  });

  it('F05: an identical status is posted once, however often it is sent', async () => {
    const s = await server();
    const { notifier } = build(provider(s, newToken()));
    await notifier.send(event(sha(2)), status('success', 'Update succeeded'));
    await notifier.send(event(sha(2)), status('success', 'Update succeeded'));
    expect(posts(s)).toBe(1);
    const before = s.log.length;
    // An hour of 60 s resyncs on the same commit, each with its own permalink.
    for (let i = 0; i < 60; i++) {
      await notifier.send(event(sha(2)), status('success', 'Update succeeded', `${LINK}?run=${i}`));
    }
    expect(s.log.length - before).toBe(0);
    expect(s.statuses(REPO, sha(2))).toHaveLength(1);
    expect(s.violations).toEqual([]);
  });

  it('F06: finds our newest status behind other tools’ statuses, across pages, case-insensitively', async () => {
    const s = await server();
    const token = newToken();
    s.addStatus(REPO, sha(3), {
      state: 'success',
      context: CONTEXT.toUpperCase(),
      description: 'Update succeeded',
      creator: 'pko-bot',
    });
    for (let i = 0; i < 245; i++) {
      s.addStatus(REPO, sha(3), {
        state: i % 2 ? 'success' : 'pending',
        context: `ci/tool-${i % 9}`,
        description: `build ${i}`,
      });
    }
    const { notifier } = build(provider(s, token));
    await notifier.send(event(sha(3)), status('success', 'Update succeeded'));

    const listed = s.apiCalls().filter((e) => e.operationId === 'repos/list-commit-statuses-for-ref');
    expect(listed.map((e) => new URLSearchParams(e.query).get('page') ?? '1')).toEqual(['1', '2', '3']);
    expect(listed.every((e) => new URLSearchParams(e.query).get('per_page') === '100')).toBe(true);
    expect(posts(s)).toBe(0);

    // The same with 45 statuses from other tools (one page), on a fresh notifier.
    const s2 = await server();
    s2.addStatus(REPO, sha(4), {
      state: 'failure',
      context: CONTEXT,
      description: 'Update failed',
      creator: 'pko-bot',
    });
    for (let i = 0; i < 45; i++) s2.addStatus(REPO, sha(4), { state: 'success', context: `ci/other-${i}` });
    const { notifier: n2 } = build(provider(s2, token));
    await n2.send(event(sha(4)), status('failure', 'Update failed'));
    expect(s2.apiCalls().map((e) => e.operationId)).toEqual(['repos/list-commit-statuses-for-ref']);
    // A different state is posted.
    await n2.send(event(sha(4)), status('pending', 'Update started'));
    expect(posts(s2)).toBe(1);
    expect(s.violations).toEqual([]);
    expect(s2.violations).toEqual([]);
  });

  it('F13: a 5,000-character description with escape codes and multibyte text, rendered for GitHub, is accepted', async () => {
    const s = await server();
    const { notifier } = build(provider(s, newToken()));
    const long = `\u001b[31mUpdate failed\u001b[0m: ${'résumé 💥 ünïcödé '.repeat(300)}`.slice(0, 5_000);
    const templates = compileTemplates({ commitStatusDescription: '{{message}}' });
    if (!templates.ok) throw new Error(templates.message);
    const ev = event(sha(5));
    const r = renderNotification(
      templates.set,
      { ...ev, message: long },
      {
        clusterName: 'prod',
        providerType: 'github',
        commentsEnabled: false,
        limits: githubLimits,
      },
    );
    await notifier.send(ev, r);
    const [posted] = s.statuses(REPO, sha(5));
    const d = posted?.description ?? '';
    expect(Array.from(d).length).toBeLessThanOrEqual(140);
    expect(d.endsWith('…')).toBe(true);
    expect(d.startsWith('Update failed: résumé 💥')).toBe(true);
    expect(d).not.toMatch(/\p{Cc}/u);
    expect(s.violations).toEqual([]);
    // The same rendered status is not posted again.
    await notifier.send(ev, r);
    expect(posts(s)).toBe(1);
  });

  it('a description over 140 code points (not fitted by the renderer) is refused before any request', async () => {
    const s = await server();
    const { notifier } = build(provider(s, newToken()));
    const err = await failure(() => notifier.send(event(sha(5)), status('failure', 'x'.repeat(141))));
    expect(err.code).toBe('LIMIT_EXCEEDED');
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(/description is 141 codePoints long, over the limit of 140/);
    expect(s.log).toEqual([]);
  });

  it('the 1,000-statuses limit is a final error', async () => {
    const s = await server();
    for (let i = 0; i < 1000; i++) {
      s.addStatus(REPO, sha(6), {
        state: 'pending',
        context: CONTEXT,
        description: `run ${i}`,
        creator: 'pko-bot',
      });
    }
    const { notifier } = build(provider(s, newToken()));
    const err = await failure(() => notifier.send(event(sha(6)), status('success', 'Update succeeded')));
    expect(err.status).toBe(422);
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(/maximum number of statuses/);
    // The notifier listed only until it found its context (newest first: page 1).
    expect(s.apiCalls().filter((e) => e.operationId === 'repos/list-commit-statuses-for-ref')).toHaveLength(
      1,
    );
  });

  it('a wrong token is a final 401 whose message does not contain the token', async () => {
    const s = await server();
    const token = newToken();
    const p = provider(s, token, { token: 'ghp_wrongwrongwrong', secretValues: ['ghp_wrongwrongwrong'] });
    const { notifier } = build(p);
    const err = await failure(() => notifier.send(event(sha(7)), status('pending', 'Update started')));
    expect(err.status).toBe(401);
    expect(err.retryable).toBe(false);
    expect(err.message).not.toContain('ghp_wrongwrongwrong');
    expect(err.message).toMatch(/token/);
  });

  it('API calls per delivered status stay ≤ 1.05 in steady state', async () => {
    const s = await server();
    const { notifier } = build(provider(s, newToken()));
    let sends = 0;
    const commits = 30;
    for (let c = 0; c < commits; c++) {
      const commit = sha(`ratio-${c}`);
      for (const [state, text] of [
        ['pending', 'Update started'],
        ['success', 'Update succeeded: 2 changed'],
      ] as const) {
        // Each state is sent 4 times (resyncs and relists re-deliver it).
        for (let i = 0; i < 4; i++) {
          await notifier.send(event(commit), status(state, text));
          sends++;
        }
      }
    }
    const calls = s.apiCalls().length;
    const written = posts(s);
    const ratio = calls / written;
    console.log(
      `github API calls: ${calls} for ${written} statuses written (${sends} sends): ${ratio.toFixed(3)} calls per status`,
    );
    expect(written).toBe(commits * 2);
    expect(ratio).toBeLessThanOrEqual(1.05);
    expect(s.violations).toEqual([]);
  });
});

describe('sticky pull-request comment', () => {
  it("one comment follows the change: the base Stack's deployment of the merge commit edits the merged PR's preview comment (found among the PRs associated with the commit); no comment where the preview wrote none", async () => {
    const s = await server();
    const token = newToken();
    const head = sha('m-head');
    const merge = sha('m-merge');
    s.addPullRequest(REPO, { number: 50, headSha: head });
    // Another merged pull request that contains the merge commit but did not make it (e.g. a
    // later one built on top): GitHub lists it too; only `merge_commit_sha` tells them apart.
    s.addPullRequest(REPO, {
      number: 51,
      headSha: sha('m-other'),
      commits: [merge],
      state: 'closed',
      merged: true,
      mergeCommit: sha('m-later'),
    });
    const p = provider(s, token);
    await build(p).notifier.send(
      previewEvent(head),
      withComment(status('success', 'Preview succeeded'), 'Preview: +1 to create'),
    );
    const [preview] = s.comments(REPO, 50);
    s.updatePullRequest(REPO, 50, { state: 'closed', merged: true, mergeCommit: merge });

    const deploy: NotificationEvent = { ...event(merge), previewThread: { baseStack: 'web', merged: true } };
    const { notifier } = build(p);
    await notifier.send(deploy, withComment(status('success', 'Update succeeded'), 'Deployed: +1 created'));
    const after = s.comments(REPO, 50);
    expect(after.map((c) => [c.id, c.body])).toEqual([[preview?.id, `${MARKER}\nDeployed: +1 created`]]);
    expect(s.comments(REPO, 51)).toEqual([]);
    expect(s.statuses(REPO, merge).map((x) => x.state)).toEqual(['success']);

    // Merged without a preview comment: nothing is created.
    const merge2 = sha('m-merge2');
    s.addPullRequest(REPO, {
      number: 52,
      headSha: sha('m-head2'),
      state: 'closed',
      merged: true,
      mergeCommit: merge2,
    });
    await notifier.send(
      { ...event(merge2), previewThread: { baseStack: 'web', merged: true } },
      withComment(status('success', 'Update succeeded'), 'Deployed again'),
    );
    expect(s.comments(REPO, 52)).toEqual([]);
    expect(s.violations).toEqual([]);
  });

  it('F16: one comment of ours among 250, edited in place; a human comment quoting the marker is untouched', async () => {
    const s = await server();
    const token = newToken();
    const head = sha(8);
    s.addPullRequest(REPO, { number: 42, headSha: head });
    s.addPullRequest(REPO, { number: 41, headSha: head, state: 'closed' });
    let ours = 0;
    let human = 0;
    let otherBot = 0;
    for (let i = 0; i < 250; i++) {
      if (i === 5) {
        human = s.addComment(REPO, 42, {
          body: `Why does the bot write ${MARKER}? Quoting it here.`,
          login: 'alice',
        }).id;
      } else if (i === 17) {
        otherBot = s.addComment(REPO, 42, {
          body: `${MARKER} copied by another bot`,
          login: 'other-bot[bot]',
        }).id;
      } else if (i === 231) {
        ours = s.addComment(REPO, 42, { body: `${MARKER}\nPreview from yesterday`, login: 'pko-bot' }).id;
      } else {
        s.addComment(REPO, 42, { body: `comment ${i}`, login: i % 3 ? 'bob' : 'renovate[bot]' });
      }
    }
    const { notifier } = build(provider(s, token));
    for (let push = 1; push <= 5; push++) {
      await notifier.send(
        previewEvent(head),
        withComment(status('success', 'Preview succeeded'), `Preview #${push}: 3 to change`),
      );
    }

    const all = s.comments(REPO, 42);
    expect(all).toHaveLength(250);
    const mine = all.filter((c) => c.login === 'pko-bot' && c.body.includes(MARKER));
    expect(mine.map((c) => c.id)).toEqual([ours]);
    expect(mine[0]?.body).toBe(`${MARKER}\nPreview #5: 3 to change`);
    expect(mine[0]?.edits).toBe(5);
    const humanComment = all.find((c) => c.id === human);
    expect(humanComment?.edits).toBe(0);
    expect(humanComment?.body).toBe(`Why does the bot write ${MARKER}? Quoting it here.`);
    expect(all.find((c) => c.id === otherBot)?.edits).toBe(0);
    expect(s.comments(REPO, 41)).toEqual([]); // closed pull request: no comment

    // All pages were read once (ours is on page 3); later sends edit by id without listing.
    const listings = s.apiCalls().filter((e) => e.operationId === 'issues/list-comments');
    expect(listings.map((e) => new URLSearchParams(e.query).get('page') ?? '1')).toEqual(['1', '2', '3']);
    expect(s.apiCalls().filter((e) => e.operationId === 'users/get-authenticated')).toHaveLength(1);
    expect(
      s.apiCalls().filter((e) => e.operationId === 'repos/list-pull-requests-associated-with-commit'),
    ).toHaveLength(1);
    // An identical body is not written again.
    const before = s.log.length;
    await notifier.send(
      previewEvent(head),
      withComment(status('success', 'Preview succeeded'), 'Preview #5: 3 to change'),
    );
    expect(s.log.length).toBe(before);
    expect(s.violations).toEqual([]);
  });

  it('creates the comment when there is none, on the pull request named by the event; a rendered 70,000-character output fits 65,536', async () => {
    const s = await server();
    s.addPullRequest(REPO, { number: 9, headSha: sha(9) });
    s.addComment(REPO, 9, { body: 'LGTM', login: 'carol' });
    const { notifier } = build(provider(s, newToken()));
    const templates = compileTemplates();
    if (!templates.ok) throw new Error(templates.message);
    const ev = event(sha(10), { pullRequest: '9' });
    const r = renderNotification(
      templates.set,
      { ...ev, message: `Preview failed:\n${'x'.repeat(70_000)}` },
      {
        clusterName: 'prod',
        providerType: 'github',
        commentsEnabled: true,
        limits: githubLimits,
      },
    );
    await notifier.send(ev, r);
    const mine = s.comments(REPO, 9).filter((c) => c.login === 'pko-bot');
    expect(mine).toHaveLength(1);
    expect(mine[0]?.body.length).toBeLessThanOrEqual(65_536);
    expect(mine[0]?.body).toContain(r.comment?.marker);
    expect(mine[0]?.body).toMatch(/truncated/);
    // The explicit pull request is used: no "PRs for commit" lookup.
    expect(
      s.apiCalls().some((e) => e.operationId === 'repos/list-pull-requests-associated-with-commit'),
    ).toBe(false);
    // A body over the limit given directly is refused, not cut.
    const err = await failure(() =>
      notifier.send(ev, withComment(status('pending', 'Preview started'), 'y'.repeat(70_000))),
    );
    expect(err.code).toBe('LIMIT_EXCEEDED');
    expect(s.violations).toEqual([]);
  });

  it("a deploy run's new status costs exactly the status listing and the status write: no pull-request lookup, no comment on the open pull request whose head is the commit", async () => {
    const s = await server();
    const head = sha('deploy-head');
    s.addPullRequest(REPO, { number: 20, headSha: head });
    const { notifier } = build(provider(s, newToken()));
    // A deploy Stack following the pull request's branch, with the built-in template's comment.
    await notifier.send(event(head), withComment(status('pending', 'Update started'), 'started'));
    await notifier.send(event(head), withComment(status('success', 'Update succeeded'), 'done'));
    expect(s.apiCalls().map((e) => e.operationId)).toEqual([
      'repos/list-commit-statuses-for-ref',
      'repos/create-commit-status',
      'repos/create-commit-status',
    ]);
    expect(s.comments(REPO, 20)).toEqual([]);
    expect(s.statuses(REPO, head).map((x) => x.state)).toEqual(['success', 'pending']); // newest first

    // A preview run of the same commit comments there (N04); the context is known by now.
    const calls = s.apiCalls().length;
    await notifier.send(previewEvent(head), withComment(status('success', 'Preview succeeded'), 'preview'));
    expect(
      s
        .apiCalls()
        .slice(calls)
        .map((e) => e.operationId),
    ).toEqual([
      'repos/create-commit-status',
      'repos/list-pull-requests-associated-with-commit',
      'users/get-authenticated',
      'issues/list-comments',
      'issues/create-comment',
    ]);
    expect(s.comments(REPO, 20).map((c) => c.body)).toEqual([`${MARKER}\npreview`]);
    expect(s.violations).toEqual([]);
  });

  it("a preview Stack's stall about its preview Update comments on the pull request whose head is the commit; a deploy Stack's stall does not", async () => {
    const s = await server();
    const head = sha('stall-head');
    s.addPullRequest(REPO, { number: 21, headSha: head });
    const { notifier } = build(provider(s, newToken()));
    const stalled = (updateType: string): NotificationEvent => ({
      ...event(head, { updateType }),
      reason: 'StackStalled',
    });
    await notifier.send(stalled('up'), withComment(status('failure', 'Stack stalled'), 'deploy'));
    expect(s.comments(REPO, 21)).toEqual([]);
    await notifier.send(stalled('preview'), withComment(status('failure', 'Stack stalled'), 'preview'));
    expect(s.comments(REPO, 21).map((c) => c.body)).toEqual([`${MARKER}\npreview`]);
    expect(s.violations).toEqual([]);
  });

  it('N04: a preview run naming no pull request: GitHub lists open PRs #3 (head C), #2 (head B), #1 (head A), all containing A: only #1 gets the comment; none when no PR has A as head', async () => {
    const s = await server();
    const [A, B, C] = [sha('n04-a'), sha('n04-b'), sha('n04-c')];
    s.addPullRequest(REPO, { number: 3, headSha: C, commits: [A, B] });
    s.addPullRequest(REPO, { number: 2, headSha: B, commits: [A] });
    s.addPullRequest(REPO, { number: 1, headSha: A });
    // Also listed by GitHub, never commented on: a closed PR and a merged one whose head is A.
    s.addPullRequest(REPO, { number: 4, headSha: A, state: 'closed' });
    s.addPullRequest(REPO, { number: 5, headSha: A, state: 'closed', merged: true });
    const { notifier } = build(provider(s, newToken()));
    await notifier.send(previewEvent(A), withComment(status('pending', 'Preview started'), 'body'));
    const commented = [1, 2, 3, 4, 5].filter((n) => s.comments(REPO, n).some((c) => c.login === 'pko-bot'));
    expect(commented).toEqual([1]);

    // A commit that is in pull requests but the head of none: no comment at all.
    const D = sha('n04-d');
    s.addPullRequest(REPO, { number: 6, headSha: sha('n04-e'), commits: [D] });
    s.addPullRequest(REPO, { number: 7, headSha: sha('n04-f'), commits: [D], fork: true });
    await notifier.send(previewEvent(D), withComment(status('pending', 'Preview started'), 'body'));
    expect([6, 7].filter((n) => s.comments(REPO, n).length > 0)).toEqual([]);
    expect(s.violations).toEqual([]);
  });

  it('N02: 403 "issue is locked" on the comment: the status is posted, the failure is final for that event and says so, the credentials are not blamed', async () => {
    const s = await server();
    const head = sha('n02');
    s.addPullRequest(REPO, { number: 9, headSha: head });
    s.addPullRequest(REPO, { number: 10, headSha: head });
    s.lockIssue(REPO, 9);
    const { notifier } = build(provider(s, newToken()));
    const e = await failure(() =>
      notifier.send(previewEvent(head), withComment(status('failure', 'Update failed'), 'body')),
    );
    expect(s.statuses(REPO, head).map((x) => x.state)).toEqual(['failure']);
    expect(s.comments(REPO, 9)).toEqual([]);
    // The other pull request of the commit still got its comment.
    expect(s.comments(REPO, 10).map((c) => c.login)).toEqual(['pko-bot']);
    expect([e.status, e.retryable]).toEqual([403, false]);
    expect(e.verdict).toEqual({ kind: 'locked', retry: false });
    expect(problemReason(e)).toBeUndefined(); // the Provider stays Ready
    expect(e.message).toMatch(/commit status is set.*pull request #9.*issue is locked/);
    expect(s.violations).toEqual([]);
  });

  it('N17: a 50 MB pull-request listing is an error of the comment step, never "no pull requests"; the status is posted', async () => {
    const s = await server();
    const head = sha('n17-pulls');
    s.addPullRequest(REPO, { number: 12, headSha: head });
    // A valid listing (PR #12 is in it), padded to 50 MB: only our read limit stands in the way.
    s.padAnswers({ operationId: 'repos/list-pull-requests-associated-with-commit', toBytes: 50_000_000 });
    const { notifier } = build(provider(s, newToken()));
    const e = await failure(() =>
      notifier.send(previewEvent(head), withComment(status('success', 'Update succeeded'), 'body')),
    );
    expect(s.statuses(REPO, head).map((x) => x.state)).toEqual(['success']);
    expect(e.code).toBe('RESPONSE_TOO_LARGE');
    expect(e.retryable).toBe(false);
    expect(e.message).toMatch(
      /^the commit status is set, but finding the pull requests of [0-9a-f]{40} failed: GET .* answered 200 with a body over 8 MiB \(the controller's read limit/,
    );
    expect(s.comments(REPO, 12)).toEqual([]);
    // Nothing was remembered as "none": the next send asks again, and comments once it can read.
    await notifier.send(previewEvent(head), withComment(status('success', 'Update succeeded'), 'body'));
    expect(s.comments(REPO, 12).map((c) => c.login)).toEqual(['pko-bot']);
    expect(s.violations).toEqual([]);
  });

  it('N17: after a restart, a comment listing over 8 MiB (100 comments of 65,000 CJK characters) fails the step; never a second sticky comment', async () => {
    const s = await server();
    const head = sha('n17-comments');
    s.addPullRequest(REPO, { number: 13, headSha: head });
    const before = build(provider(s, newToken()));
    await before.notifier.send(previewEvent(head), withComment(status('pending', 'Update started'), 'first'));
    const mine = (): number =>
      s.comments(REPO, 13).filter((c) => c.login === 'pko-bot' && c.body.includes(MARKER)).length;
    expect(mine()).toBe(1);
    for (let i = 0; i < 100; i++)
      s.addComment(REPO, 13, { body: '漢'.repeat(65_000), login: i % 2 ? 'alice' : 'bob' });
    // A restart: a new notifier, nothing cached about where our comment is.
    const after = build(provider(s, newToken()));
    const e = await failure(() =>
      after.notifier.send(previewEvent(head), withComment(status('success', 'Update succeeded'), 'second')),
    );
    expect(s.statuses(REPO, head).map((x) => x.state)).toEqual(['success', 'pending']);
    expect(e.code).toBe('RESPONSE_TOO_LARGE');
    expect(e.message).toMatch(/^the commit status is set, but the comment on pull request #13 failed: GET /);
    expect(mine()).toBe(1);
    expect(s.comments(REPO, 13)[0]?.body).toBe(`${MARKER}\nfirst`);
    expect(s.violations).toEqual([]);
  });

  it('a token without the pull-requests permission: statuses are posted, the comment step fails for that capability only (no AuthenticationFailed)', async () => {
    const s = await server();
    const head = sha('no-pr-permission');
    s.addPullRequest(REPO, { number: 14, headSha: head });
    const token = newToken();
    const p = provider(s, token);
    s.withoutPullRequestPermission(token);
    const { notifier } = build(p);
    const e = await failure(() =>
      notifier.send(previewEvent(head), withComment(status('success', 'Update succeeded'), 'body')),
    );
    expect(s.statuses(REPO, head).map((x) => x.state)).toEqual(['success']);
    expect([e.status, e.retryable, e.verdict]).toEqual([403, false, { kind: 'permission', retry: false }]);
    expect(problemReason(e)).toBeUndefined(); // the Provider stays Ready: its statuses work
    expect(e.message).toMatch(
      /^the commit status is set, but finding the pull requests of [0-9a-f]{40} was refused: the credentials may set commit statuses but lack permission for pull requests/,
    );
    // A status alone (no comment rendered) still works and says nothing about comments.
    await notifier.send(event(sha('status-only')), status('pending', 'Update started'));
    expect(s.statuses(REPO, sha('status-only')).map((x) => x.state)).toEqual(['pending']);
    expect(s.violations).toEqual([]);
  });

  it('an archived repository refuses every write: final, the Provider is not blamed', async () => {
    const s = await server();
    s.archiveRepo(REPO);
    const { notifier } = build(provider(s, newToken()));
    const e = await failure(() => notifier.send(event(sha('arch')), status('success', 'ok')));
    expect([e.status, e.verdict.kind, e.retryable]).toEqual([403, 'locked', false]);
    expect(problemReason(e)).toBeUndefined();
  });

  it('N07: a renamed repository: status POST answers 307, status GET 301, to /repositories/<id>: followed with method and body, everything lands on the renamed repository', async () => {
    const s = await server();
    const head = sha('n07');
    s.addPullRequest(REPO, { number: 12, headSha: head });
    const { notifier, urls } = build(provider(s, newToken()));
    await notifier.send(previewEvent(head), withComment(status('pending', 'Update started'), 'started'));
    s.renameRepo(REPO, 'acme/app-renamed');
    await notifier.send(previewEvent(head), withComment(status('success', 'Update succeeded'), 'done'));
    // After a restart the first call is a read: 301, remembered for the calls that follow.
    const { notifier: restarted } = build(provider(s, newToken()));
    await restarted.send(previewEvent(head), withComment(status('failure', 'Update failed'), 'failed'));

    expect(s.statuses('acme/app-renamed', head).map((x) => x.state)).toEqual([
      'failure',
      'success',
      'pending',
    ]);
    const mine = s.comments('acme/app-renamed', 12).filter((c) => c.login === 'pko-bot');
    expect(mine.map((c) => c.body)).toEqual([
      `${MARKER}
failed`,
    ]);
    const answered = s.log.map(
      (e) =>
        `${e.method} ${e.path.replace(/[0-9a-f]{40}/, 'SHA').replace(/comments\/\d+/, 'comments/N')} ${String(e.status)}`,
    );
    expect(answered).toContain('POST /repos/acme/app/statuses/SHA 307');
    expect(answered).toContain('POST /repositories/100/statuses/SHA 201');
    expect(answered).toContain('PATCH /repos/acme/app/issues/comments/N 307');
    expect(answered).toContain('GET /repos/acme/app/commits/SHA/statuses 301');
    // Only the server's own origin was ever contacted.
    expect(new Set(urls.map((u) => new URL(u).origin))).toEqual(new Set([s.origin]));
    expect(s.violations).toEqual([]);
  });

  it('a repository moved to another host and named login (or sso, sessions, …) is said to have moved, not a sign-in page', async () => {
    for (const name of ['login', 'sso', 'sessions', 'authorize', 'saml']) {
      const s = await server();
      s.portalNext({
        match: (method, path) => method === 'POST' && /\/statuses\/[0-9a-f]{40}$/.test(path),
        status: 301,
        headers: { location: `https://git.example.net/repos/platform/${name}/statuses/${sha(41)}` },
      });
      const { notifier } = build(provider(s, newToken()));
      const e = await failure(() => notifier.send(event(sha(41)), status('pending', 'Update started')));
      expect(e.message, name).toMatch(
        /the repository moved to https:\/\/git\.example\.net; set the Provider address/,
      );
      expect(e.verdict.condition, name).not.toBe('NotTheAPI');
      expect(problemReason(e), name).not.toBe('AuthenticationFailed');
    }
  });

  it('an unknown commit has no pull requests (GitHub 422), not an error', async () => {
    const s = await server();
    s.commitNotIndexed(sha(11));
    const { notifier } = build(provider(s, newToken()));
    await notifier.send(previewEvent(sha(11)), withComment(status('pending', 'Update started'), 'body'));
    expect(posts(s)).toBe(1);
    const lookup = s
      .apiCalls()
      .filter((e) => e.operationId === 'repos/list-pull-requests-associated-with-commit');
    expect(lookup.map((e) => e.status)).toEqual([422]);
    expect(s.apiCalls().some((e) => e.operationId === 'issues/create-comment')).toBe(false);
    // A commit without pull requests: nothing to comment on either.
    await notifier.send(previewEvent(sha(12)), withComment(status('pending', 'Update started'), 'body'));
    expect(posts(s)).toBe(2);
    expect(s.violations).toEqual([]);
  });
});

describe('endpoints, TLS and proxy', () => {
  it('F02: GitHub Enterprise Server: calls go to https://HOST/api/v3 guessed from the address, never to api.github.com', async () => {
    const s = await server({ basePath: '/api/v3' });
    const token = newToken();
    s.addToken(token, 'pko-bot');
    s.addPullRequest(REPO, { number: 3, headSha: sha(12) });
    const p = resolved({
      type: 'github',
      name: 'ghe',
      address: `${s.origin}/${REPO}.git`,
      token,
      secretValues: [token],
    });
    const { notifier, urls } = build(p);
    await notifier.send(event(sha(12)), withComment(status('success', 'Update succeeded'), 'hello'));
    expect(urls.length).toBeGreaterThan(0);
    expect(urls.every((u) => u.startsWith(`${s.origin}/api/v3/`))).toBe(true);
    expect(urls.some((u) => u.includes('api.github.com'))).toBe(false);
    expect(s.log.every((e) => e.host === `127.0.0.1:${s.port}` && e.path.startsWith('/api/v3/'))).toBe(true);
    expect(s.statuses(REPO, sha(12))).toHaveLength(1);
    expect(s.violations).toEqual([]);

    // An explicit apiURL overrides the guess.
    const s2 = await server({ basePath: '/github/api/v3' });
    const p2 = resolved({ ...p, address: `https://git.corp.example/${REPO}`, apiURL: `${s2.apiBase}/` });
    s2.addToken(token, 'pko-bot');
    const { notifier: n2, urls: urls2 } = build(p2);
    await n2.send(event(sha(12)), status('success', 'Update succeeded'));
    expect(urls2.every((u) => u.startsWith(`${s2.apiBase}/`))).toBe(true);
    expect(s2.statuses(REPO, sha(12))).toHaveLength(1);
  });

  it('F08: a private CA: without certSecretRef a TLS error, with it every call verifies', async () => {
    const s = await server({ tls: { cert: pki.certPem, key: pki.keyPem }, basePath: '/api/v3' });
    const token = newToken();
    s.addToken(token, 'pko-bot');
    const base = resolved({
      type: 'github',
      name: 'ghe',
      address: `https://localhost:${s.port}/${REPO}`,
      token,
      secretValues: [token],
    });
    const { notifier: without } = build(base);
    const err = await failure(() => without.send(event(sha(13)), status('pending', 'Update started')));
    expect(err.code).toBe('TLS');
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(/certSecretRef/);
    expect(s.log).toEqual([]);

    const { notifier: withCa } = build({ ...base, tls: { ca: pki.caPem } });
    await withCa.send(event(sha(13)), status('pending', 'Update started'));
    expect(s.statuses(REPO, sha(13))).toHaveLength(1);
    expect(s.violations).toEqual([]);
  });
});

describe('GitHub App', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privatePem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  let appSeq = 4000;
  const app = (): { id: number; slug: string; installationId: number; publicKeyPem: string } => {
    appSeq++;
    return { id: appSeq, slug: `pko-notify-${appSeq}`, installationId: appSeq * 10, publicKeyPem: publicPem };
  };
  const appProvider = (
    s: GitHubContractServer,
    a: { id: number; installationId: number },
    extra: Partial<ResolvedProvider> = {},
  ): ResolvedProvider =>
    resolved({
      type: 'github',
      name: 'github-app',
      address: `https://github.com/${REPO}`,
      apiURL: s.apiBase,
      githubApp: { appID: String(a.id), installationID: String(a.installationId), privateKey: privatePem },
      secretValues: [privatePem],
      ...extra,
    });

  describe('N13: the installation-token endpoint does not answer as the API (a login or SSO portal in front of GHES)', () => {
    const LOGIN_PAGE =
      '<!DOCTYPE html><html><head><title>Sign in to GitHub · GitHub</title></head><body><form action="/session"><input type="password" name="password"></form></body></html>';
    const tokenCall = (method: string, path: string): boolean =>
      method === 'POST' && /\/app\/installations\/\d+\/access_tokens$/.test(path);
    it.each([
      ['(a) 200 with an HTML login page', 200, { 'content-type': 'text/html; charset=utf-8' }, LOGIN_PAGE],
      ['(b) 302 to /login on the same host', 302, { location: '/login?return_to=%2Fapi%2Fv3' }, ''],
      [
        '(c) 302 to another host (an SSO portal)',
        302,
        { location: 'https://sso.example.net/saml/login?x=1' },
        '',
      ],
    ] as const)(
      '%s: Ready=False NotTheAPI naming the URL to set; no token undefined; no redirect followed',
      async (_n, code, headers, body) => {
        const a = app();
        const s = await server({ app: a, basePath: '/api/v3' });
        s.portalNext({ match: tokenCall, status: code, headers, body });
        const p = appProvider(s, a);
        const seen: { url: string; authorization: string | undefined; method: string }[] = [];
        const http = new ProviderHttp(p, {
          fetch: (input, init) => {
            const h = new Headers(init?.headers);
            seen.push({
              url: typeof input === 'string' ? input : input instanceof URL ? input.toString() : input.url,
              method: init?.method ?? 'GET',
              authorization: h.get('authorization') ?? undefined,
            });
            return fetchUndici(input, init);
          },
        });
        const notifier = createGitHubNotifier(p, { http }, { pacing: false });
        cleanups.push(() => notifier.close());
        const e = await failure(() => notifier.send(event(sha(31)), status('pending', 'Update started')));
        expect(e.verdict).toEqual({
          kind: code === 200 ? 'badResponse' : 'redirect',
          retry: false,
          condition: 'NotTheAPI',
        });
        expect(problemReason(e)).toBe('NotTheAPI');
        expect(e.message).toContain(`the API base URL ${s.apiBase} does not answer as GitHub's API`);
        expect(e.message).toMatch(
          /set githubAppBaseURL in the Provider's Secret \(for the App's token\) or spec\.apiURL to GitHub's API URL/,
        );
        expect(e.message).not.toMatch(/repository moved/);
        expect(e.message).toMatch(
          code === 200 ? /answered 200 with a sign-in page/ : /with a redirect to a sign-in page/,
        );
        // Nothing carried a token that is not one, and the POST was not re-sent anywhere.
        expect(seen.some((r) => /token undefined/i.test(r.authorization ?? ''))).toBe(false);
        expect(seen.filter((r) => r.method === 'POST').map((r) => new URL(r.url).pathname)).toEqual([
          `/api/v3/app/installations/${String(a.installationId)}/access_tokens`,
        ]);
        expect(seen.some((r) => /\/login|sso\.example\.net/.test(r.url))).toBe(false);
        expect(s.statuses(REPO, sha(31))).toEqual([]);
      },
    );
  });

  it('exchanges a signed JWT for an installation token, then posts statuses and comments as <slug>[bot]', async () => {
    const a = app();
    const s = await server({ app: a });
    s.addPullRequest(REPO, { number: 5, headSha: sha(14) });
    const { notifier } = build(appProvider(s, a));
    await notifier.send(previewEvent(sha(14)), withComment(status('pending', 'Preview started'), 'running'));
    await notifier.send(previewEvent(sha(14)), withComment(status('success', 'Preview succeeded'), 'done'));

    const ops = s.apiCalls().map((e) => `${e.operationId ?? '?'} ${e.auth}`);
    expect(ops[0]).toBe(`apps/create-installation-access-token jwt:${a.id}`);
    expect(ops.filter((o) => o.startsWith('apps/create-installation-access-token'))).toHaveLength(1); // cached
    expect(ops).toContain(`apps/get-authenticated jwt:${a.id}`);
    expect(
      ops
        .filter((o) => o.startsWith('repos/create-commit-status'))
        .every((o) => o.endsWith(`installation:${a.slug}[bot]`)),
    ).toBe(true);
    expect(s.statuses(REPO, sha(14)).map((x) => [x.state, x.creator])).toEqual([
      ['success', `${a.slug}[bot]`],
      ['pending', `${a.slug}[bot]`],
    ]);
    const comments = s.comments(REPO, 5);
    expect(comments.map((c) => [c.login, c.body, c.edits])).toEqual([
      [`${a.slug}[bot]`, `${MARKER}\ndone`, 1],
    ]);

    // A new notifier (restart) recognises the App's comment as its own and edits it.
    const { notifier: again } = build(appProvider(s, a));
    await again.send(
      previewEvent(sha(14)),
      withComment(status('success', 'Preview succeeded'), 'done again'),
    );
    expect(s.comments(REPO, 5).map((c) => [c.body, c.edits])).toEqual([[`${MARKER}\ndone again`, 2]]);
    expect(s.violations).toEqual([]);
  });

  it('N06: a key pasted with literal \\n is accepted (normalised) and the App token exchange works', async () => {
    const a = app();
    const s = await server({ app: a });
    const pasted = privatePem.trim().replace(/\n/g, '\\n');
    expect(pasted).not.toContain('\n');
    const p = await resolvedFromSecret(
      { type: 'github', address: `https://github.com/${REPO}`, apiURL: s.apiBase },
      {
        githubAppID: String(a.id),
        githubAppInstallationID: String(a.installationId),
        githubAppPrivateKey: pasted,
      },
    );
    expect(p.githubApp?.privateKey).toBe(privatePem);
    const { notifier } = build(p);
    await notifier.send(event(sha(21)), status('success', 'Update succeeded'));
    expect(s.statuses(REPO, sha(21)).map((x) => x.creator)).toEqual([`${a.slug}[bot]`]);
    expect(s.violations).toEqual([]);
  });

  it('a wrong installation id is a final error naming the App keys', async () => {
    const a = app();
    const s = await server({ app: a });
    const { notifier } = build(appProvider(s, { ...a, installationId: 1 }));
    const err = await failure(() => notifier.send(event(sha(15)), status('pending', 'Update started')));
    expect(err.status).toBe(404);
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(/githubAppInstallationID/);
    expect(err.message).not.toContain('PRIVATE KEY');
  });

  it('F09 + F08: every request, token exchange included, goes through the proxy to a private-CA server', async () => {
    const a = app();
    const s = await server({ app: a, tls: { cert: pki.certPem, key: pki.keyPem } });
    s.addPullRequest(REPO, { number: 6, headSha: sha(16) });
    const px = await proxy();
    const p = appProvider(s, a, {
      apiURL: `https://localhost:${s.port}`,
      tls: { ca: pki.caPem },
      proxy: { address: px.url },
    });
    const { notifier } = build(p);
    await notifier.send(
      previewEvent(sha(16)),
      withComment(status('success', 'Preview succeeded'), 'via proxy'),
    );

    const ops = s.apiCalls().map((e) => e.operationId);
    expect(ops).toContain('apps/create-installation-access-token');
    expect(ops).toContain('repos/create-commit-status');
    expect(ops).toContain('issues/create-comment');
    // Every connection the server accepted is a tunnel the proxy opened: nothing went direct.
    const tunnels = px.seen.filter((x) => x === `CONNECT localhost:${s.port}`).length;
    expect(tunnels).toBeGreaterThan(0);
    expect(px.seen.every((x) => x === `CONNECT localhost:${s.port}`)).toBe(true);
    expect(s.connections()).toBe(tunnels);
    expect(s.violations).toEqual([]);
  });
});

describe('F20: secondary rate limits', () => {
  for (const code of [429, 403] as const) {
    it(`${code} with Retry-After: 7 → a retryable error that says 7 s, and no hidden retry by the plugins`, async () => {
      const s = await server();
      const clock = Date.now();
      const { notifier } = build(provider(s, newToken()), { now: () => clock }); // pacing on (production)
      s.throttle({ status: code, retryAfter: 7 });

      const err = await failure(() =>
        notifier.send(event(sha(`f20-${code}`)), status('pending', 'Update started')),
      );
      expect(err.retryable).toBe(true);
      expect(err.retryAfterMs).toBe(7_000);
      expect(err.status).toBe(code);
      expect(s.log).toHaveLength(1);
      // Neither plugin calls GitHub again: holding the credential is the delivery gate's job
      // (test/delivery/send.test.ts).
      await new Promise((r) => setTimeout(r, 1_200));
      expect(s.log).toHaveLength(1);
    });
  }
});
