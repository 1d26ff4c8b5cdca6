/**
 * Secrets never posted (docs/previews.md, "Secrets never posted"): the Secrets a PKO Stack
 * references, their values, the values a run itself marks secret ({@link SecretMarks}, an `up`'s
 * secret outputs), and a change set or message with every one of those values removed, in every
 * encoding of {@link secretRedactor}, before any template sees it.
 *
 * Pulumi masks the values it knows to be secret (`[secret]`), but not a value a provider does not
 * mark secret (a password written into a plain property), nor what an agent or program logs
 * itself: forges keep a comment's edit history, so such a value must never reach the first post.
 */
import type { Stack } from '../api/pko.ts';
import type { ChangeSet } from '../changes/types.ts';
import { REDACTED } from '../credential/redact.ts';
import { errorStatusCode, kubeRequest, objectPath, type KubeConfig } from '../kube/client.ts';

/** What a Stack's spec references: Secrets (read whole) and literal secret config values. */
export interface StackSecretRefs {
  /** Names of Secrets in the Stack's namespace, sorted, unique. */
  secrets: string[];
  /** `spec.secrets` values (inline secret config), as strings. */
  literals: string[];
}

/** Bounds of the walk over a spec (tenant input). */
const MAX_DEPTH = 16;
const MAX_NODES = 20_000;
/** Secrets read per Stack at most; more is refused (no details rather than a partial redaction). */
export const MAX_STACK_SECRETS = 64;

/**
 * The Secrets `stack.spec` references, found wherever PKO v2's Stack API (pulumi.com/v1 Stack,
 * PKO v2.x) lets a Secret in: `ResourceRef`s of type `Secret` (`envRefs`, `secretsRef`,
 * `gitAuth.accessToken`, `gitAuth.sshAuth.*`, `gitAuth.basicAuth.*`, the GitHub App fields),
 * `gitAuthSecret`, `accessTokenSecret`, `envSecrets`, and in `workspaceTemplate` (a pod spec)
 * `secretKeyRef`, `envFrom[].secretRef` and `secret` volumes; plus the literal values of
 * `spec.secrets`. The spec is walked generically (bounded: 16 levels, 20,000 nodes), so a
 * reference in a field added later is found as long as it has one of these shapes.
 */
export function stackSecretRefs(stack: Stack): StackSecretRefs {
  const names = new Set<string>();
  const spec = (stack.spec ?? {}) as Record<string, unknown>;
  let nodes = 0;
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  const walk = (v: unknown, depth: number): void => {
    if (++nodes > MAX_NODES || depth > MAX_DEPTH || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (const x of v) walk(x, depth + 1);
      return;
    }
    const o = v as Record<string, unknown>;
    // ResourceRef {type: Secret, secret: {name, key}}
    if (o.type === 'Secret' && o.secret !== null && typeof o.secret === 'object') {
      const n = str((o.secret as Record<string, unknown>).name);
      if (n) names.add(n);
    }
    for (const [k, x] of Object.entries(o)) {
      if (k === 'gitAuthSecret' || k === 'accessTokenSecret') {
        const n = str(x);
        if (n) names.add(n);
      } else if (k === 'envSecrets' && Array.isArray(x)) {
        for (const e of x) {
          const n = str(e);
          if (n) names.add(n);
        }
      } else if ((k === 'secretKeyRef' || k === 'secretRef') && x !== null && typeof x === 'object') {
        const n = str((x as Record<string, unknown>).name);
        if (n) names.add(n);
      } else if (k === 'secret' && x !== null && typeof x === 'object') {
        const n = str((x as Record<string, unknown>).secretName);
        if (n) names.add(n);
      }
      walk(x, depth + 1);
    }
  };
  walk(spec, 0);
  const literals: string[] = [];
  const inline = spec.secrets;
  if (inline !== null && typeof inline === 'object' && !Array.isArray(inline)) {
    for (const v of Object.values(inline as Record<string, unknown>)) {
      if (typeof v === 'string') literals.push(v);
      else if (v !== null && v !== undefined) literals.push(JSON.stringify(v));
    }
  }
  return { secrets: [...names].sort(), literals };
}

