/**
 * R21 and R22 over recorded agent logs, for every provider type × the built-in templates it uses,
 * through the real path: the recorded PKO v2.9 workspace log (test/fixtures/agent-logs/) is read
 * by the ChangeAttacher (src/enrich/changes.ts, with an injected `readLog` that passes the
 * recording — whole, cut, or not there at all), the event is rendered with the built-in templates
 * and the type's limits exactly as the Sender does (`renderNotification`, `limitsFor`), and sent
 * by the type's real notifier (`createNotifier`) to its contract server (test/forge/*, test/chat/*,
 * test/support/receiver.ts). What is asserted is what the service received: every string of
 * every body written (statuses, comments, chat messages, webhook bodies).
 *
 * - R22 (an unknown change set is never "no changes"): the same preview, its log cut after the
 *   banner, cut after `Resources:` (`workspaceReclaimPolicy: Delete`: the pod went while the log was
 *   read), and not there at all: every body says `change set incomplete`/`change set unavailable`
 *   with the reason, never `no changes` or `0 to create`; the whole log still reads `~2 to update`.
 * - R21 (values the run marks secret): a failed up whose log holds, in PKO v2.0/2.1's `up
 *   completed` summary (PKO #988), `"proj:dbPassword":{"Value":"Zx9-value-QQ","Secret":true}`,
 *   and the same literal in a provider error that the failed run's message carries: no body holds
 *   it, `[secret]` stands in its place.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import { PROVIDER_TYPES, isGitProviderType, type ProviderType } from '../../src/api/v1alpha1.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { ChangeAttacher } from '../../src/enrich/changes.ts';
import type { readWorkspaceLog, WorkspaceLogResult } from '../../src/kube/workspace-log.ts';
import { createLogger } from '../../src/log.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { createNotifier, limitsFor } from '../../src/provider-types.ts';
import {
  compileTemplates,
  renderNotification,
  templateContext,
  type TemplateSet,
} from '../../src/template/index.ts';
import { startAzureServer, type AzureServer } from '../forge/azuredevops/server.ts';
import { startBitbucketServer, type BitbucketServer } from '../forge/bitbucket/server.ts';
import { startBitbucketServerDC, type BbsServer } from '../forge/bitbucketserver/server.ts';
import { startGiteaServer, type GiteaServer } from '../forge/gitea/server.ts';
import { startGitHubServer, type GitHubContractServer } from '../forge/github/server.ts';
import { startGitLabServer, type GitLabServer } from '../forge/gitlab/server.ts';
import { startDiscordServer } from '../chat/discord-server.ts';
import { startGoogleChatServer } from '../chat/googlechat-server.ts';
import { startTeamsServer } from '../chat/msteams-server.ts';
import { startSlackServer } from '../chat/slack-server.ts';
import { startReceiver } from '../support/receiver.ts';
import { resolved } from '../notifier/fixtures.ts';

// ---------------------------------------------------------------------------------------------
// The recordings

const LOGS = new URL('../fixtures/agent-logs/', import.meta.url);
const lines = (file: string): string[] =>
  readFileSync(new URL(file, LOGS), 'utf8')
    .split('\n')
    .filter((l) => l !== '');

/** The preview of 02-update.log (`~2 to update`), from the agent's start to `preview completed`. */
const UPDATE = lines('02-update.log');
const at = (from: number, re: RegExp): number => {
  const i = UPDATE.findIndex((l, j) => j >= from && re.test(l));
  if (i < 0) throw new Error(`02-update.log has no line ${String(re)}`);
  return i;
};
const BANNER = at(0, /\tINFO\tpulumi\tPreviewing update \(dev\):$/);
const SUMMARY = at(BANNER, /\tINFO\tpulumi\tResources:$/);
const END = at(BANNER, /\tINFO\tserver\tpreview completed/);
const PREVIEW = UPDATE.slice(0, END + 1);

/** The literal Pulumi marks secret in R21 (in no Secret the Stack references). */
const SECRET = 'Zx9-value-QQ';

