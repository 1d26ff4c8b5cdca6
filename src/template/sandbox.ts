/**
 * The template sandbox: tenant templates are compiled and rendered in worker threads, never on
 * the controller's event loop (docs/threat-model.md, "Templates").
 *
 * Why workers, measured with handlebars 4.7 on the test machine: compiling a 64 KiB template
 * takes 1–2 s of synchronous work (parsing is worse than linear; 10,000 nested subexpressions
 * parse for over a minute), and evaluating the generated code of a large template costs another
 * ~40 ms plus ~140 ms on its first render. On the event loop that would stall `/healthz`, the
 * informers and every other Alert's deliveries whenever a tenant edits a ConfigMap. In a worker
 * it stalls nothing; the limits on the source (./limits.ts) and the render budget (./budget.ts)
 * still apply inside, and the worker adds what a budget cannot: a heap of its own
 * (`resourceLimits`: running out of memory ends the worker, not the controller) and a watchdog
 * (a request that outlives its time limit ends the worker). A replaced worker loses only its
 * cache; the requests queued behind the failed one are sent to the new worker.
 *
 * Two workers: one compiles (apply-time checks, up to seconds for a large template), one renders
 * deliveries, so a tenant editing templates never delays another tenant's notifications. A
 * render costs one message round trip (well under a millisecond) on top of the render itself.
 * Each worker costs ~15–20 MiB of resident memory (measured on the built JavaScript), so an idle
 * one is ended (compiles: after 30 s; renders: after 10 min) and started again when needed.
 *
 * Results of compiles are cached here by content (SHA-256 of the sources): an Alert reconciled
 * again with unchanged templates is not compiled again, and nothing is recompiled on a timer.
 */
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import type { NotificationEvent } from '../api/event.ts';
import { TemplateBudgetError, type BudgetKind } from './budget.ts';
import { TEMPLATE_LIMITS } from './limits.ts';
import { renderNotification } from './render.ts';
import type { SandboxReply, SandboxRequest, TemplateSource } from './sandbox-protocol.ts';
import type { RenderedNotification } from './rendered.ts';
import type { RenderOptions, TemplateFailure, TemplateName, TemplateSet } from './types.ts';

/** One Alert's templates, ready to render (what delivery holds). */
export interface AlertTemplates {
  /** Content key: SHA-256 of the sources; equal sources have equal keys. */
  readonly key: string;
  /** Which templates are not the built-in ones. */
  readonly overridden: readonly TemplateName[];
  /**
   * Renders one notification (./render.ts `renderNotification`).
   * @throws TemplateBudgetError when a template runs out of budget (steps, output, time or the
   *   sandbox's memory); the message names the template and says what to change. Error when
   *   the templates cannot be rendered at all (they no longer compile).
   */
  render(ev: NotificationEvent, opts: RenderOptions): Promise<RenderedNotification>;
}

export type SandboxCompileResult =
  | { ok: true; templates: AlertTemplates }
  | (TemplateFailure & {
      /**
       * The check did not finish — out of time on a loaded machine, or the worker was replaced —
       * so this is not a verdict on the template: ask again later.
       */
      retry?: true;
    });

/** Compiles an Alert's templates (the Alert reconciler's port). */
export interface TemplateCompiler {
  /**
   * Checks and compiles `overrides` (ConfigMap data) with the Provider's `commitStatusContext`
   * (./index.ts `compileTemplates` for what is checked). Never rejects.
   */
  compile(
    overrides: Readonly<Record<string, string>>,
    opts?: { commitStatusContext?: string },
  ): Promise<SandboxCompileResult>;
}

