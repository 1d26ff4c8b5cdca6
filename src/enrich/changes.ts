/**
 * Attaches a finished run's change set to its events before they are routed (docs/previews.md,
 * "What a preview would change"; the sources and their order: docs/changes.md, "Sources"): for a
 * PKO v2 Update that succeeded or failed, the workspace
 * pod's log is read through `pods/log` (src/kube/workspace-log.ts, `sinceTime` = the Update's
 * `startTime`), parsed (src/changes/parse.ts) and stripped of every value of every Secret the
 * Stack references and of every value the run marks secret (its log lines, an `up`'s outputs
 * Secret; ./secrets.ts), in every encoding of `secretRedactor`. One read per Update, cached (bounded LRU): started at the
 * run's `started` event with `follow` (bounded in number, time and bytes) and stopped when the
 * run's result arrived from the API and the agent's end line was read, or a short grace after the
 * result (never by a log line alone: the program can print any), so a pod PKO
 * deletes right after the run (`workspaceReclaimPolicy: Delete`) still yields its change set; else read when the result comes. An event waits for it
 * at most `waitMs` (default 3 s), so a status or comment is never held up longer.
 *
 * When the log gives no complete change set (PKO v1 has no workspace pod at all) and the run's
 * permalink is a Pulumi Cloud one naming the Stack's own stack (`permalinkMismatch`: the program
 * can print a permalink), the update is read from the Pulumi Cloud REST API with the Stack's own
 * access token (./pulumi-cloud.ts; cached per Stack uid, token hash and run), waited for at most `cloud.waitMs` more (default
 * 5 s); when that fails too, the log's change set (or the reason there is none) says why in its
 * note.
 *
 * Nothing here fails an event: when no details can be had, the event carries
 * `changes.unavailable`, a sentence starting `no change details:` that says why (the permission
 * to grant, the pod gone, PKO v1, …).
 */
import { createHash } from 'node:crypto';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { NotificationEvent, EventChanges } from '../api/event.ts';
import type { Stack, Update } from '../api/pko.ts';
import { ChangeSetParser } from '../changes/parse.ts';
import type { ChangeSet, IncompleteReason, RunStatus } from '../changes/types.ts';
import type { SecretReader } from '../credential/provider.ts';
import {
  readWorkspaceLog,
  workspaceRunOf,
  type MissingPermission,
  type WorkspaceLogOptions,
  type WorkspaceLogRead,
} from '../kube/workspace-log.ts';
import type { Logger } from '../log.ts';
import {
  accessTokenRefOf,
  cloudRunOf,
  permalinkMismatch,
  readCloudChangeSet,
  type CloudResult,
  type CloudRunRef,
  type PulumiCloudOptions,
} from './pulumi-cloud.ts';
import {
  MAX_STACK_SECRETS,
  RedactionBudgetExceeded,
  redactChangeSet,
  SecretMarks,
  secretObjectReader,
  secretOutputValues,
  secretRedactor,
  type SecretObjectReader,
  stackSecretRefs,
  type SecretRedactor,
} from './secrets.ts';

/** The `unavailable` text of a PKO v1 run's events. */
export const PKO_V1_UNAVAILABLE = 'no change details: PKO v1 runs in the operator process; no workspace log';

export interface ChangeAttacherOptions {
  kubeConfig: KubeConfig;
  /** The Update informer's getter. */
  update: (namespace: string, name: string) => Update | undefined;
  /** Reads a Secret's values (src/credential/secrets.ts); undefined when it does not exist. */
  readSecret: SecretReader;
  logger: Logger;
  /** How long an event waits for its run's change set, ms. Default 3,000. */
  waitMs?: number;
  /** Updates whose change set is kept. Default 256. */
  cacheSize?: number;
  /**
   * Runs that ended longer ago than this (ms) are not read: their events were most likely
   * delivered before (after a restart every past Update is routed again). Default 15 minutes.
   */
  maxAgeMs?: number;
  /**
   * Follow a run's log from its `started` event on (at most this many runs at once; 0: never),
   * so that a Stack with `workspaceReclaimPolicy: Delete`, whose pod PKO deletes right after a
   * successful run, still yields its change set. Default 32.
   */
  maxFollows?: number;
  /** Deadline of one follow, ms. Default 30 minutes. */
  followTimeoutMs?: number;
  /** How long a follow goes on after its run's result arrived (the log's last lines may still be on their way), ms. Default 2,000. */
  followGraceMs?: number;
  /** Options of the log read (deadline, byte cap). Default: 20 s, 4 MiB. */
  log?: Omit<WorkspaceLogOptions, 'kubeConfig' | 'follow' | 'signal'>;
  now?: () => number;
  /** Reads a workspace log; default {@link readWorkspaceLog} (tests pass their own). */
  readLog?: typeof readWorkspaceLog;
  /**
   * Reads a Secret with its annotations — PKO's outputs Secret of an `up`, whose secret outputs
   * are removed like values the run marks secret; default {@link secretObjectReader}.
   */
  readSecretObject?: SecretObjectReader;
  /**
   * Records a Warning Event on the Stack (reason {@link CHANGES_UNAVAILABLE_REASON}) when an admin
   * can fix what kept the details away: a missing permission (the message names it) or a Secret
   * that could not be read for redaction. Once per Update read.
   */
  warn?: (stack: Stack, reason: string, message: string) => void;
  /**
   * Pulumi Cloud reads (./pulumi-cloud.ts): the dispatcher they go through (production: one that
   * obeys the egress policy), their bounds, and how long an event waits for one after the log,
   * `waitMs` (default 5,000).
   */
  cloud?: Omit<PulumiCloudOptions, 'signal' | 'now'> & { waitMs?: number };
}

