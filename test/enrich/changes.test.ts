/**
 * ChangeAttacher without a cluster: which events get a change set, the bounded wait, the cache.
 * (Reading a real workspace log end to end: ./changes.int.test.ts.)
 */
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import { ChangeAttacher, PKO_V1_UNAVAILABLE, type ChangeAttacherOptions } from '../../src/enrich/changes.ts';
import { createLogger } from '../../src/log.ts';
import { stackEvent } from '../template/fixtures.ts';

const stack: Stack = {
  metadata: { name: 'app', namespace: 'team-a', uid: 'stack-uid' },
  spec: { envRefs: { X: { type: 'Secret', secret: { name: 'creds', key: 'x' } } } },
};

function update(name: string, endTime = new Date().toISOString()): Update {
  return {
    metadata: { name, namespace: 'team-a', uid: `uid-${name}` },
    spec: { workspaceName: 'app', type: 'preview' },
    status: { startTime: new Date(Date.now() - 5_000).toISOString(), endTime },
  };
}

function event(run: EventIdentity['run'], phase: EventIdentity['phase']['kind']): NotificationEvent {
  const identity = { stack: 'stack-uid', run, phase: { kind: phase } } as EventIdentity;
  return stackEvent({ identity, id: eventId(identity) });
}

function attacher(
  o: Partial<ChangeAttacherOptions> & Pick<ChangeAttacherOptions, 'readSecret'>,
): ChangeAttacher {
  const updates = new Map(['u1', 'u2', 'u3', 'old'].map((n) => [n, update(n)]));
  updates.set('old', update('old', new Date(Date.now() - 3_600_000).toISOString()));
  // A failed run as PKO 2.9 leaves it: no endTime, a Complete condition.
  updates.set('oldFailed', {
    ...update('oldFailed'),
    status: {
      conditions: [
        {
          type: 'Complete',
          status: 'True',
          reason: 'Updated',
          message: '',
          lastTransitionTime: new Date(Date.now() - 3_600_000).toISOString(),
        },
      ],
    },
  });
  return new ChangeAttacher({
    kubeConfig: new KubeConfig(),
    update: (_ns, name) => updates.get(name),
    logger: createLogger({ level: 'silent' }),
    ...o,
  });
}

describe('ChangeAttacher', () => {
  it('leaves started and stalled events alone; PKO v1 runs say why there are no details', async () => {
    let reads = 0;
    const a = attacher({
      readSecret: () => {
        reads++;
        return Promise.resolve(undefined);
      },
    });
    const started = event({ kind: 'update', name: 'u1' }, 'started');
    expect(await a.attach(stack, started)).toBe(started);
    const v1 = await a.attach(stack, event({ kind: 'v1', commit: 'abc', at: 'x' }, 'failed'));
    expect(v1.changes).toEqual({ unavailable: PKO_V1_UNAVAILABLE });
    const gone = await a.attach(stack, event({ kind: 'update', name: 'nope' }, 'succeeded'));
    expect(gone.changes?.unavailable).toBe('no change details: the Update team-a/nope is gone');
    const old = await a.attach(stack, event({ kind: 'update', name: 'old' }, 'succeeded'));
    expect(old.changes?.unavailable).toMatch(/^no change details: the run ended more than 15 minutes before/);
    const oldFailed = await a.attach(stack, event({ kind: 'update', name: 'oldFailed' }, 'failed'));
    expect(oldFailed.changes?.unavailable).toMatch(
      /^no change details: the run ended more than 15 minutes before/,
    );
    expect(reads).toBe(0);
  });

  it('never posts details it could not clean: a Secret that cannot be read makes them unavailable', async () => {
    const a = attacher({ readSecret: () => Promise.reject(new Error('secrets "creds" is forbidden')) });
    const ev = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    expect(ev.changes?.unavailable).toBe(
      'no change details: the controller could not read the Secret team-a/creds the Stack references, to remove its values (it needs get on secrets in namespace team-a)',
    );
  });

  it('waits at most waitMs, then the event goes without details; one read per Update, bounded cache', async () => {
    const calls: string[] = [];
    const a = attacher({
      waitMs: 300,
      cacheSize: 2,
      // Never answers: the read never ends.
      readSecret: (_ns, name) => {
        calls.push(name);
        return new Promise(() => undefined);
      },
    });
    const t0 = performance.now();
    const ev = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    const waited = performance.now() - t0;
    expect(ev.changes?.unavailable).toBe(
      'no change details: the workspace log was not read within 0.3 s; the result was sent without it',
    );
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(5_000);
    await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    expect(calls).toHaveLength(1);
    await a.attach(stack, event({ kind: 'update', name: 'u2' }, 'succeeded'));
    await a.attach(stack, event({ kind: 'update', name: 'u3' }, 'failed'));
    expect(a.cached).toBe(2);
    expect(calls).toHaveLength(3);
    // u1 was evicted (least recently used): read again.
    await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    expect(calls).toHaveLength(4);
  });

  it("removes the Stack's Secret values from the event's message too (a failed run embeds the CLI output)", async () => {
    const a = attacher({ readSecret: () => Promise.resolve({ x: 'sup3r-secret-value' }) });
    const ev = stackEvent({
      identity: { stack: 'stack-uid', run: { kind: 'update', name: 'u2' }, phase: { kind: 'failed' } },
      message: 'Update of stack acme/app/dev failed:\n  ~ password: "sup3r-secret-value" => "x"\nerror: boom',
    });
    const out = await a.attach(stack, ev);
    expect(out.message).toBe(
      'Update of stack acme/app/dev failed:\n  ~ password: "[redacted]" => "x"\nerror: boom',
    );
    // No cluster here: the log could not be read, which is said.
    expect(out.changes?.unavailable).toMatch(/^no change details: /);
  });
});
