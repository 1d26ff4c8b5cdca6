/**
 * The real kubectl for tests: built from its Go module by scripts/kubectl-build.sh into
 * ~/.cache/pko-notification-controller/kubectl/<version>/ (`npm test`'s pretest builds it; a
 * missing binary is built here, which takes minutes once). Never a fake: if it cannot be built,
 * the test fails with the script's output.
 */
import { execFile, execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

let cached: string | undefined;

/** Path of the kubectl binary (built on first use). */
export function kubectlPath(): string {
  cached ??= execFileSync('bash', [path.join(ROOT, 'scripts', 'kubectl-build.sh')], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return cached;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs kubectl `args` from the repository root with only `KUBECONFIG` (if given), `PATH` and `HOME` set. */
export function kubectl(args: readonly string[], opts: { kubeconfig?: string } = {}): Promise<KubectlResult> {
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: process.env['HOME'] ?? '/tmp',
    ...(opts.kubeconfig !== undefined ? { KUBECONFIG: opts.kubeconfig } : {}),
  };
  return new Promise((resolve) => {
    execFile(
      kubectlPath(),
      [...args],
      { cwd: ROOT, env, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** `kubectl kustomize <dir>` (relative to the repository root) as parsed objects; throws on failure. */
export async function kustomize(dir: string): Promise<Record<string, unknown>[]> {
  const { parseAllDocuments } = await import('yaml');
  const res = await kubectl(['kustomize', dir]);
  if (res.code !== 0) throw new Error(`kubectl kustomize ${dir} failed (${res.code}): ${res.stderr}`);
  return parseAllDocuments(res.stdout).map((d) => d.toJS() as Record<string, unknown>);
}