/**
 * R21's log: the failed up of 07-error-up.log (its provider failing on create), its error lines
 * holding the literal as a provider error would, and its end as PKO v2.0/v2.1 agents logged it —
 * `up completed` with the run's summary, config map included (PKO #988, fixed in 2.2 by #990).
 */
function secretLog(): string[] {
  const all = lines('07-error-up.log');
  const start = all.findIndex((l) => /\tINFO\tpulumi\tUpdating \(dev\):$/.test(l));
  const run = all.slice(start).filter((l) => !/\tserver\tup completed with an error\t/.test(l));
  const out = run.map((l) =>
    l.replace(
      'error: c: failing on create as asked (failOn: create)',
      `error: c: failing on create as asked (failOn: create): the database refused password "${SECRET}"`,
    ),
  );
  const end = out.findIndex((l) => /\tcmd\.serve\tserver stopped$/.test(l));
  const summary = {
    version: 0,
    kind: 'update',
    startTime: '2026-12-01T15:24:43Z',
    message: '',
    environment: { 'exec.kind': 'auto.local' },
    config: {
      'aws:region': { Value: 'eu-west-1', Secret: false },
      'proj:dbPassword': { Value: SECRET, Secret: true },
    },
    result: 'failed',
    endTime: '2026-12-01T15:24:43Z',
    resourceChanges: { same: 3 },
  };
  out.splice(
    end < 0 ? out.length : end,
    0,
    `2026-12-01T15:24:43.802Z\tINFO\tserver\tup completed\t{"summary": ${JSON.stringify(summary)}}`,
  );
  if (!out.some((l) => l.includes(`"proj:dbPassword":{"Value":"${SECRET}","Secret":true}`)))
    throw new Error('the R21 log lost its config line');
  return out;
}

// ---------------------------------------------------------------------------------------------
// Events through the ChangeAttacher

const stack: Stack = { metadata: { name: 'app', namespace: 'team-a', uid: 'uid-1' }, spec: {} };

function readLogOf(log: readonly string[] | WorkspaceLogResult): typeof readWorkspaceLog {
  return async (_run, sink) => {
    if (!Array.isArray(log)) return log as WorkspaceLogResult;
    for (const l of log as readonly string[]) await sink(l);
    return {
      ok: true,
      pod: 'app-workspace-0',
      lines: log.length,
      bytes: 0,
      cutLines: 0,
      end: 'eof',
      restartedDuringRun: false,
      droppedFragment: false,
      message: 'read',
    };
  };
}

/** The sticky comment of each row goes to its own pull request, its status on its own commit. */
interface Row {
  name: string;
  pr: number;
  sha: string;
  kind: 'complete' | 'incomplete' | 'unavailable' | 'secret' | 'gated';
  log: readonly string[] | WorkspaceLogResult;
  failed?: boolean;
  /** The preview Stack's gate (its PullRequestPreview's `spec.gate`). */
  gate?: NotificationEvent['gate'];
}

const sha = (n: number): string => String(n).repeat(40).slice(0, 40);
const ROWS: Row[] = [
  { name: 'the whole log', pr: 1, sha: sha(1), kind: 'complete', log: PREVIEW },
  {
    name: 'the log cut after the banner',
    pr: 2,
    sha: sha(2),
    kind: 'incomplete',
    log: UPDATE.slice(0, BANNER + 1),
  },
  {
    name: "the log cut after 'Resources:'",
    pr: 3,
    sha: sha(3),
    kind: 'incomplete',
    log: UPDATE.slice(0, SUMMARY + 1),
  },
  {
    name: 'no log: the workspace pod is gone',
    pr: 4,
    sha: sha(4),
    kind: 'unavailable',
    log: {
      ok: false,
      reason: 'PodNotFound',
      message: 'the workspace pod team-a/app-workspace-0 is gone (workspaceReclaimPolicy: Delete)',
      lines: 0,
    },
  },
  {
    name: 'a failed up whose log marks a value secret',
    pr: 5,
    sha: sha(5),
    kind: 'secret',
    log: secretLog(),
    failed: true,
  },
  {
    name: 'the log cut after the banner, with a gate on deletes',
    pr: 6,
    sha: sha(6),
    kind: 'gated',
    log: UPDATE.slice(0, BANNER + 1),
    gate: { gate: { operations: ['delete'] } },
  },
];

