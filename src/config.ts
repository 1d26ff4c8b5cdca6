/**
 * Command-line flags and environment → typed options. The only module that reads
 * `process.argv`/`process.env` (besides the dev control plane in src/envtest/).
 *
 * Flags follow controller-runtime conventions so Flux/PKO operators recognise them.
 */
import { parseArgs } from 'node:util';
import { hostname, homedir } from 'node:os';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { LOG_LEVELS } from './log.ts';
import { parseDuration } from './api/duration.ts';

export interface ControllerOptions {
  /** `host:port` for `/metrics`; `0` disables. Default `:8080`. */
  metricsBindAddress: string;
  /** `host:port` for `/healthz` and `/readyz`; `0` disables. Default `:8081`. */
  healthProbeBindAddress: string;
  /** Hold a `coordination.k8s.io/v1` Lease before sending anything. Default false. */
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionID: string;
  /** Lease timings, ms (controller-runtime defaults 15 s / 10 s / 2 s). */
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** Identity written into the Lease; default `<hostname>_<random>`. */
  identity: string;
  /** Watch only this namespace; empty = all namespaces. */
  watchNamespace: string;
  /** Label selector for the Providers and Alerts this instance serves (Flux's sharding flag); empty = all. */
  watchLabelSelector: string;
  /** Goes into default commit-status contexts so two clusters never overwrite each other. */
  clusterName: string;
  logLevel: (typeof LOG_LEVELS)[number];
  /** Explicit kubeconfig path; otherwise in-cluster, `KUBECONFIG`, `~/.kube/config`. */
  kubeconfig: string | undefined;
  /** Forbid Alerts from selecting sources in other namespaces (Flux's `--no-cross-namespace-refs`). */
  noCrossNamespaceRefs: boolean;
  /** Periodic full relist of every informer, milliseconds. Default 10 min. */
  relistIntervalMs: number;
  /** Graceful shutdown deadline for in-flight work, milliseconds. Default 30 s. */
  shutdownTimeoutMs: number;
  /** Re-read interval of a ready Provider's Secrets, milliseconds. Default 30 s. */
  secretRefreshMs: number;
  /** Pace GitHub writes (≥ 1 s apart) as GitHub's secondary rate limits ask. Default true. */
  githubWritePacing: boolean;
  /** Start a local etcd + kube-apiserver when no cluster is configured (`npm start`). */
  devCluster: 'auto' | 'never' | 'always';
}

const USAGE = `pko-notification-controller [flags]
  --metrics-bind-address=:8080        /metrics address ("0" disables)
  --health-probe-bind-address=:8081   /healthz and /readyz address ("0" disables)
  --leader-elect                      enable Lease-based leader election
  --leader-election-namespace=NS      Lease namespace (default: $POD_NAMESPACE or "default")
  --leader-election-id=NAME           Lease name (default: pko-notification-controller-leader)
  --leader-election-lease-duration=15s  how long followers wait after the last renewal before taking over
  --leader-election-renew-deadline=10s  how long the leader keeps trying to renew before it stops leading
  --leader-election-retry-period=2s     interval of renewals and acquisition attempts
  --watch-namespace=NS                only watch NS (default: all namespaces)
  --watch-label-selector=SEL          only serve Providers/Alerts matching SEL, e.g. sharding.fluxcd.io/key=shard1
  --cluster-name=NAME                 cluster name used in commit status contexts (default: "default")
  --log-level=info                    trace|debug|info|warn|error|fatal|silent
  --kubeconfig=PATH                   kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  --no-cross-namespace-refs           Alerts may only select sources in their own namespace
  --relist-interval=10m               periodic full relist of watched objects
  --shutdown-timeout=30s              deadline for in-flight work on SIGTERM
  --secret-refresh-interval=30s       re-read interval of the Secrets a ready Provider references
  --github-write-pacing=true          space GitHub writes as GitHub asks (false: GHES without rate limits)
  --dev-cluster=auto|never|always     start a local control plane when no cluster is configured
`;

export class UsageError extends Error {
  override name = 'UsageError';
  readonly usage = USAGE;
}

