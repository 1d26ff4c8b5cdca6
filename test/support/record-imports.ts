/**
 * `node --import ./test/support/record-imports.ts …`: records the URL of every module the process
 * resolves (ESM imports and CommonJS requires, through Node's synchronous `module.registerHooks`)
 * and writes them, one a line, to the file named by `RECORD_IMPORTS_FILE` when the process exits.
 * Used by test/kube/import-graph.test.ts.
 */
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const seen = new Set<string>();
registerHooks({
  resolve(specifier, context, nextResolve) {
    const result = nextResolve(specifier, context);
    seen.add(result.url);
    return result;
  },
});
process.on('exit', () => {
  const file = process.env.RECORD_IMPORTS_FILE;
  if (file !== undefined && file !== '') writeFileSync(file, [...seen].join('\n'));
});