function update(name: string): Update {
  return {
    metadata: { name, namespace: 'team-a', uid: `uid-${name}` },
    spec: { workspaceName: 'app', type: 'preview' },
    status: {
      startTime: new Date(Date.now() - 5_000).toISOString(),
      endTime: new Date().toISOString(),
    },
  };
}

/** The event of `row` as the source makes it, enriched by the ChangeAttacher from the row's log. */
async function enriched(row: Row): Promise<NotificationEvent> {
  const run = `update-${String(row.pr)}`;
  const identity: EventIdentity = {
    stack: 'uid-1',
    run: { kind: 'update', name: run },
    phase: { kind: row.failed === true ? 'failed' : 'succeeded' },
  };
  const ev: NotificationEvent = {
    identity,
    id: eventId(identity),
    involvedObject: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      namespace: 'team-a',
      name: 'app',
      uid: 'uid-1',
    },
    labels: {},
    severity: row.failed === true ? 'error' : 'info',
    reason: row.failed === true ? 'UpdateFailed' : 'PreviewSucceeded',
    message:
      row.failed === true
        ? `Update of stack acme/app/dev failed:\nerror: c: failing on create as asked (failOn: create): the database refused password "${SECRET}"\nerror: update failed`
        : 'Preview of stack acme/app/dev succeeded',
    timestamp: '2026-12-01T15:24:45Z',
    metadata: {
      revision: `main@sha1:${row.sha}`,
      commit: row.sha,
      branch: 'feature',
      stack: 'acme/app/dev',
      updateName: run,
      updateType: row.failed === true ? 'up' : 'preview',
      pullRequest: String(row.pr),
    },
    reportingController: 'pko-notification-controller',
    ...(row.gate === undefined ? {} : { gate: row.gate }),
  };
  const attacher = new ChangeAttacher({
    kubeConfig: new KubeConfig(),
    update: (_ns, name) => (name === run ? update(name) : undefined),
    logger: createLogger({ level: 'silent' }),
    readSecret: () => Promise.resolve(undefined),
    readLog: readLogOf(row.log),
  });
  return attacher.attach(stack, ev);
}

// ---------------------------------------------------------------------------------------------
// Every provider type, on its contract server

interface Target {
  provider: ResolvedProvider;
  /** Called before `row` is sent. */
  before(row: Row): void;
  /** Every body the service was sent for `row`, after the send. */
  received(row: Row): string[];
  close(): Promise<void>;
}

const TOKEN = 'matrix-token-0123456789abcdef';
const OWN = { user: 'pko-bot' };

/** Bodies of the writes (not GETs) among `reqs`. */
const writes = (reqs: { method: string; body: string }[]): string[] =>
  reqs.filter((r) => r.method !== 'GET').map((r) => r.body);