/** Parses flags (`argv` without node and script) and environment into options; throws UsageError. */
export function loadConfig(
  argv: readonly string[] = process.argv.slice(2),
  env: NodeJS.ProcessEnv = process.env,
): ControllerOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        'metrics-bind-address': { type: 'string', default: ':8080' },
        'health-probe-bind-address': { type: 'string', default: ':8081' },
        'leader-elect': { type: 'boolean', default: false },
        'leader-election-namespace': { type: 'string' },
        'leader-election-id': { type: 'string', default: 'pko-notification-controller-leader' },
        'leader-election-lease-duration': { type: 'string', default: '15s' },
        'leader-election-renew-deadline': { type: 'string', default: '10s' },
        'leader-election-retry-period': { type: 'string', default: '2s' },
        'watch-namespace': { type: 'string', default: '' },
        'watch-label-selector': { type: 'string', default: '' },
        'cluster-name': { type: 'string', default: 'default' },
        'log-level': { type: 'string', default: 'info' },
        kubeconfig: { type: 'string' },
        'no-cross-namespace-refs': { type: 'boolean', default: false },
        'relist-interval': { type: 'string', default: '10m' },
        'shutdown-timeout': { type: 'string', default: '30s' },
        'secret-refresh-interval': { type: 'string', default: '30s' },
        'github-write-pacing': { type: 'string', default: 'true' },
        'dev-cluster': { type: 'string', default: 'never' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const v = parsed.values;
  if (v.help) throw new UsageError('help requested');
  const logLevel = v['log-level'];
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new UsageError(
      `--log-level must be one of ${LOG_LEVELS.join(', ')}; got ${JSON.stringify(logLevel)}`,
    );
  }
  const devCluster = v['dev-cluster'];
  if (devCluster !== 'auto' && devCluster !== 'never' && devCluster !== 'always') {
    throw new UsageError(`--dev-cluster must be auto, never or always; got ${JSON.stringify(devCluster)}`);
  }
  const clusterName = v['cluster-name'];
  if (!/^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/.test(clusterName)) {
    throw new UsageError('--cluster-name must be a DNS label-like name (lower case, digits, "-", ".", ≤ 63)');
  }
  let relistIntervalMs: number;
  let shutdownTimeoutMs: number;
  let secretRefreshMs: number;
  let leaseDurationMs: number;
  let renewDeadlineMs: number;
  let retryPeriodMs: number;
  try {
    relistIntervalMs = parseDuration(v['relist-interval']);
    shutdownTimeoutMs = parseDuration(v['shutdown-timeout']);
    secretRefreshMs = parseDuration(v['secret-refresh-interval']);
    leaseDurationMs = parseDuration(v['leader-election-lease-duration']);
    renewDeadlineMs = parseDuration(v['leader-election-renew-deadline']);
    retryPeriodMs = parseDuration(v['leader-election-retry-period']);
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  if (secretRefreshMs < 1000) throw new UsageError('--secret-refresh-interval must be at least 1s');
  const pacing = v['github-write-pacing'];
  if (pacing !== 'true' && pacing !== 'false') throw new UsageError('--github-write-pacing must be true or false');
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new UsageError('leader election needs retry-period < renew-deadline < lease-duration');
  }
  return {
    metricsBindAddress: v['metrics-bind-address'],
    healthProbeBindAddress: v['health-probe-bind-address'],
    leaderElect: v['leader-elect'],
    leaderElectionNamespace: v['leader-election-namespace'] ?? env.POD_NAMESPACE ?? 'default',
    leaderElectionID: v['leader-election-id'],
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    identity: env.POD_NAME ?? `${hostname()}_${Math.random().toString(16).slice(2, 10)}`,
    watchNamespace: v['watch-namespace'],
    watchLabelSelector: v['watch-label-selector'],
    clusterName,
    logLevel: logLevel as ControllerOptions['logLevel'],
    kubeconfig: v.kubeconfig ?? env.PKO_NC_KUBECONFIG,
    noCrossNamespaceRefs: v['no-cross-namespace-refs'],
    relistIntervalMs,
    shutdownTimeoutMs,
    secretRefreshMs,
    githubWritePacing: pacing === 'true',
    devCluster,
  };
}

/** Where a cluster connection would come from, in `loadKubeConfig` order; `none` starts the dev control plane under `--dev-cluster=auto`. */
export function clusterSource(
  opts: Pick<ControllerOptions, 'kubeconfig'>,
  env: NodeJS.ProcessEnv = process.env,
): 'flag' | 'in-cluster' | 'KUBECONFIG' | 'default-file' | 'none' {
  if (opts.kubeconfig) return 'flag';
  if (env.KUBERNETES_SERVICE_HOST && existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token'))
    return 'in-cluster';
  if (env.KUBECONFIG) return 'KUBECONFIG';
  if (existsSync(join(homedir(), '.kube', 'config'))) return 'default-file';
  return 'none';
}
