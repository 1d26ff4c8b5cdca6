/**
 * The template context: every documented key, always present, `null` when unknown (templates/README.md).
 * `templates/README.md` documents exactly these keys (a test keeps the two equal).
 *
 * Context objects have no prototype, so `{{constructor}}`, `{{__proto__}}` and friends are
 * unknown keys like any other typo (strict mode throws), and nothing inherited is reachable.
 */
import { createHash } from 'node:crypto';
import type { NotificationEvent } from '../api/event.ts';
import type { ProviderType } from '../api/v1alpha1.ts';
import { cleanMessage, meaningfulLine } from '../text.ts';
import { changesContext, type ChangesContext } from './changes.ts';
import { evaluateGate, gateDescription } from '../changes/gate.ts';

/** Keys whose value is a string map (`{{metadata.x}}`, `{{#each labels}}`); the rest are scalars. */
export const MAP_KEYS = ['metadata', 'labels'] as const;

/** Every key of the template context, in documentation order. */
export const CONTEXT_KEYS = [
  'clusterName',
  'namespace',
  'kind',
  'name',
  'uid',
  'stackName',
  'pulumiStack',
  'eventId',
  'reason',
  'severity',
  'operation',
  'phase',
  'state',
  'emoji',
  'title',
  'message',
  'summary',
  'output',
  'lastLine',
  'timestamp',
  'revision',
  'commit',
  'shortCommit',
  'repository',
  'branch',
  'updateName',
  'updateType',
  'permalink',
  'failures',
  'pullRequest',
  'followsPreview',
  'gate',
  'changes',
  'metadata',
  'labels',
  'reportingController',
  'providerType',
  'markerId',
  'truncated',
  'truncationNote',
] as const;
export type ContextKey = (typeof CONTEXT_KEYS)[number];

export type Operation = 'preview' | 'update' | 'destroy' | 'refresh' | 'drift';
export type Phase = 'started' | 'succeeded' | 'failed' | 'stalled';
export type StatusState = 'pending' | 'success' | 'failure';

/** The values behind {@link CONTEXT_KEYS} (see templates/README.md for meanings). */
export interface TemplateContext {
  clusterName: string;
  namespace: string;
  kind: 'Stack' | 'Update';
  name: string;
  uid: string;
  stackName: string;
  pulumiStack: string | null;
  eventId: string;
  reason: string;
  severity: 'info' | 'error';
  operation: Operation | null;
  phase: Phase;
  state: StatusState;
  emoji: string;
  title: string;
  message: string;
  summary: string;
  output: string | null;
  lastLine: string | null;
  timestamp: string;
  revision: string | null;
  commit: string | null;
  shortCommit: string | null;
  repository: string | null;
  branch: string | null;
  updateName: string | null;
  updateType: string | null;
  permalink: string | null;
  failures: string | null;
  pullRequest: string | null;
  /**
   * True for a finished up/destroy of a PullRequestPreview's base Stack: its comment edits, on the
   * pull request the commit merged, the comment the preview wrote (docs/previews.md).
   */
  followsPreview: boolean;
  /**
   * Why the PullRequestPreview's gate fails this preview (`gate: 1 to delete: <type>::<name>`,
   * `gate: change set unavailable: …`, `gate: change set incomplete: …`, `gate: 1 to delete or
   * more: <type>::<name> (change set incomplete: …)`); null without a gate or when it passes. The commit status
   * is then `failure` with this description (docs/previews.md).
   */
  gate: string | null;
  /** What the run changed or would change (./changes.ts); null when the event carries no change information. */
  changes: ChangesContext | null;
  metadata: Readonly<Record<string, string>>;
  labels: Readonly<Record<string, string>>;
  reportingController: string;
  providerType: ProviderType;
  markerId: string;
  truncated: boolean;
  truncationNote: string | null;
}

export interface ContextOptions {
  /** The controller's cluster name (`--cluster-name`). */
  clusterName: string;
  providerType: ProviderType;
}

