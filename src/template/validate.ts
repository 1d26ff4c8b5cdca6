/**
 * Static checks of a parsed template, before any rendering: every path must name a documented
 * context key, every helper must be a vetted one, and partials/decorators are refused. Strict
 * mode alone misses misspelled keys in helper arguments (`{{#if stak}}` renders nothing), so
 * this walk is what turns such typos into `InvalidTemplate` with a line and column.
 *
 * Scope: paths at the top level (and inside `if`/`unless`/`eq` blocks, which keep the context)
 * are checked against the context keys; inside `each`/`with` the context is a map entry and only
 * `@root.x` and `../x` that reach the root are checked.
 */
import { BUILTIN_HELPERS, HELPER_NAMES } from './helpers.ts';
import { CONTEXT_KEYS, MAP_KEYS } from './context.ts';
import { CHANGES_KEYS } from './changes.ts';
import { STEP_OPS } from '../changes/types.ts';

/** Minimal shapes of the Handlebars AST nodes we walk (hbs.AST in handlebars/types). */
interface Loc {
  start: { line: number; column: number };
}
interface Node {
  type: string;
  loc?: Loc | null;
}
interface PathNode extends Node {
  type: 'PathExpression';
  data: boolean;
  depth: number;
  parts: string[];
  original: string;
}
interface HashNode extends Node {
  pairs: { key: string; value: Node }[];
}
interface CallNode extends Node {
  path: Node;
  params: Node[];
  hash?: HashNode | null;
}
interface ProgramNode extends Node {
  body: Node[];
  blockParams?: string[] | null;
}
interface BlockNode extends CallNode {
  program?: ProgramNode | null;
  inverse?: ProgramNode | null;
}

export interface TemplateProblem {
  /** 1-based line, or null when unknown. */
  line: number | null;
  /** 1-based column, or null when unknown. */
  column: number | null;
  message: string;
}

const KEYS = new Set<string>(CONTEXT_KEYS);
const MAPS = new Set<string>(MAP_KEYS);
const CHANGES = new Set<string>(CHANGES_KEYS);
const OPS = new Set<string>(STEP_OPS);
const VETTED = new Set<string>(HELPER_NAMES);
const BUILTIN = new Set<string>(BUILTIN_HELPERS);
const HELPERS = new Set<string>([...HELPER_NAMES, ...BUILTIN_HELPERS]);
const DATA_VARS = new Set(['root', 'index', 'key', 'first', 'last']);
/** Helpers whose block body runs with another context. */
const CONTEXT_CHANGING = new Set(['each', 'with']);

interface Scope {
  /** Whether the context in this scope is the root template context. */
  root: boolean;
  blockParams: readonly string[];
}

class Problem extends Error {
  readonly line: number | null;
  readonly column: number | null;
  constructor(node: Node | undefined, message: string) {
    super(message);
    this.line = node?.loc?.start.line ?? null;
    this.column = node?.loc ? node.loc.start.column + 1 : null;
  }
}

function isPath(n: Node): n is PathNode {
  return n.type === 'PathExpression';
}

/** Levenshtein distance, for "did you mean" hints. */
function distance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] ?? 0;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] ?? 0;
      const cost = a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1;
      prev[j] = Math.min(up + 1, (prev[j - 1] ?? 0) + 1, diag + cost);
      diag = up;
    }
  }
  return prev[b.length] ?? 0;
}

function suggestion(name: string): string {
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of [...CONTEXT_KEYS, ...HELPER_NAMES]) {
    const d = distance(name, k);
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(name.length / 4))
    ? ` (did you mean \`${best}\`?)`
    : '';
}

function checkRootKey(node: PathNode, parts: readonly string[], shown: string): void {
  const key = parts[0];
  if (key === undefined) return;
  if (!KEYS.has(key)) {
    throw new Problem(
      node,
      `unknown key \`${shown}\`${suggestion(key)}; see templates/README.md for the context keys`,
    );
  }
  if (key === 'changes' && parts.length > 1) {
    const sub = parts[1] ?? '';
    if (!CHANGES.has(sub)) {
      throw new Problem(
        node,
        `unknown key \`${shown}\` (\`changes\` has: ${CHANGES_KEYS.join(', ')}); see templates/README.md`,
      );
    }
    if (parts.length > 2 && !(sub === 'counts' && parts.length === 3 && OPS.has(parts[2] ?? ''))) {
      throw new Problem(
        node,
        `\`${shown}\` does not exist; see templates/README.md for the shape of \`changes\``,
      );
    }
    return;
  }
  if (parts.length > 1 && !MAPS.has(key)) {
    throw new Problem(node, `\`${key}\` is a single value; \`${shown}\` does not exist`);
  }
}

