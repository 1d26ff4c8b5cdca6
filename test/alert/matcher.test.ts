import { describe, expect, it } from 'vitest';
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { Alert, AlertSpec } from '../../src/api/v1alpha1.ts';
import { compileAlert, type CompiledAlert } from '../../src/alert/compile.ts';
import { eventForAlert, matchAlert, whySkipped, ROUTING_CHECKS } from '../../src/alert/matcher.ts';
import { eventsFromStack, eventsFromUpdate } from '../../src/source/derive.ts';
import { ctx, update, v2FailedStack } from '../source/fixtures.ts';

const IDENTITY: EventIdentity = {
  stack: 'uid-1',
  run: { kind: 'update', name: 'app-dev-1' },
  phase: { kind: 'failed' },
};

function alert(spec: Partial<AlertSpec>, namespace = 'team-a', name = 'ops'): Alert {
  return {
    apiVersion: 'notification.pko.dev/v1alpha1',
    kind: 'Alert',
    metadata: { name, namespace, generation: 4 },
    spec: { providerRef: { name: 'slack' }, eventSources: [{ kind: 'Stack', name: '*' }], ...spec },
  };
}

function compile(spec: Partial<AlertSpec>, allowCrossNamespace = false, namespace = 'team-a'): CompiledAlert {
  const r = compileAlert(alert(spec, namespace), { allowCrossNamespace });
  if (!r.ok) throw new Error(`${r.reason}: ${r.message}`);
  return r.alert;
}

function event(over: Partial<NotificationEvent> = {}): NotificationEvent {
  return {
    identity: IDENTITY,
    id: eventId(IDENTITY),
    involvedObject: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      namespace: 'team-a',
      name: 'app-dev',
      uid: 'uid-1',
    },
    labels: { env: 'dev' },
    severity: 'error',
    reason: 'UpdateFailed',
    message: 'Update of stack acme/app/dev failed:\nerror: update failed',
    timestamp: '2026-08-20T11:02:40Z',
    metadata: { updateName: 'app-dev-1', commit: 'abc' },
    reportingController: 'pko-notification-controller',
    ...over,
  };
}

function inNamespace(ns: string, name = 'app-dev'): NotificationEvent {
  const ev = event();
  return { ...ev, involvedObject: { ...ev.involvedObject, namespace: ns, name } };
}

describe('compileAlert', () => {
  it('keeps identity fields and the spec', () => {
    const r = compileAlert(alert({}), { allowCrossNamespace: false });
    expect(r.ok).toBe(true);
    if (r.ok) expect([r.alert.namespace, r.alert.name, r.alert.generation]).toEqual(['team-a', 'ops', 4]);
  });

  it.each([
    { list: 'inclusionList', pattern: 'foo(', error: 'missing closing )' },
    { list: 'exclusionList', pattern: '(?<=a)b', error: 'invalid named capture' },
    { list: 'inclusionList', pattern: '(a)\\1', error: 'invalid escape sequence' },
  ] as const)(
    '$list $pattern → InvalidRegex naming the pattern and the error',
    ({ list, pattern, error }) => {
      const r = compileAlert(alert({ [list]: ['ok.*', pattern] }), { allowCrossNamespace: false });
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.reason).toBe('InvalidRegex');
        expect(r.message).toContain(`${list}[1] ${JSON.stringify(pattern)}`);
        expect(r.message).toContain(error);
      }
    },
  );
});

