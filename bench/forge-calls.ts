/**
 * Forge API calls per delivered commit status (not part of `npm test`): `npm run bench:forge`.
 *
 * Drives the real `github` notifier against the GitHub contract server (requests validated
 * against GitHub's OpenAPI description) and counts every API call:
 *  - steady state: N commits × (pending, success), each state re-sent 4 times (resyncs, relists);
 *  - after a restart (empty caches): each commit's latest status re-sent once (what a crash
 *    between send and ledger write causes);
 *  - a deploy Stack with the sticky comment rendered (the built-in GitHub template with
 *    `pullRequestComment` on, an open pull request whose head is each commit): calls per new
 *    status, a context's first status after start, then new commits on known contexts — the
 *    issue-21 goal (≤ 2, Flux's count; a deploy run looks up no pull request);
 *  - a preview Stack likewise (`PreviewSucceeded`): its calls per new status, the pull-request
 *    lookup and the sticky comment's calls counted apart.
 * Env: BENCH_COMMITS (default 200).
 */
import { createHash } from 'node:crypto';
import { ProviderHttp } from '../src/notifier/http.ts';
import { createGitHubNotifier } from '../src/forge/github/index.ts';
import type { EventReason } from '../src/api/v1alpha1.ts';
import type { RenderedNotification } from '../src/notifier/types.ts';
import { resolved, sampleEvent } from '../test/notifier/fixtures.ts';
import { startGitHubServer } from '../test/forge/github/server.ts';

const COMMITS = Number(process.env.BENCH_COMMITS ?? 200);
const sha = (i: number): string => createHash('sha1').update(`bench-${i}`).digest('hex');
const rendered = (
  state: 'pending' | 'success',
  description: string,
  context = 'pko/bench/ns/app',
  comment = false,
): RenderedNotification => ({
  message: description,
  commitStatus: {
    state,
    context,
    description,
    targetURL: 'https://app.pulumi.com/acme/app/dev/updates/1',
  },
  ...(comment
    ? { comment: { marker: '<!-- pko-bench -->', body: `${description}\n<!-- pko-bench -->` } }
    : {}),
});

const server = await startGitHubServer({ repos: ['acme/app'], tokens: { ghp_bench: 'pko-bot' } });
const p = resolved({
  type: 'github',
  name: 'github',
  address: 'https://github.com/acme/app',
  apiURL: server.apiBase,
  token: 'ghp_bench',
  secretValues: ['ghp_bench'],
});
const run = async (
  resends: number,
  states: readonly (readonly ['pending' | 'success', string])[],
): Promise<number> => {
  const notifier = createGitHubNotifier(p, { http: new ProviderHttp(p) }, { pacing: false });
  const before = server.apiCalls().length;
  for (let c = 0; c < COMMITS; c++) {
    const ev = { ...sampleEvent, metadata: { ...sampleEvent.metadata, commit: sha(c) } };
    for (const [state, text] of states) {
      for (let i = 0; i < resends; i++) await notifier.send(ev, rendered(state, text));
    }
  }
  await notifier.close();
  return server.apiCalls().length - before;
};
const posts = (): number =>
  server.apiCalls().filter((e) => e.operationId === 'repos/create-commit-status').length;

const BOTH = [
  ['pending', 'Update started'],
  ['success', 'Update succeeded'],
] as const;
const steady = await run(4, BOTH);
const written = posts();
console.log(
  `steady state: ${steady} GitHub API calls for ${written} statuses written (${COMMITS * 8} sends) = ${(steady / written).toFixed(3)} calls per delivered status`,
);
const restart = await run(1, [['success', 'Update succeeded']]);
console.log(
  `after a restart (cold caches), re-sending each commit's latest status once (crash-window resends): ${restart} calls, ${posts() - written} statuses written again`,
);

// The sticky comment rendered, an open pull request whose head is each commit: each Stack's
// first status after start (a context not seen yet), then one new commit per Stack on the now
// known contexts. A deploy run (UpdateSucceeded) writes no comment and looks up no pull request;
// a preview run (PreviewSucceeded) does both.
const STACKS = Math.min(COMMITS, 50);
const LOOKUP = 'repos/list-pull-requests-associated-with-commit';
const COMMENT_OPS = new Set(['users/get-authenticated', 'issues/list-comments', 'issues/create-comment']);
interface CommentPhase {
  /** Calls per new status: a context's first after start, then a new commit on a known context. */
  first: number;
  next: number;
  /** Pull-request lookups and sticky-comment calls, per new status over both rounds. */
  lookups: number;
  comment: number;
}
const withComment = async (
  kind: 'deploy' | 'preview',
  commit: (stack: number) => number,
): Promise<CommentPhase> => {
  const notifier = createGitHubNotifier(p, { http: new ProviderHttp(p) }, { pacing: false });
  const reason: EventReason = kind === 'deploy' ? 'UpdateSucceeded' : 'PreviewSucceeded';
  const updateType = kind === 'deploy' ? 'up' : 'preview';
  let pr = 1_000 * (kind === 'deploy' ? 1 : 2);
  const calls0 = server.apiCalls().length;
  const posts0 = posts();
  const round = async (offset: number): Promise<[number, number]> => {
    const c0 = server.apiCalls().length;
    const p0 = posts();
    for (let s = 0; s < STACKS; s++) {
      const head = sha(commit(s) + offset);
      server.addPullRequest('acme/app', { number: ++pr, headSha: head });
      const ev = {
        ...sampleEvent,
        reason,
        metadata: { ...sampleEvent.metadata, commit: head, updateType },
      };
      await notifier.send(ev, rendered('success', reason, `pko/bench/${kind}/s${s}`, true));
    }
    return [server.apiCalls().length - c0, posts() - p0];
  };
  const [firstCalls, firstPosts] = await round(0);
  const [nextCalls, nextPosts] = await round(STACKS);
  await notifier.close();
  const ops = server
    .apiCalls()
    .slice(calls0)
    .map((e) => e.operationId ?? '');
  const statuses = posts() - posts0;
  return {
    first: firstCalls / firstPosts,
    next: nextCalls / nextPosts,
    lookups: ops.filter((o) => o === LOOKUP).length / statuses,
    comment: ops.filter((o) => COMMENT_OPS.has(o)).length / statuses,
  };
};
for (const [kind, base] of [
  ['deploy', 10 * COMMITS],
  ['preview', 20 * COMMITS],
] as const) {
  const r = await withComment(kind, (s) => base + s);
  console.log(
    `${kind} Stack, sticky comment rendered, an open pull request whose head is the commit, ${STACKS} Stacks: ${r.first.toFixed(2)} calls per status for a context's first status after start, ${r.next.toFixed(2)} per status on a new commit of a known context; per status ${r.lookups.toFixed(2)} pull-request lookups, ${r.comment.toFixed(2)} comment calls`,
  );
}
console.log(`contract violations: ${server.violations.length}`);
await server.close();
