/**
 * `npm run demo` (scripts/demo.ts) end to end, as a new user runs it: its own control plane,
 * the controller process, a receiver, simulated PKO runs on a simulated Pulumi Cloud backend;
 * exits 0 having printed the four deliveries — the finished preview and update with their change
 * sets (`Changes: +1 ~1`, read from Pulumi Cloud) — and the note that PKO was simulated. `--real-pko` without the real PKO parts ends at
 * once with the command that builds them (the real run itself is not part of the suite: it needs
 * the machine-wide real-operator lock and a minute or more of real `pulumi up`).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function runDemo(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(ROOT, 'scripts', 'demo.ts'), ...args],
      {
        cwd: ROOT,
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...env },
        timeout: timeoutMs,
      },
      (err, out, errOut) => {
        resolve({
          code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1,
          stdout: out,
          stderr: errOut,
        });
      },
    );
  });
}

describe('npm run demo', () => {
  it('delivers a preview and an update to its local receiver and says PKO was simulated', async () => {
    const { code, stdout, stderr } = await runDemo([], {}, 110_000);
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
    // The finished runs carry their change sets (from Pulumi Cloud: no workspace pod here).
    const messageOf = (reason: string): string =>
      new RegExp(`^ {2}${reason} .*\\n {6}message: {2}((?:.*\\n)(?: {16}.*\\n)*)`, 'm').exec(stdout)?.[1] ??
      '';
    expect(messageOf('PreviewSucceeded')).toMatch(/^ +Changes: \+1 ~1$/m);
    expect(messageOf('UpdateSucceeded')).toMatch(/^ +Changes: \+1 ~1$/m);
    expect(messageOf('PreviewStarted')).not.toContain('Changes:');
    expect(stdout).toMatch(/\[simulated Pulumi Cloud\] the controller made [1-9]\d* API calls/);
    expect(stdout).toContain('The PKO side was simulated');
  }, 120_000);

  it('--real-pko without the real PKO parts stops at once, naming what is missing and the build command', async () => {
    const emptyCache = mkdtempSync(path.join(tmpdir(), 'pko-nc-demo-no-realpko-'));
    const { code, stdout, stderr } = await runDemo(
      ['--real-pko'],
      { PKO_NC_REALPKO_CACHE: emptyCache },
      30_000,
    );
    expect(code, `${stdout}\n${stderr}`).toBe(1);
    expect(stderr).toContain('--real-pko needs the real PKO parts');
    expect(stderr).toContain(`real PKO part missing: ${emptyCache}/`);
    expect(stderr).toContain('npm run realpko:build');
    expect(stdout).not.toContain('starting a local control plane');
  }, 40_000);
});
