/**
 * The preview notice queue (src/preview/notices.ts, case B12): coalescing per pull request,
 * round-robin across PullRequestPreviews, each job bounded in time, writes fenced by the Lease.
 */
import { describe, expect, it } from 'vitest';
import type { PreviewForge, PullRequestState } from '../../src/forge/types.ts';
import { createLogger } from '../../src/log.ts';
import { NoticeQueue, goneNotice, stoppedGone, type NoticeJob } from '../../src/preview/notices.ts';
import { FORGE_TIMEOUT_CEILING_MS, withTimeoutCeiling } from '../../src/preview/controller.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';

interface Call {
  repoURL: string;
  number: number;
  body: string;
  signal: AbortSignal | undefined;
  finish: (url?: string) => void;
}

/** A forge whose notice calls wait until the test finishes them (or forever). */
function heldForge(): { forge: PreviewForge; calls: Call[] } {
  const calls: Call[] = [];
  const forge: PreviewForge = {
    listOpen: () => Promise.resolve({ changed: true, pulls: [], etag: undefined }),
    association: () => Promise.resolve('NONE'),
    pullRequestState: () => Promise.resolve(undefined),
    upsertNotice: (repoURL, pull, _marker, body, signal) =>
      new Promise<string>((resolve, reject) => {
        signal?.addEventListener('abort', () => {
          reject(new Error('aborted'));
        });
        calls.push({
          repoURL,
          number: pull.number,
          body,
          signal,
          finish: (url) => {
            resolve(url ?? `${pull.webURL}#c1`);
          },
        });
      }),
    resolvePending: () => Promise.resolve(false),
    close: () => Promise.resolve(),
  };
  return { forge, calls };
}

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

function job(forge: PreviewForge, preview: string, number: number, body: string): NoticeJob {
  return {
    kind: 'notice',
    preview,
    forge,
    repoURL: `https://forge.example/${preview}.git`,
    number,
    webURL: `https://forge.example/pr/${String(number)}`,
    marker: '<!-- m -->',
    body,
  };
}

const logger = createLogger({ level: 'silent' });

