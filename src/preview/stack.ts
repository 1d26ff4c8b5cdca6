/**
 * The preview Stack of one pull request (pure): the base Stack's spec with `workspaceReclaimPolicy:
 * Retain` ({@link PREVIEW_WORKSPACE_RECLAIM_POLICY}), the PullRequestPreview's
 * `stackOverrides.spec` merged in (RFC 7386), then `preview: true`, `commit: <head sha>`, no
 * `branch`, no `destroyOnFinalize` (false) — always, whatever the base or the overrides say; top-level
 * zero values left out, as PKO stores the spec. Named by
 * ./naming.ts, labelled and annotated with the pull request and repository, owned by the
 * PullRequestPreview (docs/previews.md).
 *
 * What the overrides may hold is an allow-list ({@link OVERRIDABLE_SPEC_FIELDS}, case B10): whoever
 * may create a PullRequestPreview must not make the controller, which may create Stacks, create
 * one with another service account, source, workspace or credentials. The same list is enforced
 * at admission (config/admission) and re-checked here on every sync ({@link refusedOverride}).
 */
import { controlledBy, controllerReference } from '../api/meta.ts';
import { API_VERSION, type PullRequestPreview } from '../api/v1alpha1.ts';
import { GATE_ANNOTATION, checkGate } from '../api/gate.ts';
import { STACK_GROUP, STACK_VERSION, type Stack } from '../api/pko.ts';
import type { OpenPullRequest } from '../forge/types.ts';
import {
  BASE_STACK_ANNOTATION,
  HEAD_REF_ANNOTATION,
  PREVIEW_LABEL,
  PULL_REQUEST_LABEL,
  PULL_REQUEST_URL_ANNOTATION,
  REPOSITORY_ANNOTATION,
  previewStackName,
} from './naming.ts';

/**
 * The `stackOverrides.spec` fields a PullRequestPreview may set, each with why it is harmless:
 * none changes who the preview runs as (service account, workspace Pod), what it checks out
 * (repository, git credentials, program source) or which credentials and state it gets
 * (backend, access token, secrets provider, Env/FS references) — the base Stack decides those.
 * Keep config/admission/preview_overrides_policy.yaml (`allowed`) and the CRD in step.
 */
export const OVERRIDABLE_SPEC_FIELDS = {
  resyncFrequencySeconds: 'how often PKO re-runs the preview: timing only',
  continueResyncOnCommitMatch: 're-run the same commit on every resync: timing only',
  refresh: "refresh state before the preview: reads what the Stack's credentials read anyway",
  expectNoRefreshChanges: 'fail the run when a refresh finds changes: a stricter check',
  retryOnUpdateConflict: 'retry while another update of the stack runs: timing only',
  retryMaxBackoffDurationSeconds: 'longest wait between retries: timing only',
  workspaceReclaimPolicy: 'keep or delete the workspace after a run: the same Pod either way',
  targets: 'limit the preview to some resources: narrows what runs',
  targetDependents: 'with targets, include their dependents: still within the stack',
  config: "plain configuration values: inputs of the program, which the pull request's code chooses anyway",
  envRefs:
    'environment of the runs: Literal values, or Secrets the writer of the PullRequestPreview may get (admission policy)',
} as const satisfies Record<string, string>;
export type OverridableSpecField = keyof typeof OVERRIDABLE_SPEC_FIELDS;

/**
 * `workspaceReclaimPolicy` of a preview Stack unless `stackOverrides.spec` sets one (the base
 * Stack's is not copied). The change set shown on the pull request is read from the workspace
 * pod's log (src/enrich/changes.ts); with `Delete` PKO deletes that pod, and its log, right after
 * a successful run, so the details would depend on the controller having followed the log from
 * the run's start — a race a short preview (a few seconds) can lose, or a restart of the
 * controller. `Retain` keeps one idle workspace pod per active preview (at most `maxPreviews`),
 * replaced at the next push and deleted with the preview Stack when the pull request closes.
 */
export const PREVIEW_WORKSPACE_RECLAIM_POLICY = 'Retain';

/** Stack spec fields the controller always sets on a preview Stack (overrides of them are refused). */
export const CONTROLLER_SPEC_FIELDS = ['preview', 'commit', 'branch', 'destroyOnFinalize'] as const;

/**
 * `envRefs` entry types an override may use: `Literal`, and `Secret` (same namespace, checked at
 * admission). PKO's `Env` and `FS` read the operator's own environment and files.
 */
export const OVERRIDABLE_ENV_REF_TYPES = ['Literal', 'Secret'] as const;

/** Most `envRefs` entries of type Secret in one override (the admission policy checks each). */
export const MAX_SECRET_ENV_REFS = 8;

