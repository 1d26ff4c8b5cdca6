/**
 * A PullRequestPreview's gate applied to a preview's change set (docs/previews.md, "A gate
 * reviewers can require"): does the preview plan any of the gated operations on a gated resource
 * type? Resource type globs are compiled to RE2 expressions (`*` any characters, `?` one,
 * everything else literal), which match in time linear in the type's length whatever the glob.
 */
import { INCOMPLETE_REASON_TEXT, type ChangeSet, type ResourceChange, type StepOp } from './types.ts';
import { re2, type RE2JS } from '../text.ts';

/** What a gate asks (the shape of `spec.gate`, src/api/gate.ts). */
export interface GateRule {
  operations: readonly StepOp[];
  /** Globs over type tokens; absent or empty: every type. */
  resourceTypes?: readonly string[] | undefined;
}

/**
 * The outcome: nothing gated is planned; gated changes (per operation, in the display's order;
 * `incomplete` set when they were read in a change set that is not complete, so more may be
 * planned); or not known (`why`: a reviewer's sentence).
 */
export type GateResult =
  | { kind: 'pass' }
  | { kind: 'match'; counts: [StepOp, number][]; resources: ResourceChange[]; incomplete?: string }
  | { kind: 'unknown'; why: string };

/** An RE2 expression that matches exactly the type tokens `glob` describes. */
export function compileTypeGlob(glob: string): RE2JS {
  const body = glob
    .split(/([*?])/)
    .map((p) => (p === '*' ? '.*' : p === '?' ? '.' : p === '' ? '' : re2().quote(p)))
    .join('');
  return re2().compile(`^(?:${body})$`, re2().DOTALL);
}

/** `change set incomplete: <what each reason means>` for a set that is not complete. */
export function incompleteWhy(set: ChangeSet): string {
  const why = set.incomplete.map((r) => INCOMPLETE_REASON_TEXT[r]).join('; ');
  return `change set incomplete: ${why === '' ? 'not read whole' : why}`;
}

/**
 * Applies `rule` to `set`. A change set that is not complete (the log was cut, runs interleaved,
 * a second summary or counts that disagree with the resource lines, lines the CLI does not print:
 * every `incomplete` reason) never passes: a gate fails closed. The gated resources it lists were
 * planned all the same (the program's output can add lines, never remove the CLI's), so they
 * are named (`match` with `incomplete`); when it lists none the answer is `unknown`. For a
 * complete set without `resourceTypes` the answer comes from `counts` (every resource line
 * counted, checked against the CLI's summary); with them, from the resource lines kept — and
 * when some resource lines were not kept (the parser's cap) while a gated operation is planned,
 * the answer is `unknown`.
 */
export function evaluateGate(rule: GateRule, set: ChangeSet): GateResult {
  const ops = new Set(rule.operations);
  const types = (rule.resourceTypes ?? []).map(compileTypeGlob);
  const gated = (r: ResourceChange): boolean =>
    ops.has(r.op) && (types.length === 0 || types.some((t) => t.matches(r.type)));
  const resources = set.resources.filter(gated);
  if (!set.complete) {
    const why = incompleteWhy(set);
    if (resources.length === 0) return { kind: 'unknown', why };
    const listed: [StepOp, number][] = [];
    for (const op of rule.operations) {
      const n = resources.filter((r) => r.op === op).length;
      if (n > 0) listed.push([op, n]);
    }
    return { kind: 'match', counts: listed, resources, incomplete: why };
  }
  const counts: [StepOp, number][] = [];
  if (types.length === 0) {
    for (const op of rule.operations) {
      const n = set.counts[op] ?? 0;
      if (n > 0) counts.push([op, n]);
    }
  } else {
    for (const op of rule.operations) {
      const n = resources.filter((r) => r.op === op).length;
      if (n > 0) counts.push([op, n]);
    }
    const planned = rule.operations.some((op) => (set.counts[op] ?? 0) > 0);
    if (counts.length === 0 && planned && set.omitted.resources > 0)
      return {
        kind: 'unknown',
        why: `${String(set.omitted.resources)} resource lines were not kept, so their types are unknown`,
      };
  }
  return counts.length === 0 ? { kind: 'pass' } : { kind: 'match', counts, resources };
}

/**
 * The commit status description of a gate that fails: `gate: 1 to delete, 2 to replace:
 * <type>::<name>, …` for a match (resources in the display's order; `gate: 1 to delete or
 * more: <type>::<name> (change set incomplete: …)` when read in an incomplete set), `gate: <why>`
 * otherwise. Not bounded (the renderer fits it to the forge's limit, names first).
 */
export function gateDescription(result: Exclude<GateResult, { kind: 'pass' }>): string {
  if (result.kind === 'unknown') return `gate: ${result.why}`;
  const counts = result.counts.map(([op, n]) => `${String(n)} to ${op}`).join(', ');
  const names = result.resources.slice(0, 10).map((r) => `${r.type}::${r.name || '?'}`);
  const more = result.resources.length > names.length ? ' …' : '';
  const head = result.incomplete === undefined ? counts : `${counts} or more`;
  const tail = result.incomplete === undefined ? '' : ` (${result.incomplete})`;
  return names.length === 0 ? `gate: ${head}${tail}` : `gate: ${head}: ${names.join(', ')}${more}${tail}`;
}
