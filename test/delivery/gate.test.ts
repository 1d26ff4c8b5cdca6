import { describe, expect, it } from 'vitest';
import { CredentialGate } from '../../src/delivery/gate.ts';
import { FakeClock } from '../kube/fake-clock.ts';

describe('CredentialGate', () => {
  it('holds a credential until the deadline; a later deadline wins, an earlier one does not shorten it', async () => {
    const clock = new FakeClock();
    const gate = new CredentialGate(clock);
    expect(gate.remaining('k')).toBe(0);
    gate.block('k', clock.now() + 7_000);
    gate.block('k', clock.now() + 3_000);
    expect(gate.remaining('k')).toBe(7_000);
    expect(gate.remaining('other')).toBe(0);
    let through = false;
    const waiting = gate.wait('k').then(() => {
      through = true;
    });
    await clock.advance(6_999);
    expect(through).toBe(false);
    gate.block('k', clock.now() + 2_000); // told again while waiting: the wait follows
    await clock.advance(1_000);
    expect(through).toBe(false);
    await clock.advance(1_000);
    await waiting;
    expect(through).toBe(true);
    expect(gate.remaining('k')).toBe(0);
  });

  it('a wait ends when its signal aborts', async () => {
    const clock = new FakeClock();
    const gate = new CredentialGate(clock);
    gate.block('k', clock.now() + 60_000);
    const stop = new AbortController();
    const waiting = gate.wait('k', stop.signal);
    stop.abort();
    await waiting;
    expect(gate.remaining('k')).toBe(60_000);
  });
});