/**
 * Label and annotation keys an override may not set: prefixes `pulumi.com/`, `auto.pulumi.com/`
 * (and any other subdomain of pulumi.com) and `notification.pko.dev/` belong to PKO and to this
 * controller. The CRD has the same pattern.
 */
export const RESERVED_KEY = /^([^/]*\.)?(pulumi\.com|notification\.pko\.dev)\//;

/**
 * Whether `envRefs` entries of type Secret may be applied: only while the shipped admission policy
 * checks them against the PullRequestPreview's writer (./admission.ts says why not otherwise).
 */
export type SecretEnvRefsVerdict = { allowed: true } | { allowed: false; why: string };

/** The `envRefs` names of type Secret in `overrides.spec` (empty when none). */
export function secretEnvRefNames(overrides: PullRequestPreview['spec']['stackOverrides']): string[] {
  const envRefs = overrides?.spec?.['envRefs'];
  if (!isObject(envRefs)) return [];
  return Object.keys(envRefs).filter((k) => {
    const e = envRefs[k];
    return isObject(e) && e['type'] === 'Secret';
  });
}

/**
 * The first reason the overrides of a PullRequestPreview may not be applied, or undefined when
 * they may: a `stackOverrides.spec` field outside {@link OVERRIDABLE_SPEC_FIELDS}, an `envRefs`
 * entry that is not an object of type Literal/Secret, a Secret entry with a namespace, too many
 * Secret entries, Secret entries while `secrets` is not `allowed`, or a reserved label/annotation
 * key. The message names the field (`stackOverrides.spec.serviceAccountName …`) and says what to
 * do; it never contains values (a Literal may hold a token).
 */
export function refusedOverride(
  overrides: PullRequestPreview['spec']['stackOverrides'],
  secrets: SecretEnvRefsVerdict,
): string | undefined {
  for (const kind of ['labels', 'annotations'] as const) {
    const m = overrides?.[kind];
    const key = isObject(m) ? Object.keys(m).find((k) => RESERVED_KEY.test(k)) : undefined;
    if (key !== undefined) {
      return `stackOverrides.${kind}.${key} is reserved: keys under pulumi.com/, auto.pulumi.com/ and notification.pko.dev/ belong to PKO and to this controller`;
    }
  }
  const spec: unknown = overrides?.spec;
  if (spec === undefined || spec === null) return undefined;
  if (!isObject(spec)) return 'stackOverrides.spec must be an object';
  const allowed = Object.keys(OVERRIDABLE_SPEC_FIELDS);
  for (const field of Object.keys(spec)) {
    if ((CONTROLLER_SPEC_FIELDS as readonly string[]).includes(field)) {
      return `stackOverrides.spec.${field} may not be overridden: a preview Stack always has preview true, the pull request's head commit, no branch and destroyOnFinalize false`;
    }
    if (!allowed.includes(field)) {
      return `stackOverrides.spec.${field} may not be overridden: a preview Stack keeps its base Stack's service account, source, workspace and credentials; overridable: ${allowed.join(', ')}`;
    }
  }
  const envRefs = spec['envRefs'];
  if (envRefs === undefined || envRefs === null) return undefined;
  if (!isObject(envRefs)) return 'stackOverrides.spec.envRefs must be an object';
  for (const [name, e] of Object.entries(envRefs)) {
    if (e === null) continue;
    const type: unknown = isObject(e) ? e['type'] : undefined;
    if (!isObject(e) || !(OVERRIDABLE_ENV_REF_TYPES as readonly unknown[]).includes(type)) {
      return `stackOverrides.spec.envRefs.${name} has type ${typeof type === 'string' ? type : 'none'}: only Literal and Secret are allowed (Env and FS read the PKO operator's own environment and files)`;
    }
    const ns = isObject(e['secret']) ? e['secret']['namespace'] : undefined;
    if (type === 'Secret' && ns !== undefined && ns !== '') {
      return `stackOverrides.spec.envRefs.${name}.secret.namespace may not be set: a preview Stack reads Secrets of its own namespace only`;
    }
  }
  const names = secretEnvRefNames(overrides);
  if (names.length > MAX_SECRET_ENV_REFS) {
    return `stackOverrides.spec.envRefs names ${String(names.length)} Secrets; at most ${String(MAX_SECRET_ENV_REFS)} are allowed`;
  }
  if (names.length > 0 && !secrets.allowed) {
    return `stackOverrides.spec.envRefs.${names[0] ?? ''} is of type Secret, and Secret envRefs are applied only while the admission policy checks that whoever writes the PullRequestPreview may get them: ${secrets.why}`;
  }
  return undefined;
}

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

