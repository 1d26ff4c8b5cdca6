/**
 * Leader election on a `coordination.k8s.io/v1` Lease, following client-go's
 * `tools/leaderelection` algorithm. There is no maintained JavaScript library for this
 * (client-node 2.x has none; the npm packages that tried are unmaintained and judge expiry by
 * comparing the holder's `renewTime` with the local clock, which breaks under clock skew).
 *
 * - A candidate acquires the Lease when it has no holder, or when the record has not changed for
 *   `leaseDurationSeconds` as measured on the LOCAL clock since this candidate last saw it change
 *   (client-go's observedTime) — clocks of different machines are never compared.
 * - Writes use optimistic concurrency: replace with the read `resourceVersion`; 409 Conflict
 *   means another candidate won the race.
 * - The leader renews every `retryPeriodMs`; when no renewal has succeeded for `renewDeadlineMs`,
 *   or another holder is seen, it stops leading: the signal given to `onStartedLeading` aborts
 *   and `onStoppedLeading` runs. It then becomes a candidate again (the caller may instead exit).
 * - `stop()` aborts the leading signal and releases the Lease (holder cleared,
 *   `leaseDurationSeconds: 1`) so a successor takes over within one retry period.
 * Safety needs leaseDuration > renewDeadline (the margin covers request latency); the
 * constructor enforces client-go's bounds. Needs RBAC `get`, `create`, `update` on `leases`.
 */
import type { KubeConfig } from './kubeconfig.ts';
import type { Logger } from '../log.ts';
import { KubeApiError, errorMessage, errorStatusCode, kubeRequest, objectPath } from './client.ts';
import { sleep, systemClock, type Clock } from './clock.ts';

export interface LeaderElectorOptions {
  namespace: string;
  /** Lease name. */
  name: string;
  /** Unique per candidate process, e.g. `<pod name>_<random>`. */
  identity: string;
  /** How long others wait after the last observed change before taking over. Default 15 000 ms. */
  leaseDurationMs?: number;
  /** The leader gives up when it could not renew for this long. Default 10 000 ms. */
  renewDeadlineMs?: number;
  /** Between attempts (acquire attempts are jittered up to ×2.2). Default 2 000 ms. */
  retryPeriodMs?: number;
  logger: Logger;
  clock?: Clock;
}

export interface LeaderCallbacks {
  /** Called on becoming leader; `signal` aborts when leadership ends. Must not block. */
  onStartedLeading(signal: AbortSignal): void;
  /** Called after leadership ended (after `signal` aborted). */
  onStoppedLeading(): void;
  /** Called when the observed holder changes (including to this candidate). */
  onNewLeader?(identity: string): void;
}

interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number;
}

interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

type Attempt = 'ok' | 'held' | 'failed';