async function target(type: ProviderType): Promise<Target> {
  switch (type) {
    case 'github': {
      const s: GitHubContractServer = await startGitHubServer({ repos: ['acme/app'] });
      s.addToken(TOKEN, OWN.user);
      for (const r of ROWS) s.addPullRequest('acme/app', { number: r.pr, headSha: r.sha });
      return {
        provider: resolved({
          type,
          address: 'https://github.com/acme/app',
          apiURL: s.apiBase,
          token: TOKEN,
          secretValues: [TOKEN],
        }),
        before: () => undefined,
        received: (r) => [
          ...s.statuses('acme/app', r.sha).flatMap((x) => [x.state, x.description ?? '']),
          ...s.comments('acme/app', r.pr).map((c) => c.body),
        ],
        close: () => s.close(),
      };
    }
    case 'gitea': {
      const s: GiteaServer = await startGiteaServer({ tokens: { [TOKEN]: { id: 42, login: OWN.user } } });
      s.repo('acme', 'app');
      for (const r of ROWS) s.addPull('acme', 'app', { number: r.pr, sha: r.sha });
      return kit(s, resolved({ type, address: `${s.url}/acme/app`, token: TOKEN, secretValues: [TOKEN] }));
    }
    case 'gitlab': {
      const s: GitLabServer = await startGitLabServer({
        tokens: { [TOKEN]: { id: 77, username: OWN.user } },
      });
      s.project('acme/app');
      for (const r of ROWS) s.addMR('acme/app', { iid: r.pr, sha: r.sha });
      return kit(s, resolved({ type, address: `${s.url}/acme/app`, token: TOKEN, secretValues: [TOKEN] }));
    }
    case 'bitbucket': {
      const bot = {
        uuid: '{b0b0b0b0-0000-4000-8000-000000000001}',
        account_id: '5f0:bot',
        display_name: 'pko bot',
      };
      const s: BitbucketServer = await startBitbucketServer({ bearer: { [TOKEN]: bot } });
      s.repo('acme', 'app');
      for (const r of ROWS) s.addPull('acme', 'app', { id: r.pr, sourceCommit: r.sha });
      return kit(
        s,
        resolved({
          type,
          address: 'https://bitbucket.org/acme/app',
          apiURL: `${s.url}/2.0`,
          token: TOKEN,
          secretValues: [TOKEN],
        }),
      );
    }
    case 'bitbucketserver': {
      const s: BbsServer = await startBitbucketServerDC({
        context: '/bitbucket',
        bearer: { [TOKEN]: { name: OWN.user, slug: OWN.user, id: 11 } },
      });
      for (const r of ROWS) s.addPull('PROJ', 'app', { id: r.pr, latestCommit: r.sha });
      return kit(
        s,
        resolved({
          type,
          address: `${s.url}/bitbucket/scm/proj/app.git`,
          token: TOKEN,
          secretValues: [TOKEN],
        }),
      );
    }
    case 'azuredevops': {
      const s: AzureServer = await startAzureServer({
        pats: { [TOKEN]: { id: 'B07B07B0-0000-4000-8000-000000000001', displayName: 'pko bot' } },
      });
      s.repo('acme', 'Platform', 'app');
      for (const r of ROWS)
        s.addPull('acme', 'Platform', 'app', { pullRequestId: r.pr, sourceCommit: r.sha });
      return kit(
        s,
        resolved({
          type,
          address: `${s.url}/acme/Platform/_git/app`,
          token: TOKEN,
          secretValues: [TOKEN],
        }),
      );
    }
    case 'slack': {
      const s = await startSlackServer({ token: TOKEN });
      s.addChannel('deploys');
      return kit(
        s,
        resolved({
          type,
          address: s.postMessageURL,
          token: TOKEN,
          channel: 'deploys',
          secretValues: [TOKEN],
        }),
      );
    }
    case 'msteams': {
      const s = await startTeamsServer();
      return kit(
        s,
        resolved({ type, address: s.workflowURL, addressFromSecret: true, secretValues: [s.workflowURL] }),
      );
    }
    case 'discord': {
      const s = await startDiscordServer();
      return kit(
        s,
        resolved({ type, address: s.webhookURL, addressFromSecret: true, secretValues: [s.webhookURL] }),
      );
    }
    case 'googlechat': {
      const s = await startGoogleChatServer();
      s.quota(false);
      return kit(
        s,
        resolved({ type, address: s.webhookURL, addressFromSecret: true, secretValues: [s.webhookURL] }),
      );
    }
    case 'generic':
    case 'generic-hmac': {
      const s = await startReceiver();
      return kit(
        s,
        resolved({
          type,
          address: `${s.url}/hook`,
          ...(type === 'generic-hmac'
            ? { token: 'hmac-key-0123456789', secretValues: ['hmac-key-0123456789'] }
            : {}),
        }),
      );
    }
  }
}

