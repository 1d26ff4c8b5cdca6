/**
 * The delivery ledger store: what has been handled per (Alert, Stack), kept in `DeliveryLedger`
 * objects of our own API group (crds/notification.pko.dev_deliveryledgers.yaml) — never in
 * annotations on PKO objects, which GitOps tools strip, and never in ConfigMaps, which would need
 * write access to ConfigMaps in every namespace (docs/delivery.md).
 *
 * Layout: per Alert, objects in the Alert's namespace, owned by it (garbage-collected with it),
 * named `pkonc-<alert uid>-r<bits>`, labelled `notification.pko.dev/alert-uid`. Each holds the
 * entries (./ledger-entry.ts) of the Stacks whose SHA-1 of the uid starts with `spec.shard`
 * (bits). An object whose entries outgrow {@link SPLIT_BYTES} splits in two (one more bit), so
 * objects stay small whatever the number of Stacks and a write stores a few hundred bytes plus
 * the object's metadata — the cost per delivered event does not grow with the Stacks (issue 15's
 * ≤ 2 KB per event; `npm run bench:ledger` measures it). A split writes both halves before it
 * deletes the whole; an interrupted one leaves objects that overlap, which `load` merges (entries
 * merge without repeating a handled event) and tidies.
 *
 * Writes: an entry changes only when an event is handled or marked in flight (never on relist or
 * resync); changes to one object are batched for `flushDelayMs`; `record`/`markInFlight` resolve
 * once the object is persisted. Every write is a full PUT conditioned on the object's
 * resourceVersion: a conflict (another writer — a second leader) re-reads, merges and writes
 * again, logged. A failed write is retried with backoff until it lands: the delivery already
 * happened, and giving up would cause a repeat.
 *
 * Reads: `load` lists every DeliveryLedger (one paged LIST, consistent: no resourceVersion) before
 * anything is sent; afterwards the store answers from memory only.
 */
import { createHash } from 'node:crypto';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { Registry } from 'prom-client';
import { API_VERSION, GROUP, VERSION } from '../api/v1alpha1.ts';
import { KubeApiError, errorMessage, kubeRequest, objectPath } from '../kube/client.ts';
import { jitteredBackoff, sleep, systemClock, type Clock } from '../kube/clock.ts';
import { counter, gauge } from '../kube/metrics.ts';
import type { Logger } from '../log.ts';
import {
  entriesEqual,
  formatEntry,
  mergeEntries,
  parseEntry,
  recordHandled,
  recordInFlight,
  type Entry,
  type EventRef,
} from './ledger-entry.ts';

export const LEDGER_ALERT_UID_LABEL = 'notification.pko.dev/alert-uid';
export const LEDGER_PLURAL = 'deliveryledgers';
export const LEDGER_KIND = 'DeliveryLedger';

/** An object's `spec.entries` above this many bytes splits in two. */
export const SPLIT_BYTES = 1024;
/** Deepest split (2^20 objects per Alert: far beyond any cluster). */
const MAX_DEPTH = 20;

export interface LedgerAlertRef {
  namespace: string;
  name: string;
  uid: string;
}

export interface LedgerOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** Batch window for writes to one object, ms (default 5). */
  flushDelayMs?: number;
  /** Entries per object before a split, bytes of `spec.entries` (default {@link SPLIT_BYTES}). */
  splitBytes?: number;
  /** Exposes `pkonc_ledger_writes_total{result}`, `pkonc_ledger_write_bytes_total`, `pkonc_ledger_entries`, `pkonc_ledger_objects`. */
  registry?: Registry;
  clock?: Clock;
}

interface LedgerObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    ownerReferences?: object[];
  };
  spec: { alert: string; shard: string; entries: string };
}

interface Shard {
  prefix: string;
  /** Stack uid → entry. */
  entries: Map<string, Entry>;
  /**
   * Stack uid → the entry its `line` was formatted from, and that line (`<uid>=<entry>`): entries
   * are replaced, never mutated, so a flush formats only the entries changed since the last one.
   */
  lines: Map<string, { e: Entry; line: string }>;
  /**
   * `spec.entries` as formatted from `lines` (one line per entry, sorted by uid); valid while every
   * entry is the one its line was formatted from (`Ledger#text`).
   */
  text: string;
  /** resourceVersion of the stored object; undefined when it does not exist (yet). */
  rv: string | undefined;
  dirty: boolean;
  timer: unknown;
  flushing: Promise<void> | undefined;
  waiters: (() => void)[];
  /** Split into two halves: only its stored object (if any) remains to be deleted. */
  retired: boolean;
  /** Settles when both halves of a split are persisted. */
  halves?: Promise<void>;
}

