/**
 * The revision grammar of PKO commit fields (`status.lastUpdate.lastAttemptedCommit`,
 * `status.currentUpdate.commit`), case F03.
 *
 * What PKO writes there (docs/events.md): a 40-hex SHA for git sources; the Flux
 * `artifact.revision` for Flux sources (`main@sha1:<sha>`, `<tag>@sha256:<digest>` for OCI, and
 * `main/<sha>` from Flux's older revision format); the Program's generation (`"3"`) for Program
 * sources; an artifact digest `sha256:…` on PKO v2.0.x. Only a real git SHA-1 may ever reach a
 * forge: everything else yields `commit: null` and a `reason` for logs and metrics.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { boundText } from '../text.ts';

export interface ParsedRevision {
  /** The raw value, or null when absent or empty. */
  revision: string | null;
  /** Lower-case 40-hex git commit SHA, or null when none can be extracted. */
  commit: string | null;
  /** Ref name before the SHA (`main`, `feature/x`; `refs/heads/` stripped), when the form carries one. */
  branch: string | null;
  /** Why there is no commit; present exactly when `commit` is null. */
  reason?: string;
}

const SHA1 = /^[0-9a-f]{40}$/i;
const HEX = /^[0-9a-f]+$/i;
const DIGITS = /^[0-9]+$/;
/** `<ref>@sha1:<sha>` (Flux ≥ v2 revision format) or `sha1:<sha>` (Flux, commit without a ref). */
const FLUX_SHA1 = /^(?:(.+)@)?sha1:([0-9a-f]{40})$/i;
/** `<ref>/<sha>` (Flux's pre-v2 revision format). */
const LEGACY_FLUX = /^(.+)\/([0-9a-f]{40})$/i;
const DIGEST = /^(?:(.+)@)?(sha256|sha384|sha512|blake3):([0-9a-f]+)$/i;

/** Longest excerpt of the raw value quoted in a reason (reasons end up in logs and Events). */
const QUOTE_MAX = 80;

function refName(ref: string): string {
  return ref.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : ref;
}

/**
 * Extracts a git commit from a PKO commit field.
 *
 * Accepted (→ `commit` = the SHA, lower-cased): `<40hex>`; `<ref>@sha1:<40hex>`; `sha1:<40hex>`;
 * `<ref>/<40hex>`. Anything else (`v1.2.0@sha256:<64hex>`, `sha256:<64hex>`, `3`, ``, 43 hex
 * characters, 64 hex characters, …) → `commit: null` with a human-readable `reason` that quotes
 * (a bounded excerpt of) the value. Never throws.
 */
export function parseRevision(raw: string | undefined): ParsedRevision {
  if (raw === undefined || raw === '') {
    return { revision: null, commit: null, branch: null, reason: 'no revision recorded' };
  }
  const quoted = `'${boundText(raw, QUOTE_MAX)}'`;
  const none = (reason: string, branch: string | null = null): ParsedRevision => ({
    revision: raw,
    commit: null,
    branch,
    reason: `revision ${quoted} ${reason}`,
  });

  if (SHA1.test(raw)) return { revision: raw, commit: raw.toLowerCase(), branch: null };

  const flux = FLUX_SHA1.exec(raw);
  if (flux) {
    const [, ref, sha] = flux;
    return { revision: raw, commit: (sha ?? '').toLowerCase(), branch: ref ? refName(ref) : null };
  }
  const legacy = LEGACY_FLUX.exec(raw);
  if (legacy) {
    const [, ref, sha] = legacy;
    return { revision: raw, commit: (sha ?? '').toLowerCase(), branch: ref ? refName(ref) : null };
  }

  const digest = DIGEST.exec(raw);
  if (digest) {
    const [, ref, algo] = digest;
    return ref
      ? none(`is an OCI artifact digest (${algo ?? ''}), not a git commit (Flux OCIRepository source?)`)
      : none(`is an artifact digest (${algo ?? ''}), not a git commit (Flux source on PKO v2.0?)`);
  }
  if (DIGITS.test(raw) && raw.length < 40) {
    return none('is not a git commit (Program source?)');
  }
  if (HEX.test(raw)) {
    return raw.length === 64
      ? none('has 64 hex characters (a SHA-256 object name?); only 40-hex SHA-1 commits are supported')
      : none(`has ${raw.length} hex characters; a git commit SHA has exactly 40`);
  }
  return none('is not a git commit SHA (expected 40 hex characters, <ref>@sha1:<sha> or <ref>/<sha>)');
}
