/**
 * Secrets never posted (docs/previews.md): the Secrets a PKO Stack references, their values, and
 * a change set with every one of those values removed before any template sees it.
 *
 * Pulumi masks the values it knows to be secret (`[secret]`), but not a value a provider does not
 * mark secret (a password written into a plain property): forges keep a comment's edit history,
 * so such a value must never reach the first post.
 */
import type { Stack } from '../api/pko.ts';
import type { ChangeSet } from '../changes/types.ts';
import { REDACTED } from '../credential/redact.ts';

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
 * About 0.1–0.5 s of one core at most.
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
   * `text` with every form of every value replaced by `[redacted]`; when `cut` (a line the parser
   * cut, without its `…`), a tail that is the start of a form (4 characters or more) too.
   * Throws {@link RedactionBudgetExceeded} when `work` passes the budget.
   */
  redact(text: string, work: RedactionWork, cut?: boolean): string;
}

/** Length of the index key: the first characters of each form (forms shorter are not redacted). */
const KEY = 4;
/** Forms this long or longer are looked up by their first this many characters. */
const HEAD = 16;
/** A long form is compared whole only when its first this many characters match. */
const PROBE = 64;

/**
 * A redactor for `values`: each value and, for a multi-line value (a PEM key), each of its lines
 * (the CLI prints a property per line), each raw, URL-encoded, base64 and JSON-escaped (with and
 * without `\/`). Values shorter than 4 characters are not redacted (src/credential/redact.ts: they
 * would shred ordinary words). A string (why) instead when there are more than
 * {@link MAX_REDACTED_VALUES} values or {@link MAX_REDACTED_CHARS} characters.
 *
 * Matching looks, at each position of a text, only at the forms starting with the 4 characters
 * found there (a map from those 4 characters to forms), so a text costs its length plus the
 * characters compared with candidate forms, and never more than the budget.
 */
export function secretRedactor(values: readonly string[]): SecretRedactor | string {
  const vs = new Set<string>();
  for (const v of values) {
    if (v.length >= KEY) vs.add(v);
    if (v.includes('\n'))
      for (const line of v.split(/\r?\n/)) if (line.trim().length >= 8) vs.add(line.trim());
  }
  let chars = 0;
  for (const v of vs) chars += v.length;
  if (vs.size > MAX_REDACTED_VALUES || chars > MAX_REDACTED_CHARS) {
    return `the Stack's Secrets hold ${String(vs.size)} values of ${String(chars)} characters in all, more than the ${String(MAX_REDACTED_VALUES)} values or ${String(MAX_REDACTED_CHARS)} characters the controller removes from output`;
  }
  // Forms shorter than HEAD by their first KEY characters; longer ones by their first HEAD (a
  // position is compared only with forms whose head it holds) and, for the cut tail of a line
  // shorter than HEAD, by their first KEY.
  const short = new Map<string, string[]>();
  const long = new Map<string, string[]>();
  const longByKey = new Map<string, string[]>();
  const add = (m: Map<string, string[]>, k: string, f: string): void => {
    const list = m.get(k);
    if (list === undefined) m.set(k, [f]);
    else list.push(f);
  };
  for (const v of vs) {
    const json = JSON.stringify(v).slice(1, -1);
    for (const f of new Set([
      v,
      encodeURIComponent(v),
      Buffer.from(v, 'utf8').toString('base64'),
      json,
      json.replaceAll('/', '\\/'),
    ])) {
      if (f.length < KEY) continue;
      if (f.length < HEAD) add(short, f.slice(0, KEY), f);
      else {
        add(long, f.slice(0, HEAD), f);
        add(longByKey, f.slice(0, KEY), f);
      }
    }
  }
  const size = vs.size;
  const none: readonly string[] = [];
  const redact = (text: string, work: RedactionWork, cut = false): string => {
    if (short.size === 0 && long.size === 0) return text;
    const len = text.length;
    let out = '';
    let last = 0;
    // The current run of secret characters, [s, e); s < 0: none.
    let s = -1;
    let e = -1;
    for (let p = 0; p + KEY <= len; p++) {
      work.work += 2;
      if (work.work > REDACTION_WORK_BUDGET) throw new RedactionBudgetExceeded();
      const rest = len - p;
      const key = text.slice(p, p + KEY);
      const cands = [
        ...(short.get(key) ?? none),
        ...(rest >= HEAD
          ? (long.get(text.slice(p, p + HEAD)) ?? none)
          : cut
            ? (longByKey.get(key) ?? none)
            : none),
      ];
      let end = -1;
      for (const f of cands) {
        // A comparison costs at most the shorter of the form and the rest of the text; a form
        // is compared whole only after its first PROBE characters matched.
        const probe = f.length > PROBE ? f.slice(0, PROBE) : f;
        work.work += 1 + Math.min(probe.length, rest);
        if (work.work > REDACTION_WORK_BUDGET) throw new RedactionBudgetExceeded();
        if (probe !== f && rest >= PROBE && !text.startsWith(probe, p)) continue;
        work.work += Math.min(f.length, rest);
        if (work.work > REDACTION_WORK_BUDGET) throw new RedactionBudgetExceeded();
        if (text.startsWith(f, p)) end = Math.max(end, p + f.length);
        else if (cut && rest < f.length && f.startsWith(text.slice(p))) end = len;
        if (end === len) break;
      }
      if (end < 0) continue;
      if (s >= 0 && p <= e) e = Math.max(e, end);
      else {
        if (s >= 0) {
          out += `${text.slice(last, s)}${REDACTED}`;
          last = e;
        }
        s = p;
        e = end;
      }
      if (e === len) break;
    }
    if (s < 0) return text;
    return `${out}${text.slice(last, s)}${REDACTED}${text.slice(e)}`;
  };
  return { size, redact };
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
 * `set` with every occurrence of each value — raw, base64, URL-encoded, JSON-escaped, and each
 * line of a multi-line value — replaced by `[redacted]` in every text it holds (property lines,
 * names, types, URNs, error lines, the stack name, the note); a line the parser cut (ending in `…`) whose
 * cut end is the start of a value's form (at least 4 characters of it) loses that start too. A
 * changed property stays a changed property: `~ password: "[redacted]" => "[redacted]"`. Returns
 * a new object. Throws {@link RedactionBudgetExceeded} past {@link REDACTION_WORK_BUDGET}
 * (counted in `work`).
 */
export function redactChangeSet(
  set: ChangeSet,
  values: SecretRedactor | readonly string[],
  work: RedactionWork = { work: 0 },
): ChangeSet {
  const red = asRedactor(values);
  if (red.size === 0) return set;
  const r = (line: string): string =>
    line.endsWith('…') ? `${red.redact(line.slice(0, -1), work, true)}…` : red.redact(line, work);
  return {
    ...set,
    ...(set.run ? { run: { ...set.run, stack: r(set.run.stack) } } : {}),
    resources: set.resources.map((x) => ({
      ...x,
      type: r(x.type),
      name: r(x.name),
      urn: r(x.urn),
      diff: x.diff.map(r),
    })),
    errors: set.errors.map(r),
    ...(set.note === undefined ? {} : { note: r(set.note) }),
  };
}
