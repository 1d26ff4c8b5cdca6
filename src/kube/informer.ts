/**
 * A list-then-watch cache of one resource kind that never gives up.
 *
 * Why not client-node's `ListWatch` (dist/cache.js, 2.0.1):
 * - on any error other than 410 Gone or a client-side timeout it calls the error callbacks and
 *   stops for good — an API server restart or one network blip leaves the cache silently stale;
 * - it cannot be told to relist (the only way is stop/start, which forgets nothing but also
 *   diffs nothing until the watch drops), so there is no periodic level-based resync;
 * - it caches whole objects as received; with 10,000 Stacks whose status carries large outputs
 *   we need a `transform` that strips fields before anything is cached.
 * So this class has its own paged LIST (`kubeRequest`), WATCH (`kubeStream`, one JSON event per
 * line), diff and restart loop.
 *
 * Loop: LIST (paged, `limit`/`continue`) → diff against the cache (add / update when
 * `resourceVersion` changed / delete for vanished keys) → WATCH from the list's resourceVersion
 * with `allowWatchBookmarks=true` → on a clean end (server timeout, idle timeout) reconnect from
 * the last seen resourceVersion; on 410 Gone (HTTP or an ERROR event) relist; on any other error
 * mark unhealthy, back off (jittered exponential) and relist. A watch that sends no byte for
 * {@link WATCH_IDLE_MS} is cut and resumed (client-node's watch did the same after 30 s); a watch
 * line longer than {@link MAX_WATCH_LINE_BYTES} or not JSON is an error (relist after backoff),
 * never a silently dropped event. Every `relistIntervalMs` a full
 * LIST + diff runs even when healthy, and `relist` listeners fire after every completed LIST.
 *
 * Optional kinds (`optional`): a kind whose CRD may not be installed — PKO v2's Update is absent on
 * every PKO v1 cluster. A LIST answering 404 (the API server does not serve the resource) then
 * means "there are none": the cache empties (delete events for what it held), the informer
 * counts as synced and healthy, and it re-checks every `optional.recheckMs` until the kind is
 * served, when it starts like any informer — no restart needed, no CRD read permission needed.
 * A required informer treats the same 404 as an error (unhealthy, never synced).
 */
import type { Registry } from 'prom-client';
import type { KubeObject } from '../api/meta.ts';
import type { Logger } from '../log.ts';
import {
  errorMessage,
  errorStatusCode,
  kubeRequest,
  kubeStream,
  objectPath,
  type KubeConfig,
} from './client.ts';
import { jitteredBackoff, sleep, systemClock } from './clock.ts';
import { counter, gauge } from './metrics.ts';

export interface InformerOptions<T extends KubeObject> {
  /** Short name for logs and metric labels, e.g. 'stacks'. */
  name: string;
  kubeConfig: KubeConfig;
  /** '' for the core group. */
  group: string;
  version: string;
  plural: string;
  /** undefined = all namespaces. */
  namespace?: string | undefined;
  labelSelector?: string;
  /** Field selector for LIST and WATCH, e.g. `metadata.name=templates` to cache one object. */
  fieldSelector?: string;
  /** Periodic full LIST + diff, default 600 000 (10 min). */
  relistIntervalMs?: number;
  /** Applied to every object before it is cached and before handlers see it. Must keep metadata. */
  transform?: (obj: T) => T;
  logger: Logger;
  /** Restart delay after errors: jittered exponential, default 1 000 .. 30 000 ms. */
  backoff?: { initialMs: number; maxMs: number };
  /** LIST page size (`limit`), default 500. */
  pageSize?: number;
  /** Where `pkonc_informer_*` metrics go; unregistered metrics when absent. */
  registry?: Registry;
  /**
   * The kind may not be served (its CRD not installed): see the module comment. `recheckMs`:
   * how often a missing kind is looked for again (default 15 000).
   */
  optional?: { recheckMs?: number };
  /** A watch without a byte for this long is cut and resumed, ms. Default {@link WATCH_IDLE_MS}. */
  watchIdleMs?: number;
}

