/**
 * Streaming, bounded parser: a PKO v2 workspace pod's log (the agent's output) → the
 * {@link ChangeSet} of the last Pulumi run in it.
 *
 * Input: the container `pulumi` log of `<stack>-workspace-0` as `pods/log` returns it (no
 * kubelet timestamps), in chunks of bytes or text. PKO v2.9.0's agent logs with zap's
 * development console encoder, one entry per line, fields separated by TAB:
 * `<ISO8601 time>\t<LEVEL>\t<logger>\t<message>[\t<JSON fields>]`. Logger `pulumi` carries the
 * CLI's stdout lines (INFO) and stderr lines (WARN), one entry per CLI line (`zapio.Writer`);
 * logger `server` says when a run ended (`preview completed`, `up completed …`, `… completed with
 * an error`). Read in PKO v2.9.0's `agent/cmd/root.go` and `agent/pkg/server/server.go`.
 *
 * The CLI lines are Pulumi's diff display (`pulumi preview --diff`, which the agent always asks
 * for): a banner `Previewing update (dev):`, one block per resource
 * (`<indent><glyph><type>: (<op>)`, then `[urn=…]` and property lines), then a `Resources:`
 * summary (`    + 2 to create`, `    3 unchanged`). Read in the Pulumi CLI v3.276.0:
 * `pkg/backend/display/diff.go` (`renderSummaryEvent`, `renderDiff`),
 * `pkg/backend/display/object_diff.go` (`getResourcePropertiesSummary`, `printStepHeader`,
 * `getIndentationString`), `pkg/resource/deploy/step.go` (`RawPrefix`, `PastTense`),
 * `pkg/backend/apply.go` (`ActionLabel`) and `pkg/backend/diy/backend.go` (the banner).
 *
 * The log of a long-lived workspace pod holds many runs: each banner starts a new run and the
 * result is the last run read (cut the log by time first: `sinceTime` = the Update's start).
 * Memory and time are bounded by {@link ParseLimits} whatever the input: the parser never
 * throws on input; what it could not read makes the change set incomplete (see
 * {@link ChangeSet.complete}).
 *
 * Usage: `const p = new ChangeSetParser(); p.push(chunk)…; const cs = p.end();` or
 * {@link parseWorkspaceLog} for a whole text.
 */
import { boundText, stripAnsi } from '../text.ts';
import {
  DEFAULT_PARSE_LIMITS,
  STEP_OPS,
  STEP_OP_GLYPH,
  type ChangeSet,
  type IncompleteReason,
  type ParseLimits,
  type ResourceChange,
  type RunInfo,
  type StepOp,
} from './types.ts';

/** One zap development-console entry: time, level, logger, message (+ fields). */
const ZAP_LINE = /^(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d))\t([A-Z]+)\t([^\t]*)\t(.*)$/s;
/** The CLI's banner (`ActionLabel` + ` (<stack>):`). */
const BANNER =
  /^(Previewing (update|refresh|destroy|import|stack import)|Updating|Refreshing|Destroying|Importing) \((.+)\):$/;