/** Secret values (after splitting multi-line ones) a redactor takes at most. */
export const MAX_REDACTED_VALUES = 2_000;
/** Total UTF-16 code units of those values at most (1 Mi). */
export const MAX_REDACTED_CHARS = 1024 * 1024;
/**
 * Work units (positions looked at plus characters compared) one redaction of a change set or a
 * message may take; beyond, the text is not shown (no details rather than a partial redaction).
 * About 0.05–0.25 s of one core at most (each unit is charged about 10 ns of real work).
 */
export const REDACTION_WORK_BUDGET = 32_000_000;

/** Counts a redaction's work (see {@link REDACTION_WORK_BUDGET}); `work` only grows. */
export interface RedactionWork {
  work: number;
}

/** Thrown when a redaction would take more than its budget. */
export class RedactionBudgetExceeded extends Error {
  constructor() {
    super('removing the Secret values from this output would take too long');
  }
}

/**
 * Removes a Stack's Secret values from texts: built once per set of values (src/enrich/changes.ts
 * keeps it, not the values, in its cache).
 */
export interface SecretRedactor {
  /** How many values (after splitting multi-line ones) it removes. */
  readonly size: number;
  /**
   * `text` with every form of every value replaced by `[redacted]` (a value only the run marks
   * secret: `[secret]`); when `cut` (a line the parser cut, without its `…`), a tail that is the
   * start of a form (4 characters or more) too. Throws {@link RedactionBudgetExceeded} when
   * `work` passes the budget.
   */
  redact(text: string, work: RedactionWork, cut?: boolean): string;
  /**
   * This redactor plus the values a run marks secret (`marked`, replaced by `[secret]`), or why
   * not (over {@link MAX_REDACTED_VALUES} or {@link MAX_REDACTED_CHARS} together).
   */
  withMarked(marked: readonly string[]): SecretRedactor | string;
}

/** Length of the index key: the first characters of each form (forms shorter are not redacted). */
const KEY = 4;
/** Forms this long or longer are looked up by their first this many characters. */
const HEAD = 16;
/** A long form is compared whole only when its first this many characters match. */
const PROBE = 64;

/** Bits of the bitmap of forms' first {@link KEY} characters (128 KiB). */
const KEY_BITS = 1 << 20;
/** Work units of a position whose first characters are in that bitmap (two slices, two look-ups). */
const LOOKUP_COST = 8;

/** A hash of `t[p, p + KEY)` in [0, KEY_BITS). */
function hashKey(t: string, p: number): number {
  let h =
    Math.imul(t.charCodeAt(p), 0x9e3779b1) ^
    Math.imul(t.charCodeAt(p + 1), 0x85ebca77) ^
    Math.imul(t.charCodeAt(p + 2), 0xc2b2ae3d) ^
    Math.imul(t.charCodeAt(p + 3), 0x27d4eb2f);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h & (KEY_BITS - 1);
}

/** What {@link secretRedactor} puts in place of a value the run itself marks secret. */
export const MARKED = '[secret]';

/** One text a value is searched for in. */
interface Form {
  text: string;
  /** A value the run marks secret (shown {@link MARKED}), not a referenced Secret's ({@link REDACTED}). */
  marked: boolean;
  /** A base64 form: a match takes the whole run of base64 characters around it. */
  b64: boolean;
}

/** A stretch of text to replace, [s, e). */
interface Span {
  s: number;
  e: number;
  marked: boolean;
}

/** `%xx` escapes with lowercase hex digits. */
function lowerHex(s: string): string {
  return s.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());
}

/** `v` as a URL's userinfo holds it (WHATWG URL, the userinfo percent-encode set). */
function userinfoForm(v: string): string {
  try {
    const u = new URL('http://h/');
    u.password = v;
    return u.password;
  } catch {
    return v;
  }
}

/**
 * The texts `v` is searched for in: verbatim; JSON-escaped (with and without `\/`);
 * `encodeURIComponent` and form-encoding (`application/x-www-form-urlencoded`, WHATWG
 * `URLSearchParams`: space as `+`; and `encodeURIComponent` with `+` for space), each with
 * upper- and lowercase hex; as a URL's userinfo; base64 (standard and URL-safe, padded and not).
 */
