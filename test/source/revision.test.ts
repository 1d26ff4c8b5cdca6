import { describe, expect, it } from 'vitest';
import { parseRevision } from '../../src/source/revision.ts';

const SHA = '9f1c2e7d0a4b5c6d7e8f90112233445566778899';
const HEX64 = 'a'.repeat(32) + '0123456789abcdef0123456789abcdef';

describe('parseRevision', () => {
  // F03: every value of the case, with exactly its stated result.
  describe('F03 revision grammar: the first three yield the 40-hex commit, the others none', () => {
    it.each([
      { raw: `main@sha1:${SHA}`, commit: SHA, branch: 'main' },
      { raw: `main/${SHA}`, commit: SHA, branch: 'main' },
      { raw: SHA, commit: SHA, branch: null },
    ])('F03 $raw → commit', ({ raw, commit, branch }) => {
      expect(parseRevision(raw)).toEqual({ revision: raw, commit, branch });
    });

    it.each([
      { raw: `v1.2.0@sha256:${HEX64}`, reason: /^revision 'v1\.2\.0@sha256:.*' is an OCI artifact digest/ },
      { raw: '3', reason: /^revision '3' is not a git commit \(Program source\?\)$/ },
      { raw: '', reason: /^no revision recorded$/ },
      { raw: `sha256:${HEX64}`, reason: /is an artifact digest \(sha256\), not a git commit/ },
      { raw: `${SHA}abc`, reason: /has 43 hex characters; a git commit SHA has exactly 40/ },
    ])('F03 $raw → no commit, with a reason', ({ raw, reason }) => {
      const r = parseRevision(raw);
      expect(r.commit).toBeNull();
      expect(r.revision).toBe(raw === '' ? null : raw);
      expect(r.reason).toMatch(reason);
    });
  });

  it('lower-cases the SHA in every accepted form', () => {
    const upper = SHA.toUpperCase();
    expect(parseRevision(upper).commit).toBe(SHA);
    expect(parseRevision(`main@sha1:${upper}`).commit).toBe(SHA);
    expect(parseRevision(`main/${upper}`).commit).toBe(SHA);
    expect(parseRevision(upper).revision).toBe(upper); // the raw value is kept as is
  });

  it.each([
    { raw: `refs/heads/feature/x@sha1:${SHA}`, branch: 'feature/x' },
    { raw: `feature/x@sha1:${SHA}`, branch: 'feature/x' },
    { raw: `feature/x/${SHA}`, branch: 'feature/x' },
    { raw: `v1.0.0@sha1:${SHA}`, branch: 'v1.0.0' },
    { raw: `sha1:${SHA}`, branch: null },
  ])('accepts Flux ref forms: $raw', ({ raw, branch }) => {
    expect(parseRevision(raw)).toEqual({ revision: raw, commit: SHA, branch });
  });

  it.each([
    undefined,
    HEX64, // SHA-256 object name: not supported by forges
    SHA.slice(1), // 39 hex
    `main@sha1:${SHA.slice(1)}`,
    `main@sha1:${SHA}0`,
    `main/${SHA}0`,
    `/${SHA}`,
    `@sha1:${SHA}`,
    ` ${SHA}`,
    'z'.repeat(40),
    'main',
  ])('rejects %j', (raw) => {
    const r = parseRevision(raw);
    expect(r.commit).toBeNull();
    expect(typeof r.reason).toBe('string');
  });

  it('bounds the quoted value in the reason', () => {
    const r = parseRevision('x'.repeat(10_000));
    expect(r.reason!.length).toBeLessThan(250);
    expect(r.revision).toHaveLength(10_000);
  });

  it('omits reason when a commit is found', () => {
    expect('reason' in parseRevision(SHA)).toBe(false);
  });
});