describe('NoticeQueue', () => {
  it('says which forge clients its queued and running jobs use, and when a job leaves', async () => {
    const a = heldForge();
    const b = heldForge();
    let released = 0;
    const q = new NoticeQueue({
      logger,
      timeoutMs: 60_000,
      concurrency: 4,
      onRelease: () => {
        released++;
      },
    });
    q.add(job(a.forge, 'x/p', 1, 'one')); // runs
    q.add(job(a.forge, 'x/p', 2, 'two')); // waits: one job per client at a time
    await tick();
    expect([q.uses(a.forge), q.uses(b.forge)]).toEqual([true, false]);
    a.calls[0]?.finish();
    await tick();
    expect(released).toBe(1);
    expect(q.uses(a.forge)).toBe(true); // the second job now runs
    a.calls[1]?.finish();
    await tick();
    expect(released).toBe(2);
    expect(q.uses(a.forge)).toBe(false);
  });

  it('B12: a PullRequestPreview with 100 notices waiting on a forge that does not answer does not hold up another one', async () => {
    const slow = heldForge();
    const ok = heldForge();
    const q = new NoticeQueue({ logger, timeoutMs: 60_000, concurrency: 4 });
    for (let n = 1; n <= 100; n++) q.add(job(slow.forge, 'a/slow', n, `body ${String(n)}`));
    for (let n = 1; n <= 100; n++) q.add(job(slow.forge, 'a/other', n, `body ${String(n)}`));
    q.add(job(ok.forge, 'b/ok', 1, 'b notice'));
    await tick();
    // One job per forge client at a time (its writes are paced per credential): b/ok's starts at once.
    expect(slow.calls).toHaveLength(1);
    expect(ok.calls.map((c) => c.repoURL)).toEqual(['https://forge.example/b/ok.git']);
    ok.calls[0]?.finish();
    await tick();
    expect(q.posted('b/ok', 1)).toEqual({ body: 'b notice', url: 'https://forge.example/pr/1#c1' });
    // Round-robin: the next job of the slow forge is a/other's, not a/slow's second.
    slow.calls[0]?.finish();
    await tick();
    expect(slow.calls.map((c) => c.repoURL)).toEqual([
      'https://forge.example/a/slow.git',
      'https://forge.example/a/other.git',
    ]);
    await q.close(0);
  });

  it('coalesces: the newest notice of a pull request replaces a queued one; a body already posted is not queued again', async () => {
    const { forge, calls } = heldForge();
    const q = new NoticeQueue({ logger, timeoutMs: 60_000, concurrency: 1 });
    q.add(job(forge, 'a/p', 1, 'first'));
    q.add(job(forge, 'a/p', 2, 'two: old'));
    q.add(job(forge, 'a/p', 2, 'two: new'));
    expect(q.pendingCount()).toBe(1);
    calls[0]?.finish();
    await tick();
    expect(calls.map((c) => c.body)).toEqual(['<!-- m -->\nfirst\n', '<!-- m -->\ntwo: new\n']);
    calls[1]?.finish();
    await q.idle();
    expect(q.add(job(forge, 'a/p', 2, 'two: new'))).toBe(false);
    expect(q.add(job(forge, 'a/p', 2, 'two: newer'))).toBe(true);
    await tick();
    expect(calls).toHaveLength(3);
    await q.close(0);
  });

  it('the same notice from a second sync while the first is being posted is not posted again', async () => {
    const { forge, calls } = heldForge();
    const q = new NoticeQueue({ logger, timeoutMs: 60_000, concurrency: 1 });
    q.add(job(forge, 'a/p', 7, 'running'));
    await tick();
    expect(calls).toHaveLength(1);
    // A second sync (e.g. the preview Stack's add event) computes the same notice meanwhile.
    expect(q.add(job(forge, 'a/p', 7, 'running'))).toBe(false);
    // Another text is queued behind it.
    expect(q.add(job(forge, 'a/p', 7, 'stopped'))).toBe(true);
    calls[0]?.finish();
    await tick();
    expect(calls.map((c) => c.body)).toEqual(['<!-- m -->\nrunning\n', '<!-- m -->\nstopped\n']);
    calls[1]?.finish();
    await q.close(0);
  });

  it('a forge that never answers frees the worker after timeoutMs and its request is aborted', async () => {
    const { forge, calls } = heldForge();
    const q = new NoticeQueue({ logger, timeoutMs: 50, concurrency: 1 });
    q.add(job(forge, 'a/p', 1, 'never answered'));
    q.add(job(forge, 'a/p', 2, 'next'));
    await tick();
    expect(calls).toHaveLength(1);
    await tick(120);
    expect(calls[0]?.signal?.aborted).toBe(true);
    expect(calls.map((c) => c.number)).toEqual([1, 2]);
    expect(q.posted('a/p', 1)).toBeUndefined();
    await q.close(0);
  });

  it('fenced: while mayWrite() is false nothing reaches the forge', async () => {
    const { forge, calls } = heldForge();
    let holds = false;
    const q = new NoticeQueue({ logger, timeoutMs: 1_000, mayWrite: () => holds });
    q.add(job(forge, 'a/p', 1, 'x'));
    q.add({
      kind: 'resolve',
      preview: 'a/p',
      forge: {
        ...forge,
        resolvePending: () => {
          throw new Error('written without the Lease');
        },
      },
      repoURL: 'r',
      sha: 'a'.repeat(40),
      context: 'c',
      description: 'd',
      stackName: 's',
    });
    await q.idle();
    expect(calls).toEqual([]);
    holds = true;
    q.add(job(forge, 'a/p', 1, 'x'));
    await tick();
    expect(calls).toHaveLength(1);
    await q.close(0);
  });
});

/**
 * A forge that answers `pullRequestState` with `state` (a function: how; never: a promise that
 * never settles) and records each notice write (body and onlyEdit); `existing`: whether the pull
 * request already has our notice (else an onlyEdit write finds none).
 */
function stateForge(
  state: () => Promise<PullRequestState | undefined>,
  existing: boolean,
): { forge: PreviewForge; writes: { body: string; onlyEdit: boolean }[]; lookups: AbortSignal[] } {
  const writes: { body: string; onlyEdit: boolean }[] = [];
  const lookups: AbortSignal[] = [];
  const forge: PreviewForge = {
    listOpen: () => Promise.resolve({ changed: true, pulls: [], etag: undefined }),
    association: () => Promise.resolve('NONE'),
    pullRequestState: (_repoURL, _number, signal) => {
      if (signal !== undefined) lookups.push(signal);
      return state();
    },
    upsertNotice: (_repoURL, pull, _marker, body, _signal, _mayWrite, onlyEdit) => {
      writes.push({ body: body.replace('<!-- m -->\n', '').trimEnd(), onlyEdit: onlyEdit === true });
      return Promise.resolve(onlyEdit === true && !existing ? undefined : `${pull.webURL}#c9`);
    },
    resolvePending: () => Promise.resolve(false),
    close: () => Promise.resolve(),
  };
  return { forge, writes, lookups };
}

