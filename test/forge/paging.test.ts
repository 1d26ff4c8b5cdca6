import { describe, expect, it } from 'vitest';
import { nextLink, pages, sameOriginNext } from '../../src/forge/paging.ts';
import { ProviderError } from '../../src/notifier/errors.ts';

describe('nextLink', () => {
  it('finds rel="next" among several links (RFC 8288), or nothing', () => {
    expect(nextLink('<https://h/a?page=3>; rel="prev", <https://h/a?page=5>; rel="next"')).toBe(
      'https://h/a?page=5',
    );
    expect(nextLink('<https://h/a?page=2>; rel="next last"')).toBe('https://h/a?page=2');
    expect(nextLink('<https://h/a?page=1>; rel="first"')).toBeUndefined();
    expect(nextLink(null)).toBeUndefined();
    expect(nextLink('')).toBeUndefined();
  });
});

describe('sameOriginNext', () => {
  it('resolves relative links and refuses another origin', () => {
    expect(sameOriginNext('/a?page=2', 'https://h/a?page=1', [])).toBe('https://h/a?page=2');
    expect(() => sameOriginNext('https://evil.example/a', 'https://h/a', [])).toThrow(ProviderError);
  });
});

describe('pages', () => {
  it('stops after the bound of pages when a forge keeps answering a next page', async () => {
    const it = pages(0, (n: number) => Promise.resolve({ items: [n], next: n + 1 }), 'a loop', []);
    let seen = 0;
    await expect(
      (async () => {
        for await (const _ of it) seen++;
      })(),
    ).rejects.toMatchObject({ code: 'TOO_MANY_PAGES' });
    expect(seen).toBe(1000);
  });
});