/** Reason of the Warning Event for details an admin can make available. */
export const CHANGES_UNAVAILABLE_REASON = 'ChangeSetUnavailable';

const unavailable = (why: string): EventChanges => ({ unavailable: `no change details: ${why}` });

/** One Update's read: its change set (or why none). */
interface Read {
  changes: EventChanges;
}

/**
 * One Update's read as cached: the read, and the values its log marks secret, filled line by
 * line while it runs (so an event that cannot wait for the whole read still has those seen).
 */
interface ReadEntry {
  p: Promise<Read>;
  marks: SecretMarks;
}

/** A Pulumi Cloud read as cached (per Stack uid, credential and run); a failure kept 30 s. */
interface CloudEntry {
  at: number;
  p: Promise<CloudResult>;
  failed?: boolean;
}

/**
 * A Stack's redactor (./secrets.ts) or why there is none (a sentence without the `no change
 * details:` prefix), kept per Stack uid while its resourceVersion stays and for at most
 * {@link SECRETS_TTL_MS} (a Secret's values change without the Stack changing).
 */
interface StackSecrets {
  resourceVersion: string;
  at: number;
  p: Promise<SecretRedactor | string>;
}

/** How long a failed Pulumi Cloud read is remembered (not asked again), ms. */
const CLOUD_FAILURE_TTL_MS = 30_000;

/** How long a Stack's Secret values are kept, ms. */
const SECRETS_TTL_MS = 60_000;
/** How long a `pods/log` 403 in a namespace is remembered (no read, no Warning Event), ms. */
export const FORBIDDEN_TTL_MS = 5 * 60_000;

/**
 * `message` without the CLI output, saying why: for when the Stack's Secret values could not be
 * removed from it. Kept: the synthesized head (`Update of stack acme/app/dev failed`,
 * src/source/derive.ts), which PKO's text follows after `:` on the same line or the next ones;
 * a message not of that shape is left out whole.
 */
export function withoutOutput(message: string, why: string): string {
  const nl = message.indexOf('\n');
  const first = nl < 0 ? message : message.slice(0, nl);
  const head = /^(.*? (?:succeeded|failed))(?::|$)/.exec(first)?.[1];
  if (head === undefined) return `(the message is left out: ${why})`;
  if (head === message) return message;
  return `${head}:\n(the CLI output is left out: ${why})`;
}

/**
 * Whether `update`'s run had ended, and when, for the change-set parser (a log line never ends a
 * run): ended when its `Complete` condition is True or it has an `endTime` (PKO 2.9 writes none
 * for a failed run), as `updates()` gives it (the informer's copy, the caller's). When it has not
 * (a follow that ended as the pod went, a moment before the informer saw the result), asked again
 * every 100 ms, at most `tries` times.
 */
async function runStatusOf(updates: () => (Update | undefined)[], tries: number): Promise<RunStatus> {
  for (let i = 0; ; i++) {
    for (const u of updates()) {
      const complete = u?.status?.conditions?.find((c) => c.type === 'Complete' && c.status === 'True');
      const endTime = u?.status?.endTime ?? complete?.lastTransitionTime;
      if (complete !== undefined || u?.status?.endTime !== undefined)
        return endTime === undefined ? { runComplete: true } : { runComplete: true, endTime };
    }
    if (i >= tries) return { runComplete: false };
    await new Promise((resolve) => setTimeout(resolve, 100).unref());
  }
}

/** The agent's end-of-run line (logger `server`; the program cannot write on that logger through the CLI). */
const AGENT_RUN_END = /^\S+\t[A-Z]+\tserver\t(?:preview|up|refresh|destroy) completed/;
/** A CLI banner line (logger `pulumi`): a run's lines start after it. */
const CLI_BANNER = /^\S+\tINFO\tpulumi\t(?:Previewing |Updating |Refreshing |Destroying |Importing )/;

