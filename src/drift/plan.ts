/**
 * Drift checks, the pure part (docs/drift.md): which Stacks a DriftDetection selects, when each
 * is due (interval plus jitter), whether a Stack can be checked now, the check Stack that runs
 * `pulumi preview --refresh` at the deployed commit, what a check's change set says drifted, and
 * how one check's outcome moves a Stack's status entry and which event it implies. No Kubernetes
 * calls and no clock: callers pass `now` (ms since the epoch) and a random source.
 */
import { createHash } from 'node:crypto';
import { controlledBy, controllerReference } from '../api/meta.ts';
import { STACK_GROUP, STACK_VERSION, type Stack } from '../api/pko.ts';
import {
  API_VERSION,
  DRIFT_BASE_LABEL,
  DRIFT_CHECK_LABEL,
  type DriftDetection,
  type DriftEventRecord,
  type DriftStackStatus,
  type LabelSelector,
  isDriftCheck,
} from '../api/v1alpha1.ts';

export { isDriftCheck };
import { parseDuration } from '../api/duration.ts';
import type { ChangeSet, ResourceChange } from '../changes/types.ts';
import { kubeTime } from '../kube/status.ts';
import { boundText } from '../text.ts';

/** Shortest `spec.interval` accepted: a check runs a whole preview in a workspace pod. */
export const MIN_INTERVAL_MS = 10 * 60_000;
/** Longest `spec.interval` (the CRD's ceiling); a longer one stored before the rule is lowered to it. */
export const MAX_INTERVAL = '720h';
export const MAX_INTERVAL_MS = 720 * 3_600_000;
/** Default `spec.interval` (also the CRD default). */
export const DEFAULT_INTERVAL = '1h';
/** Each due time is delayed by a random part of at most this fraction of the interval. */
export const JITTER_FRACTION = 0.1;
/** Retry of a check deferred because the Stack was running (or abandoned mid-check), ms. */
export const DEFER_RETRY_MS = 60_000;
/** A check Stack whose run has not finished after this long is deleted and reported failed, ms. */
export const CHECK_TIMEOUT_MS = 30 * 60_000;
/** Stacks listed in a DriftDetection's status (more are checked, not listed). */
export const MAX_STATUS_STACKS = 500;
/** Length of an entry's and an event's message, UTF-16 code units (CRD maxLength 4096). */
export const MAX_MESSAGE = 4000;
/** PKO's limit on a Stack name (its workspace's StatefulSet and pod names derive from it). */
export const MAX_STACK_NAME = 42;

/** Whether `labels` satisfy `selector` (Kubernetes semantics; an empty selector selects all). */
export function matchesSelector(labels: Record<string, string>, selector: LabelSelector): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || value === undefined || !values.includes(value)) return false;
        break;
      case 'NotIn':
        if (has && value !== undefined && values.includes(value)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/**
 * Why `s` is never drift-checked, or undefined when it may be: a preview Stack (`spec.preview`:
 * it deploys nothing, so nothing can drift from it — PullRequestPreview previews and drift checks
 * are preview Stacks), a Stack labelled as a drift check, or one owned by a PullRequestPreview.
 */
export function notCheckable(s: Stack): string | undefined {
  if (s.metadata.labels?.[DRIFT_CHECK_LABEL] !== undefined) return 'it is a drift check Stack';
  if (s.metadata.ownerReferences?.some((r) => r.kind === 'PullRequestPreview') === true)
    return 'it is a pull-request preview Stack';
  if (s.spec?.preview === true) return 'it is a preview Stack (spec.preview), which deploys nothing';
  return undefined;
}

/**
 * The Stacks of `stacks` (one namespace) that `dd` selects — by `stackNames` or `selector` —
 * and may check ({@link notCheckable}), sorted by name; Stacks being deleted are left out.
 */
export function selectStacks(dd: DriftDetection, stacks: Iterable<Stack>): Stack[] {
  const names = new Set(dd.spec.stackNames ?? []);
  const selector = dd.spec.selector;
  const out: Stack[] = [];
  for (const s of stacks) {
    const name = s.metadata.name ?? '';
    const chosen =
      names.has(name) || (selector !== undefined && matchesSelector(s.metadata.labels ?? {}, selector));
    if (!chosen || s.metadata.deletionTimestamp !== undefined || notCheckable(s) !== undefined) continue;
    out.push(s);
  }
  return out.sort((a, b) => ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1));
}

