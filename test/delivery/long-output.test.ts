/**
 * Bounded, not beheaded (issue 11): a 30,000-character failure — written in a Stack's status as
 * PKO writes it — goes through derivation (`cleanMessage`), the renderer and each real notifier
 * to a real endpoint, and its LAST line (where the Pulumi CLI prints the error) shows in every
 * channel: the Slack message, the webhook's `message`, the pull/merge request comment on each
 * forge, and the commit status description (it fits every forge's limit: GitHub's 140 included).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GIT_PROVIDER_TYPES, type ProviderType } from '../../src/api/v1alpha1.ts';
import type { NotificationEvent } from '../../src/api/event.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { createNotifier, limitsFor } from '../../src/provider-types.ts';
import { eventsFromStack } from '../../src/source/derive.ts';
import { compileTemplates, renderNotification, type RenderedNotification } from '../../src/template/index.ts';
import { measure } from '../../src/text.ts';
import { startAzureServer, type AzureServer } from '../forge/azuredevops/server.ts';
import { startBitbucketServer, type BitbucketServer } from '../forge/bitbucket/server.ts';
import { startBitbucketServerDC, type BbsServer } from '../forge/bitbucketserver/server.ts';
import { startGiteaServer, type GiteaServer } from '../forge/gitea/server.ts';
import { startGitHubServer, type GitHubContractServer } from '../forge/github/server.ts';
import { startGitLabServer, type GitLabServer } from '../forge/gitlab/server.ts';
import type { KitServer } from '../forge/kit.ts';
import { resolved } from '../notifier/fixtures.ts';
import { ctx, SHA, v2FailedStack } from '../source/fixtures.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';

const LAST = 'error: THE-LAST-LINE resource "web" could not be created';
const TOKEN = 'tok-0123456789abcdef';

/** A failed `up` whose CLI output is 30,000 characters, as PKO v2 writes it in the Stack status. */
function longFailure(): NotificationEvent {
  const lines = ['up failed: failed to run update: exit status 1', 'code: 1', 'stdout: Updating (dev):'];
  for (let i = 0; lines.join('\n').length < 29_900; i++) {
    lines.push(
      `    + aws:s3/bucket:Bucket bucket-${String(i)} creating (${String(i % 60)}s) ${'·'.repeat(40)}`,
    );
  }
  lines.push('', `stderr: ${LAST}`, '');
  const stack = v2FailedStack();
  const last = stack.status?.lastUpdate;
  if (last === undefined) throw new Error('fixture has no lastUpdate');
  last.message = lines.join('\n');
  expect(last.message.length).toBeGreaterThanOrEqual(30_000);
  const [ev] = eventsFromStack(stack, ctx, { updateExists: () => false });
  if (ev === undefined) throw new Error('no event derived');
  return { ...ev, metadata: { ...ev.metadata, commit: SHA } };
}

const templates = (() => {
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  return r.set;
})();

function render(ev: NotificationEvent, type: ProviderType): RenderedNotification {
  return renderNotification(templates, ev, {
    clusterName: 'prod',
    providerType: type,
    commentsEnabled: true,
    limits: limitsFor(type),
  });
}

async function send(p: ResolvedProvider, ev: NotificationEvent, r: RenderedNotification): Promise<void> {
  const n = createNotifier(p, { http: new ProviderHttp(p) });
  try {
    await n.send(ev, r);
  } finally {
    await n.close();
  }
}

/** JSON bodies of the writes a contract server received. */
const writes = (s: KitServer): string[] =>
  s.requests.filter((r) => r.method !== 'GET').map((r) => JSON.stringify(r.json ?? null));

let ev: NotificationEvent;
let receiver: TestReceiver;
let github: GitHubContractServer;
let gitlab: GitLabServer;
let gitea: GiteaServer;
let bitbucket: BitbucketServer;
let dc: BbsServer;
let azure: AzureServer;

beforeAll(async () => {
  ev = longFailure();
  receiver = await startReceiver();
  github = await startGitHubServer({ tokens: { [TOKEN]: 'pko-bot' } });
  github.addPullRequest('acme/app', { number: 1, headSha: SHA });
  gitlab = await startGitLabServer({ tokens: { [TOKEN]: { id: 7, username: 'pko-bot' } } });
  gitlab.addMR('acme/app', { iid: 1, sha: SHA });
  gitea = await startGiteaServer({ tokens: { [TOKEN]: { id: 7, login: 'pko-bot' } } });
  gitea.repo('acme', 'app');
  gitea.addPull('acme', 'app', { number: 1, sha: SHA });
  bitbucket = await startBitbucketServer({
    bearer: { [TOKEN]: { uuid: '{b0t}', account_id: 'b0t', display_name: 'pko-bot' } },
  });
  bitbucket.repo('acme', 'app');
  bitbucket.addPull('acme', 'app', { id: 1, sourceCommit: SHA });
  dc = await startBitbucketServerDC({
    basic: { 'pko-bot': { password: TOKEN, user: { name: 'pko-bot', slug: 'pko-bot', id: 7 } } },
  });
  dc.addPull('PROJ', 'app', { id: 1, latestCommit: SHA });
  azure = await startAzureServer({ pats: { [TOKEN]: { id: 'b0t-id', displayName: 'pko-bot' } } });
  azure.repo('acme', 'Platform', 'app');
  azure.addPull('acme', 'Platform', 'app', { pullRequestId: 1, sourceCommit: SHA });
}, 60_000);

