/**
 * Command-line flags and environment → typed options. The only module that reads
 * `process.argv`/`process.env` (besides the dev control plane in src/envtest/).
 *
 * Flags follow controller-runtime conventions so Flux/PKO operators recognise them.
 */
import { parseArgs } from 'node:util';
import { hostname, homedir } from 'node:os';
import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import ipaddr from 'ipaddr.js';
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
  /**
   * Goes into default commit-status contexts so two clusters never overwrite each other. '' (the
   * default): derived from the kube-system namespace UID at start (src/kube/cluster-name.ts).
   */
  clusterName: string;
  logLevel: (typeof LOG_LEVELS)[number];
  /** Explicit kubeconfig path; otherwise in-cluster, `KUBECONFIG`, `~/.kube/config`. */
  kubeconfig: string | undefined;
  /**
   * Forbid Alerts from selecting sources in other namespaces (Flux's `--no-cross-namespace-refs`).
   * Default true: `--no-cross-namespace-refs=false` opens it, and then an Alert that
   * selects another namespace (or `*`) is honoured only when the admission policy of
   * config/admission checked that its writer may list Stacks there (src/reconcile/alert.ts).
   */
  noCrossNamespaceRefs: boolean;
  /** Periodic full relist of every informer, milliseconds. Default 10 min. */
  relistIntervalMs: number;
  /** Graceful shutdown deadline for in-flight work, milliseconds. Default 30 s. */
  shutdownTimeoutMs: number;
  /** Re-read interval of a ready Provider's Secrets, milliseconds. Default 30 s. */
  secretRefreshMs: number;
  /**
   * A PKO v2 Stack `Reconciling` this long with no run in progress is reported stuck
   * (`StackStalled`, reason `NoProgress`; docs/events.md), milliseconds. Default 30 min.
   */
  stackStuckAfterMs: number;
  /** Pace GitHub writes (≥ 1 s apart) as GitHub's secondary rate limits ask. Default true. */
  githubWritePacing: boolean;
  /**
   * Events in flight (sent, not yet recorded) per `generic`/`generic-hmac` Provider: after a kill,
   * at most this many per Provider arrive again, each with its same `X-PKO-Event-Id`. Chat types
   * keep 1; forges are not windowed (docs/delivery.md). Default 16, 1–256.
   */
  providerWindow: number;
  /** Start a local etcd + kube-apiserver when no cluster is configured (`npm start`). */
  devCluster: 'auto' | 'never' | 'always';
  /**
   * Folder the dev control plane keeps across runs: etcd data, certificates, tokens and the admin
   * kubeconfig (`<dir>/kubeconfig`). Default `$XDG_CACHE_HOME` or `~/.cache`, then
   * `pko-notification-controller/dev`.
   */
  devClusterDir: string;
  /** Wipe {@link devClusterDir} before starting the dev control plane (`--fresh`). */
  fresh: boolean;
  /**
   * `json` (pino, one object per line), `pretty` (pino-pretty, a devDependency: dev only), or
   * `auto`: pretty when a dev control plane may start (`--dev-cluster` auto/always) and stdout
   * is a terminal, else json.
   */
  logFormat: 'json' | 'pretty' | 'auto';
  /**
   * `host:port` of the pull-request preview webhook receiver (`/hooks/<namespace>/<name>`);
   * empty or `0` disables it (default: disabled; previews then rely on polling).
   */
  previewWebhookBindAddress: string;
  /** Largest webhook body accepted, bytes (default 1 MiB; larger deliveries get 413). */
  previewWebhookMaxBodyBytes: number;
  /** Drift check Stacks at once in the cluster (docs/drift.md; default 4). */
  driftMaxChecks: number;
  /** Drift check Stacks at once in one namespace (default 2). */
  driftMaxChecksPerNamespace: number;
  /** Where Provider connections may go (src/notifier/egress.ts, docs/threat-model.md). */
  egress: {
    /** Allow loopback addresses: development (`npm start`) and tests only. Default false. */
    allowLoopback: boolean;
    /** When not empty, connect only to addresses in these CIDRs. */
    allowCIDRs: string[];
    /** Never connect to addresses in these CIDRs. */
    denyCIDRs: string[];
    /** When not empty, contact only host names matching these globs. */
    allowHosts: string[];
    /** Never contact host names matching these globs. */
    denyHosts: string[];
  };
}