function formsOf(v: string): { text: string; b64: boolean }[] {
  const json = JSON.stringify(v).slice(1, -1);
  const uri = encodeURIComponent(v);
  const form = new URLSearchParams([['', v]]).toString().slice(1);
  const uriPlus = uri.replaceAll('%20', '+');
  const userinfo = userinfoForm(v);
  const b64 = Buffer.from(v, 'utf8').toString('base64');
  const url = Buffer.from(v, 'utf8').toString('base64url');
  const plain = new Set([
    v,
    json,
    json.replaceAll('/', '\\/'),
    uri,
    lowerHex(uri),
    form,
    lowerHex(form),
    uriPlus,
    lowerHex(uriPlus),
    userinfo,
    lowerHex(userinfo),
  ]);
  const enc = new Set([b64, b64.replace(/=+$/, ''), url, `${url}${'='.repeat((4 - (url.length % 4)) % 4)}`]);
  for (const f of plain) enc.delete(f);
  return [
    ...[...plain].map((text) => ({ text, b64: false })),
    ...[...enc].map((text) => ({ text, b64: true })),
  ];
}

/** Whether `c` (a UTF-16 code unit) is a base64 character (standard or URL-safe alphabet). */
function isB64(c: number): boolean {
  return (
    (c >= 0x41 && c <= 0x5a) || // A-Z
    (c >= 0x61 && c <= 0x7a) || // a-z
    (c >= 0x30 && c <= 0x39) || // 0-9
    c === 0x2b || // +
    c === 0x2f || // /
    c === 0x2d || // -
    c === 0x5f // _
  );
}

/** Base64 runs shorter than this are not decoded (4 bytes of a value need 6 characters or more). */
const MIN_B64_RUN = 8;
/** Base64 runs longer than this are not decoded (counted work; a real credential is shorter). */
const MAX_B64_RUN = 64 * 1024;
/**
 * Work units one decoding of a base64 run costs besides its length: its slice, Buffer and string
 * (about 1–2 µs of one core; a unit of the budget is about 10 ns). Measured: 600,000 runs of 8
 * characters took 2.5 s before the budget stopped them when a decoding was charged its length
 * only (issue 36).
 */
const DECODE_COST = 160;

/** The values a redactor takes, with what they are replaced by. */
interface Value {
  v: string;
  marked: boolean;
}

/**
 * A redactor for `values` (the Stack's Secret values, replaced by `[redacted]`) and `marked`
 * (values the run itself marks secret, replaced by `[secret]`): each value and, for a multi-line
 * value (a PEM key), each of its lines (the CLI prints a property per line), in every form of
 * {@link formsOf}; and any run of base64 characters (8 or more, mixed case) whose decoding, from
 * any of its first 4 characters on, holds a value — so `Authorization: Basic base64(user:VALUE)`
 * for any user, and base64 of any text holding a value, go whole. Values shorter than 4
 * characters are not redacted (src/credential/redact.ts: they would shred ordinary words). A
 * string (why) instead when there are more than {@link MAX_REDACTED_VALUES} values or
 * {@link MAX_REDACTED_CHARS} characters.
 *
 * Matching looks, at each position of a text, only at the forms starting with the 4 characters
 * found there (a bitmap of those 4 characters' hashes passes most positions over; a map from them
 * to forms), so a text costs 2 units per position, 8 more per position the bitmap lets through,
 * plus the characters compared with candidate forms, plus for each decoding of a mixed-case base64
 * run (from up to 4 offsets, only those long enough to hold the shortest form) 160 units and twice
 * its length, plus the search of what it decodes to — and never more than the budget. Measured
 * (issue 36, 2 loaded cores): a budget-blowing input fails within about 0.05–0.25 s.
 */
export function secretRedactor(
  values: readonly string[],
  marked: readonly string[] = [],
): SecretRedactor | string {
  const all: Value[] = [];
  const seen = new Set<string>();
  const push = (v: string, m: boolean): void => {
    if (seen.has(v)) return;
    seen.add(v);
    all.push({ v, marked: m });
  };
  // A referenced Secret's value is said `[redacted]` even when the run marks it secret too.
  for (const [list, m] of [
    [values, false],
    [marked, true],
  ] as const) {
    for (const v of list) {
      if (v.length >= KEY) push(v, m);
      if (v.includes('\n'))
        for (const line of v.split(/\r?\n/)) if (line.trim().length >= 8) push(line.trim(), m);
    }
  }
  return build(all);
}

