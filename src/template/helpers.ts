/**
 * The vetted Handlebars helpers (templates/README.md). Pure functions of their arguments: no I/O, no
 * environment, no clock. `null` (an unknown context value) renders as '' everywhere; a helper
 * given `undefined` — which only a misspelled key in a helper argument can produce, since the
 * context carries every documented key — throws, so test-rendering reports the typo.
 *
 * | helper | use | result |
 * |---|---|---|
 * | `truncate s n` | `{{truncate summary 80}}` | `s` bounded to `n` code points, ending in `…` when cut |
 * | `codeBlock s [lang]` | `{{codeBlock output}}` | a code block in the target's markup that `s` cannot close (Markdown: a fence longer than any backtick run in `s`); '' for null/'' |
 * | `code s` | `{{code branch}}` | an inline code span in the target's markup; '' for null/'' |
 * | `pluralize n singular [plural]` | `{{pluralize failures "failure" "failures"}}` | the word for `n` (plural default: singular + "s") |
 * | `duration ms` | `{{duration 93000}}` | `1m 33s`; `850ms`; '' for null |
 * | `lower s`, `upper s` | | case-mapped string |
 * | `default a b` | `{{default pulumiStack stackName}}` | `a`, or `b` when `a` is null or '' |
 * | `eq a b` | `{{#if (eq reason "UpdateFailed")}}` or `{{#eq a b}}…{{else}}…{{/eq}}` | strict equality |
 * | `shortSha s [n]` | `{{shortSha commit}}` | first `n` (default 7) characters |
 */
import type { HelperDelegate, HelperOptions } from 'handlebars';
import { boundText } from '../text.ts';
import { markupOf } from './escape.ts';
import { Marked } from './markup.ts';

/** Names of the helpers registered on the isolated instance (and the only ones templates may call). */
export const HELPER_NAMES = [
  'truncate',
  'codeBlock',
  'code',
  'pluralize',
  'duration',
  'lower',
  'upper',
  'default',
  'eq',
  'shortSha',
] as const;
export type HelperName = (typeof HELPER_NAMES)[number];

/** Handlebars' own helpers that stay available (`log` is removed: it writes to the console). */
export const BUILTIN_HELPERS = ['if', 'unless', 'each', 'with', 'lookup'] as const;

function isOptions(v: unknown): v is HelperOptions {
  return typeof v === 'object' && v !== null && 'hash' in v && 'data' in v;
}

/** Splits Handlebars' trailing `options` argument off. */
function split(args: unknown[]): { params: unknown[]; options: HelperOptions | undefined } {
  const last = args.at(-1);
  return isOptions(last)
    ? { params: args.slice(0, -1), options: last }
    : { params: args, options: undefined };
}

function defined(helper: string, params: unknown[], count: number): void {
  if (params.length < count) {
    throw new Error(
      `helper '${helper}' needs ${String(count)} argument${count === 1 ? '' : 's'}, got ${String(params.length)}`,
    );
  }
  params.slice(0, count).forEach((p, i) => {
    if (p === undefined) {
      throw new Error(`helper '${helper}': argument ${String(i + 1)} is undefined (misspelled key?)`);
    }
  });
}

function str(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (v instanceof Marked) return v.markup;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw new Error(`expected a string, got ${Array.isArray(v) ? 'a list' : typeof v}`);
}

function num(helper: string, v: unknown): number | null {
  if (v === null) return null;
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  if (!Number.isFinite(n))
    throw new Error(
      `helper '${helper}': expected a number, got ${typeof v === 'string' ? JSON.stringify(v) : typeof v}`,
    );
  return n;
}

/** `1h 2m 3s`, `1m 33s`, `4s`, `850ms`; negative values are treated as 0. */
export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms));
  if (total < 1000) return `${String(total)}ms`;
  let s = Math.round(total / 1000);
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts: string[] = [];
  if (h > 0) parts.push(`${String(h)}h`);
  if (m > 0) parts.push(`${String(m)}m`);
  if (s > 0 || parts.length === 0) parts.push(`${String(s)}s`);
  return parts.join(' ');
}

const helpers: Record<HelperName, HelperDelegate> = {
  truncate(...args: unknown[]) {
    const { params } = split(args);
    defined('truncate', params, 2);
    const n = num('truncate', params[1]);
    return boundText(str(params[0]), n ?? 0);
  },
  codeBlock(...args: unknown[]) {
    const { params, options } = split(args);
    defined('codeBlock', params, 1);
    const lang = params[1] === undefined ? '' : str(params[1]);
    return new Marked(markupOf(options).codeBlock(str(params[0]), lang));
  },
  code(...args: unknown[]) {
    const { params, options } = split(args);
    defined('code', params, 1);
    return new Marked(markupOf(options).code(str(params[0])));
  },
  pluralize(...args: unknown[]) {
    const { params } = split(args);
    defined('pluralize', params, 2);
    const n = num('pluralize', params[0]);
    const singular = str(params[1]);
    const plural = params[2] === undefined ? `${singular}s` : str(params[2]);
    return n === 1 ? singular : plural;
  },
  duration(...args: unknown[]) {
    const { params } = split(args);
    defined('duration', params, 1);
    const n = num('duration', params[0]);
    return n === null ? '' : formatDuration(n);
  },
  lower(...args: unknown[]) {
    const { params } = split(args);
    defined('lower', params, 1);
    return str(params[0]).toLowerCase();
  },
  upper(...args: unknown[]) {
    const { params } = split(args);
    defined('upper', params, 1);
    return str(params[0]).toUpperCase();
  },
  default(...args: unknown[]) {
    const { params } = split(args);
    defined('default', params, 2);
    const [a, b] = params;
    return a === null || a === '' ? b : a;
  },
  eq(this: unknown, ...args: unknown[]) {
    const { params, options } = split(args);
    defined('eq', params, 2);
    const same = params[0] === params[1];
    // Block form: {{#eq a b}}…{{else}}…{{/eq}}
    if (options !== undefined && typeof options.fn === 'function') {
      return same ? options.fn(this) : options.inverse(this);
    }
    return same;
  },
  shortSha(...args: unknown[]) {
    const { params } = split(args);
    defined('shortSha', params, 1);
    const n = params[1] === undefined ? 7 : (num('shortSha', params[1]) ?? 7);
    return str(params[0]).slice(0, Math.max(0, n));
  },
};

/** The helper table registered on the isolated Handlebars instance. */
export function vettedHelpers(): Record<HelperName, HelperDelegate> {
  return helpers;
}
