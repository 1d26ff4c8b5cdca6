import { describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/notifier/errors.ts';
import { newCommentCache, upsertStickyComment } from '../../src/forge/comment.ts';
import type { ForgeComment } from '../../src/forge/types.ts';

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
    const cache = newCommentCache();
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
    const cache = newCommentCache();
    const base = { cache, key: 'k', marker, pages: f.pages, create: f.create, edit: f.edit };
    expect(await upsertStickyComment({ ...base, body: `${marker} new` })).toBe('edited');
    expect(f.comments[3]!.body).toBe(`${marker} new`);
    f.comments.splice(3, 1); // someone deleted it
    expect(await upsertStickyComment({ ...base, body: `${marker} newer` })).toBe('created');
    expect(f.comments.filter((c) => c.body.includes(marker))).toHaveLength(1);
  });
});
