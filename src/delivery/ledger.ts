/**
 * The delivery ledger: what has been delivered, kept in ConfigMaps this controller owns — never in
 * annotations on PKO objects, which GitOps tools strip (docs/architecture.md, "Delivery").
 *
 * Shape: per (Alert, Stack) one watermark, the position (`src/delivery/order.ts`) of the last
 * event handled — delivered, skipped with a stated reason, or given up after a final error.
 * Events of a Stack are handled in position order, so "at or before the watermark" means done.
 * That keeps the ledger to one short entry per Stack and Alert, whatever the number of runs.
 *
 * Storage: ConfigMaps `pkonc-ledger-<alert uid>-<shard>` in the Alert's namespace, owned by the
 * Alert (garbage-collected with it), labelled `notification.pko.dev/ledger=v1`; data key = Stack
 * uid, value = `<run>.<rank>.<sub>~<h>[,<h>…]` where each `h` is a short hash of an event id handled
 * at exactly that position: two events can share a position (PKO v1 runs are ordered by a
 * second-resolution time), and only the ones listed are done. Stacks are spread over `shards` (default 16) ConfigMaps by a
 * hash of their uid, so 10,000 Stacks make ~16 × 40 KB, far below the 1 MiB object limit.
 *
 * Writes happen only when a watermark moves (never on relist or resync) and are batched per shard
 * for `flushDelayMs`; `advance()` resolves once the entry is persisted. A write conflict (409)
 * re-reads the ConfigMap and keeps the larger watermark of each entry. A failed write is retried
 * with backoff until it lands: the delivery already happened, so giving up would cause a repeat.
 *
 * Crash window: between a successful send and the ledger write (milliseconds), a SIGKILL makes
 * the event be sent again after restart (at-least-once there). Receivers can deduplicate by the
 * event id; forges deduplicate by comparing with their current state.
 */
import { createHash } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../log.ts';
import { KubeApiError, kubeRequest, objectPath, errorMessage } from '../kube/client.ts';
import { jitteredBackoff, sleep, systemClock, type Clock } from '../kube/clock.ts';
import type { EventPosition } from './order.ts';
import {
  applyHandled,
  entriesEqual,
  entryCovers,
  formatEntry,
  mergeEntries,
  parseEntry,
  type Entry,
} from './ledger-entry.ts';

import { API_VERSION } from '../api/v1alpha1.ts';
import type { Registry } from 'prom-client';
import { counter, gauge } from '../kube/metrics.ts';

export const LEDGER_LABEL = 'notification.pko.dev/ledger';
export const LEDGER_ALERT_UID_LABEL = 'notification.pko.dev/alert-uid';

export interface LedgerAlertRef {
  namespace: string;
  name: string;
  uid: string;
}

export interface LedgerOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** ConfigMaps per Alert (default 16). Changing it re-homes entries on their next write. */
  shards?: number;
  /** Batch window for writes, ms (default 10). */
  flushDelayMs?: number;
  /** Exposes `pkonc_ledger_writes_total{result}` and `pkonc_ledger_entries`. */
  registry?: Registry;
  /** Whether a Stack exists (src/source/stacks.ts): entries of Stacks known to be gone are pruned on the next write. */
  stacks?: { isAlive(stackUid: string): boolean | undefined };
  clock?: Clock;
}

interface ConfigMapBody {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: {
    name: string;
    namespace: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: object[];
  };
  data?: Record<string, string>;
}

interface Shard {
  alert: LedgerAlertRef;
  name: string;
  /** Stack uid → entry, parsed once when read from the ConfigMap (formatted only to write). */
  data: Map<string, Entry>;
  resourceVersion: string | undefined;
  dirty: boolean;
  /** Keys changed in memory since the last successful write (sent as a merge patch). */
  changed: Set<string>;
  timer: unknown;
  flushing: Promise<void> | undefined;
  waiters: (() => void)[];
}