/**
 * `spec.interval` in ms, or a sentence saying why it is refused: not a Go duration, or shorter
 * than {@link MIN_INTERVAL_MS} (refused, never raised silently; the CRD refuses it too). One
 * above {@link MAX_INTERVAL_MS} (stored before the CRD's ceiling) is lowered to it, and
 * {@link intervalNote} says so.
 */
export function intervalOf(dd: DriftDetection): number | string {
  const raw = dd.spec.interval ?? DEFAULT_INTERVAL;
  let ms: number;
  try {
    ms = parseDuration(raw);
  } catch (err) {
    return `spec.interval: ${(err as Error).message}`;
  }
  if (ms < MIN_INTERVAL_MS) {
    return `spec.interval ${raw} is shorter than 10m: each check runs a pulumi preview --refresh in a workspace pod; set 10m or more`;
  }
  return Math.min(ms, MAX_INTERVAL_MS);
}

/** The sentence for the Ready condition when the stored `spec.interval` is above the ceiling; else undefined. */
export function intervalNote(dd: DriftDetection): string | undefined {
  const raw = dd.spec.interval ?? DEFAULT_INTERVAL;
  let ms: number;
  try {
    ms = parseDuration(raw);
  } catch {
    return undefined;
  }
  return ms > MAX_INTERVAL_MS
    ? `spec.interval ${raw} is above the ${MAX_INTERVAL} ceiling and is not obeyed: checked every ${MAX_INTERVAL}; set ${MAX_INTERVAL} or less`
    : undefined;
}

/** Latest due time a check may have at `now` under `intervalMs` (a later stored one came from a longer interval), ms. */
export function latestDue(now: number, intervalMs: number): number {
  return now + intervalMs + Math.ceil(intervalMs * JITTER_FRACTION);
}

/** `from + interval` plus a random delay of at most {@link JITTER_FRACTION} of the interval, ms. */
export function nextDue(from: number, intervalMs: number, random: () => number): number {
  return from + intervalMs + Math.floor(random() * intervalMs * JITTER_FRACTION);
}

/** First due time of a newly selected Stack: within the first jitter window, so many spread out. */
export function firstDue(now: number, intervalMs: number, random: () => number): number {
  return now + Math.floor(random() * intervalMs * JITTER_FRACTION);
}

/** Whether `s` is running or about to run (PKO v2 `currentUpdate`, or `Reconciling=True`). */
export function isRunning(s: Stack): boolean {
  const cur = s.status?.currentUpdate;
  if (cur?.name !== undefined && cur.name !== '') return true;
  return s.status?.conditions?.some((c) => c.type === 'Reconciling' && c.status === 'True') === true;
}

/**
 * Whether `s` can be checked now: `{ commit }` (its `status.lastUpdate.lastSuccessfulCommit`)
 * when it is Ready at that commit and not running; else why not, and whether only because it
 * runs (a short retry) or because it is not deployed or not Ready (the next interval).
 */
