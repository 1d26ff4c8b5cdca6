import { describe, expect, it } from 'vitest';
import { GIT_PROVIDER_TYPES, MESSAGE_PROVIDER_TYPES, PROVIDER_TYPES } from '../src/api/v1alpha1.ts';
import { createNotifier, hasNotifier, limitsFor } from '../src/provider-types.ts';
import { fits, measure, type FieldLimit } from '../src/text.ts';
import { resolved } from './notifier/fixtures.ts';

describe('limitsFor', () => {
  it.each([
    { type: 'github', field: 'statusDescription', max: 140 },
    { type: 'github', field: 'statusContext', max: 255 },
    { type: 'github', field: 'comment', max: 65_536 },
    { type: 'gitlab', field: 'statusDescription', max: 255 },
    { type: 'gitlab', field: 'statusTargetURL', max: 255 },
    { type: 'gitlab', field: 'comment', max: 1_000_000 },
    { type: 'gitea', field: 'comment', max: 65_536 },
    { type: 'bitbucket', field: 'statusContext', max: 40 },
    { type: 'bitbucketserver', field: 'statusContext', max: 40 },
    { type: 'bitbucketserver', field: 'comment', max: 32_768 },
    { type: 'azuredevops', field: 'comment', max: 150_000 },
    { type: 'slack', field: 'message', max: 4_000 },
    { type: 'discord', field: 'message', max: 2_000 },
    { type: 'msteams', field: 'message', max: 20_000 },
    { type: 'googlechat', field: 'message', max: 28_000 },
  ] as const)('$type $field = $max', ({ type, field, max }) => {
    expect(limitsFor(type)[field]?.max).toBe(max);
  });

  it('every provider type has an entry; every limit names its source', () => {
    for (const t of PROVIDER_TYPES) {
      const l = limitsFor(t);
      expect(l).toBeDefined();
      for (const f of Object.values(l) as FieldLimit[]) expect(f.source.length).toBeGreaterThan(10);
    }
  });

  it('git forges have description, context and comment limits; chat types a message limit; webhooks none', () => {
    for (const t of GIT_PROVIDER_TYPES) {
      const l = limitsFor(t);
      expect(l.statusDescription, t).toBeDefined();
      expect(l.statusContext?.overflow, t).toBe('hash');
      expect(l.comment, t).toBeDefined();
    }
    for (const t of MESSAGE_PROVIDER_TYPES) {
      const l = limitsFor(t);
      if (t === 'generic' || t === 'generic-hmac') expect(l).toEqual({});
      else expect(l.message, t).toBeDefined();
    }
  });

  it('Teams stays under its 28 KB payload with room to spare', () => {
    const m = limitsFor('msteams').message;
    expect(m?.unit).toBe('utf8');
    expect(m?.max).toBeLessThan(28 * 1024);
  });
});

describe('measure / fits', () => {
  const s = 'a😀é'; // 3 code points, 4 UTF-16 units, 1 + 4 + 2 = 7 UTF-8 bytes
  it.each([
    { unit: 'codePoints', want: 3 },
    { unit: 'utf16', want: 4 },
    { unit: 'utf8', want: 7 },
  ] as const)('$unit', ({ unit, want }) => {
    expect(measure(s, unit)).toBe(want);
  });

  it('fits compares in the limit unit; no limit always fits', () => {
    expect(fits(s, { max: 3, unit: 'codePoints', source: 'x' })).toBe(true);
    expect(fits(s, { max: 3, unit: 'utf16', source: 'x' })).toBe(false);
    expect(fits(s, undefined)).toBe(true);
  });
});

describe('provider types', () => {
  it('every provider type has a notifier', () => {
    for (const t of PROVIDER_TYPES) expect(hasNotifier(t), t).toBe(true);
  });

  it('a factory that refuses the Provider throws a clear error naming it', () => {
    expect(() =>
      createNotifier(
        resolved({ type: 'slack', address: 'https://slack.com/api/chat.postMessage', token: 'xoxb-1' }),
      ),
    ).toThrow(/^Provider team-a\/hook: a slack bot token needs spec\.channel$/);
  });
});
