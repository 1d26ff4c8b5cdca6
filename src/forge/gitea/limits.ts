/** Gitea's field limits (the renderer fits them; the notifier asserts them). */
import type { ProviderLimits } from '../../template/rendered.ts';

export const giteaLimits: ProviderLimits = {
  statusDescription: {
    max: 255,
    unit: 'codePoints',
    source: 'chosen: Gitea stores description as TEXT and validates no length; kept short for its UI',
  },
  statusContext: {
    max: 255,
    unit: 'codePoints',
    overflow: 'hash',
    source: 'chosen: Gitea stores context as TEXT (hashed for grouping) and validates no length',
  },
  comment: {
    max: 65_536,
    unit: 'utf16',
    source: 'chosen: Gitea stores comments as LONGTEXT and validates no length; same bound as GitHub',
  },
};