export function readiness(s: Stack): { commit: string } | { why: string; running: boolean } {
  if (isRunning(s)) return { why: 'the Stack is running; the check is deferred', running: true };
  const ready = s.status?.conditions?.find((c) => c.type === 'Ready');
  const last = s.status?.lastUpdate;
  const commit = last?.lastSuccessfulCommit;
  if (commit === undefined || commit === '')
    return {
      why: 'the Stack has no successful deployment yet (no status.lastUpdate.lastSuccessfulCommit)',
      running: false,
    };
  if (ready?.status !== 'True')
    return {
      why: `the Stack is not Ready (${ready?.reason ?? 'no Ready condition'}); the check waits for a successful run`,
      running: false,
    };
  if (last?.state !== undefined && last.state !== 'succeeded')
    return {
      why: `the Stack's last run ${last.state}; the check waits for a successful run`,
      running: false,
    };
  if (last?.lastAttemptedCommit !== undefined && last.lastAttemptedCommit !== commit)
    return {
      why: 'the Stack is not at its last successful commit; the check waits for a successful run',
      running: false,
    };
  return { commit };
}

/**
 * Name of a check Stack of `base`: `<base>-drift-<8 hex>` within {@link MAX_STACK_NAME}
 * characters (the base name cut to fit, no trailing `-`/`.`); the hash of `seed` tells checks apart.
 */
export function checkStackName(base: string, seed: string): string {
  const hash = createHash('sha256').update(seed).digest('hex').slice(0, 8);
  const suffix = `-drift-${hash}`;
  const head = base.slice(0, MAX_STACK_NAME - suffix.length).replace(/[-.]+$/, '');
  return `${head}${suffix}`;
}

/**
 * The check Stack of `base` for `dd`: the base Stack's spec with `preview: true`, `refresh: true`,
 * `commit: <commit>`, no `branch`, `destroyOnFinalize: false` (deleting it never destroys the
 * Stack's resources), `workspaceReclaimPolicy: Retain` (the workspace pod, whose log holds the
 * change set, stays until the check Stack is deleted), no resync (`continueResyncOnCommitMatch`
 * false: it runs once) and no `expectNoRefreshChanges` (drift must show as a change set, not as a
 * failed run). Labelled {@link DRIFT_CHECK_LABEL}/{@link DRIFT_BASE_LABEL}, controlled by `dd`.
 * Everything else — service account, source, workspace template, credentials — is the base
 * Stack's own, exactly; the DriftDetection sets nothing of it.
 */
export function checkStack(
  base: Stack,
  dd: DriftDetection,
  name: string,
  commit: string,
): Stack & { metadata: { name: string; namespace: string } } {
  const spec = structuredClone(base.spec ?? {});
  delete spec.branch;
  delete spec['expectNoRefreshChanges'];
  // A git source is pinned to the deployed commit; Flux and Program sources have no commit
  // field (PKO runs their current artifact, which is the deployed one while the Stack is Ready).
  if (spec.projectRepo !== undefined) spec.commit = commit;
  spec.preview = true;
  spec['refresh'] = true;
  spec['destroyOnFinalize'] = false;
  spec['workspaceReclaimPolicy'] = 'Retain';
  spec['continueResyncOnCommitMatch'] = false;
  return {
    apiVersion: `${STACK_GROUP}/${STACK_VERSION}`,
    kind: 'Stack',
    metadata: {
      name,
      namespace: base.metadata.namespace ?? '',
      labels: {
        [DRIFT_CHECK_LABEL]: dd.metadata.name ?? '',
        [DRIFT_BASE_LABEL]: base.metadata.name ?? '',
      },
      ownerReferences: [controllerReference(API_VERSION, 'DriftDetection', dd)],
    },
    spec,
  };
}

/** Whether `s` is a check Stack controlled by the DriftDetection with `uid` (labels alone prove nothing). */
export function checkOwnedBy(s: Stack, uid: string): boolean {
  return controlledBy(s.metadata, 'DriftDetection', uid);
}

/** One resource that differs from the deployed state. */
export interface DriftedResource {
  type: string;
  name: string;
  urn: string;
  /** Top-level properties that differ (from the refresh diff, else the preview's). */
  properties: string[];
  /** Property lines: what the refresh read that differs, then what the preview would change back. */
  diff: string[];
}

/** What a check's change set says. */
export type DriftAnalysis =
  | { kind: 'clean' }
  | { kind: 'drifted'; resources: DriftedResource[]; count: number; fingerprint: string }
  | { kind: 'failed'; why: string };

