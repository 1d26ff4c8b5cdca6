/**
 * Classified answers end to end on the real control plane (cases N02 and N11, docs/cases.md):
 * what a forge's answer means shows where users look — the Provider's `Ready` condition and the
 * Alert's `lastDelivery` — through the in-process controller and the forge contract servers.
 */
import { describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startAzureServer } from './azuredevops/server.ts';
import { startGitHubServer } from './github/server.ts';

const SHA = '6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3';
const WAIT_MS = 20_000;

async function lastDelivery(
  obj: Objects,
  alert: string,
  match: (d: { result: string; reason?: string; message?: string }) => boolean,
): Promise<{ result: string; reason?: string; message?: string }> {
  return waitFor(async () => (await obj.get('alerts', alert)).status?.lastDelivery?.find(match), {
    timeoutMs: WAIT_MS,
    what: `Alert ${alert} lastDelivery`,
  });
}

describe('answers classified, seen in kubectl', () => {
  it('N02: github answers the comment POST with 403 "issue is locked", the status POST succeeds: status posted, the comment failure final and said, the Provider stays Ready=True', async () => {
    const gh = await startGitHubServer({
      repos: ['acme/app'],
      tokens: { ghp_n02Token0123456789: 'pko-bot' },
    });
    gh.addPullRequest('acme/app', { number: 9, headSha: SHA });
    gh.lockIssue('acme/app', 9);
    const ns = await createTestNamespace('n02');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, { flags: ['--cluster-name=e2e'] });
    try {
      await obj.secret('gh', { token: 'ghp_n02Token0123456789' });
      await obj.provider('gh', {
        type: 'github',
        address: 'https://github.com/acme/app',
        apiURL: gh.apiBase,
        secretRef: { name: 'gh' },
      });
      await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
      await obj.waitReady('alerts', 'gh');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack(
        'app',
        { git: { projectRepo: 'https://github.com/acme/app.git', branch: 'main' } },
        // A preview Stack: its comment goes on the pull request whose head is the commit.
        { stack: 'acme/app/dev', preview: true },
      );
      const run = await sim.startRun('app', { type: 'preview', commit: SHA });
      await sim.finishRun(run, 'failed');

      await waitFor(() => Promise.resolve(gh.statuses('acme/app', SHA).some((s) => s.state === 'failure')), {
        timeoutMs: WAIT_MS,
        what: 'the failure status',
      });
      const failed = await lastDelivery(obj, 'gh', (d) => d.result === 'Failed');
      expect(failed.message).toMatch(/issue is locked/);
      expect(failed.message).toMatch(/commit status is set/);
      expect(gh.comments('acme/app', 9)).toEqual([]);
      // The comment POST was tried once per event, never retried (final).
      const commentPosts = gh.log.filter((e) => e.operationId === 'issues/create-comment');
      expect(commentPosts.every((e) => e.status === 403)).toBe(true);
      // The Provider's credentials are fine: it stays Ready.
      const ready = (await obj.get('providers', 'gh')).status?.conditions?.find((c) => c.type === 'Ready');
      expect([ready?.status, ready?.reason]).toEqual([
        'True',
        expect.not.stringMatching(/AuthenticationFailed/),
      ]);
      expect(gh.violations).toEqual([]);
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 90_000);

  it('N11: azuredevops answers every call with 203 and a sign-in page once it is Ready: deliveries fail as authentication failures and the Provider shows Ready=False/AuthenticationFailed', async () => {
    const PAT = 'azure-pat-n11-0123456789';
    const BOT = { id: 'b0t-0000-0000-0000-000000000001', displayName: 'pko-bot' };
    const az = await startAzureServer({ pats: { [PAT]: BOT } });
    az.repo('acme', 'Platform', 'app');
    const ns = await createTestNamespace('n11');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, { flags: ['--cluster-name=e2e'] });
    try {
      await obj.secret('az', { token: PAT });
      await obj.provider('az', {
        type: 'azuredevops',
        address: 'https://dev.azure.com/acme/Platform/_git/app',
        apiURL: `${az.url}/acme`,
        secretRef: { name: 'az' },
        pullRequestComment: { enabled: false },
      });
      await obj.waitReady('providers', 'az');
      await obj.alert('az', { providerRef: { name: 'az' }, eventSources: [{ kind: 'Stack' }] });
      await obj.waitReady('alerts', 'az');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack(
        'app',
        { git: { projectRepo: 'https://dev.azure.com/acme/Platform/_git/app', branch: 'main' } },
        { stack: 'acme/app/dev' },
      );
      const run = await sim.startRun('app', { type: 'up', commit: SHA });
      await waitFor(
        () => Promise.resolve((az.repo('acme', 'Platform', 'app').statuses.get(SHA) ?? []).length > 0),
        {
          timeoutMs: WAIT_MS,
          what: 'the pending status while the PAT works',
        },
      );

      az.expire(PAT);
      await sim.finishRun(run, 'succeeded');
      const cond = await obj.waitReady('providers', 'az', 'False', 'AuthenticationFailed');
      expect(cond.message).toMatch(/sign-in page/);
      expect(cond.message).not.toContain(PAT);
      const failed = await lastDelivery(obj, 'az', (d) => d.result === 'Failed');
      expect(failed.message).toMatch(/203 with a sign-in page/);
      const answered = az.requests.filter((r) => r.status === 203);
      expect(answered.length).toBeGreaterThan(0);
    } finally {
      await ctl.stop();
      await az.close();
    }
  }, 90_000);
});
