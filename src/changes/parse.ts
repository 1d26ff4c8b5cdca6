/**
 * Streaming, bounded parser: a PKO v2 workspace pod's log (the agent's output) → the
 * {@link ChangeSet} of the Pulumi run of one Update.
 *
 * Input: the container `pulumi` log of `<stack>-workspace-0` as `pods/log` returns it (no
 * kubelet timestamps), in chunks of bytes or text, cut at the Update's start (`sinceTime`). PKO
 * v2.9.0's agent logs with zap's development console encoder, one entry per line, fields
 * separated by TAB: `<ISO8601 time>\t<LEVEL>\t<logger>\t<message>[\t<JSON fields>]`. Logger
 * `pulumi` carries the CLI's stdout lines (INFO) and stderr lines (WARN), one entry per CLI line
 * (`zapio.Writer`); logger `server` logs the end of a run (`preview completed`, `up completed …`,
 * `… completed with an error`) after the CLI's last stdout line. Read in PKO v2.9.0's
 * `agent/cmd/root.go` and `agent/pkg/server/server.go`.
 *
 * The CLI lines are Pulumi's diff display (`pulumi preview --diff`, which the agent always asks
 * for): a banner `Previewing update (dev):`, one block per resource
 * (`<indent><glyph><type>: (<op>)`, then `[urn=…]` and property lines), then a `Resources:`
 * summary (`    + 2 to create`, `    3 unchanged`). Read in the Pulumi CLI v3.276.0:
 * `pkg/backend/display/diff.go` (`renderSummaryEvent`, `renderDiff`, `ShowDiffEvents`),
 * `pkg/backend/display/display.go` (`shouldShow`), `pkg/backend/display/object_diff.go`
 * (`getResourcePropertiesSummary`, `getIndentationString`), `pkg/engine/update.go` (which steps
 * the summary counts), `pkg/resource/deploy/step.go` (`RawPrefix`, `PastTense`, `Logical`),
 * `pkg/backend/apply.go` (`ActionLabel`) and `pkg/backend/diy/backend.go` (the banner).
 *
 * The program being run can write into the CLI's stdout (and the agent's: same uid in the
 * workspace container, `/proc/<pid>/fd/1`), so any line of the log may be forged. The rules
 * (docs/changes.md, "What the program can and cannot do to it"): counts come from the resource
 * lines, the summary only cross-checks them; a line of the log never ends the run — the caller
 * says whether the Update had ended ({@link RunStatus}); a second summary, counts that disagree,
 * a second banner, or a line the CLI does not print where it stands make the change set
 * incomplete. Text added to the log can so add resources, never hide one.
 *
 * Memory and time are bounded by {@link ParseLimits} whatever the input: the parser never
 * throws on input; what it could not read makes the change set incomplete (see
 * {@link ChangeSet.complete}).
 *
 * Usage: `const p = new ChangeSetParser(); p.push(chunk)…; const cs = p.end({ runComplete, endTime });`
 * or {@link parseWorkspaceLog} for a whole text.
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
  type RunStatus,
  type StepOp,
} from './types.ts';

/** One zap development-console entry: time, level, logger, message (+ fields). */
const ZAP_LINE = /^(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d))\t([A-Z]+)\t([^\t]*)\t(.*)$/s;
/** An agent log entry's head inside a CLI line: a partial write joined two entries. */
const ZAP_HEAD_INSIDE = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)\t[A-Z]+\t/;
/** The CLI's banner (`ActionLabel` + ` (<stack>):`). */
const BANNER =
  /^(Previewing (update|refresh|destroy|import|stack import)|Updating|Refreshing|Destroying|Importing) \((.+)\):$/;
/** A banner with text before it (a partial line written before the CLI's). */
const BANNER_TAIL =
  /(Previewing (update|refresh|destroy|import|stack import)|Updating|Refreshing|Destroying|Importing) \(([^()]+)\):$/;
