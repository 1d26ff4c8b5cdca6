/**
 * The preview controller's forge writes that are not on the sync path (case B12; docs/previews.md
 * "Fairness and bounds"): notices — the one edited comment per pull request — and the
 * resolution of a removed preview's pending commit status (P02). A sync only queues them, so a
 * forge that is slow to take comments (or a Provider with a long `spec.timeout`, or GitHub's
 * per-credential comment pacing) delays no preview Stack, of this PullRequestPreview or another.
 *
 * - Coalescing: one job per pull request of a PullRequestPreview (`<namespace>/<name>#<number>`)
 *   and per (commit, context) for statuses; a newer notice replaces a queued one, and a notice
 *   whose body is the one last posted is not queued at all.
 * - Fair: jobs are taken round-robin across PullRequestPreviews (the one served longest ago
 *   first), `concurrency` in parallel, one job per pull request and one per forge client (a
 *   Provider: its writes are paced per credential, so parallel jobs would only wait in the pacer
 *   and out of their time) at a time, and one PullRequestPreview never holds more than
 *   `concurrency - 1` workers.
 * - Bounded: each job has `timeoutMs` (its forge requests are aborted then; the worker is free
 *   at once); at most `maxPending` jobs wait (the oldest are dropped and logged: the next sync
 *   queues what is still needed); results are remembered for at most 10,000 pull requests.
 * - Fenced: a job starts only while `mayWrite()` (the elector's `holdsLease()`), and its write
 *   is made only if `mayWrite()` still holds right before it; otherwise it is dropped — the
 *   replica holding the Lease posts it.
 * Results (the notice's web URL) reach the PullRequestPreview's status at its next sync
 * ({@link NoticeQueue.posted}).
 */
import { LRUCache } from 'lru-cache';
import { errorMessage } from '../kube/client.ts';
import type { Logger } from '../log.ts';
import type { PreviewForge, PullRequestState } from '../forge/types.ts';

/** Default parallel notice jobs. */
export const NOTICE_CONCURRENCY = 4;
/** Default bound of queued jobs (all PullRequestPreviews together). */
export const NOTICE_MAX_PENDING = 5_000;

interface Common {
  /** `<namespace>/<name>` of the PullRequestPreview. */
  preview: string;
  forge: PreviewForge;
  /** The base Stack's repository URL. */
  repoURL: string;
}

/** Create or edit the notice on pull request `number`. */
export interface NoticeJob extends Common {
  kind: 'notice';
  number: number;
  /** Web URL of the pull request ('' when unknown: the notice URL is then not recorded). */
  webURL: string;
  marker: string;
  /** The notice text without the marker (with `gone`: the one used when the lookup fails). */
  body: string;
  /**
   * The preview was removed because the pull request left the open listing of `branch`: the
   * job first reads the pull request ({@link PreviewForge.pullRequestState}, at most half the
   * job's time) and words the notice by {@link goneNotice}.
   */
  gone?: { branch: string; stackName: string };
}

/** When the newest status of `context` on `sha` is pending, set it to failure with `description`. */
export interface ResolveJob extends Common {
  kind: 'resolve';
  sha: string;
  context: string;
  description: string;
  /** The removed preview Stack (for logs). */
  stackName: string;
  /** Also when the commit has no status of `context` yet (a preview whose run never started). */
  whenNone?: boolean;
}

export type ForgeJob = NoticeJob | ResolveJob;

/**
 * The notice of a preview removed because its pull request left the open listing of `branch`,
 * by what the forge says became of it (`state`; undefined: not known — the lookup failed, timed
 * out or found no such pull request). `onlyEdit`: post no new comment, only edit an earlier
 * notice (a pull request merged into `branch`: the base Stack's deployment reports in the
 * preview's comment, so a second comment would be noise).
 */
