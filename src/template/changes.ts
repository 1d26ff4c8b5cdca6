/**
 * The `changes` template key (templates/README.md, "The `changes` key"): an event's change set
 * ({@link EventChanges}, src/changes/types.ts) in a stable shape for templates — counts, a
 * one-line summary, the changed resources grouped by operation, their property lines — or the
 * sentence saying why there are no details.
 *
 * Every object is prototype-less like the rest of the context (./context.ts `bare`).
 */
import type { EventChanges } from '../api/event.ts';
import {
  INCOMPLETE_REASON_TEXT as INCOMPLETE,
  STEP_OPS,
  STEP_OP_GLYPH,
  type ChangeSet,
  type StepOp,
} from '../changes/types.ts';
import { formatCount } from '../text.ts';

/** Keys of the `changes` object, in documentation order (templates/README.md). */
export const CHANGES_KEYS = [
  'summary',
  'short',
  'counts',
  'changed',
  'operations',
  'resources',
  'diff',
  'total',
  'shown',
  'omitted',
  'note',
  'complete',
  'incomplete',
  'source',
  'dryRun',
  'failed',
  'errors',
  'unavailable',
] as const;

/** Keys of one resource (`changes.resources[]`, `changes.operations[].resources[]`). */
export const CHANGED_RESOURCE_KEYS = [
  'op',
  'glyph',
  'type',
  'name',
  'urn',
  'diff',
  'diffText',
  'diffOmitted',
] as const;

/** One changed resource as templates see it. */
export interface ChangedResource {
  /** Pulumi's step operation (`create`, `update`, `replace`, `delete`, …). */
  op: StepOp;
  /** The operation's glyph without padding: `+`, `~`, `-`, `+-`, … */
  glyph: string;
  /** Type token, e.g. `aws:s3/bucket:Bucket`. */
  type: string;
  /** The resource's name (the URN's last part; the type when the URN was not read). */
  name: string;
  /** The URN; '' when not read. */
  urn: string;
  /** Property lines as the CLI printed them (`~ value: "one" => "two"`), redacted. */
  diff: string[];
  /**
   * The resource's block as one text: `<glyph> <type> <name> (<op>)`, then its property lines
   * indented by 4 spaces (for `{{codeBlock … "diff"}}`).
   */
  diffText: string;
  /** Property lines the parser did not keep (its caps). */
  diffOmitted: number;
}

/** The resources of one operation (`changes.operations[]`). */
export interface OperationGroup {
  op: StepOp;
  glyph: string;
  /** `to create` for a preview, `created` for a run that applied, `create attempted` for one that applied and failed. */
  label: string;
  /** Resources of this operation in the run (exact when the CLI's summary was read). */
  count: number;
  /** The ones shown (the comment may show fewer to fit the forge: see `changes.note`). */
  resources: ChangedResource[];
  /**
   * Whether the group's line (`+2 to create`) says more than the summary: false when this is the
   * only group and its line is the summary itself, so the comment does not repeat it.
   */
  heading: boolean;
}

/** `changes` in the template context (null when the event carries no change information). */
export interface ChangesContext {
  /**
   * What is known of the run's changes, in one line (unknown is never "no changes"):
   * `+1 to create, ~1 to update, -1 to delete, +-1 to replace` (`created`… after a run that
   * applied) or `no changes` — only when `complete`; else `change set incomplete: <why>` (with
   * `(read so far: …)` when some resource was read) or `change set unavailable: <why>`.
   * Raw-safe (digits, glyphs and fixed words only) only when `complete`: otherwise it carries the
   * reason, to be written escaped (`{{changes.summary}}`).
   */
  summary: string;
  /** `+1 ~1 -1 +-1` or `no changes` when `complete`; else the same text as `summary`. */
  short: string;
  /**
   * Resources per operation, every operation of {@link STEP_OPS} present (0 when none): exact
   * when `complete`, a lower bound (what was read) when not, all 0 when unavailable.
   */
  counts: Record<StepOp, number>;
  /** Resources changed (every operation but `same`). */
  changed: number;
  /** Changed resources grouped by operation: create, update, replace, delete, then the others. */
  operations: OperationGroup[];
  /** Every shown changed resource, in the order of `operations`. */
  resources: ChangedResource[];
  /** The `diffText` of every shown resource, one after the other (for one `{{codeBlock changes.diff "diff"}}`). */
  diff: string;
  /** Changed resources the change set holds. */
  total: number;
  /** Changed resources shown. */
  shown: number;
  /** Changed resources not shown (the parser's cap, or cut to fit the forge's limit). */
  omitted: number;
  /** `Showing X of Y resources.` when some are not shown; else null. */
  note: string | null;
  /** The run was read whole: only then do `summary`, `short` and `counts` state the result. */
  complete: boolean;
  /** Why not complete, in words (and what the source said of it: the change set's `note`); null when complete. */
  incomplete: string | null;
  /** Where the details come from: `workspace-log` or `pulumi-cloud`; null when unavailable. */
  source: string | null;
  /** A preview (nothing was changed); null when unknown. */
  dryRun: boolean | null;
  /** The run ended with an error. */
  failed: boolean;
  /** Error lines the CLI printed. */
  errors: string[];
  /** `no change details: …why…` when there are no details; else null. */
  unavailable: string | null;
}

