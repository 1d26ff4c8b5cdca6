/**
 * From PKO objects to deliveries: for each Stack (work-queue key `namespace/name`) recompute the
 * events its status and its Updates imply (src/source, level-based: on every change, every
 * relist, every Alert change and after start), match them against the Ready Alerts
 * (./matcher.ts), and offer the matches to delivery, which drops what the ledger says is done.
 * Recomputing writes nothing.
 */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { Registry } from 'prom-client';
import type { NotificationEvent, PreviewThread } from '../api/event.ts';
import { GATE_ANNOTATION, parseGate, type EventGate } from '../api/gate.ts';
import { UPDATE_GROUP, UPDATE_PLURAL, UPDATE_VERSION, type Stack, type Update } from '../api/pko.ts';
import { BASE_STACK_ANNOTATION, PULL_REQUEST_LABEL, isDriftCheck } from '../api/v1alpha1.ts';
import type { DeliveryQueue, OfferedEvent } from '../delivery/types.ts';
import { kubeRequest, objectPath, errorMessage, errorStatusCode } from '../kube/client.ts';
import type { Informer } from '../kube/informer.ts';
import { WorkQueue } from '../kube/workqueue.ts';
import type { Logger } from '../log.ts';
import { parseResourceVersion } from '../delivery/order.ts';
import {
  eventsForStack,
  lastUpdateFallback,
  revisionsToRecord,
  stackPredatesRun,
  stuckSince,
  updateObservedAt,
  type DeriveContext,
} from '../source/derive.ts';
import { compareUpdates, RunCommits, SeenUpdates, V1FailureTexts } from '../source/runs.ts';
import {
  eventForAlert,
  PRE_ENRICH_CHECKS,
  ROUTING_CHECKS,
  SOURCE_CHECKS,
  SUSPENDED,
  whySkipped,
} from './matcher.ts';
import type { CompiledAlert } from './compile.ts';
import type { RoutedAlert } from './routed.ts';

export interface RouterOptions {
  kubeConfig: KubeConfig;
  /** The Stack informer (what the router uses of it). */
  stacks: Pick<Informer<Stack>, 'on' | 'get' | 'list'>;
  /** The Update informer (what the router uses of it). */
  updates: Pick<Informer<Update>, 'on' | 'get'>;
  /**
   * The Ready Alerts (src/alert/routed.ts `AlertIndex`), and the compiled specs of the Alerts
   * served that may not be Ready yet (`selecting`): a run's commit is recorded for a Stack either
   * selects.
   */
  alerts: { all(): Iterable<RoutedAlert>; selecting(): Iterable<CompiledAlert> };
  /** Where matched events go (the dispatcher). */
  delivery: DeliveryQueue;
  logger: Logger;
  reportingController: string;
  registry?: Registry;
  /** Stacks recomputed in parallel (default 4). */
  concurrency?: number;
  /**
   * Adds to an event what deriving it cannot know (a finished run's change set: src/enrich),
   * before it is matched. Must not throw, and must bound its own wait.
   */
  enrich?: (stack: Stack, event: NotificationEvent) => Promise<NotificationEvent>;
  /**
   * Whether some PullRequestPreview in `namespace` names the Stack `name` as its base
   * (`spec.stackRef.name`): that Stack's finished up/destroy runs then edit the comment its
   * previews wrote on the pull request their commit merged ({@link previewThreadOf}). Default: none.
   */
  isPreviewBase?: (namespace: string, name: string) => boolean;
  /**
   * Events of the Stack that other objects' status holds (drift checks: src/drift/events.ts),
   * with the resourceVersion they were observed at; derived with the Stack's own.
   */
  moreEvents?: (stack: Stack) => { event: NotificationEvent; observed?: number }[];
  /**
   * A PKO v2 Stack Reconciling this long with no run is stuck (`StackStalled` NoProgress,
   * src/source/derive.ts `stuckSince`), ms; absent: never reported. The Stack is looked at again
   * when the threshold is reached.
   */
  stuckAfterMs?: number;
  /** Clock of the stuck rule and of the wait for a Stack behind its run (ms since the epoch); default `Date.now`. */
  now?: () => number;
  /**
   * Writes the revision of a finished PKO v2 Update into its `notification.pko.dev/commit`
   * annotation (src/source/derive.ts `revisionsToRecord`), so that any replica finds the run's
   * commit once the Stack no longer names it. Called at most once per Update by this process, as
   * leader, with the Update's current `resourceVersion`: the write must be conditioned on it and
   * store it in `notification.pko.dev/observed-resource-version`. Rejects on failure (logged; a
   * 409 is tried again on the Stack's next reconcile). Default: not recorded.
   */
  recordRunCommit?: (
    namespace: string,
    name: string,
    revision: string,
    resourceVersion: string,
  ) => Promise<void>;
  /**
   * Whether the PKO v2 Update `namespace/name` exists now, read from the API server (not the
   * informer). Asked once before a Stack's `lastUpdate` yields its fallback event for an Update
   * this process never saw (src/source/derive.ts `lastUpdateFallback`): the two informers watch
   * separately, and under load the Stack naming a retry can arrive before the retry's Update.
   * Rejects on other errors than 404 (the Stack is tried again with backoff). Default: a GET.
   */
  updateExistsNow?: (namespace: string, name: string) => Promise<boolean>;
}