export type InformerEvent = 'add' | 'update' | 'delete';

interface WatchOutcome {
  kind: 'closed' | 'gone' | 'interrupted';
  events: number;
  durationMs: number;
}

interface KubeList {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items?: unknown[];
}

interface WatchStatus {
  code?: number;
  reason?: string;
  message?: string;
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * A watch that receives no byte for this long is cut and resumed from the last resourceVersion,
 * ms. Bookmarks come about once a minute, so an idle resource hits this routinely; it catches
 * connections that died without a FIN (a NAT or load balancer forgetting them).
 */
export const WATCH_IDLE_MS = 30_000;

/**
 * Longest watch event line accepted, bytes. The API server stores objects up to 1.5 MiB (etcd's
 * default request limit); a line is one object in JSON plus the event envelope.
 */
export const MAX_WATCH_LINE_BYTES = 8 * 1024 * 1024;

/** How often an optional kind that is not served is looked for again, ms. */
const DEFAULT_RECHECK_MS = 15_000;

type Handlers<T> = {
  add: ((obj: T) => void)[];
  update: ((obj: T, old: T) => void)[];
  delete: ((obj: T) => void)[];
  relist: (() => void)[];
};

/** The informer; see the module comment for the loop. All times in ms. */
export class Informer<T extends KubeObject> {
  private readonly opts: InformerOptions<T>;
  private readonly log: Logger;
  private readonly path: string;
  private readonly handlers: Handlers<T> = { add: [], update: [], delete: [], relist: [] };
  /** namespace ('' for cluster-scoped) → name → object. */
  private readonly cache = new Map<string, Map<string, T>>();
  private count = 0;
  private resourceVersion = '';
  private synced = false;
  private running = false;
  private stopping = false;
  private loopDone: Promise<void> | undefined;
  private listRequested = true;
  /** Aborted to cut the current watch or backoff sleep short (relist or stop). */
  private interrupt = new AbortController();
  /** Aborted by stop(): cancels an in-flight LIST. */
  private stopSignal = new AbortController();
  private relistTimer: NodeJS.Timeout | undefined;
  private relistWaiters: Waiter[] = [];
  private syncWaiters: Waiter[] = [];
  private failures = 0;
  private lastError: string | undefined;
  /** Optional kind not served by the API server (last LIST answered 404). */
  private notServed = false;
  private readonly restarts;
  private readonly objects;

  /** The informer's name (`InformerOptions.name`), for logs, metrics and readiness messages. */
  get name(): string {
    return this.opts.name;
  }

  constructor(opts: InformerOptions<T>) {
    this.opts = opts;
    this.log = opts.logger.child({ informer: opts.name });
    this.path = objectPath({
      group: opts.group,
      version: opts.version,
      plural: opts.plural,
      namespace: opts.namespace,
    });
    this.restarts = counter(
      opts.registry,
      'pkonc_informer_restarts_total',
      'Informer restarts after a failed LIST or WATCH.',
      ['informer'],
    ).labels(opts.name);
    this.objects = gauge(opts.registry, 'pkonc_informer_objects', 'Objects in the informer cache.', [
      'informer',
    ]).labels(opts.name);
  }

  on(event: 'add' | 'delete', cb: (obj: T) => void): void;
  on(event: 'update', cb: (obj: T, old: T) => void): void;
  on(event: 'relist', cb: () => void): void;
  on(event: InformerEvent | 'relist', cb: ((obj: T, old: T) => void) | (() => void)): void {
    // The overloads guarantee the callback shape per event.
    (this.handlers[event] as unknown[]).push(cb);
  }

