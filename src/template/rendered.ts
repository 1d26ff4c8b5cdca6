/**
 * What the renderer produces for one delivery, and the limits it fits each field to. Notifiers
 * receive a `RenderedNotification` whose every field already fits their provider's limits (they
 * assert, they do not cut again); each provider type declares its `ProviderLimits` (the git
 * forges in src/forge/<name>/limits.ts, chat services beside their notifier).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { FieldLimit } from '../text.ts';

/** Forge-neutral commit status state; each forge maps it (GitLab: pending→running, failure→failed). */
export type CommitState = 'pending' | 'success' | 'failure';

/** What the templates rendered for this (event, alert, provider) delivery. */
export interface RenderedNotification {
  /** The message text (chat body, webhook `message`), within the provider's `message` limit. */
  message: string;
  /**
   * Git forges: the commit status to set on `ev.metadata.commit` (always present for git
   * Provider types). `context` and `description` fit the forge's limits; `targetURL` is the
   * permalink when there is one and it fits.
   */
  commitStatus?: {
    state: CommitState;
    /** The status key (GitHub `context`, Bitbucket `key`): fitted to the forge's key limit. */
    context: string;
    /**
     * The status's display name (Bitbucket `name`): the whole rendered context where the forge
     * bounds the key but not the name (keys bounded, names whole). Absent: the name is `context`.
     */
    name?: string;
    description: string;
    targetURL: string | undefined;
  };
  /**
   * Git forges with pull-request comments on: the sticky comment. `marker` is the hidden HTML
   * comment that identifies it (unique per cluster, namespace and Stack); `body` contains it and
   * fits the forge's comment limit.
   */
  comment?: { marker: string; body: string };
}

export interface ContextLimit extends FieldLimit {
  /**
   * What to do with a longer commit status context/key: always `hash` — keep a readable prefix and
   * append a hash of the whole value, so two long contexts that share a prefix never collide
   * (plain truncation would make them overwrite each other's status).
   */
  overflow: 'hash';
}

/**
 * The limits of one provider type, enforced by the renderer before sending (docs/architecture.md,
 * "Limits"): a value over a forge's limit is a final 4xx (GitHub answers 422 for a 141-character
 * description, case F13). An absent field has no limit we enforce. Each limit names its unit and
 * where the number comes from; where a forge's unit is uncertain the stricter one is used (a value
 * bounded in UTF-16 units never has more code points; a UTF-16 unit is at most 3 UTF-8 bytes).
 */
export interface ProviderLimits {
  /** Commit status description (GitHub `description`, Bitbucket `description`, …). */
  statusDescription?: FieldLimit;
  /** Commit status key (GitHub `context`, GitLab `name`, Bitbucket `key`, Azure `context.name`). */
  statusContext?: ContextLimit;
  /**
   * Commit status display name, where a forge has one beside the key (Bitbucket `name`): the
   * whole context, cut with `…` only beyond this limit. Absent: the name is the key.
   */
  statusName?: FieldLimit;
  /** Commit status link (`target_url` / `url`); a longer URL is omitted, never cut. */
  statusTargetURL?: FieldLimit;
  /** Pull/merge request comment body. */
  comment?: FieldLimit;
  /** Chat message text (the rendered `message` template). */
  message?: FieldLimit;
}
