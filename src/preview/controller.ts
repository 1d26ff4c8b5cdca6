/**
 * The PullRequestPreview reconciler (docs/previews.md). One reconcile of `namespace/name`:
 * 1. being deleted → delete every preview Stack it owns (listed from the API server, not the
 *    cache), resolve their pending statuses, say what was removed in an Event, then remove the
 *    finalizer (case P04: no garbage collector needed);
 * 2. add the finalizer; refuse overrides outside the allow-list, and Secret envRefs unless the
 *    admission policy checked them (./stack.ts `refusedOverride`, ./admission.ts; case B10):
 *    Ready=False `OverrideNotAllowed`, nothing created, patched or deleted; resolve the base
 *    Stack, the forge Provider (Ready ones only), the branch and the repository (the base
 *    Stack's `spec.projectRepo`);
 * 3. list the open pull requests of the branch (conditional request where the forge has one),
 *    resolve authors' associations where the trust rules need them — those with a preview Stack
 *    first, then the lowest numbers, only until the preview slots are decided — and plan
 *    (./plan.ts);
 * 4. create / patch (new head commit, changed base spec) / delete preview Stacks — only Stacks
 *    this PullRequestPreview controls (owner reference, uid preconditions): a Stack of the same
 *    name that is not ours is left alone and the pull request's entry says the name is taken
 *    (state `Blocked`, Warning Event `PreviewNameTaken`); then resolve
 *    the associations of the other pull requests (they only decide notices and status);
 * 5. queue, off the sync path (./notices.ts), the resolution of a removed preview's pending
 *    status (P02) and the notices (one edited comment per pull request) that say why a pull
 *    request has no preview, waits, or lost its preview (F30, P01, P03);
 * 6. write status (`previews`, `activePreviews`, `lastSyncTime`, `Ready`) and requeue after
 *    `spec.interval`.
 * Bounds (case B12): a sync stops asking the forge after `syncDeadlineMs` (15 s) and requeues
 * itself in 1 s with what it did kept (associations looked up are used for 60 s); every forge request of preview work is bounded by
 * min(Provider `spec.timeout`, `forgeTimeoutCeilingMs` = 10 s). Fencing: every write (Stacks,
 * PullRequestPreview finalizer and status, Events, forge notices and statuses) is made only while
 * `mayWrite()` (the elector's `holdsLease()`).
 * Results of the preview runs reach the pull request through the Alert pipeline: preview Stacks
 * carry the pull request label, so their events name it (`metadata.pullRequest`).
 */
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { NotificationEvent } from '../api/event.ts';
import type { Condition } from '../api/meta.ts';
import { STACK_GROUP, STACK_VERSION, stackRef, type Stack } from '../api/pko.ts';
import { boundedDuration, type BoundedDuration } from '../api/duration.ts';
import {
  API_VERSION,
  GROUP,
  isGitProviderType,
  VERSION,
  type AuthorAssociation,
  type PreviewEntry,
  type PullRequestPreview,
} from '../api/v1alpha1.ts';
import type { ResolvedProvider } from '../credential/provider.ts';
import { FORGES } from '../forge/registry.ts';
import type { OpenPullRequest, PreviewForge } from '../forge/types.ts';
import { errorMessage, errorStatusCode, kubeRequest, objectPath } from '../kube/client.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { Informer } from '../kube/informer.ts';
import { kubeTime, patchStatus, readyCondition, setCondition, type ReadyState } from '../kube/status.ts';
import type { ReconcileResult } from '../kube/workqueue.ts';
import type { Logger } from '../log.ts';
import type { EgressPolicy } from '../notifier/egress.ts';
import type { Serialize } from '../notifier/types.ts';
import { ProviderHttp } from '../notifier/http.ts';
import { loadedTemplateEngine, templateEngine, type TemplateEngine } from '../template/engine.ts';
import { boundText } from '../text.ts';
import { AdmissionPolicyCheck } from './admission.ts';
import { PREVIEW_FINALIZER, PREVIEW_LABEL, PULL_REQUEST_LABEL, previewStackName } from './naming.ts';
import { NoticeQueue, stoppedGone } from './notices.ts';
import {
  planSync,
  untrustedReason,
  type ExistingPreview,
  type KnownPull,
  type Plan,
  type PullRequestDecision,
} from './plan.ts';
import {
  controllerOf,
  mergePatchBetween,
  controllerAnnotationPatch,
  ownedBy,
  previewSpec,
  previewStack,
  refusedOverride,
  secretEnvRefNames,
} from './stack.ts';

/** Shortest polling interval accepted (a smaller `spec.interval` is raised to it). */
export const MIN_INTERVAL_MS = 10_000;
/** Shortest `spec.startTimeout` (a shorter one is raised to it). */
export const MIN_START_TIMEOUT_MS = 60_000;
/** Longest `spec.interval` and `spec.startTimeout` (the CRD's ceiling; a longer stored one is lowered to it). */
export const MAX_DURATION = '24h';
const MAX_DURATION_MS = 24 * 3_600_000;
/** Re-check of a PullRequestPreview that cannot sync (missing Stack or Provider, forge error). */
export const NOT_READY_RETRY_MS = 15_000;
/** How long one sync may keep asking the forge; the rest is deferred to a sync {@link DEFERRED_RETRY_MS} later. */
export const SYNC_DEADLINE_MS = 15_000;
/** Requeue of a sync that stopped at its deadline. */
export const DEFERRED_RETRY_MS = 1_000;
/**
 * How long an author's association looked up by one sync is used by the next ones (so syncs
 * stopped at their deadline make progress); a change of an author's access is seen after at most
 * this long.
 */
export const ASSOCIATION_MEMO_MS = 60_000;
/** Controller-wide ceiling of one forge request of preview work (a Provider's `spec.timeout` cannot raise it), ms. */
export const FORGE_TIMEOUT_CEILING_MS = 10_000;
/** Requeue of a sync that found this replica not holding the Lease. */
export const NOT_HOLDING_RETRY_MS = 2_000;

/** A write was refused: this replica does not hold the leader Lease now (`mayWrite()` false). */
export class LeaseNotHeldError extends Error {
  constructor(what: string) {
    super(`not holding the leader Lease: ${what} not done`);
    this.name = 'LeaseNotHeldError';
  }
}
/** Marker of the notice comment (docs/previews.md). */
export const noticeMarker = (namespace: string, name: string): string =>
  `<!-- pko-notification-controller:preview-notice:${namespace}/${name} -->`;

