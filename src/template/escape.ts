/**
 * Escaping at render time (./markup.ts): every `{{value}}` of a template is rewritten, once at
 * compile time, into a call of the escape helper with the original expression as its argument —
 * `{{summary}}` → `{{ESCAPE summary}}`, `{{truncate summary 80}}` → `{{ESCAPE (truncate summary
 * 80)}}` — and the helper writes the value with the `Markup` the renderer passes for this render
 * (Handlebars `data`). Template text is untouched; `{{{value}}}` and `{{& value}}` (unescaped by
 * Handlebars' own rules) stay raw. Helpers that produce markup (`code`, `codeBlock`) return a
 * `Marked` value, which is written as it is.
 *
 * Handlebars' own HTML escaping cannot do this: its `escapeExpression` is one module-wide
 * function, the same for every render.
 */
import type { HelperOptions } from 'handlebars';
import { Marked, plain, type Markup } from './markup.ts';

/** The escape helper's name: not a valid name in templates (the validator refuses it), so only the rewrite can call it. */
export const ESCAPE_HELPER = '__pkoEscape';

/** Key of the `Markup` in a render's Handlebars `data`. */
export const MARKUP_DATA_KEY = 'pkoMarkup';

interface Node {
  type: string;
  loc?: unknown;
}
interface CallNode extends Node {
  path: Node;
  params: Node[];
  hash?: { type: 'Hash'; pairs: unknown[]; loc?: unknown } | null;
}
interface MustacheNode extends CallNode {
  escaped: boolean;
  strip?: unknown;
}
interface ProgramNode extends Node {
  body: Node[];
}
interface BlockNode extends CallNode {
  program?: ProgramNode | null;
  inverse?: ProgramNode | null;
}

function wrap(m: MustacheNode): MustacheNode {
  // With arguments the path is a helper call: it stays one, as a subexpression. Without, it is a
  // value (the validator refuses a helper named without arguments).
  const hasArgs = m.params.length > 0 || (m.hash?.pairs.length ?? 0) > 0;
  // A bare value keeps Handlebars' strict lookup (`"x" not defined in metadata`): as a helper
  // argument it would otherwise be looked up leniently.
  const inner: Node = hasArgs
    ? ({
        type: 'SubExpression',
        path: m.path,
        params: m.params,
        hash: m.hash ?? undefined,
        loc: m.loc,
      } as CallNode)
    : m.path.type === 'PathExpression'
      ? ({ ...m.path, strict: true } as Node)
      : m.path;
  const path = {
    type: 'PathExpression',
    data: false,
    depth: 0,
    parts: [ESCAPE_HELPER],
    original: ESCAPE_HELPER,
    loc: m.loc,
  };
  return { type: 'MustacheStatement', path, params: [inner], escaped: true, strip: m.strip, loc: m.loc };
}

function rewriteProgram(p: ProgramNode | null | undefined): void {
  if (!p) return;
  p.body = p.body.map((n) => {
    if (n.type === 'MustacheStatement') {
      const m = n as MustacheNode;
      return m.escaped ? wrap(m) : m;
    }
    if (n.type === 'BlockStatement') {
      const b = n as BlockNode;
      rewriteProgram(b.program);
      rewriteProgram(b.inverse);
    }
    return n;
  });
}

/**
 * Rewrites a parsed (and validated) template in place: every escaped mustache becomes a call of
 * {@link ESCAPE_HELPER}.
 */
export function escapeMustaches<T>(ast: T): T {
  rewriteProgram(ast as ProgramNode);
  return ast;
}

/** The `Markup` of the current render (plain when the render passed none). */
export function markupOf(options: HelperOptions | undefined): Markup {
  const m = (options?.data as Record<string, unknown> | undefined)?.[MARKUP_DATA_KEY];
  return m !== undefined && m !== null && typeof m === 'object' && 'text' in m ? (m as Markup) : plain;
}

/**
 * The escape helper: `null` and `undefined` (what `lookup` gives for a missing key; a misspelled
 * bare key is refused by Handlebars' strict lookup before) → '', a `Marked` value as it is,
 * strings/numbers/booleans through the render's `Markup.text`.
 * @throws Error for maps and lists (use `#each`/`lookup`).
 */
export function escapeHelper(value: unknown, options?: HelperOptions): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Marked) return value.markup;
  if (typeof value === 'string') return markupOf(options).text(value);
  if (typeof value === 'number' || typeof value === 'boolean') return markupOf(options).text(String(value));
  throw new Error(
    `cannot write ${Array.isArray(value) ? 'a list' : 'a map'} as text: use {{#each …}} or {{lookup map "key"}}`,
  );
}
