/**
 * `npm run demo -- --real-pko` (scripts/demo.ts) end to end, as a user runs it: its own control
 * plane with PKO v1's CRDs, the controller process, a receiver, and the real PKO v1.16 manager
 * running `pulumi up` on a good commit, then on a broken one. Exits 0 having printed one
 * `UpdateSucceeded` and one `UpdateFailed` (with the Pulumi CLI's error text) and the note that
 * the PKO side was real. The demo takes the machine-wide real-operator lock itself; this file
 * holds none, so the one-file-at-a-time order of the project keeps them from colliding.
 * Measured: ~46 s once the lock is free (the `pulumi up` of the first commit took 16 s).
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('npm run demo -- --real-pko', () => {
  it('delivers a real PKO v1 update and a real failure, and says PKO was real', async () => {
    // The demo finds the parts under <cache root>/<versions>/, as the build script lays them out.
    const cacheRoot = path.dirname(inject('realPkoDir'));
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>(
      (resolve) => {
        execFile(
          process.execPath,
          [path.join(ROOT, 'scripts', 'demo.ts'), '--real-pko'],
          {
            cwd: ROOT,
            env: {
              PATH: process.env['PATH'] ?? '',
              HOME: process.env['HOME'] ?? '',
              PKO_NC_REALPKO_CACHE: cacheRoot,
            },
            timeout: 540_000,
            maxBuffer: 16 * 1024 * 1024,
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
    expect(stdout).toContain('real PKO run: PKO v1.16.0 manager');
    const delivered = [...stdout.matchAll(/^ {2}(\w+) +(info|error) +Stack demo\/(\S+)$/gm)].map(
      (m) => `${m[1]} ${m[2]} ${m[3]}`,
    );
    expect(delivered).toEqual(['UpdateSucceeded info demo-app', 'UpdateFailed error demo-app']);
    // The failure carries the Pulumi CLI's own error for the broken program (test/support/realpko.ts yamlProgram).
    expect(stdout).toContain('resource or variable named "doesNotExist" could not be found');
    expect(stdout).toContain('The PKO side was real');
    expect(stdout).not.toContain('[simulated PKO]');
  }, 600_000);
});