/** A target whose server logs every request with its body: what one row's send wrote. */
function kit(
  s: { requests: { method: string; body: string }[]; close(): Promise<void> },
  provider: ResolvedProvider,
): Target {
  const from = new Map<number, number>();
  return {
    provider,
    before: (r) => from.set(r.pr, s.requests.length),
    received: (r) => writes(s.requests.slice(from.get(r.pr) ?? 0)),
    close: () => s.close(),
  };
}

// ---------------------------------------------------------------------------------------------
// What a reader sees

/** Every string in a body (JSON bodies: every string value; anything else: the text). */
function strings(body: string): string[] {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return [body];
  }
  const out: string[] = [];
  const walk = (x: unknown): void => {
    if (typeof x === 'string') out.push(x);
    else if (Array.isArray(x)) x.forEach(walk);
    else if (x !== null && typeof x === 'object') Object.values(x).forEach(walk);
  };
  walk(v);
  return out;
}

/** The text as shown: markup escapes (character references, backslashes, zero-width spaces, `<br>`) undone. */
function shown(text: string): string {
  return text
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/<br>/g, '\n')
    .replace(/\\([^\w\s])/g, '$1')
    .replace(/[\u200b\u00ad]/g, '');
}

// ---------------------------------------------------------------------------------------------

const templates = ((): TemplateSet => {
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  return r.set;
})();

/** What the templates of `type` are: the built-ins it renders (the message alone for chat and webhooks). */
const USES = (type: ProviderType): string =>
  isGitProviderType(type)
    ? 'commitStatusDescription + commitStatusContext + pullRequestComment'
    : ['msteams', 'discord', 'googlechat'].includes(type)
      ? `message.${type}`
      : 'message';

