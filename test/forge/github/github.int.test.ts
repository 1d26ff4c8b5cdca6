/**
 * GitHub end to end on the real control plane: PKO runs written as PKO does → the controller →
 * the GitHub contract server (every request checked against GitHub's OpenAPI description).
 */
import { describe, expect, it } from 'vitest';
import { kubeConfig, createTestNamespace, waitFor } from '../../support/cluster.ts';
import { PkoSimulator } from '../../support/pko.ts';
import { Objects, startInProcess } from '../../support/controller.ts';
import { startGitHubServer } from './server.ts';

const SHA = '4e3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a291';

describe('github end to end', () => {
  it("preview then update on a commit: status sequence on the commit; one sticky comment on its pull request, the preview's; the update costs its two status writes and nothing else", async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_e2eToken0123456789: 'pko-bot' },
    });
    gh.addPullRequest('acme/app', { number: 7, headSha: SHA });
    gh.addComment('acme/app', 7, { body: 'LGTM', login: 'octocat' });
    const ns = await createTestNamespace('gh-e2e');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, { flags: ['--cluster-name=e2e'] });
    try {
      await obj.secret('gh', { token: 'ghp_e2eToken0123456789\n' });
      await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
      await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
      await obj.waitReady('alerts', 'gh');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack(
        'app',
        { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } },
        { stack: 'acme/app/dev' },
      );

      const states = (): string[] =>
        gh
          .statuses('acme/app', SHA)
          .map((s) => s.state)
          .reverse();
      /** Runs `type` on SHA to success, its result delivered; returns the GitHub calls it made. */
      const step = async (type: 'preview' | 'up'): Promise<(string | undefined)[]> => {
        const from = gh.apiCalls().length;
        const n = states().length;
        const run = await sim.startRun('app', { type, commit: SHA });
        await waitFor(() => Promise.resolve(states().length > n), {
          timeoutMs: 20_000,
          what: `pending status for ${type}`,
        });
        await sim.finishRun(run, 'succeeded');
        await waitFor(() => Promise.resolve(states().at(-1) === 'success'), {
          timeoutMs: 20_000,
          what: `success status for ${type}`,
        });
        // The run's send is over (its comment step included).
        const reason = type === 'preview' ? 'PreviewSucceeded' : 'UpdateSucceeded';
        await waitFor(
          async () => {
            const d = (await obj.get('alerts', 'gh')).status?.lastDelivery?.[0];
            return d?.message?.includes(reason) === true && d.result === 'Delivered';
          },
          { timeoutMs: 20_000, what: `${reason} delivered` },
        );
        return gh
          .apiCalls()
          .slice(from)
          .map((e) => e.operationId);
      };
      const preview = await step('preview');
      expect(preview).toContain('repos/list-pull-requests-associated-with-commit');
      // A deploy run writes no comment on the open pull request whose head is its commit, and
      // does not look for one: one call per new status (the context was listed by the preview).
      expect(await step('up')).toEqual(['repos/create-commit-status', 'repos/create-commit-status']);

      const statuses = gh.statuses('acme/app', SHA).reverse();
      expect(statuses.map((s) => s.state)).toEqual(['pending', 'success', 'pending', 'success']);
      expect(new Set(statuses.map((s) => s.context)).size).toBe(1);
      expect(statuses[0]!.context).toContain(ns);
      expect(statuses[0]!.context).toContain('e2e');
      expect(statuses.every((s) => Array.from(s.description ?? '').length <= 140)).toBe(true);
      expect(statuses[3]!.target_url).toMatch(/^https:\/\/app\.pulumi\.com\/acme\/app\/dev\/updates\/\d+$/);

      const ours = await waitFor(
        () =>
          Promise.resolve(
            gh
              .comments('acme/app', 7)
              .filter((c) => c.login === 'pko-bot')
              .find((c) => c.body.includes('Preview of stack acme/app/dev succeeded')),
          ),
        { timeoutMs: 20_000, what: 'sticky comment showing the preview result' },
      );
      expect(gh.comments('acme/app', 7).filter((c) => c.login === 'pko-bot')).toHaveLength(1);
      expect(ours.body).toContain(SHA.slice(0, 7));
      expect(gh.comments('acme/app', 7).find((c) => c.login === 'octocat')?.edits).toBe(0);

      // F22: failures until PKO stalls: the commit ends at failure, never left pending.
      const SHA2 = '5f4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2';
      for (let i = 0; i < 3; i++) {
        const run = await sim.startRun('app', { type: 'up', commit: SHA2 });
        await sim.finishRun(run, 'failed');
      }
      await sim.stall('app', 'UpdateFailed');
      await waitFor(() => Promise.resolve(gh.statuses('acme/app', SHA2)[0]?.state === 'failure'), {
        timeoutMs: 30_000,
        what: 'failure status on the stalled commit',
      });
      await new Promise((r) => setTimeout(r, 1500));
      expect(gh.statuses('acme/app', SHA2)[0]?.state).toBe('failure');

      expect(gh.violations).toEqual([]);
      expect(gh.log.every((r) => r.path.startsWith('/api/v3/'))).toBe(true);
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 90_000);

  it('N17: a 50 MB pull-request listing: the status is posted; the comment step fails with a clear reason in lastDelivery and a Warning Event', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_n17Token0123456789: 'pko-bot' },
    });
    const sha = '6a5b4c3d2e1f09876a5b4c3d2e1f09876a5b4c3d';
    gh.addPullRequest('acme/app', { number: 8, headSha: sha });
    gh.padAnswers({ operationId: 'repos/list-pull-requests-associated-with-commit', toBytes: 50_000_000 });
    const ns = await createTestNamespace('gh-n17');
    const obj = new Objects(ns);
    const ctl = await startInProcess(ns, { flags: ['--cluster-name=e2e'] });
    try {
      await obj.secret('gh', { token: 'ghp_n17Token0123456789' });
      await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
      await obj.alert('gh', {
        providerRef: { name: 'gh' },
        eventSources: [{ kind: 'Stack' }],
        eventReasons: ['PreviewSucceeded'],
      });
      await obj.waitReady('alerts', 'gh');
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      // A preview Stack: its comment goes on the pull request whose head is the commit.
      await sim.createStack(
        'app',
        { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } },
        { preview: true },
      );
      const run = await sim.startRun('app', { type: 'preview', commit: sha });
      await sim.finishRun(run, 'succeeded');
      const last = await waitFor(
        async () => (await obj.get('alerts', 'gh')).status?.lastDelivery?.find((d) => d.result === 'Failed'),
        { timeoutMs: 30_000, what: 'a Failed lastDelivery' },
      );
      expect(gh.statuses('acme/app', sha).map((x) => x.state)).toEqual(['success']);
      expect(last.reason).toBe('DeliveryFailed');
      expect(last.message).toMatch(
        /the commit status is set, but finding the pull requests of [0-9a-f]{40} failed: .*answered 200 with a body over 8 MiB/,
      );
      expect(last.message).not.toMatch(/no pull request/i);
      const events = await obj.core.listNamespacedEvent({
        namespace: ns,
        fieldSelector: 'involvedObject.name=gh',
      });
      expect(events.items.some((e) => e.type === 'Warning' && /body over 8 MiB/.test(e.message ?? ''))).toBe(
        true,
      );
      expect(gh.comments('acme/app', 8)).toEqual([]);
      expect(gh.violations).toEqual([]);
    } finally {
      await ctl.stop();
      await gh.close();
    }
  }, 90_000);
});
