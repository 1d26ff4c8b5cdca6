/**
 * The change set of one Pulumi run (a preview, or what an up/refresh/destroy applied), as read
 * from the Pulumi CLI's own display. Shapes only; the parser is ./parse.ts, the format and the
 * limits are described in docs/changes.md.
 *
 * Operation names are Pulumi's step operations exactly as its display prints them between
 * parentheses (`(create)`, `(replace)`, …): `pkg/resource/deploy/step.go` of the Pulumi CLI
 * v3.276.0 (`OpSame` … `OpImportReplacement`).
 */

/** Pulumi's step operations as printed in a resource line `type: (op)`. */
export const STEP_OPS = [
  'same',
  'create',
  'update',
  'delete',
  'replace',
  'create-replacement',
  'delete-replaced',
  'read',
  'read-replacement',
  'refresh',
  'discard',
  'discard-replaced',
  'remove-pending-replace',
  'import',
  'import-replacement',
] as const;
export type StepOp = (typeof STEP_OPS)[number];

/**
 * The two-character glyph the display prints before each operation (`deploy.RawPrefix`,
 * Pulumi CLI v3.276.0). `~ ` stands for update, refresh and remove-pending-replace alike.
 */
export const STEP_OP_GLYPH: Readonly<Record<StepOp, string>> = {
  same: '  ',
  create: '+ ',
  update: '~ ',
  delete: '- ',
  replace: '+-',
  'create-replacement': '++',
  'delete-replaced': '--',
  read: '> ',
  'read-replacement': '>>',
  refresh: '~ ',
  discard: '< ',
  'discard-replaced': '<<',
  'remove-pending-replace': '~ ',
  import: '= ',
  'import-replacement': '=>',
};

/** What kind of run printed the change set: the CLI's banner (`Previewing update (dev):`, `Updating (dev):`, …). */
export interface RunInfo {
  /** `update` (pulumi up/preview), `refresh`, `destroy`, `import` or `stack import`. */
  kind: 'update' | 'refresh' | 'destroy' | 'import' | 'stack import';
  /** True for a preview (`Previewing …`), false for a run that changed the stack. */
  dryRun: boolean;
  /** The stack name as the banner prints it (`dev`, or `org/project/dev` on Pulumi Cloud). */
  stack: string;
  /** The agent's log time of the banner line (zap ISO 8601, e.g. `2026-12-01T15:24:31.100Z`). */
  startedAt: string;
  /**
   * The agent's log time of its end-of-run line (`preview completed`, …) after the summary;
   * absent when none was read. Informational: the run's end is the Update's (see {@link RunStatus}).
   */
  endedAt?: string;
}

/**
 * What the caller knows of the run from the Kubernetes API (the PKO `Update` whose log is read),
 * given to the parser when the log has been read: a line of the log never ends a run, since the
 * program being run can print any line.
 */
export interface RunStatus {
  /**
   * The Update had ended when its log was read: its `Complete` condition is `True` (or it has an
   * `endTime`). False: the log may not hold the run's last lines, and the change set is incomplete
   * (`no-end`).
   */
  runComplete: boolean;
  /**
   * The Update's end, RFC 3339 (`status.endTime`, else the `Complete` condition's
   * `lastTransitionTime`; whole seconds). A banner stamped more than `LATER_RUN_MARGIN_MS`
   * (src/changes/parse.ts: that second, plus 5 s for the clocks of the pod's node and of PKO's
   * operator) after it starts a later run of the same pod, which is not read. Absent: every
   * banner of the input is this run's (a second one makes it `interleaved`).
   */
  endTime?: string;
}