export function goneNotice(
  state: PullRequestState | undefined,
  branch: string,
  stackName: string,
): { body: string; onlyEdit: boolean } {
  const deleted = `Preview Stack \`${stackName}\` was deleted.`;
  if (state?.state === 'merged' && state.baseRef === branch) {
    return {
      body: `**Preview ended**: this pull request was merged into \`${branch}\`; the deployment is reported in the preview's comment. ${deleted}`,
      onlyEdit: true,
    };
  }
  if (state !== undefined && state.baseRef !== '' && state.baseRef !== branch) {
    return {
      body: `**Preview stopped**: this pull request no longer targets \`${branch}\`: it now targets \`${state.baseRef}\`. ${deleted}`,
      onlyEdit: false,
    };
  }
  if (state?.state === 'closed') {
    return {
      body: `**Preview stopped**: this pull request was closed without merging. ${deleted}`,
      onlyEdit: false,
    };
  }
  return { body: stoppedGone(stackName, branch), onlyEdit: false };
}

/** The notice of a preview removed as `gone` when what became of the pull request is not known. */
export function stoppedGone(stackName: string, branch: string): string {
  return `**Preview stopped**: this pull request is closed or no longer targets \`${branch}\`. Preview Stack \`${stackName}\` was deleted.`;
}

export interface NoticeQueueOptions {
  logger: Logger;
  /** Bound of one job (all its forge requests), ms. */
  timeoutMs: number;
  /** Whether this replica may write now (the elector's `holdsLease()`); default always. */
  mayWrite?: () => boolean;
  concurrency?: number;
  maxPending?: number;
  /**
   * Called when a job leaves the queue (done, failed, timed out, dropped, replaced or forgotten):
   * the owner of the forge clients may close one no job {@link NoticeQueue.uses} any more.
   */
  onRelease?: () => void;
}

const jobKey = (j: ForgeJob): string =>
  j.kind === 'notice' ? `${j.preview}#${String(j.number)}` : `${j.preview}@${j.sha}/${j.context}`;

export class NoticeQueue {
  readonly #o: NoticeQueueOptions;
  readonly #concurrency: number;
  readonly #maxPending: number;
  /** PullRequestPreview → its waiting jobs by key (insertion order = FIFO). */
  readonly #pending = new Map<string, Map<string, ForgeJob>>();
  readonly #running = new Set<string>();
  /** Bodies of the notices being posted now, by job key (a second sync's same notice waits for none). */
  readonly #postingBodies = new Map<string, string>();
  readonly #runningPreviews = new Map<string, number>();
  readonly #runningForges = new Set<PreviewForge>();
  /** Preview → sequence number of its last job start (lower = served longer ago). */
  readonly #served = new Map<string, number>();
  #serveSeq = 0;
  /** Notices posted: `<preview>#<number>` → body and URL. */
  readonly #posted = new LRUCache<string, { body: string; url: string | undefined }>({ max: 10_000 });
  #size = 0;
  #closed = false;
  #idle: (() => void)[] = [];

  constructor(o: NoticeQueueOptions) {
    this.#o = o;
    this.#concurrency = Math.max(1, o.concurrency ?? NOTICE_CONCURRENCY);
    this.#maxPending = Math.max(1, o.maxPending ?? NOTICE_MAX_PENDING);
  }

