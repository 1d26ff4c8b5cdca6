/** Handlebars errors as one bounded line with the line number, for `InvalidTemplate` and logs. */
import { boundText } from '../text.ts';

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Line number of a Handlebars error: `lineNumber` (compile/strict errors) or "on line N" (parse errors). */
export function errorLine(err: unknown): number | null {
  if (typeof err === 'object' && err !== null && 'lineNumber' in err && typeof err.lineNumber === 'number') {
    return err.lineNumber;
  }
  const m = /line (\d+)/.exec(errorMessage(err));
  return m?.[1] === undefined ? null : Number(m[1]);
}

/**
 * Single-line, bounded form of a Handlebars error message. Parse errors span several lines
 * (message, source excerpt, caret, "Expecting …"): the first and the "Expecting" line are kept.
 */
export function cleanError(message: string): string {
  const [first = '', ...rest] = message.split('\n');
  const expecting = rest.find((l) => l.startsWith('Expecting'));
  const text = expecting === undefined ? first : `${first} ${expecting}`;
  return boundText(text.replace(/\s+/g, ' ').trim(), 400, 'codePoints');
}
