/**
 * Alert matching: which {@link NotificationEvent}s an Alert routes to its Provider. Pure; every
 * regex and glob is compiled once per Alert generation by {@link compileAlert}.
 *
 * Semantics and order follow Flux's notification-controller (shared/facts/peers.md): suspend →
 * source kind + namespace → severity → name glob → matchLabels → eventReasons →
 * inclusionList (any must match) → exclusionList (none may match). An event matches when any one
 * of `eventSources` selects it and it passes the Alert-wide filters.
 *
 * Source kinds (see `src/source/derive.ts`): events are always about a Stack run and their
 * `involvedObject` is the Stack. A source of kind `Stack` selects events whose involved object is
 * a Stack, by the Stack's name. A source of kind `Update` selects events that belong to an Update
 * (`metadata.updateName` set — runs, and StackStalled after a failed run), by the Update's name;
 * PKO v1 events (no Update objects) have none. Namespace and `matchLabels` always apply to the
 * involved object (`ev.involvedObject.namespace`, `ev.labels`).
 */
import picomatch from 'picomatch';
import { RE2JS } from 're2js';
import type { NotificationEvent } from '../api/event.ts';
import type { Alert, AlertSpec, EventReason, SourceKind } from '../api/v1alpha1.ts';

interface CompiledSource {
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

function compileList(
  patterns: readonly string[] | undefined,
  field: string,
): { ok: true; res: RE2JS[] } | { ok: false; message: string } {
  const res: RE2JS[] = [];
  for (const [i, pattern] of (patterns ?? []).entries()) {
    try {
      res.push(RE2JS.compile(pattern));
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
          `${JSON.stringify(alertNamespace)}, and this controller does not allow cross-namespace event sources`,
      };
    }
    const glob = source.name === undefined || source.name === '' ? '*' : source.name;
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

function sourceSelects(a: CompiledAlert, s: CompiledSource, ev: NotificationEvent): boolean {
  const obj = ev.involvedObject;
  if (s.namespace !== null && obj.namespace !== s.namespace) return false;
  let name: string | undefined;
  if (s.kind === 'Stack') {
    if (obj.kind !== 'Stack') return false;
    name = obj.name;
  } else {
    name = ev.metadata.updateName;
    if (name === undefined) return false;
  }
  if (a.spec.eventSeverity === 'error' && ev.severity !== 'error') return false;
  if (!s.matchName(name)) return false;
  return s.matchLabels.every(([k, v]) => ev.labels[k] === v);
}

/** Whether the Alert routes this event (order and semantics: file header). */
export function matchAlert(a: CompiledAlert, ev: NotificationEvent): boolean {
  if (a.spec.suspend === true) return false;
  if (!a.sources.some((s) => sourceSelects(a, s, ev))) return false;
  if (a.reasons !== null && !a.reasons.has(ev.reason)) return false;
  if (a.inclusion.length > 0 && !a.inclusion.some((re) => re.test(ev.message))) return false;
  return !a.exclusion.some((re) => re.test(ev.message));
}

/**
 * The event as this Alert delivers it: a copy with `spec.eventMetadata` merged into `metadata`
 * (case F19: each Alert's delivery carries only its own metadata; `ev` is never mutated). On a key
 * conflict the event's own value wins, as in Flux, so an Alert cannot forge `commit`/`revision`.
 */
export function eventForAlert(a: CompiledAlert, ev: NotificationEvent): NotificationEvent {
  const metadata: Partial<Record<string, string>> = { ...a.spec.eventMetadata };
  for (const [k, v] of Object.entries(ev.metadata)) {
    if (v !== undefined) metadata[k] = v;
  }
  return { ...ev, involvedObject: { ...ev.involvedObject }, labels: { ...ev.labels }, metadata };
}
