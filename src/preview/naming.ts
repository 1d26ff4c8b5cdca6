/**
 * Names and labels of preview Stacks (docs/previews.md). PKO refuses Stack names over 42
 * characters (a CEL rule on its CRD), so a long base name is shortened with a hash.
 */
import { createHash } from 'node:crypto';
import { BASE_STACK_ANNOTATION, GROUP, PREVIEW_LABEL, PULL_REQUEST_LABEL } from '../api/v1alpha1.ts';

export { BASE_STACK_ANNOTATION, PREVIEW_LABEL, PULL_REQUEST_LABEL };

/** Longest Stack name PKO accepts. */
export const MAX_STACK_NAME = 42;
/** Annotations on every preview Stack. */
export const REPOSITORY_ANNOTATION = `${GROUP}/repository`;
export const PULL_REQUEST_URL_ANNOTATION = `${GROUP}/pull-request-url`;
export const HEAD_REF_ANNOTATION = `${GROUP}/head-ref`;
/** Finalizer on PullRequestPreviews: preview Stacks are deleted before the object goes (case P04). */
export const PREVIEW_FINALIZER = `${GROUP}/preview-stacks`;

/**
 * `<base>-pr-<number>`; when that is over {@link MAX_STACK_NAME} characters, the base is cut and
 * followed by 6 hex digits of SHA-256 over the full name: `<base prefix>-<hash>-pr-<number>`.
 * Named by the number, never the head branch (a fork's `main` is not the base's `main`: P05).
 * The result is a DNS-1123 label when `base` is one.
 */
export function previewStackName(base: string, number: number): string {
  const suffix = `-pr-${String(number)}`;
  const full = `${base}${suffix}`;
  if (full.length <= MAX_STACK_NAME) return full;
  const hash = createHash('sha256').update(full).digest('hex').slice(0, 6);
  const room = MAX_STACK_NAME - suffix.length - hash.length - 1;
  const prefix = base.slice(0, Math.max(0, room)).replace(/[-.]+$/, '');
  return prefix === '' ? `${hash}${suffix}`.slice(0, MAX_STACK_NAME) : `${prefix}-${hash}${suffix}`;
}
