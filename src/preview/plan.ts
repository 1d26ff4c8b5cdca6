/**
 * What the preview controller does for one sync, decided from the open pull requests, the trust
 * rules, `maxPreviews` and the preview Stacks that exist — pure, so every rule is unit-tested
 * (docs/previews.md; cases F30, P01, P03).
 */
import type { AuthorAssociation, PreviewTrust } from '../api/v1alpha1.ts';
import type { OpenPullRequest } from '../forge/types.ts';

/** Associations that get a preview when `trust.authorAssociations` is unset: write access. */
export const DEFAULT_ASSOCIATIONS: readonly AuthorAssociation[] = ['OWNER', 'MEMBER', 'COLLABORATOR'];

/** An open pull request with its author's association resolved. */
export type KnownPull = OpenPullRequest & { association: AuthorAssociation };

/** A preview Stack that exists, by pull request number. */
export interface ExistingPreview {
  number: number;
  stackName: string;
  /** `spec.commit` of the preview Stack. */
  headSHA: string;
}

/**
 * What the sync decided for one open pull request: a preview, waiting for a free preview slot
 * (`maxPreviews`), or untrusted under `spec.trust` (`reason` says which rule).
 */
export type PullRequestDecision =
  | { kind: 'preview'; pull: KnownPull }
  | { kind: 'waiting'; pull: KnownPull; reason: string }
  | { kind: 'untrusted'; pull: KnownPull; reason: string };

export interface Plan {
  /** One verdict per open pull request, by number. */
  verdicts: PullRequestDecision[];
  /** Preview Stacks to create. */
  create: KnownPull[];
  /** Preview Stacks whose pull request has a new head commit. */
  update: { pull: KnownPull; stackName: string }[];
  /**
   * Preview Stacks to delete: `gone` (the pull request is no longer open against the branch:
   * closed, merged or retargeted), or the verdict that removed it (untrusted now, or waiting
   * after `maxPreviews` was lowered).
   */
  remove: { preview: ExistingPreview; why: 'gone' | Exclude<PullRequestDecision, { kind: 'preview' }> }[];
}

/** Why `pull` gets no preview under `trust`, or undefined when it is trusted. */
export function untrustedReason(pull: KnownPull, trust: PreviewTrust | undefined): string | undefined {
  if (pull.fork && trust?.allowForks !== true) {
    return 'it comes from a fork, and previews of forks are off (spec.trust.allowForks)';
  }
  const allowed = trust?.authorAssociations ?? DEFAULT_ASSOCIATIONS;
  if (!allowed.includes(pull.association)) {
    return `its author ${pull.author} has association ${pull.association} with the repository, and previews are for ${allowed.join(', ')} (spec.trust.authorAssociations)`;
  }
  const missing = (trust?.requiredLabels ?? []).filter((l) => !pull.labels.includes(l));
  if (missing.length > 0) {
    return `it lacks the label${missing.length > 1 ? 's' : ''} ${missing.map((l) => `'${l}'`).join(', ')} (spec.trust.requiredLabels)`;
  }
  return undefined;
}

/**
 * Decides the sync. Trusted pull requests get previews up to `maxPreviews`: those with a preview
 * Stack keep it first, then the lowest numbers; the rest wait. A pull request whose head moved
 * gets its preview Stack's commit updated; a preview Stack whose pull request is no longer listed
 * or no longer qualifies is removed.
 */
export function planSync(input: {
  pulls: readonly KnownPull[];
  trust: PreviewTrust | undefined;
  maxPreviews: number;
  existing: readonly ExistingPreview[];
}): Plan {
  const existing = new Map(input.existing.map((e) => [e.number, e]));
  const byNumber = [...input.pulls].sort((a, b) => a.number - b.number);
  const verdicts = new Map<number, PullRequestDecision>();
  const trusted: KnownPull[] = [];
  for (const pull of byNumber) {
    const reason = untrustedReason(pull, input.trust);
    if (reason !== undefined) verdicts.set(pull.number, { kind: 'untrusted', pull, reason });
    else trusted.push(pull);
  }
  const ranked = [
    ...trusted.filter((p) => existing.has(p.number)),
    ...trusted.filter((p) => !existing.has(p.number)),
  ];
  ranked.forEach((pull, i) => {
    verdicts.set(
      pull.number,
      i < input.maxPreviews
        ? { kind: 'preview', pull }
        : {
            kind: 'waiting',
            pull,
            reason: `${String(input.maxPreviews)} preview${input.maxPreviews === 1 ? '' : 's'} already run (spec.maxPreviews); this one starts when one of them closes`,
          },
    );
  });

  const plan: Plan = {
    verdicts: byNumber.flatMap((p) => verdicts.get(p.number) ?? []),
    create: [],
    update: [],
    remove: [],
  };
  for (const v of plan.verdicts) {
    const have = existing.get(v.pull.number);
    if (v.kind === 'preview') {
      if (have === undefined) plan.create.push(v.pull);
      else if (have.headSHA !== v.pull.headSHA) plan.update.push({ pull: v.pull, stackName: have.stackName });
    } else if (have !== undefined) {
      plan.remove.push({ preview: have, why: v });
    }
  }
  for (const e of input.existing) {
    if (!verdicts.has(e.number)) plan.remove.push({ preview: e, why: 'gone' });
  }
  return plan;
}