describe('F18 namespace wildcard', () => {
  const spec: Partial<AlertSpec> = { eventSources: [{ kind: 'Stack', name: '*', namespace: '*' }] };

  it('F18 with cross-namespace allowed, matches Stacks in every namespace', () => {
    const a = compile(spec, true);
    for (const ns of ['team-a', 'team-b', 'prod', 'kube-system'])
      expect(matchAlert(a, inNamespace(ns)), ns).toBe(true);
  });

  it('F18 with cross-namespace forbidden, the Alert does not compile and says why (never matches nothing silently)', () => {
    const r = compileAlert(alert(spec), { allowCrossNamespace: false });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.reason).toBe('CrossNamespaceForbidden');
      expect(r.message).toContain('eventSources[0].namespace "*"');
      expect(r.message).toContain('does not allow cross-namespace');
      // '*' is no namespace to move the Alert to: the advice fits it, and names the steps to open it.
      expect(r.message).not.toContain('put the Alert in that namespace');
      expect(r.message).toContain(
        "drop namespace '*' and create an Alert in each namespace whose Stacks it should follow",
      );
      expect(r.message).toContain('docs/install.md#alerts-across-namespaces');
    }
  });

  it('an explicit other namespace is cross-namespace too; the own namespace is not', () => {
    expect(
      compileAlert(alert({ eventSources: [{ kind: 'Stack', namespace: 'prod' }] }), {
        allowCrossNamespace: false,
      }).ok,
    ).toBe(false);
    const own = compile({ eventSources: [{ kind: 'Stack', namespace: 'team-a' }] });
    expect(matchAlert(own, inNamespace('team-a'))).toBe(true);
    const other = compile({ eventSources: [{ kind: 'Stack', namespace: 'prod' }] }, true);
    expect(matchAlert(other, inNamespace('prod'))).toBe(true);
    expect(matchAlert(other, inNamespace('team-a'))).toBe(false);
  });

  it("the default namespace is the Alert's", () => {
    const a = compile({ eventSources: [{ kind: 'Stack' }] }, true);
    expect(matchAlert(a, inNamespace('team-a'))).toBe(true);
    expect(matchAlert(a, inNamespace('team-b'))).toBe(false);
  });
});