interface AlertLedger {
  ref: LedgerAlertRef;
  /** Prefix-free cover of the hash space: prefix → shard. */
  shards: Map<string, Shard>;
  /**
   * The shortest prefix length in `shards`, where a lookup starts (a cover of 10,000 Stacks is ~10
   * bits deep: most lookups would try ten shorter prefixes first); `undefined` after a change.
   */
  minDepth?: number | undefined;
}

/** 32 leading bits of SHA-1 of `stackUid`, as a string of `0`/`1`. */
function hashBits(stackUid: string): string {
  return createHash('sha1').update(stackUid).digest().readUInt32BE(0).toString(2).padStart(32, '0');
}

export class Ledger {
  readonly #o: LedgerOptions;
  readonly #clock: Clock;
  readonly #flushDelayMs: number;
  readonly #splitBytes: number;
  readonly #alerts = new Map<string, AlertLedger>();
  readonly #bits = new Map<string, string>();
  /**
   * Set by `load` with a `served` filter (`--watch-label-selector` shards): the Alerts whose
   * objects were read, and reads of Alerts served later. Undefined: every Alert's objects were read.
   */
  #served: { loaded: Set<string>; reading: Map<string, Promise<void>> } | undefined;
  #writes = 0;
  #bytes = 0;
  #conflicts = 0;
  #stopped = false;
  readonly #m;