/**
 * Whether a top-level Stack spec value is one PKO drops when it writes the Stack back: every
 * field of PKO's `StackSpec` but `stack` is `omitempty` in its Go type (v2.9.0
 * `operator/api/pulumi/shared/stack_types.go`), and PKO updates the whole object after adding
 * its finalizer, so `false`, `0`, `""` and `[]` vanish from the stored spec (a new
 * generation). Written by us, such a value would be put back by the next sync — another
 * generation, and PKO runs the preview again (seen on real PKO v2.9.0: every new preview Stack
 * ran twice).
 */
function droppedByPko(key: string, v: unknown): boolean {
  if (key === 'stack') return false;
  return v === false || v === 0 || v === '' || v === null || (Array.isArray(v) && v.length === 0);
}

/**
 * The spec a preview Stack of `pull` should have. Only the {@link OVERRIDABLE_SPEC_FIELDS} of the
 * overrides are merged (the reconciler refuses others before it gets here: {@link refusedOverride}).
 * Top-level zero values are left out, as PKO stores the spec ({@link droppedByPko}): no
 * `destroyOnFinalize` means false.
 */
export function previewSpec(base: Stack, prp: PullRequestPreview, headSHA: string): Record<string, unknown> {
  const copied = structuredClone(base.spec ?? {}) as Record<string, unknown>;
  copied['workspaceReclaimPolicy'] = PREVIEW_WORKSPACE_RECLAIM_POLICY;
  const overrides: unknown = prp.spec.stackOverrides?.spec;
  const allowed = isObject(overrides)
    ? Object.fromEntries(Object.entries(overrides).filter(([k]) => k in OVERRIDABLE_SPEC_FIELDS))
    : {};
  const patched = applyMergePatch(copied, allowed) as Record<string, unknown>;
  delete patched['branch'];
  patched['commit'] = headSHA;
  patched['preview'] = true;
  delete patched['destroyOnFinalize'];
  return Object.fromEntries(Object.entries(patched).filter(([k, v]) => !droppedByPko(k, v)));
}

/**
 * Annotations the controller keeps on every preview Stack of `prp` beside the pull request's own:
 * {@link BASE_STACK_ANNOTATION} (the base Stack's name) and, with `spec.gate`,
 * {@link GATE_ANNOTATION} (the gate as JSON). Patched onto existing preview Stacks when they
 * differ (a removed gate is removed).
 */
/** Keys of {@link controllerAnnotations} (present or not). */
export const CONTROLLER_ANNOTATIONS = [BASE_STACK_ANNOTATION, GATE_ANNOTATION] as const;

export function controllerAnnotations(prp: PullRequestPreview): Record<string, string> {
  const out: Record<string, string> = { [BASE_STACK_ANNOTATION]: prp.spec.stackRef.name };
  const gate: unknown = prp.spec.gate;
  if (gate !== undefined && gate !== null) {
    // A gate the CRD would refuse (stored before it) is carried as written: the renderer then
    // fails closed, saying what is wrong, rather than dropping the gate.
    const checked = checkGate(gate);
    out[GATE_ANNOTATION] = JSON.stringify(checked.gate ?? gate).slice(0, 16 * 1024);
  }
  return out;
}

/**
 * The merge patch of `metadata.annotations` that brings the controller's annotations of `s` to
 * {@link controllerAnnotations} (`null` removes one no longer wanted); undefined when they agree.
 */
export function controllerAnnotationPatch(
  s: Stack,
  prp: PullRequestPreview,
): Record<string, string | null> | undefined {
  const want = controllerAnnotations(prp);
  const have = s.metadata.annotations ?? {};
  const out: Record<string, string | null> = {};
  for (const k of CONTROLLER_ANNOTATIONS) {
    const w = want[k];
    if (have[k] !== w) out[k] = w ?? null;
  }
  return Object.keys(out).length === 0 ? undefined : out;
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
        ...controllerAnnotations(prp),
      },
      ownerReferences: [controllerReference(API_VERSION, 'PullRequestPreview', prp)],
    },
    spec: previewSpec(base, prp, pull.headSHA),
  };
}

/**
 * Whether `s` is a preview Stack of the PullRequestPreview with `uid`: its controller owner
 * reference (`controller: true`) names that PullRequestPreview. Labels alone prove nothing (anyone
 * who may write Stacks can set them); only such Stacks are ever patched or deleted.
 */
export function ownedBy(s: Stack, uid: string): boolean {
  return controlledBy(s.metadata, 'PullRequestPreview', uid);
}

/** `<kind> <name>` of the object that controls `s`, if any (for messages). */
export function controllerOf(s: Stack): string | undefined {
  const r = s.metadata.ownerReferences?.find((o) => o.controller === true);
  return r === undefined ? undefined : `${r.kind} ${r.name}`;
}
