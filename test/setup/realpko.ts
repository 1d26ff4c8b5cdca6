/**
 * vitest globalSetup of the `real-pko` project: makes sure the real PKO parts are built
 * (scripts/realpko-build.sh: instant when cached, ~25 min cold, progress on stderr) and that the
 * upstream PKO CRDs are beside the repository, then provides the parts' folder as `realPkoDir`.
 * Control planes are started per test file (test/support/realpko.ts), so that PKO v1 runs on a
 * cluster with v1's CRDs only and v2 on one with v2's. Anything missing fails the run loudly.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { REALPKO_VERSIONS, SHARED_PKO_CRDS, realPkoBinaries } from '../support/realpko.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export default async function setup(project: TestProject): Promise<void> {
  if (!existsSync(SHARED_PKO_CRDS)) {
    throw new Error(
      `real-pko: upstream PKO CRDs not found at ${SHARED_PKO_CRDS} (reference data beside the repository)`,
    );
  }
  const t0 = performance.now();
  const dir = await new Promise<string>((resolve, reject) => {
    const child = spawn('bash', [path.join(ROOT, 'scripts', 'realpko-build.sh')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString('utf8');
    });
    child.stderr.on('data', (b: Buffer) => {
      const text = b.toString('utf8');
      err = (err + text).slice(-8000);
      // Progress lines of the script itself; Go's own output stays in the failure message.
      for (const line of text.split('\n')) if (line.startsWith('realpko-build:')) console.error(line);
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(out.trim().split('\n').at(-1) ?? '');
      else reject(new Error(`scripts/realpko-build.sh failed (exit ${String(code)}):\n${err}`));
    });
  });
  realPkoBinaries(dir);
  project.provide('realPkoDir', dir);
  console.log(
    `real PKO: v${REALPKO_VERSIONS.pkoV1} and v${REALPKO_VERSIONS.pkoV2}, Pulumi CLI v${REALPKO_VERSIONS.pulumi}, ` +
      `pulumi-language-yaml v${REALPKO_VERSIONS.pulumiYaml} from ${dir} (ready in ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
}