const OPERATIONS: Record<string, Operation> = {
  Preview: 'preview',
  Update: 'update',
  Destroy: 'destroy',
  Refresh: 'refresh',
};
const OPERATION_TITLES: Record<Operation, string> = {
  preview: 'Preview',
  update: 'Update',
  destroy: 'Destroy',
  refresh: 'Refresh',
  drift: 'Drift check',
};
const EMOJI: Record<Phase, string> = { started: '⏳', succeeded: '✅', failed: '❌', stalled: '⚠️' };

/** Operation and phase of an event reason (`UpdateFailed` → update/failed; `StackStalled` → null/stalled). */
export function reasonParts(reason: string): { operation: Operation | null; phase: Phase } {
  if (reason === 'StackStalled') return { operation: null, phase: 'stalled' };
  // Drift checks (docs/drift.md): drift or a failed check is a failure of the deployed commit.
  if (reason === 'DriftResolved') return { operation: 'drift', phase: 'succeeded' };
  if (reason === 'DriftDetected' || reason === 'DriftCheckFailed')
    return { operation: 'drift', phase: 'failed' };
  const m = /^(Preview|Update|Destroy|Refresh)(Started|Succeeded|Failed)$/.exec(reason);
  const op = m?.[1];
  const ph = m?.[2];
  const phase: Phase = ph === 'Started' ? 'started' : ph === 'Succeeded' ? 'succeeded' : 'failed';
  return { operation: op === undefined ? null : (OPERATIONS[op] ?? null), phase };
}

/** Commit status state of an event reason: *Started → pending, *Succeeded and DriftResolved → success, else failure. */
export function stateOf(reason: string): StatusState {
  if (reason.endsWith('Started')) return 'pending';
  if (reason.endsWith('Succeeded') || reason === 'DriftResolved') return 'success';
  return 'failure';
}

/**
 * Stable id of the sticky pull-request comment for one Stack: the first 16 hex characters of
 * SHA-256 over `cluster/namespace/stack`. A preview Stack's events use its base Stack's name
 * (`NotificationEvent.previewThread`), so the preview and the base Stack's deployment of the
 * merge share one comment.
 */
export function markerIdFor(clusterName: string, namespace: string, stackName: string): string {
  return createHash('sha256')
    .update(`${clusterName}\u0000${namespace}\u0000${stackName}`)
    .digest('hex')
    .slice(0, 16);
}

/** The hidden HTML comment that marks our sticky comment. */
export function markerFor(markerId: string): string {
  return `<!-- pko-notification-controller:${markerId} -->`;
}

const TO_PRIMITIVE_LABEL = Symbol.toPrimitive;

/**
 * A prototype-less copy of `values` (strict-mode errors name it `label`). Symbol keys are
 * unreachable from templates, so the label does not add a key.
 */
export function bare<T extends object>(values: T, label: string): T {
  const o = Object.create(null) as T;
  Object.assign(o, values);
  Object.defineProperty(o, TO_PRIMITIVE_LABEL, { value: () => label, enumerable: false });
  return o;
}

function stringMap(entries: Iterable<[string, string | undefined]>, label: string): Record<string, string> {
  // Built on the prototype-less object itself: a key such as `__proto__` stays a plain key.
  const out = bare<Record<string, string>>({}, label);
  for (const [k, v] of entries) if (v !== undefined) out[k] = v;
  return out;
}

/**
 * The context of `ev` for rendering: every key of {@link CONTEXT_KEYS}, `null` when unknown.
 * `message` is cleaned again (escape sequences and control characters removed; not bounded);
 * `summary` is its first line (without a trailing colon when more lines follow), `output` the rest
 * (null when the message has one line), `lastLine` the line of `output` that says what failed
 * ({@link meaningfulLine}: the Pulumi CLI's first diagnostic error, else the last `error:` line,
 * else the last non-blank line that is not a bare label such as `stderr:`; null without output).
 */
