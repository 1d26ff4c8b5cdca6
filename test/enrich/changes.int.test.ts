/**
 * A finished PKO v2 run's change set on the pull request, on the real control plane: a Stack and
 * its Updates written by the PKO simulator, the workspace pod owned as PKO v2.9.0 owns it on a
 * Node served by the kubelet stand-in (test/support/kubelet-standin.ts) holding a recording of
 * the real agent's log (test/fixtures/agent-logs/08-large.log, its preview), the controller as
 * the test user `controller` bound to the shipped ClusterRole (config/rbac) and — in one
 * namespace only — to the shipped workspace-logs ClusterRole (config/workspace-logs), delivering
 * to the GitHub contract server (test/forge/github/server.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { KubeletStandIn, placeWorkspacePod } from '../support/kubelet-standin.ts';
import { PkoSimulator } from '../support/pko.ts';
import {
  WORKSPACE_LOGS_ROLE,
  grantWorkspaceLogs,
  installWorkspaceLogs,
  playPreviewRun,
  recordedPreview,
} from '../support/workspace-logs.ts';
import { startGitHubServer } from '../forge/github/server.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';

const admin = kubeConfig('admin');
const SHA = '7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b';
/** A value of a Secret the Stack references that the program printed in a plain property. */
const LEAKED = 'v15-hunter2-database-password';
let kubelet: KubeletStandIn;

/**
 * The preview run of the recording: 30 Values created, `a` updated (tags added). The program
 * printed a Secret's value in a plain property: it must never be posted.
 */
function recordedLeak(): string[] {
  return recordedPreview('08-large.log').map((l) => l.replace('"v15"', `"${LEAKED}"`));
}

beforeAll(async () => {
  await installWorkspaceLogs();
  kubelet = await KubeletStandIn.start({ kubeConfig: admin });
}, 60_000);

afterAll(async () => {
  await kubelet.close();
});

/** Deletes pod `pod` at once and waits (at most 20 s) until it is gone. */
async function deletePod(ns: string, pod: string): Promise<void> {
  const podPath = objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns, name: pod });
  await kubeRequest(admin, { method: 'DELETE', path: podPath, body: { gracePeriodSeconds: 0 } });
  await waitFor(
    async () => {
      try {
        await kubeRequest(admin, { method: 'GET', path: podPath });
        return false;
      } catch {
        return true;
      }
    },
    { timeoutMs: 20_000, what: 'the workspace pod deleted' },
  );
}

type GitHub = Awaited<ReturnType<typeof startGitHubServer>>;

/** Runs `fn` with a GitHub contract server holding pull request 7 of acme/app at `SHA`; closes it after. */
async function withPullRequest(fn: (gh: GitHub) => Promise<void>): Promise<void> {
  const gh = await startGitHubServer({
    basePath: '/api/v3',
    repos: ['acme/app'],
    tokens: { ghp_changesToken0123456789: 'pko-bot' },
  });
  try {
    gh.addPullRequest('acme/app', { number: 7, headSha: SHA });
    await fn(gh);
  } finally {
    await gh.close();
  }
}

/**
 * A preview of `SHA` on a PKO v2 Stack whose workspace pod logged the recorded preview; returns
 * our sticky comment on pull request 7 and the commit's statuses once the result is posted.
 */
async function previewOnPullRequest(
  ns: string,
  gh: GitHub,
  o: { follow?: boolean; deletePod?: boolean } = {},
): Promise<{ body: string; descriptions: string[] }> {
  const obj = new Objects(ns);
  const ctl = await startInProcess(ns, { flags: ['--cluster-name=changes'] });
  try {
    await obj.secret('gh', { token: 'ghp_changesToken0123456789\n' });
    await obj.secret('app-secrets', { DB_PASSWORD: LEAKED });
    await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
    await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
    await obj.waitReady('alerts', 'gh');
    const sim = new PkoSimulator(admin, ns, { version: 'v2' });
    const stack = await sim.createStack(
      'app',
      { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } },
      {
        stack: 'acme/app/dev',
        spec: {
          envRefs: { DB_PASSWORD: { type: 'Secret', secret: { name: 'app-secrets', key: 'DB_PASSWORD' } } },
        },
      },
    );
    const pod = await placeWorkspacePod(admin, ns, stack, { nodeName: kubelet.nodeName });
    // The agent writes the run's lines (to every follower too).
    await playPreviewRun(sim, kubelet, {
      stack: 'app',
      pod,
      commit: SHA,
      lines: recordedLeak(),
      started: async () => {
        // The controller follows the log from the run's start (PreviewStarted) on.
        if (o.follow === true)
          await waitFor(
            () =>
              Promise.resolve(
                kubelet.requests.some(
                  (r) => r.namespace === ns && r.pod === pod && r.query.follow === 'true',
                ),
              ),
            { timeoutMs: 20_000, what: 'a follow of the workspace log' },
          );
      },
      written: async () => {
        // workspaceReclaimPolicy: Delete — PKO deletes the workspace right after a successful run.
        if (o.deletePod === true) await deletePod(ns, pod);
      },
    });
    const comment = await waitFor(
      () =>
        Promise.resolve(
          gh
            .comments('acme/app', 7)
            .filter((c) => c.login === 'pko-bot')
            .find((c) => c.body.includes('succeeded')),
        ),
      { timeoutMs: 30_000, what: 'the sticky comment with the preview result' },
    );
    await waitFor(() => Promise.resolve(gh.statuses('acme/app', SHA).some((s) => s.state === 'success')), {
      timeoutMs: 30_000,
      what: 'the success status',
    });
    return {
      body: comment.body,
      descriptions: gh.statuses('acme/app', SHA).map((s) => s.description ?? ''),
    };
  } finally {
    await ctl.stop();
  }
}