/** One resource line of the display and the property lines under it. */
export interface ResourceChange {
  op: StepOp;
  /** Type token, e.g. `pkotest:index:File`, `pulumi:pulumi:Stack`. */
  type: string;
  /** The resource's name: the URN's last part; '' when the `[urn=…]` line was not read. */
  name: string;
  /** The URN from the `[urn=…]` line; '' when it was not read. */
  urn: string;
  /** `[retain]`: the resource is `retainOnDelete`, so a delete or replace leaves it in place. */
  retain: boolean;
  /** 🔒 (protected) or 🔓 (protection being removed); absent otherwise. */
  protect?: 'protected' | 'unprotected';
  /**
   * Property-level lines as the CLI printed them, with the glyph column first (`~ value: "a" =>
   * "b"`, `  content: "a"` under a create, `  --outputs:--`), without the `[id=…]`, `[urn=…]`,
   * `[provider=…]` lines. Outputs blocks are kept for the root stack and for refreshes only (the
   * other ones are printed by `up` after other resources' lines: whose they are is unknown). Secrets appear as Pulumi masks them (`[secret]`); values a
   * provider does not mark secret appear as printed. At most `limits.maxDiffLinesPerResource`
   * lines of at most `limits.maxDiffLineChars` code points each (a cut line ends with `…`).
   */
  diff: string[];
  /** Property lines of this resource that were not kept (caps). */
  diffOmitted: number;
}

/** Why a change set is not complete. */
export type IncompleteReason =
  /** No run banner in the input: nothing of a run was read (or only its tail). */
  | 'no-run'
  /** The run has no `Resources:` summary: the log was cut or rotated, or the run stopped early. */
  | 'no-summary'
  /** More than one `Resources:` block in the run: the program printed text that looks like Pulumi's summary. */
  | 'summary-twice'
  /** The summary's counts disagree with the resource lines listed (a line hidden, changed or added). */
  | 'summary-mismatch'
  /**
   * The end of the run was not read: the Update had not ended when the log was read, or the
   * agent's end-of-run line after the summary is not in it (its last lines may be missing).
   */
  | 'no-end'
  /**
   * A second run's banner in the run's time: two runs at once, a run that started in the same
   * second as this one, or a banner the program printed. Everything any of them listed is kept.
   */
  | 'interleaved'
  /**
   * CLI lines the CLI does not print where they stand (a line outside any resource, a resource
   * after the summary, an unknown line in the summary, two log entries joined): text the program
   * wrote into the CLI's or the agent's output.
   */
  | 'unexpected-output'
  /** Lines inside the run that are not the agent's log format (garbled, or another writer). */
  | 'garbled'
  /** The parser stopped reading at `limits.maxLines` or `limits.maxBytes`. */
  | 'input-cap'
  /**
   * A CLI line inside the run was longer than `limits.maxLineChars` and was cut: what it said
   * after the cut (e.g. the CLI's own line after text the program wrote before it) is not read.
   */
  | 'line-cut'
  /** Pulumi Cloud's engine events of the run were not all read (an error, a cap, or the run still going): `note` says why. */
  | 'partial-events';

/**
 * What each {@link IncompleteReason} means, in words a reviewer can read (templates, status
 * descriptions, the gate's description): one clause each, no trailing period.
 */
export const INCOMPLETE_REASON_TEXT: Readonly<Record<IncompleteReason, string>> = {
  'no-run': 'the start of the run was not in the log',
  'no-summary':
    'the log has no summary of the run (cut, rotated, or the run stopped early): counts are a lower bound',
  'summary-twice': "the program printed text that looks like Pulumi's summary: the log holds more than one",
  'summary-mismatch': "the summary's counts disagree with the resources listed",
  'no-end': 'the end of the run was not in the log',
  interleaved: 'two runs wrote to the log at the same time',
  'unexpected-output':
    'the log holds lines the Pulumi CLI does not print there (text the program wrote into its output)',
  garbled: 'some lines of the log could not be read',
  'input-cap': 'the log was longer than the controller reads',
  'line-cut': 'a line of the log was longer than the controller reads, so its end is unknown',
  'partial-events': "not all of Pulumi Cloud's engine events of the run were read",
};