/** Operations that change nothing (a refresh is the read; its diff is looked at separately). */
const NO_CHANGE: ReadonlySet<string> = new Set(['same', 'refresh', 'read', 'discard', 'discard-replaced']);
/** The root stack resource: its outputs are not infrastructure. */
const ROOT_TYPE = 'pulumi:pulumi:Stack';

/** Top-level property names of diff lines (`~ content:`, `~ size   : 11 => 20`, `+ tags: {`). */
export function propertiesOf(diff: readonly string[]): string[] {
  const out: string[] = [];
  for (const line of diff) {
    const m = /^[~+-]{1,2}\s?([^\s:][^:]*?)\s*:/.exec(line);
    const name = m?.[1];
    if (name !== undefined && !name.startsWith('--') && !out.includes(name)) out.push(name);
  }
  return out;
}

/**
 * What a check's change set (a `pulumi preview --refresh`, PKO v2 workspace log) says drifted:
 * a resource drifted when its refresh step shows property lines (the state read back differs from
 * the deployed one) or the preview would change it back (any step but same/read). The root stack
 * resource is left out. A failed or unread run is `failed`; a run read incompletely with no drift
 * seen is `failed` too (nothing proves it clean).
 */
export function analyzeDrift(set: ChangeSet): DriftAnalysis {
  if (set.failed) {
    const err = set.errors[0];
    return { kind: 'failed', why: `the check's preview failed${err !== undefined ? `: ${err}` : ''}` };
  }
  const byUrn = new Map<string, DriftedResource>();
  const entry = (r: ResourceChange): DriftedResource => {
    const key = r.urn !== '' ? r.urn : `${r.type}::${r.name}`;
    let d = byUrn.get(key);
    if (d === undefined) {
      d = { type: r.type, name: r.name, urn: r.urn, properties: [], diff: [] };
      byUrn.set(key, d);
    }
    return d;
  };
  for (const r of set.resources) {
    if (r.type === ROOT_TYPE) continue;
    const lines = r.diff.filter((l) => !/^\s*--outputs:--\s*$/.test(l));
    if (r.op === 'refresh' && (lines.length > 0 || r.diffOmitted > 0)) {
      const d = entry(r);
      for (const p of propertiesOf(lines)) if (!d.properties.includes(p)) d.properties.push(p);
      d.diff.push(...lines);
    } else if (!NO_CHANGE.has(r.op)) {
      const d = entry(r);
      if (d.properties.length === 0) d.properties.push(...propertiesOf(lines));
      if (d.diff.length === 0) d.diff.push(`(${r.op})`, ...lines);
    }
  }
  if (byUrn.size === 0 && !set.complete) {
    return {
      kind: 'failed',
      why: `the check's change set was not read whole (${set.incomplete.join(', ')}), so no drift can be ruled out`,
    };
  }
  if (byUrn.size === 0 && set.run === undefined) return { kind: 'failed', why: 'no run in the check log' };
  const counted = set.omitted.resources;
  if (byUrn.size === 0 && counted === 0) return { kind: 'clean' };
  const resources = [...byUrn.values()];
  const fingerprint = createHash('sha256')
    .update(
      resources
        .map((r) => `${r.urn || `${r.type}::${r.name}`}|${[...r.properties].sort().join(',')}`)
        .sort()
        .join('\n'),
    )
    .digest('hex')
    .slice(0, 16);
  return { kind: 'drifted', resources, count: resources.length + counted, fingerprint };
}

/** The message of a DriftDetected event: a head line, then each resource and its property lines (bounded). */
export function driftMessage(
  label: string,
  commit: string,
  a: Extract<DriftAnalysis, { kind: 'drifted' }>,
): string {
  const n = a.count;
  const lines = [
    `Drift detected in stack ${label} at ${shortCommit(commit)}: ${String(n)} resource${n === 1 ? '' : 's'} differ${n === 1 ? 's' : ''} from the deployed state`,
  ];
  for (const r of a.resources) {
    lines.push(`${r.type} ${r.name}${r.properties.length > 0 ? `: ${r.properties.join(', ')}` : ''}`);
    for (const d of r.diff) lines.push(`    ${d}`);
  }
  return boundText(lines.join('\n'), MAX_MESSAGE, 'utf16');
}