/** A compiled `TemplateSet` as `AlertTemplates`, rendered in the calling thread (tests, tools). */
export function inlineTemplates(set: TemplateSet, key = 'inline'): AlertTemplates {
  return {
    key,
    overridden: set.overridden,
    render: (ev, opts) => {
      try {
        return Promise.resolve(renderNotification(set, ev, opts));
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
    },
  };
}

/** The content key of a template source. */
export function sourceKey(overrides: Readonly<Record<string, string>>, commitStatusContext?: string): string {
  const entries = Object.entries(overrides).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256')
    .update(JSON.stringify([entries, commitStatusContext ?? null]))
    .digest('hex');
}

export interface SandboxOptions {
  /** Heap and stack of each worker (default: 48 MiB old generation, 8 MiB young, 4 MiB stack). */
  resourceLimits?: { maxOldGenerationSizeMb: number; maxYoungGenerationSizeMb: number; stackSizeMb: number };
  /** Watchdog of a compile request, ms (default: the compile limit + 5 s). */
  compileTimeoutMs?: number;
  /** Watchdog of a render request, ms (default 5 s: a compile after a worker restart plus the render). */
  renderTimeoutMs?: number;
  /** Told when a worker is replaced (why, in words without template content), e.g. for a log line. */
  onWorkerReplaced?: (lane: 'compile' | 'render', why: string) => void;
  /**
   * A worker idle this long is ended, ms, and started again on the next request (each costs
   * ~15–20 MiB of resident memory): default 30 s for compiles (they happen when templates
   * change), 10 min for renders.
   */
  idleMs?: { compile: number; render: number };
}

interface Pending {
  req: SandboxRequest;
  timeoutMs: number;
  resolve: (reply: SandboxReply) => void;
  reject: (err: TemplateBudgetError) => void;
  timer?: NodeJS.Timeout;
}

const WORKER_URL = new URL(
  `./sandbox-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`,
  import.meta.url,
);

/** One worker and the requests sent to it, answered in order. */
class WorkerLane {
  readonly #name: 'compile' | 'render';
  readonly #o: SandboxOptions;
  #worker: Worker | undefined;
  /** Sent to the current worker, oldest first; the head is the one being worked on. */
  readonly #queue: Pending[] = [];
  #closed = false;
  #idleTimer: NodeJS.Timeout | undefined;
  readonly #idleMs: number;
  /** Workers replaced so far (for tests and metrics). */
  replaced = 0;
  /** Workers started so far (for tests). */
  started = 0;

  constructor(name: 'compile' | 'render', opts: SandboxOptions) {
    this.#name = name;
    this.#o = opts;
    this.#idleMs = opts.idleMs?.[name] ?? (name === 'compile' ? 30_000 : 600_000);
  }

  request(req: SandboxRequest, timeoutMs: number): Promise<SandboxReply> {
    if (this.#closed)
      return Promise.reject(new TemplateBudgetError('time', 'the template sandbox is closed', null));
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    return new Promise((resolve, reject) => {
      const p: Pending = { req, timeoutMs, resolve, reject };
      this.#queue.push(p);
      this.#post(p);
      if (this.#queue.length === 1) this.#arm(p);
    });
  }

  #ensureWorker(): Worker {
    if (this.#worker) return this.#worker;
    this.started++;
    const w = new Worker(WORKER_URL, {
      resourceLimits: this.#o.resourceLimits ?? {
        maxOldGenerationSizeMb: 48,
        maxYoungGenerationSizeMb: 8,
        stackSizeMb: 4,
      },
      stdout: true,
      stderr: true,
    });
    // The worker never writes to the console; whatever it would is dropped, not interleaved with JSON logs.
    w.stdout.resume();
    w.stderr.resume();
    w.on('message', (reply: SandboxReply) => {
      if (w === this.#worker) this.#answered(reply);
    });
    w.on('error', (err: Error & { code?: string }) => {
      if (w !== this.#worker) return;
      const memory = err.code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.#replace(
        memory ? 'memory' : 'time',
        memory
          ? `template work needed more than the sandbox's ${String(this.#o.resourceLimits?.maxOldGenerationSizeMb ?? 48)} MiB heap: make the template produce less`
          : `the template sandbox failed (${err.code ?? err.name})`,
      );
    });
    w.on('exit', () => {
      if (w !== this.#worker) return;
      this.#replace('time', 'the template sandbox stopped');
    });
    this.#worker = w;
    return w;
  }

  #post(p: Pending): void {
    const w = this.#ensureWorker();
    w.ref();
    w.postMessage(p.req);
  }

  #arm(p: Pending): void {
    p.timer = setTimeout(() => {
      this.#replace(
        'time',
        p.req.kind === 'compile'
          ? `compiling the templates took longer than ${String(p.timeoutMs)} ms: make them smaller or simpler`
          : `rendering took longer than ${String(p.timeoutMs)} ms: make the template simpler`,
      );
    }, p.timeoutMs);
  }

  #answered(reply: SandboxReply): void {
    const head = this.#queue.shift();
    if (head === undefined) return;
    clearTimeout(head.timer);
    if (head.req.id !== reply.id) {
      // Cannot happen (the worker answers in order); fail safe rather than mismatch answers.
      head.reject(new TemplateBudgetError('time', 'the template sandbox answered out of order', null));
    } else {
      head.resolve(reply);
    }
    const next = this.#queue[0];
    if (next) {
      this.#arm(next);
      return;
    }
    this.#worker?.unref();
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      const idle = this.#worker;
      if (idle === undefined || this.#queue.length > 0) return;
      this.#worker = undefined;
      void idle.terminate();
    }, this.#idleMs);
    this.#idleTimer.unref();
  }

  /** Ends the current worker: its head request fails with `why`; the others go to a new worker. */
  #replace(kind: BudgetKind, why: string): void {
    const w = this.#worker;
    this.#worker = undefined;
    if (w) void w.terminate();
    this.replaced++;
    this.#o.onWorkerReplaced?.(this.#name, why);
    const head = this.#queue.shift();
    if (head) {
      clearTimeout(head.timer);
      head.reject(new TemplateBudgetError(kind, why, null));
    }
    if (this.#closed) return;
    for (const p of this.#queue) this.#post(p);
    const next = this.#queue[0];
    if (next) {
      clearTimeout(next.timer);
      this.#arm(next);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    const w = this.#worker;
    this.#worker = undefined;
    for (const p of this.#queue.splice(0)) {
      clearTimeout(p.timer);
      p.reject(new TemplateBudgetError('time', 'the template sandbox is closed', null));
    }
    if (w) await w.terminate();
  }
}

/**
 * Compiles and renders tenant templates in worker threads (see the module comment). One per
 * process; `close()` it on shutdown.
 */
export class TemplateSandbox implements TemplateCompiler {
  readonly #compiler: WorkerLane;
  readonly #renderer: WorkerLane;
  readonly #compileTimeoutMs: number;
  readonly #renderTimeoutMs: number;
  /**
   * Compile results by content key (verdicts on the template too: an invalid one is not checked
   * again until it changes; a request the watchdog ended is not a verdict and is not kept).
   */
  readonly #results = new LRUCache<string, SandboxCompileResult>({ max: 2048 });
  #nextId = 1;

  constructor(opts: SandboxOptions = {}) {
    this.#compiler = new WorkerLane('compile', opts);
    this.#renderer = new WorkerLane('render', opts);
    this.#compileTimeoutMs = opts.compileTimeoutMs ?? TEMPLATE_LIMITS.maxCompileMs + 5_000;
    this.#renderTimeoutMs = opts.renderTimeoutMs ?? 5_000;
  }

  /** Workers replaced so far (after a crash, running out of memory, or a watchdog timeout). */
  get workersReplaced(): number {
    return this.#compiler.replaced + this.#renderer.replaced;
  }

  /** Workers started so far (the first ones, after idling, and replacements). */
  get workersStarted(): number {
    return this.#compiler.started + this.#renderer.started;
  }

  async compile(
    overrides: Readonly<Record<string, string>>,
    opts: { commitStatusContext?: string } = {},
  ): Promise<SandboxCompileResult> {
    const key = sourceKey(overrides, opts.commitStatusContext);
    const cached = this.#results.get(key);
    if (cached) return cached;
    const source: TemplateSource = {
      key,
      overrides: { ...overrides },
      ...(opts.commitStatusContext !== undefined ? { commitStatusContext: opts.commitStatusContext } : {}),
    };
    let result: SandboxCompileResult;
    try {
      const reply = await this.#compiler.request(
        { id: this.#nextId++, kind: 'compile', source },
        this.#compileTimeoutMs,
      );
      if (reply.kind === 'compiled') {
        result = { ok: true, templates: this.#templates(source, reply.overridden) };
      } else if (reply.kind === 'invalid') {
        result = {
          ok: false,
          template: reply.template,
          line: reply.line,
          message: reply.message,
          ...(reply.builtin ? { builtin: true as const } : {}),
        };
        // Out of time on a loaded machine is not a verdict on the template: check it again next time.
        if (reply.timedOut) return { ...result, retry: true };
      } else {
        result = { ok: false, template: 'templates', line: null, message: replyMessage(reply) };
      }
    } catch (err) {
      // The worker was replaced (watchdog, memory) or closed: the request failed, not
      // necessarily the template — answered, but not cached, so the next reconcile tries again.
      const message = err instanceof Error ? err.message : String(err);
      return { ok: false, template: 'templates', line: null, message, retry: true };
    }
    this.#results.set(key, result);
    return result;
  }

  #templates(source: TemplateSource, overridden: readonly TemplateName[]): AlertTemplates {
    return {
      key: source.key,
      overridden,
      render: (ev, opts) => this.#render(source, ev, opts),
    };
  }

  async #render(
    source: TemplateSource,
    event: NotificationEvent,
    opts: RenderOptions,
  ): Promise<RenderedNotification> {
    const { onTemplateError, ...options } = opts;
    const reply = await this.#renderer.request(
      { id: this.#nextId++, kind: 'render', source, event, options },
      this.#renderTimeoutMs,
    );
    switch (reply.kind) {
      case 'rendered':
        for (const e of reply.templateErrors) onTemplateError?.(e.template, e.message);
        return reply.rendered;
      case 'overBudget':
        throw new TemplateBudgetError(reply.budget, reply.message, reply.line, reply.builtin);
      default:
        throw new Error(`template render failed: ${replyMessage(reply)}`);
    }
  }

  /** Stops both workers; pending requests fail. */
  async close(): Promise<void> {
    await Promise.all([this.#compiler.close(), this.#renderer.close()]);
  }
}

function replyMessage(reply: SandboxReply): string {
  return 'message' in reply ? reply.message : `unexpected answer ${reply.kind}`;
}
