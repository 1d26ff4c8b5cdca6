/**
 * Forge API calls per delivered commit status (not part of `npm test`): `npm run bench:forge`.
 *
 * Drives the real `github` notifier against the GitHub contract server (requests validated
 * against GitHub's OpenAPI description) and counts every API call:
 *  - steady state: N commits × (pending, success), each state re-sent 4 times (resyncs, relists);
 *  - after a restart (empty caches): each commit's latest status re-sent once (what a crash
 *    between send and ledger write causes);
 *  - with the sticky comment rendered (the built-in GitHub template with `pullRequestComment` on,
 *    no pull request open): a new context's first status, then new commits on known contexts.
 * Env: BENCH_COMMITS (default 200).
 */
import { createHash } from 'node:crypto';
import { ProviderHttp } from '../src/notifier/http.ts';
import { createGitHubNotifier } from '../src/forge/github/index.ts';
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

// The sticky comment rendered: each Stack's first status after start (a context not seen yet),
// then one new commit per Stack on the now known contexts.
const STACKS = Math.min(COMMITS, 50);
const withComment = async (commit: (stack: number) => number): Promise<[number, number]> => {
  const notifier = createGitHubNotifier(p, { http: new ProviderHttp(p) }, { pacing: false });
  const calls0 = server.apiCalls().length;
  const posts0 = posts();
  for (let s = 0; s < STACKS; s++) {
    const ev = { ...sampleEvent, metadata: { ...sampleEvent.metadata, commit: sha(commit(s)) } };
    await notifier.send(ev, rendered('success', 'Update succeeded', `pko/bench/ns/s${s}`, true));
  }
  const firstCalls = server.apiCalls().length - calls0;
  const firstPosts = posts() - posts0;
  for (let s = 0; s < STACKS; s++) {
    const ev = { ...sampleEvent, metadata: { ...sampleEvent.metadata, commit: sha(commit(s) + STACKS) } };
    await notifier.send(ev, rendered('success', 'Update succeeded', `pko/bench/ns/s${s}`, true));
  }
  const nextCalls = server.apiCalls().length - calls0 - firstCalls;
  const nextPosts = posts() - posts0 - firstPosts;
  await notifier.close();
  return [firstCalls / firstPosts, nextCalls / nextPosts];
};
const [first, next] = await withComment((s) => 10 * COMMITS + s);
console.log(
  `with the sticky comment rendered (no pull request open), ${STACKS} Stacks: ${first.toFixed(2)} calls per status for a context's first status after start, ${next.toFixed(2)} per status on a new commit of a known context`,
);
console.log(`contract violations: ${server.violations.length}`);
await server.close();
