/**
 * Lease-based leader election against a real API server, with short timings
 * (lease 3 s, renew deadline 2 s, retry 0.5 s).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaderElector, microTime } from '../../src/kube/leader.ts';
import { createLogger } from '../../src/log.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { rest } from './rest.ts';

interface Lease {
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; leaseTransitions?: number };
}

const admin = rest(kubeConfig('admin'));
const leases = (namespace: string, name?: string) => ({
  group: 'coordination.k8s.io',
  version: 'v1',
  plural: 'leases',
  namespace,
  ...(name !== undefined ? { name } : {}),
});

/** Polls a synchronous condition (via the shared waitFor). */
async function until(cond: () => boolean, what: string, timeoutMs = 10_000, intervalMs = 100): Promise<void> {
  await waitFor(() => Promise.resolve(cond()), { what, timeoutMs, intervalMs });
}

const timing = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };

interface Candidate {
  id: string;
  elector: LeaderElector;
  started: number;
  stopped: number;
  signals: AbortSignal[];
  newLeaders: string[];
}

const candidates: Candidate[] = [];
afterEach(async () => {
  await Promise.all(candidates.splice(0).map((c) => c.elector.stop()));
});

function candidate(kc: KubeConfig, namespace: string, id: string): Candidate {
  const c: Candidate = {
    id,
    elector: new LeaderElector(kc, {
      namespace,
      name: 'pkonc-leader',
      identity: id,
      logger: createLogger({ level: 'silent' }),
      ...timing,
    }),
    started: 0,
    stopped: 0,
    signals: [],
    newLeaders: [],
  };
  c.elector.run({
    onStartedLeading: (signal) => {
      c.started++;
      c.signals.push(signal);
    },
    onStoppedLeading: () => {
      c.stopped++;
    },
    onNewLeader: (leader) => {
      c.newLeaders.push(leader);
    },
  });
  candidates.push(c);
  return c;
}

const readLease = (ns: string): Promise<Lease> => admin.get<Lease>(leases(ns, 'pkonc-leader'));

