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
import { REDACTED, redactorFor } from '../credential/redact.ts';

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

/**
 * The forms of `values` to look for: each value and, for a multi-line value (a PEM key), each
 * of its lines (the CLI prints a property per line). Values shorter than 4 characters are not
 * redacted (src/credential/redact.ts: they would shred ordinary words).
 */
function withLines(values: readonly string[]): string[] {
  const out = new Set<string>();
  for (const v of values) {
    if (v.length >= 4) out.add(v);
    if (v.includes('\n'))
      for (const line of v.split(/\r?\n/)) if (line.trim().length >= 8) out.add(line.trim());
  }
  return [...out];
}

/** The encoded forms `redact` looks for, for the prefix check of cut lines. */
function forms(v: string): string[] {
  const json = JSON.stringify(v).slice(1, -1);
  return [v, Buffer.from(v, 'utf8').toString('base64'), json, encodeURIComponent(v)];
}

/**
 * A function redacting one line: every form of `values` (src/credential/redact.ts); a line the
 * parser cut (ending in `…`) whose cut end is the start of a secret form (at least 4 characters
 * of it) loses that start too.
 */
function lineRedactor(values: readonly string[]): (line: string) => string {
  const whole = redactorFor(values);
  const starts = values.flatMap(forms);
  return (line) => {
    const out = whole(line);
    if (!out.endsWith('…')) return out;
    const body = out.slice(0, -1);
    for (const f of starts) {
      for (let k = Math.min(f.length - 1, body.length); k >= 4; k--) {
        if (body.endsWith(f.slice(0, k))) return `${body.slice(0, body.length - k)}${REDACTED}…`;
      }
    }
    return out;
  };
}

/**
 * `text` (an event's message: PKO embeds the CLI's output in a failed run's) with every value of
 * `values` removed as {@link redactChangeSet} does.
 */
export function redactText(text: string, values: readonly string[]): string {
  const vs = withLines(values);
  return vs.length === 0 ? text : redactorFor(vs)(text);
}

/**
 * `set` with every occurrence of each of `values` — raw, base64, URL-encoded, JSON-escaped, and
 * each line of a multi-line value — replaced by `[redacted]` in every text it holds (property
 * lines, names, types, URNs, error lines, the stack name). A changed property stays a changed
 * property: `~ password: "[redacted]" => "[redacted]"`. Returns a new object.
 */
export function redactChangeSet(set: ChangeSet, values: readonly string[]): ChangeSet {
  const vs = withLines(values);
  if (vs.length === 0) return set;
  const r = lineRedactor(vs);
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
  };
}
