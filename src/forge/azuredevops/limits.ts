/** Azure DevOps's field limits (the renderer fits them; the notifier asserts them). */
import type { ProviderLimits } from '../../template/rendered.ts';

export const azuredevopsLimits: ProviderLimits = {
  statusDescription: {
    max: 255,
    unit: 'utf16',
    source: 'chosen: Azure DevOps documents no status description limit',
  },
  statusContext: {
    max: 255,
    unit: 'utf16',
    overflow: 'hash',
    source: 'chosen: Azure DevOps documents no context name limit',
  },
  comment: {
    max: 150_000,
    unit: 'utf16',
    source:
      'Azure DevOps: 400 "A discussion comment cannot be longer than 150000 characters" (runatlantis/atlantis#1585)',
  },
};
