/**
 * Attaches a finished run's change set to its events before they are routed (docs/previews.md,
 * "What a preview would change"): for a PKO v2 Update that succeeded or failed, the workspace
 * pod's log is read through `pods/log` (src/kube/workspace-log.ts, `sinceTime` = the Update's
 * `startTime`), parsed (src/changes/parse.ts) and stripped of every value of every Secret the
 * Stack references (./secrets.ts). One read per Update, cached (bounded LRU); an event waits for
 * it at most `waitMs` (default 3 s), so a status or comment is never held up longer.
 *
 * Nothing here fails an event: when no details can be had, the event carries
 * `changes.unavailable`, a sentence starting `no change details:` that says why (the permission
 * to grant, the pod gone, PKO v1, …).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { NotificationEvent, EventChanges } from '../api/event.ts';
import type { Stack, Update } from '../api/pko.ts';
import { ChangeSetParser } from '../changes/parse.ts';
import type { SecretReader } from '../credential/provider.ts';
import { readWorkspaceLog, workspaceRunOf, type WorkspaceLogOptions } from '../kube/workspace-log.ts';
import type { Logger } from '../log.ts';
import { MAX_STACK_SECRETS, redactChangeSet, redactText, stackSecretRefs } from './secrets.ts';

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
  /** Options of the log read (deadline, byte cap). Default: 20 s, 4 MiB. */
  log?: Omit<WorkspaceLogOptions, 'kubeConfig' | 'follow' | 'signal'>;
  now?: () => number;
  /**
   * Records a Warning Event on the Stack (reason {@link CHANGES_UNAVAILABLE_REASON}) when an admin
   * can fix what kept the details away: a missing permission (the message names it) or a Secret
   * that could not be read for redaction. Once per Update read.
   */
  warn?: (stack: Stack, reason: string, message: string) => void;
}

/** Reason of the Warning Event for details an admin can make available. */
export const CHANGES_UNAVAILABLE_REASON = 'ChangeSetUnavailable';

const unavailable = (why: string): EventChanges => ({ unavailable: `no change details: ${why}` });

/** One Update's read: its change set (or why none) and the Secret values found for it. */
interface Read {
  changes: EventChanges;
  values: readonly string[];
}

/** Enriches routed events with their run's change set (see the module comment). */
export class ChangeAttacher {
  readonly #o: ChangeAttacherOptions;
  /** Update uid → its change set (a promise while being read); insertion order is recency. */
  readonly #cache = new Map<string, Promise<Read>>();

  constructor(opts: ChangeAttacherOptions) {
    this.#o = opts;
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
    if (phase !== 'succeeded' && phase !== 'failed') return ev;
    const run = ev.identity.run;
    if (run.kind === 'v1') return { ...ev, changes: { unavailable: PKO_V1_UNAVAILABLE } };
    if (run.kind !== 'update') return ev;
    const ns = stack.metadata.namespace ?? '';
    const update = this.#o.update(ns, run.name);
    if (update === undefined) return { ...ev, changes: unavailable(`the Update ${ns}/${run.name} is gone`) };
    const now = (this.#o.now ?? Date.now)();
    const ended = Date.parse(update.status?.endTime ?? '');
    const maxAge = this.#o.maxAgeMs ?? 15 * 60_000;
    const key = update.metadata.uid ?? `${ns}/${run.name}`;
    let p = this.#cache.get(key);
    if (p === undefined) {
      if (!Number.isNaN(ended) && now - ended > maxAge) {
        return {
          ...ev,
          changes: unavailable(
            `the run ended more than ${String(Math.round(maxAge / 60_000))} minutes before the controller looked; its workspace log is not read any more`,
          ),
        };
      }
      p = this.#read(stack, update);
      this.#cache.set(key, p);
      while (this.#cache.size > (this.#o.cacheSize ?? 256)) {
        const oldest = this.#cache.keys().next().value;
        if (oldest === undefined) break;
        this.#cache.delete(oldest);
      }
    } else {
      this.#cache.delete(key);
      this.#cache.set(key, p);
    }
    const waitMs = this.#o.waitMs ?? 3000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<Read>((resolve) => {
      timer = setTimeout(() => {
        resolve({
          changes: unavailable(
            `the workspace log was not read within ${String(waitMs / 1000)} s; the result was sent without it`,
          ),
          values: [],
        });
      }, waitMs);
    });
    try {
      const read = await Promise.race([p, late]);
      // The message of a failed run holds the CLI's output: the same values go from it.
      const message = read.values.length === 0 ? ev.message : redactText(ev.message, read.values);
      return { ...ev, message, changes: read.changes };
    } finally {
      clearTimeout(timer);
    }
  }

  async #read(stack: Stack, update: Update): Promise<Read> {
    const values: string[] = [];
    const changes = await this.#changes(stack, update, values);
    return { changes, values };
  }

  /** The change set of `update`; `values` receives the Secret values it found (for the message). */
  async #changes(stack: Stack, update: Update, values: string[]): Promise<EventChanges> {
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
      // Secret values first: without them, nothing may be shown.
      const refs = stackSecretRefs(stack);
      if (refs.secrets.length > MAX_STACK_SECRETS) {
        return unavailable(
          `the Stack references ${String(refs.secrets.length)} Secrets, more than the ${String(MAX_STACK_SECRETS)} whose values the controller removes from change sets`,
        );
      }
      values.push(...refs.literals);
      for (const name of refs.secrets) {
        let data: Record<string, string> | undefined;
        try {
          data = await this.#o.readSecret(run.namespace, name);
        } catch (err) {
          log.warn(
            { stack: where, secret: name, err: String(err).slice(0, 200) },
            'cannot read a Secret the Stack references',
          );
          const why = `the controller could not read the Secret ${run.namespace}/${name} the Stack references, to remove its values (it needs get on secrets in namespace ${run.namespace})`;
          this.#o.warn?.(stack, CHANGES_UNAVAILABLE_REASON, `no change details: ${why}`);
          return unavailable(why);
        }
        if (data === undefined) continue; // gone: the run could not have used it either
        values.push(...Object.values(data));
      }
      const parser = new ChangeSetParser();
      const res = await readWorkspaceLog(
        run,
        (line) => {
          parser.push(`${line}\n`);
        },
        { kubeConfig: this.#o.kubeConfig, timeoutMs: 20_000, ...this.#o.log },
      );
      if (!res.ok) {
        log.info({ stack: where, update: update.metadata.name, reason: res.reason }, res.message);
        if (res.reason === 'Forbidden')
          this.#o.warn?.(stack, CHANGES_UNAVAILABLE_REASON, `no change details: ${res.message}`);
        return unavailable(res.message);
      }
      const set = parser.end();
      if (set.run === undefined) {
        return unavailable(
          `the workspace pod's log holds no Pulumi run since ${run.startTime} (rotated, or the pod was replaced)`,
        );
      }
      return { set: redactChangeSet(set, values) };
    } catch (err) {
      log.warn(
        { stack: where, update: update.metadata.name, err: String(err).slice(0, 200) },
        'reading a change set failed',
      );
      return unavailable('reading the workspace log failed');
    }
  }
}
