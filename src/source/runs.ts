/**
 * What a "run" is to the user, as opposed to what PKO counts as one (README, "Event model: PKO v1
 * and v2"). Pure functions over PKO objects; no Kubernetes calls, no clock.
 *
 * PKO v2 retries a failed run of the same commit and spec by itself (a new Update whose
 * `spec.message` is `Backoff time elapsed: <cooldown>`), and with `continueResyncOnCommitMatch`
 * re-runs a succeeded one (`Resync time elapsed: <period>`). Its stack controller writes those
 * messages only when neither the generation, the reconcile request nor the commit changed since
 * the previous Update of the Stack. To a user such an Update continues the previous run: it is
 * not announced (no Started) and its result has the previous run's identity, so a repeated
 * identical result is not sent again (the ledger treats an event whose id is among the last ones
 * handled as done, src/delivery/ledger.ts).
 *
 * PKO v1 has no Update objects; a run is identified by its commit and outcome only (see
 * {@link v1Outcome}); v1 rewrites `lastResyncTime` on every retry and resync, so that time orders
 * events but is not part of their identity.
 */
import type { Condition } from '../api/meta.ts';
import type { Stack, Update } from '../api/pko.ts';

/** `Update.spec.message` prefixes PKO v2's stack controller writes for a continuation of the previous run. */
const CONTINUATION_PREFIXES = ['Backoff time elapsed', 'Resync time elapsed'] as const;

/** Whether PKO started `u` only to retry or resync the Stack's previous run (same commit and spec). */
export function isContinuation(u: Update): boolean {
  const m = u.spec?.message ?? '';
  return CONTINUATION_PREFIXES.some((p) => m.startsWith(p));
}

const HEX_MILLIS = /-([0-9a-f]{9,13})$/;

