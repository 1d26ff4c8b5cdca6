/**
 * What a process allocates while a phase runs, through V8's sampling heap profiler over the
 * inspector protocol (`HeapProfiler.startSampling` with the objects collected by minor and major
 * GCs included — without them the profile holds only what is still alive at the end, and an
 * event's garbage, the work of the collector, is invisible). A benchmark tool, not part of
 * `npm test`: the process must run with `--inspect=127.0.0.1:<port>` (./pipeline.ts passes it with
 * BENCH_ALLOC).
 *
 * Numbers are samples (one per `samplingInterval` bytes allocated, 4 KiB here, weighted by V8 to
 * estimate the whole), so small sites are approximate; totals over thousands of events are close.
 * Protocol: https://chromedevtools.github.io/devtools-protocol/v8/HeapProfiler/ (startSampling,
 * stopSampling, SamplingHeapProfile).
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  callFrame: CallFrame;
  selfSize: number;
  children: ProfileNode[];
}
export interface AllocationProfile {
  head: ProfileNode;
}

/** A sampling session on one inspector: `stop()` returns the profile of what was allocated since start. */
export interface AllocationSampler {
  stop(): Promise<AllocationProfile>;
}

/**
 * Connects to the inspector listening on 127.0.0.1:`port` (retrying until `timeoutMs`) and starts
 * sampling every allocation. Throws when the inspector does not answer in time.
 */
export async function startAllocationSampling(port: number, timeoutMs = 10_000): Promise<AllocationSampler> {
  const deadline = Date.now() + timeoutMs;
  let url: string | undefined;
  while (url === undefined) {
    try {
      const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
        webSocketDebuggerUrl: string;
      }[];
      url = list[0]?.webSocketDebuggerUrl;
    } catch {
      // not listening yet
    }
    if (url === undefined) {
      if (Date.now() > deadline) throw new Error(`no inspector on 127.0.0.1:${port} after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener(
      'open',
      () => {
        resolve();
      },
      { once: true },
    );
    ws.addEventListener(
      'error',
      () => {
        reject(new Error(`inspector ${url}: cannot connect`));
      },
      { once: true },
    );
  });
  let next = 0;
  const pending = new Map<number, (r: { result?: unknown; error?: { message: string } }) => void>();
  ws.addEventListener('message', (m) => {
    const d = JSON.parse(String(m.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (d.id !== undefined) pending.get(d.id)?.(d);
    if (d.id !== undefined) pending.delete(d.id);
  });
  const call = async (method: string, params: object = {}): Promise<unknown> => {
    const id = ++next;
    const r = await new Promise<{ result?: unknown; error?: { message: string } }>((resolve) => {
      pending.set(id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
    if (r.error) throw new Error(`${method}: ${r.error.message}`);
    return r.result;
  };
  await call('HeapProfiler.enable');
  await call('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return {
    async stop() {
      const r = (await call('HeapProfiler.stopSampling')) as { profile: AllocationProfile };
      ws.close();
      return r.profile;
    },
  };
}

/** Where a frame's code lives, shortened: `src/…`/`dist/…`, `npm:<package>`, `node:…`, or `(V8)` for builtins. */
function where(cf: CallFrame): string {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(cf.url)?.[1];
  if (pkg !== undefined) return `npm:${pkg}`;
  const own = /\/((?:src|dist)\/.*)$/.exec(cf.url)?.[1];
  if (own !== undefined) return `${own}:${cf.lineNumber + 1}`;
  return cf.url === '' ? '(V8)' : cf.url;
}

export interface AllocationSummary {
  /** Bytes allocated in the sampled span (V8's estimate from the samples). */
  totalBytes: number;
  /**
   * Bytes per allocating site, a V8 builtin (`(V8)`, e.g. `JSON.parse`, `Object.assign`)
   * charged to the nearest caller of ours or of a package — the code that asked for it —
   * largest first.
   */
  sites: { site: string; bytes: number }[];
}

/** Sums `profile` per allocating site (see {@link AllocationSummary}). */
export function summarize(profile: AllocationProfile): AllocationSummary {
  const bySite = new Map<string, number>();
  let totalBytes = 0;
  const walk = (n: ProfileNode, owner: string | undefined): void => {
    const w = where(n.callFrame);
    const mine =
      w === '(V8)' || w.startsWith('node:') ? undefined : `${n.callFrame.functionName || '(anonymous)'} ${w}`;
    const site = mine ?? owner ?? `${n.callFrame.functionName || '(anonymous)'} ${w}`;
    if (n.selfSize > 0) {
      totalBytes += n.selfSize;
      bySite.set(site, (bySite.get(site) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c, mine ?? owner);
  };
  walk(profile.head, undefined);
  const sites = [...bySite].map(([site, bytes]) => ({ site, bytes })).sort((a, b) => b.bytes - a.bytes);
  return { totalBytes, sites };
}
