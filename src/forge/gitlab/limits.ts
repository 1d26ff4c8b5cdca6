/** GitLab's field limits (the renderer fits them; the notifier asserts them). */
import type { ProviderLimits } from '../../template/rendered.ts';

export const gitlabLimits: ProviderLimits = {
  statusDescription: {
    max: 255,
    unit: 'codePoints',
    source: 'GitLab CommitStatus validates description ≤ 255 characters (gitlab-org/gitlab!118148)',
  },
  statusContext: {
    max: 255,
    unit: 'codePoints',
    overflow: 'hash',
    source: 'chosen: GitLab job/status names are limited to 255 characters',
  },
  statusTargetURL: {
    max: 255,
    unit: 'codePoints',
    source: 'GitLab CommitStatus validates target_url ≤ 255 characters (gitlab-org/gitlab!118148, #501079)',
  },
  comment: {
    max: 1_000_000,
    unit: 'utf16',
    source: 'GitLab Notes API: body ≤ 1,000,000 characters; docs/providers/gitlab.md',
  },
};