export interface PreviewReconcilerOptions {
  kubeConfig: KubeConfig;
  previews: Pick<Informer<PullRequestPreview>, 'get'>;
  stacks: Pick<Informer<Stack>, 'get' | 'list'>;
  /** Usable Providers by `namespace/name` (the ProviderIndex). */
  providers: { get(key: string): ResolvedProvider | undefined };
  recorder: Pick<EventRecorder, 'event'>;
  logger: Logger;
  /** Goes into commit status contexts, as for deliveries. */
  clusterName: string;
  /**
   * Where forge connections may go (the controller's `--egress-*` policy, src/notifier/egress.ts);
   * the same policy as deliveries.
   */
  egress?: EgressPolicy;
  /** Builds the forge access of a Provider; default: the forge module's `previews` with a new ProviderHttp. */
  forgeFor?: (p: ResolvedProvider) => PreviewForge | undefined;
  /**
   * The deliveries' lock of one forge target (`Sender.serializeTarget`): pending-status
   * resolutions take it, so they never interleave with a delivery to the same status (N18).
   */
  serializeTarget?: Serialize;
  now?: () => Date;
  /** Re-check interval of a PullRequestPreview that cannot sync, ms (default {@link NOT_READY_RETRY_MS}). */
  notReadyRetryMs?: number;
  /**
   * Whether this replica may write now: checked before every write (the elector's `holdsLease()`,
   * src/kube/leader.ts). Default: always.
   */
  mayWrite?: () => boolean;
  /** Forge time of one sync, ms (default {@link SYNC_DEADLINE_MS}). */
  syncDeadlineMs?: number;
  /** Ceiling of one forge request of preview work, ms (default {@link FORGE_TIMEOUT_CEILING_MS}). */
  forgeTimeoutCeilingMs?: number;
  /** Whether Secret envRefs are guarded by the admission policy; default an AdmissionPolicyCheck. */
  admission?: Pick<AdmissionPolicyCheck, 'secretEnvRefs'>;
}

/** `p` with its request timeout lowered to `ceilingMs` (the Provider's own when lower). */
export function withTimeoutCeiling(p: ResolvedProvider, ceilingMs: number): ResolvedProvider {
  return p.timeoutMs > ceilingMs ? { ...p, timeoutMs: ceilingMs } : p;
}

function defaultForge(
  p: ResolvedProvider,
  egress: EgressPolicy | undefined,
  serialize: Serialize | undefined,
): PreviewForge | undefined {
  if (!isGitProviderType(p.type)) return undefined;
  const factory = FORGES[p.type].previews;
  return factory === undefined
    ? undefined
    : factory(p, { http: new ProviderHttp(p, egress !== undefined ? { egress } : {}), serialize });
}

interface NotReady {
  reason: string;
  message: string;
}

interface SyncContext {
  base: Stack;
  provider: ResolvedProvider;
  forge: PreviewForge;
  branch: string;
  repoURL: string;
}

/** The forge-time budget of one sync. */
interface Deadline {
  signal: AbortSignal;
  expired(): boolean;
}

export class PreviewReconciler {
  readonly #o: PreviewReconcilerOptions;
  readonly #now: () => Date;
  /** Forge access per Provider key, rebuilt when the resolved Provider changes. */
  readonly #forges = new Map<string, { p: ResolvedProvider; forge: PreviewForge }>();
  /** Commit status templates compiled per resolved Provider (dropped with it). */
  readonly #compiled = new WeakMap<ResolvedProvider, ReturnType<TemplateEngine['compileTemplates']>>();
  /** Syncs running per forge client (a replaced client is closed only when none uses it). */
  readonly #inUse = new Map<PreviewForge, number>();
  /** Replaced clients (their Provider changed or is gone), closed once no sync or job uses them. */
  readonly #retired = new Set<PreviewForge>();
  /** Last listing per PullRequestPreview key with its ETag (304 → reuse). */
  readonly #listings = new Map<string, { etag: string; pulls: OpenPullRequest[] }>();
  /**
   * Associations looked up, per PullRequestPreview key and repository URL (`<key> <repoURL>`) and
   * author (login, or id where the forge has one), with when: used for {@link ASSOCIATION_MEMO_MS}, so the sync after one stopped at
   * its deadline goes on from there.
   */
  readonly #associations = new Map<string, Map<string, { association: AuthorAssociation; at: number }>>();
  /** Pull requests whose preview was stopped (untrusted or waiting now), per key: number → Stack. */
  readonly #stopped = new Map<string, Map<number, string>>();
  /** Notices and pending-status resolutions, off the sync path. */
  readonly notices: NoticeQueue;
  readonly #admission: Pick<AdmissionPolicyCheck, 'secretEnvRefs'>;
  /** Pull requests per PullRequestPreview key whose name-taken Warning was recorded (once each). */
  readonly #nameTaken = new Map<string, Set<number>>();
  /**
   * Per PullRequestPreview, per `<stack>@<commit>` of a preview Stack whose commit PKO has not run
   * yet: when this controller first saw it waiting (epoch ms). Rebuilt on every sync.
   */
  readonly #waiting = new Map<string, Map<string, number>>();

  constructor(opts: PreviewReconcilerOptions) {
    this.#o = opts;
    this.#now = opts.now ?? (() => new Date());
    this.#admission = opts.admission ?? new AdmissionPolicyCheck({ kubeConfig: opts.kubeConfig });
    this.notices = new NoticeQueue({
      logger: opts.logger,
      onRelease: () => {
        this.#closeRetired();
      },
      timeoutMs: opts.forgeTimeoutCeilingMs ?? FORGE_TIMEOUT_CEILING_MS,
      ...(opts.mayWrite !== undefined ? { mayWrite: opts.mayWrite } : {}),
    });
  }

  /** Stops the notice queue (waiting up to `deadlineMs` for running jobs) and closes forge clients. */
  async close(deadlineMs = 0): Promise<void> {
    await this.notices.close(deadlineMs);
    await Promise.all([
      ...[...this.#forges.values()].map((f) => f.forge.close()),
      ...[...this.#retired].map((f) => f.close()),
    ]);
    this.#forges.clear();
    this.#retired.clear();
  }

  #mayWrite(): boolean {
    return this.#o.mayWrite?.() ?? true;
  }

  /** Records an Event (a write: skipped when not holding the Lease). */
  #event(prp: PullRequestPreview, type: 'Normal' | 'Warning', reason: string, message: string): void {
    if (!this.#mayWrite()) return;
    void this.#o.recorder.event(objectOf(prp), type, reason, message);
  }

  /**
   * Takes the client of Provider `key` out of use for new work (the Provider changed or is
   * gone); it is closed once no running sync and no queued or running notice job holds it —
   * closing it at once would fail those with CLOSED (and a lost status resolution is never
   * queued again).
   */
  #retire(key: string): void {
    const have = this.#forges.get(key);
    if (have === undefined) return;
    this.#forges.delete(key);
    this.#retired.add(have.forge);
    this.#closeRetired();
  }