const BANNER_KIND: Readonly<Record<string, RunInfo['kind']>> = {
  Updating: 'update',
  Refreshing: 'refresh',
  Destroying: 'destroy',
  Importing: 'import',
};
/** A resource line: indentation (4 per level), glyph, type, `(op[retain])`, optional lock. */
const RESOURCE = /^((?: {4})*)(.{2})(\S+): \(([a-z-]+)(\[retain\])?\)( 🔒| 🔓)?$/u;
/** The end of a resource line, wherever the line starts (a prefixed or re-indented one). */
const RESOURCE_TAIL = /: \(([a-z-]+)(\[retain\])?\)( 🔒| 🔓)?$/u;
/** A type token: `pkg:module:Type` (Pulumi's `tokens.Type`). */
const TYPE_TOKEN = /^[^:\s]+:[^:\s]*:\S+$/;
/** `[urn=…]`, `[id=…]`, `[provider=…]` / `[provider: a => b]` pseudo-properties. */
const PSEUDO = /^ *\[(urn|id|provider)[=:]/;
const URN = /^ *\[urn=(.*)\]$/;
const PSEUDO_ANYWHERE = /\[(?:urn=|id=|provider[=:])/g;
/** The glyph column a property line starts with (`getIndentationString`): a step glyph or two spaces. */
const GLYPH_COLUMNS: ReadonlySet<string> = new Set(Object.values(STEP_OP_GLYPH));
/** A summary count line: 4 spaces, glyph, count, `to <op>` (preview) or the past tense. */
const COUNT = /^ {4}(.{2})(\d+) (?:to ([a-z-]+)|([a-z-]+))$/;
/** `    3 changes. 2 unchanged`, `    3 changes`, `    2 unchanged`. */
const TOTALS = /^ {4}(?:(\d+) changes?(?:\. (\d+) unchanged)?|(\d+) unchanged)$/;
/** `    1 errored`, `    1 awaiting` (resources whose step failed, or that a failure left waiting). */
const FAILED_TAIL = /^ {4}(\d+) (errored|awaiting)$/;
/** The agent's end-of-run line (logger `server`). */
const RUN_END = /^(preview|up|refresh|destroy) completed( with an error)?(?:\t|$)/;
const OUTPUTS = /^ *--outputs:--$/;
/**
 * Top-level lines the CLI prints among the resources of a diff display: the permalink (Pulumi
 * Cloud, `printPermalinkNonInteractive`), and what it prints when PKO cancels the run
 * (`backend/cancellation_scope.go`).
 */
const KNOWN_TOP = [
  /^View Live: \S+$/,
  /^View in Browser \(Ctrl\+O\): \S+$/,
  /^(?:\^C|SIGTERM) received; cancelling\. If you would like to terminate immediately, (?:press \^C|send SIGTERM) again\.$/,
  /^Note that terminating immediately may lead to orphaned resources and other inconsistencies\.$/,
  /^(?:\^C|SIGTERM) received; terminating$/,
];
/** Lines the CLI prints after the summary: `Duration:` (not for previews), `Permalink:` (diy backends on cloud storage). */
const KNOWN_AFTER = [/^Duration: \S+$/, /^Permalink: \S+$/, ...KNOWN_TOP.slice(2)];
const POLICY_PACKS = 'Policy Packs run:';
/**
 * Pulumi's own colour tags (`<{%fg 1%}>`, `<{%reset%}>`, `sdk/go/common/diag/colors`), which the
 * CLI leaves in some lines when it does not colorize (e.g. `    <{%fg 1%}>1 errored<{%reset%}>`).
 */
const PULUMI_COLOR_TAG = /<\{%[^%]{0,40}%\}>/g;
const ROOT_STACK = 'pulumi:pulumi:Stack';
/**
 * A control character other than TAB (C0, DEL, C1 — ESC and the C1 CSI/OSC introducers among
 * them): the CLI writes none into the agent's log (it does not colorize: no recorded log holds
 * one), while an unterminated escape in a partial line would, once stripped, take the CLI's own
 * text after it along.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/;
const URN_PREFIX = 'urn:pulumi:';
/**
 * Operations the summary counts (`renderSummaryEvent` prints every operation of the run's
 * `Ops` but same and the reads; `Ops` counts the logical, non-internal steps,
 * `engine/update.go`): for these the summary must agree with the resource lines.
 */
const SUMMARY_OPS: ReadonlySet<StepOp> = new Set<StepOp>(['create', 'update', 'delete', 'replace', 'import']);
/**
 * How much later than the Update's end (whole seconds) a banner must be stamped to be a later
 * run's: the end's second itself, plus this allowance for the clocks of the workspace pod's node
 * and of PKO's operator (ms).
 */
export const LATER_RUN_MARGIN_MS = 1000 + 5000;
/** Runs kept apart in one read (a long-lived pod read late); later banners join the last one. */
const MAX_RUNS = 64;

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

/** zap's time (`2026-12-01T15:24:31.100Z`, or `…+0200`) in ms since the epoch; NaN if unreadable. */
function stampOf(time: string): number {
  return Date.parse(time.replace(/([+-]\d\d)(\d\d)$/, '$1:$2'));
}

/**
 * A resource line that does not stand where the CLI prints one: the op and type of a line that
 * ends like a resource line (`…<glyph><type>: (<op>)`), e.g. the real delete line with text a
 * program wrote before it (a partial line) or re-indented.
 */
function displacedResource(text: string): { op: StepOp; type: string; retain: boolean } | undefined {
  const m = RESOURCE_TAIL.exec(text);
  const op = m?.[1];
  if (m === null || op === undefined || !isStepOp(op)) return undefined;
  const before = text.slice(0, m.index);
  // The last word before the tail, scanned back (a regex `(\S+)$` backtracks quadratically
  // on a long line that ends in whitespace).
  let start = before.length;
  while (start > 0 && !isSpace(before.charCodeAt(start - 1))) start--;
  if (start === before.length) return undefined;
  const word = before.slice(start);
  const glyph = STEP_OP_GLYPH[op];
  let type: string;
  if (glyph.endsWith(' ')) {
    if (!before.slice(0, start).endsWith(glyph)) return undefined;
    type = word;
  } else {
    if (!word.startsWith(glyph)) return undefined;
    type = word.slice(2);
  }
  return TYPE_TOKEN.test(type) ? { op, type, retain: m[2] !== undefined } : undefined;
}

/** Is the UTF-16 code unit whitespace as `\s` says (ECMAScript WhiteSpace and LineTerminator)? */
function isSpace(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    c === 0x20 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * A URN as the engine writes it: `urn:pulumi:<stack>::<project>::<qualified type>::<name>`; the
 * qualified type is the parents' types and the resource's, joined by `$` (`resource.NewURN`);
 * the name may hold `::`. Undefined when `urn` is not one.
 */
function splitUrn(urn: string): { stack: string; project: string; type: string; name: string } | undefined {
  if (!urn.startsWith(URN_PREFIX)) return undefined;
  const parts = urn.slice(URN_PREFIX.length).split('::');
  if (parts.length < 4) return undefined;
  const [stack = '', project = '', qualified = ''] = parts;
  const type = qualified.slice(qualified.lastIndexOf('$') + 1);
  return { stack, project, type, name: parts.slice(3).join('::') };
}

/** Does a URN's stack name the banner's stack (`dev`, or a qualified `org/dev`, `org/project/dev`)? */
function sameStack(banner: string, stack: string, project: string): boolean {
  if (banner === stack) return true;
  const parts = banner.split('/');
  if (parts.at(-1) !== stack) return false;
  return parts.length === 2 || (parts.length === 3 && parts[1] === project);
}

interface OpenResource {
  change: ResourceChange | undefined;
  /** The type its resource line printed (unbounded: the URN's type must equal it). */
  type: string;
  op: StepOp;
  /** Nesting level (4 spaces each) of the resource line. */
  level: number;
  /** Inside a non-root `--outputs:--` block, whose lines cannot be told apart from a sibling's. */
  inOutputs: boolean;
  /** The pseudo-properties read (`urn`, `id`, `provider`): the CLI prints each once. */
  pseudo: string[];
}

/** What one `Resources:` block said. */
interface Summary {
  counts: Partial<Record<StepOp, number>>;
  /** `N changes` (printed with two kinds of change or more). */
  changes?: number;
  errored: number;
  awaiting: number;
  /** A line the CLI prints once per block came twice. */
  repeated: boolean;
}

/** The lines from one banner to the next. */
interface Run {
  info: RunInfo;
  /** The banner's log time (ms; NaN if unreadable). */
  bannerAt: number;
  /** The earliest log time of any agent line read while this run was the last one (ms). */
  minAt: number;
  resources: ResourceChange[];
  /** Resource lines per operation (the root stack's refresh line left out). */
  seen: Partial<Record<StepOp, number>>;
  /** `Resources:` lines read. */
  summaries: number;
  /** The first summary's counts. */
  summary: Summary | undefined;
  /** Resource lines; inside the `Resources:` block; after it. */
  phase: 'steps' | 'summary' | 'after';
  /** After `Policy Packs run:`: its table follows. */
  policyTable: boolean;
  /** The agent's end line (of this kind of run) was read after a summary. */
  endSeen: boolean;
  failed: boolean;
  /** A line that is not the agent's format. */
  garbled: boolean;
  /** A CLI line the CLI does not print where it stands. */
  stray: boolean;
  errors: string[];
  open: OpenResource[];
  /**
   * The last resource line's URN line is still to come: the CLI prints a resource's `[id=…]`
   * and `[urn=…]` lines with it, in one write, before any other stdout line.
   */
  awaitingUrn: boolean;
  /** A line of logger `pulumi` cut at `limits.maxLineChars`: its end, whatever it said, is not read. */
  cut: boolean;
  /** The project of the run's first URN: the same in every URN of one run. */
  project: string | undefined;
  /**
   * The URNs read (at most `limits.maxResources` kept): the engine prints each resource once a
   * run (a refresh step, then its other step, in a `--refresh` run).
   */
  urns: Set<string>;
  omitted: ChangeSet['omitted'];
}

function newRun(info: RunInfo, bannerAt: number): Run {
  return {
    info,
    bannerAt,
    minAt: bannerAt,
    resources: [],
    seen: {},
    summaries: 0,
    summary: undefined,
    phase: 'steps',
    policyTable: false,
    endSeen: false,
    failed: false,
    garbled: false,
    stray: false,
    errors: [],
    open: [],
    awaitingUrn: false,
    cut: false,
    project: undefined,
    urns: new Set(),
    omitted: { resources: 0, diffLines: 0, longLines: 0, errors: 0 },
  };
}

/** Streaming parser; feed chunks with {@link push}, then call {@link end}. */
export class ChangeSetParser {
  readonly #limits: ParseLimits;
  readonly #decoder = new TextDecoder('utf-8', { fatal: false });
  #bytes = 0;
  #lines = 0;
  #capped = false;
  #partial = '';
  #partialCut = false;
  /** The runs read, in log order (at most {@link MAX_RUNS}). */
  readonly #runs: Run[] = [];
  /** Resources kept over all runs (`limits.maxResources`). */
  #kept = 0;
  /** Property lines kept over all runs (`limits.maxDiffLines`). */
  #diffLines = 0;
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
   * Ends the input and returns the change set of the Update's run: the first run of the input,
   * with every run whose banner is not later than `status.endTime` (+ {@link LATER_RUN_MARGIN_MS})
   * merged into it and marked `interleaved`. A line counts once its newline is read (the kubelet
   * ends every entry with one): a final line without a newline may be cut anywhere, so it is not
   * read. Further pushes are ignored; `end` may be called again (with another status).
   */
  end(status: RunStatus): ChangeSet {
    if (!this.#ended) {
      this.#ended = true;
      if (!this.#capped) this.#split(this.#decoder.decode());
      this.#partial = '';
    }
    return this.#result(status);
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
    // An empty line carries nothing (the agent writes none; a text's last newline may make one).
    if (line === '') return;
    const m = ZAP_LINE.exec(line);
    const run = this.#runs.at(-1);
    if (!m) {
      // Not the agent's format: garbled, another writer, or a line cut at its start.
      if (run) run.garbled = true;
      return;
    }
    const time = m[1] ?? '';
    const at = stampOf(time);
    if (run && !(at >= run.minAt)) run.minAt = Number.isNaN(at) ? -Infinity : at;
    const level = m[2] ?? '';
    const logger = m[3] ?? '';
    const message = m[4] ?? '';
    if (logger === 'server') {
      const end = RUN_END.exec(message);
      if (end && run) {
        // An error can only add failure; the end line only vouches that the lines before it
        // were written (it ends nothing: the Update's status says when the run ended).
        if (end[2] !== undefined) run.failed = true;
        if (run.summaries > 0 && (end[1] === 'preview') === run.info.dryRun) {
          if (!run.endSeen) run.info.endedAt = time;
          run.endSeen = true;
        }
      }
      return;
    }
    if (logger !== 'pulumi') return;
    if (cut && run) {
      run.omitted.longLines++;
      run.cut = true;
    }
    // Decided on the raw text: stripping an unterminated escape would remove what follows it.
    if (run && (level === 'INFO' || level === 'WARN') && CONTROL.test(message)) run.stray = true;
    const text = stripAnsi(message).replace(PULUMI_COLOR_TAG, '');
    if (level !== 'INFO') {
      // stderr (WARN): diagnostics, program output included; they add errors, never structure.
      if (run) this.#stderr(run, text);
      return;
    }
    const banner = BANNER.exec(text);
    if (banner) {
      this.#startRun(banner, time, at);
      return;
    }
    const prefixed = BANNER_TAIL.exec(text);
    if (prefixed) {
      // Still a run's start (else its lines would be read as no run's), and not as the CLI prints it.
      this.#startRun(prefixed, time, at);
      const started = this.#runs.at(-1);
      if (started) started.stray = true;
      return;
    }
    if (!run) return;
    this.#stdout(run, text);
  }

  #startRun(banner: RegExpExecArray, time: string, at: number): void {
    const label = banner[1] ?? '';
    const previewKind = banner[2];
    const info: RunInfo = {
      kind: previewKind !== undefined ? (previewKind as RunInfo['kind']) : (BANNER_KIND[label] ?? 'update'),
      dryRun: previewKind !== undefined,
      stack: boundText(banner[3] ?? '', 400),
      startedAt: time,
    };
    const last = this.#runs.at(-1);
    if (last !== undefined && this.#runs.length >= MAX_RUNS) {
      // Too many runs in one read: the rest joins the last one (later runs are not reported).
      last.stray = true;
      last.phase = 'steps';
      last.open = [];
      return;
    }
    this.#runs.push(newRun(info, at));
  }

  #stderr(run: Run, text: string): void {
    const t = text.trim();
    if (!/^error:/.test(t)) return;
    run.failed = true;
    if (run.errors.length >= this.#limits.maxErrors) run.omitted.errors++;
    else run.errors.push(boundText(t, this.#limits.maxErrorChars));
  }

  #stdout(run: Run, text: string): void {
    // Two agent entries in one line: something wrote part of a line into the stream.
    if (ZAP_HEAD_INSIDE.test(text)) run.stray = true;
    if (run.awaitingUrn) {
      const pseudo = PSEUDO.exec(text)?.[1];
      // Another line between a resource line and its URN line (which it would take over).
      if (pseudo !== 'id') run.awaitingUrn = false;
      if (pseudo !== 'urn' && pseudo !== 'id') run.stray = true;
    }
    if (run.phase === 'summary') {
      if (this.#summaryLine(run, text)) return;
      run.phase = 'after';
      if (text.trim() === '') return;
      // The block ends with a blank line or the output's end: anything else is not the CLI's.
      run.stray = true;
    }
    if (text === 'Resources:') {
      run.summaries++;
      if (run.summary === undefined) run.summary = { counts: {}, errored: 0, awaiting: 0, repeated: false };
      run.phase = 'summary';
      run.policyTable = false;
      run.open = [];
      return;
    }
    const res = RESOURCE.exec(text);
    if (res) {
      const op = res[4] ?? '';
      const glyph = res[2] ?? '';
      if (isStepOp(op) && STEP_OP_GLYPH[op] === glyph) {
        // The CLI prints no resource after its summary: text printed as one is still listed.
        if (run.phase !== 'steps') {
          run.stray = true;
          run.phase = 'steps';
        }
        const type = res[3] ?? '';
        // PKO asks for no unchanged resources (`optpreview.Diff()` only, no `ShowSames`): the CLI
        // prints a `(same)` line only for the root stack, or for a resource whose protection
        // changes (with its lock, `shouldShow`). Another is text the program wrote — e.g. a
        // partial line that turned the real delete into one, a decoy delete keeping the count.
        if (op === 'same' && type !== ROOT_STACK && res[6] === undefined) run.stray = true;
        this.#resource(run, op, (res[1] ?? '').length / 4, type, res[5] !== undefined, res[6]);
        return;
      }
    }
    if (text.trim() === '') return;
    if (run.phase === 'after') {
      if (text === POLICY_PACKS) {
        run.policyTable = true;
        return;
      }
      if (run.policyTable && /^ {4}\S/.test(text)) return;
      if (KNOWN_AFTER.some((r) => r.test(text))) return;
      run.stray = true;
      // A resource line with text before it: listed, and the lines under it read as its.
      if (this.#displaced(run, text)) run.phase = 'steps';
      return;
    }
    if (KNOWN_TOP.some((r) => r.test(text))) return;
    if (this.#displaced(run, text)) return;
    if (/Resources:$/.test(text)) {
      // The summary's head with text before it: the block that follows is not read as one.
      run.stray = true;
      return;
    }
    if (!this.#detail(run, text)) run.stray = true;
  }

  /** Lists a resource line that does not stand where the CLI prints one (and says so); false if `text` is none. */
  #displaced(run: Run, text: string): boolean {
    const d = displacedResource(text);
    if (d === undefined) return false;
    run.stray = true;
    // Level 0: the lines under it (its URN, with the resource's name) are still read as its.
    this.#resource(run, d.op, 0, d.type, d.retain, undefined);
    return true;
  }

  /**
   * Cross-checks a resource's URN line against what the CLI guarantees: the URN's type is its
   * resource line's, its stack the banner's, its project the run's other URNs', and no resource
   * is printed twice in a run. Anything else is text the program wrote (e.g. a partial line that
   * re-typed the CLI's resource line, or a forged block that takes a real resource's place).
   */
  #checkUrn(run: Run, top: OpenResource, urn: string): void {
    const u = splitUrn(urn);
    if (u === undefined) {
      run.stray = true;
      return;
    }
    if (u.type !== top.type || !sameStack(run.info.stack, u.stack, u.project)) run.stray = true;
    if (run.project === undefined) run.project = u.project;
    else if (run.project !== u.project) run.stray = true;
    // A `--refresh` run prints a resource's refresh step and then its other step.
    const key = top.op === 'refresh' ? `refresh ${urn}` : urn;
    if (run.urns.has(key)) run.stray = true;
    else if (run.urns.size < this.#limits.maxResources) run.urns.add(key);
  }

  /** Reads one line of the `Resources:` block; false when the line is not part of it. */
  #summaryLine(run: Run, text: string): boolean {
    // Only the first block's counts are kept: a second one makes the set incomplete anyway.
    const summary: Summary =
      run.summaries === 1 && run.summary !== undefined
        ? run.summary
        : { counts: {}, errored: 0, awaiting: 0, repeated: false };
    const c = COUNT.exec(text);
    if (c) {
      const glyph = c[1] ?? '';
      const n = Number(c[2]);
      const op = c[3] !== undefined ? c[3] : pastTenseOp(glyph, c[4] ?? '');
      if (op !== undefined && isStepOp(op) && STEP_OP_GLYPH[op] === glyph && Number.isSafeInteger(n)) {
        if (summary.counts[op] !== undefined) summary.repeated = true;
        summary.counts[op] = n;
        return true;
      }
      return false;
    }
    const t = TOTALS.exec(text);
    if (t) {
      const unchanged = t[2] ?? t[3];
      if (t[1] !== undefined) {
        if (summary.changes !== undefined) summary.repeated = true;
        summary.changes = Number(t[1]);
      }
      if (unchanged !== undefined) {
        if (summary.counts.same !== undefined) summary.repeated = true;
        summary.counts.same = Number(unchanged);
      }
      return true;
    }
    const f = FAILED_TAIL.exec(text);
    if (f) {
      const n = Number(f[1]);
      if (f[2] === 'errored') summary.errored = n;
      else summary.awaiting = n;
      return true;
    }
    return false;
  }

  #resource(
    run: Run,
    op: StepOp,
    level: number,
    type: string,
    retain: boolean,
    lock: string | undefined,
  ): void {
    while (run.open.length > 0 && (run.open.at(-1)?.level ?? 0) >= level) run.open.pop();
    // The root stack is printed for every run; a refresh line is printed only for a resource
    // whose refresh found a difference (and for the root stack).
    if (!(op === 'refresh' && type === ROOT_STACK)) run.seen[op] = (run.seen[op] ?? 0) + 1;
    let change: ResourceChange | undefined;
    if (this.#kept >= this.#limits.maxResources) run.omitted.resources++;
    else {
      change = {
        op,
        type: boundText(type, 400),
        name: '',
        urn: '',
        retain,
        diff: [],
        diffOmitted: 0,
      };
      if (lock !== undefined) change.protect = lock === ' 🔒' ? 'protected' : 'unprotected';
      run.resources.push(change);
      this.#kept++;
    }
    run.open.push({ change, type, op, level, inOutputs: false, pseudo: [] });
    run.awaitingUrn = true;
  }

  /** A line under a resource: its URN, a property line, or an outputs block; false when under none. */
  #detail(run: Run, text: string): boolean {
    const indent = text.length - text.trimStart().length;
    // The line belongs to the innermost open resource whose body it is indented under.
    while (run.open.length > 0) {
      const top = run.open.at(-1);
      if (top && indent >= top.level * 4 + 2) break;
      run.open.pop();
    }
    const top = run.open.at(-1);
    if (!top) return false;
    if (OUTPUTS.test(text)) {
      // The outputs of the root stack, and a refresh's changes (printed with their resource
      // line), are known to be theirs; other outputs blocks are printed by `up` when the
      // resource finished, after other resources' lines, so whose they are is not known.
      top.inOutputs = top.level > 0 && top.change?.op !== 'refresh';
      if (top.inOutputs) return true;
    } else if (top.inOutputs) return true;
    const change = top.change;
    const pseudo = PSEUDO.exec(text)?.[1];
    const marks = text.match(PSEUDO_ANYWHERE)?.length ?? 0;
    if (
      pseudo !== undefined
        ? marks > 1
        : marks > 0 || !GLYPH_COLUMNS.has(text.slice(top.level * 4 + 2, top.level * 4 + 4))
    )
      // Not how the CLI prints a property line (text before a real line, e.g. its URN line).
      run.stray = true;
    if (pseudo !== undefined) {
      // The CLI prints each once, right under its resource line, one level in (a second URN
      // line would rename the resource).
      if (indent !== top.level * 4 + 4 || top.pseudo.includes(pseudo)) run.stray = true;
      if (top.pseudo.length < 3) top.pseudo.push(pseudo);
    }
    const urnLine = pseudo === 'urn' ? URN.exec(text) : null;
    if (urnLine) this.#checkUrn(run, top, urnLine[1] ?? '');
    // `[urn=` that is not a whole `[urn=…]` line: not the CLI's (its URN is not checked either).
    else if (pseudo === 'urn') run.stray = true;
    if (!change) {
      run.omitted.diffLines++;
      return true;
    }
    if (pseudo !== undefined) {
      const urn = urnLine;
      if (urn && change.urn === '') {
        change.urn = boundText(urn[1] ?? '', 2000);
        const parts = (urn[1] ?? '').split('::');
        change.name = parts.length >= 4 ? boundText(parts.slice(3).join('::'), 400) : '';
      }
      return true;
    }
    if (
      change.diff.length >= this.#limits.maxDiffLinesPerResource ||
      this.#diffLines >= this.#limits.maxDiffLines
    ) {
      change.diffOmitted++;
      run.omitted.diffLines++;
      return true;
    }
    this.#diffLines++;
    change.diff.push(
      boundText(text.slice(Math.min(indent, top.level * 4 + 2)).trimEnd(), this.#limits.maxDiffLineChars),
    );
    return true;
  }

  #result(status: RunStatus): ChangeSet {
    const incomplete: IncompleteReason[] = [];
    const first = this.#runs[0];
    if (first === undefined) {
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
    // The Update's run is the first one read (the log starts at its start); a banner stamped
    // after the Update's end starts a later run of the same pod. Any line stamped inside the
    // run's time after such a banner means the two are mixed: then every run is this one's.
    const endAt = status.endTime === undefined ? NaN : Date.parse(status.endTime);
    const window = Number.isNaN(endAt) ? Infinity : endAt + LATER_RUN_MARGIN_MS;
    let mine = this.#runs.findIndex((r, i) => i > 0 && r.bannerAt > window);
    if (mine < 0) mine = this.#runs.length;
    const later = this.#runs.slice(mine);
    // A later run that is not as the CLI prints one is not trusted to be one either (e.g. this
    // run's lines, each written after a forged later entry's head).
    const mixed = later.some((r) => !(r.minAt > window) || r.stray || r.garbled);
    const runs = mixed ? this.#runs : this.#runs.slice(0, mine);
    const interleaved = runs.length > 1;
    const run = runs.length === 1 ? first : merge(runs, this.#limits.maxErrors);

    const summary = run.summaries === 1 ? run.summary : undefined;
    const agrees = summary !== undefined && !interleaved && summaryAgrees(summary, run.seen, run.info.dryRun);
    if (interleaved) incomplete.push('interleaved');
    if (run.summaries === 0) incomplete.push('no-summary');
    else if (!interleaved && run.summaries > 1) incomplete.push('summary-twice');
    else if (!interleaved && !agrees) incomplete.push('summary-mismatch');
    if (!status.runComplete || (run.summaries > 0 && !run.endSeen)) incomplete.push('no-end');
    if (run.stray && !interleaved) incomplete.push('unexpected-output');
    if (run.garbled) incomplete.push('garbled');
    if (run.cut) incomplete.push('line-cut');
    if (this.#capped) incomplete.push('input-cap');

    const counts: Partial<Record<StepOp, number>> = {};
    for (const op of STEP_OPS) {
      // What an agreeing summary adds to the resource lines: the unchanged resources (the
      // display lists none but the root stack), and, for a run that applied, which steps failed.
      const n =
        agrees && (op === 'same' || SUMMARY_OPS.has(op)) ? (summary.counts[op] ?? 0) : (run.seen[op] ?? 0);
      if (n > 0) counts[op] = n;
    }
    return {
      source: 'workspace-log',
      complete: incomplete.length === 0,
      incomplete,
      run: { ...run.info },
      failed: run.failed,
      counts,
      countsFrom: agrees ? 'summary' : 'resources',
      resources: run.resources,
      errors: run.errors,
      omitted: { ...run.omitted },
    };
  }
}

/**
 * Does the summary agree with the resource lines? Every counted operation as often as its lines
 * (for a run that applied, fewer by at most its `errored` + `awaiting` resources, whose lines
 * were printed before they failed), any other operation it prints as often as its lines, at
 * least as many unchanged as `(same)` lines, and `N changes` their total.
 */
function summaryAgrees(summary: Summary, seen: Partial<Record<StepOp, number>>, dryRun: boolean): boolean {
  if (summary.repeated) return false;
  let slack = dryRun ? 0 : summary.errored + summary.awaiting;
  let changes = 0;
  for (const op of STEP_OPS) {
    if (op === 'same') continue;
    const s = summary.counts[op];
    const n = seen[op] ?? 0;
    if (SUMMARY_OPS.has(op)) {
      const c = s ?? 0;
      if (c > n) return false;
      slack -= n - c;
      if (slack < 0) return false;
      changes += c;
    } else if (s !== undefined) {
      if (s !== n) return false;
      changes += s;
    }
  }
  if ((summary.counts.same ?? 0) < (seen.same ?? 0)) return false;
  return summary.changes === undefined || summary.changes === changes;
}

/** Runs read as one (two runs' lines mixed): everything any of them listed. */
function merge(runs: readonly Run[], maxErrors: number): Run {
  const [head, ...rest] = runs;
  if (head === undefined) throw new Error('merge of no runs');
  const out: Run = {
    ...head,
    info: { ...head.info },
    resources: [...head.resources],
    seen: { ...head.seen },
    errors: [...head.errors],
    omitted: { ...head.omitted },
  };
  for (const r of rest) {
    out.resources.push(...r.resources);
    for (const op of STEP_OPS) {
      const n = r.seen[op];
      if (n !== undefined) out.seen[op] = (out.seen[op] ?? 0) + n;
    }
    out.summaries += r.summaries;
    out.summary ??= r.summary;
    out.endSeen = r.endSeen;
    if (r.info.endedAt !== undefined) out.info.endedAt = r.info.endedAt;
    out.failed ||= r.failed;
    out.garbled ||= r.garbled;
    out.stray ||= r.stray;
    out.cut ||= r.cut;
    for (const e of r.errors) {
      if (out.errors.length >= maxErrors) out.omitted.errors++;
      else out.errors.push(e);
    }
    out.omitted.resources += r.omitted.resources;
    out.omitted.diffLines += r.omitted.diffLines;
    out.omitted.longLines += r.omitted.longLines;
    out.omitted.errors += r.omitted.errors;
  }
  return out;
}

/**
 * Parses a whole log text (or bytes) with {@link ChangeSetParser}; `status` says whether the
 * run had ended when the log was read (default: it had, with no end time known).
 */
export function parseWorkspaceLog(
  input: string | Uint8Array,
  limits: Partial<ParseLimits> = {},
  status: RunStatus = { runComplete: true },
): ChangeSet {
  const p = new ChangeSetParser(limits);
  p.push(input);
  return p.end(status);
}