function build(vs: readonly Value[]): SecretRedactor | string {
  let chars = 0;
  for (const x of vs) chars += x.v.length;
  if (vs.length > MAX_REDACTED_VALUES || chars > MAX_REDACTED_CHARS) {
    return `the Stack's Secrets${vs.some((x) => x.marked) ? ' and the values the run marks secret' : ''} hold ${String(vs.length)} values of ${String(chars)} characters in all, more than the ${String(MAX_REDACTED_VALUES)} values or ${String(MAX_REDACTED_CHARS)} characters the controller removes from output`;
  }
  // Forms shorter than HEAD by their first KEY characters; longer ones by their first HEAD (a
  // position is compared only with forms whose head it holds) and, for the cut tail of a line
  // shorter than HEAD, by their first KEY.
  const short = new Map<string, Form[]>();
  const long = new Map<string, Form[]>();
  const longByKey = new Map<string, Form[]>();
  const add = (m: Map<string, Form[]>, k: string, f: Form): void => {
    const list = m.get(k);
    if (list === undefined) m.set(k, [f]);
    else list.push(f);
  };
  const taken = new Set<string>();
  let shortest = Infinity;
  for (const x of vs) {
    for (const { text, b64 } of formsOf(x.v)) {
      if (text.length < KEY || taken.has(text)) continue;
      taken.add(text);
      shortest = Math.min(shortest, text.length);
      const f: Form = { text, marked: x.marked, b64 };
      if (text.length < HEAD) add(short, text.slice(0, KEY), f);
      else {
        add(long, text.slice(0, HEAD), f);
        add(longByKey, text.slice(0, KEY), f);
      }
    }
  }
  // A bitmap of the forms' first KEY characters (hashed): most positions are passed over by it,
  // without a slice or a look-up.
  const keys = new Uint8Array(KEY_BITS >>> 3);
  for (const m of [short, longByKey])
    for (const k of m.keys()) {
      const h = hashKey(k, 0);
      keys[h >>> 3] = (keys[h >>> 3] ?? 0) | (1 << (h & 7));
    }
  const none: readonly Form[] = [];
  const charge = (work: RedactionWork, n: number): void => {
    work.work += n;
    if (work.work > REDACTION_WORK_BUDGET) throw new RedactionBudgetExceeded();
  };

  /** The stretches of `text` holding a form (in order, possibly overlapping). */
  const find = (text: string, work: RedactionWork, cut: boolean, out: Span[]): void => {
    const len = text.length;
    for (let p = 0; p + KEY <= len; p++) {
      charge(work, 2);
      const h = hashKey(text, p);
      if (((keys[h >>> 3] ?? 0) & (1 << (h & 7))) === 0) continue;
      // A position whose first KEY characters may start a form: its slices and look-ups.
      charge(work, LOOKUP_COST);
      const rest = len - p;
      const key = text.slice(p, p + KEY);
      const a = short.get(key) ?? none;
      const b =
        rest >= HEAD
          ? (long.get(text.slice(p, p + HEAD)) ?? none)
          : cut
            ? (longByKey.get(key) ?? none)
            : none;
      if (a.length === 0 && b.length === 0) continue;
      for (let k = 0; k < a.length + b.length; k++) {
        const f = k < a.length ? (a[k] as Form) : (b[k - a.length] as Form);
        // A comparison costs at most the shorter of the form and the rest of the text; a form
        // is compared whole only after its first PROBE characters matched.
        const t = f.text;
        const probe = t.length > PROBE ? t.slice(0, PROBE) : t;
        charge(work, 1 + Math.min(probe.length, rest));
        if (probe !== t && rest >= PROBE && !text.startsWith(probe, p)) continue;
        charge(work, Math.min(t.length, rest));
        let end = -1;
        if (text.startsWith(t, p)) end = p + t.length;
        else if (cut && rest < t.length && t.startsWith(text.slice(p))) end = len;
        if (end < 0) continue;
        let s = p;
        if (f.b64) {
          // The whole base64 token: what surrounds the value's form encodes its neighbours.
          while (s > 0 && isB64(text.charCodeAt(s - 1))) s--;
          while (end < len && isB64(text.charCodeAt(end))) end++;
          while (end < len && text.charCodeAt(end) === 0x3d) end++;
          charge(work, p - s + (end - p));
        }
        out.push({ s, e: end, marked: f.marked });
      }
    }
  };

  /** Runs of base64 characters whose decoding holds a value (Basic credentials, encoded blobs). */
  const findEncoded = (text: string, work: RedactionWork, out: Span[]): void => {
    const len = text.length;
    let p = 0;
    while (p < len) {
      if (!isB64(text.charCodeAt(p))) {
        p++;
        continue;
      }
      let e = p;
      let upper = false;
      let lower = false;
      while (e < len && isB64(text.charCodeAt(e))) {
        const c = text.charCodeAt(e);
        if (c >= 0x41 && c <= 0x5a) upper = true;
        else if (c >= 0x61 && c <= 0x7a) lower = true;
        e++;
      }
      let end = e;
      while (end < len && end - e < 2 && text.charCodeAt(end) === 0x3d) end++;
      charge(work, end - p);
      const n = e - p;
      if (n >= MIN_B64_RUN && n <= MAX_B64_RUN && upper && lower) {
        const run = text.slice(p, e);
        const spans: Span[] = [];
        // A decoding of fewer bytes than the shortest form (UTF-16 units ≤ UTF-8 bytes) holds none.
        for (let j = 0; j < 4 && spans.length === 0 && Math.floor(((n - j) * 3) / 4) >= shortest; j++) {
          // Charged before it is done: a decoding costs its allocations (DECODE_COST) and its length.
          charge(work, DECODE_COST + 2 * run.length);
          const decoded = Buffer.from(run.slice(j), 'base64').toString('utf8');
          find(decoded, work, false, spans);
        }
        if (spans.length > 0) out.push({ s: p, e: end, marked: spans.every((x) => x.marked) });
      }
      p = end;
    }
  };

  const redact = (text: string, work: RedactionWork, cut = false): string => {
    if (short.size === 0 && long.size === 0) return text;
    const spans: Span[] = [];
    find(text, work, cut, spans);
    findEncoded(text, work, spans);
    if (spans.length === 0) return text;
    spans.sort((a, b) => a.s - b.s || b.e - a.e);
    let out = '';
    let last = 0;
    let cur: Span | undefined;
    const emit = (x: Span): void => {
      out += `${text.slice(last, x.s)}${x.marked ? MARKED : REDACTED}`;
      last = x.e;
    };
    for (const x of spans) {
      if (cur !== undefined && x.s <= cur.e) {
        cur = { s: cur.s, e: Math.max(cur.e, x.e), marked: cur.marked && x.marked };
        continue;
      }
      if (cur !== undefined) emit(cur);
      cur = { ...x };
    }
    if (cur !== undefined) emit(cur);
    return `${out}${text.slice(last)}`;
  };

  const self: SecretRedactor = {
    size: vs.length,
    redact,
    withMarked: (marked) => {
      const have = new Set(vs.map((x) => x.v));
      const more: Value[] = [];
      for (const v of marked) {
        const lines = v.includes('\n') ? v.split(/\r?\n/).map((l) => l.trim()) : [];
        for (const x of [v, ...lines.filter((l) => l.length >= 8)])
          if (x.length >= KEY && !have.has(x)) {
            have.add(x);
            more.push({ v: x, marked: true });
          }
      }
      return more.length === 0 ? self : build([...vs, ...more]);
    },
  };
  return self;
}

