import { defineConfig } from 'vitest/config';

// Two projects: `unit` (pure code, no cluster) and `integration` (*.int.test.ts), which runs
// against one real etcd + kube-apiserver started in test/setup/global.ts for the whole run.
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
      {
        test: {
          name: 'integration',
          include: ['test/**/*.int.test.ts'],
          globalSetup: ['test/setup/global.ts'],
          // cluster-lease.ts: a file holds a shared lease so restartApiServer() never hits it mid-test.
          setupFiles: ['test/setup/print-runtime.ts', 'test/setup/cluster-lease.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: true,
          maxWorkers: 2,
        },
      },
    ],
  },
});
