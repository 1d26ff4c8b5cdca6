import { describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/notifier/errors.ts';
import {
  boundedKey,
  LruCache,
  nextLink,
  sameStatus,
  syncCommitStatus,
  upsertStickyComment,
  type ForgeComment,
  type StatusSnapshot,
} from '../../src/notifier/forge-common.ts';

describe('LruCache', () => {
  it('evicts the least recently used entry beyond its bound', () => {
    const c = new LruCache<number>(2);
    c.set('a', 1);
    c.set('b', 2);
    expect(c.get('a')).toBe(1); // a is now the most recent
    c.set('c', 3);
    expect([c.get('a'), c.get('b'), c.get('c'), c.size]).toEqual([1, undefined, 3, 2]);
  });
});

describe('boundedKey', () => {
  it('keeps short values, hashes long ones into ≤ max characters without collisions', () => {
    expect(boundedKey('pko/team-a/web', 40)).toBe('pko/team-a/web');
    const a = boundedKey(`${'x'.repeat(50)}/a`, 40);
    const b = boundedKey(`${'x'.repeat(50)}/b`, 40);
    expect(a).toHaveLength(40);
    expect(b).toHaveLength(40);
    expect(a).not.toBe(b);
    expect(boundedKey(`${'x'.repeat(50)}/a`, 40)).toBe(a);
    expect(boundedKey('y'.repeat(30), 10)).toHaveLength(10);
  });
});

describe('nextLink', () => {
  it('finds rel="next" among several links, or nothing', () => {
    expect(nextLink('<https://h/a?page=3>; rel="prev", <https://h/a?page=5>; rel="next"')).toBe(
      'https://h/a?page=5',
    );
    expect(nextLink('<https://h/a?page=1>; rel="first"')).toBeUndefined();
    expect(nextLink(null)).toBeUndefined();
  });
});

describe('syncCommitStatus', () => {
  const want: StatusSnapshot = { state: 'success', description: 'ok' };
  it('reads on a cache miss, skips an identical status, remembers it', async () => {
    const cache = new LruCache<StatusSnapshot>();
    let reads = 0;
    let writes = 0;
    const opts = {
      cache,
      key: 'k',
      want,
      readCurrent: () => {
        reads++;
        return Promise.resolve({ ...want });
      },
      write: () => {
        writes++;
        return Promise.resolve();
      },
    };
    expect(await syncCommitStatus(opts)).toBe('unchanged');
    expect(await syncCommitStatus(opts)).toBe('unchanged');
    expect([reads, writes]).toEqual([1, 0]);
    expect(await syncCommitStatus({ ...opts, want: { state: 'failure', description: 'ok' } })).toBe(
      'written',
    );
    expect([reads, writes]).toEqual([1, 1]);
    expect(sameStatus(cache.get('k')!, { state: 'failure', description: 'ok' })).toBe(true);
  });
  it('a failed write leaves the cache as it was', async () => {
    const cache = new LruCache<StatusSnapshot>();
    const fail = () =>
      Promise.reject(new ProviderError('boom', { code: 'NETWORK', retryable: true, secretValues: [] }));
    await expect(
      syncCommitStatus({ cache, key: 'k', want, readCurrent: () => Promise.resolve(undefined), write: fail }),
    ).rejects.toThrow('boom');
    expect(cache.get('k')).toBeUndefined();
  });
});

describe('upsertStickyComment', () => {
  const marker = '<!-- m -->';
  async function* pagesOf(comments: ForgeComment[]): AsyncGenerator<ForgeComment[]> {
    for (let i = 0; i < comments.length; i += 2) {
      await Promise.resolve();
      yield comments.slice(i, i + 2);
    }
  }
  function forge(initial: ForgeComment[]) {
    const comments = [...initial];
    let n = 100;
    return {
      comments,
      pages: (): AsyncGenerator<ForgeComment[]> => pagesOf(comments),
      create: (body: string) => {
        const ref = String(n++);
        comments.push({ ref, body, mine: true });
        return Promise.resolve(ref);
      },
      edit: (ref: string, body: string) => {
        const c = comments.find((x) => x.ref === ref);
        if (!c)
          return Promise.reject(
            new ProviderError('gone', { code: 'HTTP_404', status: 404, retryable: false, secretValues: [] }),
          );
        c.body = body;
        return Promise.resolve(ref);
      },
    };
  }
  it('never edits a comment with the marker that is not ours; creates ours, then edits it', async () => {
    const f = forge([
      { ref: '1', body: 'hello', mine: false },
      { ref: '2', body: `quoting ${marker}`, mine: false },
      { ref: '3', body: `mine without marker`, mine: true },
    ]);
    const cache = new LruCache<{ ref: string; body: string }>();
    const base = { cache, key: 'k', marker, pages: f.pages, create: f.create, edit: f.edit };
    expect(await upsertStickyComment({ ...base, body: `${marker} v1` })).toBe('created');
    expect(await upsertStickyComment({ ...base, body: `${marker} v1` })).toBe('unchanged');
    expect(await upsertStickyComment({ ...base, body: `${marker} v2` })).toBe('edited');
    expect(f.comments.map((c) => c.body)).toEqual([
      'hello',
      `quoting ${marker}`,
      'mine without marker',
      `${marker} v2`,
    ]);
  });
  it('finds ours on a later page after a restart, and re-lists when the cached one was deleted', async () => {
    const f = forge([
      { ref: '1', body: 'a', mine: false },
      { ref: '2', body: 'b', mine: true },
      { ref: '3', body: 'c', mine: false },
      { ref: '4', body: `${marker} old`, mine: true },
    ]);
    const cache = new LruCache<{ ref: string; body: string }>();
    const base = { cache, key: 'k', marker, pages: f.pages, create: f.create, edit: f.edit };
    expect(await upsertStickyComment({ ...base, body: `${marker} new` })).toBe('edited');
    expect(f.comments[3]!.body).toBe(`${marker} new`);
    f.comments.splice(3, 1); // someone deleted it
    expect(await upsertStickyComment({ ...base, body: `${marker} newer` })).toBe('created');
    expect(f.comments.filter((c) => c.body.includes(marker))).toHaveLength(1);
  });
});