/**
 * Bounds of what templates see, so a template looping over every resource stays within the render
 * budget (./limits.ts: 20,000 steps, 2,000,000 characters) on the largest change set the parser
 * keeps (1,000 resources, 5,000 property lines of 500 characters). The counts stay exact.
 */
export const CHANGES_CONTEXT_LIMITS = {
  /** Resources shown. */
  maxResources: 300,
  /** Characters of all `diffText` together. */
  maxDiffChars: 200_000,
} as const;

/** Operations in the order the summary and the comment show them. */
const ORDER: readonly StepOp[] = [
  'create',
  'update',
  'delete',
  'replace',
  ...STEP_OPS.filter((o) => !['create', 'update', 'delete', 'replace', 'same'].includes(o)),
];
/** Order of the groups in the comment: what is added and changed first, what goes away last. */
const GROUP_ORDER: readonly StepOp[] = [
  'create',
  'update',
  'replace',
  'delete',
  ...ORDER.filter((o) => !['create', 'update', 'delete', 'replace'].includes(o)),
];

const PAST: Readonly<Record<StepOp, string>> = {
  same: 'unchanged',
  create: 'created',
  update: 'updated',
  delete: 'deleted',
  replace: 'replaced',
  'create-replacement': 'created for replacement',
  'delete-replaced': 'deleted after replacement',
  read: 'read',
  'read-replacement': 'read for replacement',
  refresh: 'refreshed',
  discard: 'discarded',
  'discard-replaced': 'discarded after replacement',
  'remove-pending-replace': 'pending replacements removed',
  import: 'imported',
  'import-replacement': 'imported for replacement',
};

function glyphOf(op: StepOp): string {
  const g = STEP_OP_GLYPH[op].trim();
  return g === '' ? '=' : g;
}

function labelOf(op: StepOp, dryRun: boolean): string {
  return dryRun ? `to ${op}` : PAST[op];
}

/** `Showing X of Y resources.` */
export function resourcesNote(shown: number, total: number): string {
  return `Showing ${formatCount(shown)} of ${formatCount(total)} resources.`;
}

function bareObj<T extends object>(values: T): T {
  return Object.assign(Object.create(null) as T, values);
}

function countsOf(set: ChangeSet | undefined): Record<StepOp, number> {
  const out = bareObj({} as Record<StepOp, number>);
  for (const op of STEP_OPS) out[op] = set?.counts[op] ?? 0;
  return out;
}

/** Prefix of the summary of a change set that is not complete. */
export const INCOMPLETE_PREFIX = 'change set incomplete';
/** Prefix of the summary of an event whose change set is unavailable. */
export const UNAVAILABLE_PREFIX = 'change set unavailable';

/**
 * Why `set` is not complete, in words: the label of each reason, then what the source said (its
 * `note`), joined by `; `; null when complete.
 */
export function incompleteText(set: ChangeSet): string | null {
  if (set.complete) return null;
  const parts = [...set.incomplete.map((r) => INCOMPLETE[r]), ...(set.note === undefined ? [] : [set.note])];
  return parts.length === 0 ? 'the run was not read whole' : parts.join('; ');
}

/**
 * `change set unavailable: <why>` of an event's `unavailable` sentence (`no change details: <why>`,
 * src/enrich/changes.ts): the reason without its `no change details:` start.
 */
export function unavailableSummary(unavailable: string): string {
  const why = unavailable.replace(/^no change details:\s*/, '').trim();
  return `${UNAVAILABLE_PREFIX}: ${why === '' ? 'not read' : why}`;
}

/** The counts of `set` as the summary line and its compact form; null when every count is 0. */
function countsText(set: ChangeSet): { summary: string; short: string } | null {
  const dryRun = set.run?.dryRun ?? true;
  const long: string[] = [];
  const short: string[] = [];
  for (const op of ORDER) {
    const n = set.counts[op] ?? 0;
    if (n === 0) continue;
    long.push(`${glyphOf(op)}${String(n)} ${labelOf(op, dryRun)}`);
    short.push(`${glyphOf(op)}${String(n)}`);
  }
  return long.length === 0 ? null : { summary: long.join(', '), short: short.join(' ') };
}

