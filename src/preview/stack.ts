/**
 * The preview Stack of one pull request (pure): the base Stack's spec, the PullRequestPreview's
 * `stackOverrides.spec` merged in (RFC 7386), then `preview: true`, `commit: <head sha>`, no
 * `branch`, `destroyOnFinalize: false` — always, whatever the base or the overrides say. Named by
 * ./naming.ts, labelled and annotated with the pull request and repository, owned by the
 * PullRequestPreview (docs/previews.md).
 */
import { API_VERSION, type PullRequestPreview } from '../api/v1alpha1.ts';
import { STACK_GROUP, STACK_VERSION, type Stack } from '../api/pko.ts';
import type { OpenPullRequest } from '../forge/types.ts';
import {
  HEAD_REF_ANNOTATION,
  PREVIEW_LABEL,
  PULL_REQUEST_LABEL,
  PULL_REQUEST_URL_ANNOTATION,
  REPOSITORY_ANNOTATION,
  previewStackName,
} from './naming.ts';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 7386 JSON merge patch: `patch` applied to `target` (neither is modified). */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out = new Map<string, unknown>(isObject(target) ? Object.entries(target) : []);
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) out.delete(k);
    else out.set(k, applyMergePatch(out.get(k), v));
  }
  return Object.fromEntries(out);
}

/** The merge patch that turns `from` into `to` (objects recursively; anything else replaced). */
export function mergePatchBetween(from: unknown, to: unknown): Json | undefined {
  if (!isObject(from) || !isObject(to)) {
    return JSON.stringify(from) === JSON.stringify(to) ? undefined : (to as Json);
  }
  const out: Record<string, Json> = {};
  for (const k of Object.keys(from)) if (!(k in to)) out[k] = null;
  for (const [k, v] of Object.entries(to)) {
    const d = mergePatchBetween(from[k], v);
    if (d !== undefined) out[k] = d;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** The spec a preview Stack of `pull` should have. */
export function previewSpec(base: Stack, prp: PullRequestPreview, headSHA: string): Record<string, unknown> {
  const copied = structuredClone(base.spec ?? {}) as Record<string, unknown>;
  const patched = applyMergePatch(copied, prp.spec.stackOverrides?.spec ?? {}) as Record<string, unknown>;
  delete patched['branch'];
  patched['commit'] = headSHA;
  patched['preview'] = true;
  patched['destroyOnFinalize'] = false;
  return patched;
}

/** The whole preview Stack object of `pull` (to create). */
export function previewStack(
  base: Stack,
  prp: PullRequestPreview,
  pull: OpenPullRequest,
  repoURL: string,
): Stack & { metadata: { name: string; namespace: string } } {
  const o = prp.spec.stackOverrides;
  return {
    apiVersion: `${STACK_GROUP}/${STACK_VERSION}`,
    kind: 'Stack',
    metadata: {
      name: previewStackName(prp.spec.stackRef.name, pull.number),
      namespace: prp.metadata.namespace ?? '',
      labels: {
        ...o?.labels,
        [PREVIEW_LABEL]: prp.metadata.name ?? '',
        [PULL_REQUEST_LABEL]: String(pull.number),
      },
      annotations: {
        ...o?.annotations,
        [REPOSITORY_ANNOTATION]: repoURL,
        [PULL_REQUEST_URL_ANNOTATION]: pull.webURL,
        [HEAD_REF_ANNOTATION]: pull.headRef,
      },
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: 'PullRequestPreview',
          name: prp.metadata.name ?? '',
          uid: prp.metadata.uid ?? '',
          controller: true,
        },
      ],
    },
    spec: previewSpec(base, prp, pull.headSHA),
  };
}

/** Whether `s` is a preview Stack owned by the PullRequestPreview with `uid`. */
export function ownedBy(s: Stack, uid: string): boolean {
  return s.metadata.ownerReferences?.some((r) => r.kind === 'PullRequestPreview' && r.uid === uid) === true;
}
