/**
 * setupFile for every project: the suite must run on Node 24 (the `node@24` devDependency that
 * `npm test` / `npx vitest` put first on PATH), not on the system Node. Prints nothing; the
 * integration globalSetup prints the runtime once.
 */
const major = Number(process.versions.node.split('.')[0]);
if (major !== 24) {
  throw new Error(
    `tests must run on Node 24, but this worker runs Node ${process.version} (${process.execPath}). ` +
      'Run them via `npm test` (or `npx vitest ...`) so that node_modules/.bin/node (node@24) is used.',
  );
}
