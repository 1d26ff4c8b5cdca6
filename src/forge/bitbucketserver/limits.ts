/** Bitbucket Data Center's field limits (the renderer fits them; the notifier asserts them). */
import type { ProviderLimits } from '../../template/rendered.ts';

export const bitbucketserverLimits: ProviderLimits = {
  statusDescription: {
    max: 255,
    unit: 'utf16',
    source:
      'chosen: Bitbucket Data Center limits the build status name to 255 characters (BSERV-12804); same bound here',
  },
  statusContext: {
    max: 40,
    unit: 'utf16',
    overflow: 'hash',
    source: 'chosen: the Bitbucket Cloud key limit (40) also fits Data Center (key ≤ 255)',
  },
  statusName: {
    max: 255,
    unit: 'utf16',
    source: 'Bitbucket Data Center limits the build status name to 255 characters (BSERV-12804)',
  },
  comment: {
    max: 32_768,
    unit: 'utf16',
    source:
      'Bitbucket Data Center: 400 "Please enter a non-empty value less than 32768 characters"; observed by Atlantis',
  },
};
