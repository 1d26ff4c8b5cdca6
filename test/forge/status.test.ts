import { describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/notifier/errors.ts';
import { newStatusCache, sameStatus, statusKey, syncCommitStatus } from '../../src/forge/status.ts';
import type { StatusSnapshot } from '../../src/forge/types.ts';

describe('syncCommitStatus', () => {
  const want: StatusSnapshot = { state: 'success', description: 'ok' };
  function counting(current: StatusSnapshot | undefined) {
    const n = { reads: 0, writes: 0 };
    return {
      n,
      readCurrent: () => {
        n.reads++;
        return Promise.resolve(current === undefined ? undefined : { ...current });
      },
      write: () => {
        n.writes++;
        return Promise.resolve();
      },
    };
  }

  it('reads on a cache miss, skips an identical status, remembers it', async () => {
    const cache = newStatusCache();
    const f = counting(want);
    const opts = {
      cache,
      repoKey: 'r',
      sha: 's',
      context: 'c',
      want,
      readPolicy: 'perCommit' as const,
      ...f,
    };
    expect(await syncCommitStatus(opts)).toBe('unchanged');
    expect(await syncCommitStatus(opts)).toBe('unchanged');
    expect([f.n.reads, f.n.writes]).toEqual([1, 0]);
    expect(await syncCommitStatus({ ...opts, want: { state: 'failure', description: 'ok' } })).toBe(
      'written',
    );
    expect([f.n.reads, f.n.writes]).toEqual([1, 1]);
    expect(sameStatus(cache.get(statusKey('r', 's', 'c'))!, { state: 'failure', description: 'ok' })).toBe(
      true,
    );
  });

  it('perCommit reads every new commit; perContext reads a context once per repository', async () => {
    for (const [policy, reads] of [
      ['perCommit', 3],
      ['perContext', 1],
    ] as const) {
      const cache = newStatusCache();
      const f = counting(undefined);
      for (const sha of ['a', 'b', 'c']) {
        await syncCommitStatus({ cache, repoKey: 'r', sha, context: 'Ctx', want, readPolicy: policy, ...f });
      }
      expect([policy, f.n.reads, f.n.writes]).toEqual([policy, reads, 3]);
      // Another context in the same repository is read again; contexts compare case-insensitively.
      await syncCommitStatus({
        cache,
        repoKey: 'r',
        sha: 'd',
        context: 'ctx',
        want,
        readPolicy: policy,
        ...f,
      });
      expect(f.n.reads).toBe(policy === 'perCommit' ? 4 : 1);
    }
  });

  it('a write that timed out after it was sent: the retry reads the forge first and posts no second status', async () => {
    const cache = newStatusCache();
    let stored: StatusSnapshot = { state: 'pending', description: 'started' };
    let reads = 0;
    let writes = 0;
    const base = {
      cache,
      repoKey: 'r',
      sha: 's',
      context: 'c',
      readPolicy: 'perCommit' as const,
      readCurrent: () => {
        reads++;
        return Promise.resolve({ ...stored });
      },
    };
    // The pending status is known (written by us, so cached).
    await syncCommitStatus({ ...base, want: stored, write: () => Promise.resolve() });
    expect(reads).toBe(1);
    // The forge stores the success, but the answer never arrives (ambiguous).
    const timedOut = () => {
      writes++;
      stored = { ...want };
      return Promise.reject(
        new ProviderError('timeout', { code: 'TIMEOUT', retryable: true, secretValues: [] }),
      );
    };
    await expect(syncCommitStatus({ ...base, want, write: timedOut })).rejects.toThrow('timeout');
    // The retry: read again, find it stored, write nothing.
    expect(await syncCommitStatus({ ...base, want, write: timedOut })).toBe('unchanged');
    expect([reads, writes]).toEqual([2, 1]);
  });

  it('a failed write leaves no cached status', async () => {
    const cache = newStatusCache();
    const fail = () =>
      Promise.reject(new ProviderError('boom', { code: 'NETWORK', retryable: true, secretValues: [] }));
    await expect(
      syncCommitStatus({
        cache,
        repoKey: 'r',
        sha: 's',
        context: 'c',
        want,
        readPolicy: 'perCommit',
        readCurrent: () => Promise.resolve(undefined),
        write: fail,
      }),
    ).rejects.toThrow('boom');
    expect(cache.get(statusKey('r', 's', 'c'))).toBeUndefined();
  });

  it('the cache is bounded (least recently used entries go first)', () => {
    const cache = newStatusCache(2);
    cache.set('a', want);
    cache.set('b', want);
    expect(cache.get('a')).toEqual(want);
    cache.set('c', want);
    expect([cache.has('a'), cache.has('b'), cache.has('c'), cache.size]).toEqual([true, false, true, 2]);
  });
});