  /**
   * Queues a job. A notice whose body is the one last posted on that pull request, or the one
   * being posted now, with nothing newer queued, is not queued (two syncs close together would
   * otherwise edit the comment twice with the same text). @returns whether it was queued.
   */
  add(job: ForgeJob): boolean {
    if (this.#closed) return false;
    const key = jobKey(job);
    let jobs = this.#pending.get(job.preview);
    if (
      job.kind === 'notice' &&
      jobs?.has(key) !== true &&
      (this.#posted.get(key)?.body === job.body || this.#postingBodies.get(key) === job.body)
    ) {
      return false;
    }
    if (jobs === undefined) {
      jobs = new Map();
      this.#pending.set(job.preview, jobs);
    }
    const replaced = jobs.has(key);
    if (replaced) {
      jobs.delete(key); // replaced: the newest one, at the back of this preview's line
      this.#size--;
    }
    jobs.set(key, job);
    this.#size++;
    while (this.#size > this.#maxPending) this.#dropOldest();
    this.#pump();
    if (replaced) this.#o.onRelease?.();
    return true;
  }

  /** The notice last posted on pull request `number` of `preview` (body and URL), if any. */
  posted(preview: string, number: number): { body: string; url: string | undefined } | undefined {
    return this.#posted.get(`${preview}#${String(number)}`);
  }

  /** Whether a queued or running job uses forge client `forge`. */
  uses(forge: PreviewForge): boolean {
    if (this.#runningForges.has(forge)) return true;
    for (const jobs of this.#pending.values())
      for (const j of jobs.values()) if (j.forge === forge) return true;
    return false;
  }

  /** Jobs waiting (not running). */
  pendingCount(): number {
    return this.#size;
  }

  /** Drops the notices queued and remembered for `preview` (deleted); status resolutions stay. */
  forget(preview: string): void {
    const jobs = this.#pending.get(preview);
    for (const [k, j] of jobs ?? []) {
      if (j.kind !== 'notice') continue;
      jobs?.delete(k);
      this.#size--;
    }
    if (jobs?.size === 0) this.#pending.delete(preview);
    for (const k of [...this.#posted.keys()]) if (k.startsWith(`${preview}#`)) this.#posted.delete(k);
    this.#o.onRelease?.();
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this.#size === 0 && this.#running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Drops queued jobs and waits up to `deadlineMs` for running ones. */
  async close(deadlineMs: number): Promise<void> {
    this.#closed = true;
    this.#pending.clear();
    this.#size = 0;
    if (this.#running.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.idle(),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, deadlineMs);
      }),
    ]);
    clearTimeout(timer);
  }

  #dropOldest(): void {
    // The preview with the most jobs waiting loses its oldest one.
    let most: Map<string, ForgeJob> | undefined;
    for (const jobs of this.#pending.values()) if (most === undefined || jobs.size > most.size) most = jobs;
    const first = most?.entries().next();
    if (most === undefined || first === undefined || first.done === true) return;
    most.delete(first.value[0]);
    this.#size--;
    queueMicrotask(() => this.#o.onRelease?.());
    this.#o.logger.warn(
      { preview: first.value[1].preview, job: first.value[0], pending: this.#size },
      'preview notice queue full: dropped the oldest job of the busiest PullRequestPreview (the next sync queues it again)',
    );
  }

  /**
   * The next job: round-robin across previews (a preview with nothing running first, then the
   * one served longest ago); one preview never holds more than `concurrency - 1` workers (one
   * stays free for the others).
   */
  #next(): ForgeJob | undefined {
    const cap = this.#concurrency > 1 ? this.#concurrency - 1 : 1;
    let best: { job: ForgeJob; idle: boolean; served: number } | undefined;
    for (const [preview, jobs] of this.#pending) {
      const running = this.#runningPreviews.get(preview) ?? 0;
      if (running >= cap) continue;
      for (const [key, job] of jobs) {
        if (this.#running.has(key) || this.#runningForges.has(job.forge)) continue;
        const c = { job, idle: running === 0, served: this.#served.get(preview) ?? -1 };
        if (best === undefined || (c.idle && !best.idle) || (c.idle === best.idle && c.served < best.served))
          best = c;
        break;
      }
    }
    return best?.job;
  }

  #pump(): void {
    while (this.#running.size < this.#concurrency) {
      const job = this.#next();
      if (job === undefined) break;
      const key = jobKey(job);
      const jobs = this.#pending.get(job.preview);
      jobs?.delete(key);
      this.#size--;
      if (jobs?.size === 0) this.#pending.delete(job.preview);
      this.#served.set(job.preview, ++this.#serveSeq);
      if (this.#served.size > 10_000) {
        for (const p of this.#served.keys()) if (!this.#pending.has(p)) this.#served.delete(p);
      }
      this.#running.add(key);
      if (job.kind === 'notice') this.#postingBodies.set(key, job.body);
      this.#runningForges.add(job.forge);
      this.#runningPreviews.set(job.preview, (this.#runningPreviews.get(job.preview) ?? 0) + 1);
      void this.#run(key, job);
    }
    if (this.#size === 0 && this.#running.size === 0) for (const w of this.#idle.splice(0)) w();
  }

  /**
   * What became of the pull request of a `gone` notice: one read, bounded by half the job's time
   * and by `signal`; undefined when it fails or does not answer in time (logged).
   */
  async #lookUp(job: NoticeJob, signal: AbortSignal): Promise<PullRequestState | undefined> {
    const ms = Math.max(1, Math.floor(this.#o.timeoutMs / 2));
    const ac = new AbortController();
    const stop = (): void => {
      ac.abort(new Error(`reading pull request #${String(job.number)} took longer than ${String(ms)} ms`));
    };
    signal.addEventListener('abort', stop);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => {
        stop();
        resolve('timeout');
      }, ms);
    });
    try {
      const read = job.forge.pullRequestState(job.repoURL, job.number, ac.signal);
      read.catch(() => undefined);
      const r = await Promise.race([read, late]);
      if (r === 'timeout') throw new Error(`the forge did not answer in ${String(ms)} ms`);
      return r;
    } catch (err) {
      this.#o.logger.warn(
        { preview: job.preview, number: job.number, err: errorMessage(err) },
        'cannot tell whether the pull request was merged, closed or retargeted: the notice says "closed or no longer targets"',
      );
      return undefined;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', stop);
    }
  }

  async #run(key: string, job: ForgeJob): Promise<void> {
    const log = this.#o.logger;
    const ac = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => {
        ac.abort(new Error(`preview ${job.kind} took longer than ${String(this.#o.timeoutMs)} ms`));
        resolve('timeout');
      }, this.#o.timeoutMs);
    });
    try {
      if (!(this.#o.mayWrite?.() ?? true)) {
        log.debug({ preview: job.preview, job: key }, 'not holding the Lease: preview notice not posted');
        return;
      }
      const work = this.#work(job, ac.signal);
      // A request that waits inside a client (e.g. write pacing) ignores the signal until sent:
      // the worker is freed at the deadline anyway, and the request is aborted when it starts.
      work.catch(() => undefined);
      const r = await Promise.race([work, timedOut]);
      if (r === 'timeout') {
        log.warn(
          { preview: job.preview, job: key, timeoutMs: this.#o.timeoutMs },
          job.kind === 'notice'
            ? 'cannot post the preview notice: the forge did not answer in time'
            : 'cannot resolve the pending preview status: the forge did not answer in time',
        );
      } else if (job.kind === 'notice' && typeof r === 'object') {
        this.#posted.set(key, { body: r.body, url: job.webURL === '' ? undefined : r.url });
      }
    } catch (err) {
      log.warn(
        { preview: job.preview, job: key, err: errorMessage(err) },
        job.kind === 'notice'
          ? 'cannot post the preview notice'
          : 'cannot resolve the pending preview status',
      );
    } finally {
      clearTimeout(timer);
      this.#running.delete(key);
      this.#postingBodies.delete(key);
      this.#runningForges.delete(job.forge);
      const n = (this.#runningPreviews.get(job.preview) ?? 1) - 1;
      if (n <= 0) this.#runningPreviews.delete(job.preview);
      else this.#runningPreviews.set(job.preview, n);
      this.#pump();
      this.#o.onRelease?.();
    }
  }

  /** @returns for a notice, the body posted and its URL (undefined: none written). */
  async #work(
    job: ForgeJob,
    signal: AbortSignal,
  ): Promise<{ body: string; url: string } | boolean | undefined> {
    if (job.kind === 'notice') {
      let text = { body: job.body, onlyEdit: false };
      if (job.gone !== undefined) {
        const state = await this.#lookUp(job, signal);
        text = goneNotice(state, job.gone.branch, job.gone.stackName);
        if (state?.state === 'merged' && state.baseRef === job.gone.branch) {
          this.#o.logger.info(
            { preview: job.preview, number: job.number, stack: job.gone.stackName },
            'pull request merged: no "Preview stopped" notice (its deployment is reported in the preview comment); an earlier notice is edited to say so',
          );
        }
      }
      const url = await job.forge.upsertNotice(
        job.repoURL,
        { number: job.number, webURL: job.webURL },
        job.marker,
        `${job.marker}\n${text.body}\n`,
        signal,
        this.#o.mayWrite,
        text.onlyEdit,
      );
      return url === undefined ? undefined : { body: text.body, url };
    }
    return job.forge.resolvePending(
      job.repoURL,
      job.sha,
      job.context,
      job.description,
      signal,
      this.#o.mayWrite,
      job.whenNone,
    );
  }
}