/** Creation time (epoch ms) in a PKO v2 Update name (`<stack>-<hex millis>`), else undefined. */
export function updateNameMillis(name: string | undefined): number | undefined {
  const m = name === undefined ? null : HEX_MILLIS.exec(name);
  if (!m?.[1]) return undefined;
  const n = Number.parseInt(m[1], 16);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Epoch ms of a `metadata.creationTimestamp` (string or the client's Date), NaN when absent. */
function createdMs(u: Update): number {
  const c: unknown = u.metadata.creationTimestamp;
  if (c instanceof Date) return c.getTime();
  return typeof c === 'string' && c !== '' ? Date.parse(c) : Number.NaN;
}

/**
 * Creation order of a Stack's Updates, as the API server saw it (case N16): by
 * `metadata.creationTimestamp`, which the API server sets — never by the time PKO writes into an
 * Update's name or `status.startTime` (PKO's clock: after it jumps back, a retry would sort before
 * the run it retries, and its result be taken for a repeat). Updates created within the same
 * second (or without a creation time) fall back to the name's time, then the name.
 */
export function compareUpdates(a: Update, b: Update): number {
  const ta = createdMs(a);
  const tb = createdMs(b);
  if (Number.isFinite(ta) && Number.isFinite(tb) && ta !== tb) return ta - tb;
  return (
    (updateNameMillis(a.metadata.name) ?? 0) - (updateNameMillis(b.metadata.name) ?? 0) ||
    (a.metadata.name ?? '').localeCompare(b.metadata.name ?? '')
  );
}

/**
 * Whether the Stack's in-flight run (`status.currentUpdate`) continues its last one: same
 * generation, reconcile request and commit as `lastUpdate`, as PKO requires before it retries
 * (last run failed) or resyncs (last run succeeded on that commit).
 */
export function currentContinuesLast(stack: Stack): boolean {
  const cur = stack.status?.currentUpdate;
  const last = stack.status?.lastUpdate;
  if (cur === undefined || last === undefined || (last.name ?? '') === '') return false;
  if (cur.generation !== last.generation || (cur.reconcileRequest ?? '') !== (last.reconcileRequest ?? ''))
    return false;
  const commit = cur.commit ?? '';
  if (last.state === 'failed') return (last.lastAttemptedCommit ?? '') === commit;
  if (last.state === 'succeeded') return (last.lastSuccessfulCommit ?? '') === commit;
  return false;
}

/**
 * PKO 2.9 writes a successful Update's `status.message` as a JSON string literal
 * (`"Initial stack update"`, `"New commit detected: \"<sha>\""`): shown to users as the text it
 * encodes. Anything that is not exactly one JSON string literal is returned unchanged.
 */
export function unquoteMessage(s: string | undefined): string | undefined {
  if (s === undefined || s.length < 2 || !s.startsWith('"') || !s.endsWith('"')) return s;
  try {
    const v: unknown = JSON.parse(s);
    return typeof v === 'string' ? v : s;
  } catch {
    return s;
  }
}

/** A PKO v1 outcome a user is told about. */
export interface V1Outcome {
  phase: 'succeeded' | 'failed';
  /** The commit the outcome is about (what is deployed, for a success). */
  commit: string;
}

/**
 * What a PKO v1 Stack's `status.lastUpdate` means for notifications:
 * - `failed`: the attempted commit failed (PKO retries it at once and forever: every retry shows
 *   the same outcome);
 * - `succeeded` with `lastAttemptedCommit == lastSuccessfulCommit`: that commit is deployed (also
 *   after a resync of it);
 * - `succeeded` with the two commits different: PKO found the branch back at the deployed commit
 *   after a failure and marked the Stack succeeded without running anything — not an outcome
 *   (undefined), so the broken commit is never reported as succeeded;
 * - anything else (no state yet, the empty `lastUpdate: {}` of a first reconcile): undefined.
 */
export function v1Outcome(stack: Stack): V1Outcome | undefined {
  const last = stack.status?.lastUpdate;
  if (last === undefined) return undefined;
  const attempted = last.lastAttemptedCommit ?? '';
  if (last.state === 'failed') return { phase: 'failed', commit: attempted };
  if (last.state === 'succeeded') {
    const deployed = last.lastSuccessfulCommit ?? '';
    if (deployed !== attempted) return undefined;
    return { phase: 'succeeded', commit: deployed };
  }
  return undefined;
}

/** The CLI error text PKO v1 puts in `Reconciling/RetryingAfterFailure` right after a failed run, if shown. */
export function v1FailureText(conditions: readonly Condition[] | undefined): string | undefined {
  const c = conditions?.find((x) => x.type === 'Reconciling');
  return c?.status === 'True' && c.reason === 'RetryingAfterFailure' && c.message !== ''
    ? c.message
    : undefined;
}

/**
 * Remembers the CLI error text of each PKO v1 Stack's failing commit. PKO v1 shows the text only
 * in the `RetryingAfterFailure` condition, which it replaces by `StackProcessing` within
 * milliseconds when it retries, and never in `lastUpdate.message`; so every stored version of a
 * Stack is shown to {@link observe} (the informer sees each one) and derivation asks {@link text}.
 * Bounded: one entry per Stack uid, texts cut to `maxChars`.
 */
export class V1FailureTexts {
  readonly #byStack = new Map<string, { commit: string; text: string }>();
  readonly #maxChars: number;

  constructor(maxChars = 16_384) {
    this.#maxChars = maxChars;
  }

  /** Records the text a v1 Stack shows for its failing commit (ignores everything else). */
  observe(stack: Stack): void {
    const uid = stack.metadata.uid;
    const last = stack.status?.lastUpdate;
    if (uid === undefined || last === undefined || last.name !== undefined || last.state !== 'failed') return;
    const text = v1FailureText(stack.status?.conditions);
    if (text === undefined) return;
    this.#byStack.set(uid, { commit: last.lastAttemptedCommit ?? '', text: text.slice(0, this.#maxChars) });
  }

  /** The text last seen for `commit` on the Stack `uid`, if any. */
  text(uid: string, commit: string): string | undefined {
    const e = this.#byStack.get(uid);
    return e?.commit === commit ? e.text : undefined;
  }

  forget(uid: string): void {
    this.#byStack.delete(uid);
  }

  get size(): number {
    return this.#byStack.size;
  }
}

/**
 * PKO v2: the commit the Stack named for each of its recent runs (`currentUpdate.commit` while a
 * run is current, `lastUpdate.lastAttemptedCommit` once it is the last one), remembered from every
 * Stack version the informer delivers. An Update does not carry its commit, and the Stack names
 * only its current and last run: when the controller falls behind (a burst; Stack reconciles
 * coalesce to the newest version) a run two runs back would otherwise have no commit — and a git
 * Provider could not report it at all. Bounded: {@link RunCommits.PER_STACK} runs per Stack.
 */
export class RunCommits {
  static readonly PER_STACK = 16;
  readonly #byStack = new Map<string, Map<string, string>>();

  /** Records the commits `stack`'s status names for its current and last run. */
  observe(stack: Stack): void {
    const uid = stack.metadata.uid;
    if (uid === undefined) return;
    const cur = stack.status?.currentUpdate;
    const last = stack.status?.lastUpdate;
    if (cur?.name !== undefined && cur.name !== '' && cur.commit) this.#put(uid, cur.name, cur.commit);
    if (last?.name !== undefined && last.name !== '' && last.lastAttemptedCommit)
      this.#put(uid, last.name, last.lastAttemptedCommit);
  }

  #put(uid: string, updateName: string, commit: string): void {
    let runs = this.#byStack.get(uid);
    if (!runs) {
      runs = new Map();
      this.#byStack.set(uid, runs);
    }
    if (runs.get(updateName) === commit) return;
    runs.delete(updateName);
    runs.set(updateName, commit);
    if (runs.size > RunCommits.PER_STACK) {
      const oldest = runs.keys().next().value;
      if (oldest !== undefined) runs.delete(oldest);
    }
  }

  /** The commit last seen for Update `updateName` of the Stack `uid`, if any. */
  commit(uid: string, updateName: string): string | undefined {
    return this.#byStack.get(uid)?.get(updateName);
  }

  forget(uid: string): void {
    this.#byStack.delete(uid);
  }
}

/**
 * PKO v2: the Update objects the controller has seen, per Stack uid (from their Stack
 * ownerReference), remembered after they are gone. A run whose Update the controller saw was
 * derived from that Update while it existed — announced, or deliberately not (a retry or resync
 * that repeated its run's result) — so the Stack's `lastUpdate` naming it once the Update is
 * garbage-collected is nothing new (case N20: a resync continuation must not come back as an
 * `UpdateSucceeded` when the resync period exceeds the Update TTL). Only an Update never seen (the
 * controller was down for its whole life) is reported from `lastUpdate`. Bounded:
 * {@link SeenUpdates.PER_STACK} names per Stack, the oldest forgotten first.
 */
export class SeenUpdates {
  static readonly PER_STACK = 64;
  readonly #byStack = new Map<string, Set<string>>();

  /** Records an Update that exists (add or update from the informer). */
  observe(u: Update): void {
    const name = u.metadata.name;
    const uid = u.metadata.ownerReferences?.find((r) => r.kind === 'Stack')?.uid;
    if (uid === undefined || name === undefined || name === '') return;
    let names = this.#byStack.get(uid);
    if (!names) {
      names = new Set();
      this.#byStack.set(uid, names);
    }
    if (names.has(name)) return;
    names.add(name);
    if (names.size > SeenUpdates.PER_STACK) {
      const oldest = names.values().next().value;
      if (oldest !== undefined) names.delete(oldest);
    }
  }

  /** Whether an Update `name` of the Stack `uid` has been seen. */
  seen(uid: string, name: string): boolean {
    return this.#byStack.get(uid)?.has(name) ?? false;
  }

  forget(uid: string): void {
    this.#byStack.delete(uid);
  }
}