/** `values`' redactor; throws when they are over the limits of {@link secretRedactor}. */
function asRedactor(r: SecretRedactor | readonly string[]): SecretRedactor {
  if (!Array.isArray(r)) return r as SecretRedactor;
  const built = secretRedactor(r as readonly string[]);
  if (typeof built === 'string') throw new Error(built);
  return built;
}

/**
 * `text` (an event's message: PKO embeds the CLI's output in a failed run's) with every value
 * removed as {@link redactChangeSet} does. Throws {@link RedactionBudgetExceeded}.
 */
export function redactText(
  text: string,
  values: SecretRedactor | readonly string[],
  work: RedactionWork = { work: 0 },
): string {
  return asRedactor(values).redact(text, work);
}

/**
 * `set` with every occurrence of each value — in every form of {@link secretRedactor}, and each
 * line of a multi-line value — replaced by `[redacted]` (a marked value: `[secret]`) in every
 * text it holds (property lines, names, types, URNs, error lines, the stack name, the note); a
 * line the parser cut (ending in `…`) whose cut end is the start of a value's form (at least 4
 * characters of it) loses that start too. A changed property stays a changed property:
 * `~ password: "[redacted]" => "[redacted]"`. The resources' identity — type, name, URN — and
 * the stack name go through `identity` when given (src/enrich/changes.ts passes the Stack's own
 * Secrets without the marked values: a mark is program output, which may add to a change set but
 * never hide which resource changes). Returns a new object. Throws
 * {@link RedactionBudgetExceeded} past {@link REDACTION_WORK_BUDGET} (counted in `work`).
 */
