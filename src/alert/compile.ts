/**
 * Compiling an Alert for matching: every RE2 expression and name glob is compiled once per Alert
 * generation (by the Alert reconciler), never per event. Invalid expressions and forbidden
 * cross-namespace sources are reported here, so the Alert says why it is not Ready instead of
 * silently matching nothing.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import picomatch from 'picomatch';
import type { Alert, AlertSpec, EventReason, SourceKind } from '../api/v1alpha1.ts';
import { ALERT_SOURCES_POLICY_NAME } from '../api/v1alpha1.ts';
import { re2, type RE2JS } from '../text.ts';

/** One `eventSources` entry, compiled. */
export interface CompiledSource {
  kind: SourceKind;
  /** A namespace, or null for every namespace (`*`). */
  namespace: string | null;
  matchName: (name: string) => boolean;
  matchLabels: readonly (readonly [string, string])[];
}

/** An Alert with its sources, reasons and RE2 expressions compiled; build with {@link compileAlert}. */
export interface CompiledAlert {
  namespace: string;
  name: string;
  generation: number;
  spec: AlertSpec;
  readonly sources: readonly CompiledSource[];
  /** null = every reason. */
  readonly reasons: ReadonlySet<EventReason> | null;
  readonly inclusion: readonly RE2JS[];
  readonly exclusion: readonly RE2JS[];
}

export type CompileResult =
  | { ok: true; alert: CompiledAlert }
  | { ok: false; reason: 'InvalidRegex' | 'CrossNamespaceForbidden'; message: string };

/**
 * The first `eventSources` entry of a compiled Alert that selects outside the Alert's own
 * namespace (another namespace, or `*`), with its index and namespace as written; undefined when
 * every entry stays in it (such an Alert needs the admission check,
 * src/reconcile/alert.ts).
 */
export function firstCrossNamespaceSource(
  a: CompiledAlert,
): { index: number; namespace: string } | undefined {
  const index = a.sources.findIndex((s) => s.namespace !== a.namespace);
  if (index < 0) return undefined;
  return { index, namespace: a.sources[index]?.namespace ?? '*' };
}

function compileList(
  patterns: readonly string[] | undefined,
  field: string,
): { ok: true; res: RE2JS[] } | { ok: false; message: string } {
  const res: RE2JS[] = [];
  for (const [i, pattern] of (patterns ?? []).entries()) {
    try {
      res.push(re2().compile(pattern));
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      return {
        ok: false,
        message: `${field}[${i}] ${JSON.stringify(pattern)} is not a valid RE2 expression: ${why}`,
      };
    }
  }
  return { ok: true, res };
}

/**
 * Validates and compiles an Alert.
 *
 * @param opts.allowCrossNamespace whether event sources may select namespaces other than the
 *   Alert's own (`*` or another name). When false, such an Alert does not compile
 *   (`CrossNamespaceForbidden`) instead of silently matching nothing (case F18).
 * @returns the compiled Alert, or `InvalidRegex` naming the offending inclusion/exclusion pattern
 *   (or name glob) and the parser's error.
 */
export function compileAlert(alert: Alert, opts: { allowCrossNamespace: boolean }): CompileResult {
  const alertNamespace = alert.metadata.namespace ?? '';
  const spec = alert.spec;
  const sources: CompiledSource[] = [];
  for (const [i, source] of spec.eventSources.entries()) {
    const namespace =
      source.namespace === undefined || source.namespace === '' ? alertNamespace : source.namespace;
    if (namespace !== alertNamespace && !opts.allowCrossNamespace) {
      return {
        ok: false,
        reason: 'CrossNamespaceForbidden',
        message:
          `eventSources[${i}].namespace ${JSON.stringify(namespace)} selects events outside the Alert's namespace ` +
          `${JSON.stringify(alertNamespace)}, and this controller does not allow cross-namespace event sources ` +
          `(--no-cross-namespace-refs, the default): ` +
          (namespace === '*'
            ? `drop namespace '*' and create an Alert in each namespace whose Stacks it should follow, `
            : `put the Alert in that namespace, `) +
          `or ask the cluster's administrator to run the controller with --no-cross-namespace-refs=false ` +
          `and the admission policy ${ALERT_SOURCES_POLICY_NAME} (steps: docs/install.md#alerts-across-namespaces; ` +
          `why: docs/threat-model.md, "Namespaces")`,
      };
    }
    const glob = source.name ?? '*';
    // The CRD refuses an empty name (minLength 1, default `*`); refused here too (one truth).
    if (glob === '') {
      return {
        ok: false,
        reason: 'InvalidRegex',
        message: `eventSources[${i}].name is empty: use * for every name`,
      };
    }
    let matchName: (name: string) => boolean;
    try {
      matchName = picomatch(glob, { dot: true });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      return {
        ok: false,
        reason: 'InvalidRegex',
        message: `eventSources[${i}].name ${JSON.stringify(glob)} is not a valid glob: ${why}`,
      };
    }
    sources.push({
      kind: source.kind,
      namespace: namespace === '*' ? null : namespace,
      matchName,
      matchLabels: Object.entries(source.matchLabels ?? {}),
    });
  }
  const inclusion = compileList(spec.inclusionList, 'inclusionList');
  if (!inclusion.ok) return { ok: false, reason: 'InvalidRegex', message: inclusion.message };
  const exclusion = compileList(spec.exclusionList, 'exclusionList');
  if (!exclusion.ok) return { ok: false, reason: 'InvalidRegex', message: exclusion.message };
  return {
    ok: true,
    alert: {
      namespace: alertNamespace,
      name: alert.metadata.name ?? '',
      generation: alert.metadata.generation ?? 0,
      spec,
      sources,
      reasons:
        spec.eventReasons !== undefined && spec.eventReasons.length > 0 ? new Set(spec.eventReasons) : null,
      inclusion: inclusion.res,
      exclusion: exclusion.res,
    },
  };
}
