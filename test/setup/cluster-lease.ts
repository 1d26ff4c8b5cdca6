/**
 * setupFile of the `integration` project: each test file holds a shared lease on the control
 * plane from its first hook to its last, so that `restartApiServer()` (an exclusive lease)
 * waits for files already running and holds back files about to start. Without this, a restart
 * in one file would break API calls of another file running in parallel.
 */
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { acquireFileLease, releaseFileLease } from '../support/cluster.ts';

// vitest requires a destructuring pattern for the (unused) context argument of hooks.
// eslint-disable-next-line no-empty-pattern
beforeAll(async ({}, suite) => {
  const file = 'filepath' in suite ? path.relative(process.cwd(), suite.filepath) : suite.name;
  await acquireFileLease(file);
});

afterAll(async () => {
  await releaseFileLease();
});
