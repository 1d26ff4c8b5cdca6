/**
 * Ledger entries (./ledger.ts is the store; docs/delivery.md describes both): what is known to be
 * handled for one (Alert, Stack) pair, and the pure operations on it — whether an event is done,
 * recording an event as handled or as about to be sent, merging two copies, and the compact text
 * form kept in the DeliveryLedger objects.
 *
 * An entry holds a few run records and a floor:
 * - a **run record** per recent run (key: 8 hex of SHA-1 of the run key `<stack>/<run>`): the
 *   resourceVersion at which the run was first observed (its place in the Stack's order,
 *   ./order.ts), the phases handled (Started, Succeeded, Failed; the last stall), the in-flight
 *   phases (recorded before a send to a target whose delivery can be looked up on recovery), and
 *   an optional provider note (e.g. a chat message id the run's later events thread under).
 * - the **floor**: when records are dropped, just below the first observation of the oldest run
 *   still kept. An event of a run without a record is done when its run is observed at or below
 *   the floor: it ended before the kept runs began (PKO runs one at a time per Stack).
 *
 * Records are kept for the {@link KEEP_RECENT} newest runs and for every open run — Started
 * handled, result not — up to {@link MAX_OPEN}: the next run's Started can be handled before the
 * previous run's result is seen (Stack and Update are watched separately), and that result must
 * still go out. Older records fold into the floor.
 *
 * Merging (`mergeEntries`) is commutative and idempotent and covers every event either copy
 * covers — a run one copy folded into its floor stays done, and of outcomes that replace each
 * other (PKO v1) the newer generation wins — so any two copies (a stale leader's write, a shard
 * left behind by an interrupted split) merge into one without repeating a handled event
 * (property-tested in test/delivery/ledger-entry.test.ts). It is not strictly associative: with
 * three copies, the order of merges can decide whether an old open run is folded into the floor.
 */
import { createHash } from 'node:crypto';

/** Phase bits of a run record. */
export const PHASE = { started: 1, succeeded: 2, failed: 4 } as const;
const RESULT_BITS = PHASE.succeeded | PHASE.failed;

/** Runs kept with a record whatever their state (newest by observation). */
export const KEEP_RECENT = 3;
/** Open runs kept beyond {@link KEEP_RECENT} (oldest folded into the floor first). */
export const MAX_OPEN = 8;
/** Upper bound of a provider note, in UTF-8 bytes. */
export const MAX_NOTE_BYTES = 128;

export interface RunRecord {
  /** `runHash(runKey)`. */
  h: string;
  /** resourceVersion at which the run was first observed (order within the Stack). */
  rv: number;
  /** Handled phases ({@link PHASE} bits). */
  bits: number;
  /** Highest Stack generation of a stall handled for this run, and 4 hex of its event id's hash. */
  stall?: { gen: number; h: string };
  /** Phases recorded as about to be sent and not yet handled ({@link PHASE} bits). */
  inflight?: number;
  /** A provider's note for this run (≤ {@link MAX_NOTE_BYTES}), e.g. a chat thread id. */
  note?: string;
  /**
   * Runs whose outcomes replace each other (PKO v1, {@link EventRef.latestOnly}): how many times
   * the handled outcome changed. A merge keeps the outcome of the higher count, so a stale copy
   * (an old leader's write) never brings back an outcome that was replaced since.
   */
  gen?: number;
}

export interface Entry {
  /** Runs observed at or below this resourceVersion without a record are done. */
  floor: number;
  /** Sorted by `rv` (ties by `h`). */
  runs: RunRecord[];
}