/** How soon a Stack whose `lastUpdate` names an Update its informer has not delivered is looked at again, ms. */
export const HELD_FALLBACK_RETRY_MS = 1_000;

/** The Stack an Update belongs to: its ownerReference of kind Stack, else PKO's `pulumi.com/stack-name` label. */
export function stackNameOfUpdate(u: Update): string | undefined {
  const owner = u.metadata.ownerReferences?.find((o) => o.kind === 'Stack');
  return owner?.name ?? u.metadata.labels?.['pulumi.com/stack-name'];
}

/**
 * The pull request a preview Stack was created for: its {@link PULL_REQUEST_LABEL}, only on a
 * Stack owned by a PullRequestPreview (docs/previews.md); events then need no lookup.
 */
export function pullRequestOf(s: Stack | undefined): string | undefined {
  if (s?.metadata.ownerReferences?.some((o) => o.kind === 'PullRequestPreview') !== true) return undefined;
  const n = s.metadata.labels?.[PULL_REQUEST_LABEL];
  return n !== undefined && /^[1-9]\d*$/.test(n) ? n : undefined;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DEPLOY_RESULTS: ReadonlySet<string> = new Set([
  'UpdateSucceeded',
  'UpdateFailed',
  'DestroySucceeded',
  'DestroyFailed',
]);

/**
 * The pull-request comment an event of Stack `s` continues (docs/previews.md, "One comment follows
 * the change"):
 * - a preview Stack (controlled by a PullRequestPreview) with {@link BASE_STACK_ANNOTATION} naming
 *   a Stack (a DNS label; always in the preview Stack's own namespace): that base Stack, `merged`
 *   false;
 * - the base Stack of a PullRequestPreview (`isPreviewBase`), for its finished up/destroy results
 *   only: itself, `merged` true;
 * - else undefined.
 */
export function previewThreadOf(
  s: Stack,
  ev: NotificationEvent,
  isPreviewBase: ((namespace: string, name: string) => boolean) | undefined,
): PreviewThread | undefined {
  const owned = s.metadata.ownerReferences?.some(
    (o) => o.kind === 'PullRequestPreview' && o.controller === true,
  );
  if (owned === true) {
    const base = s.metadata.annotations?.[BASE_STACK_ANNOTATION];
    return base !== undefined && DNS_LABEL.test(base) ? { baseStack: base, merged: false } : undefined;
  }
  const ns = s.metadata.namespace ?? '';
  const name = s.metadata.name ?? '';
  if (!DEPLOY_RESULTS.has(ev.reason) || isPreviewBase?.(ns, name) !== true) return undefined;
  return { baseStack: name, merged: true };
}

const PREVIEW_RESULTS: ReadonlySet<string> = new Set(['PreviewSucceeded', 'PreviewFailed']);

/**
 * The gate of a preview result of Stack `s` (docs/previews.md, "A gate reviewers can require"):
 * for a Stack a PullRequestPreview controls, its {@link GATE_ANNOTATION} parsed (an unusable one
 * is `invalid`, which fails the gate); undefined for other Stacks, other events, or no annotation.
 */
export function previewGateOf(s: Stack, ev: NotificationEvent): EventGate | undefined {
  if (!PREVIEW_RESULTS.has(ev.reason)) return undefined;
  const owned = s.metadata.ownerReferences?.some(
    (o) => o.kind === 'PullRequestPreview' && o.controller === true,
  );
  const value = s.metadata.annotations?.[GATE_ANNOTATION];
  return owned === true && value !== undefined ? parseGate(value) : undefined;
}

/**
 * Case N18: the pull request's current head when `ev` of Stack `s` is about an older one — for a
 * Stack a PullRequestPreview controls whose `spec.commit` (the head the controller pinned) is
 * another commit than the event's; else undefined.
 */
export function supersededBy(s: Stack, ev: NotificationEvent): string | undefined {
  const owned = s.metadata.ownerReferences?.some(
    (o) => o.kind === 'PullRequestPreview' && o.controller === true,
  );
  const head = typeof s.spec?.commit === 'string' ? s.spec.commit.toLowerCase() : undefined;
  const commit = ev.metadata.commit?.toLowerCase();
  if (owned !== true || head === undefined || !/^[0-9a-f]{40}$/.test(head) || commit === undefined)
    return undefined;
  return commit === head ? undefined : head;
}

const FLUX_CACHE_MS = 5 * 60_000;

/**
 * Longest wait, ms, for the Stack version that names a new run (src/source/derive.ts
 * `stackPredatesRun`): the Stack watch is normally milliseconds behind the Update watch; past
 * this the run's events go without a commit, and a log line says why. A wait is measured from
 * when this process first saw the run ahead of its Stack (its own clock, not the Update's
 * creationTimestamp: no skew with the API server's).
 */
export const STACK_LAG_WAIT_MS = 30_000;

export class Router {
  readonly #o: RouterOptions;
  readonly queue: WorkQueue;
  /** `namespace/stack` → Update names. */
  readonly #updatesByStack = new Map<string, Set<string>>();
  readonly #flux = new Map<string, { url: string | undefined; at: number }>();
  readonly #ctx: DeriveContext;
  /** What decides the `lastUpdate` fallback before any is held (#holdUnseenFallback). */
  readonly #unheldCtx: DeriveContext;
  readonly #inInformer = (namespace: string, name: string): boolean =>
    this.#o.updates.get(namespace, name) !== undefined;
  /** PKO v1 error texts, seen in every stored Stack version (the condition showing them is brief). */
  readonly #v1Texts = new V1FailureTexts();
  readonly #commits = new RunCommits();
  /** PKO v2 Updates seen, remembered after they are gone (N20). */
  readonly #seenUpdates = new SeenUpdates();
  /**
   * Stack uid → the `lastUpdate` Update an API read found gone: its fallback event may be derived
   * (one name per Stack: the read is needed again only when `lastUpdate` names another).
   */
  readonly #confirmedGone = new Map<string, string>();
  /** Stack uid → the `lastUpdate` Update that exists but is not in the informer yet. */
  readonly #held = new Map<string, string>();
  /** `namespace/name` of an Update → when this process first saw it ahead of its Stack (ms; `stackPredatesRun`) and whether the wait's end was logged. */
  readonly #ahead = new Map<string, { since: number; warned: boolean }>();
  /** `namespace/name` of the Updates whose commit this process recorded (or tried to); forgotten with the Update. */
  readonly #recorded = new Set<string>();

  constructor(opts: RouterOptions) {
    this.#o = opts;
    this.queue = new WorkQueue({
      name: 'stack',
      concurrency: opts.concurrency ?? 4,
      reconcile: (k) => this.reconcile(k),
      logger: opts.logger.child({ queue: 'stack' }),
      ...(opts.registry ? { registry: opts.registry } : {}),
    });
    this.#ctx = {
      reportingController: opts.reportingController,
      fluxRepositoryURL: (ns, name) => this.#flux.get(`${ns}/${name}`)?.url,
      pullRequest: (ns, name) => pullRequestOf(opts.stacks.get(ns, name)),
      v1FailureText: (uid, commit) => this.#v1Texts.text(uid, commit),
      updateCommit: (uid, name) => this.#commits.commit(uid, name),
      updateSeen: (uid, name) => this.#seenUpdates.seen(uid, name),
      fallbackHeld: (uid, name) => this.#held.get(uid) === name,
    };
    this.#unheldCtx = {
      reportingController: opts.reportingController,
      updateSeen: (uid, name) => this.#seenUpdates.seen(uid, name),
    };
    const stackKey = (s: Stack): string => `${s.metadata.namespace ?? ''}/${s.metadata.name ?? ''}`;
    opts.stacks.on('add', (s) => {
      this.#v1Texts.observe(s);
      this.#commits.observe(s);
      this.queue.add(stackKey(s));
    });
    opts.stacks.on('update', (s) => {
      this.#v1Texts.observe(s);
      this.#commits.observe(s);
      this.queue.add(stackKey(s));
    });
    opts.stacks.on('delete', (s) => {
      if (s.metadata.uid !== undefined) {
        this.#v1Texts.forget(s.metadata.uid);
        this.#commits.forget(s.metadata.uid);
        this.#seenUpdates.forget(s.metadata.uid);
        this.#confirmedGone.delete(s.metadata.uid);
        this.#held.delete(s.metadata.uid);
      }
      this.queue.add(stackKey(s));
    });
    opts.stacks.on('relist', () => {
      this.resyncAll();
    });
    const onUpdate = (u: Update, deleted: boolean): void => {
      const stack = stackNameOfUpdate(u);
      const name = u.metadata.name;
      if (stack === undefined || name === undefined) return;
      const key = `${u.metadata.namespace ?? ''}/${stack}`;
      let set = this.#updatesByStack.get(key);
      if (!deleted) this.#seenUpdates.observe(u);
      if (deleted) {
        this.#recorded.delete(`${u.metadata.namespace ?? ''}/${name}`);
        this.#ahead.delete(`${u.metadata.namespace ?? ''}/${name}`);
        set?.delete(name);
        if (set?.size === 0) this.#updatesByStack.delete(key);
      } else {
        if (!set) {
          set = new Set();
          this.#updatesByStack.set(key, set);
        }
        set.add(name);
      }
      this.queue.add(key);
    };
    opts.updates.on('add', (u) => {
      onUpdate(u, false);
    });
    opts.updates.on('update', (u) => {
      onUpdate(u, false);
    });
    opts.updates.on('delete', (u) => {
      onUpdate(u, true);
    });
    opts.updates.on('relist', () => {
      this.resyncAll();
    });
  }

  /** Queues every known Stack (after an Alert change, a relist, or becoming leader). */
  resyncAll(): void {
    for (const s of this.#o.stacks.list())
      this.queue.add(`${s.metadata.namespace ?? ''}/${s.metadata.name ?? ''}`);
  }

  start(): void {
    this.queue.start();
    this.resyncAll();
  }

  async stop(deadlineMs: number): Promise<void> {
    await this.queue.shutdown(deadlineMs);
  }

  async #resolveFlux(stack: Stack): Promise<void> {
    const ref = stack.spec?.fluxSource?.sourceRef;
    if (ref?.name === undefined || (ref.kind !== undefined && ref.kind !== 'GitRepository')) return;
    const ns = stack.metadata.namespace ?? '';
    const key = `${ns}/${ref.name}`;
    const cached = this.#flux.get(key);
    if (cached && Date.now() - cached.at < FLUX_CACHE_MS) return;
    const [group, version] = (ref.apiVersion ?? 'source.toolkit.fluxcd.io/v1').split('/');
    try {
      const repo = await kubeRequest<{ spec?: { url?: string } }>(this.#o.kubeConfig, {
        method: 'GET',
        path: objectPath({
          group: group ?? 'source.toolkit.fluxcd.io',
          version: version ?? 'v1',
          plural: 'gitrepositories',
          namespace: ns,
          name: ref.name,
        }),
      });
      this.#flux.set(key, { url: repo.spec?.url, at: Date.now() });
    } catch (err) {
      this.#o.logger.warn(
        { stack: `${ns}/${stack.metadata.name ?? ''}`, gitRepository: key, err: errorMessage(err) },
        'cannot read the Flux GitRepository of a Stack: events carry no repository',
      );
      this.#flux.set(key, { url: undefined, at: Date.now() });
    }
  }

  /**
   * Events the Stack `namespace/name` currently implies (its Updates' and its own status; see
   * eventsForStack), each with the resourceVersion of the object it was derived from — the Update
   * it names when that Update is known, else the Stack — the order delivery follows
   * (src/delivery/order.ts; the dispatcher keeps the smallest seen per run).
   */
  #updatesOf(stack: Stack): Update[] {
    const ns = stack.metadata.namespace ?? '';
    const updates: Update[] = [];
    for (const name of this.#updatesByStack.get(`${ns}/${stack.metadata.name ?? ''}`) ?? []) {
      const u = this.#o.updates.get(ns, name);
      if (u) updates.push(u);
    }
    return updates;
  }

  /**
   * Records the commits of the Stack's finished Updates that PKO stops naming (see RouterOptions),
   * only for a Stack some Alert selects by its `eventSources` (one of `events`) — a Ready one of
   * `alerts`, or one served here that is not Ready yet (a missing Provider or template ConfigMap,
   * `RouterOptions.alerts.selecting`), whose runs after its creation are delivered once it is: a
   * shard (--watch-label-selector) writes nothing to the Updates of Stacks it does not serve (with
   * N shards, each would patch every Update), nor does a controller no Alert needs there. An Alert
   * created later does not replay earlier runs.
   */
  #recordRunCommits(
    stack: Stack,
    events: readonly { event: NotificationEvent }[],
    alerts: readonly RoutedAlert[],
  ): void {
    const record = this.#o.recordRunCommit;
    // A drift check Stack's runs are the controller's own and reported as drift (src/drift).
    if (!record || isDriftCheck(stack)) return;
    // An Alert not Ready yet (its Provider or template ConfigMap missing) is given the runs after
    // its creation once Ready: their commits are recorded for it now, not held in memory only.
    const selects = (c: CompiledAlert): boolean =>
      events.some((e) => whySkipped(c, e.event, SOURCE_CHECKS) === undefined);
    let selected = alerts.some((a) => selects(a.compiled));
    for (const c of selected ? [] : this.#o.alerts.selecting()) {
      if (selects(c)) {
        selected = true;
        break;
      }
    }
    if (!selected) return;
    const ns = stack.metadata.namespace ?? '';
    for (const { name, revision, resourceVersion } of revisionsToRecord(
      stack,
      this.#updatesOf(stack),
      this.#ctx,
    )) {
      const key = `${ns}/${name}`;
      if (this.#recorded.has(key)) continue;
      this.#recorded.add(key);
      record(ns, name, revision, resourceVersion).catch((err: unknown) => {
        // PKO wrote the Update since it was read: the next reconcile sees the newer version.
        if (errorStatusCode(err) === 409) {
          this.#recorded.delete(key);
          return;
        }
        this.#o.logger.warn(
          { update: key, err: errorMessage(err) },
          'cannot record the commit of a finished Update: a replica that did not see its run current may report it without a commit',
        );
      });
    }
  }

  /**
   * The Stack's newest Update when the Stack as cached predates it (`stackPredatesRun`: PKO named
   * the run's commit in a Stack version this process has not received yet), with the ms left to
   * wait for that version; undefined when there is none or the wait ({@link STACK_LAG_WAIT_MS})
   * is over. Only the newest: PKO starts one run at a time, and an older Update the Stack no
   * longer names has moved past, not ahead.
   */
  #aheadOfStack(stack: Stack, updates: readonly Update[]): { name: string; leftMs: number } | undefined {
    let newest: Update | undefined;
    for (const u of updates) if (newest === undefined || compareUpdates(newest, u) < 0) newest = u;
    if (newest === undefined) return undefined;
    const name = newest.metadata.name ?? '';
    const key = `${newest.metadata.namespace ?? ''}/${name}`;
    if (!stackPredatesRun(stack, newest)) {
      this.#ahead.delete(key);
      return undefined;
    }
    const now = (this.#o.now ?? Date.now)();
    let seen = this.#ahead.get(key);
    if (seen === undefined) {
      seen = { since: now, warned: false };
      this.#ahead.set(key, seen);
    }
    const leftMs = seen.since + STACK_LAG_WAIT_MS - now;
    if (leftMs > 0) return { name, leftMs };
    if (!seen.warned) {
      seen.warned = true;
      this.#o.logger.warn(
        { update: key, waitedMs: STACK_LAG_WAIT_MS },
        'the Stack has not named this run in its status although PKO names a run there before creating its Update; its events go without a commit',
      );
    }
    return undefined;
  }

  eventsFor(stack: Stack): { event: NotificationEvent; observed?: number }[] {
    return this.#derive(stack).events;
  }

  /** {@link eventsFor}, and the ms until a run left out now (its Stack behind it) is looked at again. */
  #derive(stack: Stack): { events: { event: NotificationEvent; observed?: number }[]; recheckMs?: number } {
    // A drift check Stack's runs are the controller's own: reported as drift events of the
    // Stack it checks (src/drift), never as events of their own.
    if (isDriftCheck(stack)) return { events: [] };
    const all = this.#updatesOf(stack);
    const ahead = this.#aheadOfStack(stack, all);
    const updates = ahead === undefined ? all : all.filter((u) => u.metadata.name !== ahead.name);
    const stackRv = parseResourceVersion(stack.metadata.resourceVersion);
    const updateRv = new Map(
      updates.map((u) => [u.metadata.name ?? '', parseResourceVersion(updateObservedAt(u))]),
    );
    const after = this.#o.stuckAfterMs;
    const ctx: DeriveContext =
      after === undefined
        ? this.#ctx
        : { ...this.#ctx, stuck: { nowMs: (this.#o.now ?? Date.now)(), afterMs: after } };
    const own = eventsForStack(stack, updates, ctx).map((derived) => {
      const thread = previewThreadOf(stack, derived, this.#o.isPreviewBase);
      const gate = previewGateOf(stack, derived);
      const newer = supersededBy(stack, derived);
      const event = {
        ...derived,
        ...(newer !== undefined ? { supersededBy: newer } : {}),
        ...(thread !== undefined ? { previewThread: thread } : {}),
        ...(gate !== undefined ? { gate } : {}),
      };
      const name = event.metadata.updateName;
      const observed = (name !== undefined ? updateRv.get(name) : undefined) ?? stackRv;
      return observed !== undefined ? { event, observed } : { event };
    });
    const events = [...own, ...(this.#o.moreEvents?.(stack) ?? [])];
    return ahead === undefined ? { events } : { events, recheckMs: ahead.leftMs };
  }

  async reconcile(key: string): Promise<{ requeueAfterMs: number } | undefined> {
    const i = key.indexOf('/');
    const stack = this.#o.stacks.get(key.slice(0, i), key.slice(i + 1));
    if (!stack?.metadata.uid) return undefined;
    const held = await this.#holdUnseenFallback(stack);
    const recheckMs = await this.#route(stack);
    if (held) return { requeueAfterMs: HELD_FALLBACK_RETRY_MS };
    // A run seen ahead of its Stack: the Stack's next version requeues it; this bounds the wait.
    if (recheckMs !== undefined) return { requeueAfterMs: recheckMs };
    // A Stack waiting with no run is looked at again when it would count as stuck.
    const after = this.#o.stuckAfterMs;
    if (after === undefined) return undefined;
    const ns = stack.metadata.namespace ?? '';
    const since = stuckSince(stack, (n, name) => this.#o.updates.get(n, name) !== undefined && n === ns);
    if (since === undefined) return undefined;
    const due = since + after - (this.#o.now ?? Date.now)();
    return due > 0 ? { requeueAfterMs: due + 1_000 } : undefined;
  }

  /**
   * Before a Stack's `lastUpdate` yields the fallback event of an Update never seen here, reads
   * that Update once from the API server. Gone: the fallback is derived (and the answer kept for
   * that name). Still there: the fallback is held and the Stack looked at again soon — the
   * Update informer has not delivered it yet, and only the Update tells a retry that repeated its
   * result (no event) from a new run. Returns whether the fallback is held.
   */
  async #holdUnseenFallback(stack: Stack): Promise<boolean> {
    const uid = stack.metadata.uid ?? '';
    const ns = stack.metadata.namespace ?? '';
    // Only a Stack with Updates in the informer can be ahead of it in a way that matters: the
    // fallback would be wrong for a retry or resync repeating its run's result, whose run is an
    // Update the informer delivered. A Stack none of whose Updates is known (all gone after their
    // TTL, or none ever made) is not read again.
    const known = this.#updatesByStack.get(`${ns}/${stack.metadata.name ?? ''}`);
    const name =
      known === undefined || known.size === 0 || isDriftCheck(stack)
        ? undefined
        : lastUpdateFallback(stack, this.#unheldCtx, { updateExists: this.#inInformer });
    if (name === undefined) {
      this.#held.delete(uid);
      return false;
    }
    if (this.#confirmedGone.get(uid) === name) {
      this.#held.delete(uid);
      return false;
    }
    const there = await (this.#o.updateExistsNow ?? ((n, u) => this.#updateExistsNow(n, u)))(ns, name);
    if (there) {
      this.#held.set(uid, name);
      return true;
    }
    this.#held.delete(uid);
    this.#confirmedGone.set(uid, name);
    return false;
  }

  async #updateExistsNow(namespace: string, name: string): Promise<boolean> {
    try {
      await kubeRequest(this.#o.kubeConfig, {
        method: 'GET',
        path: objectPath({
          group: UPDATE_GROUP,
          version: UPDATE_VERSION,
          plural: UPDATE_PLURAL,
          namespace,
          name,
        }),
      });
      return true;
    } catch (err) {
      if (errorStatusCode(err) === 404) return false;
      throw err;
    }
  }

  /** Routes the Stack's events; returns when to look again at a run left out (see #derive). */
  async #route(stack: Stack): Promise<number | undefined> {
    if (!stack.metadata.uid) return undefined;
    if (stack.spec?.fluxSource) await this.#resolveFlux(stack);
    const derived = this.#derive(stack);
    let events = derived.events;
    const alerts = [...this.#o.alerts.all()];
    this.#recordRunCommits(stack, events, alerts);
    if (events.length === 0) return derived.recheckMs;
    const enrich = this.#o.enrich;
    if (enrich) {
      // Only events some Ready Alert may take are enriched: a Stack no Alert covers gets no Secret,
      // log or Pulumi Cloud read (the message-based checks run on the enriched event below). An
      // Alert not Ready — one refused another namespace (CrossNamespaceForbidden or
      // CrossNamespaceUnchecked, src/reconcile/alert.ts) included — is not in `alerts`.
      events = await Promise.all(
        events.map(async (e) =>
          alerts.some((a) => whySkipped(a.compiled, e.event, PRE_ENRICH_CHECKS) === undefined)
            ? { ...e, event: await enrich(stack, e.event) }
            : e,
        ),
      );
    }
    // Read again after the awaits above: an Alert changed or deleted meanwhile is not offered
    // events under what it was (a deleted Alert's lane would come back, with nowhere to send).
    for (const alert of this.#o.alerts.all()) {
      const matched: OfferedEvent[] = [];
      for (const { event: ev, observed } of events) {
        if (whySkipped(alert.compiled, ev, ROUTING_CHECKS) !== undefined) continue;
        // A suspended Alert's events are routed all the same, to be recorded as skipped, so
        // resuming it does not replay what happened meanwhile (Flux drops them too).
        const suspended = whySkipped(alert.compiled, ev, [SUSPENDED]);
        const event = eventForAlert(alert.compiled, ev);
        matched.push({
          event,
          ...(suspended ? { skip: { reason: suspended.check, message: suspended.message } } : {}),
          ...(observed !== undefined ? { observed } : {}),
        });
      }
      if (matched.length > 0) this.#o.delivery.offer(alert, stack.metadata.uid, matched);
    }
    return derived.recheckMs;
  }
}