describe('change sets on the pull request (PKO v2 workspace log)', () => {
  it('with the workspace-logs permission: counts, resource names and property lines; no Secret value', async () => {
    await withPullRequest(async (gh) => {
      const ns = await createTestNamespace('changes-ok');
      await grantWorkspaceLogs(ns);
      const { body, descriptions } = await previewOnPullRequest(ns, gh);
      expect(body).toContain('**+30 to create, ~1 to update**');
      expect(body).toContain('**+30 to create**');
      expect(body).toContain('**~1 to update**');
      for (const name of ['n01', 'n30', 'a'])
        expect(body).toContain(`- \`${name}\` (\`pkotest:index:Value\`)`);
      expect(body).toContain('<details><summary>Property changes</summary>');
      expect(body).toContain('+ tag001: "value-001"');
      expect(body).toContain(SHA);
      expect(body).not.toContain(LEAKED);
      expect(body).toContain('value: "[redacted]"');
      expect(descriptions.find((d) => d.startsWith('+30 to create, ~1 to update · '))).toBeDefined();
      expect(descriptions.every((d) => Array.from(d).length <= 140)).toBe(true);
      expect(gh.violations).toEqual([]);
    });
  }, 120_000);

  it('without it: the comment says no change details are available and which permission to grant', async () => {
    await withPullRequest(async (gh) => {
      const ns = await createTestNamespace('changes-denied');
      const { body, descriptions } = await previewOnPullRequest(ns, gh);
      const shown = body.replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)));
      // R22: said as unavailable, with the reason, in the comment and the status.
      expect(shown).toContain(
        `**⚠️ change set unavailable: cannot read the workspace log of Stack ${ns}/app`,
      );
      expect(shown).toContain(
        `may not get pods in namespace ${ns}; grant the ClusterRole ${WORKSPACE_LOGS_ROLE}`,
      );
      expect(body).not.toContain('Property changes');
      expect(
        descriptions.some(
          (d) =>
            d.startsWith('change set unavailable: cannot read the workspace log') &&
            d.endsWith(' · Preview of stack acme/app/dev succeeded'),
        ),
      ).toBe(true);
      expect(kubelet.requests.filter((r) => r.namespace === ns)).toEqual([]);
      // And a Warning Event on the Stack says the same to the admin.
      const ev = await waitFor(
        async () => {
          const list = await kubeRequest<{
            items: { reason?: string; type?: string; message?: string; involvedObject?: { name?: string } }[];
          }>(admin, {
            method: 'GET',
            path: objectPath({ group: '', version: 'v1', plural: 'events', namespace: ns }),
          });
          return list.items.find((e) => e.reason === 'ChangeSetUnavailable');
        },
        { timeoutMs: 20_000, what: 'the ChangeSetUnavailable Event' },
      );
      expect(ev).toMatchObject({ type: 'Warning', involvedObject: { name: 'app' } });
      expect(ev.message).toContain(`grant the ClusterRole ${WORKSPACE_LOGS_ROLE}`);
    });
  }, 120_000);

  it('workspaceReclaimPolicy: Delete: the log followed from the start still gives the change set', async () => {
    await withPullRequest(async (gh) => {
      const ns = await createTestNamespace('changes-follow');
      await grantWorkspaceLogs(ns);
      const { body, descriptions } = await previewOnPullRequest(ns, gh, { follow: true, deletePod: true });
      expect(body).toContain('**+30 to create, ~1 to update**');
      expect(body).toContain('+ tag001: "value-001"');
      expect(body).not.toContain(LEAKED);
      expect(descriptions.find((d) => d.startsWith('+30 to create, ~1 to update · '))).toBeDefined();
    });
  }, 120_000);
});