/** The event as the entry algebra sees it. */
export interface EventRef {
  /** `runHash(runKey(identity))`. */
  run: string;
  /** Observation resourceVersion of the run (the record's, when the run has one). */
  rv: number;
  phase: 'started' | 'succeeded' | 'failed' | 'stalled';
  /** Stalls: the Stack generation and `eventHash(id)`. */
  stall?: { gen: number; h: string };
  /**
   * The run's outcomes replace each other (PKO v1: a run is a commit, and its Stack shows only the
   * latest outcome): handling a result forgets the other one, so the same outcome seen again is
   * done while the last outcome handled was it, and new after the other one (docs/events.md,
   * "PKO v1"). PKO v2 runs keep both: a retried run's earlier failure stays visible beside its
   * success.
   */
  latestOnly?: boolean;
}

/** 8 hex characters of SHA-1 of a run key: enough to tell apart the few runs one entry holds. */
export function runHash(runKey: string): string {
  return createHash('sha1').update(runKey).digest('hex').slice(0, 8);
}

/** 4 hex characters of SHA-1 of an event id: tells apart stalls of one run at one generation. */
export function stallHash(eventId: string): string {
  return createHash('sha1').update(eventId).digest('hex').slice(0, 4);
}

function byOrder(a: RunRecord, b: RunRecord): number {
  return a.rv - b.rv || (a.h < b.h ? -1 : a.h > b.h ? 1 : 0);
}

const isOpen = (r: RunRecord): boolean => (r.bits & PHASE.started) !== 0 && (r.bits & RESULT_BITS) === 0;

type Stall = NonNullable<RunRecord['stall']>;

function stallAbove(a: Stall | undefined, b: Stall): Stall;
function stallAbove(a: Stall | undefined, b: Stall | undefined): Stall | undefined;
function stallAbove(a: Stall | undefined, b: Stall | undefined): Stall | undefined {
  if (!a) return b;
  if (!b) return a;
  if (a.gen !== b.gen) return a.gen > b.gen ? a : b;
  return a.h >= b.h ? a : b;
}

/**
 * Keeps records for the newest {@link KEEP_RECENT} runs and the newest {@link MAX_OPEN} open ones;
 * folds the others into the floor. Returns a new entry; records are copied, never shared.
 */
export function canonical(e: Entry): Entry {
  const runs = [...e.runs].sort(byOrder);
  const keep = new Set<RunRecord>(runs.slice(-KEEP_RECENT));
  const open = runs.filter(isOpen).slice(-MAX_OPEN);
  for (const r of open) keep.add(r);
  const kept = runs.filter((r) => keep.has(r)).map((r) => ({ ...r }));
  let floor = e.floor;
  if (kept.length < runs.length) {
    // Everything observed before the oldest run still kept is done. Not just the dropped run's
    // own first observation: its objects changed after that (the run finished, PKO removed its
    // finalizer) and are seen at those later resourceVersions again — but not after the next
    // run began, since PKO runs one at a time.
    const oldestKept = kept[0]?.rv ?? Number.MAX_SAFE_INTEGER;
    floor = Math.max(floor, oldestKept - 1, ...runs.filter((r) => !keep.has(r)).map((r) => r.rv));
  }
  return { floor, runs: kept };
}

/** Whether the event `q` is covered by entry `e` (handled before, or older than the floor). */
export function entryCovers(e: Entry | undefined, q: EventRef): boolean {
  if (!e) return false;
  const r = e.runs.find((x) => x.h === q.run);
  if (!r) return q.rv <= e.floor;
  switch (q.phase) {
    // A Started is moot once the run's result went out.
    case 'started':
      return (r.bits & (PHASE.started | RESULT_BITS)) !== 0;
    case 'succeeded':
      return (r.bits & PHASE.succeeded) !== 0;
    case 'failed':
      return (r.bits & PHASE.failed) !== 0;
    case 'stalled': {
      const s = q.stall;
      if (!s || !r.stall) return false;
      return s.gen < r.stall.gen || (s.gen === r.stall.gen && s.h === r.stall.h);
    }
  }
}

/** The record of `q`'s run in `e`, if any (its order rv and note live there). */
export function runRecord(e: Entry | undefined, run: string): RunRecord | undefined {
  return e?.runs.find((x) => x.h === run);
}