/**
 * How long the log must stay quiet after the agent's end line before a follow whose result
 * arrived stops, ms: a forged end line (written into the agent's output) may precede the real
 * lines still on their way, and they keep the log busy.
 */
const FOLLOW_QUIET_MS = 500;

/**
 * A run's log being followed. After the run's result arrived from the API it stops at the
 * latest {@link ChangeAttacherOptions.followGraceMs} later, and sooner when the last line read is
 * the agent's end line (after a banner) and nothing came for {@link FOLLOW_QUIET_MS}: the agent
 * writes that line after the CLI exited and before it answers PKO, so every line of the run was
 * written by then. A log line alone never stops it (a forged end line would end the read before
 * the real deletes).
 */
interface Follow {
  stop: AbortController;
  /** A banner line was read. */
  banner: boolean;
  /** The last line read is the agent's end line, after a banner. */
  lastIsEnd: boolean;
  /** When the last line was read (ms, `now()`). */
  lastAt: number;
}

/** Enriches routed events with their run's change set (see the module comment). */
export class ChangeAttacher {
  readonly #o: ChangeAttacherOptions;
  /**
   * Stack uid + Update uid → its change set (a promise while being read) and the values its log
   * marks secret; insertion order is recency. Keyed by the Stack too: a set is redacted with
   * that Stack's Secrets.
   */
  readonly #cache = new Map<string, ReadEntry>();
  /** Update uid → its follow while it runs. */
  readonly #follows = new Map<string, Follow>();
  /** Updates a follow was started for (bounded): each run is followed once at most. */
  readonly #followed = new Set<string>();
  /** Stack uid → its Secrets' redactor (bounded like the change sets). */
  readonly #secrets = new Map<string, StackSecrets>();
  /**
   * Namespace → until when (ms) its workspace logs are not read (a 403 was answered) and the
   * permission that lacked: each Stack's text names that Stack, never the first one's.
   */
  readonly #forbidden = new Map<string, { until: number; permission?: MissingPermission }>();
  /**
   * Stack uid, a hash of its access token and the run → its Pulumi Cloud read (bounded like the
   * change sets; a failure kept 30 s). Looked up only after the Stack's own token was read: a
   * Stack without one, or with another token, never gets another's read or failure.
   */
  readonly #cloud = new Map<string, CloudEntry>();
  /** Aborts every Pulumi Cloud read at shutdown. */
  readonly #stopping = new AbortController();

  constructor(opts: ChangeAttacherOptions) {
    this.#o = opts;
  }

