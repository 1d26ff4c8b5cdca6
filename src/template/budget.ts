/**
 * The render budget (./limits.ts `TEMPLATE_LIMITS`): every helper call and every run of a block
 * body is a step, every string a helper or a block body produces is counted, and the clock is
 * read at each step. Handlebars runs a template as plain JavaScript with no hook of its own, so
 * the budget is enforced where a template's work can multiply: every helper (Handlebars' own
 * `each`, `if`, `with`, `unless`, `lookup`, `blockHelperMissing` included) is wrapped, and so are
 * the block bodies (`options.fn`, `options.inverse`) a helper is given. Between two steps a
 * template can only run the plain statements of one body, and a body's size is bounded by the
 * source limit, so work between two checks is bounded too.
 *
 * Rendering is synchronous, so one budget is active at a time per thread ({@link withBudget}).
 */
import type { HelperDelegate, HelperOptions } from 'handlebars';
import { TEMPLATE_LIMITS } from './limits.ts';

/** What ran out: steps, output, time (./limits.ts), or the sandbox's memory (./sandbox.ts). */
export type BudgetKind = 'steps' | 'output' | 'time' | 'memory';

/** A render that ran out of budget. Not a template bug to fall back from: the delivery fails. */
export class TemplateBudgetError extends Error {
  override name = 'TemplateBudgetError';
  readonly kind: BudgetKind;
  /** 1-based line of the helper or block where the budget ran out, when known. */
  readonly line: number | null;
  /**
   * The template that ran out is one of the controller's built-in ones, not the tenant's: the
   * message says so ({@link builtinBudgetMessage}), and there is nothing in the Alert to change.
   */
  readonly builtin: boolean;
  constructor(kind: BudgetKind, message: string, line: number | null, builtin = false) {
    super(message);
    this.kind = kind;
    this.line = line;
    this.builtin = builtin;
  }
}

/**
 * What to say when the built-in template `name` (source `file`, e.g. `templates/message.hbs`) ran
 * out of its budget (`during`: e.g. ` on the largest event the API allows`). The built-in
 * templates are checked against the largest event the API allows, so out of time means the
 * controller is short of CPU, and steps or output a controller bug; neither is the tenant's to fix.
 */
export function builtinBudgetMessage(
  name: string,
  file: string,
  err: TemplateBudgetError,
  during = '',
): string {
  const what =
    err.kind === 'time'
      ? `went over its render time budget (${String(TEMPLATE_LIMITS.maxRenderMs)} ms)`
      : `ran out of its render budget (${err.kind})`;
  const why = err.kind === 'time' ? 'the controller is short of CPU' : 'a controller bug, please report it';
  return `the built-in template '${name}' (${file}) ${what}${during}${at(err.line)}: ${why}; nothing in the Alert's templates to change`;
}

export interface BudgetLimits {
  maxSteps: number;
  maxOutputUnits: number;
  /** Epoch ms (performance.now() clock) after which the render stops. */
  deadline: number;
}

/** The counters of one render. */
export class RenderBudget {
  readonly limits: BudgetLimits;
  steps = 0;
  output = 0;

  constructor(limits: Partial<BudgetLimits> = {}) {
    this.limits = {
      maxSteps: limits.maxSteps ?? TEMPLATE_LIMITS.maxSteps,
      maxOutputUnits: limits.maxOutputUnits ?? TEMPLATE_LIMITS.maxOutputUnits,
      deadline: limits.deadline ?? performance.now() + TEMPLATE_LIMITS.maxRenderMs,
    };
  }

  step(line: number | null): void {
    this.steps++;
    if (this.steps > this.limits.maxSteps) {
      throw new TemplateBudgetError(
        'steps',
        `template needs more than ${this.limits.maxSteps.toLocaleString('en-US')} helper calls and block iterations${at(line)}: loop over less (nested #each multiplies)`,
        line,
      );
    }
    if (performance.now() > this.limits.deadline) {
      throw new TemplateBudgetError(
        'time',
        `template render took longer than ${String(TEMPLATE_LIMITS.maxRenderMs)} ms${at(line)}: make it simpler`,
        line,
      );
    }
  }

  produced(value: unknown, line: number | null): void {
    // `.length` of a string built by concatenation is O(1) in V8 (no flattening).
    if (typeof value !== 'string') return;
    this.output += value.length;
    if (this.output > this.limits.maxOutputUnits) {
      throw new TemplateBudgetError(
        'output',
        `template produces more than ${this.limits.maxOutputUnits.toLocaleString('en-US')} characters${at(line)}: output less (nested #each multiplies)`,
        line,
      );
    }
  }
}

function at(line: number | null): string {
  return line === null ? '' : ` (line ${String(line)})`;
}

let active: RenderBudget | undefined;

/** Runs `fn` with `budget` charged by every helper and block body; restores the previous one. */
export function withBudget<T>(budget: RenderBudget, fn: () => T): T {
  const prev = active;
  active = budget;
  try {
    return fn();
  } finally {
    active = prev;
  }
}

function isOptions(v: unknown): v is HelperOptions & { loc?: { start?: { line?: number } } } {
  return typeof v === 'object' && v !== null && 'hash' in v && 'data' in v;
}

function lineOf(o: { loc?: { start?: { line?: number } } } | undefined): number | null {
  const l = o?.loc?.start?.line;
  return typeof l === 'number' ? l : null;
}

type Program = ((context: unknown, options?: unknown) => string) & Record<string, unknown>;

/** A block body that charges a step per run and counts what it produces. Keeps its properties. */
function budgetedProgram(fn: Program, line: number | null): Program {
  const wrapped = ((context: unknown, options?: unknown): string => {
    const b = active;
    if (b === undefined) throw new Error('template rendered outside a budget');
    b.step(line);
    const out = fn(context, options);
    b.produced(out, line);
    return out;
  }) as Program;
  Object.assign(wrapped, fn);
  return wrapped;
}

/**
 * `helper` charged to the active budget: one step per call, block bodies wrapped (a step per
 * run), and a non-block helper's result counted. Throws when called outside {@link withBudget}.
 */
export function budgeted(helper: HelperDelegate): HelperDelegate {
  return function (this: unknown, ...args: unknown[]): unknown {
    const b = active;
    if (b === undefined) throw new Error('template rendered outside a budget');
    const last = args.at(-1);
    const options = isOptions(last) ? last : undefined;
    const line = lineOf(options);
    b.step(line);
    if (
      options !== undefined &&
      (typeof options.fn === 'function' || typeof options.inverse === 'function')
    ) {
      const copy = { ...options } as HelperOptions & Record<string, unknown>;
      if (typeof options.fn === 'function') copy.fn = budgetedProgram(options.fn as Program, line);
      if (typeof options.inverse === 'function')
        copy.inverse = budgetedProgram(options.inverse as Program, line);
      args[args.length - 1] = copy;
      // A block's result is what its bodies produced (already counted).
      return (helper as (...a: unknown[]) => unknown).apply(this, args);
    }
    const out = (helper as (...a: unknown[]) => unknown).apply(this, args);
    b.produced(out, line);
    return out;
  } as HelperDelegate;
}