function bitOf(phase: EventRef['phase']): number {
  return phase === 'stalled' ? 0 : PHASE[phase];
}

function withRecord(e: Entry | undefined, q: EventRef, change: (r: RunRecord) => RunRecord): Entry {
  const base: Entry = e ?? { floor: 0, runs: [] };
  const i = base.runs.findIndex((x) => x.h === q.run);
  const runs = [...base.runs];
  if (i >= 0) runs[i] = change({ ...(runs[i] as RunRecord) });
  else runs.push(change({ h: q.run, rv: q.rv, bits: 0 }));
  return canonical({ floor: base.floor, runs });
}

/**
 * `e` after handling `q` (delivered, skipped with a reason, or given up): its phase is marked,
 * its in-flight mark cleared, and `note` (when given) stored with the run.
 * @throws RangeError when `note` is over {@link MAX_NOTE_BYTES} or holds a line break.
 */
export function recordHandled(e: Entry | undefined, q: EventRef, note?: string): Entry {
  if (note !== undefined) checkNote(note);
  return withRecord(e, q, (r) => {
    const bit = bitOf(q.phase);
    if (q.latestOnly === true && (bit & RESULT_BITS) !== 0 && (r.bits & RESULT_BITS) !== bit) {
      // Another outcome than the one handled last: it replaces that one, one generation on.
      if ((r.bits & RESULT_BITS) !== 0) r.gen = (r.gen ?? 0) + 1;
      r.bits &= ~RESULT_BITS;
    }
    r.bits |= bit;
    if (q.phase === 'stalled' && q.stall) r.stall = stallAbove(r.stall, q.stall);
    if (r.inflight !== undefined) {
      // A handled result makes an in-flight Started moot as well.
      r.inflight &= ~(r.bits | ((r.bits & RESULT_BITS) !== 0 ? PHASE.started : 0));
      if (r.inflight === 0) delete r.inflight;
    }
    if (note !== undefined) r.note = note;
    return r;
  });
}

/** `e` with `q` marked as about to be sent (looked up on recovery when the outcome is not recorded). */
export function recordInFlight(e: Entry | undefined, q: EventRef): Entry {
  return withRecord(e, q, (r) => {
    const bit = bitOf(q.phase);
    if ((r.bits & bit) === 0 && bit !== 0) r.inflight = (r.inflight ?? 0) | bit;
    return r;
  });
}

/** Whether `q` was recorded as in flight and not handled since. */
export function isInFlight(e: Entry | undefined, q: EventRef): boolean {
  const r = runRecord(e, q.run);
  return r?.inflight !== undefined && (r.inflight & bitOf(q.phase)) !== 0;
}

/**
 * The join of two entries: every handled phase of either, the higher floor. A run one copy holds
 * a record of and the other has folded into its floor (observed at or below that floor, no
 * record) is done as far as the other copy knows: the record goes, or a stale copy's open record
 * would reopen a run whose result was delivered (a repeat).
 */
export function mergeEntries(a: Entry | undefined, b: Entry): Entry {
  if (!a) return canonical(b);
  const inA = new Set(a.runs.map((r) => r.h));
  const inB = new Set(b.runs.map((r) => r.h));
  const byHash = new Map<string, RunRecord>();
  for (const r of [...a.runs, ...b.runs]) {
    if (!inA.has(r.h) && r.rv <= a.floor) continue;
    if (!inB.has(r.h) && r.rv <= b.floor) continue;
    const cur = byHash.get(r.h);
    if (!cur) {
      byHash.set(r.h, { ...r });
      continue;
    }
    // Outcomes that replace each other: the later generation's result wins; within one, both.
    const ga = cur.gen ?? 0;
    const gb = r.gen ?? 0;
    const results =
      ga === gb ? (cur.bits | r.bits) & RESULT_BITS : (ga > gb ? cur.bits : r.bits) & RESULT_BITS;
    const bits = ((cur.bits | r.bits) & ~RESULT_BITS) | results;
    const gen = Math.max(ga, gb);
    const inflight = ((cur.inflight ?? 0) | (r.inflight ?? 0)) & ~bits;
    const stall = stallAbove(cur.stall, r.stall);
    const note =
      cur.note === undefined
        ? r.note
        : r.note === undefined
          ? cur.note
          : cur.note >= r.note
            ? cur.note
            : r.note;
    byHash.set(r.h, {
      h: r.h,
      rv: Math.min(cur.rv, r.rv),
      bits,
      ...(stall ? { stall } : {}),
      ...(inflight !== 0 ? { inflight } : {}),
      ...(note !== undefined ? { note } : {}),
      ...(gen > 0 ? { gen } : {}),
    });
  }
  return canonical({ floor: Math.max(a.floor, b.floor), runs: [...byHash.values()] });
}