  constructor(opts: LedgerOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? systemClock;
    this.#flushDelayMs = opts.flushDelayMs ?? 5;
    this.#splitBytes = opts.splitBytes ?? SPLIT_BYTES;
    const r = opts.registry;
    this.#m = {
      writes: counter(r, 'pkonc_ledger_writes_total', 'Delivery-ledger object writes by result', ['result']),
      bytes: counter(
        r,
        'pkonc_ledger_write_bytes_total',
        'Bytes of delivery-ledger objects written (as stored)',
        [],
      ),
      // Counted at scrape time: counting on every write walked every shard of every Alert.
      entries: gauge(
        r,
        'pkonc_ledger_entries',
        '(Alert, Stack) entries held by the delivery ledger',
        [],
        () => this.size,
      ),
      objects: gauge(r, 'pkonc_ledger_objects', 'DeliveryLedger objects in use', [], () => this.objectCount),
    };
  }

  /** Object writes since construction (for benchmarks and tests). */
  get writes(): number {
    return this.#writes;
  }

  /** Bytes of the objects written since construction, as the API server stored them (JSON). */
  get bytesWritten(): number {
    return this.#bytes;
  }

  /** Writes that met another writer's change (409) since construction. */
  get conflicts(): number {
    return this.#conflicts;
  }

  /** Number of (Alert, Stack) entries held. */
  get size(): number {
    let n = 0;
    for (const a of this.#alerts.values()) for (const s of a.shards.values()) n += s.entries.size;
    return n;
  }

  /** Number of objects (shards) in use, existing or about to be written. */
  get objectCount(): number {
    let n = 0;
    for (const a of this.#alerts.values()) n += a.shards.size;
    return n;
  }

  static objectName(alertUid: string, prefix: string): string {
    return `pkonc-${alertUid}-r${prefix}`;
  }

  #hashBits(stackUid: string): string {
    let b = this.#bits.get(stackUid);
    if (b === undefined) {
      b = hashBits(stackUid);
      this.#bits.set(stackUid, b);
    }
    return b;
  }

  #alert(ref: LedgerAlertRef): AlertLedger {
    let a = this.#alerts.get(ref.uid);
    if (!a) {
      a = { ref, shards: new Map([['', newShard('')]]) };
      this.#alerts.set(ref.uid, a);
    } else if (a.ref.name !== ref.name || a.ref.namespace !== ref.namespace) a.ref = ref;
    return a;
  }

  #shardOf(a: AlertLedger, stackUid: string): Shard {
    const bits = this.#hashBits(stackUid);
    if (a.minDepth === undefined) {
      let min = MAX_DEPTH;
      for (const prefix of a.shards.keys()) min = Math.min(min, prefix.length);
      a.minDepth = min;
    }
    for (let d = a.minDepth; d <= MAX_DEPTH; d++) {
      const s = a.shards.get(bits.slice(0, d));
      if (s) return s;
    }
    // The cover is complete by construction; recover from a broken one rather than lose entries.
    const s = newShard('');
    a.shards.set('', s);
    a.minDepth = 0;
    return s;
  }

  /** The entry of (Alert, Stack), if any. */
  entry(alertUid: string, stackUid: string): Entry | undefined {
    const a = this.#alerts.get(alertUid);
    return a ? this.#shardOf(a, stackUid).entries.get(stackUid) : undefined;
  }

  /**
   * Records `q` as handled for (Alert, Stack), with the provider's `note` for its run when given,
   * and resolves once persisted. Never rejects for API failures (retried with backoff, logged).
   * @throws RangeError (synchronously) for a note over the bound.
   */
  record(alert: LedgerAlertRef, stackUid: string, q: EventRef, note?: string): Promise<void> {
    return this.#change(alert, stackUid, (e) => recordHandled(e, q, note));
  }

  /** Records `q` as about to be sent (looked up on recovery); resolves once persisted. */
  markInFlight(alert: LedgerAlertRef, stackUid: string, q: EventRef): Promise<void> {
    return this.#change(alert, stackUid, (e) => recordInFlight(e, q));
  }

  #change(alert: LedgerAlertRef, stackUid: string, f: (e: Entry | undefined) => Entry): Promise<void> {
    const a = this.#alert(alert);
    const s = this.#shardOf(a, stackUid);
    const cur = s.entries.get(stackUid);
    const next = f(cur);
    if (entriesEqual(next, cur) && !s.dirty && !s.flushing) return Promise.resolve();
    s.entries.set(stackUid, next);
    return this.#requestFlush(a, s);
  }

  /** Forgets a deleted Stack's entries (every Alert); written with the next flush of each object. */
  forgetStack(stackUid: string): void {
    for (const a of this.#alerts.values()) {
      const s = this.#shardOf(a, stackUid);
      if (s.entries.delete(stackUid)) void this.#requestFlush(a, s);
    }
    this.#bits.delete(stackUid);
  }

  /**
   * Drops the entries of Stacks for which `isAlive` says false (once, after `load` and the Stack
   * informer's first list — never per write).
   * @returns how many were dropped.
   */
  pruneStacks(isAlive: (stackUid: string) => boolean): number {
    let n = 0;
    for (const a of this.#alerts.values()) {
      for (const s of a.shards.values()) {
        let changed = false;
        for (const k of [...s.entries.keys()]) {
          if (!isAlive(k)) {
            s.entries.delete(k);
            changed = true;
            n++;
          }
        }
        if (changed) void this.#requestFlush(a, s);
      }
    }
    return n;
  }

  /** Forgets a deleted Alert (its objects go with it through their owner reference). */
  dropAlert(alertUid: string): void {
    const a = this.#alerts.get(alertUid);
    if (!a) return;
    for (const s of a.shards.values()) {
      if (s.timer !== undefined) this.#clock.clearTimeout(s.timer);
      s.timer = undefined;
      for (const w of s.waiters.splice(0)) w();
    }
    this.#alerts.delete(alertUid);
  }

  // ---------------------------------------------------------------------------------------------
  // Loading

  #path(namespace: string | undefined, name?: string): string {
    return objectPath({
      group: GROUP,
      version: VERSION,
      plural: LEDGER_PLURAL,
      namespace,
      ...(name !== undefined ? { name } : {}),
    });
  }

  /**
   * Reads every DeliveryLedger (all namespaces, or `namespace`), paged, and merges it into memory;
   * then tidies what an interrupted split left (overlapping objects): their entries are written to
   * the objects that cover them now and the overlapping ones deleted. Call before dispatching.
   * @param served only the objects of Alerts it accepts (by uid) are kept — a
   *   `--watch-label-selector` shard neither holds nor writes the entries of other shards' Alerts;
   *   an Alert served later is read by {@link ready}.
   */
  async load(namespace?: string, served?: (alertUid: string) => boolean): Promise<void> {
    const found = await this.#list(namespace, LEDGER_ALERT_UID_LABEL, served);
    const repairs: Promise<void>[] = [];
    for (const { ref, objects } of found.values()) repairs.push(...this.#absorb(ref, objects));
    await Promise.all(repairs);
    if (served) this.#served = { loaded: new Set(found.keys()), reading: new Map() };
  }

  /**
   * Resolves once the objects of `alert` are in memory. After a `load` without a filter, at once.
   * After a filtered `load` (a `--watch-label-selector` shard: the objects of Alerts other shards
   * serve are neither read nor written), an Alert this shard did not serve then (created later,
   * or relabelled into the shard) has its own objects read first — one LIST by its uid label,
   * retried until it succeeds — so that what another shard delivered for it is not sent again.
   */
  ready(alert: LedgerAlertRef): Promise<void> {
    const sv = this.#served;
    if (!sv || sv.loaded.has(alert.uid)) return Promise.resolve();
    let p = sv.reading.get(alert.uid);
    if (!p) {
      p = (async () => {
        for (let attempt = 0; !this.#stopped; attempt++) {
          try {
            const found = await this.#list(alert.namespace, `${LEDGER_ALERT_UID_LABEL}=${alert.uid}`);
            const repairs: Promise<void>[] = [];
            for (const f of found.values()) repairs.push(...this.#absorb(f.ref, f.objects));
            await Promise.all(repairs);
            sv.loaded.add(alert.uid);
            return;
          } catch (err) {
            this.#o.logger.warn(
              { alert: `${alert.namespace}/${alert.name}`, err: errorMessage(err), attempt },
              'cannot read the delivery ledger of an Alert; retrying',
            );
            await sleep(this.#clock, Math.min(30_000, 500 * 2 ** attempt));
          }
        }
      })().finally(() => sv.reading.delete(alert.uid));
      sv.reading.set(alert.uid, p);
    }
    return p;
  }

  /** Lists DeliveryLedgers (paged, consistent) by `labelSelector`, grouped by Alert uid. */
  async #list(
    namespace: string | undefined,
    labelSelector: string,
    served?: (alertUid: string) => boolean,
  ): Promise<Map<string, { ref: LedgerAlertRef; objects: LedgerObject[] }>> {
    const found = new Map<string, { ref: LedgerAlertRef; objects: LedgerObject[] }>();
    let cont: string | undefined;
    do {
      const list = await kubeRequest<{ metadata?: { continue?: string }; items: LedgerObject[] }>(
        this.#o.kubeConfig,
        {
          method: 'GET',
          path: this.#path(namespace),
          query: { labelSelector, limit: 500, continue: cont },
        },
      );
      for (const obj of list.items) {
        const uid = obj.metadata.labels?.[LEDGER_ALERT_UID_LABEL];
        if (uid === undefined || !/^[01]*$/.test(obj.spec.shard)) continue;
        if (served && !served(uid)) continue;
        let f = found.get(uid);
        if (!f) {
          f = { ref: { uid, name: obj.spec.alert, namespace: obj.metadata.namespace }, objects: [] };
          found.set(uid, f);
        }
        f.objects.push(obj);
      }
      cont = list.metadata?.continue === '' ? undefined : list.metadata?.continue;
    } while (cont !== undefined);
    return found;
  }

  /**
   * {@link load}, retried until it succeeds (0.5 s doubling to 30 s between attempts, each failure
   * logged) or the ledger is closed. Nothing may be sent before the ledger is read.
   */
  async loadWithRetry(namespace?: string, served?: (alertUid: string) => boolean): Promise<void> {
    for (let attempt = 0; !this.#stopped; attempt++) {
      try {
        await this.load(namespace, served);
        return;
      } catch (err) {
        this.#o.logger.warn({ err: errorMessage(err), attempt }, 'cannot read the delivery ledger; retrying');
        await sleep(this.#clock, Math.min(30_000, 500 * 2 ** attempt));
      }
    }
  }

  /** Merges the objects of one Alert into memory; returns the writes/deletes that tidy overlaps. */
  #absorb(ref: LedgerAlertRef, objects: LedgerObject[]): Promise<void>[] {
    const existing = new Map(objects.map((o) => [o.spec.shard, o]));
    const a = this.#alert(ref);
    const prefixes = [...existing.keys()];
    const hasBelow = (n: string): boolean => prefixes.some((p) => p.length > n.length && p.startsWith(n));
    // The cover: existing objects without existing descendants, plus new ones for gaps.
    const cover = new Map<string, Shard>();
    const walk = (n: string): void => {
      const below = hasBelow(n);
      if (existing.has(n) && !below) {
        const s = a.shards.get(n) ?? newShard(n);
        s.rv = existing.get(n)?.metadata.resourceVersion;
        cover.set(n, s);
      } else if (below && n.length < MAX_DEPTH) {
        walk(`${n}0`);
        walk(`${n}1`);
      } else cover.set(n, a.shards.get(n) ?? newShard(n));
    };
    walk('');
    // Entries already in memory (none on a fresh leader) join those read.
    const carried: [string, Entry][] = [];
    for (const s of a.shards.values()) carried.push(...s.entries);
    a.shards = cover;
    a.minDepth = undefined;
    for (const [k, e] of carried) this.#join(a, k, e, false);
    const stale: LedgerObject[] = [];
    for (const obj of objects) {
      const inCover = cover.has(obj.spec.shard);
      if (!inCover) stale.push(obj);
      for (const line of obj.spec.entries.split('\n')) {
        const i = line.indexOf('=');
        if (i <= 0) continue;
        const e = parseEntry(line.slice(i + 1));
        if (!e) {
          this.#o.logger.warn(
            { object: `${obj.metadata.namespace}/${obj.metadata.name}` },
            'unreadable delivery-ledger entry ignored',
          );
          continue;
        }
        this.#join(a, line.slice(0, i), e, !inCover);
      }
    }
    if (stale.length === 0) return [];
    this.#o.logger.info(
      { alert: `${ref.namespace}/${ref.name}`, objects: stale.map((o) => o.metadata.name) },
      'tidying delivery-ledger objects left by an interrupted split',
    );
    const flushes = [...cover.values()].filter((s) => s.dirty).map((s) => this.#flushNow(a, s));
    return [
      Promise.all(flushes).then(async () => {
        for (const obj of stale) await this.#delete(ref.namespace, obj.metadata.name);
      }),
    ];
  }

  #join(a: AlertLedger, stackUid: string, e: Entry, markDirty: boolean): void {
    const s = this.#shardOf(a, stackUid);
    const cur = s.entries.get(stackUid);
    const merged = mergeEntries(cur, e);
    if (!entriesEqual(merged, cur)) s.entries.set(stackUid, merged);
    // Entries found outside the object that covers them now must be written there.
    if (markDirty) s.dirty = true;
  }

  // ---------------------------------------------------------------------------------------------
  // Writing

  #requestFlush(a: AlertLedger, s: Shard): Promise<void> {
    s.dirty = true;
    const done = new Promise<void>((resolve) => s.waiters.push(resolve));
    this.#schedule(a, s);
    return done;
  }

  /** Writes `s` now (behind a write already running), not after the batch window. */
  async #flushNow(a: AlertLedger, s: Shard): Promise<void> {
    if (s.timer !== undefined) {
      this.#clock.clearTimeout(s.timer);
      s.timer = undefined;
    }
    while (s.flushing) await s.flushing;
    s.dirty = true;
    const p = this.#flush(a, s);
    s.flushing = p.finally(() => {
      s.flushing = undefined;
      if (s.dirty && !this.#stopped && a.shards.get(s.prefix) === s) this.#schedule(a, s);
    });
    await p;
  }

  #schedule(a: AlertLedger, s: Shard): void {
    if (s.timer !== undefined || s.flushing || this.#stopped) return;
    s.timer = this.#clock.setTimeout(() => {
      s.timer = undefined;
      s.flushing = this.#flush(a, s).finally(() => {
        s.flushing = undefined;
        if (s.dirty && !this.#stopped && a.shards.get(s.prefix) === s) this.#schedule(a, s);
      });
    }, this.#flushDelayMs);
  }

  /**
   * `spec.entries` of `s`: one `<stack uid>=<entry>` line per Stack, sorted by uid. A flush asks twice (the split check, then the write): when no entry
   * changed since the last call — entries are replaced, never mutated, so identity tells — the
   * text of that call is returned without sorting or formatting again. Rebuilt, `s.lines` is a
   * new Map (`#write` keeps the one it sent to see what changed while the request was out).
   */
  #text(s: Shard): string {
    if (s.lines.size === s.entries.size) {
      let same = true;
      for (const [k, e] of s.entries) {
        if (s.lines.get(k)?.e !== e) {
          same = false;
          break;
        }
      }
      if (same) return s.text;
    }
    const keys = [...s.entries.keys()].sort();
    const lines = new Map<string, { e: Entry; line: string }>();
    const parts: string[] = [];
    for (const k of keys) {
      const e = s.entries.get(k) as Entry;
      let l = s.lines.get(k);
      if (l?.e !== e) l = { e, line: `${k}=${formatEntry(e)}` };
      lines.set(k, l);
      parts.push(l.line);
    }
    s.lines = lines;
    s.text = parts.join('\n');
    return s.text;
  }

  async #flush(a: AlertLedger, s: Shard): Promise<void> {
    for (let attempt = 0; !this.#stopped; attempt++) {
      const waiters = s.waiters.splice(0);
      s.dirty = false;
      try {
        if (s.retired) {
          await this.#retire(a, s);
        } else if (
          Buffer.byteLength(this.#text(s), 'utf8') > this.#splitBytes &&
          s.prefix.length < MAX_DEPTH
        ) {
          await this.#split(a, s);
        } else {
          await this.#write(a, s);
        }
        for (const w of waiters) w();
        return;
      } catch (err) {
        this.#m.writes.inc({ result: 'error' });
        s.waiters.unshift(...waiters);
        s.dirty = true;
        this.#o.logger.warn(
          { object: `${a.ref.namespace}/${Ledger.objectName(a.ref.uid, s.prefix)}`, err: errorMessage(err) },
          'ledger write failed; retrying',
        );
        await sleep(this.#clock, jitteredBackoff(attempt, 200, 10_000));
      }
    }
  }

  /** Replaces `s` by its two halves: both written, then `s` deleted. */
  async #split(a: AlertLedger, s: Shard): Promise<void> {
    const halves = [newShard(`${s.prefix}0`), newShard(`${s.prefix}1`)] as const;
    for (const [k, e] of s.entries) {
      halves[this.#hashBits(k)[s.prefix.length] === '0' ? 0 : 1].entries.set(k, e);
    }
    a.shards.delete(s.prefix);
    for (const h of halves) a.shards.set(h.prefix, h);
    a.minDepth = undefined;
    s.entries = new Map();
    s.retired = true;
    // Through each half's own flush, so that later changes to it queue behind this write.
    s.halves = Promise.all(halves.map((h) => this.#requestFlush(a, h))).then(() => undefined);
    await this.#retire(a, s);
  }

  /** Once both halves of a split are persisted, deletes the whole's object. */
  async #retire(a: AlertLedger, s: Shard): Promise<void> {
    await s.halves;
    if (s.rv !== undefined) await this.#delete(a.ref.namespace, Ledger.objectName(a.ref.uid, s.prefix));
    s.rv = undefined;
  }

  async #delete(namespace: string, name: string): Promise<void> {
    try {
      await kubeRequest(this.#o.kubeConfig, { method: 'DELETE', path: this.#path(namespace, name) });
    } catch (err) {
      if (!(err instanceof KubeApiError && err.statusCode === 404)) throw err;
    }
  }

  #body(a: AlertLedger, s: Shard, text: string): LedgerObject {
    return {
      apiVersion: API_VERSION,
      kind: LEDGER_KIND,
      metadata: {
        name: Ledger.objectName(a.ref.uid, s.prefix),
        namespace: a.ref.namespace,
        ...(s.rv !== undefined ? { resourceVersion: s.rv } : {}),
        labels: { [LEDGER_ALERT_UID_LABEL]: a.ref.uid },
        ownerReferences: [
          {
            apiVersion: API_VERSION,
            kind: 'Alert',
            name: a.ref.name,
            uid: a.ref.uid,
            blockOwnerDeletion: false,
          },
        ],
      },
      spec: { alert: a.ref.name, shard: s.prefix, entries: text },
    };
  }

  async #write(a: AlertLedger, s: Shard): Promise<void> {
    const kc = this.#o.kubeConfig;
    const name = Ledger.objectName(a.ref.uid, s.prefix);
    for (let i = 0; i < 5; i++) {
      const text = this.#text(s);
      // The entries `text` holds: `#text` replaces `s.lines` rather than changing it.
      const sent = s.lines;
      let bytes = 0;
      const onAnswerBytes = (n: number): void => {
        bytes = n;
      };
      try {
        const res =
          s.rv === undefined
            ? await kubeRequest<LedgerObject>(kc, {
                method: 'POST',
                path: this.#path(a.ref.namespace),
                query: { fieldManager: 'pkonc' },
                body: this.#body(a, s, text),
                onAnswerBytes,
              })
            : await kubeRequest<LedgerObject>(kc, {
                method: 'PUT',
                path: this.#path(a.ref.namespace, name),
                query: { fieldManager: 'pkonc' },
                body: this.#body(a, s, text),
                onAnswerBytes,
              });
        s.rv = res.metadata.resourceVersion;
        this.#writes++;
        // What the API server stored, as it answered it (the object with its metadata).
        this.#bytes += bytes;
        this.#m.writes.inc({ result: 'success' });
        this.#m.bytes.inc(bytes);
        // Entries changed while the request was in flight stay to be written (they are replaced,
        // never mutated, so identity tells).
        for (const [k, e] of s.entries) if (sent.get(k)?.e !== e) s.dirty = true;
        return;
      } catch (err) {
        if (err instanceof KubeApiError && err.statusCode === 404 && s.rv !== undefined) {
          // Deleted under us (by hand): create it again with everything we hold.
          s.rv = undefined;
          continue;
        }
        if (!(err instanceof KubeApiError && err.statusCode === 409)) throw err;
        // Another writer (a previous leader still running, or our create raced): merge, retry.
        this.#conflicts++;
        this.#m.writes.inc({ result: 'conflict' });
        this.#o.logger.warn(
          { object: `${a.ref.namespace}/${name}` },
          'delivery-ledger object changed by another writer (a second leader?): merging',
        );
        const current = await kubeRequest<LedgerObject>(kc, {
          method: 'GET',
          path: this.#path(a.ref.namespace, name),
        });
        s.rv = current.metadata.resourceVersion;
        for (const line of current.spec.entries.split('\n')) {
          const j = line.indexOf('=');
          const e = j > 0 ? parseEntry(line.slice(j + 1)) : undefined;
          if (!e) continue;
          const k = line.slice(0, j);
          const cur = s.entries.get(k);
          const merged = mergeEntries(cur, e);
          if (!entriesEqual(merged, cur)) s.entries.set(k, merged);
        }
      }
    }
    throw new Error(`ledger object ${a.ref.namespace}/${name}: conflicts persisted after 5 attempts`);
  }

  /** Waits for pending writes (≤ `deadlineMs`), then stops retrying. */
  async close(deadlineMs = 5_000): Promise<void> {
    const pending: Promise<void>[] = [];
    for (const a of this.#alerts.values()) {
      for (const s of a.shards.values()) {
        if (s.timer !== undefined) {
          this.#clock.clearTimeout(s.timer);
          s.timer = undefined;
          s.flushing = this.#flush(a, s);
        }
        if (s.flushing) pending.push(s.flushing);
      }
    }
    await Promise.race([Promise.all(pending), sleep(this.#clock, deadlineMs)]);
    this.#stopped = true;
  }
}

function newShard(prefix: string): Shard {
  return {
    prefix,
    entries: new Map(),
    lines: new Map(),
    text: '',
    rv: undefined,
    dirty: false,
    timer: undefined,
    flushing: undefined,
    waiters: [],
    retired: false,
  };
}
