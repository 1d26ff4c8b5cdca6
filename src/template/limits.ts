/**
 * What one template may cost (docs/threat-model.md, "Templates"): checked on the source before
 * Handlebars sees it, and while rendering (./budget.ts). Templates come from tenants (an Alert's
 * `templateRef` ConfigMap, a Provider's `spec.commitStatus.context`), so none of them may cost
 * the controller more than these numbers, whatever it contains.
 *
 * Why a check before parsing: Handlebars' parser builds the AST with recursion and in more than
 * linear time (measured with handlebars 4.7: a `{{lower (lower … message)}}` 3,000 deep parses in
 * ~1.9 s and overflows the stack when compiled; 10,000 deep — case B02, 84 KB — parses for over a
 * minute). The nesting scan below is linear and gives the line and column of the first place
 * that is too deep, so the tenant gets `InvalidTemplate` with a location instead of a stack
 * overflow or a minute of blocked work.
 */

/** The bounds of one template; see docs/threat-model.md for why each number. */
export const TEMPLATE_LIMITS = {
  /** Source size, UTF-8 bytes. The built-in templates are < 2 KiB. */
  maxSourceBytes: 32 * 1024,
  /**
   * Nesting depth: open blocks (`{{#…}}`, `{{^…}}`, each chained `{{else if …}}`) plus open
   * subexpressions `(…)` at any point of the source.
   */
  maxDepth: 24,
  /** Helper calls plus block bodies run, per template render (e.g. iterations of `#each`). */
  maxSteps: 20_000,
  /**
   * UTF-16 units produced per template render, counted at every level (a block's output is
   * counted when each body run ends, and again in the block around it): a measure of the work
   * of building the output, and a bound on its size.
   */
  maxOutputUnits: 2_000_000,
  /** Wall time of one template render, ms (checked at every step). */
  maxRenderMs: 250,
  /** Wall time of one whole notification (all its templates, comment refits included), ms. */
  maxNotificationMs: 1_000,
  /** Wall time of compiling and test-rendering one Alert's templates, ms. */
  maxCompileMs: 10_000,
} as const;

export interface SourceProblem {
  /** 1-based line of the place the limit was crossed. */
  line: number;
  /** 1-based column. */
  column: number;
  message: string;
}

/** Byte offset in UTF-8 → UTF-16 index of `s` (the first index whose prefix is over `bytes`). */
function indexAtByte(s: string, bytes: number): number {
  let used = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    used +=
      c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdbff ? 4 : c >= 0xdc00 && c <= 0xdfff ? 0 : 3;
    if (used > bytes) return i;
  }
  return s.length;
}

function position(s: string, index: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = s.indexOf('\n'); i >= 0 && i < index; i = s.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: index - lineStart + 1 };
}

/**
 * Where a literal opened at `open` (a string, or a `[segment]`) ends, erring towards ending it
 * early (so more is scanned, never less). The lexer's rule is `open ( \close | [^close] )* close`
 * as a backtracking regular expression: the literal ends at the first closing character not
 * preceded by a backslash; when every one is preceded by a backslash it ends at the last of them —
 * here, at the first (found by fuzzing: `"a\\"` with no quote after it is a whole string).
 * Returns the index of the closing character, or `open` itself when there is none (no literal).
 */
function literalEnd(source: string, open: number, close: number): number {
  let firstAny = -1;
  for (let q = open + 1; q < source.length; q++) {
    if (source.charCodeAt(q) !== close) continue;
    if (source.charCodeAt(q - 1) !== 0x5c /* \ */) return q;
    if (firstAny < 0) firstAny = q;
  }
  return firstAny < 0 ? open : firstAny;
}

/**
 * Checks a template source against {@link TEMPLATE_LIMITS} `maxSourceBytes` and `maxDepth`
 * without parsing it: linear time, no recursion. Returns the first problem, or null.
 *
 * The nesting scan follows the Handlebars lexer where it matters for depth and errs towards
 * counting more, never less: every `{{` opens a mustache (escaped `\{{` included), comments
 * (`{{!…}}`, `{{!--…--}}`), string and `[segment]` literals are skipped as the lexer skips them,
 * raw blocks `{{{{name}}}}` count as blocks, `(` and `)`
 * inside a mustache open and close subexpressions, `{{#…}}`/`{{^name}}` open a block, each
 * `{{else …}}` with a helper adds one level to the open block (Handlebars nests chained
 * inverses), and `{{/…}}` closes the block with its chain.
 */