/** Whether two entries say the same. */
export function entriesEqual(a: Entry | undefined, b: Entry | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  return formatEntry(a) === formatEntry(b);
}

function checkNote(note: string): void {
  if (Buffer.byteLength(note, 'utf8') > MAX_NOTE_BYTES)
    throw new RangeError(`a run note is limited to ${MAX_NOTE_BYTES} bytes`);
}

/**
 * Text form: `<floor>` then, per run, ` <h>.<rv>.<bits>` followed by optional `.s<gen>~<h4>`
 * (stall), `.i<bits>` (in flight), `.n<base64url>` (note) and `.g<n>` (outcome generation).
 * Decimal numbers, lower-case hex.
 */
export function formatEntry(e: Entry): string {
  let s = String(e.floor);
  for (const r of e.runs) {
    s += ` ${r.h}.${r.rv}.${r.bits}`;
    if (r.stall) s += `.s${r.stall.gen}~${r.stall.h}`;
    if (r.inflight !== undefined) s += `.i${r.inflight}`;
    if (r.note !== undefined) s += `.n${Buffer.from(r.note, 'utf8').toString('base64url')}`;
    if (r.gen !== undefined && r.gen > 0) s += `.g${r.gen}`;
  }
  return s;
}

const DEC = /^(0|[1-9]\d{0,15})$/;
const num = (s: string | undefined): number | undefined =>
  s !== undefined && DEC.test(s) && Number.isSafeInteger(Number(s)) ? Number(s) : undefined;

/** Parses {@link formatEntry}'s form; undefined when malformed (never throws). */
export function parseEntry(s: string): Entry | undefined {
  const [floorText, ...runTexts] = s.trim().split(' ');
  const floor = num(floorText);
  if (floor === undefined) return undefined;
  const runs: RunRecord[] = [];
  for (const t of runTexts) {
    const [h, rvText, bitsText, ...opts] = t.split('.');
    const rv = num(rvText);
    const bits = num(bitsText);
    if (h === undefined || !/^[0-9a-f]{8}$/.test(h) || rv === undefined || bits === undefined || bits > 7)
      return undefined;
    const r: RunRecord = { h, rv, bits };
    for (const o of opts) {
      const kind = o[0];
      const v = o.slice(1);
      if (kind === 's') {
        const m = /^(\d{1,15})~([0-9a-f]{4})$/.exec(v);
        if (!m) return undefined;
        r.stall = { gen: Number(m[1]), h: m[2] ?? '' };
      } else if (kind === 'i') {
        const i = num(v);
        if (i === undefined || i > 7) return undefined;
        if (i !== 0) r.inflight = i;
      } else if (kind === 'g') {
        const g = num(v);
        if (g === undefined) return undefined;
        if (g !== 0) r.gen = g;
      } else if (kind === 'n') {
        if (!/^[A-Za-z0-9_-]*$/.test(v)) return undefined;
        const note = Buffer.from(v, 'base64url').toString('utf8');
        if (Buffer.byteLength(note, 'utf8') > MAX_NOTE_BYTES) return undefined;
        r.note = note;
      } else return undefined;
    }
    runs.push(r);
  }
  return canonical({ floor, runs });
}
