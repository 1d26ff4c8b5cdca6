/**
 * Leader fencing inside the preview forge (src/forge/preview.ts): a notice or a pending-status
 * resolution asks `mayWrite()` right before its write, so a job that started while the Lease was
 * held writes nothing once it is lost (the reads before it still happen). GitLab contract server.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { FORGES } from '../../src/forge/registry.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { startGitLabServer } from './gitlab/server.ts';
import { provider } from './helpers.ts';
import { sampleEvent } from '../notifier/fixtures.ts';

const sha = (c: string): string => c.repeat(40);

describe('preview forge writes are fenced (mayWrite asked right before each write)', () => {
  it('a notice and a pending-status resolution are not written while mayWrite() is false, and are once it is true', async () => {
    const BOT = { id: 7, username: 'pko-bot' };
    const gl = await startGitLabServer({ tokens: { 'glpat-fence-token': BOT } });
    onTestFinished(() => gl.close());
    gl.project('acme/app');
    const mr = gl.addMR('acme/app', { iid: 3, sha: sha('1') });
    gl.addStatus('acme/app', { sha: sha('1'), name: 'pko/e2e/ns/app-pr-3', status: 'running' });
    const p = provider({ type: 'gitlab', address: `${gl.url}/acme`, token: 'glpat-fence-token' });
    const forge = FORGES.gitlab.previews?.(p, { http: new ProviderHttp(p) });
    if (forge === undefined) throw new Error('gitlab has previews');
    onTestFinished(() => forge.close());
    const repoURL = `${gl.url}/acme/app.git`;
    const pull = { number: 3, webURL: `${gl.url}/acme/app/-/merge_requests/3` };
    let holds = false;
    const mayWrite = (): boolean => holds;

    await expect(
      forge.upsertNotice(repoURL, pull, '<!-- m -->', '<!-- m -->\nhello\n', undefined, mayWrite),
    ).rejects.toMatchObject({ code: 'NOT_LEADER' });
    await expect(
      forge.resolvePending(
        repoURL,
        sha('1'),
        'pko/e2e/ns/app-pr-3',
        'preview cancelled',
        undefined,
        mayWrite,
      ),
    ).rejects.toMatchObject({ code: 'NOT_LEADER' });
    expect(gl.writes()).toEqual([]);
    expect(mr.notes).toEqual([]);

    holds = true;
    await forge.upsertNotice(repoURL, pull, '<!-- m -->', '<!-- m -->\nhello\n', undefined, mayWrite);
    expect(
      await forge.resolvePending(
        repoURL,
        sha('1'),
        'pko/e2e/ns/app-pr-3',
        'preview cancelled',
        undefined,
        mayWrite,
      ),
    ).toBe(true);
    expect(mr.notes.map((n) => n.body)).toEqual(['<!-- m -->\nhello\n']);
    expect(gl.project('acme/app').statuses.at(-1)?.status).toBe('failed');
  });
});

describe('status resolutions take the deliveries’ lock of that status (N18)', () => {
  it('a resolution and a notifier write to the same status share one lock key, so they never interleave', async () => {
    const BOT = { id: 7, username: 'pko-bot' };
    const gl = await startGitLabServer({ tokens: { 'glpat-lock-token': BOT } });
    onTestFinished(() => gl.close());
    gl.project('acme/app');
    gl.addStatus('acme/app', { sha: sha('2'), name: 'pko/e2e/ns/app-pr-4', status: 'running' });
    const p = provider({ type: 'gitlab', address: `${gl.url}/acme`, token: 'glpat-lock-token' });
    const keys: string[] = [];
    const serialize = <T>(key: string, fn: () => Promise<T>): Promise<T> => {
      keys.push(key);
      return fn();
    };
    const forge = FORGES.gitlab.previews?.(p, { http: new ProviderHttp(p), serialize });
    const notifier = FORGES.gitlab.notifier(p, { http: new ProviderHttp(p), serialize });
    if (forge === undefined) throw new Error('gitlab has previews');
    onTestFinished(async () => {
      await forge.close();
      await notifier.close();
    });
    await forge.resolvePending(`${gl.url}/acme/app.git`, sha('2'), 'pko/e2e/ns/app-pr-4', 'superseded by x');
    await notifier.send(
      {
        ...sampleEvent,
        metadata: { commit: sha('2'), repository: `${gl.url}/acme/app.git`, branch: 'main' },
      },
      {
        message: 'm',
        commitStatus: {
          state: 'success',
          context: 'pko/e2e/ns/app-pr-4',
          description: 'd',
          targetURL: undefined,
        },
      },
    );
    expect(keys).toHaveLength(2);
    expect(keys[0]?.startsWith('status\u0000')).toBe(true);
    expect(keys[1]).toBe(keys[0]);
  });
});