afterAll(async () => {
  await Promise.all([receiver, github, gitlab, gitea, bitbucket, dc, azure].map((s) => s.close()));
});

describe('a 30,000-character failure shows its last line in every channel', () => {
  it('derivation keeps the first line and the end (8,192 code points) and says what it cut', () => {
    expect(measure(ev.message, 'codePoints')).toBeLessThanOrEqual(8_192);
    expect(
      ev.message.startsWith('Update of stack acme/app/dev failed:\nup failed: failed to run update'),
    ).toBe(true);
    expect(ev.message).toMatch(/\n\[… [\d,]+ characters cut …\]\n/);
    expect(ev.message.endsWith(LAST)).toBe(true);
  });

  it('slack (incoming webhook): the message ends with the last line', async () => {
    const r = render(ev, 'slack');
    await send(resolved({ type: 'slack', address: `${receiver.url}/slack` }), ev, r);
    const text = (JSON.parse(receiver.requests.at(-1)?.body ?? '{}') as { text: string }).text;
    expect(text.length).toBeLessThanOrEqual(4_000);
    expect(text).toContain(LAST.replace(/"/g, '"'));
    expect(text).toMatch(/error: THE-LAST-LINE resource "web" could not be created\n```$/);
  });

  it('generic webhook: message ends with the last line', async () => {
    await send(resolved({ type: 'generic', address: `${receiver.url}/hook` }), ev, render(ev, 'generic'));
    const body = JSON.parse(receiver.requests.at(-1)?.body ?? '{}') as { message: string };
    expect(body.message.endsWith(LAST)).toBe(true);
  });

  const forgeProviders = (): Record<(typeof GIT_PROVIDER_TYPES)[number], ResolvedProvider> => ({
    github: resolved({
      type: 'github',
      address: 'https://github.com/acme/app',
      apiURL: github.apiBase,
      token: TOKEN,
      secretValues: [TOKEN],
    }),
    gitlab: resolved({
      type: 'gitlab',
      address: `${gitlab.url}/acme/app`,
      token: TOKEN,
      secretValues: [TOKEN],
    }),
    gitea: resolved({ type: 'gitea', address: `${gitea.url}/acme/app`, token: TOKEN, secretValues: [TOKEN] }),
    bitbucket: resolved({
      type: 'bitbucket',
      address: 'https://bitbucket.org/acme/app',
      apiURL: `${bitbucket.url}/2.0`,
      token: TOKEN,
      secretValues: [TOKEN],
    }),
    bitbucketserver: resolved({
      type: 'bitbucketserver',
      address: `${dc.url}/scm/PROJ/app.git`,
      username: 'pko-bot',
      password: TOKEN,
      secretValues: [TOKEN],
    }),
    azuredevops: resolved({
      type: 'azuredevops',
      address: 'https://dev.azure.com/acme/Platform/_git/app',
      apiURL: `${azure.url}/acme`,
      token: TOKEN,
      secretValues: [TOKEN],
    }),
  });

  it.each(GIT_PROVIDER_TYPES)(
    '%s: the pull request comment and the commit status description end with it',
    async (type) => {
      const r = render(ev, type);
      const limits = limitsFor(type);
      expect(
        measure(r.commitStatus?.description ?? '', limits.statusDescription?.unit ?? 'codePoints'),
      ).toBeLessThanOrEqual(limits.statusDescription?.max ?? Infinity);
      // A deploy run comments only on a pull request it names (src/forge/notifier.ts).
      await send(forgeProviders()[type], { ...ev, metadata: { ...ev.metadata, pullRequest: '1' } }, r);
      let comments: string[];
      let descriptions: string[];
      if (type === 'github') {
        comments = github.comments('acme/app', 1).map((c) => c.body);
        descriptions = github.statuses('acme/app', SHA).map((s) => s.description ?? '');
      } else {
        const server = { gitlab, gitea, bitbucket, bitbucketserver: dc, azuredevops: azure }[type];
        const bodies = writes(server).map((w) => JSON.parse(w) as Record<string, unknown>);
        comments = bodies.flatMap((b) => {
          const raw =
            b.body ??
            b.text ??
            (b.content as { raw?: unknown } | undefined)?.raw ??
            (b.comments as { content?: unknown }[] | undefined)?.[0]?.content;
          return typeof raw === 'string' ? [raw] : [];
        });
        descriptions = bodies.flatMap((b) => (typeof b.description === 'string' ? [b.description] : []));
      }
      expect(comments).toHaveLength(1);
      // In the comment the output sits in a code block: its last line is the error, then the fence.
      expect(comments[0]).toMatch(/error: THE-LAST-LINE resource "web" could not be created\n`{3,}\n/);
      expect(descriptions).toEqual([`Update of stack acme/app/dev failed: stderr: ${LAST}`]);
    },
  );
});
