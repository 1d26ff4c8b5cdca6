/**
 * Entry point: flags → options, optional local control plane, controller, signal handling.
 * Wiring only; the controller lives in controller.ts.
 */
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { writeSync } from 'node:fs';
import { UsageError, clusterSource, loadConfig, type ControllerOptions } from './config.ts';
import { createLogger } from './log.ts';
import { loadKubeConfig } from './kube/client.ts';
import { installCRDs, readCRDs, yamlFilesIn } from './kube/crds.ts';
import { startController } from './controller.ts';
import { Redactor } from './credential/redact.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

let opts: ControllerOptions;
try {
  opts = loadConfig();
} catch (err) {
  if (err instanceof UsageError) {
    const help = err.message === 'help requested';
    writeSync(help ? 1 : 2, help ? err.usage : `${err.message}\n\n${err.usage}`);
    process.exit(help ? 0 : 2);
  }
  throw err;
}
const redactor = new Redactor();
const logger = createLogger({ level: opts.logLevel, redactor });

let kubeconfigPath = opts.kubeconfig;
let stopDevCluster: (() => Promise<void>) | undefined;
const source = clusterSource(opts);
if (opts.devCluster === 'always' || (opts.devCluster === 'auto' && source === 'none')) {
  // No cluster configured: start etcd + kube-apiserver locally (built from Go modules on first use),
  // install our CRDs and the minimal PKO CRDs, and run against that.
  const { startControlPlane } = await import('./envtest/controlplane.ts');
  logger.info(
    'no cluster configured: starting a local etcd + kube-apiserver (first run builds them, several minutes)',
  );
  const plane = await startControlPlane({
    log: (line) => {
      logger.debug({ component: 'dev-cluster' }, line);
    },
  });
  stopDevCluster = () => plane.stop();
  kubeconfigPath = plane.kubeconfigPath;
  const adminKc = loadKubeConfig({ kubeconfig: plane.kubeconfigPath });
  const files = [
    ...(await yamlFilesIn(join(repoRoot, 'crds'))),
    ...(await yamlFilesIn(join(repoRoot, 'test', 'crds'))),
  ];
  await installCRDs(adminKc, await readCRDs(files));
  logger.info(
    { kubeconfig: plane.kubeconfigPath, server: plane.server, kubeVersion: plane.serverVersion },
    `local control plane ready: export KUBECONFIG=${plane.kubeconfigPath} and kubectl apply -f examples/`,
  );
} else {
  logger.info({ source }, 'using the configured cluster');
}

let kubeConfig;
try {
  kubeConfig = loadKubeConfig({ kubeconfig: kubeconfigPath });
} catch (err) {
  logger.fatal(
    { source },
    `cannot load a cluster configuration: ${err instanceof Error ? err.message : String(err)} — fix --kubeconfig/$KUBECONFIG, or unset them and run with --dev-cluster=auto (npm start) to use a local control plane`,
  );
  process.exit(1);
}
const controller = await startController(opts, {
  kubeConfig,
  logger,
  redactor,
  onLostLeadership: () => {
    logger.error('leadership lost: exiting so that only the leader sends');
    process.exit(1);
  },
});
logger.info(
  { metricsPort: controller.metricsPort, probePort: controller.probePort, leaderElect: opts.leaderElect },
  'controller started',
);

let stopping = false;
const shutdown = (signal: NodeJS.Signals): void => {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down: draining in-flight work');
  const hard = setTimeout(() => {
    logger.error('shutdown deadline exceeded; exiting');
    process.exit(1);
  }, opts.shutdownTimeoutMs + 5_000);
  hard.unref();
  void controller
    .stop()
    .then(() => stopDevCluster?.())
    .then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