  #closeRetired(): void {
    for (const f of this.#retired) {
      if ((this.#inUse.get(f) ?? 0) > 0 || this.notices.uses(f)) continue;
      this.#retired.delete(f);
      void f.close();
    }
  }

  #forge(key: string, p: ResolvedProvider): PreviewForge | undefined {
    const have = this.#forges.get(key);
    if (have?.p === p) return have.forge;
    this.#retire(key);
    // Preview work never waits longer per request than the controller-wide ceiling (B12).
    const capped = withTimeoutCeiling(p, this.#o.forgeTimeoutCeilingMs ?? FORGE_TIMEOUT_CEILING_MS);
    const forge =
      this.#o.forgeFor !== undefined
        ? this.#o.forgeFor(capped)
        : defaultForge(capped, this.#o.egress, this.#o.serializeTarget);
    if (forge) this.#forges.set(key, { p, forge });
    return forge;
  }

  async reconcile(key: string): Promise<ReconcileResult | undefined> {
    const i = key.indexOf('/');
    const namespace = key.slice(0, i);
    const name = key.slice(i + 1);
    const prp = this.#o.previews.get(namespace, name);
    if (prp === undefined) {
      this.#forget(key);
      return undefined;
    }
    // The commit status context of a resolved preview is rendered (#statusContext).
    await templateEngine();
    try {
      return await this.#reconcile(key, namespace, prp);
    } catch (err) {
      if (!(err instanceof LeaseNotHeldError)) throw err;
      this.#o.logger.info(
        { previewKey: key, err: err.message },
        'preview sync stopped: not holding the Lease',
      );
      return { requeueAfterMs: NOT_HOLDING_RETRY_MS };
    }
  }

  #forget(key: string): void {
    this.#listings.delete(key);
    for (const k of this.#associations.keys()) if (k.startsWith(`${key} `)) this.#associations.delete(k);
    this.#stopped.delete(key);
    this.#nameTaken.delete(key);
    this.#waiting.delete(key);
    this.notices.forget(key);
  }

  async #reconcile(
    key: string,
    namespace: string,
    prp: PullRequestPreview,
  ): Promise<ReconcileResult | undefined> {
    if (!this.#mayWrite()) return { requeueAfterMs: NOT_HOLDING_RETRY_MS };
    if (prp.metadata.deletionTimestamp !== undefined) {
      await this.#finalize(prp);
      return undefined;
    }
    if (!(prp.metadata.finalizers ?? []).includes(PREVIEW_FINALIZER)) {
      await this.#patchFinalizers(prp, [...(prp.metadata.finalizers ?? []), PREVIEW_FINALIZER]);
    }
    const intervalAt = previewInterval(prp);
    const interval = intervalAt.ms;
    if (prp.spec.suspend === true) {
      await this.#writeStatus(prp, { ready: true, reason: 'Suspended', message: 'previews are suspended' });
      return undefined;
    }
    const retry = this.#o.notReadyRetryMs ?? NOT_READY_RETRY_MS;
    // B10: objects stored before the CRD and the admission policy, or on a cluster without the
    // policy, are checked here too. Nothing is created, patched or deleted while refused; preview
    // Stacks made earlier stay as they are.
    const refused = await this.#refusedOverride(prp);
    if (refused !== undefined) {
      await this.#writeStatus(prp, {
        ready: false,
        reason: 'OverrideNotAllowed',
        message: `${refused}; no preview Stack is created or changed until this is fixed`,
      });
      return { requeueAfterMs: Math.min(retry, interval) };
    }
    const ctx = this.#context(prp, namespace);
    if ('reason' in ctx) {
      await this.#writeStatus(prp, { ready: false, ...ctx });
      return { requeueAfterMs: Math.min(retry, interval) };
    }
    this.#inUse.set(ctx.forge, (this.#inUse.get(ctx.forge) ?? 0) + 1);
    try {
      const signal = AbortSignal.timeout(this.#o.syncDeadlineMs ?? SYNC_DEADLINE_MS);
      const {
        entries: previews,
        deferred,
        nextCheckMs,
      } = await this.#sync(key, prp, ctx, {
        signal,
        expired: () => signal.aborted,
      });
      const active = previews.filter((p) => p.state === 'Active').length;
      const blocked = previews.filter((p) => p.state === 'Blocked');
      await this.#writeStatus(
        prp,
        {
          ready: true,
          reason: 'Synced',
          message:
            `${String(active)} preview(s) of pull requests into ${ctx.branch}` +
            blocked.map((p) => `; pull request #${String(p.number)} has none: ${p.reason ?? ''}`).join('') +
            (deferred > 0
              ? `; ${String(deferred)} pull request(s) not checked yet (sync deadline reached), continuing`
              : '') +
            [intervalAt.note, startTimeoutOf(prp).note]
              .map((n) => (n === undefined ? '' : `; ${n}`))
              .join(''),
        },
        previews,
      );
      // A preview Stack still waiting for its run is looked at again when its startTimeout ends.
      const next = Math.min(interval, Math.max(1_000, nextCheckMs));
      return { requeueAfterMs: deferred > 0 ? Math.min(DEFERRED_RETRY_MS, next) : next };
    } catch (err) {
      if (err instanceof LeaseNotHeldError) throw err;
      const message = `syncing pull requests failed: ${errorMessage(err)}`;
      this.#o.logger.warn({ previewKey: key, err: errorMessage(err) }, 'preview sync failed');
      await this.#writeStatus(prp, { ready: false, reason: 'SyncFailed', message });
      return { requeueAfterMs: Math.min(retry, interval) };
    } finally {
      const n = (this.#inUse.get(ctx.forge) ?? 1) - 1;
      if (n > 0) this.#inUse.set(ctx.forge, n);
      else this.#inUse.delete(ctx.forge);
      this.#closeRetired();
    }
  }

  /** Why the overrides of `prp` may not be applied (./stack.ts `refusedOverride`), or undefined. */
  async #refusedOverride(prp: PullRequestPreview): Promise<string | undefined> {
    const overrides = prp.spec.stackOverrides;
    const secrets =
      secretEnvRefNames(overrides).length > 0
        ? await this.#admission.secretEnvRefs(prp.metadata.creationTimestamp)
        : ({ allowed: true } as const);
    return refusedOverride(overrides, secrets);
  }

  #context(prp: PullRequestPreview, namespace: string): NotReady | SyncContext {
    const base = this.#o.stacks.get(namespace, prp.spec.stackRef.name);
    if (base === undefined)
      return { reason: 'StackNotFound', message: `Stack ${prp.spec.stackRef.name} not found` };
    const providerKey = `${namespace}/${prp.spec.providerRef.name}`;
    const provider = this.#o.providers.get(providerKey);
    if (provider === undefined) {
      this.#retire(providerKey); // the Provider is gone or not usable: its client is not needed
      return {
        reason: 'ProviderNotReady',
        message: `Provider ${prp.spec.providerRef.name} does not exist or is not Ready`,
      };
    }
    const forge = this.#forge(providerKey, provider);
    if (forge === undefined) {
      return {
        reason: 'ProviderTypeUnsupported',
        message: `Provider ${prp.spec.providerRef.name} has type ${provider.type}; previews need github, gitlab or gitea`,
      };
    }
    const branch = prp.spec.branch ?? base.spec?.branch?.replace(/^refs\/heads\//, '');
    if (branch === undefined || branch === '') {
      return {
        reason: 'BranchUnknown',
        message: `set spec.branch: Stack ${prp.spec.stackRef.name} has no spec.branch`,
      };
    }
    const repoURL = base.spec?.projectRepo;
    if (repoURL === undefined || repoURL === '') {
      return {
        reason: 'NoRepository',
        message: `Stack ${prp.spec.stackRef.name} has no spec.projectRepo (previews need a git source)`,
      };
    }
    return { base, provider, forge, branch, repoURL };
  }

  async #sync(
    key: string,
    prp: PullRequestPreview,
    ctx: SyncContext,
    deadline: Deadline,
  ): Promise<{ entries: PreviewEntry[]; deferred: number; nextCheckMs: number }> {
    const { forge, repoURL } = ctx;
    const namespace = prp.metadata.namespace ?? '';
    const prev = this.#listings.get(key);
    const listed = await forge.listOpen(repoURL, ctx.branch, prev?.etag, deadline.signal);
    let open: OpenPullRequest[];
    if (!listed.changed && prev !== undefined) open = prev.pulls;
    else if (listed.changed) {
      open = listed.pulls;
      if (listed.etag !== undefined) this.#listings.set(key, { etag: listed.etag, pulls: open });
      else this.#listings.delete(key);
    } else {
      this.#listings.delete(key);
      return this.#sync(key, prp, ctx, deadline);
    }

    const trust = prp.spec.trust;
    const maxPreviews = prp.spec.maxPreviews ?? 5;
    const uid = prp.metadata.uid ?? '';
    const stacks = this.#o.stacks.list(namespace).filter((s) => ownedBy(s, uid));
    const existing: ExistingPreview[] = [];
    for (const s of stacks) {
      const n = Number(s.metadata.labels?.[PULL_REQUEST_LABEL]);
      if (Number.isSafeInteger(n) && s.metadata.deletionTimestamp === undefined)
        existing.push({
          number: n,
          stackName: s.metadata.name ?? '',
          headSHA: typeof s.spec?.commit === 'string' ? s.spec.commit : '',
        });
    }

    // Associations in the order previews are granted (./plan.ts): pull requests with a preview
    // Stack first, then the lowest numbers. A pull request not resolved yet is left out of the
    // plan — and so is its preview Stack (never removed for want of a lookup).
    const has = new Set(existing.map((e) => e.number));
    const ranked = [...open].sort(
      (a, b) => Number(has.has(b.number)) - Number(has.has(a.number)) || a.number - b.number,
    );
    const withStack = ranked.filter((p) => has.has(p.number)).length;
    const now = this.#now().getTime();
    // Keyed by repository too: after stackRef or projectRepo changes, associations with the old
    // repository decide nothing.
    const memoKey = `${key} ${repoURL}`;
    for (const k of this.#associations.keys())
      if (k.startsWith(`${key} `) && k !== memoKey) this.#associations.delete(k);
    const memo =
      this.#associations.get(memoKey) ?? new Map<string, { association: AuthorAssociation; at: number }>();
    for (const [who, m] of memo) if (now - m.at > ASSOCIATION_MEMO_MS) memo.delete(who);
    const resolved: KnownPull[] = [];
    /**
     * Pull requests whose preview Stack name is held by a Stack that is not ours, with why: they
     * take no preview slot (the slot goes to the next pull request) and stay `Blocked`.
     */
    const taken = new Map<number, string>();
    const isTaken = (n: number): boolean => {
      if (taken.has(n)) return true;
      if (has.has(n)) return false;
      const name = previewStackName(prp.spec.stackRef.name, n);
      const cached = this.#o.stacks.get(namespace, name);
      if (cached === undefined || ownedBy(cached, uid)) return false;
      taken.set(n, nameTaken(name, cached));
      return true;
    };
    let trusted = 0;
    const resolveWhile = async (more: () => boolean): Promise<void> => {
      while (resolved.length < ranked.length && more() && !deadline.expired()) {
        const p = ranked[resolved.length];
        if (p === undefined) break;
        let association: AuthorAssociation;
        const who = p.authorId ?? p.author;
        // A fork that is refused anyway needs no lookup of its author.
        if (p.fork && trust?.allowForks !== true) association = p.association ?? 'NONE';
        else if (p.association !== undefined) association = p.association;
        else {
          const known = memo.get(who)?.association;
          try {
            association = known ?? (await forge.association(repoURL, p, deadline.signal));
          } catch (err) {
            if (deadline.expired()) break;
            throw err;
          }
          if (known === undefined) memo.set(who, { association, at: now });
        }
        const pull = { ...p, association };
        resolved.push(pull);
        if (untrustedReason(pull, trust) === undefined && !isTaken(pull.number)) trusted++;
      }
    };
    const listedNumbers = new Set(open.map((p) => p.number));
    const planFor = (have: readonly ExistingPreview[]): Plan => {
      const known = new Set(resolved.map((p) => p.number));
      return planSync({
        pulls: resolved.filter((p) => !isTaken(p.number)),
        trust,
        maxPreviews,
        existing: have.filter((e) => known.has(e.number) || !listedNumbers.has(e.number)),
      });
    };

    // 1. Only what decides the preview Stacks: then create/update/delete them at once.
    await resolveWhile(() => resolved.length < withStack || trusted < maxPreviews);
    const first = planFor(existing);
    const removed = await this.#applyStacks(prp, ctx, first, stacks, taken, new Set());
    // 2. The other pull requests (notices and status only), while the deadline allows; a slot
    // freed by a name found taken at create goes to the next pull request here.
    await resolveWhile(() => true);
    const updated = new Map(first.update.map((u) => [u.pull.number, u.pull.headSHA]));
    const after = [
      ...existing
        .filter((e) => !first.remove.some((r) => r.preview.number === e.number))
        .map((e) => ({ ...e, headSHA: updated.get(e.number) ?? e.headSHA })),
      ...first.create
        .filter((p) => !taken.has(p.number))
        .map((p) => ({
          number: p.number,
          stackName: previewStackName(prp.spec.stackRef.name, p.number),
          headSHA: p.headSHA,
        })),
    ];
    const plan = planFor(after);
    // Pull requests the first pass brought up to date are not patched (nor announced) again.
    const handled = new Set(first.verdicts.filter((v) => v.kind === 'preview').map((v) => v.pull.number));
    removed.push(...(await this.#applyStacks(prp, ctx, plan, stacks, taken, handled)));
    const deferred = ranked.length - resolved.length;
    if (memo.size > 0) this.#associations.set(memoKey, memo);
    else this.#associations.delete(memoKey);
    this.#o.logger.debug(
      {
        previewKey: key,
        verdicts: plan.verdicts.map((v) => `#${String(v.pull.number)} ${v.kind}`),
        create: first.create.length + plan.create.length,
        update: first.update.length + plan.update.length,
        remove: removed.length,
        deferred,
      },
      'preview sync planned',
    );

    // 3. Off the sync path: pending statuses of removed previews, then the notices.
    const previous = new Map((prp.status?.previews ?? []).map((e) => [e.number, e]));
    const marker = noticeMarker(namespace, prp.metadata.name ?? '');
    const stopped = this.#stopped.get(key) ?? new Map<number, string>();
    const notice = (
      pull: { number: number; webURL: string },
      body: string,
      gone?: { branch: string; stackName: string },
    ): void => {
      this.notices.add({
        kind: 'notice',
        preview: key,
        forge,
        repoURL,
        marker,
        body,
        ...pull,
        ...(gone !== undefined ? { gone } : {}),
      });
    };
    for (const r of removed) {
      this.#queueResolve(
        key,
        ctx,
        namespace,
        r.preview,
        r.why === 'gone'
          ? 'preview cancelled: pull request closed or retargeted'
          : 'preview cancelled: no longer previewed',
      );
      if (r.why === 'gone') {
        stopped.delete(r.preview.number);
        const before = previous.get(r.preview.number);
        notice(
          {
            number: r.preview.number,
            webURL:
              prev?.pulls.find((p) => p.number === r.preview.number)?.webURL ??
              (webURLOf(before) || (this.#urlOf(key, r.preview.number) ?? '')),
          },
          stoppedGone(r.preview.stackName, ctx.branch),
          { branch: ctx.branch, stackName: r.preview.stackName },
        );
      } else stopped.set(r.preview.number, r.preview.stackName);
    }

    const startTimeout = startTimeoutOf(prp).ms;
    const waiting = new Map<string, number>();
    let nextCheckMs = Number.POSITIVE_INFINITY;
    const noted = this.#nameTaken.get(key);
    if (taken.size > 0) this.#nameTaken.set(key, new Set(taken.keys()));
    else this.#nameTaken.delete(key);
    const entries: PreviewEntry[] = [];
    const decided = new Set<number>();
    for (const pull of resolved) {
      const blocked = taken.get(pull.number);
      if (blocked === undefined) continue;
      const n = pull.number;
      decided.add(n);
      const before = previous.get(n);
      if (before?.state !== 'Blocked' && noted?.has(n) !== true) {
        this.#event(prp, 'Warning', 'PreviewNameTaken', blocked);
      }
      const url = this.notices.posted(key, n)?.url ?? before?.commentURL;
      entries.push({
        number: n,
        headSHA: pull.headSHA,
        state: 'Blocked',
        ...(url !== undefined ? { commentURL: url } : {}),
        reason: boundText(blocked, 1024, 'utf16'),
      });
    }
    for (const v of plan.verdicts) {
      const n = v.pull.number;
      decided.add(n);
      const before = previous.get(n);
      if (taken.has(n)) continue; // a create of the first pass found the name taken
      // "Previews stopped" stays until the pull request qualifies again (a later sync must not
      // turn it into "No preview": the Stack it had is gone for this reason).
      const stoppedStack =
        v.kind === 'preview'
          ? undefined
          : (stopped.get(n) ?? (before?.state === 'Active' ? before.stackName : undefined));
      if (v.kind === 'preview') stopped.delete(n);
      else if (stoppedStack !== undefined) stopped.set(n, stoppedStack);
      const name = previewName(prp, v, stacks);
      const stackName = v.kind === 'preview' ? name : undefined;
      const live = stackName === undefined ? undefined : this.#o.stacks.get(namespace, stackName);
      // A preview Stack whose commit PKO has not run within startTimeout: the pull request is told.
      const stuck =
        stackName === undefined
          ? undefined
          : await this.#stuck(
              key,
              ctx,
              namespace,
              {
                name: stackName,
                commit: typeof live?.spec?.commit === 'string' ? live.spec.commit : v.pull.headSHA,
                stack: live,
              },
              waiting,
              startTimeout,
            );
      if (stuck !== undefined && 'dueInMs' in stuck) nextCheckMs = Math.min(nextCheckMs, stuck.dueInMs);
      const stuckReason = stuck !== undefined && 'reason' in stuck ? stuck.reason : undefined;
      const body = stuckReason ?? noticeBody(v, stoppedStack, name);
      const commentURL = this.notices.posted(key, n)?.url ?? before?.commentURL;
      // Notices: every pull request without a preview; one that had a notice and now runs; one stuck.
      if (v.kind !== 'preview' || commentURL !== undefined || stuckReason !== undefined) notice(v.pull, body);
      const lastResult = live?.status?.lastUpdate?.state;
      entries.push({
        number: n,
        headSHA: v.pull.headSHA,
        state: v.kind === 'preview' ? 'Active' : v.kind === 'waiting' ? 'Waiting' : 'Untrusted',
        ...(stackName !== undefined ? { stackName } : {}),
        ...(lastResult !== undefined && lastResult !== '' ? { lastResult } : {}),
        ...(commentURL !== undefined ? { commentURL } : {}),
        ...(v.kind !== 'preview' ? { reason: boundText(v.reason, 1024, 'utf16') } : {}),
        ...(stuckReason !== undefined ? { reason: boundText(stuckReason, 1024, 'utf16') } : {}),
      });
    }
    if (waiting.size > 0) this.#waiting.set(key, waiting);
    else this.#waiting.delete(key);
    // Not checked yet (deadline): the previous entry stands until the next sync.
    for (const p of ranked) {
      const before = previous.get(p.number);
      if (!decided.has(p.number) && before !== undefined) entries.push(before);
    }
    for (const n of stopped.keys()) if (!listedNumbers.has(n)) stopped.delete(n);
    if (stopped.size > 0) this.#stopped.set(key, stopped);
    else this.#stopped.delete(key);
    entries.sort((a, b) => a.number - b.number);
    return { entries, deferred, nextCheckMs };
  }

  /** The web URL of pull request `number` as a posted notice's URL names it, if known. */
  #urlOf(key: string, number: number): string | undefined {
    const url = this.notices.posted(key, number)?.url;
    return url === undefined ? undefined : withoutFragment(url);
  }

  /**
   * Creates, patches and deletes preview Stacks as `plan` says; pull requests in `handled` (done
   * by an earlier pass of the same sync) are not patched again. Names found taken go into
   * `taken`. @returns the removals done.
   */
  async #applyStacks(
    prp: PullRequestPreview,
    ctx: SyncContext,
    plan: Plan,
    stacks: readonly Stack[],
    taken: Map<number, string>,
    handled: ReadonlySet<number>,
  ): Promise<Plan['remove']> {
    const namespace = prp.metadata.namespace ?? '';
    const repoURL = ctx.repoURL;
    const uid = prp.metadata.uid ?? '';
    for (const pull of plan.create) {
      const body = previewStack(ctx.base, prp, pull, repoURL);
      const name = body.metadata.name;
      const cached = this.#o.stacks.get(namespace, name);
      if (cached !== undefined && !ownedBy(cached, uid)) {
        taken.set(pull.number, nameTaken(name, cached));
        continue;
      }
      try {
        if (!this.#mayWrite()) throw new LeaseNotHeldError('create a preview Stack');
        await kubeRequest(this.#o.kubeConfig, {
          method: 'POST',
          path: objectPath(stackRef(namespace)),
          body,
        });
        this.#event(
          prp,
          'Normal',
          'PreviewCreated',
          `created preview Stack ${name} for pull request #${String(pull.number)} at ${pull.headSHA.slice(0, 7)}`,
        );
      } catch (err) {
        if (errorStatusCode(err) !== 409) throw err;
        // Already there: ours when the cache lags behind our own create, else someone else's.
        const live = await kubeRequest<Stack>(this.#o.kubeConfig, {
          method: 'GET',
          path: objectPath(stackRef(namespace, name)),
        }).catch((e: unknown) => {
          if (errorStatusCode(e) === 404) return undefined; // deleted meanwhile: the next sync creates it
          throw e;
        });
        // Gone, or being deleted: the next sync creates it again.
        if (live === undefined || live.metadata.deletionTimestamp !== undefined) continue;
        if (!ownedBy(live, uid)) {
          taken.set(pull.number, nameTaken(name, live));
          continue;
        }
        // Ours: bring it up to date, only if it is still the object just read (resourceVersion);
        // fields the live spec has and the desired one lacks are removed (null in the merge patch).
        const spec = mergePatchBetween(live.spec ?? {}, body.spec);
        const annotations = controllerAnnotationPatch(live, prp);
        await this.#patchStack(namespace, name, {
          metadata: {
            labels: body.metadata.labels,
            resourceVersion: live.metadata.resourceVersion,
            ...(annotations !== undefined ? { annotations } : {}),
          },
          ...(spec !== undefined ? { spec } : {}),
        });
      }
    }
    for (const v of plan.verdicts) {
      if (v.kind !== 'preview' || handled.has(v.pull.number)) continue;
      const have = stacks.find((s) => Number(s.metadata.labels?.[PULL_REQUEST_LABEL]) === v.pull.number);
      if (have === undefined) continue;
      const patch = mergePatchBetween(have.spec ?? {}, previewSpec(ctx.base, prp, v.pull.headSHA));
      const annotations = controllerAnnotationPatch(have, prp);
      if (patch === undefined && annotations === undefined) continue;
      // The uid makes the patch fail (422) if the name now belongs to another object.
      await this.#patchStack(namespace, have.metadata.name ?? '', {
        metadata: { uid: have.metadata.uid, ...(annotations !== undefined ? { annotations } : {}) },
        ...(patch !== undefined ? { spec: patch } : {}),
      });
      if (patch === undefined) continue;
      // N18: the old head's pending status (its run may be aborted and report nothing) becomes
      // a failure "superseded by <new>"; a result of it that still comes replaces that.
      const oldHead = typeof have.spec?.commit === 'string' ? have.spec.commit.toLowerCase() : '';
      if (oldHead !== v.pull.headSHA) {
        this.#queueResolve(
          `${namespace}/${prp.metadata.name ?? ''}`,
          ctx,
          namespace,
          { number: v.pull.number, stackName: have.metadata.name ?? '', headSHA: oldHead },
          `superseded by ${v.pull.headSHA.slice(0, 7)}`,
        );
      }
      if (plan.update.some((u) => u.pull.number === v.pull.number)) {
        this.#event(
          prp,
          'Normal',
          'PreviewUpdated',
          `preview Stack ${have.metadata.name ?? ''} now runs ${v.pull.headSHA.slice(0, 7)} of pull request #${String(v.pull.number)}`,
        );
      }
    }
    for (const r of plan.remove) {
      const owned = stacks.find((s) => s.metadata.name === r.preview.stackName);
      if (owned !== undefined) await this.#deleteStack(owned);
      const why =
        r.why === 'gone'
          ? `pull request #${String(r.preview.number)} is closed or no longer targets ${ctx.branch}`
          : `pull request #${String(r.preview.number)}: ${r.why.reason}`;
      this.#event(prp, 'Normal', 'PreviewDeleted', `deleted preview Stack ${r.preview.stackName}: ${why}`);
    }
    return [...plan.remove];
  }

  /**
   * Whether preview Stack `target.name` waits too long for PKO to run its `spec.commit` (docs/previews.md,
   * "A preview that never starts"): no Update for that commit — neither the current run's nor
   * the last attempted one — since this controller first saw it (recorded in `waiting`). Before
   * `timeoutMs`: `dueInMs` (when to look again). After: `reason`, the notice text, and the head's
   * commit status becomes `failure` with the same reason when it has none or a pending one.
   * Undefined when the commit ran (or runs).
   */
  async #stuck(
    key: string,
    ctx: SyncContext,
    namespace: string,
    target: { name: string; commit: string; stack: Stack | undefined },
    waiting: Map<string, number>,
    timeoutMs: number,
  ): Promise<{ dueInMs: number } | { reason: string } | undefined> {
    // `stack` undefined: just created (not in the cache yet), waiting from now on.
    const { name, stack: s } = target;
    const commit = target.commit.toLowerCase();
    if (!/^[0-9a-f]{40}$/.test(commit)) return undefined;
    const st = s?.status;
    const ran =
      st?.currentUpdate?.commit?.toLowerCase() === commit ||
      st?.lastUpdate?.lastAttemptedCommit?.toLowerCase() === commit;
    if (ran) return undefined;
    const id = `${name}@${commit}`;
    const now = this.#now().getTime();
    const since = this.#waiting.get(key)?.get(id) ?? now;
    waiting.set(id, since);
    const left = since + timeoutMs - now;
    if (left > 0 || s === undefined) return { dueInMs: Math.max(left, 1_000) };
    const waited = formatWait(now - since);
    const why = await this.#whyWaiting(namespace, s);
    const short = commit.slice(0, 7);
    this.#queueResolve(
      key,
      ctx,
      namespace,
      { number: 0, stackName: name, headSHA: commit },
      boundText(`preview not started after ${waited}: ${why}`, 1024, 'utf16'),
      true,
    );
    return {
      reason: `**Preview not running**: preview Stack \`${name}\` has waited ${waited} for PKO to run commit ${short}: ${why}. The commit status says so too; it changes when PKO runs the commit.`,
    };
  }

  /**
   * Why PKO has not run preview Stack `s`, in one line: the Workspace's `Ready` condition
   * (`auto.pulumi.com` Workspace of the Stack's name: reason and message), then the Stack's own
   * `Reconciling`/`Ready` condition; credentials in URLs are removed and the text bounded.
   */
  async #whyWaiting(namespace: string, s: Stack): Promise<string> {
    const parts: string[] = [];
    const name = s.metadata.name ?? '';
    try {
      const ws = await kubeRequest<{ status?: { conditions?: Condition[] } }>(this.#o.kubeConfig, {
        method: 'GET',
        path: objectPath({
          group: 'auto.pulumi.com',
          version: 'v1alpha1',
          plural: 'workspaces',
          namespace,
          name,
        }),
      });
      const ready = ws.status?.conditions?.find((c) => c.type === 'Ready');
      parts.push(
        ready === undefined
          ? `Workspace ${name} reports no Ready condition`
          : `Workspace ${name} Ready=${ready.status} (${ready.reason})${ready.message ? `: ${ready.message}` : ''}`,
      );
    } catch (err) {
      const code = errorStatusCode(err);
      parts.push(
        code === 404
          ? `no Workspace ${name} exists`
          : code === 403
            ? `the Workspace ${name} cannot be read (grant get on workspaces.auto.pulumi.com: config/components/workspace-logs)`
            : `the Workspace ${name} cannot be read: ${errorMessage(err)}`,
      );
    }
    const conds = s.status?.conditions ?? [];
    const c =
      conds.find((x) => x.type === 'Reconciling' && x.status === 'True') ??
      conds.find((x) => x.type === 'Ready');
    if (c !== undefined)
      parts.push(`Stack ${c.type}=${c.status} (${c.reason})${c.message ? `: ${c.message}` : ''}`);
    const text = parts
      .join('; ')
      .replace(/\/\/[^/@\s]*@/g, '//')
      .replace(/\s+/g, ' ');
    return boundText(text, 600, 'codePoints');
  }

  /** P02: a removed preview's pending status on its head commit becomes a failure that says why (queued). */
  #queueResolve(
    key: string,
    ctx: { provider: ResolvedProvider; forge: PreviewForge; repoURL: string },
    namespace: string,
    preview: ExistingPreview,
    description: string,
    whenNone = false,
  ): void {
    if (!/^[0-9a-f]{40}$/.test(preview.headSHA)) return;
    const context = this.#statusContext(ctx.provider, namespace, preview.stackName, preview.headSHA);
    if (context === undefined) return;
    this.notices.add({
      kind: 'resolve',
      preview: key,
      forge: ctx.forge,
      repoURL: ctx.repoURL,
      sha: preview.headSHA,
      context,
      description,
      stackName: preview.stackName,
      ...(whenNone ? { whenNone } : {}),
    });
  }

  /** The commit status context deliveries use for Stack `stackName` with this Provider (built-in template or `commitStatus.context`). */
  #statusContext(p: ResolvedProvider, namespace: string, stackName: string, sha: string): string | undefined {
    const engine = loadedTemplateEngine();
    // Loaded by reconcile, the only way here.
    if (engine === undefined) throw new Error('the template engine is not loaded');
    // Compiled once per resolved Provider (a changed Provider is a new object).
    let compiled = this.#compiled.get(p);
    if (compiled === undefined) {
      compiled = engine.compileTemplates(
        {},
        p.commitStatusContext !== undefined ? { commitStatusContext: p.commitStatusContext } : {},
      );
      this.#compiled.set(p, compiled);
    }
    if (!compiled.ok || !isGitProviderType(p.type)) return undefined;
    const ev: NotificationEvent = {
      identity: { stack: stackName, run: { kind: 'none' }, phase: { kind: 'failed' } },
      id: `${namespace}/${stackName}`,
      involvedObject: {
        apiVersion: `${STACK_GROUP}/${STACK_VERSION}`,
        kind: 'Stack',
        namespace,
        name: stackName,
        uid: '',
      },
      labels: {},
      severity: 'error',
      reason: 'PreviewFailed',
      message: 'preview cancelled',
      timestamp: kubeTime(this.#now()),
      metadata: { commit: sha },
      reportingController: 'pko-notification-controller',
    };
    return engine.renderNotification(compiled.set, ev, {
      clusterName: this.#o.clusterName,
      providerType: p.type,
      commentsEnabled: false,
      limits: FORGES[p.type].limits,
    }).commitStatus?.context;
  }

  async #finalize(prp: PullRequestPreview): Promise<void> {
    if (!(prp.metadata.finalizers ?? []).includes(PREVIEW_FINALIZER)) return;
    const namespace = prp.metadata.namespace ?? '';
    const uid = prp.metadata.uid ?? '';
    // From the API server, not the cache: a Stack created moments ago must not be left behind.
    const list = await kubeRequest<{ items?: Stack[] }>(this.#o.kubeConfig, {
      method: 'GET',
      path: objectPath(stackRef(namespace)),
      query: { labelSelector: `${PREVIEW_LABEL}=${prp.metadata.name ?? ''}` },
    });
    const owned = (list.items ?? []).filter((s) => ownedBy(s, uid));
    const ctx = this.#context(prp, namespace);
    const key = `${namespace}/${prp.metadata.name ?? ''}`;
    for (const s of owned) {
      await this.#deleteStack(s);
      if (!('reason' in ctx)) {
        this.#queueResolve(
          key,
          ctx,
          namespace,
          {
            number: 0,
            stackName: s.metadata.name ?? '',
            headSHA: typeof s.spec?.commit === 'string' ? s.spec.commit : '',
          },
          'preview cancelled: PullRequestPreview deleted',
        );
      }
    }
    if (owned.length > 0) {
      this.#event(
        prp,
        'Normal',
        'PreviewsDeleted',
        `deleted ${String(owned.length)} preview Stack(s) before removal: ${owned.map((s) => s.metadata.name ?? '').join(', ')}`,
      );
    }
    await this.#patchFinalizers(
      prp,
      (prp.metadata.finalizers ?? []).filter((f) => f !== PREVIEW_FINALIZER),
    );
    this.#forget(key);
  }

  async #patchFinalizers(prp: PullRequestPreview, finalizers: string[]): Promise<void> {
    if (!this.#mayWrite()) throw new LeaseNotHeldError('patch the finalizers');
    await kubeRequest(this.#o.kubeConfig, {
      method: 'PATCH',
      path: objectPath({
        group: GROUP,
        version: VERSION,
        plural: 'pullrequestpreviews',
        namespace: prp.metadata.namespace,
        name: prp.metadata.name ?? '',
      }),
      // The resourceVersion makes the patch conditional: a concurrent change of the list fails (409) and is retried.
      body: { metadata: { finalizers, resourceVersion: prp.metadata.resourceVersion } },
      contentType: 'application/merge-patch+json',
    });
  }

  async #patchStack(namespace: string, name: string, body: object): Promise<void> {
    if (!this.#mayWrite()) throw new LeaseNotHeldError('patch a preview Stack');
    await kubeRequest(this.#o.kubeConfig, {
      method: 'PATCH',
      path: objectPath(stackRef(namespace, name)),
      body,
      contentType: 'application/merge-patch+json',
    });
  }

  /**
   * Deletes preview Stack `s` (one this PullRequestPreview owns), on the condition that it is
   * still that object (`preconditions.uid`): a Stack of the same name made by someone else since
   * is never deleted (409, logged). Already gone (404) is fine.
   */
  async #deleteStack(s: Stack): Promise<void> {
    if (!this.#mayWrite()) throw new LeaseNotHeldError('delete a preview Stack');
    const name = s.metadata.name ?? '';
    try {
      await kubeRequest(this.#o.kubeConfig, {
        method: 'DELETE',
        path: objectPath(stackRef(s.metadata.namespace ?? '', name)),
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: s.metadata.uid } },
      });
    } catch (err) {
      const code = errorStatusCode(err);
      if (code === 409) {
        this.#o.logger.warn(
          { stack: name },
          'not deleting Stack: it was replaced by another object of that name',
        );
      } else if (code !== 404) throw err;
    }
  }

  async #writeStatus(prp: PullRequestPreview, ready: ReadyState, previews?: PreviewEntry[]): Promise<void> {
    const now = this.#now();
    const generation = prp.metadata.generation ?? 0;
    const conditions: Condition[] = setCondition(
      prp.status?.conditions,
      readyCondition(ready, generation),
      now,
    );
    const status: Record<string, unknown> = { observedGeneration: generation, conditions };
    if (!this.#mayWrite()) throw new LeaseNotHeldError('write the PullRequestPreview status');
    if (previews !== undefined) {
      status.previews = previews;
      status.activePreviews = previews.filter((p) => p.state === 'Active').length;
      status.lastSyncTime = kubeTime(now);
    }
    try {
      await patchStatus(
        this.#o.kubeConfig,
        {
          group: GROUP,
          version: VERSION,
          plural: 'pullrequestpreviews',
          namespace: prp.metadata.namespace ?? '',
          name: prp.metadata.name ?? '',
        },
        status,
      );
    } catch (err) {
      if (errorStatusCode(err) !== 404) throw err;
    }
    if (!ready.ready && prp.status?.conditions?.find((c) => c.type === 'Ready')?.reason !== ready.reason) {
      this.#event(prp, 'Warning', ready.reason, ready.message);
    }
  }
}

