/**
 * The dispatcher with an injected clock: order, once-only delivery, skips with reasons, retries,
 * final failures, and a shutdown that finishes or cancels sends on the wire deliberately.
 */
import { describe, expect, it } from 'vitest';
import type { ResolvedProvider } from '../../src/credential/provider.ts';
import { Dispatcher } from '../../src/delivery/dispatcher.ts';
import { ProviderHealth } from '../../src/delivery/health.ts';
import { Sender } from '../../src/delivery/send.ts';
import type { DeliveryOutcomeReport, OfferedEvent } from '../../src/delivery/types.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { FakeClock } from '../kube/fake-clock.ts';
import { resolved } from '../notifier/fixtures.ts';
import {
  deliveryAlert,
  MemoryLedger,
  quietLogger,
  RecordingRecorder,
  runEvent,
  ScriptedNotifier,
  type Step,
} from './support.ts';

const RUN_A = 'app-198c70e4c21';
const RUN_B = 'app-198c70e5000';

function setup(opts: { steps?: Step[]; provider?: Partial<ResolvedProvider> } = {}) {
  const clock = new FakeClock();
  const ledger = new MemoryLedger();
  const recorder = new RecordingRecorder();
  const notifier = new ScriptedNotifier(opts.steps);
  const outcomes: DeliveryOutcomeReport[] = [];
  const alert = deliveryAlert();
  const provider = resolved({ address: 'https://hooks.example/x', ...opts.provider });
  const health = new ProviderHealth();
  const logger = quietLogger();
  const sender = new Sender({
    ports: { notifiers: { create: () => notifier, limits: () => ({}) }, health },
    clusterName: 'c',
    logger,
    clock,
  });
  const dispatcher = new Dispatcher({
    logger,
    ledger,
    recorder,
    alerts: { get: (k) => (k === alert.key ? alert : undefined) },
    providers: { get: (k) => (k === 'team-a/hook' ? provider : undefined) },
    sender,
    outcomes: { record: (r) => outcomes.push(r) },
    clock,
    retry: { initialMs: 1000, maxMs: 8000, maxElapsedMs: 60_000 },
  });
  const offer = (...events: OfferedEvent[]): void => {
    dispatcher.offer(alert, 'stack-uid', events);
  };
  return { clock, ledger, recorder, notifier, outcomes, dispatcher, offer, health };
}

const settle = (clock: FakeClock): Promise<void> => clock.advance(0);

describe('Dispatcher', () => {
  it('delivers a Stack’s events in position order, each once; offering them again changes nothing', async () => {
    const t = setup();
    t.offer({ event: runEvent(RUN_B, 'started') }, { event: runEvent(RUN_A, 'started') });
    await settle(t.clock);
    expect(t.notifier.sends.map((s) => s.id)).toEqual([
      `stack-uid/${RUN_A}/started`,
      `stack-uid/${RUN_B}/started`,
    ]);
    t.offer({ event: runEvent(RUN_A, 'started') }, { event: runEvent(RUN_B, 'started') });
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(2);
    expect(t.ledger.advanced).toHaveLength(2);
    expect(t.outcomes.map((o) => o.result)).toEqual(['Delivered', 'Delivered']);
    expect(t.dispatcher.pendingCount).toBe(0);
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
    expect(t.ledger.advanced).toEqual([`stack-uid/${RUN_A}/failed`]);
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

  it('retries a retryable failure with backoff on the injected clock, then delivers', async () => {
    const t = setup({
      steps: [
        new ProviderError('boom', { code: 'HTTP_503', status: 503, retryable: true, secretValues: [] }),
      ],
    });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    expect(t.notifier.sends).toHaveLength(1);
    expect(t.ledger.advanced).toEqual([]);
    await t.clock.advance(499); // first backoff lies in [500, 1000] ms
    expect(t.notifier.sends).toHaveLength(1);
    await t.clock.advance(501);
    expect(t.notifier.sends).toHaveLength(2);
    expect(t.outcomes.map((o) => o.result)).toEqual(['Delivered']);
    expect(t.ledger.advanced).toEqual([`stack-uid/${RUN_A}/succeeded`]);
  });

  it('a final error is Failed once: a Warning Event, the outcome, and the ledger moves on', async () => {
    const t = setup({
      steps: [
        new ProviderError('nope', { code: 'HTTP_404', status: 404, retryable: false, secretValues: [] }),
      ],
    });
    t.offer({ event: runEvent(RUN_A, 'failed') });
    await settle(t.clock);
    expect(t.recorder.events.map((e) => e.reason)).toEqual(['DeliveryFailed']);
    expect(t.recorder.events[0]?.message).toMatch(/^UpdateFailed for team-a\/app not delivered: nope/);
    expect(t.outcomes.map((o) => o.result)).toEqual(['Failed']);
    expect(t.ledger.advanced).toHaveLength(1);
  });

  it('an authentication failure is reported to the Provider health, and cleared by the next success', async () => {
    const t = setup({
      steps: [
        new ProviderError('bad token', { code: 'HTTP_401', status: 401, retryable: true, secretValues: [] }),
      ],
    });
    t.offer({ event: runEvent(RUN_A, 'failed') });
    await settle(t.clock);
    expect(t.health.problem('team-a/hook')?.reason).toBe('AuthenticationFailed');
    await t.clock.advance(1000);
    expect(t.health.problem('team-a/hook')).toBeUndefined();
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
    expect(t.ledger.advanced).toEqual([`stack-uid/${RUN_A}/succeeded`]);
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
    const t = setup({
      steps: [
        new ProviderError('boom', { code: 'HTTP_503', status: 503, retryable: true, secretValues: [] }),
      ],
    });
    t.offer({ event: runEvent(RUN_A, 'succeeded') });
    await settle(t.clock);
    await t.dispatcher.stop(5_000);
    expect(t.notifier.sends).toHaveLength(1);
    expect(t.outcomes).toEqual([]);
    expect(t.ledger.advanced).toEqual([]);
  });
});
