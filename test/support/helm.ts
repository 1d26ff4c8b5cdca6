/**
 * The real helm for tests: built from its Go module by scripts/helm-build.sh into
 * ~/.cache/pko-notification-controller/helm/<version>/ (`npm test`'s pretest builds it; a missing
 * binary is built here, which takes about 1.5 minutes once). Never a fake: if it cannot be built,
 * the test fails with the script's output.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT, type KubectlResult } from './kubectl.ts';

/** The chart, relative to the repository root. */
export const CHART = 'charts/pko-notification-controller';

let cached: string | undefined;
/** helm's own config, cache and data folders: nothing of the user's ~/.config/helm is read. */
const HELM_HOME = mkdtempSync(path.join(tmpdir(), 'pko-nc-helm-home-'));

/** Path of the helm binary (built on first use). */
export function helmPath(): string {
  cached ??= execFileSync('bash', [path.join(ROOT, 'scripts', 'helm-build.sh')], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return cached;
}

/** Runs helm `args` from the repository root with only `KUBECONFIG` (if given), `PATH`, `HOME` and helm's folders set. */
export function helm(args: readonly string[], opts: { kubeconfig?: string } = {}): Promise<KubectlResult> {
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: HELM_HOME,
    HELM_CONFIG_HOME: path.join(HELM_HOME, 'config'),
    HELM_CACHE_HOME: path.join(HELM_HOME, 'cache'),
    HELM_DATA_HOME: path.join(HELM_HOME, 'data'),
    ...(opts.kubeconfig !== undefined ? { KUBECONFIG: opts.kubeconfig } : {}),
  };
  return new Promise((resolve) => {
    execFile(
      helmPath(),
      [...args],
      { cwd: ROOT, env, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A rendered Kubernetes object. */
export interface Obj {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
}

/**
 * `helm template <release> CHART --namespace <ns> [--include-crds] [--set-json k=v …]` as parsed
 * objects; throws with helm's stderr on failure.
 */
export async function helmTemplate(
  opts: {
    release?: string;
    namespace?: string;
    includeCrds?: boolean;
    values?: Record<string, unknown>;
  } = {},
): Promise<Obj[]> {
  const args = [
    'template',
    opts.release ?? 'pko-notification-controller',
    CHART,
    '--namespace',
    opts.namespace ?? 'pko-notification-system',
    ...(opts.includeCrds === true ? ['--include-crds'] : []),
    ...Object.entries(opts.values ?? {}).flatMap(([k, v]) => ['--set-json', `${k}=${JSON.stringify(v)}`]),
  ];
  const res = await helm(args);
  if (res.code !== 0) throw new Error(`helm ${args.join(' ')} failed (${res.code}): ${res.stderr}`);
  return parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
}