  /** Starts the loop in the background. Errors are handled inside (restart with backoff). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = false;
    this.listRequested = true;
    this.interrupt = new AbortController();
    this.stopSignal = new AbortController();
    this.loopDone = this.loop().catch((err: unknown) => {
      this.log.error({ err: errorMessage(err) }, 'informer loop crashed');
    });
  }

  /** Stops the watch, cancels an in-flight LIST, waits for the loop to end. The cache is kept. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.stopping = true;
    this.clearRelistTimer();
    this.interrupt.abort();
    this.stopSignal.abort();
    await this.loopDone;
    this.running = false;
    const err = new Error(`informer ${this.opts.name} stopped`);
    for (const w of this.relistWaiters.splice(0)) w.reject(err);
    for (const w of this.syncWaiters.splice(0)) w.reject(err);
  }

  /** True once the first LIST completed. */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves after the first LIST; rejects when `signal` aborts or the informer stops. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter);
        reject(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      };
      const waiter: Waiter = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      if (signal?.aborted === true) {
        onAbort();
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.syncWaiters.push(waiter);
    });
  }

  /**
   * ok=false while the last LIST or WATCH failed and no LIST has succeeded since; the message
   * then names the informer and the error (method, path, HTTP code — never credentials).
   */
  health(): { ok: boolean; message: string } {
    if (this.notServed) {
      const every = Math.round((this.opts.optional?.recheckMs ?? DEFAULT_RECHECK_MS) / 1000);
      return {
        ok: true,
        message: `informer ${this.opts.name}: ${this.path} is not served (CRD not installed); idle, looking again every ${every} s`,
      };
    }
    if (this.lastError !== undefined) {
      return { ok: false, message: `informer ${this.opts.name}: ${this.lastError}` };
    }
    if (!this.synced) return { ok: true, message: `informer ${this.opts.name}: waiting for the first list` };
    return { ok: true, message: 'ok' };
  }

  /** True while an optional kind is not served by the API server (its CRD is not installed). */
  absent(): boolean {
    return this.notServed;
  }

  /** Cached object by namespace ('' for cluster-scoped) and name. */
  get(namespace: string, name: string): T | undefined {
    return this.cache.get(namespace)?.get(name);
  }

  /**
   * Cached objects of one namespace, or of all when `namespace` is undefined. The objects are the
   * cache's own (as are those given to handlers and returned by `get`): treat them as read-only.
   */
  list(namespace?: string): T[] {
    if (namespace !== undefined) return [...(this.cache.get(namespace)?.values() ?? [])];
    const out: T[] = [];
    for (const byName of this.cache.values()) out.push(...byName.values());
    return out;
  }

  size(): number {
    return this.count;
  }

  /**
   * Forces a LIST + diff now (cutting the current watch or backoff sleep short). Resolves when a
   * LIST that started after this call has completed; rejects if the informer is stopped first.
   */
  relist(): Promise<void> {
    if (!this.running || this.stopping) {
      return Promise.reject(new Error(`informer ${this.opts.name} is not running`));
    }
    return new Promise((resolve, reject) => {
      this.relistWaiters.push({ resolve, reject });
      this.requestList();
    });
  }

  // ---------------------------------------------------------------------------------------------

  private requestList(): void {
    this.listRequested = true;
    this.interrupt.abort();
  }

  private clearRelistTimer(): void {
    if (this.relistTimer !== undefined) clearTimeout(this.relistTimer);
    this.relistTimer = undefined;
  }

  private armRelistTimer(): void {
    this.clearRelistTimer();
    const ms = this.opts.relistIntervalMs ?? 600_000;
    if (ms <= 0 || this.stopping) return;
    this.relistTimer = setTimeout(() => {
      this.log.debug('periodic relist');
      this.requestList();
    }, ms);
    this.relistTimer.unref();
  }

  private async loop(): Promise<void> {
    const backoff = this.opts.backoff ?? { initialMs: 1_000, maxMs: 30_000 };
    while (!this.stopping) {
      if (this.interrupt.signal.aborted) this.interrupt = new AbortController();
      let waiters: Waiter[] = [];
      try {
        if (this.listRequested) {
          this.listRequested = false;
          waiters = this.relistWaiters.splice(0);
          await this.listAndDiff();
          this.recovered();
          this.armRelistTimer();
          for (const w of waiters) w.resolve();
          waiters = [];
          this.emit('relist');
        }
        const outcome = await this.watchOnce();
        this.log.debug({ ...outcome, resourceVersion: this.resourceVersion }, 'watch ended');
        if (outcome.kind === 'gone') {
          this.log.info({ resourceVersion: this.resourceVersion }, 'watch expired (410 Gone); relisting');
          this.listRequested = true;
        } else if (outcome.kind === 'closed' && outcome.events === 0 && outcome.durationMs < 1_000) {
          // A watch that closes at once without events must not turn into a hot loop.
          await sleep(systemClock, backoff.initialMs, this.interrupt.signal);
        }
      } catch (err) {
        this.relistWaiters.unshift(...waiters);
        if (this.stopSignal.signal.aborted) break;
        if (this.opts.optional !== undefined && errorStatusCode(err) === 404) {
          await this.idleWhileNotServed();
          continue;
        }
        const delay = jitteredBackoff(this.failures, backoff.initialMs, backoff.maxMs);
        this.failures++;
        this.lastError = errorMessage(err);
        this.restarts.inc();
        this.log.warn(
          { err: this.lastError, attempt: this.failures, retryInMs: delay },
          'list/watch failed; relisting after backoff',
        );
        await sleep(systemClock, delay, this.interrupt.signal);
        this.listRequested = true;
      }
    }
  }

  /**
   * An optional kind is not served: empty the cache (its objects are gone with the CRD), count as
   * synced, then wait `recheckMs` (or an interrupt) before the next LIST.
   */
  private async idleWhileNotServed(): Promise<void> {
    const first = !this.notServed;
    this.notServed = true;
    this.lastError = undefined;
    this.failures = 0;
    this.resourceVersion = '';
    this.clearRelistTimer();
    for (const byName of [...this.cache.values()])
      for (const old of [...byName.values()]) this.remove(old, old);
    this.objects.set(this.count);
    if (first) {
      this.log.info(
        { path: this.path },
        'resource not served (CRD not installed): informer idle until it appears',
      );
    }
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters.splice(0)) w.resolve();
    }
    // A relist of a kind that does not exist has completed: there is nothing.
    for (const w of this.relistWaiters.splice(0)) w.resolve();
    if (first) this.emit('relist');
    await sleep(systemClock, this.opts.optional?.recheckMs ?? DEFAULT_RECHECK_MS, this.interrupt.signal);
    this.listRequested = true;
  }

  private recovered(): void {
    if (this.notServed) {
      this.notServed = false;
      this.log.info({ path: this.path }, 'resource now served: informer started');
    }
    if (this.lastError !== undefined) {
      this.log.info({ afterFailures: this.failures }, 'list/watch recovered');
    }
    this.lastError = undefined;
    this.failures = 0;
    if (!this.synced) {
      this.synced = true;
      this.log.info({ objects: this.count }, 'initial list done');
      for (const w of this.syncWaiters.splice(0)) w.resolve();
    }
  }

  /** Paged LIST; on an expired continue token (410) starts over once. */
  private async listAll(): Promise<{ items: T[]; resourceVersion: string }> {
    const pageSize = this.opts.pageSize ?? 500;
    for (let attempt = 0; ; attempt++) {
      const items: T[] = [];
      let cont: string | undefined;
      let rv = '';
      try {
        do {
          const page: KubeList = await kubeRequest<KubeList>(this.opts.kubeConfig, {
            method: 'GET',
            path: this.path,
            query: {
              limit: pageSize,
              continue: cont,
              labelSelector: this.opts.labelSelector,
              fieldSelector: this.opts.fieldSelector,
            },
            signal: this.stopSignal.signal,
            timeoutMs: 60_000,
          });
          const itemKind = page.kind?.replace(/List$/, '');
          for (const raw of page.items ?? []) {
            const obj = raw as T;
            if (obj.apiVersion === undefined && page.apiVersion !== undefined)
              obj.apiVersion = page.apiVersion;
            if (obj.kind === undefined && itemKind !== undefined) obj.kind = itemKind;
            items.push(this.transform(obj));
          }
          rv = page.metadata?.resourceVersion ?? rv;
          cont = page.metadata?.continue === '' ? undefined : page.metadata?.continue;
        } while (cont !== undefined);
        return { items, resourceVersion: rv };
      } catch (err) {
        if (attempt === 0 && cont !== undefined && errorStatusCode(err) === 410) {
          this.log.info('list continue token expired; listing again from the start');
          continue;
        }
        throw err;
      }
    }
  }

  private async listAndDiff(): Promise<void> {
    const { items, resourceVersion } = await this.listAll();
    const seen = new Set<string>();
    for (const obj of items) {
      seen.add(keyOf(obj));
      this.upsert(obj);
    }
    for (const [ns, byName] of [...this.cache]) {
      for (const [name, old] of [...byName]) {
        if (!seen.has(`${ns}/${name}`)) this.remove(old, old);
      }
    }
    this.resourceVersion = resourceVersion;
    this.objects.set(this.count);
    this.log.debug({ objects: this.count, resourceVersion }, 'list done');
  }

  /** Adds or updates one object in the cache and emits; a changed uid is delete + add. */
  private upsert(obj: T): void {
    const ns = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    let byName = this.cache.get(ns);
    const old = byName?.get(name);
    if (old === undefined) {
      if (byName === undefined) {
        byName = new Map();
        this.cache.set(ns, byName);
      }
      byName.set(name, obj);
      this.count++;
      this.emit('add', obj);
      return;
    }
    if (old.metadata?.uid !== obj.metadata?.uid) {
      this.remove(old, old);
      this.upsert(obj);
      return;
    }
    if (old.metadata?.resourceVersion === obj.metadata?.resourceVersion) return;
    byName?.set(name, obj);
    this.emit('update', obj, old);
  }

  /** Drops the cached entry of `cached` and emits delete with `final` (the last known state). */
  private remove(cached: T, final: T): void {
    const ns = cached.metadata?.namespace ?? '';
    const byName = this.cache.get(ns);
    if (byName?.delete(cached.metadata?.name ?? '') !== true) return;
    this.count--;
    if (byName.size === 0) this.cache.delete(ns);
    this.emit('delete', final);
  }

  private transform(obj: T): T {
    return this.opts.transform ? this.opts.transform(obj) : obj;
  }

  /**
   * One WATCH connection, until it ends: 'closed' (the server ended it, or {@link WATCH_IDLE_MS}
   * without a byte), 'gone' (410) or 'interrupted' (relist or stop). Throws on other errors.
   */
  private async watchOnce(): Promise<WatchOutcome> {
    const interrupt = this.interrupt.signal;
    const started = Date.now();
    let events = 0;
    const outcome = (kind: WatchOutcome['kind']): WatchOutcome => ({
      kind,
      events,
      durationMs: Date.now() - started,
    });
    if (interrupt.aborted) return outcome('interrupted');
    const request = new AbortController();
    /** Why `request` was aborted from here: a relist/stop, or no byte for WATCH_IDLE_MS. */
    const cut: { by: 'interrupt' | 'idle' | undefined } = { by: undefined };
    const onInterrupt = (): void => {
      cut.by ??= 'interrupt';
      request.abort();
    };
    interrupt.addEventListener('abort', onInterrupt, { once: true });
    let idleTimer: NodeJS.Timeout | undefined;
    const armIdle = (): void => {
      if (idleTimer !== undefined) idleTimer.refresh();
      else
        idleTimer = setTimeout(() => {
          cut.by ??= 'idle';
          request.abort();
        }, this.opts.watchIdleMs ?? WATCH_IDLE_MS);
    };
    try {
      const body = await kubeStream(this.opts.kubeConfig, {
        path: this.path,
        query: {
          watch: true,
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          labelSelector: this.opts.labelSelector,
          fieldSelector: this.opts.fieldSelector,
          // Like client-go: 5..10 min so that many clients do not reconnect in lockstep.
          timeoutSeconds: Math.floor(300 + Math.random() * 300),
        },
        accept: 'application/json',
        signal: request.signal,
      });
      armIdle();
      const reader = body.getReader();
      const decoder = new TextDecoder();
      let pending = '';
      let pendingBytes = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        armIdle();
        const lastNewline = value.lastIndexOf(0x0a);
        pendingBytes = lastNewline < 0 ? pendingBytes + value.length : value.length - lastNewline - 1;
        if (pendingBytes > MAX_WATCH_LINE_BYTES) {
          this.log.warn(
            { limitBytes: MAX_WATCH_LINE_BYTES },
            'watch event line too long; cutting the watch and relisting',
          );
          throw new Error(`a watch event is longer than ${MAX_WATCH_LINE_BYTES} bytes`);
        }
        const text = pending + decoder.decode(value, { stream: true });
        let from = 0;
        for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
          const line = text.slice(from, nl);
          from = nl + 1;
          if (line.trim() === '') continue;
          events++;
          if (this.applyWatchLine(line) === 'gone') return outcome('gone');
        }
        pending = text.slice(from);
      }
      if (pending.trim() !== '') {
        events++;
        if (this.applyWatchLine(pending) === 'gone') return outcome('gone');
      }
      return outcome('closed');
    } catch (err) {
      if (cut.by === 'interrupt') return outcome('interrupted');
      // Resume from the last version, as after a server-side close.
      if (cut.by === 'idle') return outcome('closed');
      if (errorStatusCode(err) === 410) return outcome('gone');
      throw new Error(`watch ${this.path}: ${errorMessage(err)}`, { cause: err });
    } finally {
      if (idleTimer !== undefined) clearTimeout(idleTimer);
      interrupt.removeEventListener('abort', onInterrupt);
      request.abort();
    }
  }

  /** Parses one watch event line and applies it; returns 'gone' for a 410 ERROR event. */
  private applyWatchLine(line: string): 'gone' | undefined {
    let event: { type?: unknown; object?: unknown };
    try {
      event = JSON.parse(line) as { type?: unknown; object?: unknown };
    } catch {
      this.log.warn('watch event is not JSON; cutting the watch and relisting');
      throw new Error('a watch event is not JSON');
    }
    return this.applyWatchEvent(typeof event.type === 'string' ? event.type : '', event.object);
  }

  /** Applies one watch event to the cache; returns 'gone' for a 410 ERROR event. */
  private applyWatchEvent(phase: string, apiObj: unknown): 'gone' | undefined {
    if (phase === 'ERROR') {
      const st = (apiObj ?? {}) as WatchStatus;
      if (st.code === 410 || st.reason === 'Expired' || st.reason === 'Gone') return 'gone';
      throw new Error(`ERROR event ${st.code ?? ''} ${st.reason ?? ''}: ${st.message ?? ''}`.trim());
    }
    const raw = apiObj as T;
    const rv = raw.metadata?.resourceVersion;
    switch (phase) {
      case 'ADDED':
      case 'MODIFIED':
        this.upsert(this.transform(raw));
        this.objects.set(this.count);
        break;
      case 'DELETED': {
        const obj = this.transform(raw);
        const cached = this.get(obj.metadata?.namespace ?? '', obj.metadata?.name ?? '');
        if (cached !== undefined) this.remove(cached, obj);
        this.objects.set(this.count);
        break;
      }
      case 'BOOKMARK':
        break;
      default:
        this.log.warn({ phase }, 'unknown watch event type ignored');
        return undefined;
    }
    if (rv !== undefined && rv !== '') this.resourceVersion = rv;
    return undefined;
  }

  private emit(event: 'relist'): void;
  private emit(event: 'add' | 'delete', obj: T): void;
  private emit(event: 'update', obj: T, old: T): void;
  private emit(event: InformerEvent | 'relist', obj?: T, old?: T): void {
    const list = this.handlers[event] as ((a?: T, b?: T) => void)[];
    for (const cb of [...list]) {
      try {
        cb(obj, old);
      } catch (err) {
        this.log.error(
          {
            event,
            object: obj ? `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}` : undefined,
            err: errorMessage(err),
          },
          'informer handler threw',
        );
      }
    }
  }
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}