const BANNER_KIND: Readonly<Record<string, RunInfo['kind']>> = {
  Updating: 'update',
  Refreshing: 'refresh',
  Destroying: 'destroy',
  Importing: 'import',
};
/** A resource line: indentation (4 per level), glyph, type, `(op[retain])`, optional lock. */
const RESOURCE = /^((?: {4})*)(.{2})(\S+): \(([a-z-]+)(\[retain\])?\)( 🔒| 🔓)?$/u;
/** `[urn=…]`, `[id=…]`, `[provider=…]` / `[provider: a => b]` pseudo-properties. */
const PSEUDO = /^ *\[(urn|id|provider)[=:]/;
const URN = /^ *\[urn=(.*)\]$/;
/** A summary count line: 4 spaces, glyph, count, `to <op>` (preview) or the past tense. */
const COUNT = /^ {4}(.{2})(\d+) (?:to ([a-z-]+)|([a-z-]+))$/;
/** `    3 changes. 2 unchanged`, `    2 unchanged`, `    3 changes`, `    1 errored`, `    1 awaiting`. */
const SUMMARY_TAIL = /^ {4}(?:\d+ changes?(?:\. \d+ unchanged)?|\d+ unchanged|\d+ errored|\d+ awaiting)$/;
const UNCHANGED = /(\d+) unchanged$/;
/** The agent's end-of-run line (logger `server`). */
const RUN_END = /^(preview|up|refresh|destroy) completed( with an error)?(?:\t|$)/;
const OUTPUTS = /^ *--outputs:--$/;
/**
 * Pulumi's own colour tags (`<{%fg 1%}>`, `<{%reset%}>`, `sdk/go/common/diag/colors`), which the
 * CLI leaves in some lines when it does not colorize (e.g. `    <{%fg 1%}>1 errored<{%reset%}>`).
 */
const PULUMI_COLOR_TAG = /<\{%[^%]{0,40}%\}>/g;
const ROOT_STACK = 'pulumi:pulumi:Stack';
/**
 * Operations the CLI's summary never counts (`renderSummaryEvent` skips reads; refreshes of a
 * `--refresh` run are not steps of the run): their counts come from the resource lines.
 */
const NOT_IN_SUMMARY: readonly StepOp[] = ['read', 'read-replacement', 'discard', 'refresh'];

const OPS = new Set<string>(STEP_OPS);
const isStepOp = (s: string): s is StepOp => OPS.has(s);

/** Past tense in the summary of a run that changed the stack → op, by glyph (`deploy.PastTense`). */
function pastTenseOp(glyph: string, word: string): StepOp | undefined {
  for (const op of STEP_OPS) {
    if (STEP_OP_GLYPH[op] !== glyph) continue;
    const past =
      op === 'refresh'
        ? 'refreshed'
        : op === 'read'
          ? 'read'
          : op === 'discard' || op === 'discard-replaced'
            ? 'discarded'
            : op === 'delete' || op === 'delete-replaced'
              ? 'deleted'
              : op === 'import' || op === 'import-replacement'
                ? 'imported'
                : `${op}d`;
    if (past === word) return op;
  }
  return undefined;
}

interface OpenResource {
  change: ResourceChange | undefined;
  /** Nesting level (4 spaces each) of the resource line. */
  level: number;
  /** Inside a non-root `--outputs:--` block, whose lines cannot be told apart from a sibling's. */
  inOutputs: boolean;
}

interface Run {
  info: RunInfo;
  resources: ResourceChange[];
  seen: Partial<Record<StepOp, number>>;
  summary: Partial<Record<StepOp, number>> | undefined;
  /** Reading the `Resources:` block. */
  inSummary: boolean;
  /** A line after the summary block, or the agent's end line, was read. */
  ended: boolean;
  failed: boolean;
  garbled: boolean;
  interleaved: boolean;
  errors: string[];
  open: OpenResource[];
  omitted: ChangeSet['omitted'];
  diffLines: number;
}

function newRun(info: RunInfo): Run {
  return {
    info,
    resources: [],
    seen: {},
    summary: undefined,
    inSummary: false,
    ended: false,
    failed: false,
    garbled: false,
    interleaved: false,
    errors: [],
    open: [],
    omitted: { resources: 0, diffLines: 0, longLines: 0, errors: 0 },
    diffLines: 0,
  };
}

/** Streaming parser; feed chunks with {@link push}, then call {@link end} once. */
export class ChangeSetParser {
  readonly #limits: ParseLimits;
  readonly #decoder = new TextDecoder('utf-8', { fatal: false });
  #bytes = 0;
  #lines = 0;
  #capped = false;
  #partial = '';
  #partialCut = false;
  #run: Run | undefined;
  /** {@link end} was called. */
  #ended = false;

  constructor(limits: Partial<ParseLimits> = {}) {
    this.#limits = { ...DEFAULT_PARSE_LIMITS, ...limits };
  }

  /** Feeds the next chunk of the log (bytes are UTF-8; a code point may span chunks). */
  push(chunk: Uint8Array | string): void {
    if (this.#ended || this.#capped) return;
    let text: string;
    if (typeof chunk === 'string') {
      const room = this.#limits.maxBytes - this.#bytes;
      if (chunk.length > room) {
        text = chunk.slice(0, Math.max(0, room));
        this.#capped = true;
      } else text = chunk;
      this.#bytes += text.length;
    } else {
      const room = this.#limits.maxBytes - this.#bytes;
      let bytes = chunk;
      if (bytes.byteLength > room) {
        bytes = bytes.subarray(0, Math.max(0, room));
        this.#capped = true;
      }
      this.#bytes += bytes.byteLength;
      text = this.#decoder.decode(bytes, { stream: !this.#capped });
    }
    this.#split(text);
  }

  /**
   * Ends the input and returns the change set of the last run read. A line counts once its
   * newline is read (the kubelet ends every entry with one): a final line without a newline
   * may be cut anywhere (`preview completed` of `preview completed with an error`), so it is
   * not read. Further pushes are ignored.
   */
  end(): ChangeSet {
    if (!this.#ended) {
      this.#ended = true;
      if (!this.#capped) this.#split(this.#decoder.decode());
      this.#partial = '';
    }
    return this.#result();
  }

  #split(text: string): void {
    const max = this.#limits.maxLineChars;
    let start = 0;
    while (start <= text.length && !this.#capped) {
      const nl = text.indexOf('\n', start);
      const seg = nl < 0 ? text.slice(start) : text.slice(start, nl);
      if (!this.#partialCut) {
        const room = max - this.#partial.length;
        if (seg.length > room) {
          this.#partial += seg.slice(0, room);
          this.#partialCut = true;
        } else this.#partial += seg;
      }
      if (nl < 0) return;
      const line = this.#partial;
      const cut = this.#partialCut;
      this.#partial = '';
      this.#partialCut = false;
      this.#line(line, cut);
      start = nl + 1;
    }
  }

  #line(raw: string, cut: boolean): void {
    if (this.#lines >= this.#limits.maxLines) {
      this.#capped = true;
      return;
    }
    this.#lines++;
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const m = ZAP_LINE.exec(line);
    const run = this.#run;
    if (!m) {
      // Not the agent's format: garbled, or a line cut at its start. Harmless outside a run.
      if (run && !run.ended) run.garbled = true;
      return;
    }
    const level = m[2] ?? '';
    const logger = m[3] ?? '';
    const message = m[4] ?? '';
    if (logger === 'server') {
      const end = RUN_END.exec(message);
      if (end && run) {
        if (!run.ended) run.info.endedAt = m[1] ?? '';
        run.ended = true;
        run.inSummary = false;
        if (end[2] !== undefined) run.failed = true;
      }
      return;
    }
    if (logger !== 'pulumi') return;
    if (cut && run) run.omitted.longLines++;
    const text = stripAnsi(message).replace(PULUMI_COLOR_TAG, '');
    if (level !== 'INFO') {
      // stderr (WARN): diagnostics; keep the error lines.
      if (run) this.#stderr(run, text);
      return;
    }
    const banner = BANNER.exec(text);
    if (banner) {
      this.#startRun(banner, m[1] ?? '');
      return;
    }
    if (!run) return;
    this.#stdout(run, text);
  }

  #startRun(banner: RegExpExecArray, time: string): void {
    const label = banner[1] ?? '';
    const previewKind = banner[2];
    const info: RunInfo = {
      kind: previewKind !== undefined ? (previewKind as RunInfo['kind']) : (BANNER_KIND[label] ?? 'update'),
      dryRun: previewKind !== undefined,
      stack: boundText(banner[3] ?? '', 400),
      startedAt: time,
    };
    const previous = this.#run;
    const next = newRun(info);
    // A banner before the previous run ended: the two runs' lines may be mixed.
    if (previous && !previous.ended) next.interleaved = true;
    this.#run = next;
  }

  #stderr(run: Run, text: string): void {
    const t = text.trim();
    if (!/^error:/.test(t)) return;
    run.failed = true;
    if (run.errors.length >= this.#limits.maxErrors) run.omitted.errors++;
    else run.errors.push(boundText(t, this.#limits.maxErrorChars));
  }

  #stdout(run: Run, text: string): void {
    if (run.ended) {
      // Lines after the end of a run and before the next banner (another command's output).
      return;
    }
    if (run.inSummary) {
      if (this.#summaryLine(run, text)) return;
      // The first line that is not part of the block ends it (e.g. the blank line before `Duration:`).
      run.inSummary = false;
      run.ended = true;
      return;
    }
    if (text === 'Resources:') {
      run.summary = {};
      run.inSummary = true;
      run.open = [];
      return;
    }
    const res = RESOURCE.exec(text);
    if (res) {
      const op = res[4] ?? '';
      const glyph = res[2] ?? '';
      if (isStepOp(op) && STEP_OP_GLYPH[op] === glyph) {
        this.#resource(run, op, res);
        return;
      }
    }
    this.#detail(run, text);
  }

  /** Reads one line of the `Resources:` block; false when the line is not part of it. */
  #summaryLine(run: Run, text: string): boolean {
    const summary = run.summary ?? {};
    const c = COUNT.exec(text);
    if (c) {
      const glyph = c[1] ?? '';
      const n = Number(c[2]);
      const op = c[3] !== undefined ? c[3] : pastTenseOp(glyph, c[4] ?? '');
      if (op !== undefined && isStepOp(op) && STEP_OP_GLYPH[op] === glyph && Number.isSafeInteger(n)) {
        summary[op] = (summary[op] ?? 0) + n;
        return true;
      }
      return false;
    }
    if (SUMMARY_TAIL.test(text)) {
      const u = UNCHANGED.exec(text);
      if (u) summary.same = Number(u[1]);
      return true;
    }
    return false;
  }

  #resource(run: Run, op: StepOp, m: RegExpExecArray): void {
    const level = (m[1] ?? '').length / 4;
    while (run.open.length > 0 && (run.open.at(-1)?.level ?? 0) >= level) run.open.pop();
    // The root stack is printed for every run; a refresh line is printed only for a resource
    // whose refresh found a difference (and for the root stack).
    if (!(op === 'refresh' && m[3] === ROOT_STACK)) run.seen[op] = (run.seen[op] ?? 0) + 1;
    let change: ResourceChange | undefined;
    if (run.resources.length >= this.#limits.maxResources) run.omitted.resources++;
    else {
      change = {
        op,
        type: boundText(m[3] ?? '', 400),
        name: '',
        urn: '',
        retain: m[5] !== undefined,
        diff: [],
        diffOmitted: 0,
      };
      const lock = m[6];
      if (lock !== undefined) change.protect = lock === ' 🔒' ? 'protected' : 'unprotected';
      run.resources.push(change);
    }
    run.open.push({ change, level, inOutputs: false });
  }

  /** A line under a resource: its URN, a property line, or an outputs block. */
  #detail(run: Run, text: string): void {
    if (text.trim() === '') return;
    const indent = text.length - text.trimStart().length;
    // The line belongs to the innermost open resource whose body it is indented under.
    while (run.open.length > 0) {
      const top = run.open.at(-1);
      if (top && indent >= top.level * 4 + 2) break;
      run.open.pop();
    }
    const top = run.open.at(-1);
    if (!top) return;
    if (OUTPUTS.test(text)) {
      // The outputs of the root stack, and a refresh's changes (printed with their resource
      // line), are known to be theirs; other outputs blocks are printed by `up` when the
      // resource finished, after other resources' lines, so whose they are is not known.
      top.inOutputs = top.level > 0 && top.change?.op !== 'refresh';
      if (top.inOutputs) return;
    } else if (top.inOutputs) return;
    const change = top.change;
    if (!change) {
      run.omitted.diffLines++;
      return;
    }
    if (PSEUDO.test(text)) {
      const urn = URN.exec(text);
      if (urn && change.urn === '') {
        change.urn = boundText(urn[1] ?? '', 2000);
        const parts = (urn[1] ?? '').split('::');
        change.name = parts.length >= 4 ? boundText(parts.slice(3).join('::'), 400) : '';
      }
      return;
    }
    if (
      change.diff.length >= this.#limits.maxDiffLinesPerResource ||
      run.diffLines >= this.#limits.maxDiffLines
    ) {
      change.diffOmitted++;
      run.omitted.diffLines++;
      return;
    }
    run.diffLines++;
    change.diff.push(
      boundText(text.slice(Math.min(indent, top.level * 4 + 2)).trimEnd(), this.#limits.maxDiffLineChars),
    );
  }

  #result(): ChangeSet {
    const run = this.#run;
    const incomplete: IncompleteReason[] = [];
    if (!run) {
      incomplete.push('no-run');
      if (this.#capped) incomplete.push('input-cap');
      return {
        source: 'workspace-log',
        complete: false,
        incomplete,
        failed: false,
        counts: {},
        countsFrom: 'resources',
        resources: [],
        errors: [],
        omitted: { resources: 0, diffLines: 0, longLines: 0, errors: 0 },
      };
    }
    if (run.interleaved) incomplete.push('interleaved');
    if (run.summary === undefined) incomplete.push('no-summary');
    else if (!run.ended) incomplete.push('no-end');
    if (run.garbled) incomplete.push('garbled');
    if (this.#capped) incomplete.push('input-cap');
    const fromSummary = run.summary !== undefined;
    return {
      source: 'workspace-log',
      complete: incomplete.length === 0,
      incomplete,
      run: { ...run.info },
      failed: run.failed,
      counts: fromSummary ? withUnsummarized(run.summary ?? {}, run.seen) : { ...run.seen },
      countsFrom: fromSummary ? 'summary' : 'resources',
      resources: run.resources,
      errors: run.errors,
      omitted: { ...run.omitted },
    };
  }
}

/** The summary's counts plus, from the resource lines, the operations it never counts. */
function withUnsummarized(
  summary: Partial<Record<StepOp, number>>,
  seen: Partial<Record<StepOp, number>>,
): Partial<Record<StepOp, number>> {
  const counts = { ...summary };
  for (const op of NOT_IN_SUMMARY) {
    const n = seen[op];
    if (counts[op] === undefined && n !== undefined) counts[op] = n;
  }
  return counts;
}

/** Parses a whole log text (or bytes) with {@link ChangeSetParser}. */
export function parseWorkspaceLog(input: string | Uint8Array, limits: Partial<ParseLimits> = {}): ChangeSet {
  const p = new ChangeSetParser(limits);
  p.push(input);
  return p.end();
}