export function checkSource(source: string): SourceProblem | null {
  const bytes = Buffer.byteLength(source, 'utf8');
  if (bytes > TEMPLATE_LIMITS.maxSourceBytes) {
    const at = position(source, indexAtByte(source, TEMPLATE_LIMITS.maxSourceBytes));
    return {
      ...at,
      message: `template is ${bytes.toLocaleString('en-US')} bytes, over the limit of ${TEMPLATE_LIMITS.maxSourceBytes.toLocaleString('en-US')} bytes: make it smaller`,
    };
  }
  const max = TEMPLATE_LIMITS.maxDepth;
  /** Weight of each open block: 1 plus its chained `{{else …}}` helpers. */
  const blocks: number[] = [];
  let blockDepth = 0;
  const tooDeep = (index: number, what: string): SourceProblem => ({
    ...position(source, index),
    message: `template nests ${what} more than ${String(max)} deep: flatten it`,
  });
  let i = 0;
  const n = source.length;
  while (i < n) {
    const open = source.indexOf('{{', i);
    if (open < 0) break;
    let j = open + 2;
    let braces = 2;
    while (source.charCodeAt(j) === 0x7b /* { */) {
      braces++; // {{{ triple-stash, {{{{raw}}}} raw blocks
      j++;
    }
    if (source.charCodeAt(j) === 0x7e /* ~ */) j++;
    // Comments: skipped as the lexer does (first `}}`, or `--}}` for the long form).
    if (source.charCodeAt(j) === 0x21 /* ! */) {
      const long = source.startsWith('--', j + 1);
      const end = long ? /--~?\}\}/g : /\}\}/g;
      end.lastIndex = j + 1;
      const m = end.exec(source);
      i = m ? m.index + m[0].length : n;
      continue;
    }
    while (j < n && /\s/.test(source.charAt(j))) j++;
    const c = source.charAt(j);
    let opensBlock = false;
    if (braces >= 4) {
      // A raw block `{{{{name}}}}…{{{{/name}}}}` is a block too.
      if (c === '/') blockDepth -= blocks.pop() ?? 0;
      else opensBlock = true;
      if (blockDepth < 0) blockDepth = 0;
    } else if (c === '#') {
      opensBlock = true;
    } else if (c === '^') {
      // `{{^}}` is an else; `{{^name}}` opens an inverse block.
      let k = j + 1;
      while (k < n && /\s/.test(source.charAt(k))) k++;
      opensBlock = !(source.startsWith('}}', k) || source.startsWith('~}}', k));
    } else if (c === '/') {
      blockDepth -= blocks.pop() ?? 0;
      if (blockDepth < 0) blockDepth = 0;
    } else if (source.startsWith('else', j) && !/[\w.-]/.test(source.charAt(j + 4))) {
      let k = j + 4;
      while (k < n && /\s/.test(source.charAt(k))) k++;
      const chained = !(source.startsWith('}}', k) || source.startsWith('~}}', k));
      if (chained && blocks.length > 0) {
        blocks[blocks.length - 1] = (blocks.at(-1) ?? 0) + 1;
        blockDepth++;
        if (blockDepth > max) return tooDeep(open, 'blocks');
      }
    }
    if (opensBlock) {
      blocks.push(1);
      blockDepth++;
      if (blockDepth > max) return tooDeep(open, 'blocks');
    }
    // The rest of the mustache: subexpressions, skipping string literals, up to `}}`.
    let parens = 0;
    let k = j;
    for (; k < n; k++) {
      const ch = source.charCodeAt(k);
      if (ch === 0x7d /* } */ && source.charCodeAt(k + 1) === 0x7d) break;
      if (ch === 0x5b /* [ */) {
        k = literalEnd(source, k, 0x5d /* ] */);
      } else if (ch === 0x22 /* " */ || ch === 0x27 /* ' */) {
        k = literalEnd(source, k, ch);
      } else if (ch === 0x28 /* ( */) {
        parens++;
        if (blockDepth + parens > max) return tooDeep(k, 'blocks and subexpressions');
      } else if (ch === 0x29 /* ) */) {
        if (parens > 0) parens--;
      }
    }
    i = k + 2;
  }
  return null;
}