describe('LeaderElector', () => {
  it('exactly one of two candidates leads; stopping it hands over within the lease duration', async () => {
    const ns = await createTestNamespace('leader');
    const a = candidate(kubeConfig('admin'), ns, 'cand-a');
    const b = candidate(kubeConfig('admin'), ns, 'cand-b');
    const leader = await waitFor(() => Promise.resolve([a, b].find((c) => c.elector.isLeader())), {
      what: 'a leader',
    });
    const follower = leader === a ? b : a;

    // Watch both for a while (several renewals): never two leaders, no change of leader.
    const observeUntil = Date.now() + 3 * timing.leaseDurationMs;
    while (Date.now() < observeUntil) {
      expect([a, b].filter((c) => c.elector.isLeader())).toEqual([leader]);
      await new Promise((r) => setTimeout(r, 50));
    }
    const lease = await readLease(ns);
    expect(lease.spec?.holderIdentity).toBe(leader.id);
    expect(lease.spec?.leaseDurationSeconds).toBe(3);
    expect(follower.newLeaders).toEqual([leader.id]);
    expect([leader.started, leader.stopped, follower.started]).toEqual([1, 0, 0]);

    const t0 = Date.now();
    await leader.elector.stop();
    expect(leader.elector.isLeader()).toBe(false);
    expect(leader.signals[0]?.aborted).toBe(true);
    expect(leader.stopped).toBe(1);
    await until(() => follower.elector.isLeader(), 'the follower to take over', timing.leaseDurationMs, 20);
    const handover = Date.now() - t0;
    expect(handover).toBeLessThan(timing.leaseDurationMs);
    const after = await readLease(ns);
    expect(after.spec?.holderIdentity).toBe(follower.id);
    expect(after.spec?.leaseTransitions).toBe(1);
    expect(follower.newLeaders).toEqual([leader.id, follower.id]);
  });

  it('judges expiry by local observation, not by the holder’s renewTime', async () => {
    const ns = await createTestNamespace('leader-expiry');
    // A holder whose clock runs a century ahead, and which has stopped renewing.
    await admin.create(leases(ns), {
      metadata: { name: 'pkonc-leader' },
      spec: {
        holderIdentity: 'ghost',
        leaseDurationSeconds: 3,
        acquireTime: microTime(Date.UTC(2126, 0, 1)),
        renewTime: microTime(Date.UTC(2126, 0, 1)),
        leaseTransitions: 4,
      },
    });
    const t0 = Date.now();
    const c = candidate(kubeConfig('admin'), ns, 'cand-c');
    await new Promise((r) => setTimeout(r, 2_000));
    expect(c.elector.isLeader()).toBe(false); // the lease still looks valid: seen < 3 s ago
    expect(c.newLeaders).toEqual(['ghost']);
    await until(() => c.elector.isLeader(), 'takeover after expiry', 6_000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(timing.leaseDurationMs);
    const lease = await readLease(ns);
    expect(lease.spec?.holderIdentity).toBe('cand-c');
    expect(lease.spec?.leaseTransitions).toBe(5);
  });

  it('stops leading (signal aborted) when renewals fail for the renew deadline', async () => {
    const ns = await createTestNamespace('leader-renew');
    const rbac = { group: 'rbac.authorization.k8s.io', version: 'v1', namespace: ns };
    await admin.create(
      { ...rbac, plural: 'roles' },
      {
        metadata: { name: 'lease' },
        rules: [
          { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
        ],
      },
    );
    await admin.create(
      { ...rbac, plural: 'rolebindings' },
      {
        metadata: { name: 'lease' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'lease' },
        // 'viewer' has no other grants; 'controller' is bound cluster-wide by other test files.
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'viewer' }],
      },
    );
    const c = candidate(kubeConfig('viewer'), ns, 'cand-rbac');
    await until(() => c.elector.isLeader(), 'leading');
    const signal = c.signals[0]!;

    const lostAt = Date.now();
    await admin.delete({ ...rbac, plural: 'rolebindings', name: 'lease' });
    await until(() => signal.aborted, 'leading signal aborted', 6_000, 20);
    const took = Date.now() - lostAt;
    expect(c.elector.isLeader()).toBe(false);
    expect(c.stopped).toBe(1);
    // Gave up after the renew deadline (2 s), well before the lease (3 s) could expire for others.
    expect(took).toBeGreaterThanOrEqual(timing.renewDeadlineMs - timing.retryPeriodMs);
    expect(took).toBeLessThan(timing.leaseDurationMs + timing.retryPeriodMs);
  });

  it('holdsLease() turns false once renewals are a renew deadline late, before the election loop runs again (a starved leader never sends beside its successor)', async () => {
    const ns = await createTestNamespace('leader-fence');
    // Real timers; `now()` can jump ahead, as the clock looks to a process whose event loop was
    // starved: time passed and the loop did not run.
    let jump = 0;
    const clock = {
      now: () => Date.now() + jump,
      setTimeout: (cb: () => void, ms: number): unknown => setTimeout(cb, ms),
      clearTimeout: (h: unknown) => {
        clearTimeout(h as NodeJS.Timeout);
      },
    };
    const elector = new LeaderElector(kubeConfig('admin'), {
      namespace: ns,
      name: 'pkonc-leader',
      identity: 'starved',
      logger: createLogger({ level: 'silent' }),
      clock,
      ...timing,
    });
    let signal: AbortSignal | undefined;
    elector.run({
      onStartedLeading: (s) => {
        signal = s;
      },
      onStoppedLeading: () => undefined,
    });
    candidates.push({ id: 'starved', elector, started: 0, stopped: 0, signals: [], newLeaders: [] });
    await until(() => elector.holdsLease(), 'holding the lease');
    expect(elector.isLeader()).toBe(true);
    // The current term (on a loaded machine an earlier one may have ended on its own already;
    // once a term ends, this candidate — still the holder — may start another).
    const term = signal;
    jump = timing.renewDeadlineMs; // the last renewal is now a renew deadline old
    expect(elector.holdsLease()).toBe(false);
    // The loop has not noticed yet: it still counts itself leader, but may not send.
    expect(elector.isLeader()).toBe(true);
    expect(term?.aborted).toBe(false);
    // Its next round finds the deadline passed and ends the term (after its renewal request in
    // flight, if any, returns: bounded by the renew deadline).
    await until(() => term?.aborted === true, 'leading signal aborted', 10_000, 20);
    // Holding the lease again is only possible in a new term (it is still the holder; the
    // controller itself exits when a term ends).
    expect(!elector.holdsLease() || signal !== term).toBe(true);
  });
});
