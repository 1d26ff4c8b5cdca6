/**
 * A memory cgroup (v1 memory controller) with a hard limit, for process tests that must stay
 * within the shipped Deployment's memory limit (the same approach as bench/flux.ts): the
 * controller runs inside it (`cgroupDir` of ./controller-process.ts), so going over the limit is
 * an OOM kill as in a pod, and its peak counts what a pod's limit counts (RSS plus page cache).
 * Needs a writable `/sys/fs/cgroup/memory` (root on a cgroup v1 host); {@link memoryCgroup}
 * returns the reason otherwise.
 */
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** `limits.memory` of the shipped Deployment (config/manager/manager.yaml), MiB. */
export function deploymentLimitMiB(): number {
  const y = readFileSync(path.join(ROOT, 'config/manager/manager.yaml'), 'utf8');
  const m = /limits:\s*\{\s*memory:\s*(\d+)Mi\s*\}/.exec(y);
  if (!m) throw new Error('config/manager/manager.yaml: no limits.memory in Mi');
  return Number(m[1]);
}

export interface MemoryCgroup {
  dir: string;
  limitBytes: number;
  /** Highest usage so far, bytes (`memory.max_usage_in_bytes`). */
  peakBytes(): number;
  /** OOM kills in the group (`oom_kill` of `memory.oom_control`; 0 when the kernel does not report it). */
  oomKills(): number;
  /** Removes the group (once its processes have exited). */
  close(): void;
}

/** Creates a cgroup limited to `limitBytes`, or returns why it cannot (a message). */
export function memoryCgroup(name: string, limitBytes: number): MemoryCgroup | string {
  const dir = `/sys/fs/cgroup/memory/${name}-${String(process.pid)}`;
  try {
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(limitBytes));
  } catch (err) {
    return `no memory cgroup: ${(err as Error).message}`;
  }
  const read = (f: string): string => readFileSync(path.join(dir, f), 'utf8');
  return {
    dir,
    limitBytes,
    peakBytes: () => Number(read('memory.max_usage_in_bytes')),
    oomKills: () => Number(/^oom_kill (\d+)/m.exec(read('memory.oom_control'))?.[1] ?? 0),
    close: () => {
      try {
        rmdirSync(dir);
      } catch {
        // a process is still inside; the kernel keeps the group until it exits
      }
    },
  };
}
