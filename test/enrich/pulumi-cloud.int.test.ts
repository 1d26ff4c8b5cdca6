/**
 * Change sets from Pulumi Cloud on the pull request, on the real control plane. PKO v1: a
 * PKO v1-shaped Stack (no Update, no workspace pod) written by the PKO simulator, whose
 * `lastUpdate.permalink` names update 1 of `acme/app/dev` and whose backend is the Pulumi Cloud
 * contract server (test/support/pulumi-cloud.ts: a self-hosted Pulumi Cloud's API URL), with its
 * access token in the Secret its `envRefs.PULUMI_ACCESS_TOKEN` names; the controller in process,
 * delivering to the GitHub contract server (test/forge/github/server.ts). PKO v2: a preview whose
 * workspace log cannot be read (the controller has no `pods/log` right in the namespace) gets its
 * change set from Pulumi Cloud, read by the preview id of its permalink, and the comment says no
 * more about the log.
 */
import { describe, expect, it } from 'vitest';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { Objects, startInProcess } from '../support/controller.ts';
import { PkoSimulator } from '../support/pko.ts';
import { PulumiCloudServer, step } from '../support/pulumi-cloud.ts';
import { startGitHubServer } from '../forge/github/server.ts';

const admin = kubeConfig('admin');
const SHA = '3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d';
const TOKEN = 'pul-int0123456789abcdef0123456789abcdef012';
/** A value of a Secret the Stack references that a provider printed in a plain property. */
const LEAKED = 'v1-hunter2-database-password';