function shortCommit(c: string): string {
  return /^[0-9a-f]{40}$/.test(c) ? c.slice(0, 7) : c;
}

/** The outcome of one finished check of a Stack. */
export type CheckOutcome =
  | { kind: 'clean' }
  | { kind: 'drifted'; analysis: Extract<DriftAnalysis, { kind: 'drifted' }> }
  | { kind: 'failed'; why: string };

/**
 * The entry after check `check` of the Stack (`label` its Pulumi stack name) ended at `now` with
 * `outcome`, and the event it implies:
 * - drifted → `Drifted`; `DriftDetected` unless the same drift (fingerprint) was reported last;
 * - clean → `Clean`; `DriftResolved` when a drift was reported before;
 * - failed → `Failed`; `DriftCheckFailed` unless the previous check failed too.
 * The entry's `check` is cleared; `nextCheckTime` is `next`.
 */
export function afterCheck(
  prev: DriftStackStatus,
  o: { check: string; commit: string; label: string; now: number; next: number; outcome: CheckOutcome },
): DriftStackStatus {
  const time = kubeTime(new Date(o.now));
  const base: DriftStackStatus = {
    name: prev.name,
    uid: prev.uid,
    commit: o.commit,
    lastCheckTime: time,
    nextCheckTime: kubeTime(new Date(o.next)),
    ...(prev.lastEvent !== undefined ? { lastEvent: prev.lastEvent } : {}),
  };
  const event = (reason: DriftEventRecord['reason'], message: string): DriftEventRecord => ({
    reason,
    check: o.check,
    time,
    message: boundText(message, MAX_MESSAGE, 'utf16'),
    commit: o.commit,
  });
  switch (o.outcome.kind) {
    case 'drifted': {
      const a = o.outcome.analysis;
      const message = driftMessage(o.label, o.commit, a);
      const same = prev.driftFingerprint === a.fingerprint;
      return {
        ...base,
        result: 'Drifted',
        changedResources: a.count,
        message,
        driftFingerprint: a.fingerprint,
        ...(same ? {} : { lastEvent: event('DriftDetected', message) }),
      };
    }
    case 'clean': {
      const resolved = prev.driftFingerprint !== undefined;
      return {
        ...base,
        result: 'Clean',
        changedResources: 0,
        message: 'no drift',
        ...(resolved
          ? {
              lastEvent: event(
                'DriftResolved',
                `Drift resolved in stack ${o.label} at ${shortCommit(o.commit)}: every resource matches the deployed state again`,
              ),
            }
          : {}),
      };
    }
    case 'failed': {
      const message = `Drift check of stack ${o.label} at ${shortCommit(o.commit)} failed: ${o.outcome.why}`;
      const repeated = prev.result === 'Failed';
      return {
        ...base,
        result: 'Failed',
        message: boundText(o.outcome.why, MAX_MESSAGE, 'utf16'),
        ...(prev.driftFingerprint !== undefined ? { driftFingerprint: prev.driftFingerprint } : {}),
        ...(repeated ? {} : { lastEvent: event('DriftCheckFailed', message) }),
      };
    }
  }
}

/** The entry of a check that did not run, or was abandoned: `Deferred`, no event, the rest kept. */
export function deferred(prev: DriftStackStatus, why: string, now: number, next: number): DriftStackStatus {
  const { check: _inFlight, ...rest } = prev;
  return {
    ...rest,
    result: 'Deferred',
    message: boundText(why, MAX_MESSAGE, 'utf16'),
    lastCheckTime: kubeTime(new Date(now)),
    nextCheckTime: kubeTime(new Date(next)),
  };
}