export class Ledger {
  readonly #o: Required<Omit<LedgerOptions, 'stacks' | 'registry'>> &
    Pick<LedgerOptions, 'stacks' | 'registry'>;
  /** alert uid → shard index → shard */
  readonly #shards = new Map<string, Map<number, Shard>>();
  #writes = 0;
  #stopped = false;

  readonly #m;

  constructor(opts: LedgerOptions) {
    this.#o = { shards: 16, flushDelayMs: 10, clock: systemClock, ...opts };
    this.#m = {
      writes: counter(
        opts.registry,
        'pkonc_ledger_writes_total',
        'Delivery-ledger ConfigMap writes by result',
        ['result'],
      ),
      entries: gauge(
        opts.registry,
        'pkonc_ledger_entries',
        '(Alert, Stack) entries held by the delivery ledger',
        [],
      ),
    };
  }

  /** ConfigMap writes since construction (for benchmarks and tests). */
  get writes(): number {
    return this.#writes;
  }

  /** Number of (Alert, Stack) entries held. */
  get size(): number {
    let n = 0;
    for (const m of this.#shards.values()) for (const s of m.values()) n += s.data.size;
    return n;
  }

  static configMapName(alertUid: string, shard: number): string {
    return `pkonc-ledger-${alertUid}-${shard.toString(16).padStart(2, '0')}`;
  }

  #shardIndex(stackUid: string): number {
    return createHash('sha1').update(stackUid).digest().readUInt32BE(0) % this.#o.shards;
  }

  #shard(alert: LedgerAlertRef, index: number): Shard {
    let byIndex = this.#shards.get(alert.uid);
    if (!byIndex) {
      byIndex = new Map();
      this.#shards.set(alert.uid, byIndex);
    }
    let s = byIndex.get(index);
    if (!s) {
      s = {
        alert,
        name: Ledger.configMapName(alert.uid, index),
        data: new Map(),
        resourceVersion: undefined,
        dirty: false,
        changed: new Set(),
        timer: undefined,
        flushing: undefined,
        waiters: [],
      };
      byIndex.set(index, s);
    }
    return s;
  }

  /**
   * Reads every ledger ConfigMap (all namespaces, or `namespace`), paged. Call before
   * dispatching, e.g. on becoming leader. Entries already in memory keep the larger watermark.
   */
  async load(namespace?: string): Promise<void> {
    let cont: string | undefined;
    do {
      const list = await kubeRequest<{ metadata?: { continue?: string }; items: ConfigMapBody[] }>(
        this.#o.kubeConfig,
        {
          method: 'GET',
          path: objectPath({ group: '', version: 'v1', plural: 'configmaps', namespace }),
          query: { labelSelector: `${LEDGER_LABEL}=v1`, limit: 500, continue: cont },
        },
      );
      for (const cm of list.items) this.#absorb(cm);
      cont = list.metadata?.continue === '' ? undefined : list.metadata?.continue;
    } while (cont !== undefined);
  }

  /**
   * {@link load}, retried until it succeeds (0.5 s doubling to 30 s between attempts, each failure
   * logged) or the ledger is closed. Nothing may be sent before the ledger is read.
   */
  async loadWithRetry(namespace?: string): Promise<void> {
    for (let attempt = 0; !this.#stopped; attempt++) {
      try {
        await this.load(namespace);
        return;
      } catch (err) {
        this.#o.logger.warn({ err: errorMessage(err), attempt }, 'cannot read the delivery ledger; retrying');
        await sleep(this.#o.clock, Math.min(30_000, 500 * 2 ** attempt));
      }
    }
  }

  #absorb(cm: ConfigMapBody): void {
    const uid = cm.metadata.labels?.[LEDGER_ALERT_UID_LABEL];
    const alertName = cm.metadata.annotations?.['notification.pko.dev/alert-name'];
    if (uid === undefined || alertName === undefined) return;
    const alert = { namespace: cm.metadata.namespace, name: alertName, uid };
    const index = Number.parseInt(cm.metadata.name.slice(cm.metadata.name.lastIndexOf('-') + 1), 16);
    const shard = this.#shard(alert, Number.isFinite(index) ? index : 0);
    if (shard.name === cm.metadata.name) shard.resourceVersion = cm.metadata.resourceVersion;
    for (const [stackUid, value] of Object.entries(cm.data ?? {})) {
      // Entries may sit in another shard after a shard-count change: re-home them in memory.
      const target = this.#shard(alert, this.#shardIndex(stackUid));
      if (target !== shard) {
        target.dirty = true;
        target.changed.add(stackUid);
      }
      const e = parseEntry(value);
      if (e) this.#raise(target.data, stackUid, e);
    }
  }

  /** Merges `next` into the entry of `key`; true when the stored entry changed. */
  #raise(data: Map<string, Entry>, key: string, next: Entry): boolean {
    const cur = data.get(key);
    const merged = mergeEntries(cur, next);
    if (entriesEqual(merged, cur)) return false;
    data.set(key, merged);
    return true;
  }

  #entry(alertUid: string, stackUid: string): Entry | undefined {
    return this.#shards.get(alertUid)?.get(this.#shardIndex(stackUid))?.data.get(stackUid);
  }

  /** The watermark of (Alert, Stack), if any. */
  position(alertUid: string, stackUid: string): EventPosition | undefined {
    return this.#entry(alertUid, stackUid)?.pos;
  }

  /** True when the event `eventId` at `pos` has been handled for (Alert, Stack). */
  isDone(alertUid: string, stackUid: string, pos: EventPosition, eventId: string): boolean {
    return entryCovers(this.#entry(alertUid, stackUid), pos, eventId);
  }

  /**
   * Moves the watermark of (Alert, Stack) to `pos`, recording `eventId` as handled there (never
   * backwards), and resolves once that is persisted. Never rejects: write failures are retried
   * with backoff (logged).
   */
  advance(alert: LedgerAlertRef, stackUid: string, pos: EventPosition, eventId: string): Promise<void> {
    const shard = this.#shard(alert, this.#shardIndex(stackUid));
    shard.alert = alert;
    const cur = shard.data.get(stackUid);
    const next = applyHandled(cur, pos, eventId);
    if (entriesEqual(next, cur) && !shard.dirty) return Promise.resolve();
    shard.data.set(stackUid, next);
    shard.changed.add(stackUid);
    shard.dirty = true;
    const done = new Promise<void>((resolve) => shard.waiters.push(resolve));
    this.#schedule(shard);
    return done;
  }

  #schedule(shard: Shard): void {
    if (shard.timer !== undefined || shard.flushing) return;
    shard.timer = this.#o.clock.setTimeout(() => {
      shard.timer = undefined;
      shard.flushing = this.#flush(shard).finally(() => {
        shard.flushing = undefined;
        if (shard.dirty && !this.#stopped) this.#schedule(shard);
      });
    }, this.#o.flushDelayMs);
  }

  async #flush(shard: Shard): Promise<void> {
    for (let attempt = 0; !this.#stopped; attempt++) {
      const waiters = shard.waiters.splice(0);
      shard.dirty = false;
      try {
        await this.#write(shard);
        for (const w of waiters) w();
        return;
      } catch (err) {
        this.#m.writes.inc({ result: 'error' });
        shard.waiters.unshift(...waiters);
        shard.dirty = true;
        this.#o.logger.warn(
          { configMap: `${shard.alert.namespace}/${shard.name}`, err: errorMessage(err) },
          'ledger write failed; retrying',
        );
        await sleep(this.#o.clock, jitteredBackoff(attempt, 200, 10_000));
      }
    }
  }

  /** Drops entries of Stacks known to be gone; returns their keys. */
  #prune(shard: Shard): string[] {
    const dead: string[] = [];
    for (const k of shard.data.keys()) {
      if (this.#o.stacks?.isAlive(k) === false) dead.push(k);
    }
    for (const k of dead) shard.data.delete(k);
    return dead;
  }

  #body(shard: Shard): ConfigMapBody {
    const data: Record<string, string> = {};
    for (const [k, v] of shard.data) data[k] = formatEntry(v);
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: shard.name,
        namespace: shard.alert.namespace,
        ...(shard.resourceVersion !== undefined ? { resourceVersion: shard.resourceVersion } : {}),
        labels: {
          [LEDGER_LABEL]: 'v1',
          [LEDGER_ALERT_UID_LABEL]: shard.alert.uid,
          'app.kubernetes.io/managed-by': 'pko-notification-controller',
        },
        annotations: { 'notification.pko.dev/alert-name': shard.alert.name },
        ownerReferences: [
          {
            apiVersion: API_VERSION,
            kind: 'Alert',
            name: shard.alert.name,
            uid: shard.alert.uid,
            blockOwnerDeletion: false,
          },
        ],
      },
      data,
    };
  }

  async #write(shard: Shard): Promise<void> {
    const kc = this.#o.kubeConfig;
    const path = objectPath({
      group: '',
      version: 'v1',
      plural: 'configmaps',
      namespace: shard.alert.namespace,
    });
    const dead = this.#prune(shard);
    for (let i = 0; i < 5; i++) {
      // Only what changed goes over the wire (a merge patch conditioned on resourceVersion):
      // rewriting a whole 40 KB shard per delivery would cost the API server and our heap.
      const keys = [...shard.changed];
      const sent = new Map(keys.map((k) => [k, shard.data.get(k)]));
      try {
        let res: ConfigMapBody;
        if (shard.resourceVersion === undefined) {
          res = await kubeRequest<ConfigMapBody>(kc, { method: 'POST', path, body: this.#body(shard) });
        } else {
          const data: Record<string, string | null> = {};
          for (const k of keys) {
            const e = shard.data.get(k);
            data[k] = e === undefined ? null : formatEntry(e);
          }
          for (const k of dead) data[k] = null;
          res = await kubeRequest<ConfigMapBody>(kc, {
            method: 'PATCH',
            path: `${path}/${encodeURIComponent(shard.name)}`,
            contentType: 'application/merge-patch+json',
            body: { metadata: { resourceVersion: shard.resourceVersion }, data },
          });
        }
        this.#writes++;
        this.#m.writes.inc({ result: 'success' });
        this.#m.entries.set(this.size);
        shard.resourceVersion = res.metadata.resourceVersion;
        // A key changed again while the request was in flight stays to be written (entries are
        // replaced, never mutated, so identity tells).
        for (const k of keys) if (shard.data.get(k) === sent.get(k)) shard.changed.delete(k);
        dead.length = 0;
        return;
      } catch (err) {
        if (err instanceof KubeApiError && err.statusCode === 404 && shard.resourceVersion !== undefined) {
          // Deleted under us (e.g. by hand): create it again with everything we hold.
          shard.resourceVersion = undefined;
          continue;
        }
        if (!(err instanceof KubeApiError && err.statusCode === 409)) throw err;
        // Someone else wrote it (a previous leader, or our create raced): merge and retry.
        const current = await kubeRequest<ConfigMapBody>(kc, {
          method: 'GET',
          path: `${path}/${encodeURIComponent(shard.name)}`,
        });
        shard.resourceVersion = current.metadata.resourceVersion;
        for (const [k, v] of Object.entries(current.data ?? {})) {
          const e = parseEntry(v);
          if (e) this.#raise(shard.data, k, e);
        }
      }
    }
    throw new Error(
      `ledger ConfigMap ${shard.alert.namespace}/${shard.name}: conflicts persisted after 5 attempts`,
    );
  }

  /** Waits for pending writes (≤ `deadlineMs`), then stops retrying. */
  async close(deadlineMs = 5_000): Promise<void> {
    const pending: Promise<void>[] = [];
    for (const m of this.#shards.values()) {
      for (const s of m.values()) {
        if (s.timer !== undefined) {
          this.#o.clock.clearTimeout(s.timer);
          s.timer = undefined;
          s.flushing = this.#flush(s);
        }
        if (s.flushing) pending.push(s.flushing);
      }
    }
    await Promise.race([Promise.all(pending), sleep(this.#o.clock, deadlineMs)]);
    this.#stopped = true;
  }
}