export function redactChangeSet(
  set: ChangeSet,
  values: SecretRedactor | readonly string[],
  work: RedactionWork = { work: 0 },
  identity?: SecretRedactor,
): ChangeSet {
  const red = asRedactor(values);
  const id = identity ?? red;
  if (red.size === 0 && id.size === 0) return set;
  const with_ =
    (x: SecretRedactor) =>
    (line: string): string =>
      line.endsWith('…') ? `${x.redact(line.slice(0, -1), work, true)}…` : x.redact(line, work);
  const r = with_(red);
  const i = with_(id);
  return {
    ...set,
    ...(set.run ? { run: { ...set.run, stack: i(set.run.stack) } } : {}),
    resources: set.resources.map((x) => ({
      ...x,
      type: i(x.type),
      name: i(x.name),
      urn: i(x.urn),
      diff: x.diff.map(r),
    })),
    errors: set.errors.map(r),
    ...(set.note === undefined ? {} : { note: r(set.note) }),
  };
}

/** Values a run marks secret that one read keeps at most; more withholds its details. */
export const MAX_MARKED_VALUES = 1_000;
/** A marked value longer than this (UTF-16 units) withholds the run's details. */
export const MAX_MARKED_CHARS = 64 * 1024;
/** Nesting a parse follows at most; JSON inside a string is parsed at most this deep too. */
const MAX_NESTING = 64;
const MAX_EMBEDDED = 2;

/** Pulumi's secret signature (`resource.SigKey` → `resource.SecretSig`). */
export const SIG_KEY = '4dabf18193072939515e22adb298388d';
export const SECRET_SIG = '1b47061264138c4ac30d75fd1eb44270';

/**
 * The values a run's own output marks secret, collected line by line (src/enrich/changes.ts
 * feeds it every workspace log line; the event message goes through it too): every JSON object
 * in a line with a member `Value` (any case) holding a string and a member `Secret` (any case)
 * that is `true` — the Automation API's `ConfigValue`, which PKO v2.0–2.1 agents logged in their
 * `up completed` summary (PKO #988, fixed in 2.2 by #990), and `pulumi config --json`'s
 * `{"value", "secret": true}` — and every object carrying Pulumi's secret signature with a
 * `plaintext` or `value` string. Any logger's line: the JSON may start at any `{` (every one is
 * looked at, no cap), and JSON held in a string (a logger that quotes its fields) is parsed too
 * (2 levels). An object cut off with its line is not taken; objects closed before the cut are.
 * A line the log reader cut (longer than it reads, src/kube/workspace-log.ts `maxLineBytes`:
 * `take(line, true)`) whose kept part may hold a mark — `secret` (any case) or the signature
 * after a `{`, or a JSON value from a `{` still open at the cut or nested deeper than 64 —
 * sets `overflow` (the rest, never read, may mark values secret that were printed elsewhere):
 * the caller withholds the details (fail closed). Not seen: a mark in a cut line whose kept part
 * has no `{`.
 *
 * Bounded: each line is parsed in time linear in its length (a parse goes on where the one before
 * stopped); at most
 * {@link MAX_MARKED_VALUES} values of at most {@link MAX_MARKED_CHARS} — beyond, `overflow` says
 * why and the caller withholds the details (no partial redaction).
 */
export class SecretMarks {
  readonly values = new Set<string>();
  /** Why not every marked value could be kept; set once. */
  overflow: string | undefined;

