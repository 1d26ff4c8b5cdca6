/**
 * Entry point: flags → options, optional local control plane, controller, signal handling.
 * Wiring only; the controller lives in controller.ts.
 */
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { writeSync } from 'node:fs';
import { UsageError, clusterSource, loadConfig, type ControllerOptions } from './config.ts';
import { createLogger } from './log.ts';
import { parseBindAddress } from './kube/health.ts';
import { loadKubeConfig } from './kube/client.ts';
import {
  installAdmissionObjects,
  installCRDs,
  readAdmissionObjects,
  readCRDs,
  yamlFilesIn,
} from './kube/crds.ts';
import { startController } from './controller.ts';
import { Redactor } from './credential/redact.ts';
import { ClusterNameError } from './kube/cluster-name.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

let opts: ControllerOptions;
try {
  opts = loadConfig();
} catch (err) {
  if (err instanceof UsageError) {
    const help = err.message === 'help requested';
    // The error goes last too: a container's log is read from its tail (`kubectl logs --tail`),
    // and the usage text is long.
    writeSync(help ? 1 : 2, help ? err.usage : `${err.message}\n\n${err.usage}\n${err.message}\n`);
    process.exit(help ? 0 : 2);
  }
  throw err;
}
const redactor = new Redactor();
// Pretty logs for people at a terminal in dev runs; JSON otherwise. pino-pretty is a
// devDependency (absent from the image), so it is loaded only when asked for.
const pretty =
  opts.logFormat === 'pretty' ||
  (opts.logFormat === 'auto' && opts.devCluster !== 'never' && process.stdout.isTTY);
let destination: NodeJS.WritableStream | undefined;
if (pretty) {
  try {
    const { default: pinoPretty } = await import('pino-pretty');
    destination = pinoPretty({
      sync: true,
      colorize: process.stdout.isTTY,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,controller',
    });
  } catch {
    writeSync(2, '--log-format=pretty needs the pino-pretty devDependency (npm ci, not --omit=dev)\n');
    process.exit(2);
  }
}
const logger = createLogger({ level: opts.logLevel, redactor, ...(destination ? { destination } : {}) });

let kubeconfigPath = opts.kubeconfig;
let stopDevCluster: (() => Promise<void>) | undefined;
const source = clusterSource(opts);
if (
  opts.devCluster === 'always' ||
  (opts.devCluster === 'auto' && (source === 'none' || source === 'dev-cluster'))
) {
  // No cluster configured: start etcd + kube-apiserver locally (built from Go modules on first use),
  // install our CRDs and the minimal PKO CRDs, and run against that.
  const { startControlPlane } = await import('./envtest/controlplane.ts');
  logger.info(
    { dir: opts.devClusterDir, fresh: opts.fresh },
    `${source === 'dev-cluster' ? 'the configured kubeconfig is the dev cluster’s' : 'no cluster configured'}: starting the local etcd + kube-apiserver kept in ${opts.devClusterDir}${opts.fresh ? ' (wiped first: --fresh)' : ''}`,
  );
  let plane;
  try {
    plane = await startControlPlane({
      persistDir: opts.devClusterDir,
      fresh: opts.fresh,
      // Build progress and what is being waited for, at info: a cold first start builds for minutes.
      log: (line) => {
        logger.info({ component: 'dev-cluster' }, line);
      },
    });
  } catch (err) {
    logger.fatal(
      { component: 'dev-cluster' },
      `the local control plane did not start: ${err instanceof Error ? err.message : String(err)}`,
    );
    process.exit(1);
  }
  stopDevCluster = () => plane.stop();
  kubeconfigPath = plane.kubeconfigPath;
  const adminKc = loadKubeConfig({ kubeconfig: plane.kubeconfigPath });
  const files = [
    ...(await yamlFilesIn(join(repoRoot, 'crds'))),
    ...(await yamlFilesIn(join(repoRoot, 'test', 'crds'))),
  ];
  await installCRDs(adminKc, await readCRDs(files));
  // What `kubectl apply -k config/default` would add: every admission policy and binding of
  // config/admission (PullRequestPreview overrides, DriftDetection remediation, Alert sources).
  await installAdmissionObjects(
    adminKc,
    await readAdmissionObjects(await yamlFilesIn(join(repoRoot, 'config', 'admission'))),
  );
  logger.info(
    { kubeconfig: plane.kubeconfigPath, server: plane.server, kubeVersion: plane.serverVersion },
    `local control plane ready (kept across runs; --fresh wipes it): export KUBECONFIG=${plane.kubeconfigPath}, then kubectl apply -f examples/ (no kubectl? npm run kubectl -- …)`,
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
/** The flag whose address a listen error is about (EADDRINUSE/EACCES carry the port). */
function bindFlag(err: unknown): string | undefined {
  for (let e = err; e instanceof Error; e = e.cause) {
    const { code, port } = e as NodeJS.ErrnoException & { port?: number };
    if ((code !== 'EADDRINUSE' && code !== 'EACCES') || port === undefined) continue;
    const flags: [string, string][] = [
      ['--metrics-bind-address', opts.metricsBindAddress],
      ['--health-probe-bind-address', opts.healthProbeBindAddress],
    ];
    const hit = flags.find(([, addr]) => {
      try {
        return parseBindAddress(addr)?.port === port;
      } catch {
        return false;
      }
    });
    if (hit)
      return `${hit[0]}=${hit[1]}: ${code === 'EADDRINUSE' ? 'address already in use (another instance running?)' : 'permission denied'}; pick another address with ${hit[0]}=HOST:PORT, or ${hit[0]}=0 to turn it off`;
  }
  return undefined;
}

let controller;
try {
  controller = await startController(opts, {
    kubeConfig,
    logger,
    redactor,
    onLostLeadership: () => {
      logger.error('leadership lost: exiting so that only the leader sends');
      process.exit(1);
    },
  });
} catch (err) {
  if (err instanceof ClusterNameError) {
    // No name two clusters could share by default (case N15): refuse rather than guess.
    logger.fatal(err.message);
    await stopDevCluster?.();
    process.exit(1);
  }
  const flag = bindFlag(err);
  if (flag === undefined) throw err;
  logger.fatal(`cannot listen on ${flag}`);
  await stopDevCluster?.();
  process.exit(1);
}
logger.info(
  {
    metricsPort: controller.metricsPort,
    probePort: controller.probePort,
    previewWebhookPort: controller.previewWebhookPort,
    leaderElect: opts.leaderElect,
  },
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
