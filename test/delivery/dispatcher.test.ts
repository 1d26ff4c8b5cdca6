/**
 * The dispatcher with an injected clock: order from observation, once-only delivery, skips with
 * reasons, retries and what the Alert's status shows meanwhile, final failures, ambiguous
 * outcomes per delivery class, the window of sends in flight per Provider, lookups, run notes, credential
 * refresh, cancellation (B06) and a shutdown that finishes or cancels sends on the wire.
 */
import { describe, expect, it } from 'vitest';
import { runKey, type NotificationEvent } from '../../src/api/event.ts';
import { runHash } from '../../src/delivery/ledger-entry.ts';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { Dispatcher, lanesAtWork } from '../../src/delivery/lanes.ts';
import { ProviderHealth } from '../../src/delivery/health.ts';
import { Sender } from '../../src/delivery/send.ts';
import type { DeliveryOutcomeReport, OfferedEvent } from '../../src/delivery/types.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { TemplateBudgetError } from '../../src/template/budget.ts';
import { FakeClock } from '../kube/fake-clock.ts';
import { resolved } from '../notifier/fixtures.ts';
import {
  deliveryAlert,
  MemoryLedger,
  quietLogger,
  RecordingRecorder,
  recorded,
  runEvent,
  ScriptedNotifier,
  type Step,
} from './support.ts';

const RUN_A = 'app-198c70e4c21';
const RUN_B = 'app-198c70e5000';

/**
 * A notifier whose target can be asked (`findDelivered`): the `lookup` class, whatever the type
 * (generic here, so that no chat pacing — p-queue's own timers — is involved).
 */
class LookupNotifier extends ScriptedNotifier {
  readonly has = new Set<string>();
  readonly asked: string[] = [];
  findDelivered(ev: NotificationEvent): Promise<boolean> {
    this.asked.push(ev.id);
    return Promise.resolve(this.has.has(ev.id));
  }
}

const err = (code: string, opts: Partial<ConstructorParameters<typeof ProviderError>[1]> = {}) =>
  new ProviderError(code, { code, retryable: true, secretValues: [], ...opts });

function setup(
  opts: {
    steps?: Step[];
    provider?: Partial<ResolvedProvider>;
    notifier?: ScriptedNotifier;
    refresh?: () => ResolvedProvider | undefined;
    maySend?: () => boolean;
    providerWindow?: number;
  } = {},
) {
  const clock = new FakeClock();
  const ledger = new MemoryLedger();
  const recorder = new RecordingRecorder();
  const notifier = opts.notifier ?? new ScriptedNotifier(opts.steps);
  if (opts.notifier && opts.steps) notifier.steps.push(...opts.steps);
  const outcomes: DeliveryOutcomeReport[] = [];
  const alert = deliveryAlert();
  const providers = new Map<string, ResolvedProvider>([
    ['team-a/hook', resolved({ address: 'https://hooks.example/x', ...opts.provider })],
  ]);
  const health = new ProviderHealth();
  const logger = quietLogger();
  const sender = new Sender({
    ports: { notifiers: { create: () => notifier, limits: () => ({}) }, health },
    clusterName: 'c',
    logger,
    clock,
    ...(opts.providerWindow !== undefined ? { providerWindow: opts.providerWindow } : {}),
  });
  const alerts = new Map([[alert.key, alert]]);
  const refreshed: string[] = [];
  const dispatcher = new Dispatcher({
    logger,
    ledger,
    recorder,
    alerts: { get: (k) => alerts.get(k) },
    providers: { get: (k) => providers.get(k) },
    sender,
    outcomes: { record: (r) => outcomes.push(r) },
    clock,
    retry: { initialMs: 1000, maxMs: 8000, maxElapsedMs: 60_000, warnAfterAttempts: 3 },
    heldRetryMs: 5000,
    ...(opts.maySend ? { maySend: opts.maySend } : {}),
    ...(opts.providerWindow !== undefined ? { providerWindow: opts.providerWindow } : {}),
    ...(opts.refresh
      ? {
          credentials: {
            refresh: (k: string) => {
              refreshed.push(k);
              const p = opts.refresh?.();
              if (p) providers.set(k, p);
              else providers.delete(k);
              return Promise.resolve(p);
            },
          },
        }
      : {}),
  });
  const offer = (...events: OfferedEvent[]): void => {
    dispatcher.offer(alert, 'stack-uid', events);
  };
  return {
    clock,
    ledger,
    recorder,
    notifier,
    outcomes,
    dispatcher,
    offer,
    health,
    alert,
    alerts,
    providers,
    refreshed,
  };
}

