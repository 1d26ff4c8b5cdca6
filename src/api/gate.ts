/**
 * The gate of a PullRequestPreview (`spec.gate`, docs/previews.md "A gate reviewers can
 * require"): which planned operations on which resource types turn the preview's commit status
 * into `failure`. The PullRequestPreview controller writes the gate onto each preview Stack as
 * the annotation {@link GATE_ANNOTATION} (JSON); the router reads it back with {@link parseGate}
 * and the renderer applies it (src/changes/gate.ts).
 */
import { STEP_OPS, type StepOp } from '../changes/types.ts';
import { GROUP } from './v1alpha1.ts';

/** Annotation on a preview Stack: its PullRequestPreview's `spec.gate` as JSON (absent: no gate). */
export const GATE_ANNOTATION = `${GROUP}/gate`;

/** Operations a gate may name: every Pulumi step operation but `same` (src/changes/types.ts). */
export const GATE_OPERATIONS = STEP_OPS.filter((op): op is Exclude<StepOp, 'same'> => op !== 'same');
export type GateOperation = (typeof GATE_OPERATIONS)[number];

/** Most `resourceTypes` globs, and the longest one (characters); the CRD has the same bounds. */
export const MAX_GATE_TYPES = 16;
export const MAX_GATE_TYPE_CHARS = 256;

/** `spec.gate` of a PullRequestPreview. */
export interface PreviewGate {
  /** Planned operations that fail the gate (at least one; e.g. `delete`, `replace`). */
  operations: GateOperation[];
  /**
   * Resource type globs (`*` any characters, `?` one; e.g. `aws:rds/*`, `kubernetes:*`) the
   * operations must be on; absent or empty: every type.
   */
  resourceTypes?: string[];
}

/** The gate an event carries: the parsed gate, or why the stored one is not usable (fail closed). */
export type EventGate = { gate: PreviewGate; invalid?: undefined } | { gate?: undefined; invalid: string };

/**
 * The gate `value` describes, checked: an object with `operations` (1 to
 * {@link GATE_OPERATIONS}.length names from {@link GATE_OPERATIONS}) and optional
 * `resourceTypes` (at most {@link MAX_GATE_TYPES} non-empty strings of at most
 * {@link MAX_GATE_TYPE_CHARS} characters). @returns the gate, or `invalid` saying what is wrong.
 */
export function checkGate(value: unknown): EventGate {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { invalid: 'spec.gate must be an object' };
  const ops: unknown = (value as Record<string, unknown>)['operations'];
  if (!Array.isArray(ops) || ops.length === 0)
    return { invalid: 'spec.gate.operations must list at least one operation' };
  for (const op of ops) {
    if (typeof op !== 'string' || !(GATE_OPERATIONS as readonly string[]).includes(op))
      return {
        invalid: `spec.gate.operations: ${JSON.stringify(op).slice(0, 40)} is not one of ${GATE_OPERATIONS.join(', ')}`,
      };
  }
  const types: unknown = (value as Record<string, unknown>)['resourceTypes'];
  if (types !== undefined && types !== null) {
    if (!Array.isArray(types) || types.length > MAX_GATE_TYPES)
      return { invalid: `spec.gate.resourceTypes must be a list of at most ${String(MAX_GATE_TYPES)} globs` };
    for (const t of types) {
      if (typeof t !== 'string' || t === '' || t.length > MAX_GATE_TYPE_CHARS)
        return {
          invalid: `spec.gate.resourceTypes: each glob is 1 to ${String(MAX_GATE_TYPE_CHARS)} characters`,
        };
    }
  }
  const gate: PreviewGate = { operations: [...new Set(ops as GateOperation[])] };
  if (Array.isArray(types) && types.length > 0) gate.resourceTypes = [...(types as string[])];
  return { gate };
}

/** {@link checkGate} of the annotation's JSON text (bounded: at most 16 KiB is parsed). */
export function parseGate(annotation: string): EventGate {
  if (annotation.length > 16 * 1024) return { invalid: 'the gate annotation is over 16 KiB' };
  try {
    return checkGate(JSON.parse(annotation));
  } catch {
    return { invalid: 'the gate annotation is not JSON' };
  }
}