const USAGE = `pko-notification-controller [flags]
  --metrics-bind-address=:8080        /metrics address ("0" disables; free loopback port with --dev-cluster auto|always)
  --health-probe-bind-address=:8081   /healthz and /readyz address (same)
  --preview-webhook-bind-address=ADDR pull-request preview webhook receiver, /hooks/<ns>/<name> (default: off)
  --preview-webhook-max-body-bytes=N  largest webhook body accepted (default 1048576)
  --drift-max-checks=N                drift check Stacks at once in the cluster (default 4)
  --drift-max-checks-per-namespace=N  drift check Stacks at once in one namespace (default 2)
  --leader-elect                      enable Lease-based leader election
  --leader-election-namespace=NS      Lease namespace (default: $POD_NAMESPACE or "default")
  --leader-election-id=NAME           Lease name (default: pko-notification-controller-leader)
  --leader-election-lease-duration=15s  how long followers wait after the last renewal before taking over
  --leader-election-renew-deadline=10s  how long the leader keeps trying to renew before it stops leading
  --leader-election-retry-period=2s     interval of renewals and acquisition attempts
                                      (the three leader-election durations: at most 10m each)
  --watch-namespace=NS                only watch NS (default: all namespaces)
  --watch-label-selector=SEL          only serve Providers/Alerts matching SEL, e.g. sharding.fluxcd.io/key=shard1
  --cluster-name=NAME                 cluster name used in commit status contexts (default: derived from
                                      the kube-system namespace UID, e.g. cluster-3f9e1c2a)
  --log-level=info                    trace|debug|info|warn|error|fatal|silent
  --log-format=auto                   json|pretty|auto (pretty: dev runs on a terminal)
  --kubeconfig=PATH                   kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  --no-cross-namespace-refs=true      Alerts may only select sources in their own namespace (default);
                                      =false lets an Alert select other namespaces when the admission
                                      policy pko-notification-controller-alert-sources checked that its
                                      writer may list Stacks there
  --relist-interval=10m               periodic full relist of watched objects (at most 24h)
  --shutdown-timeout=30s              deadline for in-flight work on SIGTERM (at most 1h)
  --secret-refresh-interval=30s       re-read interval of the Secrets a ready Provider references (1s–24h)
  --stack-stuck-after=30m             a PKO v2 Stack Reconciling this long with no run is reported stuck (StackStalled NoProgress; 1s–24h)
  --github-write-pacing=true          space GitHub writes as GitHub asks (false: GHES without rate limits)
  --provider-window=16                events in flight per generic/generic-hmac Provider (1–256): after a
                                      kill at most this many repeat, with the same X-PKO-Event-Id
  --dev-cluster=auto|never|always     start a local control plane when no cluster is configured
  --dev-cluster-dir=DIR               where it keeps its data and kubeconfig across runs
                                      (default ~/.cache/pko-notification-controller/dev)
  --fresh                             wipe that folder first (a new, empty dev cluster)
  --egress-allow-loopback             allow Provider connections to loopback (development only)
  --egress-allow-cidrs=LIST           connect only to these CIDRs (comma-separated), e.g. 10.0.0.0/8
  --egress-deny-cidrs=LIST            never connect to these CIDRs
  --egress-allow-hosts=LIST           contact only host names matching these globs, e.g. *.example.com
  --egress-deny-hosts=LIST            never contact host names matching these globs
`;

/** Comma-separated list → trimmed, non-empty entries. */
function list(v: string): string[] {
  return v
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
}

function cidrs(flag: string, v: string): string[] {
  const out = list(v);
  for (const c of out) {
    if (!ipaddr.isValidCIDR(c) && isIP(c) === 0) {
      throw new UsageError(
        `--${flag}: ${JSON.stringify(c)} is not a CIDR (e.g. 10.0.0.0/8, fd00::/8) or an IP address`,
      );
    }
  }
  return out;
}

