import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

const integration = {
  globalSetup: ['test/setup/global.ts'],
  setupFiles: ['test/setup/print-runtime.ts', 'test/setup/cluster-lease.ts'],
  testTimeout: 60_000,
  hookTimeout: 120_000,
  fileParallelism: true,
  maxWorkers: 2,
};

// When the upstream PKO CRDs sit beside the repository (../shared/pko-crds, as on CI), the
// `compat` project runs the PKO simulator and pipeline tests again against them, on a control
// plane of its own. Without that folder the project does not exist (nothing is skipped).
const upstreamPkoCrds = existsSync(resolve(import.meta.dirname, '..', 'shared', 'pko-crds'));

// `real-pko` (test/realpko/*.realpko.test.ts): real PKO v1.16 and v2.9 operators (built by
// scripts/realpko-build.sh, which `pretest` runs) against control planes of their own, one file
// at a time — the operators bind fixed ports; test/support/realpko.ts also holds a machine-wide
// lock so that concurrent runs elsewhere on the machine wait instead of colliding. It runs after
// the other projects (groupOrder 1): a real operator, its Pulumi runs and a second API server on
// 2 cores would otherwise slow the integration files past their budgets (measured: the API server
// restart test timed out while real-pko ran beside it).
const realPko = {
  name: 'real-pko',
  include: ['test/realpko/**/*.realpko.test.ts'],
  globalSetup: ['test/setup/realpko.ts'],
  setupFiles: ['test/setup/print-runtime.ts'],
  testTimeout: 600_000,
  hookTimeout: 180_000,
  fileParallelism: false,
  maxWorkers: 1,
  sequence: { groupOrder: 1 },
};

// Projects: `unit` (pure code, no cluster); `integration` (*.int.test.ts) against one real
// etcd + kube-apiserver started in test/setup/global.ts; optionally `compat` (above); `real-pko`.
export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/**/*.int.test.ts', 'test/**/*.realpko.test.ts'],
          setupFiles: ['test/setup/print-runtime.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.int.test.ts'],
          ...integration,
        },
      },
      ...(upstreamPkoCrds
        ? [
            {
              test: {
                name: 'compat',
                include: ['test/support/pko.int.test.ts', 'test/delivery/pipeline.int.test.ts'],
                ...integration,
              },
            },
          ]
        : []),
      { test: realPko },
    ],
  },
});