describe('change sets from Pulumi Cloud on the pull request', () => {
  it('PKO v1: the comment shows the counts, resources and property lines read from Pulumi Cloud; no Secret value', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_cloudToken0123456789: 'pko-bot' },
    });
    const cloud = await PulumiCloudServer.start([TOKEN]);
    try {
      const { version } = cloud.addUpdate('acme/app/dev', {
        kind: 'update',
        result: 'succeeded',
        resourceChanges: { create: 1, update: 1, same: 3 },
        events: [
          { preludeEvent: { config: {} } },
          {
            resourcePreEvent: {
              metadata: step('update', 'urn:pulumi:dev::app::aws:s3/bucket:Bucket::logs', {
                old: { acl: 'private', password: 'old' },
                new: { acl: 'public-read', password: LEAKED },
                detailedDiff: {
                  acl: { diffKind: 'update', inputDiff: true },
                  password: { diffKind: 'update', inputDiff: true },
                },
              }),
            },
          },
          {
            resourcePreEvent: {
              metadata: step('create', 'urn:pulumi:dev::app::aws:s3/bucket:Bucket::assets', {
                new: { acl: 'private' },
              }),
            },
          },
          { summaryEvent: { resourceChanges: { create: 1, update: 1, same: 3 }, isPreview: false } },
        ],
      });
      gh.addPullRequest('acme/app', { number: 7, headSha: SHA });
      const ns = await createTestNamespace('cloud-v1');
      const obj = new Objects(ns);
      const ctl = await startInProcess(ns, { flags: ['--cluster-name=cloud'] });
      try {
        await obj.secret('gh', { token: 'ghp_cloudToken0123456789\n' });
        await obj.secret('pulumi', { accessToken: TOKEN });
        await obj.secret('app-secrets', { DB_PASSWORD: LEAKED });
        await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
        // A deploy run comments only on a pull request it names: the Alert names #7.
        await obj.alert('gh', {
          providerRef: { name: 'gh' },
          eventSources: [{ kind: 'Stack' }],
          eventMetadata: { pullRequest: '7' },
        });
        await obj.waitReady('alerts', 'gh');
        const sim = new PkoSimulator(admin, ns, { version: 'v1' });
        await sim.createStack(
          'app',
          { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } },
          {
            stack: 'acme/app/dev',
            spec: {
              backend: cloud.origin,
              envRefs: {
                PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi', key: 'accessToken' } },
                DB_PASSWORD: { type: 'Secret', secret: { name: 'app-secrets', key: 'DB_PASSWORD' } },
              },
            },
          },
        );
        await sim.v1Run('app', {
          commit: SHA,
          state: 'succeeded',
          permalink: `https://pulumi.example.com/acme/app/dev/updates/${String(version)}`,
        });
        const comment = await waitFor(
          () =>
            Promise.resolve(
              gh
                .comments('acme/app', 7)
                .filter((c) => c.login === 'pko-bot')
                .find((c) => c.body.includes('succeeded')),
            ),
          { timeoutMs: 30_000, what: 'the sticky comment with the result' },
        );
        const body = comment.body;
        expect(body).toContain('**+1 created, ~1 updated**');
        expect(body).toContain('- `assets` (`aws:s3/bucket:Bucket`)');
        expect(body).toContain('- `logs` (`aws:s3/bucket:Bucket`)');
        expect(body).toContain('~ acl: "private" => "public-read"');
        expect(body).toContain('~ password: "old" => "[redacted]"');
        expect(body).toContain(SHA);
        expect(body).not.toContain(LEAKED);
        expect(body).not.toContain(TOKEN);
        await waitFor(
          () =>
            Promise.resolve(
              gh
                .statuses('acme/app', SHA)
                .some((s) => s.description?.startsWith('+1 created, ~1 updated · ')),
            ),
          { timeoutMs: 30_000, what: 'the status with the counts' },
        );
        // The documented calls, with the Stack's own token.
        expect(cloud.requests.map((r) => r.path)).toContain('/api/stacks/acme/app/dev/updates');
        expect(cloud.requests.every((r) => r.authorization === `token ${TOKEN}`)).toBe(true);
        expect(cloud.violations).toEqual([]);
        expect(gh.violations).toEqual([]);
      } finally {
        await ctl.stop();
      }
    } finally {
      await cloud.close();
      await gh.close();
    }
  }, 120_000);

  it('PKO v2, the workspace log not readable: the preview from Pulumi Cloud, by its id', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app'],
      tokens: { ghp_cloudToken0123456789: 'pko-bot' },
    });
    const cloud = await PulumiCloudServer.start([TOKEN]);
    try {
      const id = cloud.addPreview('acme/app/dev', {
        result: 'succeeded',
        events: [
          {
            resourcePreEvent: {
              metadata: step('replace', 'urn:pulumi:dev::app::aws:rds/instance:Instance::db', {
                old: { engine: 'postgres' },
                new: { engine: 'mysql' },
                detailedDiff: { engine: { diffKind: 'update-replace', inputDiff: true } },
              }),
              planning: true,
            },
          },
          { summaryEvent: { resourceChanges: { replace: 1, same: 4 }, isPreview: true } },
        ],
      });
      gh.addPullRequest('acme/app', { number: 7, headSha: SHA });
      const ns = await createTestNamespace('cloud-v2');
      const obj = new Objects(ns);
      const ctl = await startInProcess(ns, { flags: ['--cluster-name=cloud'] });
      try {
        await obj.secret('gh', { token: 'ghp_cloudToken0123456789\n' });
        await obj.secret('pulumi', { accessToken: TOKEN });
        await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
        await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
        await obj.waitReady('alerts', 'gh');
        const sim = new PkoSimulator(admin, ns, { version: 'v2' });
        await sim.createStack(
          'app',
          { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } },
          {
            stack: 'acme/app/dev',
            preview: true,
            spec: {
              backend: cloud.origin,
              envRefs: {
                PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi', key: 'accessToken' } },
              },
            },
          },
        );
        const run = await sim.startRun('app', { type: 'preview', commit: SHA });
        await sim.finishRun(run, 'succeeded', {
          permalink: `https://app.pulumi.com/acme/app/dev/previews/${id}`,
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
        expect(comment.body).toContain('**+-1 to replace**');
        expect(comment.body).toContain('- `db` (`aws:rds/instance:Instance`)');
        expect(comment.body).toContain('~ engine: "postgres" => "mysql" (forces replacement)');
        expect(comment.body).not.toContain('no change details');
        expect(comment.body).not.toContain(TOKEN);
        expect(cloud.requests.map((r) => r.path)).toEqual([`/api/stacks/acme/app/dev/preview/${id}/events`]);
        expect(cloud.violations).toEqual([]);
      } finally {
        await ctl.stop();
      }
    } finally {
      await cloud.close();
      await gh.close();
    }
  }, 120_000);
});
