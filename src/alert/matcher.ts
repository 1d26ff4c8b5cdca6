/**
 * Alert matching that explains itself: an ordered list of named, pure checks, each returning why
 * it skips an event or nothing. {@link whySkipped} returns the first reason; an event matches an
 * Alert when no check skips it. The router routes with these checks and the reasons end up in
 * logs and delivery status (docs/architecture.md, "Matching").
 *
 * Order and semantics follow Flux's notification-controller: suspend → source kind + namespace →
 * severity → name glob and matchLabels → eventReasons → inclusionList (any must match) →
 * exclusionList (none may match). An event passes the source checks when any one of
 * `eventSources` selects it.
 *
 * Source kinds (see docs/events.md): events are always about a Stack run and their
 * `involvedObject` is the Stack. A source of kind `Stack` selects events whose involved object is
 * a Stack, by the Stack's name. A source of kind `Update` selects events that belong to an Update
 * (`metadata.updateName` set — runs, and StackStalled after a failed run), by the Update's name;
 * PKO v1 events (no Update objects) have none. Namespace and `matchLabels` always apply to the
 * involved object (`ev.involvedObject.namespace`, `ev.labels`).
 */
import type { NotificationEvent } from '../api/event.ts';
import type { CompiledAlert, CompiledSource } from './compile.ts';

/** Names of the checks, in evaluation order; a skip reason names the check that skipped. */
export type CheckName =
  | 'Suspended'
  | 'SourceKindOrNamespace'
  | 'Severity'
  | 'SourceNameOrLabels'
  | 'EventReason'
  | 'InclusionList'
  | 'ExclusionList';

/** Why an Alert does not take an event: the check and a human-readable message. */
export interface SkipReason {
  check: CheckName;
  message: string;
}

/** One named, pure check: the message when it skips `ev` for Alert `a`, else undefined. */
export interface MatchCheck {
  readonly name: CheckName;
  skip(a: CompiledAlert, ev: NotificationEvent): string | undefined;
}

/** The name a source matches against: the Stack's name (kind Stack) or the Update's (kind Update). */
function sourceName(s: CompiledSource, ev: NotificationEvent): string | undefined {
  if (s.kind === 'Stack') return ev.involvedObject.kind === 'Stack' ? ev.involvedObject.name : undefined;
  return ev.metadata.updateName;
}

function kindAndNamespace(s: CompiledSource, ev: NotificationEvent): boolean {
  return (
    (s.namespace === null || ev.involvedObject.namespace === s.namespace) && sourceName(s, ev) !== undefined
  );
}

function subject(ev: NotificationEvent): string {
  return `${ev.involvedObject.kind} ${ev.involvedObject.namespace}/${ev.involvedObject.name}`;
}

/** `spec.suspend`: a suspended Alert takes nothing. */
export const SUSPENDED: MatchCheck = {
  name: 'Suspended',
  skip: (a) => (a.spec.suspend === true ? 'Alert is suspended' : undefined),
};

/** Some `eventSources` entry covers the event's kind and namespace. */
export const SOURCE_KIND_OR_NAMESPACE: MatchCheck = {
  name: 'SourceKindOrNamespace',
  skip: (a, ev) =>
    a.sources.some((s) => kindAndNamespace(s, ev))
      ? undefined
      : `no eventSources entry covers ${subject(ev)}${ev.metadata.updateName === undefined ? ' (no Update)' : ''}`,
};

/** `spec.eventSeverity: error` takes only error events. */
export const SEVERITY: MatchCheck = {
  name: 'Severity',
  skip: (a, ev) =>
    a.spec.eventSeverity === 'error' && ev.severity !== 'error'
      ? `severity ${ev.severity} is below the Alert's eventSeverity error`
      : undefined,
};

/** Some source covering kind and namespace also matches the name glob and every `matchLabels` entry. */
export const SOURCE_NAME_OR_LABELS: MatchCheck = {
  name: 'SourceNameOrLabels',
  skip: (a, ev) =>
    a.sources.some(
      (s) =>
        kindAndNamespace(s, ev) &&
        s.matchName(sourceName(s, ev) ?? '') &&
        s.matchLabels.every(([k, v]) => ev.labels[k] === v),
    )
      ? undefined
      : `no eventSources entry selects ${subject(ev)} by name and labels`,
};

