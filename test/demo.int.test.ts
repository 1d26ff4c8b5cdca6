/**
 * `npm run demo` (scripts/demo.ts) end to end, as a new user runs it: its own control plane,
 * the controller process, a receiver, simulated PKO runs; exits 0 having printed the four
 * deliveries and the note that PKO was simulated.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('npm run demo', () => {
  it('delivers a preview and an update to its local receiver and says PKO was simulated', async () => {
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>(
      (resolve) => {
        execFile(
          process.execPath,
          [path.join(ROOT, 'scripts', 'demo.ts')],
          {
            cwd: ROOT,
            env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' },
            timeout: 110_000,
          },
          (err, out, errOut) => {
            resolve({
              code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1,
              stdout: out,
              stderr: errOut,
            });
          },
        );
      },
    );
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    const delivered = [...stdout.matchAll(/^ {2}(\w+) +info +Stack demo\/(\S+)$/gm)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    expect(delivered).toEqual([
      'PreviewStarted demo-app-pr-42',
      'PreviewSucceeded demo-app-pr-42',
      'UpdateStarted demo-app',
      'UpdateSucceeded demo-app',
    ]);
    expect(stdout).toMatch(/\[simulated PKO\] update demo-app-\w+ of Stack demo-app started/);
    expect(stdout).toContain('The PKO side was simulated');
  }, 120_000);
});
