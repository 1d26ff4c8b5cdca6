/** Bitbucket Cloud's field limits (the renderer fits them; the notifier asserts them). */
import type { ProviderLimits } from '../../template/rendered.ts';

export const bitbucketLimits: ProviderLimits = {
  statusDescription: {
    max: 255,
    unit: 'codePoints',
    source:
      'chosen: Bitbucket Cloud documents no description limit; 255 matches its other build-status fields',
  },
  statusContext: {
    max: 40,
    unit: 'codePoints',
    overflow: 'hash',
    source:
      'Bitbucket Cloud: 400 "key: Ensure this value has at most 40 characters"; docs/providers/bitbucket.md',
  },
  statusName: {
    max: 255,
    unit: 'codePoints',
    source: 'chosen: Bitbucket Cloud documents no build status name limit; 255 as Data Center',
  },
  comment: {
    max: 65_536,
    unit: 'utf16',
    source: 'chosen: Bitbucket Cloud documents no comment limit (200k characters observed to work)',
  },
};