export function buildContext(ev: NotificationEvent, opts: ContextOptions): TemplateContext {
  const md = ev.metadata;
  const get = (k: string): string | null => {
    const v = md[k];
    return v === undefined || v === '' ? null : v;
  };
  const { operation, phase } = reasonParts(ev.reason);
  const stackName = ev.involvedObject.name;
  const pulumiStack = get('stack');
  const message = cleanMessage(ev.message, Number.MAX_SAFE_INTEGER);
  const nl = message.indexOf('\n');
  const summary = nl < 0 ? message : message.slice(0, nl).replace(/:\s*$/, '');
  const rest = nl < 0 ? '' : message.slice(nl + 1).replace(/^\n+/, '');
  const lastLine = meaningfulLine(rest) ?? '';
  const commit = get('commit');
  const label = pulumiStack ?? `${ev.involvedObject.namespace}/${stackName}`;
  const title =
    operation === null
      ? `Stack ${label} stalled`
      : ev.reason === 'DriftDetected'
        ? `Drift detected in stack ${label}`
        : ev.reason === 'DriftResolved'
          ? `Drift resolved in stack ${label}`
          : `${OPERATION_TITLES[operation]} of stack ${label} ${phase}`;
  // A preview Stack's comment and its base Stack's deployment share the base Stack's marker.
  const markerId = markerIdFor(
    opts.clusterName,
    ev.involvedObject.namespace,
    ev.previewThread?.baseStack ?? stackName,
  );
  const ctx: TemplateContext = {
    clusterName: opts.clusterName,
    namespace: ev.involvedObject.namespace,
    kind: ev.involvedObject.kind,
    name: ev.involvedObject.name,
    uid: ev.involvedObject.uid,
    stackName,
    pulumiStack,
    eventId: ev.id,
    reason: ev.reason,
    severity: ev.severity,
    operation,
    phase,
    state: stateOf(ev.reason),
    emoji: EMOJI[phase],
    title,
    message,
    summary,
    output: rest === '' ? null : rest,
    lastLine: lastLine === '' ? null : lastLine,
    timestamp: ev.timestamp,
    revision: get('revision'),
    commit,
    shortCommit: commit === null ? null : commit.slice(0, 7),
    repository: get('repository'),
    branch: get('branch'),
    updateName: get('updateName'),
    updateType: get('updateType'),
    permalink: get('permalink'),
    failures: get('failures'),
    pullRequest: get('pullRequest'),
    followsPreview: ev.previewThread?.merged === true,
    gate: gateFailure(ev),
    changes: changesContext(ev.changes),
    metadata: stringMap(Object.entries(md), 'metadata'),
    labels: stringMap(Object.entries(ev.labels), 'labels'),
    reportingController: ev.reportingController,
    providerType: opts.providerType,
    markerId,
    truncated: false,
    truncationNote: null,
  };
  return bare(ctx, 'the template context');
}

/**
 * Why the gate an event carries fails it (docs/previews.md, "A gate reviewers can require"), or
 * null: only a `PreviewSucceeded` is judged (a failed preview is a failure anyway). Fails closed:
 * an unusable gate, a change set that is unavailable or incomplete, fail.
 */
export function gateFailure(ev: NotificationEvent): string | null {
  const g = ev.gate;
  if (g === undefined || ev.reason !== 'PreviewSucceeded') return null;
  if (g.invalid !== undefined) return `gate: invalid: ${g.invalid}`;
  const changes = ev.changes;
  if (changes === undefined) return 'gate: change set unavailable: not read';
  if (changes.unavailable !== undefined)
    return `gate: change set unavailable: ${changes.unavailable.replace(/^no change details:\s*/, '')}`;
  const result = evaluateGate(g.gate, changes.set);
  return result.kind === 'pass' ? null : gateDescription(result);
}

/** `ctx` with some values replaced (still prototype-less). */
export function withValues(ctx: TemplateContext, values: Partial<TemplateContext>): TemplateContext {
  return bare({ ...ctx, ...values }, 'the template context');
}