/** The pull request's web URL from a notice URL recorded in status (`<pr url>#…`), or ''. */
function webURLOf(e: PreviewEntry | undefined): string {
  return e?.commentURL === undefined ? '' : withoutFragment(e.commentURL);
}

/** `url` without its `#…` fragment (a notice's URL is the pull request's with `#<comment>`). */
function withoutFragment(url: string): string {
  return url.replace(/#.*$/, '');
}

/** The object as the Event recorder needs it (cached list items may lack apiVersion/kind). */
function objectOf(prp: PullRequestPreview): PullRequestPreview {
  return { ...prp, apiVersion: API_VERSION, kind: 'PullRequestPreview' };
}

/** `spec.interval` as used, ms: 10 s to 24h (default 5m); `note` when a stored value is above 24h. */
function previewInterval(prp: PullRequestPreview): BoundedDuration {
  return boundedDuration('spec.interval', prp.spec.interval ?? '5m', {
    minMs: MIN_INTERVAL_MS,
    maxMs: MAX_DURATION_MS,
    maxLabel: MAX_DURATION,
    fallbackMs: 5 * 60_000,
  });
}

/** `spec.startTimeout` as used, ms: 1m to 24h (default 10m); `note` when a stored value is above 24h. */
function startTimeoutOf(prp: PullRequestPreview): BoundedDuration {
  return boundedDuration('spec.startTimeout', prp.spec.startTimeout ?? '10m', {
    minMs: MIN_START_TIMEOUT_MS,
    maxMs: MAX_DURATION_MS,
    maxLabel: MAX_DURATION,
    fallbackMs: 5 * 60_000,
  });
}

/** The preview Stack name of a `preview` verdict: the existing Stack's, else the one created. */
function previewName(prp: PullRequestPreview, v: PullRequestDecision, stacks: readonly Stack[]): string {
  const have = stacks.find((s) => Number(s.metadata.labels?.[PULL_REQUEST_LABEL]) === v.pull.number);
  return have?.metadata.name ?? previewStackName(prp.spec.stackRef.name, v.pull.number);
}

/** The notice text for a verdict (the marker is added by the caller). */
export function noticeBody(
  v: PullRequestDecision,
  removedStack: string | undefined,
  stackName: string,
): string {
  switch (v.kind) {
    case 'untrusted':
      return removedStack !== undefined
        ? `**Previews stopped** for this pull request: ${v.reason}. Preview Stack \`${removedStack}\` was deleted; previews resume when the pull request qualifies again.`
        : `**No preview** for this pull request: ${v.reason}. Previews run the pull request's code with the stack's credentials, so they are limited by the trust rules of the PullRequestPreview.`;
    case 'waiting':
      return removedStack !== undefined
        ? `**Preview paused**: ${v.reason}. Preview Stack \`${removedStack}\` was deleted.`
        : `**Preview waiting**: ${v.reason}.`;
    case 'preview':
      return `**Preview running** as Stack \`${stackName}\`: results follow in the commit status and the comment of that Stack.`;
  }
}

/** `12m`, `1h 5m`, `45s`: how long something waited, for people. */
function formatWait(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${String(s)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${String(m)}m`;
  return `${String(Math.floor(m / 60))}h ${String(m % 60)}m`;
}

/** Why a pull request has no preview when its Stack name is held by `s`, which is not ours. */
function nameTaken(name: string, s: Stack): string {
  const owner = controllerOf(s);
  return `Stack ${name} already exists and is not this PullRequestPreview's (${owner !== undefined ? `it belongs to ${owner}` : 'it has no controller owner'}): the name is taken; delete or rename that Stack`;
}