/** `metav1.MicroTime` wire format: RFC 3339 with exactly six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  private readonly kc: KubeConfig;
  private readonly opts: LeaderElectorOptions;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly leaseMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryMs: number;
  private readonly path: string;
  private readonly collectionPath: string;
  private observed: { spec: LeaseSpec; resourceVersion: string; atMs: number } | undefined;
  private reportedLeader = '';
  private leading: AbortController | undefined;
  /** When the last successful acquire or renewal request started (clock ms). */
  private renewedAt = Number.NEGATIVE_INFINITY;
  private stopping = new AbortController();
  private loopDone: Promise<void> | undefined;

  constructor(kc: KubeConfig, opts: LeaderElectorOptions) {
    this.kc = kc;
    this.opts = opts;
    this.leaseMs = opts.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    this.retryMs = opts.retryPeriodMs ?? 2_000;
    if (this.leaseMs < 1_000) throw new Error('leaseDurationMs must be at least 1000');
    if (this.leaseMs <= this.renewDeadlineMs) throw new Error('leaseDurationMs must exceed renewDeadlineMs');
    if (this.renewDeadlineMs <= 1.2 * this.retryMs) {
      throw new Error('renewDeadlineMs must exceed 1.2 × retryPeriodMs');
    }
    if (this.retryMs <= 0) throw new Error('retryPeriodMs must be positive');
    if (opts.identity === '') throw new Error('identity must not be empty');
    this.log = opts.logger.child({ component: 'leader-election', lease: `${opts.namespace}/${opts.name}` });
    this.clock = opts.clock ?? systemClock;
    const ref = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespace: opts.namespace };
    this.collectionPath = objectPath(ref);
    this.path = objectPath({ ...ref, name: opts.name });
  }

  /** Starts campaigning in the background. Call once. */
  run(callbacks: LeaderCallbacks): void {
    if (this.loopDone !== undefined) throw new Error('LeaderElector.run called twice');
    this.loopDone = this.loop(callbacks).catch((err: unknown) => {
      this.log.error({ err: errorMessage(err) }, 'leader election loop crashed');
    });
  }

  isLeader(): boolean {
    return this.leading !== undefined;
  }

  /**
   * Whether the Lease is surely still ours: leading, and the last successful renewal was sent
   * less than `renewDeadlineMs` ago (measured from when its request started, so the request's own
   * latency counts against us). A follower takes over only `leaseDurationMs` after it saw that
   * renewal land, so until then no other candidate can be leading. Checked before every send:
   * a leader starved of CPU may not notice at once that its renewals stopped (its loop runs
   * late), but it never starts a send past this point.
   */
  holdsLease(): boolean {
    return this.leading !== undefined && this.clock.now() - this.renewedAt < this.renewDeadlineMs;
  }

  /** Stops campaigning; if leading, aborts the signal, releases the Lease, calls onStoppedLeading. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loopDone;
  }

  private async loop(cb: LeaderCallbacks): Promise<void> {
    const stop = this.stopping.signal;
    // A function, not the property: TypeScript would narrow `stop.aborted` across awaits.
    const stopped = (): boolean => stop.aborted;
    while (!stopped()) {
      const attemptAt = this.clock.now();
      const got = await this.tryAcquireOrRenew(cb, this.renewDeadlineMs);
      if (got !== 'ok') {
        await sleep(this.clock, this.retryMs * (1 + Math.random() * 1.2), stop);
        continue;
      }
      this.log.info({ identity: this.opts.identity }, 'became leader');
      const leading = new AbortController();
      this.renewedAt = attemptAt;
      this.leading = leading;
      this.safely('onStartedLeading', () => {
        cb.onStartedLeading(leading.signal);
      });
      while (!stopped()) {
        await sleep(this.clock, this.retryMs, stop);
        if (stopped()) break;
        const renewAt = this.clock.now();
        const left = this.renewDeadlineMs - (renewAt - this.renewedAt);
        const res = left > 0 ? await this.tryAcquireOrRenew(cb, left) : 'failed';
        if (res === 'ok') {
          this.renewedAt = renewAt;
          continue;
        }
        if (stopped()) break;
        if (res === 'held') {
          this.log.warn('lease taken by another holder; stopping leading');
          break;
        }
        if (this.clock.now() - this.renewedAt >= this.renewDeadlineMs) {
          this.log.warn(
            { renewDeadlineMs: this.renewDeadlineMs },
            'could not renew the lease in time; stopping leading',
          );
          break;
        }
      }
      leading.abort();
      if (stopped()) await this.release();
      this.leading = undefined;
      this.safely('onStoppedLeading', () => {
        cb.onStoppedLeading();
      });
    }
  }

  /**
   * One round of client-go's tryAcquireOrRenew. 'ok': we hold the lease now; 'held': someone
   * else holds a valid lease; 'failed': API error or lost race (logged).
   */
  private async tryAcquireOrRenew(cb: LeaderCallbacks, timeoutMs: number): Promise<Attempt> {
    const now = this.clock.now();
    const req = { signal: this.stopping.signal, timeoutMs: Math.max(1, Math.round(timeoutMs)) };
    try {
      let lease: Lease;
      try {
        lease = await kubeRequest<Lease>(this.kc, { method: 'GET', path: this.path, ...req });
      } catch (err) {
        if (errorStatusCode(err) !== 404) throw err;
        const created = await kubeRequest<Lease>(this.kc, {
          method: 'POST',
          path: this.collectionPath,
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.opts.name, namespace: this.opts.namespace },
            spec: this.newSpec(now, undefined),
          },
          ...req,
        });
        this.observe(cb, created, this.clock.now());
        return 'ok';
      }

      const spec = lease.spec ?? {};
      const rv = lease.metadata?.resourceVersion ?? '';
      if (this.observed?.resourceVersion !== rv) this.observe(cb, lease, now);
      const holder = spec.holderIdentity ?? '';
      const observedAt = this.observed?.atMs ?? now;
      const durationMs = (spec.leaseDurationSeconds ?? this.leaseMs / 1000) * 1000;
      if (holder !== '' && holder !== this.opts.identity && observedAt + durationMs > now) {
        return 'held';
      }

      const updated = await kubeRequest<Lease>(this.kc, {
        method: 'PUT',
        path: this.path,
        body: { ...lease, spec: this.newSpec(now, spec) },
        ...req,
      });
      this.observe(cb, updated, this.clock.now());
      return 'ok';
    } catch (err) {
      if (this.stopping.signal.aborted) return 'failed';
      if (err instanceof KubeApiError && err.statusCode === 409) {
        this.log.debug('lost an update race for the lease');
      } else {
        this.log.warn({ err: errorMessage(err) }, 'lease acquire/renew failed');
      }
      return 'failed';
    }
  }

  /** Our record: keeps acquireTime/transitions when we already hold it, else starts a term. */
  private newSpec(now: number, old: LeaseSpec | undefined): LeaseSpec {
    const ours = old?.holderIdentity === this.opts.identity;
    return {
      holderIdentity: this.opts.identity,
      leaseDurationSeconds: Math.ceil(this.leaseMs / 1000),
      acquireTime: ours ? (old.acquireTime ?? microTime(now)) : microTime(now),
      renewTime: microTime(now),
      leaseTransitions: ours
        ? (old.leaseTransitions ?? 0)
        : old === undefined
          ? 0
          : (old.leaseTransitions ?? 0) + 1,
    };
  }

  private observe(cb: LeaderCallbacks, lease: Lease, atMs: number): void {
    const spec = lease.spec ?? {};
    this.observed = { spec, resourceVersion: lease.metadata?.resourceVersion ?? '', atMs };
    const holder = spec.holderIdentity ?? '';
    if (holder !== '' && holder !== this.reportedLeader) {
      this.reportedLeader = holder;
      this.log.info({ leader: holder }, 'new leader observed');
      this.safely('onNewLeader', () => {
        cb.onNewLeader?.(holder);
      });
    }
  }

  /** Clears the holder (leaseDurationSeconds 1) if we still hold the Lease. Best effort. */
  private async release(): Promise<void> {
    try {
      const lease = await kubeRequest<Lease>(this.kc, { method: 'GET', path: this.path, timeoutMs: 5_000 });
      if (lease.spec?.holderIdentity !== this.opts.identity) return;
      const now = microTime(this.clock.now());
      await kubeRequest<Lease>(this.kc, {
        method: 'PUT',
        path: this.path,
        body: {
          ...lease,
          spec: {
            ...lease.spec,
            holderIdentity: null,
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
          },
        },
        timeoutMs: 5_000,
      });
      this.log.info('released the lease');
    } catch (err) {
      this.log.warn({ err: errorMessage(err) }, 'releasing the lease failed; successor waits for expiry');
    }
  }

  private safely(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.error({ callback: what, err: errorMessage(err) }, 'leader election callback threw');
    }
  }
}