describe('R21/R22: recorded agent logs × every provider type × its built-in templates', () => {
  const events = new Map<number, NotificationEvent>();
  const sent = new Map<string, string[]>();
  const targets: Target[] = [];

  beforeAll(async () => {
    for (const row of ROWS) events.set(row.pr, await enriched(row));
    for (const type of PROVIDER_TYPES) {
      const t = await target(type);
      targets.push(t);
      for (const row of ROWS) {
        const ev = events.get(row.pr);
        if (ev === undefined) throw new Error('no event');
        // The Sender's render (src/delivery/send.ts): the built-ins, the type's limits.
        const rendered = renderNotification(templates, ev, {
          clusterName: 'prod',
          providerType: type,
          commentsEnabled: isGitProviderType(type),
          limits: limitsFor(type),
        });
        // The Sender paces chat services (Teams: 250 ms apart; its server throttles > 4 a second).
        if (type === 'msteams') await new Promise((r) => setTimeout(r, 300));
        t.before(row);
        const n = createNotifier(
          t.provider,
          { http: new ProviderHttp(t.provider) },
          { githubWritePacing: false },
        );
        try {
          await n.send(ev, rendered);
        } finally {
          await n.close();
        }
        sent.set(`${type}/${String(row.pr)}`, t.received(row).flatMap(strings));
      }
    }
  }, 120_000);
  afterAll(async () => {
    for (const t of targets) await t.close();
  });

  const bodies = (type: ProviderType, row: Row): string[] => {
    const b = sent.get(`${type}/${String(row.pr)}`) ?? [];
    // Something was written: a status and a comment for forges, a message for the others.
    expect(b.length, `${type}: nothing was sent for ${row.name}`).toBeGreaterThanOrEqual(
      isGitProviderType(type) ? 2 : 1,
    );
    return b;
  };

  for (const type of PROVIDER_TYPES) {
    describe(`${type} (${USES(type)})`, () => {
      const [whole, ...unknown] = ROWS.filter((r) => r.kind !== 'secret' && r.kind !== 'gated');

      it(`R22: ${whole?.name ?? ''} reads its real counts`, () => {
        const b = bodies(type, whole as Row).map(shown);
        const all = b.join('\n');
        expect(all).not.toContain('change set incomplete');
        expect(all).not.toContain('change set unavailable');
        if (isGitProviderType(type)) {
          expect(b.some((x) => x.startsWith('~2 to update · Preview of stack acme/app/dev succeeded'))).toBe(
            true,
          );
          expect(all).toContain('**~2 to update**');
        } else {
          expect(all).toMatch(/Changes:(\*\*|<\/b>)? ~2\b/);
        }
      });

      for (const row of unknown) {
        it(`R22: ${row.name}: says the change set is ${row.kind}, with the reason; never "no changes"`, () => {
          const ev = events.get(row.pr);
          const changes = ev?.changes;
          // What the ChangeAttacher made of the log (the reason comes from there).
          const reason =
            row.kind === 'unavailable'
              ? (changes?.unavailable ?? '').replace(/^no change details: /, '')
              : incompleteReason(ev);
          expect(reason.length).toBeGreaterThan(10);
          const head = `change set ${row.kind}`;
          const b = bodies(type, row).map(shown);
          const all = b.join('\n');
          expect(all).not.toMatch(/no changes/i);
          expect(all).not.toMatch(/\b0 to create\b/);
          for (const text of b) {
            // A status description, bounded by the forge (GitHub 140): the reason, or its start
            // cut with `…`, then the run's own summary.
            if (text.includes('\n') || text.length > (limitsFor(type).statusDescription?.max ?? 0)) continue;
            if (!text.startsWith(head)) continue;
            const [said = ''] = text
              .replace(/^change set [a-z]+(?: \(read so far: [^)]*\))?: /, '')
              .split(' · Preview of stack acme/app/dev succeeded');
            const why = said.endsWith('…') ? said.slice(0, -1) : said;
            expect(why.length).toBeGreaterThan(40);
            expect(reason.startsWith(why), `${type}: '${text}'`).toBe(true);
          }
          if (isGitProviderType(type)) {
            const desc = b.find((x) => x.startsWith(head));
            expect(desc, `${type}: a status description starting '${head}'`).toBeDefined();
            // The reason is cut first: the run's own summary still fits.
            expect(desc).toMatch(/ · Preview of stack acme\/app\/dev succeeded$/);
            expect(all).toContain(`**⚠️ ${head}`);
          }
          expect(all).toContain(reason);
          expect(all).toContain(head);
        });
      }

      it('R22: a gated preview whose log was cut: the gate fails closed, the comment says why', () => {
        const row = ROWS.find((r) => r.kind === 'gated') as Row;
        const b = bodies(type, row).map(shown);
        const all = b.join('\n');
        expect(all).not.toMatch(/no changes/i);
        expect(all).toContain('change set incomplete: ');
        expect(all).toContain(incompleteReason(events.get(row.pr)));
        if (!isGitProviderType(type)) return;
        // Every forge's word for a failed status (github/gitea failure, gitlab/azure failed, bitbucket FAILED).
        expect(b.some((x) => /^(failure|failed|FAILED)$/.test(x))).toBe(true);
        expect(b.some((x) => /^(success|SUCCESSFUL|succeeded)$/.test(x))).toBe(false);
        expect(b.some((x) => x.startsWith('gate: change set '))).toBe(true);
        expect(all).toContain('**🚧 gate: change set ');
        expect(all).toContain('**⚠️ change set incomplete: ');
      });

      it('R21: a value the log marks "Secret":true is in no outbound body; [secret] instead', () => {
        const row = ROWS.find((r) => r.kind === 'secret') as Row;
        const b = bodies(type, row);
        const all = b.join('\n');
        expect(shown(all)).not.toContain(SECRET);
        expect(all).not.toContain(SECRET);
        expect(shown(all)).toContain('[secret]');
      });
    });
  }
});

/** Why the event's change set is incomplete, in the words of the template view (`changes.incomplete`). */
function incompleteReason(ev: NotificationEvent | undefined): string {
  if (ev === undefined) return '';
  return templateContext(ev, { clusterName: 'prod', providerType: 'github' }).changes?.incomplete ?? '';
}
