/**
 * Runs the controller as a real OS process — `node src/main.ts` with the Node that runs the
 * tests (`process.execPath`, Node 24, which strips TypeScript types natively) — for tests that
 * need what only a process has: signals, exit codes, stdout logs, resident memory.
 *
 * The process gets `--kubeconfig=<file>`, `--metrics-bind-address=127.0.0.1:0`,
 * `--health-probe-bind-address=127.0.0.1:0`, `--dev-cluster=never` and — test receivers listen on
 * 127.0.0.1 — `--egress-allow-loopback` (unless `allowLoopback: false`), then the caller's
 * `args` (later flags win). Ports are found in main.ts's JSON log line `controller started`
 * (`metricsPort`, `probePort`), so the log level must stay at `info` or lower.
 * Environment: only `PATH`, `HOME` and the caller's `env` (nothing leaks in from the test run).
 *
 * Every process started here is tracked; {@link stopAll} (call it in `afterAll`) stops those
 * still running, and a process `exit` hook SIGKILLs any left when the test worker ends.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MAIN = path.join(ROOT, 'src', 'main.ts');

export interface ControllerProcessOptions {
  /** Kubeconfig file for `--kubeconfig`. */
  kubeconfig: string;
  /** More flags, after the defaults (so they override them). */
  args?: string[];
  /** Extra environment (e.g. `POD_NAME`, `POD_NAMESPACE`). */
  env?: Record<string, string>;
  /** How long to wait for the `controller started` line, ms (default 30 000). */
  startTimeoutMs?: number;
  /** Pass `--egress-allow-loopback` (default true: test receivers are on 127.0.0.1). */
  allowLoopback?: boolean;
  /** Node options before the script, e.g. `['--max-old-space-size=160']`. */
  nodeArgs?: string[];
  /**
   * A cgroup (v1) directory the process runs in from its first instruction (a shell joins it,
   * then execs node: the pid stays the same), e.g. from test/support/memory-cgroup.ts.
   */
  cgroupDir?: string;
}

/** How the process ended (as Node's `exit` event reports it). */
export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

export interface ControllerProcess {
  pid: number;
  /** Port of `/healthz` and `/readyz` on 127.0.0.1. */
  probePort: number;
  /** Port of `/metrics` on 127.0.0.1. */
  metricsPort: number;
  /** Every stdout and stderr line so far, raw, in arrival order (per stream). */
  logs(): string[];
  /**
   * Resolves with the first JSON log record (already seen or future) for which `predicate` is
   * true. Rejects after `timeoutMs`, or when the process exits first, with the last log lines.
   */
  waitForLog(
    predicate: (obj: Record<string, unknown>) => boolean,
    timeoutMs: number,
  ): Promise<Record<string, unknown>>;
  /** Polls `GET /readyz` until it answers 200; rejects on timeout (last answer in the message) or exit. */
  waitReady(timeoutMs: number): Promise<void>;
  /** Resident set size in bytes, from `/proc/<pid>/status` (`VmRSS`). Linux only; rejects after exit. */
  rssBytes(): Promise<number>;
  /** Sends `signal`; no-op once the process has exited. */
  kill(signal: NodeJS.Signals): void;
  /** Settles when the process has exited. Never rejects. */
  exited: Promise<ExitInfo>;
}

interface Waiter {
  predicate: (obj: Record<string, unknown>) => boolean;
  resolve: (obj: Record<string, unknown>) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

const running = new Set<Handle>();
let exitHookInstalled = false;

class Handle implements ControllerProcess {
  readonly pid: number;
  probePort = 0;
  metricsPort = 0;
  readonly exited: Promise<ExitInfo>;
  readonly #lines: string[] = [];
  readonly #records: Record<string, unknown>[] = [];
  readonly #waiters = new Set<Waiter>();
  readonly #kill: (signal: NodeJS.Signals) => void;
  #exit: ExitInfo | undefined;

  constructor(pid: number, exited: Promise<ExitInfo>, kill: (signal: NodeJS.Signals) => void) {
    this.pid = pid;
    this.#kill = kill;
    this.exited = exited.then((info) => {
      this.#exit = info;
      running.delete(this);
      for (const w of this.#waiters) {
        clearTimeout(w.timer);
        w.reject(
          new Error(
            `controller process exited (${describeExit(info)}) before the awaited log line${this.#tail()}`,
          ),
        );
      }
      this.#waiters.clear();
      return info;
    });
  }

  line(text: string): void {
    this.#lines.push(text);
    if (!text.startsWith('{')) return;
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return;
    const rec = obj as Record<string, unknown>;
    this.#records.push(rec);
    for (const w of this.#waiters) {
      if (safeTest(w.predicate, rec)) {
        clearTimeout(w.timer);
        this.#waiters.delete(w);
        w.resolve(rec);
      }
    }
  }