  /**
   * Collects the values `line` marks secret; `cut`: only the start of the line was read (the log
   * reader's sink says so), and a start that may hold a mark sets {@link overflow}.
   */
  take(line: string, cut = false): void {
    const open = scanMarks(line, 0, this, cut);
    if (cut && this.overflow === undefined) {
      const brace = line.indexOf('{');
      if (brace >= 0 && (open || MAY_MARK.test(line.slice(brace)))) this.overflow = CUT_LINE_OVERFLOW;
    }
  }

  /** @internal */
  add(v: string): void {
    if (v.length < 4 || v === '[secret]' || this.values.has(v) || this.overflow !== undefined) return;
    if (v.length > MAX_MARKED_CHARS)
      this.overflow = `the run's output marks a value secret that is longer than the ${String(MAX_MARKED_CHARS)} characters the controller removes`;
    else if (this.values.size >= MAX_MARKED_VALUES)
      this.overflow = `the run's output marks more than ${String(MAX_MARKED_VALUES)} values secret, more than the controller removes`;
    else this.values.add(v);
  }
}

/** Why a cut line withholds a run's details (see {@link SecretMarks}). */
export const CUT_LINE_OVERFLOW =
  'a log line that may mark values secret was longer than the controller reads';

/** A quick test that a text may hold a marked value. */
const MAY_MARK = new RegExp(`secret|${SIG_KEY}`, 'i');
const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * Adds the marks of every JSON object in `text`; returns whether a value started at a `{` was
 * still open at the end of `text` (only looked for when `whole`: a cut line is parsed even
 * without a hint of a mark).
 */
function scanMarks(text: string, embedded: number, marks: SecretMarks, whole = false): boolean {
  if (!whole && !MAY_MARK.test(text)) return false;
  let from = 0;
  const at = { fail: 0, open: false };
  for (;;) {
    const i = text.indexOf('{', from);
    if (i < 0) return at.open;
    at.fail = i;
    const end = parseJson(text, i, 0, embedded, marks, at);
    // After a value, or where it stopped being JSON: every `{` before was parsed as part of it,
    // so each character is parsed from one start at most (linear, no cap on the starts).
    from = Math.max(end, at.fail, i + 1);
  }
}

function skipWs(t: string, i: number): number {
  while (i < t.length) {
    const c = t.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i++;
  }
  return i;
}

/** The JSON string starting at `t[i]` (a `"`): [end, value], or undefined (`at.open`: unterminated). */
function parseString(t: string, i: number, at?: { open: boolean }): [number, string] | undefined {
  let j = i + 1;
  while (j < t.length) {
    const c = t.charCodeAt(j);
    if (c === 0x5c) j += 2;
    else if (c === 0x22) break;
    else j++;
  }
  if (j >= t.length) {
    if (at !== undefined) at.open = true;
    return undefined;
  }
  try {
    return [j + 1, JSON.parse(t.slice(i, j + 1)) as string];
  } catch {
    return undefined;
  }
}

/**
 * Parses the JSON value at `t[i]`, adding the values its objects mark secret to `marks`; returns
 * the index after it, or -1 when it is not JSON (objects closed before stay taken).
 */