function hostGlobs(flag: string, v: string): string[] {
  const out = list(v);
  for (const h of out) {
    if (!/^[A-Za-z0-9*?.[\]:-]+$/.test(h)) {
      throw new UsageError(
        `--${flag}: ${JSON.stringify(h)} is not a host name glob (letters, digits, '.', '-', '*', '?')`,
      );
    }
  }
  return out;
}

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
      args: argv.map((a) => (a === '--no-cross-namespace-refs' ? '--no-cross-namespace-refs=true' : a)),
      strict: true,
      allowPositionals: false,
      options: {
        // No parseArgs defaults: an unset flag gets a dev-mode default below.
        'metrics-bind-address': { type: 'string' },
        'health-probe-bind-address': { type: 'string' },
        'preview-webhook-bind-address': { type: 'string', default: '' },
        'preview-webhook-max-body-bytes': { type: 'string', default: '1048576' },
        'drift-max-checks': { type: 'string', default: '4' },
        'drift-max-checks-per-namespace': { type: 'string', default: '2' },
        'leader-elect': { type: 'boolean', default: false },
        'leader-election-namespace': { type: 'string' },
        'leader-election-id': { type: 'string', default: 'pko-notification-controller-leader' },
        'leader-election-lease-duration': { type: 'string', default: '15s' },
        'leader-election-renew-deadline': { type: 'string', default: '10s' },
        'leader-election-retry-period': { type: 'string', default: '2s' },
        'watch-namespace': { type: 'string', default: '' },
        'watch-label-selector': { type: 'string', default: '' },
        'cluster-name': { type: 'string', default: '' },
        'log-level': { type: 'string', default: 'info' },
        'log-format': { type: 'string', default: 'auto' },
        kubeconfig: { type: 'string' },
        // A string, so that `=false` opens it (Go's flag package, which Flux uses, takes both).
        'no-cross-namespace-refs': { type: 'string', default: 'true' },
        'relist-interval': { type: 'string', default: '10m' },
        'shutdown-timeout': { type: 'string', default: '30s' },
        'secret-refresh-interval': { type: 'string', default: '30s' },
        'stack-stuck-after': { type: 'string', default: '30m' },
        'github-write-pacing': { type: 'string', default: 'true' },
        'provider-window': { type: 'string', default: '16' },
        'dev-cluster': { type: 'string', default: 'never' },
        'dev-cluster-dir': { type: 'string' },
        fresh: { type: 'boolean', default: false },
        'egress-allow-loopback': { type: 'boolean', default: false },
        'egress-allow-cidrs': { type: 'string', default: '' },
        'egress-deny-cidrs': { type: 'string', default: '' },
        'egress-allow-hosts': { type: 'string', default: '' },
        'egress-deny-hosts': { type: 'string', default: '' },
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
  const logFormat = v['log-format'];
  if (logFormat !== 'json' && logFormat !== 'pretty' && logFormat !== 'auto') {
    throw new UsageError(`--log-format must be json, pretty or auto; got ${JSON.stringify(logFormat)}`);
  }
  const clusterName = v['cluster-name'];
  if (clusterName !== '' && !/^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$/.test(clusterName)) {
    throw new UsageError('--cluster-name must be a DNS label-like name (lower case, digits, "-", ".", ≤ 63)');
  }
  let relistIntervalMs: number;
  let shutdownTimeoutMs: number;
  let secretRefreshMs: number;
  let stackStuckAfterMs: number;
  let leaseDurationMs: number;
  let renewDeadlineMs: number;
  let retryPeriodMs: number;
  try {
    relistIntervalMs = parseDuration(v['relist-interval']);
    shutdownTimeoutMs = parseDuration(v['shutdown-timeout']);
    secretRefreshMs = parseDuration(v['secret-refresh-interval']);
    stackStuckAfterMs = parseDuration(v['stack-stuck-after']);
    leaseDurationMs = parseDuration(v['leader-election-lease-duration']);
    renewDeadlineMs = parseDuration(v['leader-election-renew-deadline']);
    retryPeriodMs = parseDuration(v['leader-election-retry-period']);
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  // every duration flag has a ceiling, well inside what a timer holds (2^31 − 1 ms).
  for (const [flag, ms, max] of [
    ['relist-interval', relistIntervalMs, '24h'],
    ['shutdown-timeout', shutdownTimeoutMs, '1h'],
    ['secret-refresh-interval', secretRefreshMs, '24h'],
    ['stack-stuck-after', stackStuckAfterMs, '24h'],
    ['leader-election-lease-duration', leaseDurationMs, '10m'],
    ['leader-election-renew-deadline', renewDeadlineMs, '10m'],
    ['leader-election-retry-period', retryPeriodMs, '10m'],
  ] as const) {
    if (ms > parseDuration(max)) throw new UsageError(`--${flag} must be at most ${max}`);
  }
  if (secretRefreshMs < 1000) throw new UsageError('--secret-refresh-interval must be at least 1s');
  if (stackStuckAfterMs < 1000) throw new UsageError('--stack-stuck-after must be at least 1s');
  const pacing = v['github-write-pacing'];
  if (pacing !== 'true' && pacing !== 'false')
    throw new UsageError('--github-write-pacing must be true or false');
  const noCrossNamespaceRefs = v['no-cross-namespace-refs'];
  if (noCrossNamespaceRefs !== 'true' && noCrossNamespaceRefs !== 'false')
    throw new UsageError(
      `--no-cross-namespace-refs must be true or false (--no-cross-namespace-refs alone is true); got ${JSON.stringify(noCrossNamespaceRefs)}`,
    );
  const providerWindow = positiveInt(v['provider-window'], 'provider-window');
  if (providerWindow > 256) throw new UsageError('--provider-window must be at most 256');
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new UsageError('leader election needs retry-period < renew-deadline < lease-duration');
  }
  // Dev runs (`npm start`) bind free loopback ports unless told otherwise, so a second instance
  // or a stale `KUBECONFIG` (kubectl's fallback is localhost:8080) never meets a fixed port.
  const dev = devCluster !== 'never';
  const cacheHome = env.XDG_CACHE_HOME ?? join(homedir(), '.cache');
  return {
    metricsBindAddress: v['metrics-bind-address'] ?? (dev ? '127.0.0.1:0' : ':8080'),
    healthProbeBindAddress: v['health-probe-bind-address'] ?? (dev ? '127.0.0.1:0' : ':8081'),
    previewWebhookBindAddress:
      v['preview-webhook-bind-address'] === '0' ? '' : v['preview-webhook-bind-address'],
    previewWebhookMaxBodyBytes: positiveInt(
      v['preview-webhook-max-body-bytes'],
      'preview-webhook-max-body-bytes',
    ),
    driftMaxChecks: positiveInt(v['drift-max-checks'], 'drift-max-checks'),
    driftMaxChecksPerNamespace: positiveInt(
      v['drift-max-checks-per-namespace'],
      'drift-max-checks-per-namespace',
    ),
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
    noCrossNamespaceRefs: noCrossNamespaceRefs === 'true',
    relistIntervalMs,
    shutdownTimeoutMs,
    secretRefreshMs,
    stackStuckAfterMs,
    githubWritePacing: pacing === 'true',
    providerWindow,
    devCluster,
    devClusterDir: v['dev-cluster-dir'] ?? join(cacheHome, 'pko-notification-controller', 'dev'),
    fresh: v.fresh,
    logFormat,
    egress: {
      allowLoopback: v['egress-allow-loopback'],
      allowCIDRs: cidrs('egress-allow-cidrs', v['egress-allow-cidrs']),
      denyCIDRs: cidrs('egress-deny-cidrs', v['egress-deny-cidrs']),
      allowHosts: hostGlobs('egress-allow-hosts', v['egress-allow-hosts']),
      denyHosts: hostGlobs('egress-deny-hosts', v['egress-deny-hosts']),
    },
  };
}