const goneJob = (forge: PreviewForge): NoticeJob => ({
  ...job(forge, 'a/p', 1, stoppedGone('app-pr-1', 'main')),
  gone: { branch: 'main', stackName: 'app-pr-1' },
});

describe('the notice of a preview whose pull request left the listing (issue 19)', () => {
  it('words it by what became of the pull request; a merge into the branch only edits an earlier notice', () => {
    expect(goneNotice({ state: 'merged', baseRef: 'main' }, 'main', 'app-pr-1')).toEqual({
      body: "**Preview ended**: this pull request was merged into `main`; the deployment is reported in the preview's comment. Preview Stack `app-pr-1` was deleted.",
      onlyEdit: true,
    });
    expect(goneNotice({ state: 'closed', baseRef: 'main' }, 'main', 'app-pr-1')).toEqual({
      body: '**Preview stopped**: this pull request was closed without merging. Preview Stack `app-pr-1` was deleted.',
      onlyEdit: false,
    });
    expect(goneNotice({ state: 'open', baseRef: 'dev' }, 'main', 'app-pr-1')).toEqual({
      body: '**Preview stopped**: this pull request no longer targets `main`: it now targets `dev`. Preview Stack `app-pr-1` was deleted.',
      onlyEdit: false,
    });
    // Merged into another branch (retargeted first): it left main, say so.
    expect(goneNotice({ state: 'merged', baseRef: 'dev' }, 'main', 'app-pr-1').body).toContain(
      'no longer targets `main`: it now targets `dev`',
    );
    // Not known, or still open against main (a listing that lagged): the general wording.
    for (const s of [undefined, { state: 'open', baseRef: 'main' } as const]) {
      expect(goneNotice(s, 'main', 'app-pr-1')).toEqual({
        body: '**Preview stopped**: this pull request is closed or no longer targets `main`. Preview Stack `app-pr-1` was deleted.',
        onlyEdit: false,
      });
    }
  });

  it('merged: no new comment is posted (nothing recorded as posted); an existing notice is edited', async () => {
    const merged = (): Promise<PullRequestState> => Promise.resolve({ state: 'merged', baseRef: 'main' });
    const none = stateForge(merged, false);
    const q = new NoticeQueue({ logger, timeoutMs: 60_000 });
    q.add(goneJob(none.forge));
    await q.idle();
    expect(none.writes).toEqual([
      { body: expect.stringContaining('**Preview ended**') as string, onlyEdit: true },
    ]);
    expect(q.posted('a/p', 1)).toBeUndefined();

    const had = stateForge(merged, true);
    const q2 = new NoticeQueue({ logger, timeoutMs: 60_000 });
    q2.add(goneJob(had.forge));
    await q2.idle();
    expect(q2.posted('a/p', 1)?.body).toContain(
      '**Preview ended**: this pull request was merged into `main`',
    );
    expect(q2.posted('a/p', 1)?.url).toBe('https://forge.example/pr/1#c9');
  });

  it('a lookup that fails, or does not answer within half the job time (aborted), keeps the general notice', async () => {
    const failing = stateForge(() => Promise.reject(new Error('HTTP 500')), false);
    const q = new NoticeQueue({ logger, timeoutMs: 60_000 });
    q.add(goneJob(failing.forge));
    await q.idle();
    expect(failing.writes).toEqual([{ body: stoppedGone('app-pr-1', 'main'), onlyEdit: false }]);

    const silent = stateForge(() => new Promise<never>(() => undefined), false);
    const q2 = new NoticeQueue({ logger, timeoutMs: 200 });
    const t0 = performance.now();
    q2.add(goneJob(silent.forge));
    await q2.idle();
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(silent.lookups[0]?.aborted).toBe(true);
    expect(silent.writes).toEqual([{ body: stoppedGone('app-pr-1', 'main'), onlyEdit: false }]);
    expect(q2.posted('a/p', 1)?.body).toBe(stoppedGone('app-pr-1', 'main'));
  });
});

describe('withTimeoutCeiling (B12: a tenant cannot raise the time preview work waits)', () => {
  const provider = (timeoutMs: number): ResolvedProvider => ({ timeoutMs }) as ResolvedProvider;
  it('lowers a Provider timeout above the ceiling to it, and keeps a lower one', () => {
    expect(withTimeoutCeiling(provider(300_000), FORGE_TIMEOUT_CEILING_MS).timeoutMs).toBe(10_000);
    const fast = provider(3_000);
    expect(withTimeoutCeiling(fast, FORGE_TIMEOUT_CEILING_MS)).toBe(fast);
  });
});