function parseJson(
  t: string,
  i: number,
  depth: number,
  embedded: number,
  marks: SecretMarks,
  at: { fail: number; open: boolean },
): number {
  i = skipWs(t, i);
  at.fail = Math.max(at.fail, i);
  /** Not JSON at `j`: the text ended there (`at.open`) or something else is. */
  const fail = (j: number): number => {
    if (j >= t.length) at.open = true;
    return -1;
  };
  if (i >= t.length) return fail(i);
  // Too deep to follow: what it holds is unknown, as if the text ended here.
  if (depth > MAX_NESTING) return fail(t.length);
  const c = t[i];
  if (c === '"') {
    const s = parseString(t, i, at);
    if (s === undefined) return -1;
    if (embedded < MAX_EMBEDDED && s[1].includes('{')) scanMarks(s[1], embedded + 1, marks);
    return s[0];
  }
  if (c === '{' || c === '[') {
    const obj = c === '{';
    const members = new Map<string, unknown>();
    let j = skipWs(t, i + 1);
    if (t[j] === (obj ? '}' : ']')) return j + 1;
    for (;;) {
      let key = '';
      if (obj) {
        if (t[j] !== '"') return fail(j);
        const k = parseString(t, j, at);
        if (k === undefined) return -1;
        key = k[1];
        j = skipWs(t, k[0]);
        if (t[j] !== ':') return fail(j);
        j = skipWs(t, j + 1);
      }
      const start = j;
      const end = parseJson(t, j, depth + 1, embedded, marks, at);
      if (end < 0) return -1;
      if (obj) {
        const raw = t.slice(start, end);
        if (t[start] === '"') members.set(key.toLowerCase(), parseString(t, start)?.[1]);
        else if (raw === 'true' || raw === 'false') members.set(key.toLowerCase(), raw === 'true');
      }
      j = skipWs(t, end);
      if (t[j] === ',') {
        j = skipWs(t, j + 1);
        continue;
      }
      if (t[j] !== (obj ? '}' : ']')) return fail(j);
      if (obj) {
        const v = members.get('value');
        if (members.get('secret') === true && typeof v === 'string') marks.add(v);
        if (members.get(SIG_KEY.toLowerCase()) === SECRET_SIG) {
          const plain = members.get('plaintext');
          if (typeof v === 'string') marks.add(v);
          if (typeof plain === 'string') {
            marks.add(plain);
            try {
              const p: unknown = JSON.parse(plain);
              if (typeof p === 'string') marks.add(p);
            } catch {
              // not JSON: the text itself is the value
            }
          }
        }
      }
      return j + 1;
    }
  }
  if (t.startsWith('true', i)) return i + 4;
  if (t.startsWith('false', i)) return i + 5;
  if (t.startsWith('null', i)) return i + 4;
  // A literal cut short by the end of the text (`tr`) is open too.
  if (t.length - i < 5 && ['true', 'false', 'null'].some((w) => w.startsWith(t.slice(i))))
    return fail(t.length);
  NUMBER.lastIndex = i;
  const m = NUMBER.exec(t);
  return m === null ? -1 : i + m[0].length;
}

/** A Secret's values and annotations, as {@link secretOutputsReader} reads them. */
export interface SecretObject {
  data: Record<string, string>;
  annotations: Record<string, string>;
}

/** Reads a Secret with its annotations; undefined when it does not exist. Throws on other API errors. */
export type SecretObjectReader = (namespace: string, name: string) => Promise<SecretObject | undefined>;

/** The annotation of PKO's outputs Secret listing its secret keys (operator `auto.SecretOutputsAnnotation`). */
export const SECRET_OUTPUTS_ANNOTATION = 'pulumi.com/secrets';

/** A {@link SecretObjectReader} through the API server (a GET; the controller may get Secrets). */
export function secretObjectReader(kc: KubeConfig): SecretObjectReader {
  return async (namespace, name) => {
    let s: { data?: Record<string, string>; metadata?: { annotations?: Record<string, string> } };
    try {
      s = await kubeRequest(kc, {
        method: 'GET',
        path: objectPath({ group: '', version: 'v1', plural: 'secrets', namespace, name }),
      });
    } catch (err) {
      if (errorStatusCode(err) === 404) return undefined;
      throw err;
    }
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries(s.data ?? {})) data[k] = Buffer.from(v, 'base64').toString('utf8');
    return { data, annotations: s.metadata?.annotations ?? {} };
  };
}

/**
 * The values of an `up`'s secret outputs: PKO writes them to the Secret `Update.status.outputs`
 * names (`<update>-stack-outputs`, one key per output, each value JSON) and lists the secret
 * keys, as a JSON array, in its annotation `pulumi.com/secrets` (operator
 * internal/controller/auto/update_controller.go `outputsToSecret`). A string output gives its
 * string; another value its JSON text. Bounded: 1,000 keys.
 */
export function secretOutputValues(secret: SecretObject): string[] {
  let keys: unknown;
  try {
    keys = JSON.parse(secret.annotations[SECRET_OUTPUTS_ANNOTATION] ?? '[]');
  } catch {
    return [];
  }
  if (!Array.isArray(keys)) return [];
  const out: string[] = [];
  for (const k of keys.slice(0, MAX_MARKED_VALUES)) {
    if (typeof k !== 'string') continue;
    const raw = secret.data[k];
    if (raw === undefined) continue;
    try {
      const v: unknown = JSON.parse(raw);
      out.push(typeof v === 'string' ? v : raw);
    } catch {
      out.push(raw);
    }
  }
  return out;
}
