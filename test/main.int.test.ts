/**
 * src/main.ts as a process: a bind address already in use ends the start with ONE fatal log line
 * that names the flag (not a stack trace), exit code 1.
 */
import { createServer, type Server } from 'node:net';
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
});
