/**
 * src/main.ts as a process: a bind address already in use ends the start with ONE fatal log line
 * that names the flag (not a stack trace), exit code 1; `--log-format=pretty` prints for people.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { startControllerProcess, stopAll } from './support/controller-process.ts';

let blocker: Server | undefined;

afterAll(async () => {
  await stopAll();
  const b = blocker;
  if (b) {
    await new Promise<void>((resolve) => {
      b.close(() => {
        resolve();
      });
    });
  }
});

describe('main', () => {
  it.each([
    ['--metrics-bind-address', 'metrics'],
    ['--health-probe-bind-address', 'probes'],
  ])('EADDRINUSE on %s: one fatal line naming the flag, exit 1', async (flag) => {
    blocker ??= await new Promise<Server>((resolve, reject) => {
      const s = createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        resolve(s);
      });
    });
    const port = (blocker.address() as { port: number }).port;
    const started = startControllerProcess({
      kubeconfig: inject('kubeconfig'),
      args: [`${flag}=127.0.0.1:${port}`, '--watch-namespace=main-eaddrinuse'],
      startTimeoutMs: 20_000,
    });
    const err = await started.then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/exited \(code 1\)/);
    const lines = err?.message.split('\n') ?? [];
    const fatal = lines.filter((l) => l.includes('"level":"fatal"'));
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toContain(`cannot listen on ${flag}=127.0.0.1:${port}: address already in use`);
    expect(lines.filter((l) => /^\s+at /.test(l))).toEqual([]); // no stack trace
  });

  it('--log-format=pretty prints level names and messages, not JSON; json stays JSON', async () => {
    const run = (format: string): Promise<{ code: number; out: string }> =>
      new Promise((resolve) => {
        execFile(
          process.execPath,
          [
            path.join(import.meta.dirname, '..', 'src', 'main.ts'),
            `--log-format=${format}`,
            '--kubeconfig=/nonexistent',
          ],
          { env: { PATH: process.env['PATH'] ?? '' } },
          (err, stdout) => {
            resolve({ code: typeof err?.code === 'number' ? err.code : 0, out: stdout });
          },
        );
      });
    const pretty = await run('pretty');
    expect(pretty.code).toBe(1);
    expect(pretty.out).toMatch(
      /^\[\d\d:\d\d:\d\d\.\d{3}\] FATAL.*: cannot load a cluster configuration: kubeconfig file \/nonexistent does not exist/m,
    );
    expect(pretty.out).not.toMatch(/^\{/m);
    const json = await run('json');
    expect(json.code).toBe(1);
    // Every line is JSON (pino writes `fatal` synchronously, so it may come before earlier lines).
    const lines = json.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { level: string; msg: string });
    const line = lines.find((l) => l.level === 'fatal');
    expect(line).toBeDefined();
    expect(line?.msg).toMatch(/^cannot load a cluster configuration/);
  });
});
