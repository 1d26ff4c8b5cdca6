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

// Projects: `unit` (pure code, no cluster); `integration` (*.int.test.ts) against one real
// etcd + kube-apiserver started in test/setup/global.ts; optionally `compat` (above).
export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/**/*.int.test.ts'],
          setupFiles: ['test/setup/print-runtime.ts'],
        },
      },
      { test: { name: 'integration', include: ['test/**/*.int.test.ts'], ...integration } },
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
    ],
  },
});
