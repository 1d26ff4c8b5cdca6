/** GitHub's field limits (the renderer fits them; the notifier asserts them). */
import type { ProviderLimits } from '../../template/rendered.ts';

export const githubLimits: ProviderLimits = {
  statusDescription: {
    max: 140,
    unit: 'codePoints',
    source:
      'GitHub REST "Create a commit status": 422 "description is too long (maximum is 140 characters)"; docs/providers/github.md',
  },
  statusContext: {
    max: 255,
    unit: 'codePoints',
    overflow: 'hash',
    source:
      'GitHub statuses API rejects a context over 255 characters with 422 (runatlantis/atlantis#2506, #6541)',
  },
  comment: {
    max: 65_536,
    unit: 'utf16',
    source:
      'GitHub issue comments: 422 "Body is too long (maximum is 65536 characters)"; docs/providers/github.md',
  },
};