/**
 * Where a cluster connection would come from, in `loadKubeConfig` order. `none` starts the dev
 * control plane under `--dev-cluster=auto`, and so does `dev-cluster`: the configured kubeconfig
 * (flag or the first `KUBECONFIG` entry) is the dev control plane's own `<devClusterDir>/kubeconfig`
 * — exported by the user after an earlier `npm start` — which only answers while it runs.
 */
export function clusterSource(
  opts: Pick<ControllerOptions, 'kubeconfig'> & Partial<Pick<ControllerOptions, 'devClusterDir'>>,
  env: NodeJS.ProcessEnv = process.env,
): 'flag' | 'in-cluster' | 'KUBECONFIG' | 'default-file' | 'dev-cluster' | 'none' {
  const devKubeconfig =
    opts.devClusterDir !== undefined ? resolve(opts.devClusterDir, 'kubeconfig') : undefined;
  const isDev = (file: string): boolean => devKubeconfig !== undefined && resolve(file) === devKubeconfig;
  if (opts.kubeconfig) return isDev(opts.kubeconfig) ? 'dev-cluster' : 'flag';
  if (env.KUBERNETES_SERVICE_HOST && existsSync('/var/run/secrets/kubernetes.io/serviceaccount/token'))
    return 'in-cluster';
  if (env.KUBECONFIG) return isDev(env.KUBECONFIG.split(delimiter)[0] ?? '') ? 'dev-cluster' : 'KUBECONFIG';
  if (existsSync(join(homedir(), '.kube', 'config'))) return 'default-file';
  return 'none';
}

function positiveInt(raw: string, flag: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`--${flag} must be a positive integer; got ${JSON.stringify(raw)}`);
  }
  return n;
}