/** The change set of one run. */
export interface ChangeSet {
  /**
   * Where it was read: the PKO v2 workspace pod's log (the agent's `pulumi` logger), or the
   * Pulumi Cloud REST API (the update's `resourceChanges` and engine events: src/enrich/pulumi-cloud.ts).
   */
  source: 'workspace-log' | 'pulumi-cloud';
  /**
   * True when the run was read whole and holds nothing the CLI would not print: one banner, every
   * line, exactly one summary that agrees with the resource lines, the agent's end line after it,
   * the Update ended (the caller's {@link RunStatus}), no garbled or out-of-place line, no input
   * cap hit. The parser's own detail caps (resources, property lines, long lines: see `omitted`)
   * do not make a change set incomplete; `counts` stay exact then.
   */
  complete: boolean;
  /** Why not complete (empty when complete). */
  incomplete: IncompleteReason[];
  /** The run's banner; absent when none was read. */
  run?: RunInfo;
  /** The run ended with an error (the agent logged `… completed with an error`, or the CLI printed `error:` lines). */
  failed: boolean;
  /**
   * Resources per operation, counted from the resource lines (all of them, kept in `resources` or
   * not). `countsFrom: 'summary'`: the run's one summary agrees with them; then `same` is its
   * "N unchanged" (the display lists no unchanged resource but the root stack) and, for a run
   * that applied and failed, an operation's count is the summary's (its `errored` resources were
   * listed before they failed). `countsFrom: 'resources'`: no summary, or one that does not
   * agree; `same` counts the `(same)` lines. Operations with no resource are absent.
   */
  counts: Partial<Record<StepOp, number>>;
  countsFrom: 'summary' | 'resources';
  /** Resources in display order (at most `limits.maxResources`). */
  resources: ResourceChange[];
  /** Error lines the CLI printed (`error: …`), at most `limits.maxErrors`, each bounded. */
  errors: string[];
  /**
   * Why a source gave less than it might have, in words, e.g. `Pulumi Cloud's engine events were
   * not all read: Pulumi Cloud rate-limited … (429, retry after 30 s)`; absent when nothing is to
   * be said. Never holds a token.
   */
  note?: string;
  /** What the caps left out. */
  omitted: {
    /** Resource lines beyond `limits.maxResources`. */
    resources: number;
    /** Property lines beyond the per-resource or total caps. */
    diffLines: number;
    /** Input lines longer than `limits.maxLineChars` (cut; the rest of such a line is dropped). */
    longLines: number;
    /** Error lines beyond `limits.maxErrors`. */
    errors: number;
  };
}

/** Bounds of one parse (all counts; chars are UTF-16 code units of decoded text unless noted). */
export interface ParseLimits {
  /** Input bytes read (UTF-8 for byte chunks, UTF-16 units for string chunks); the rest is ignored. */
  maxBytes: number;
  /** Input lines read; the rest is ignored. */
  maxLines: number;
  /** A longer input line is cut to this length (the rest up to its newline is skipped). */
  maxLineChars: number;
  /** Resources kept in `resources`. */
  maxResources: number;
  /** Property lines kept per resource. */
  maxDiffLinesPerResource: number;
  /** Property lines kept over all resources. */
  maxDiffLines: number;
  /** Length of a kept property line, in code points (a longer one is cut with `…`). */
  maxDiffLineChars: number;
  /** Error lines kept. */
  maxErrors: number;
  /** Length of a kept error line, in code points. */
  maxErrorChars: number;
}

/** Defaults: a change set stays under ~6 MB of strings whatever the input (docs/changes.md). */
export const DEFAULT_PARSE_LIMITS: Readonly<ParseLimits> = {
  maxBytes: 16 * 1024 * 1024,
  maxLines: 200_000,
  maxLineChars: 16 * 1024,
  maxResources: 1000,
  maxDiffLinesPerResource: 200,
  maxDiffLines: 5000,
  maxDiffLineChars: 500,
  maxErrors: 20,
  maxErrorChars: 2000,
};
