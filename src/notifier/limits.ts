/**
 * Field limits of every provider type, enforced before sending (design §5): a value over a
 * forge's limit is a final 4xx (GitHub answers 422 for a 141-character description, F13), so the
 * renderer (src/template/) bounds each field with the numbers below.
 *
 * Each limit carries the unit it is counted in and where the number comes from. Where the forge
 * counts "characters" in a language whose unit we cannot be sure of, or where only the bytes of
 * the whole payload are limited, the table uses the stricter unit: a value bounded in UTF-16 code
 * units never has more code points, and a UTF-16 unit is at most 3 UTF-8 bytes (a surrogate pair,
 * 2 units, is 4 bytes). Numbers marked "chosen" are ours where the forge documents none.
 */
import type { ProviderType } from '../api/v1alpha1.ts';
import type { ProviderLimits } from '../template/rendered.ts';

export { fits, measure, type FieldLimit, type LengthUnit } from '../text.ts';
export type { ContextLimit, ProviderLimits } from '../template/rendered.ts';

const GITHUB: ProviderLimits = {
  statusDescription: {
    max: 140,
    unit: 'codePoints',
    source:
      'GitHub REST "Create a commit status": 422 "description is too long (maximum is 140 characters)"; shared/facts/forges.md',
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
      'GitHub issue comments: 422 "Body is too long (maximum is 65536 characters)"; shared/facts/forges.md',
  },
};

const GITLAB: ProviderLimits = {
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
    source: 'GitLab Notes API: body ≤ 1,000,000 characters; shared/facts/forges.md',
  },
};

const GITEA: ProviderLimits = {
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

const BITBUCKET: ProviderLimits = {
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
    source: 'Bitbucket Cloud: 400 "key: Ensure this value has at most 40 characters"; shared/facts/forges.md',
  },
  comment: {
    max: 65_536,
    unit: 'utf16',
    source: 'chosen: Bitbucket Cloud documents no comment limit (200k characters observed to work)',
  },
};

const BITBUCKET_SERVER: ProviderLimits = {
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
  comment: {
    max: 32_768,
    unit: 'utf16',
    source:
      'Bitbucket Data Center: 400 "Please enter a non-empty value less than 32768 characters"; shared/facts/peers.md (Atlantis)',
  },
};

const AZURE_DEVOPS: ProviderLimits = {
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

const TABLE: Record<ProviderType, ProviderLimits> = {
  github: GITHUB,
  gitlab: GITLAB,
  gitea: GITEA,
  bitbucket: BITBUCKET,
  bitbucketserver: BITBUCKET_SERVER,
  azuredevops: AZURE_DEVOPS,
  slack: {
    message: {
      max: 4_000,
      unit: 'utf16',
      source:
        'Slack chat.postMessage: text ≤ 4,000 characters advisable (cut at 40,000); shared/facts/forges.md',
    },
  },
  msteams: {
    message: {
      max: 20_000,
      unit: 'utf8',
      source:
        'Teams Workflows webhook payload ≤ 28 KB (shared/facts/forges.md); 20,000 bytes of text leave room for the Adaptive Card and JSON escaping',
    },
  },
  discord: {
    message: {
      max: 2_000,
      unit: 'utf16',
      source: 'Discord webhook: content ≤ 2,000 characters; shared/facts/forges.md',
    },
  },
  googlechat: {
    message: {
      max: 28_000,
      unit: 'utf8',
      source:
        'Google Chat spaces.messages.create: message ≤ 32,000 bytes including cards; 28,000 bytes of text leave room for the payload',
    },
  },
  generic: {},
  'generic-hmac': {},
};

/**
 * The limits of provider type `type` (see {@link ProviderLimits}). Chat types have only `message`;
 * webhooks have none (their `message` is already bounded by the event source, 8,192 code points).
 */
export function limitsFor(type: ProviderType): ProviderLimits {
  return TABLE[type];
}