  /** Ends every follow (at shutdown); what they read so far is parsed as usual. */
  stop(): void {
    this.#stopping.abort();
    for (const f of this.#follows.values()) f.stop.abort();
    this.#follows.clear();
  }

  /** Updates whose change set is cached (for tests and metrics). */
  get cached(): number {
    return this.#cache.size;
  }

  /**
   * `ev` with `changes` set when it reports a finished run (`succeeded`/`failed`); other events
   * as they are. Waits at most `waitMs`. Never throws.
   */
  async attach(stack: Stack, ev: NotificationEvent): Promise<NotificationEvent> {
    const phase = ev.identity.phase.kind;
    const run = ev.identity.run;
    if (phase === 'started' && run.kind === 'update') {
      this.#follow(stack, run.name);
      return ev;
    }
    if (phase !== 'succeeded' && phase !== 'failed') return ev;
    const waitMs = this.#o.waitMs ?? 3000;
    const deadline = (this.#o.now ?? Date.now)() + waitMs;
    // The message of a failed run holds the CLI's output: the Stack's Secret values go from it
    // whatever becomes of the change set (read on their own, so even without a log), and so do
    // the values the run marks secret — those its log marked (as far as it was read by then),
    // those Pulumi Cloud's events marked, and those the message itself marks.
    const secrets = withDeadline(
      this.#stackSecrets(stack),
      waitMs,
      () => `the Stack's Secrets were not read within ${String(waitMs / 1000)} s`,
    );
    const cloud = cloudRunOf(
      ev.metadata.permalink,
      (stack.spec as Record<string, unknown> | undefined)?.backend,
    );
    const maxAge = this.#o.maxAgeMs ?? 15 * 60_000;
    if (run.kind === 'v1') {
      const v1: EventChanges = { unavailable: PKO_V1_UNAVAILABLE };
      // After a restart every past run is routed again: old ones are not asked of Pulumi Cloud.
      const age = (this.#o.now ?? Date.now)() - Date.parse(ev.timestamp);
      const got =
        cloud === undefined || age > maxAge
          ? { changes: v1, marked: [] }
          : await this.#withCloud(stack, cloud, v1);
      return {
        ...ev,
        message: await this.#redactMessage(ev.message, secrets, undefined, got.marked),
        changes: got.changes,
      };
    }
    if (run.kind !== 'update') return { ...ev, message: await this.#redactMessage(ev.message, secrets) };
    const ns = stack.metadata.namespace ?? '';
    const update = this.#o.update(ns, run.name);
    if (update === undefined)
      return {
        ...ev,
        message: await this.#redactMessage(ev.message, secrets),
        changes: unavailable(`the Update ${ns}/${run.name} is gone`),
      };
    const now = (this.#o.now ?? Date.now)();
    // PKO 2.9 writes no endTime for a failed run: its Complete condition says when it ended.
    const complete = update.status?.conditions?.find((c) => c.type === 'Complete' && c.status === 'True');
    const ended = Date.parse(update.status?.endTime ?? complete?.lastTransitionTime ?? '');
    const key = runKey(stack, update, run.name);
    const follow = this.#follows.get(key);
    if (follow !== undefined) {
      // The run is over (the API says so): its last lines are in the log or on their way. Stop
      // once the agent's end line is the last line and the log stays quiet, or after a grace.
      this.#stopFollow(follow);
      this.#follows.delete(key);
    }
    let entry = this.#cache.get(key);
    if (entry === undefined) {
      if (!Number.isNaN(ended) && now - ended > maxAge) {
        return {
          ...ev,
          message: await this.#redactMessage(ev.message, secrets),
          changes: unavailable(
            `the run ended more than ${String(Math.round(maxAge / 60_000))} minutes before the controller looked; its workspace log is not read any more`,
          ),
        };
      }
      const marks = new SecretMarks();
      entry = { p: this.#read(stack, update, marks), marks };
      this.#remember(key, entry);
    } else {
      this.#cache.delete(key);
      this.#cache.set(key, entry);
    }
    const read = await withDeadline(entry.p, Math.max(0, deadline - (this.#o.now ?? Date.now)()), () => ({
      changes: unavailable(
        `the workspace log was not read within ${String(waitMs / 1000)} s; the result was sent without it`,
      ),
    }));
    const got =
      cloud === undefined || read.changes.set?.complete === true
        ? { changes: read.changes, marked: [] }
        : await this.#withCloud(stack, cloud, read.changes);
    return {
      ...ev,
      message: await this.#redactMessage(ev.message, secrets, entry.marks, got.marked),
      changes: got.changes,
    };
  }

  /** Caches `entry` under `key`, the oldest going past `cacheSize`. */
  #remember(key: string, entry: ReadEntry): void {
    this.#cache.set(key, entry);
    while (this.#cache.size > (this.#o.cacheSize ?? 256)) {
      const oldest = this.#cache.keys().next().value;
      if (oldest === undefined) break;
      this.#cache.delete(oldest);
    }
  }

  /**
   * `fallback` (what the log gave, or why nothing) replaced by the run's change set from Pulumi
   * Cloud when that can be read within `cloud.waitMs`; else `fallback` with the reason added
   * (in its note, or to its `unavailable` sentence). Also the values the read's events mark
   * secret (for the message). In order: the permalink must name the Stack's own stack (else no
   * read: a program can print the permalink), then the Stack's own token is read, and only then
   * is the cache — keyed by the Stack's uid, a hash of that token and the run — looked at.
   */
  async #withCloud(
    stack: Stack,
    ref: CloudRunRef,
    fallback: EventChanges,
  ): Promise<{ changes: EventChanges; marked: string[] }> {
    const waitMs = this.#o.cloud?.waitMs ?? 5_000;
    const started = (this.#o.now ?? Date.now)();
    const without = (reason: string): { changes: EventChanges; marked: string[] } => {
      const said = `Pulumi Cloud: ${reason}`;
      if (fallback.set !== undefined)
        return {
          changes: {
            set: {
              ...fallback.set,
              note: fallback.set.note === undefined ? said : `${fallback.set.note}; ${said}`,
            },
          },
          marked: [],
        };
      return { changes: { unavailable: `${fallback.unavailable}; ${said}` }, marked: [] };
    };
    const late = `Pulumi Cloud was not read within ${String(waitMs / 1000)} s; the result was sent without it`;
    const mismatch = permalinkMismatch(ref, stack.spec);
    if (mismatch !== undefined) return without(mismatch);
    const token = await withDeadline(this.#token(stack), waitMs, () => ({ reason: late }));
    if ('reason' in token) return without(token.reason);
    const uid = stack.metadata.uid ?? `${stack.metadata.namespace ?? ''}/${stack.metadata.name ?? ''}`;
    const credential = createHash('sha256').update(token.token).digest('hex').slice(0, 32);
    const run = ref.run.kind === 'update' ? String(ref.run.version) : ref.run.id;
    const key = [uid, credential, ref.api, ref.org, ref.project, ref.stack, run].join('\u0000');
    const now = (this.#o.now ?? Date.now)();
    let hit = this.#cloud.get(key);
    if (hit !== undefined && hit.failed === true && now - hit.at > CLOUD_FAILURE_TTL_MS) hit = undefined;
    if (hit === undefined) {
      const entry: CloudEntry = {
        at: now,
        p: this.#readCloud(stack, ref, token.token)
          .catch((): CloudResult => ({ ok: false, reason: 'reading Pulumi Cloud failed' }))
          .then((r) => {
            if (!r.ok) {
              entry.failed = true;
              this.#o.logger.info(
                { stack: `${stack.metadata.namespace ?? ''}/${stack.metadata.name ?? ''}`, reason: r.reason },
                'no change set from Pulumi Cloud',
              );
            }
            return r;
          }),
      };
      hit = entry;
      this.#cloud.delete(key);
      this.#cloud.set(key, entry);
      while (this.#cloud.size > (this.#o.cacheSize ?? 256)) {
        const oldest = this.#cloud.keys().next().value;
        if (oldest === undefined) break;
        this.#cloud.delete(oldest);
      }
    }
    const left = Math.max(0, waitMs - ((this.#o.now ?? Date.now)() - started));
    const res = await withDeadline(hit.p, left, (): CloudResult => ({ ok: false, reason: late }));
    if (res.ok) return { changes: { set: res.set }, marked: res.marked };
    return without(res.reason);
  }

  /** The Stack's own Pulumi access token (spec.envRefs, accessTokenSecret, envSecrets), or why none. */
  async #token(stack: Stack): Promise<{ token: string } | { reason: string }> {
    const ns = stack.metadata.namespace ?? '';
    const tokenRef = accessTokenRefOf(stack.spec);
    if (tokenRef === undefined)
      return {
        reason:
          'the Stack names no Pulumi access token (spec.envRefs.PULUMI_ACCESS_TOKEN or spec.accessTokenSecret) to read the run with',
      };
    if ('literal' in tokenRef) {
      const v = tokenRef.literal.trim();
      return v === '' ? { reason: "the Stack's literal PULUMI_ACCESS_TOKEN is empty" } : { token: v };
    }
    const names = 'secret' in tokenRef ? [tokenRef.secret] : tokenRef.envSecrets;
    for (const name of names) {
      let data: Record<string, string> | undefined;
      try {
        data = await this.#o.readSecret(ns, name);
      } catch {
        return {
          reason: `the controller could not read the Secret ${ns}/${name} holding the Stack's Pulumi access token (it needs get on secrets in namespace ${ns})`,
        };
      }
      const v = data?.['secret' in tokenRef ? tokenRef.key : 'PULUMI_ACCESS_TOKEN'];
      if (v !== undefined && v.trim() !== '') return { token: v.trim() };
    }
    return {
      reason: `the Secret ${ns}/${names.join(', ')} holds no Pulumi access token under the key the Stack names`,
    };
  }

  /**
   * The run from Pulumi Cloud read with `token`, with the Stack's Secret values (`[redacted]`)
   * and the values its events mark secret (`[secret]`) removed.
   */
  async #readCloud(stack: Stack, ref: CloudRunRef, token: string): Promise<CloudResult> {
    const { waitMs: _wait, ...cloudOpts } = this.#o.cloud ?? {};
    const res = await readCloudChangeSet(ref, token, {
      ...cloudOpts,
      signal: this.#stopping.signal,
      ...(this.#o.now ? { now: this.#o.now } : {}),
    });
    if (!res.ok) return res;
    const base = await this.#stackSecrets(stack);
    if (typeof base === 'string') return { ok: false, reason: base };
    const red = base.withMarked(res.marked);
    if (typeof red === 'string') return { ok: false, reason: red };
    try {
      return { ok: true, set: redactChangeSet(res.set, red, { work: 0 }, base), marked: res.marked };
    } catch (err) {
      if (err instanceof RedactionBudgetExceeded) return { ok: false, reason: err.message };
      throw err;
    }
  }

  /**
   * `message` without the Stack's Secret values (`[redacted]`) and the values the run marks
   * secret (`[secret]`: those `marks` holds — what its log marked, as far as it was read — those
   * `marked` (Pulumi Cloud's events), and those the message itself marks); without its CLI
   * output (saying why) when the Secrets cannot be had in time, the marks are over their bounds,
   * or the redaction is over its work budget.
   */
  async #redactMessage(
    message: string,
    secrets: Promise<SecretRedactor | string>,
    marks?: SecretMarks,
    marked: readonly string[] = [],
  ): Promise<string> {
    const base = await secrets;
    if (typeof base === 'string') return withoutOutput(message, base);
    const own = new SecretMarks();
    for (const line of message.split('\n')) own.take(line);
    const over = marks?.overflow ?? own.overflow;
    if (over !== undefined) return withoutOutput(message, over);
    const red = base.withMarked([...(marks?.values ?? []), ...own.values, ...marked]);
    if (typeof red === 'string') return withoutOutput(message, red);
    try {
      return red.redact(message, { work: 0 });
    } catch (err) {
      if (err instanceof RedactionBudgetExceeded) return withoutOutput(message, err.message);
      throw err;
    }
  }

  /**
   * The redactor of the Secrets `stack` references (cached per Stack uid and resourceVersion,
   * for at most a minute), or why there is none. A Secret that cannot be read records a Warning
   * Event (once per cache entry).
   */
  #stackSecrets(stack: Stack): Promise<SecretRedactor | string> {
    const uid = stack.metadata.uid ?? `${stack.metadata.namespace ?? ''}/${stack.metadata.name ?? ''}`;
    const rv = stack.metadata.resourceVersion ?? '';
    const now = (this.#o.now ?? Date.now)();
    const hit = this.#secrets.get(uid);
    if (hit !== undefined && hit.resourceVersion === rv && now - hit.at < SECRETS_TTL_MS) return hit.p;
    const p = this.#readSecrets(stack);
    this.#secrets.delete(uid);
    this.#secrets.set(uid, { resourceVersion: rv, at: now, p });
    while (this.#secrets.size > (this.#o.cacheSize ?? 256)) {
      const oldest = this.#secrets.keys().next().value;
      if (oldest === undefined) break;
      this.#secrets.delete(oldest);
    }
    return p;
  }

  async #readSecrets(stack: Stack): Promise<SecretRedactor | string> {
    const ns = stack.metadata.namespace ?? '';
    const where = `${ns}/${stack.metadata.name ?? ''}`;
    const refs = stackSecretRefs(stack);
    if (refs.secrets.length > MAX_STACK_SECRETS) {
      return `the Stack references ${String(refs.secrets.length)} Secrets, more than the ${String(MAX_STACK_SECRETS)} whose values the controller removes from change sets`;
    }
    const values = [...refs.literals];
    for (const name of refs.secrets) {
      let data: Record<string, string> | undefined;
      try {
        data = await this.#o.readSecret(ns, name);
      } catch (err) {
        this.#o.logger.warn(
          { stack: where, secret: name, err: String(err).slice(0, 200) },
          'cannot read a Secret the Stack references',
        );
        const why = `the controller could not read the Secret ${ns}/${name} the Stack references, to remove its values (it needs get on secrets in namespace ${ns})`;
        this.#o.warn?.(stack, CHANGES_UNAVAILABLE_REASON, `no change details: ${why}`);
        return why;
      }
      if (data === undefined) continue; // gone: the run could not have used it either
      values.push(...Object.values(data));
    }
    return secretRedactor(values);
  }

  /**
   * Adds to `marks` the values of the secret outputs of `update` (an `up`: PKO's outputs Secret,
   * `status.outputs`, lists them in its `pulumi.com/secrets` annotation). A Secret that cannot be
   * read is logged and left: the log's own marks and the Stack's Secrets still apply.
   */
  async #secretOutputs(stack: Stack, update: Update, marks: SecretMarks): Promise<void> {
    const name = update.status?.outputs;
    if (typeof name !== 'string' || name === '') return;
    const ns = update.metadata.namespace ?? stack.metadata.namespace ?? '';
    try {
      const secret = await (this.#o.readSecretObject ?? secretObjectReader(this.#o.kubeConfig))(ns, name);
      if (secret !== undefined) for (const v of secretOutputValues(secret)) marks.add(v);
    } catch (err) {
      this.#o.logger.warn(
        { stack: `${ns}/${stack.metadata.name ?? ''}`, secret: name, err: String(err).slice(0, 200) },
        "cannot read the run's outputs Secret; its secret outputs are not removed by value",
      );
    }
  }

  /** Stops `follow` (its run's result arrived) as {@link Follow} says. */
  #stopFollow(follow: Follow): void {
    const now = this.#o.now ?? Date.now;
    const until = now() + (this.#o.followGraceMs ?? 2_000);
    const check = (): void => {
      if (follow.stop.signal.aborted) return;
      const t = now();
      if (t >= until || (follow.lastIsEnd && t - follow.lastAt >= FOLLOW_QUIET_MS)) {
        follow.stop.abort();
        return;
      }
      setTimeout(check, 100).unref();
    };
    check();
  }

  /** Starts following the log of the Update `name` of `stack`, unless one is cached or followed. */
  #follow(stack: Stack, name: string): void {
    const max = this.#o.maxFollows ?? 32;
    if (max <= 0 || this.#follows.size >= max) return;
    const update = this.#o.update(stack.metadata.namespace ?? '', name);
    const complete = update?.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True');
    if (update === undefined || complete === true || update.status?.endTime !== undefined) return;
    const key = runKey(stack, update, name);
    if (this.#cache.has(key) || this.#followed.has(key)) return;
    this.#followed.add(key);
    if (this.#followed.size > 4 * (this.#o.cacheSize ?? 256)) {
      const oldest = this.#followed.values().next().value;
      if (oldest !== undefined) this.#followed.delete(oldest);
    }
    const follow: Follow = { stop: new AbortController(), banner: false, lastIsEnd: false, lastAt: 0 };
    this.#follows.set(key, follow);
    const marks = new SecretMarks();
    const entry: ReadEntry = {
      marks,
      p: this.#read(stack, update, marks, follow).then((r) => {
        if (this.#follows.get(key) === follow) this.#follows.delete(key);
        // Nothing found (e.g. it started before the pod): the run's result reads once more.
        if (r.changes.set === undefined && this.#cache.get(key) === entry) this.#cache.delete(key);
        return r;
      }),
    };
    this.#remember(key, entry);
  }

  /**
   * The change set of the finished run `update` of `stack`, read now from its workspace log and
   * redacted as for events (no cache, no follow; src/drift reads its check Stacks' runs this
   * way). Never throws.
   */
  async changesOf(stack: Stack, update: Update): Promise<EventChanges> {
    return this.#changes(stack, update, new SecretMarks());
  }

  async #read(stack: Stack, update: Update, marks: SecretMarks, follow?: Follow): Promise<Read> {
    return { changes: await this.#changes(stack, update, marks, follow) };
  }

  /**
   * The change set of `update`: the log first (a namespace whose `pods/log` answered 403 is not
   * asked again for {@link FORBIDDEN_TTL_MS}, and warned about once), then the Stack's Secrets;
   * every line goes through `marks` (the values the run marks secret), which are removed too.
   */
  async #changes(stack: Stack, update: Update, marks: SecretMarks, follow?: Follow): Promise<EventChanges> {
    const log = this.#o.logger;
    const where = `${stack.metadata.namespace ?? ''}/${stack.metadata.name ?? ''}`;
    try {
      // PKO 2.9 writes `startTime` only for a run that succeeded: a failed run started after its
      // Update was created.
      const created = update.metadata.creationTimestamp;
      const started = update.status?.startTime ?? (created instanceof Date ? created.toISOString() : created);
      const run = workspaceRunOf(
        stack,
        started === undefined ? update : { ...update, status: { ...update.status, startTime: started } },
      );
      if (typeof run === 'string') return unavailable(run);
      const now = (this.#o.now ?? Date.now)();
      const forbidden = this.#forbidden.get(run.namespace);
      if (forbidden !== undefined && forbidden.until > now)
        return unavailable(forbiddenMessage(run.namespace, run.stackName, forbidden.permission));
      const parser = new ChangeSetParser();
      const res = await (this.#o.readLog ?? readWorkspaceLog)(
        run,
        (line, cut) => {
          parser.push(`${line}\n`);
          marks.take(line, cut);
          if (follow !== undefined) {
            if (CLI_BANNER.test(line)) follow.banner = true;
            follow.lastIsEnd = follow.banner && AGENT_RUN_END.test(line);
            follow.lastAt = (this.#o.now ?? Date.now)();
          }
        },
        follow === undefined
          ? { kubeConfig: this.#o.kubeConfig, timeoutMs: 20_000, ...this.#o.log }
          : {
              kubeConfig: this.#o.kubeConfig,
              ...this.#o.log,
              timeoutMs: this.#o.followTimeoutMs ?? 30 * 60_000,
              follow: true,
              signal: follow.stop.signal,
            },
      );
      if (!res.ok) {
        log.info({ stack: where, update: update.metadata.name, reason: res.reason }, res.message);
        if (res.reason === 'Forbidden') {
          const known = this.#forbidden.get(run.namespace);
          const at = (this.#o.now ?? Date.now)();
          if (known === undefined || known.until <= at)
            this.#o.warn?.(stack, CHANGES_UNAVAILABLE_REASON, `no change details: ${res.message}`);
          this.#forbidden.delete(run.namespace);
          this.#forbidden.set(run.namespace, {
            until: at + FORBIDDEN_TTL_MS,
            ...(res.permission === undefined ? {} : { permission: res.permission }),
          });
          if (this.#forbidden.size > 1024) {
            const oldest = this.#forbidden.keys().next().value;
            if (oldest !== undefined) this.#forbidden.delete(oldest);
          }
        }
        return unavailable(res.message);
      }
      // The end is the Update's (a followed run's, once its result came: at most 30 s more).
      const set = withReadCuts(
        parser.end(
          await runStatusOf(
            () => [
              this.#o.update(update.metadata.namespace ?? run.namespace, update.metadata.name ?? ''),
              update,
            ],
            follow === undefined ? 0 : 300,
          ),
        ),
        res,
        follow !== undefined && !this.#stopping.signal.aborted,
      );
      if (set.run === undefined) {
        return unavailable(
          `the workspace pod's log holds no Pulumi run since ${run.startTime} (rotated, or the pod was replaced)`,
        );
      }
      await this.#secretOutputs(stack, update, marks);
      // Secret values next: without them, nothing may be shown.
      const base = await this.#stackSecrets(stack);
      if (typeof base === 'string') return unavailable(base);
      if (marks.overflow !== undefined) return unavailable(marks.overflow);
      const red = base.withMarked([...marks.values]);
      if (typeof red === 'string') return unavailable(red);
      // Marks (program output) never hide which resource changes: names and URNs keep them.
      return { set: redactChangeSet(set, red, { work: 0 }, base) };
    } catch (err) {
      if (err instanceof RedactionBudgetExceeded) return unavailable(err.message);
      log.warn(
        { stack: where, update: update.metadata.name, err: String(err).slice(0, 200) },
        'reading a change set failed',
      );
      return unavailable('reading the workspace log failed');
    }
  }
}

/**
 * `set` made incomplete when the read did not see the whole log (a program can pad the log past
 * the byte cap, or a line past the line cap, so that the CLI's real lines are not read): the
 * byte cap (`input-cap`), a cut line (`input-cap`), a deadline or a broken connection
 * or a fragment at the end (`no-end`), a container restart during the run (`no-run`). A follow
 * the controller itself stopped after the run's result (`followed`) ends `stopped` as it should.
 */
function withReadCuts(set: ChangeSet, res: WorkspaceLogRead, followed: boolean): ChangeSet {
  const cuts: IncompleteReason[] = [];
  if (res.end === 'byteLimit' || res.cutLines > 0) cuts.push('input-cap');
  if (
    res.end === 'deadline' ||
    res.end === 'interrupted' ||
    (res.end === 'stopped' && !followed) ||
    (res.end === 'eof' && res.droppedFragment)
  )
    cuts.push('no-end');
  if (res.restartedDuringRun) cuts.push('no-run');
  const added = cuts.filter((r) => !set.incomplete.includes(r));
  if (added.length === 0) return set;
  return { ...set, complete: false, incomplete: [...set.incomplete, ...added] };
}

/** The cache key of a run of `stack`: its uid and the Update's (its name when it has no uid). */
function runKey(stack: Stack, update: Update, name: string): string {
  const s = stack.metadata.uid ?? `${stack.metadata.namespace ?? ''}/${stack.metadata.name ?? ''}`;
  return `${s}\u0000${update.metadata.uid ?? `${update.metadata.namespace ?? ''}/${name}`}`;
}

/**
 * The `no change details` text of a Stack whose namespace answered 403 less than
 * {@link FORBIDDEN_TTL_MS} ago: names this Stack and the permission that lacked (as
 * src/kube/workspace-log.ts says it), never the Stack that met the refusal.
 */
export function forbiddenMessage(namespace: string, stackName: string, perm?: MissingPermission): string {
  const what =
    perm === undefined
      ? `the controller was refused (403) reading workspace logs in namespace ${namespace}`
      : `the controller may not get ${perm.apiGroup === '' ? perm.resource : `${perm.resource}.${perm.apiGroup}`} in namespace ${perm.namespace}`;
  return `cannot read the workspace log of Stack ${namespace}/${stackName}: ${what}; grant the ClusterRole pko-notification-controller-workspace-logs there with a RoleBinding (config/components/workspace-logs, docs/install.md)`;
}

/** `p`, or `late()` when it has not settled within `ms`. */
async function withDeadline<T>(p: Promise<T>, ms: number, late: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<T>((resolve) => {
    timer = setTimeout(() => {
      resolve(late());
    }, ms);
  });
  try {
    return await Promise.race([p, t]);
  } finally {
    clearTimeout(timer);
  }
}