/** `spec.eventReasons` is an allow-list (empty: every reason). */
export const EVENT_REASON: MatchCheck = {
  name: 'EventReason',
  skip: (a, ev) =>
    a.reasons !== null && !a.reasons.has(ev.reason)
      ? `reason ${ev.reason} is not in eventReasons`
      : undefined,
};

/** `spec.inclusionList`: when set, some expression must be found in the message. */
export const INCLUSION_LIST: MatchCheck = {
  name: 'InclusionList',
  skip: (a, ev) =>
    a.inclusion.length > 0 && !a.inclusion.some((re) => re.test(ev.message))
      ? 'the message matches no inclusionList expression'
      : undefined,
};

/** `spec.exclusionList`: no expression may be found in the message (wins over the inclusionList). */
export const EXCLUSION_LIST: MatchCheck = {
  name: 'ExclusionList',
  skip: (a, ev) => {
    const i = a.exclusion.findIndex((re) => re.test(ev.message));
    return i < 0 ? undefined : `the message matches exclusionList[${i}]`;
  },
};

/**
 * The checks that decide whether an event is routed to an Alert at all: every check but
 * {@link SUSPENDED}. A suspended Alert's events are still routed, and delivery records them as
 * skipped (with the SUSPENDED reason), so resuming the Alert does not replay what happened
 * meanwhile (Flux drops them too).
 */
export const ROUTING_CHECKS: readonly MatchCheck[] = [
  SOURCE_KIND_OR_NAMESPACE,
  SEVERITY,
  SOURCE_NAME_OR_LABELS,
  EVENT_REASON,
  INCLUSION_LIST,
  EXCLUSION_LIST,
];

/**
 * The routing checks that do not read the message: whether an Alert may take an event at all,
 * before the event is enriched (src/enrich removes Secret values from messages, so the
 * inclusion/exclusion lists are checked after).
 */
export const PRE_ENRICH_CHECKS: readonly MatchCheck[] = ROUTING_CHECKS.filter(
  (c) => c !== INCLUSION_LIST && c !== EXCLUSION_LIST,
);

/**
 * Whether an Alert's `eventSources` select the event's object at all (kind, namespace, name,
 * labels), whatever its severity, reason or message: the Alert covers that Stack.
 */
export const SOURCE_CHECKS: readonly MatchCheck[] = [SOURCE_KIND_OR_NAMESPACE, SOURCE_NAME_OR_LABELS];

/** Every check, in order (suspend first, as in Flux). */
export const MATCH_CHECKS: readonly MatchCheck[] = [SUSPENDED, ...ROUTING_CHECKS];

/** The first reason why `a` does not take `ev` under `checks` (default: all), or undefined when it does. */
export function whySkipped(
  a: CompiledAlert,
  ev: NotificationEvent,
  checks: readonly MatchCheck[] = MATCH_CHECKS,
): SkipReason | undefined {
  for (const c of checks) {
    const message = c.skip(a, ev);
    if (message !== undefined) return { check: c.name, message };
  }
  return undefined;
}

/** Whether the Alert takes this event (no check skips it). */
export function matchAlert(a: CompiledAlert, ev: NotificationEvent): boolean {
  return whySkipped(a, ev) === undefined;
}

/**
 * The event as this Alert delivers it: a copy with `spec.eventMetadata` merged into `metadata`
 * (case F19, docs/cases.md: each Alert's delivery carries only its own metadata; `ev` is never
 * mutated). On a key conflict the event's own value wins, as in Flux, so an Alert cannot forge
 * `commit`/`revision`.
 */
export function eventForAlert(a: CompiledAlert, ev: NotificationEvent): NotificationEvent {
  const metadata: Partial<Record<string, string>> = { ...a.spec.eventMetadata };
  for (const [k, v] of Object.entries(ev.metadata)) {
    if (v !== undefined) metadata[k] = v;
  }
  return { ...ev, involvedObject: { ...ev.involvedObject }, labels: { ...ev.labels }, metadata };
}