  logs(): string[] {
    return [...this.#lines];
  }

  waitForLog(
    predicate: (obj: Record<string, unknown>) => boolean,
    timeoutMs: number,
  ): Promise<Record<string, unknown>> {
    const seen = this.#records.find((r) => safeTest(predicate, r));
    if (seen !== undefined) return Promise.resolve(seen);
    if (this.#exit !== undefined) {
      return Promise.reject(
        new Error(`controller process already exited (${describeExit(this.#exit)})${this.#tail()}`),
      );
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        predicate,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#waiters.delete(w);
          reject(new Error(`no matching controller log line within ${timeoutMs} ms${this.#tail()}`));
        }, timeoutMs),
      };
      this.#waiters.add(w);
    });
  }

  async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: string;
    for (;;) {
      if (this.#exit !== undefined) {
        throw new Error(
          `controller process exited (${describeExit(this.#exit)}) before /readyz${this.#tail()}`,
        );
      }
      try {
        const res = await fetch(`http://127.0.0.1:${this.probePort}/readyz`, {
          signal: AbortSignal.timeout(2_000),
        });
        const body = await res.text();
        if (res.status === 200) return;
        last = `${res.status} ${body.trim()}`;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      if (Date.now() >= deadline) throw new Error(`/readyz not 200 within ${timeoutMs} ms (last: ${last})`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async rssBytes(): Promise<number> {
    if (this.#exit !== undefined) throw new Error('controller process has exited');
    const text = await readFile(`/proc/${this.pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(text);
    if (m?.[1] === undefined) throw new Error(`no VmRSS in /proc/${this.pid}/status`);
    return Number(m[1]) * 1024;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.#exit === undefined) this.#kill(signal);
  }

  #tail(): string {
    const tail = this.#lines.slice(-40);
    return tail.length > 0 ? `; last lines:\n${tail.join('\n')}` : '; no output';
  }
}

function safeTest(
  predicate: (obj: Record<string, unknown>) => boolean,
  rec: Record<string, unknown>,
): boolean {
  try {
    return predicate(rec);
  } catch {
    return false;
  }
}

function describeExit(info: ExitInfo): string {
  return info.signal !== null ? `signal ${info.signal}` : `code ${String(info.code)}`;
}

/**
 * Spawns the controller and resolves once its `controller started` line gave both ports.
 * @throws Error (with the last output lines) if the process exits, cannot be spawned, or does
 * not log `controller started` within `startTimeoutMs`; the process is killed in that case.
 */
export async function startControllerProcess(opts: ControllerProcessOptions): Promise<ControllerProcess> {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const p of running) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    });
  }
  const argv = [
    ...(opts.nodeArgs ?? []),
    MAIN,
    `--kubeconfig=${opts.kubeconfig}`,
    '--metrics-bind-address=127.0.0.1:0',
    '--health-probe-bind-address=127.0.0.1:0',
    '--dev-cluster=never',
    ...(opts.allowLoopback === false ? [] : ['--egress-allow-loopback']),
    // Simulated runs carry app.pulumi.com permalinks: the suite never reaches the real Pulumi
    // Cloud (a Stack with a token would be read there: src/enrich/pulumi-cloud.ts).
    '--egress-deny-hosts=*.pulumi.com',
    ...(opts.args ?? []),
  ];
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: process.env['HOME'] ?? '/tmp',
    ...opts.env,
  };
  const [cmd, cmdArgs] =
    opts.cgroupDir === undefined
      ? [process.execPath, argv]
      : [
          '/bin/sh',
          ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', opts.cgroupDir, process.execPath, ...argv],
        ];
  const child = spawn(cmd, cmdArgs, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const spawned = new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  const exited = new Promise<ExitInfo>((resolve) => {
    // 'close' (not 'exit'): by then stdout/stderr are drained, so logs() is complete.
    child.once('close', (code, signal) => {
      resolve({ code, signal });
    });
    // 'close' never comes when spawning failed.
    child.once('error', () => {
      resolve({ code: null, signal: null });
    });
  });
  await spawned;
  const pid = child.pid;
  if (pid === undefined) throw new Error('controller process has no pid');
  const handle = new Handle(pid, exited, (signal) => {
    child.kill(signal);
  });
  running.add(handle);
  createInterface({ input: child.stdout }).on('line', (l) => {
    handle.line(l);
  });
  createInterface({ input: child.stderr }).on('line', (l) => {
    handle.line(l);
  });

  try {
    const started = await handle.waitForLog(
      (r) => r['msg'] === 'controller started',
      opts.startTimeoutMs ?? 30_000,
    );
    const { metricsPort, probePort } = started;
    if (typeof metricsPort !== 'number' || typeof probePort !== 'number') {
      throw new Error(`'controller started' line lacks metricsPort/probePort: ${JSON.stringify(started)}`);
    }
    handle.metricsPort = metricsPort;
    handle.probePort = probePort;
  } catch (err) {
    handle.kill('SIGKILL');
    await handle.exited;
    throw err;
  }
  return handle;
}

/**
 * Stops every controller process started by this module that is still running: SIGTERM, then
 * SIGKILL after `graceMs` (default 10 000). Resolves when all have exited. For `afterAll`.
 */
export async function stopAll(graceMs = 10_000): Promise<void> {
  await Promise.all(
    [...running].map(async (p) => {
      p.kill('SIGTERM');
      const timer = setTimeout(() => {
        p.kill('SIGKILL');
      }, graceMs);
      await p.exited;
      clearTimeout(timer);
    }),
  );
}