const settle = (clock: FakeClock): Promise<void> => clock.advance(0);
const finals = (o: DeliveryOutcomeReport[]) => o.filter((x) => x.result !== 'Retrying');

describe('Dispatcher', () => {
  it('sends nothing while maySend() says no (a leader whose Lease renewals are late), holds the event and sends it once allowed', async () => {
    let allowed = false;
    const t = setup({ maySend: () => allowed });
    t.offer({ event: runEvent(RUN_A, 'succeeded'), observed: 10 });
    await settle(t.clock);
    await t.clock.advance(12_000);
    expect(t.notifier.sends).toEqual([]);
    expect(t.ledger.entry(t.alert.uid, 'stack-uid')).toBeUndefined();
    allowed = true;
    await t.clock.advance(5_000);
    expect(t.notifier.sends.map((s) => s.id)).toEqual([`stack-uid/${RUN_A}/succeeded`]);
    expect(finals(t.outcomes).map((o) => o.result)).toEqual(['Delivered']);
  });

  it('B04: delivers a Stack’s events in the order their runs were observed — not by Update name — each once', async () => {
    const t = setup();
    // RUN_B's name says "later", but it was observed first (smaller resourceVersion).
    t.offer(
      { event: runEvent(RUN_A, 'started'), observed: 20 },
      { event: runEvent(RUN_B, 'started'), observed: 10 },
    );
    await settle(t.clock);
    expect(t.notifier.sends.map((s) => s.id)).toEqual([
      `stack-uid/${RUN_B}/started`,
      `stack-uid/${RUN_A}/started`,
    ]);
    t.offer(
      { event: runEvent(RUN_A, 'started'), observed: 20 },
      { event: runEvent(RUN_B, 'started'), observed: 10 },
    );
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(2);
    expect(t.ledger.advanced).toEqual([recorded(RUN_B, 'started'), recorded(RUN_A, 'started')]);
    expect(t.outcomes.map((o) => o.result)).toEqual(['Delivered', 'Delivered']);
    expect(t.dispatcher.pendingCount).toBe(0);
  });

  it('B04: a run with a name that sorts far in the future does not hide later runs', async () => {
    const t = setup();
    const poisoned = 'app-fffffffffff';
    t.offer({ event: runEvent(poisoned, 'failed'), observed: 5 });
    await settle(t.clock);
    t.offer(
      { event: runEvent(poisoned, 'failed'), observed: 5 },
      { event: runEvent(RUN_A, 'succeeded'), observed: 9 },
    );
    await settle(t.clock);
    t.offer({ event: runEvent('app-manual-refresh-000000001', 'succeeded'), observed: 12 });
    await settle(t.clock);
    expect(t.notifier.sends.map((s) => s.id)).toEqual([
      `stack-uid/${poisoned}/failed`,
      `stack-uid/${RUN_A}/succeeded`,
      'stack-uid/app-manual-refresh-000000001/succeeded',
    ]);
  });

  it('drops a run’s Started when its result is known too: only the result is sent', async () => {
    const t = setup();
    t.offer({ event: runEvent(RUN_A, 'started') }, { event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    expect(t.notifier.sends.map((s) => s.id)).toEqual([`stack-uid/${RUN_A}/succeeded`]);
  });

  it('records an offered skip (a suspended Alert) without sending, and moves the ledger', async () => {
    const t = setup();
    t.offer({
      event: runEvent(RUN_A, 'failed'),
      skip: { reason: 'Suspended', message: 'Alert is suspended' },
    });
    await settle(t.clock);
    expect(t.notifier.sends).toEqual([]);
    expect(t.outcomes.map((o) => [o.result, o.reason, o.message])).toEqual([
      ['Skipped', 'Suspended', 'Alert is suspended'],
    ]);
    expect(t.ledger.advanced).toEqual([recorded(RUN_A, 'failed')]);
  });

  it('an event older than the Alert, with nothing recorded yet, is skipped with reason BeforeAlert (not dropped silently)', async () => {
    const t = setup();
    const alert = { ...t.alert, createdMs: Date.parse('2026-06-01T00:00:00Z') };
    t.alerts.set(t.alert.key, alert);
    t.dispatcher.offer(alert, 'stack-uid', [{ event: runEvent(RUN_A, 'failed'), observed: 3 }]);
    await settle(t.clock);
    expect(t.notifier.sends).toEqual([]);
    expect(t.outcomes.map((o) => [o.result, o.reason])).toEqual([['Skipped', 'BeforeAlert']]);
    expect(t.ledger.advanced).toEqual([recorded(RUN_A, 'failed')]);
  });

  it('F03/F04: a git Provider and an event without a commit: skipped once with the source’s reason', async () => {
    const t = setup({ provider: { type: 'github', address: 'https://github.com/acme/app', token: 't0ken' } });
    const ev = {
      ...runEvent(RUN_A, 'failed'),
      noCommitReason: "revision '3' is not a git commit (Program source?)",
    };
    t.offer({ event: ev });
    await settle(t.clock);
    expect(t.notifier.sends).toEqual([]);
    expect(t.outcomes.map((o) => [o.reason, o.message])).toEqual([
      [
        'NoCommit',
        "not sent to github Provider team-a/hook: revision '3' is not a git commit (Program source?)",
      ],
    ]);
  });

  it('retries a retryable failure with backoff on the injected clock, showing Retrying with attempts and the next time, then delivers', async () => {
    const t = setup({ steps: [err('HTTP_503', { status: 503 })] });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(1);
    expect(t.ledger.advanced).toEqual([]);
    const retrying = t.outcomes.at(-1);
    expect([retrying?.result, retrying?.reason, retrying?.attempts]).toEqual(['Retrying', 'ServerError', 1]);
    const next = retrying?.nextAttemptMs ?? 0;
    expect(next - t.clock.now()).toBeGreaterThanOrEqual(500);
    expect(next - t.clock.now()).toBeLessThanOrEqual(1000);
    await t.clock.advance(499); // first backoff lies in [500, 1000] ms
    expect(t.notifier.sends).toHaveLength(1);
    await t.clock.advance(501);
    expect(t.notifier.sends).toHaveLength(2);
    expect(finals(t.outcomes).map((o) => [o.result, o.attempts])).toEqual([['Delivered', 2]]);
    expect(t.ledger.advanced).toEqual([recorded(RUN_A, 'succeeded')]);
  });

  it('a Warning Event after 3 failed attempts — one message per Provider and error, not one per attempt', async () => {
    const t = setup({ steps: Array.from({ length: 6 }, () => err('HTTP_503', { status: 503 })) });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    while (t.notifier.sends.length < 2) await t.clock.advance(100);
    expect(t.recorder.events).toEqual([]);
    while (t.notifier.sends.length < 3) await t.clock.advance(100);
    expect(t.recorder.events.map((e) => e.reason)).toEqual(['ServerError']);
    expect(t.recorder.events[0]?.message).toBe(
      'deliveries to Provider team-a/hook fail and are retried: HTTP_503',
    );
    await t.clock.advance(60_000);
    expect(t.notifier.sends).toHaveLength(7);
    expect(t.recorder.events).toHaveLength(1);
  });

  it('a final error is Failed once: a Warning Event, the outcome, and the ledger moves on', async () => {
    const t = setup({ steps: [err('nope', { status: 404, retryable: false })] });
    t.offer({ event: runEvent(RUN_A, 'failed') });
    await settle(t.clock);
    expect(t.recorder.events.map((e) => e.reason)).toEqual(['DeliveryFailed']);
    expect(t.recorder.events[0]?.message).toMatch(/^UpdateFailed for team-a\/app not delivered: nope/);
    expect(t.outcomes.map((o) => o.result)).toEqual(['Failed']);
    expect(t.ledger.advanced).toHaveLength(1);
  });

  it('an authentication failure is reported to the Provider health, and cleared by the next success', async () => {
    const t = setup({ steps: [err('HTTP_401', { status: 401, retryable: false })] });
    t.offer({ event: runEvent(RUN_A, 'failed') });
    await settle(t.clock);
    expect(t.health.problem('team-a/hook')?.reason).toBe('AuthenticationFailed');
    expect(t.outcomes.map((o) => [o.result, o.reason])).toEqual([['Failed', 'DeliveryFailed']]);
  });

  it('N10b: a 401 re-reads the credentials first; with a rotated token the event is sent again at once and delivered', async () => {
    const rotated = resolved({ address: 'https://hooks.example/x', token: 'new-token' });
    const t = setup({
      provider: { token: 'old-token' },
      steps: [err('HTTP_401', { status: 401, retryable: false })],
      refresh: () => rotated,
    });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    expect(t.refreshed).toEqual(['team-a/hook']);
    expect(t.notifier.sends).toHaveLength(2);
    expect(finals(t.outcomes).map((o) => o.result)).toEqual(['Delivered']);
    expect(t.recorder.events).toEqual([]);
  });

  it('a 401 with unchanged credentials after the re-read is final (AuthenticationFailed), not retried forever', async () => {
    const same = resolved({ address: 'https://hooks.example/x', token: 'old-token' });
    const t = setup({
      provider: { token: 'old-token' },
      steps: [err('HTTP_401', { status: 401, retryable: false })],
      refresh: () => same,
    });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(1);
    expect(finals(t.outcomes).map((o) => o.result)).toEqual(['Failed']);
  });

  describe('ambiguous outcomes (no answer after the request was sent)', () => {
    const noAnswer = () => err('TIMEOUT', { verdict: { kind: 'ambiguous', retry: true } });

    it('N08: a chat target that cannot tell a repeat is not sent again: Unconfirmed, recorded, a Warning', async () => {
      const t = setup({
        provider: { type: 'slack', address: 'https://hooks.slack.example/x' },
        steps: [noAnswer()],
      });
      t.offer({ event: runEvent(RUN_A, 'failed') });
      await settle(t.clock);
      await t.clock.advance(60_000);
      expect(t.notifier.sends).toHaveLength(1);
      expect(t.outcomes.map((o) => [o.result, o.reason])).toEqual([['Unconfirmed', 'AmbiguousOutcome']]);
      expect(t.recorder.events.map((e) => e.reason)).toEqual(['AmbiguousOutcome']);
      expect(t.ledger.advanced).toEqual([recorded(RUN_A, 'failed')]);
    });

    it('generic (receivers deduplicate by X-PKO-Event-Id): retried with the same event', async () => {
      const t = setup({ steps: [noAnswer()] });
      t.offer({ event: runEvent(RUN_A, 'failed') });
      await settle(t.clock);
      await t.clock.advance(1_000);
      expect(t.notifier.sends.map((s) => s.id)).toEqual([
        `stack-uid/${RUN_A}/failed`,
        `stack-uid/${RUN_A}/failed`,
      ]);
      expect(finals(t.outcomes).map((o) => o.result)).toEqual(['Delivered']);
    });

    it('a target that can be asked: asked before the retry; found there → Delivered without a second send', async () => {
      const notifier = new LookupNotifier();
      const t = setup({ notifier, steps: [noAnswer()] });
      t.offer({ event: runEvent(RUN_A, 'failed') });
      await settle(t.clock);
      expect(t.ledger.inFlight).toEqual([recorded(RUN_A, 'failed')]);
      notifier.has.add(`stack-uid/${RUN_A}/failed`); // the late answer's post is there
      await t.clock.advance(1_000);
      expect(notifier.asked).toEqual([`stack-uid/${RUN_A}/failed`]);
      expect(notifier.sends).toHaveLength(1);
      expect(finals(t.outcomes).map((o) => [o.result, o.reason])).toEqual([
        ['Delivered', 'AlreadyDelivered'],
      ]);
    });

    it('a target that can be asked: not found there → sent again', async () => {
      const notifier = new LookupNotifier();
      const t = setup({ notifier, steps: [noAnswer()] });
      t.offer({ event: runEvent(RUN_A, 'failed') });
      await settle(t.clock);
      await t.clock.advance(1_000);
      expect(notifier.asked).toHaveLength(1);
      expect(notifier.sends).toHaveLength(2);
      expect(finals(t.outcomes).map((o) => o.result)).toEqual(['Delivered']);
    });
  });

  it('recovery: an event a dead leader marked in flight is looked up first, and not sent when the target has it', async () => {
    const notifier = new LookupNotifier();
    const t = setup({ notifier });
    const ev = runEvent(RUN_A, 'succeeded');
    // What the previous leader recorded just before its send; it died before recording the outcome.
    await t.ledger.markInFlight({ namespace: 'team-a', name: 'ops', uid: t.alert.uid }, 'stack-uid', {
      run: runHash(runKey(ev.identity)),
      rv: 7,
      phase: 'succeeded',
    });
    notifier.has.add(ev.id);
    t.offer({ event: ev, observed: 7 });
    await settle(t.clock);
    expect(notifier.asked).toEqual([ev.id]);
    expect(notifier.sends).toEqual([]);
    expect(t.outcomes.map((o) => o.reason)).toEqual(['AlreadyDelivered']);
  });

  it('run notes: what a send leaves for its run is given to the run’s later sends', async () => {
    const t = setup({ steps: [{ note: 'ts-1700000000.000100' }] });
    t.offer({ event: runEvent(RUN_A, 'started'), observed: 4 });
    await settle(t.clock);
    t.offer(
      { event: runEvent(RUN_A, 'started'), observed: 4 },
      { event: runEvent(RUN_A, 'succeeded'), observed: 6 },
    );
    await settle(t.clock);
    expect(t.notifier.sends.map((s) => s.ctx)).toEqual([{}, { runNote: 'ts-1700000000.000100' }]);
    expect(t.ledger.notes).toEqual(['ts-1700000000.000100']);
  });

  it('a window of sends per Provider by class: W for event-id, 1 for lookup (and once), forges unbounded; a slot frees once its event is recorded', async () => {
    const meta = { commit: 'a'.repeat(40) };
    for (const [cls, want] of [
      ['event-id', 2], // providerWindow 2
      ['lookup', 1], // `once` shares its window of 1 (chat types pace on real timers: not here)
      ['idempotent', 3],
    ] as const) {
      const steps: Step[] = ['hang', 'hang', 'hang'];
      const t = setup({
        providerWindow: 2,
        ...(cls === 'lookup' ? { notifier: new LookupNotifier(steps) } : { steps }),
        ...(cls === 'idempotent'
          ? { provider: { type: 'github', address: 'https://github.com/acme/app', token: 't' } }
          : {}),
      });
      for (const [i, run] of [RUN_A, RUN_B, 'app-198c70e6000'].entries())
        t.dispatcher.offer(t.alert, `stack-${String(i)}`, [{ event: runEvent(run, 'succeeded', meta) }]);
      await settle(t.clock);
      expect([cls, t.notifier.sends.length]).toEqual([cls, want]);
      for (let i = 0; i < 3; i++) {
        t.notifier.release();
        await settle(t.clock);
      }
      expect([cls, t.notifier.sends.length, finals(t.outcomes).length]).toEqual([cls, 3, 3]);
    }
    // The window counts events between "sent" and "recorded": with the ledger write held, the
    // third generic event waits although the first two were answered — a kill now repeats ≤ W.
    const t = setup({ providerWindow: 2 });
    const resume = t.ledger.pause();
    for (const [i, run] of [RUN_A, RUN_B, 'app-198c70e6000'].entries())
      t.dispatcher.offer(t.alert, `stack-${String(i)}`, [{ event: runEvent(run, 'succeeded') }]);
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(2);
    expect(t.ledger.advanced).toHaveLength(0);
    resume();
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(3);
    expect(t.ledger.advanced).toHaveLength(3);
  });

  it('a backlog waits as data: a Provider works on at most 4 × W lanes (≥ 16) at once; the rest start in arrival order as turns free', async () => {
    expect([lanesAtWork(1), lanesAtWork(2), lanesAtWork(16)]).toEqual([16, 16, 64]);
    const stacks = Array.from({ length: 40 }, (_, i) => `stack-${String(i).padStart(2, '0')}`);
    const t = setup({ steps: stacks.map((): Step => 'hang'), providerWindow: 1 });
    for (const [i, s] of stacks.entries())
      t.dispatcher.offer(t.alert, s, [{ event: runEvent(`app-${String(100 + i)}`, 'succeeded') }]);
    await settle(t.clock);
    // One send (window 1) and 16 lanes at work; 24 events wait as data, not as prepared sends.
    expect([t.notifier.sends.length, t.dispatcher.lanesAtWork, t.dispatcher.pendingCount]).toEqual([
      1, 16, 40,
    ]);
    for (let i = 0; i < stacks.length; i++) {
      expect(t.dispatcher.lanesAtWork).toBeLessThanOrEqual(16);
      t.notifier.release();
      await settle(t.clock);
    }
    // Every event delivered once, in the order the Stacks were offered (first come, first served).
    expect(t.notifier.sends.map((s) => s.id)).toEqual(
      stacks.map((_, i) => runEvent(`app-${String(100 + i)}`, 'succeeded').id),
    );
    expect(finals(t.outcomes)).toHaveLength(40);
    expect([t.dispatcher.lanesAtWork, t.dispatcher.pendingCount]).toEqual([0, 0]);
  });

  it('a job waiting out a backoff gives its turn back: 16 Stacks failing do not hold up a 17th', async () => {
    const fail = (): Step => err('HTTP_503', { status: 503 });
    const t = setup({ steps: [...Array.from({ length: 16 }, fail), 'ok'], providerWindow: 1 });
    for (let i = 0; i < 17; i++)
      t.dispatcher.offer(t.alert, `stack-${String(i)}`, [
        { event: runEvent(`app-${String(100 + i)}`, 'succeeded') },
      ]);
    await settle(t.clock);
    // All 16 lanes at work failed once and wait (≥ 500 ms) without their turns; the 17th got one
    // and is delivered before any backoff ends.
    expect(t.notifier.sends).toHaveLength(17);
    const delivered = finals(t.outcomes).map((o) => [o.result, o.event.id]);
    expect(delivered).toEqual([['Delivered', runEvent('app-116', 'succeeded').id]]);
    expect(t.dispatcher.lanesAtWork).toBe(0);
    // After the backoff each takes a turn again and is delivered (the script is out of failures).
    await t.clock.advance(1000);
    await settle(t.clock);
    expect(finals(t.outcomes)).toHaveLength(17);
  });

  it('a window keeps the order within a Stack: one event of a Stack at a time, in observed order', async () => {
    const t = setup({ steps: ['hang', 'hang'], providerWindow: 16 });
    t.offer(
      { event: runEvent(RUN_B, 'succeeded'), observed: 20 },
      { event: runEvent(RUN_A, 'succeeded'), observed: 10 },
    );
    await settle(t.clock);
    expect(t.notifier.sends.map((s) => s.id)).toEqual([runEvent(RUN_A, 'succeeded').id]);
    t.notifier.release();
    await settle(t.clock);
    expect(t.notifier.sends.map((s) => s.id)).toEqual([
      runEvent(RUN_A, 'succeeded').id,
      runEvent(RUN_B, 'succeeded').id,
    ]);
  });

  it('a render that only ran out of time (a loaded machine) is rendered again and delivered; one out of steps fails at once', async () => {
    const t = setup();
    const inner = t.alert.templates;
    const failures: TemplateBudgetError[] = [
      new TemplateBudgetError('time', "template 'message': render took longer than 250 ms", 1),
      new TemplateBudgetError('time', 'rendering took longer than 5000 ms', null),
    ];
    t.alert.templates = {
      ...inner,
      render: (ev, o) => {
        const f = failures.shift();
        return f ? Promise.reject(f) : inner.render(ev, o);
      },
    };
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await t.clock.advance(60_000);
    expect(t.notifier.sends).toHaveLength(1);
    expect(finals(t.outcomes).map((o) => o.result)).toEqual(['Delivered']);

    failures.push(new TemplateBudgetError('steps', 'needs more than 20,000 helper calls', 1));
    t.offer({ event: runEvent(RUN_B, 'succeeded') });
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(1);
    expect(finals(t.outcomes).map((o) => [o.result, o.reason])).toEqual([
      ['Delivered', 'Delivered'],
      ['Failed', 'TemplateBudgetExceeded'],
    ]);
  });

  it('B06: deleting the Alert cancels its send on the wire and its retries at once; nothing is recorded or sent afterwards', async () => {
    const t = setup({ steps: [err('HTTP_503', { status: 503 }), 'hang'] });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    await t.clock.advance(1_000); // second attempt, hanging on the wire
    expect(t.notifier.sends).toHaveLength(2);
    t.alerts.delete(t.alert.key);
    t.dispatcher.dropAlert(t.alert.uid);
    await settle(t.clock);
    expect(t.notifier.sends[1]?.signal?.aborted).toBe(true);
    await t.clock.advance(600_000);
    expect(t.notifier.sends).toHaveLength(2);
    expect(t.ledger.advanced).toEqual([]);
    expect(t.dispatcher.pendingCount).toBe(0);
    // The dropped lane is forgotten: no timer left looking for its Alert every 5 s.
    expect(t.clock.pending()).toEqual([]);
  });

  it('B06: suspending the Provider ends the backoff wait at once: the event is recorded as Skipped (Suspended), not retried', async () => {
    const t = setup({ steps: [err('HTTP_503', { status: 503 })] });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    const p = t.providers.get('team-a/hook');
    if (!p) throw new Error('no provider');
    t.providers.set('team-a/hook', { ...p, suspend: true });
    t.dispatcher.cancelProvider('team-a/hook');
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(1);
    expect(finals(t.outcomes).map((o) => [o.result, o.reason])).toEqual([['Skipped', 'Suspended']]);
  });

  it('a Provider usable again ends the backoff wait: the held event goes at once', async () => {
    const t = setup({ steps: [err('HTTP_503', { status: 503 }), err('HTTP_503', { status: 503 })] });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    await t.clock.advance(1_000);
    expect(t.notifier.sends).toHaveLength(2); // now waiting 1–2 s
    t.dispatcher.wakeProvider('team-a/hook');
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(3);
    expect(finals(t.outcomes).map((o) => o.result)).toEqual(['Delivered']);
  });

  it('shutdown: a send that finishes within the deadline is recorded', async () => {
    const t = setup({ steps: ['hang'] });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    const stopped = t.dispatcher.stop(5_000);
    await t.clock.advance(1_000);
    t.notifier.release();
    await t.clock.advance(0);
    await stopped;
    expect(t.notifier.sends[0]?.signal?.aborted).toBe(false);
    expect(t.ledger.advanced).toEqual([recorded(RUN_A, 'succeeded')]);
    expect(t.outcomes.map((o) => o.result)).toEqual(['Delivered']);
    expect(t.notifier.closed).toBe(true);
  });

  it('shutdown: a send still on the wire at the deadline is cancelled through its signal and not recorded', async () => {
    const t = setup({ steps: ['hang'] });
    t.offer({ event: runEvent(RUN_A, 'succeeded') }, { event: runEvent(RUN_B, 'succeeded') });
    await settle(t.clock);
    const stopped = t.dispatcher.stop(5_000);
    await t.clock.advance(4_999);
    expect(t.notifier.sends[0]?.signal?.aborted).toBe(false);
    await t.clock.advance(1);
    expect(t.notifier.sends[0]?.signal?.aborted).toBe(true);
    await t.clock.advance(1_000);
    await stopped;
    expect(t.ledger.advanced).toEqual([]);
    expect(t.outcomes).toEqual([]);
    expect(t.recorder.events).toEqual([]);
    // Nothing else was started after the stop.
    expect(t.notifier.sends).toHaveLength(1);
    // Offers after the stop are ignored.
    const pending = t.dispatcher.pendingCount;
    t.offer({ event: runEvent('app-198c70e6000', 'failed') });
    expect(t.dispatcher.pendingCount).toBe(pending);
  });

  it('shutdown ends a backoff wait at once: the event is held, not failed', async () => {
    const t = setup({ steps: [err('HTTP_503', { status: 503 })] });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    await t.dispatcher.stop(5_000);
    expect(t.notifier.sends).toHaveLength(1);
    expect(finals(t.outcomes)).toEqual([]);
    expect(t.ledger.advanced).toEqual([]);
  });
});