/**
 * The summary line and its compact form of a change set (unknown is never "no changes"):
 * - complete: `+1 to create, ~1 to update` / `+1 ~1` (past tense after a run that applied), or
 *   `no changes` for both when every count is 0 — the only case that says so;
 * - not complete: both `change set incomplete: <why>` ({@link incompleteText}), with what was
 *   read before it stopped — `change set incomplete (read so far: ~2 to update): <why>` — when
 *   some resource was read (a lower bound, never presented as the result).
 */
export function changeSummary(set: ChangeSet): { summary: string; short: string } {
  const counts = countsText(set);
  const why = incompleteText(set);
  if (why !== null) {
    const text = `${INCOMPLETE_PREFIX}${counts === null ? '' : ` (read so far: ${counts.summary})`}: ${why}`;
    return { summary: text, short: text };
  }
  if (counts === null) return { summary: 'no changes', short: 'no changes' };
  return counts;
}

function resourceOf(r: ChangeSet['resources'][number]): ChangedResource {
  const glyph = glyphOf(r.op);
  const name = r.name === '' ? r.type : r.name;
  const head = `${glyph} ${r.type} ${name} (${r.op}${r.retain ? ', retain' : ''})`;
  const lines = r.diff.map((l) => `    ${l}`);
  if (r.diffOmitted > 0) lines.push(`    … ${formatCount(r.diffOmitted)} more property lines`);
  return bareObj({
    op: r.op,
    glyph,
    type: r.type,
    name,
    urn: r.urn,
    diff: [...r.diff],
    diffText: [head, ...lines].join('\n'),
    diffOmitted: r.diffOmitted,
  });
}

/**
 * The `changes` value of an event: null without change information; otherwise the context of
 * the change set (or of the reason it is unavailable). `maxShown` limits the resources shown
 * (the comment fitting uses it); the counts and the summary always describe the whole run.
 */
export function changesContext(
  changes: EventChanges | undefined,
  maxShown = Infinity,
): ChangesContext | null {
  if (changes === undefined) return null;
  const set = changes.set;
  if (set === undefined) {
    return bareObj<ChangesContext>({
      summary: unavailableSummary(changes.unavailable),
      short: unavailableSummary(changes.unavailable),
      counts: countsOf(undefined),
      changed: 0,
      operations: [],
      resources: [],
      diff: '',
      total: 0,
      shown: 0,
      omitted: 0,
      note: null,
      complete: false,
      incomplete: null,
      source: null,
      dryRun: null,
      failed: false,
      errors: [],
      unavailable: changes.unavailable,
    });
  }
  const dryRun = set.run?.dryRun ?? null;
  const changedResources = set.resources.filter((r) => r.op !== 'same');
  // Resources beyond the parser's cap are not in the set; count them as not shown.
  const counts = countsOf(set);
  let changed = 0;
  for (const op of STEP_OPS) if (op !== 'same') changed += counts[op];
  const total = Math.max(changed, changedResources.length);
  const groups: OperationGroup[] = [];
  const resources: ChangedResource[] = [];
  let room = Math.min(maxShown, CHANGES_CONTEXT_LIMITS.maxResources);
  let chars = CHANGES_CONTEXT_LIMITS.maxDiffChars;
  for (const op of GROUP_ORDER) {
    const mine = changedResources.filter((r) => r.op === op);
    // A run that applied and failed: its summary counts what was done, its resource lines what
    // was attempted (some of which failed).
    const attempted = set.failed && dryRun === false;
    const count = attempted ? mine.length : Math.max(counts[op], mine.length);
    if (count === 0) continue;
    const shown: ChangedResource[] = [];
    for (const r of mine) {
      if (room <= 0) break;
      const c = resourceOf(r);
      if (c.diffText.length > chars) {
        room = 0;
        break;
      }
      chars -= c.diffText.length;
      room--;
      shown.push(c);
    }
    resources.push(...shown);
    groups.push(
      bareObj<OperationGroup>({
        op,
        glyph: glyphOf(op),
        label: attempted ? `${op} attempted` : labelOf(op, dryRun ?? true),
        count,
        resources: shown,
        heading: true,
      }),
    );
  }
  const { summary, short } = changeSummary(set);
  const only = groups.length === 1 ? groups[0] : undefined;
  if (only !== undefined && `${only.glyph}${String(only.count)} ${only.label}` === summary)
    only.heading = false;
  const shown = resources.length;
  return bareObj<ChangesContext>({
    summary,
    short,
    counts,
    changed,
    operations: groups,
    resources,
    diff: resources.map((r) => r.diffText).join('\n'),
    total,
    shown,
    omitted: total - shown,
    note: shown < total ? resourcesNote(shown, total) : null,
    complete: set.complete,
    incomplete: incompleteText(set),
    source: set.source,
    dryRun,
    failed: set.failed,
    errors: [...set.errors],
    unavailable: null,
  });
}