describe('matchAlert filters', () => {
  it('suspend matches nothing', () => {
    expect(matchAlert(compile({ suspend: true }), event())).toBe(false);
    expect(matchAlert(compile({ suspend: false }), event())).toBe(true);
  });

  it.each([
    { alertSeverity: 'error', eventSeverity: 'error', want: true },
    { alertSeverity: 'error', eventSeverity: 'info', want: false },
    { alertSeverity: 'info', eventSeverity: 'info', want: true },
    { alertSeverity: 'info', eventSeverity: 'error', want: true },
    { alertSeverity: undefined, eventSeverity: 'info', want: true },
  ] as const)(
    'eventSeverity $alertSeverity, event $eventSeverity → $want',
    ({ alertSeverity, eventSeverity, want }) => {
      const a = compile(alertSeverity ? { eventSeverity: alertSeverity } : {});
      expect(matchAlert(a, event({ severity: eventSeverity }))).toBe(want);
    },
  );

  it.each([
    { glob: 'app-*', name: 'app-dev', want: true },
    { glob: 'app-*', name: 'web-dev', want: false },
    { glob: 'app-dev', name: 'app-dev', want: true },
    { glob: '*-{dev,prod}', name: 'web-prod', want: true },
    { glob: '*', name: 'a.b', want: true },
  ])('name glob $glob vs $name → $want', ({ glob, name, want }) => {
    const a = compile({ eventSources: [{ kind: 'Stack', name: glob }] });
    expect(matchAlert(a, inNamespace('team-a', name))).toBe(want);
  });

  it('an omitted name is every name; an empty one is refused as the CRD refuses it (minLength 1)', () => {
    expect(matchAlert(compile({ eventSources: [{ kind: 'Stack' }] }), inNamespace('team-a', 'x'))).toBe(true);
    expect(() => compile({ eventSources: [{ kind: 'Stack', name: '' }] })).toThrow(/name is empty: use \*/);
  });

  it('kind Stack does not select an event whose involved object is an Update', () => {
    const ev = event();
    const own = { ...ev, involvedObject: { ...ev.involvedObject, kind: 'Update' as const } };
    expect(matchAlert(compile({}), own)).toBe(false);
  });

  it('kind Update selects by metadata.updateName; events without one are not selected', () => {
    const a = compile({ eventSources: [{ kind: 'Update', name: 'app-dev-*' }] });
    expect(matchAlert(a, event())).toBe(true);
    expect(matchAlert(a, event({ metadata: { updateName: 'web-dev-1' } }))).toBe(false);
    expect(matchAlert(a, event({ metadata: {} }))).toBe(false);
  });

  it('matchLabels: every label must be equal', () => {
    const a = compile({ eventSources: [{ kind: 'Stack', matchLabels: { env: 'dev' } }] });
    expect(matchAlert(a, event())).toBe(true);
    expect(matchAlert(a, event({ labels: { env: 'prod' } }))).toBe(false);
    expect(matchAlert(a, event({ labels: {} }))).toBe(false);
    const two = compile({ eventSources: [{ kind: 'Stack', matchLabels: { env: 'dev', team: 'a' } }] });
    expect(matchAlert(two, event())).toBe(false);
  });

  it('any source may select the event', () => {
    const a = compile({
      eventSources: [
        { kind: 'Stack', name: 'web-*' },
        { kind: 'Update', name: 'app-*' },
      ],
    });
    expect(matchAlert(a, event())).toBe(true);
  });

  it('eventReasons is an allow-list; empty means all', () => {
    expect(matchAlert(compile({ eventReasons: ['UpdateFailed', 'StackStalled'] }), event())).toBe(true);
    expect(matchAlert(compile({ eventReasons: ['UpdateSucceeded'] }), event())).toBe(false);
    expect(matchAlert(compile({ eventReasons: [] }), event())).toBe(true);
  });

  it('inclusionList: any RE2 expression must be found in the message', () => {
    expect(matchAlert(compile({ inclusionList: ['nope', 'update failed$'] }), event())).toBe(true);
    expect(matchAlert(compile({ inclusionList: ['^error'] }), event())).toBe(false); // ^ anchors at text start
    expect(matchAlert(compile({ inclusionList: ['(?m)^error'] }), event())).toBe(true);
  });

  it('exclusionList: none may match, and it wins over the inclusionList', () => {
    expect(matchAlert(compile({ exclusionList: ['acme/app/dev'] }), event())).toBe(false);
    expect(matchAlert(compile({ exclusionList: ['acme/web'] }), event())).toBe(true);
    expect(
      matchAlert(compile({ inclusionList: ['failed'], exclusionList: ['update failed'] }), event()),
    ).toBe(false);
  });

  it('RE2 runs in linear time on a catastrophic-backtracking pattern', () => {
    const a = compile({ inclusionList: ['(a+)+$'] });
    const started = performance.now();
    // A backtracking engine takes exponential time to find that a run of 'a's followed by '!' does not match.
    expect(matchAlert(a, event({ message: `${'a'.repeat(50_000)}!` }))).toBe(false);
    expect(matchAlert(a, event({ message: 'a'.repeat(50_000) }))).toBe(true);
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe('whySkipped: the first named check that skips, with a message', () => {
  it.each([
    { name: 'suspended', spec: { suspend: true }, ev: {}, check: 'Suspended', message: 'Alert is suspended' },
    {
      name: 'another namespace',
      spec: {},
      ev: { involvedObject: { ...event().involvedObject, namespace: 'team-b' } },
      check: 'SourceKindOrNamespace',
      message: 'no eventSources entry covers Stack team-b/app-dev',
    },
    {
      name: 'kind Update without an Update',
      spec: { eventSources: [{ kind: 'Update' as const }] },
      ev: { metadata: {} },
      check: 'SourceKindOrNamespace',
      message: 'no eventSources entry covers Stack team-a/app-dev (no Update)',
    },
    {
      name: 'severity',
      spec: { eventSeverity: 'error' as const },
      ev: { severity: 'info' as const },
      check: 'Severity',
      message: "severity info is below the Alert's eventSeverity error",
    },
    {
      name: 'name glob',
      spec: { eventSources: [{ kind: 'Stack' as const, name: 'web-*' }] },
      ev: {},
      check: 'SourceNameOrLabels',
      message: 'no eventSources entry selects Stack team-a/app-dev by name and labels',
    },
    {
      name: 'labels',
      spec: { eventSources: [{ kind: 'Stack' as const, matchLabels: { env: 'prod' } }] },
      ev: {},
      check: 'SourceNameOrLabels',
      message: 'no eventSources entry selects Stack team-a/app-dev by name and labels',
    },
    {
      name: 'reason',
      spec: { eventReasons: ['UpdateSucceeded' as const] },
      ev: {},
      check: 'EventReason',
      message: 'reason UpdateFailed is not in eventReasons',
    },
    {
      name: 'inclusionList',
      spec: { inclusionList: ['^nothing'] },
      ev: {},
      check: 'InclusionList',
      message: 'the message matches no inclusionList expression',
    },
    {
      name: 'exclusionList',
      spec: { exclusionList: ['nothing', 'acme/app'] },
      ev: {},
      check: 'ExclusionList',
      message: 'the message matches exclusionList[1]',
    },
  ])('$name → $check', ({ spec, ev, check, message }) => {
    expect(whySkipped(compile(spec), event(ev))).toEqual({ check, message });
  });

  it('a matching event has no reason', () => {
    expect(whySkipped(compile({}), event())).toBeUndefined();
  });

  it('checks run in order: the first failing one is reported', () => {
    const a = compile({ suspend: true, eventSeverity: 'error', eventReasons: ['UpdateSucceeded'] });
    expect(whySkipped(a, event({ severity: 'info' }))?.check).toBe('Suspended');
    const b = compile({ eventSeverity: 'error', eventReasons: ['UpdateSucceeded'] });
    expect(whySkipped(b, event({ severity: 'info' }))?.check).toBe('Severity');
  });

  it('the routing checks leave suspension out (delivery records a suspended Alert’s events as skipped)', () => {
    const suspended = compile({ suspend: true });
    expect(whySkipped(suspended, event(), ROUTING_CHECKS)).toBeUndefined();
    expect(
      whySkipped(compile({ suspend: true, eventReasons: ['UpdateSucceeded'] }), event(), ROUTING_CHECKS),
    ).toEqual({ check: 'EventReason', message: 'reason UpdateFailed is not in eventReasons' });
  });
});

describe('F19 per-alert isolation', () => {
  it('F19 two Alerts with different eventMetadata: each delivery carries only its own', () => {
    const ev = event();
    const snapshot = structuredClone(ev);
    const a = compile({ eventMetadata: { team: 'platform', cluster: 'eu-1' } });
    const b = compile({ eventMetadata: { oncall: 'sre' } });
    const forA = eventForAlert(a, ev);
    const forB = eventForAlert(b, ev);
    expect(forA.metadata).toEqual({
      updateName: 'app-dev-1',
      commit: 'abc',
      team: 'platform',
      cluster: 'eu-1',
    });
    expect(forB.metadata).toEqual({ updateName: 'app-dev-1', commit: 'abc', oncall: 'sre' });
    expect(ev).toEqual(snapshot);
    forA.labels.x = 'y';
    forA.involvedObject.name = 'changed';
    expect(ev).toEqual(snapshot);
  });

  it("on a key conflict the event's value wins (an Alert cannot forge the commit)", () => {
    const a = compile({ eventMetadata: { commit: 'forged', extra: '1' } });
    expect(eventForAlert(a, event()).metadata).toEqual({
      updateName: 'app-dev-1',
      commit: 'abc',
      extra: '1',
    });
  });
});

describe('derived events through the matcher', () => {
  it('an Alert of kind Update matches the same run as an Alert of kind Stack, via Update or Stack fallback', () => {
    const byStack = compile({ eventSources: [{ kind: 'Stack', name: 'app-dev' }], eventSeverity: 'error' });
    const byUpdate = compile({
      eventSources: [{ kind: 'Update', name: 'app-dev-*' }],
      eventReasons: ['UpdateFailed'],
    });
    const viaUpdate = eventsFromUpdate(update('failed'), undefined, ctx);
    const viaStack = eventsFromStack(v2FailedStack(), ctx, { updateExists: () => false });
    for (const evs of [viaUpdate, viaStack]) {
      const failed = evs.filter((e) => e.reason === 'UpdateFailed');
      expect(failed).toHaveLength(1);
      expect(matchAlert(byStack, failed[0]!)).toBe(true);
      expect(matchAlert(byUpdate, failed[0]!)).toBe(true);
    }
    expect(viaUpdate.filter((e) => matchAlert(byStack, e)).map((e) => e.reason)).toEqual(['UpdateFailed']);
  });
});