function checkPath(node: PathNode, scopes: readonly Scope[]): void {
  if (node.data) {
    const [head, ...rest] = node.parts;
    if (head === undefined || !DATA_VARS.has(head)) {
      throw new Problem(
        node,
        `unknown data variable \`${node.original}\` (available: @root, @index, @key, @first, @last)`,
      );
    }
    if (head === 'root' && rest.length > 0) checkRootKey(node, rest, node.original);
    return;
  }
  const scope = scopes[scopes.length - 1 - node.depth];
  if (scope === undefined) throw new Problem(node, `\`${node.original}\` goes above the root context`);
  if (node.parts.length === 0) return; // `this`, `..`
  if (node.depth === 0 && scopes.some((s) => s.blockParams.includes(node.parts[0] ?? ''))) return;
  if (scope.root) checkRootKey(node, node.parts, node.original);
}

function helperName(call: CallNode): string | undefined {
  const p = call.path;
  if (!isPath(p) || p.data || p.depth !== 0 || p.parts.length !== 1) return undefined;
  const name = p.parts[0] ?? '';
  const hasArgs = call.params.length > 0 || (call.hash?.pairs.length ?? 0) > 0;
  if (HELPERS.has(name) || hasArgs) return name;
  return undefined;
}

function checkCall(call: CallNode, scopes: readonly Scope[]): string | undefined {
  const name = helperName(call);
  if (name !== undefined) {
    if (!HELPERS.has(name)) {
      throw new Problem(
        call.path,
        `unknown helper \`${name}\`${suggestion(name)} (helpers: ${[...HELPER_NAMES, ...BUILTIN_HELPERS].join(', ')})`,
      );
    }
    if ((VETTED.has(name) || BUILTIN.has(name)) && call.params.length === 0) {
      throw new Problem(call.path, `helper \`${name}\` needs arguments`);
    }
  } else if (isPath(call.path)) {
    checkPath(call.path, scopes);
  } else {
    throw new Problem(call.path, 'a literal cannot be called');
  }
  for (const p of call.params) checkExpr(p, scopes);
  for (const pair of call.hash?.pairs ?? []) checkExpr(pair.value, scopes);
  return name;
}

function checkExpr(n: Node, scopes: readonly Scope[]): void {
  if (isPath(n)) checkPath(n, scopes);
  else if (n.type === 'SubExpression') checkCall(n as CallNode, scopes);
}

function checkProgram(program: ProgramNode | null | undefined, scopes: readonly Scope[]): void {
  if (!program) return;
  for (const stmt of program.body) checkStatement(stmt, scopes);
}

function checkStatement(n: Node, scopes: readonly Scope[]): void {
  switch (n.type) {
    case 'ContentStatement':
    case 'CommentStatement':
      return;
    case 'MustacheStatement':
      checkCall(n as CallNode, scopes);
      return;
    case 'BlockStatement': {
      const block = n as BlockNode;
      const name = checkCall(block, scopes);
      // `each`/`with`, and a block on a plain value (`{{#metadata}}…{{/metadata}}`), change the context.
      const changes = name === undefined || CONTEXT_CHANGING.has(name);
      const inner: Scope[] = changes
        ? [...scopes, { root: false, blockParams: block.program?.blockParams ?? [] }]
        : [...scopes];
      checkProgram(block.program, inner);
      checkProgram(block.inverse, scopes);
      return;
    }
    case 'PartialStatement':
    case 'PartialBlockStatement':
      throw new Problem(n, 'partials ({{> name}}) are not available');
    case 'Decorator':
    case 'DecoratorBlock':
      throw new Problem(n, 'decorators ({{* name}}) are not available');
    default:
      throw new Problem(n, `unsupported template construct ${n.type}`);
  }
}

/** Checks a parsed template (`Handlebars.parse` output); returns the first problem or null. */
export function validateTemplateAst(ast: unknown): TemplateProblem | null {
  try {
    checkProgram(ast as ProgramNode, [{ root: true, blockParams: [] }]);
    return null;
  } catch (err) {
    if (err instanceof Problem) return { line: err.line, column: err.column, message: err.message };
    throw err;
  }
}
