/**
 * vitest globalSetup of the `integration` project: ONE real etcd + kube-apiserver for the run.
 *
 * - Starts the control plane (src/envtest/controlplane.ts; builds the binaries on first use).
 * - Installs every CRD in `crds/` (ours) and in `test/crds/` (test stand-ins for PKO's CRDs) —
 *   or, when `PKO_CRDS_DIR` is set, PKO's CRDs from that folder instead of `test/crds/` — and
 *   waits until each is Established.
 * - Prints one line: versions and start time.
 * - Provides (see test/setup/provided.d.ts): `kubeconfig` (admin), `controllerKubeconfig`,
 *   `viewerKubeconfig`, `server`, `etcdUrl`, `kubeVersion`, and `controlUrl` + `controlToken`
 *   for the loopback control endpoint below.
 *
 * Control endpoint (127.0.0.1, `Authorization: Bearer <controlToken>` on every request):
 * - `POST /leases` body `{"file": "..."}` → `{"id": "..."}` once a *shared* lease is granted.
 *   Every integration test file holds one for its whole run (test/setup/cluster-lease.ts).
 * - `DELETE /leases/<id>` → 204.
 * - `POST /restart-apiserver?lease=<id>` → 204 after kube-apiserver restarted; 500 with the
 *   reason otherwise. It swaps the caller's shared lease for an *exclusive* one first, so the
 *   restart waits until every other test file running at that moment has finished, and files
 *   starting meanwhile wait until it is done: a restart never breaks another file's requests.
 *
 * If anything fails, setup throws: the suite fails loudly; nothing is skipped.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import type { TestProject } from 'vitest/node';
import { startControlPlane, type ControlPlane } from '../../src/envtest/controlplane.ts';
import { installCRDs, readCRDs, yamlFilesIn } from '../../src/kube/crds.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Upstream PKO CRDs (reference data beside the repository; never copied into it). */
export const UPSTREAM_PKO_CRDS = path.resolve(ROOT, '..', 'shared', 'pko-crds');
/**
 * How long a restart waits for other test files to finish before it gives up. The longest
 * integration files take a few minutes under a CPU hog (measured: process and chat SIGKILL tests
 * 1–2 min, the informer restart's own wait 110 s was not enough on CI with a hog on one core).
 */
const EXCLUSIVE_WAIT_MS = 300_000;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = performance.now();
  const cp = await startControlPlane({
    // Only the (rare, slow) binary build reports progress; the normal run prints one line.
    log: (line) => {
      if (line.startsWith('envtest-build:')) console.error(line);
    },
  });
  let control: ControlServer | undefined;
  try {
    const started = performance.now();
    // The `compat` project runs the source tests against the real upstream PKO CRDs.
    const pkoDir = project.name === 'compat' ? UPSTREAM_PKO_CRDS : process.env['PKO_CRDS_DIR'];
    const pkoFiles = await yamlFilesIn(pkoDir ?? path.join(ROOT, 'test', 'crds'));
    if (pkoDir !== undefined && pkoFiles.length === 0) {
      throw new Error(`PKO_CRDS_DIR=${pkoDir} holds no *.yaml files`);
    }
    const crds = await readCRDs([...(await yamlFilesIn(path.join(ROOT, 'crds'))), ...pkoFiles]);
    const admin = new KubeConfig();
    admin.loadFromFile(cp.kubeconfigPath);
    await installCRDs(admin, crds);
    const crdMs = performance.now() - started;

    control = await startControlServer(cp);
    project.provide('kubeconfig', cp.kubeconfigPath);
    project.provide('controllerKubeconfig', cp.kubeconfigFor('controller'));
    project.provide('viewerKubeconfig', cp.kubeconfigFor('viewer'));
    project.provide('server', cp.server);
    project.provide('etcdUrl', cp.etcdURL);
    project.provide('kubeVersion', cp.serverVersion);
    project.provide('controlUrl', control.url);
    project.provide('controlToken', control.token);

    const crdNote = pkoDir !== undefined ? `, PKO CRDs from ${pkoDir}` : '';
    console.log(
      `control plane: kube-apiserver ${cp.serverVersion}, etcd ${cp.etcdVersion}, Node ${process.version} ` +
        `(started in ${((started - t0) / 1000).toFixed(1)} s; ${crds.length} CRDs established in ${(crdMs / 1000).toFixed(1)} s${crdNote})`,
    );
  } catch (err) {
    await control?.close();
    await cp.stop();
    throw err;
  }

  const ctl = control;
  return async () => {
    await ctl.close();
    await cp.stop();
  };
}

// ---------------------------------------------------------------------------------------------
// Shared/exclusive leases across test files (one worker process per file at a time).

interface Waiter {
  kind: 'shared' | 'exclusive';
  id: string;
  resolve: () => void;
}

class Leases {
  private readonly shared = new Map<string, string>(); // id → file
  private exclusive = false;
  private queue: Waiter[] = [];

  /** Files holding shared leases right now (for error messages). */
  holders(): string[] {
    return [...this.shared.values()];
  }

  acquire(kind: Waiter['kind'], id: string, file: string): Promise<void> {
    return new Promise((resolve) => {
      this.queue.push({
        kind,
        id,
        resolve: () => {
          if (kind === 'shared') this.shared.set(id, file);
          else this.exclusive = true;
          resolve();
        },
      });
      this.pump();
    });
  }

  fileOf(id: string): string | undefined {
    return this.shared.get(id);
  }

  /** Withdraws a queued request; false if it was not queued (e.g. already granted). */
  cancel(id: string): boolean {
    const before = this.queue.length;
    this.queue = this.queue.filter((w) => w.id !== id);
    this.pump();
    return this.queue.length !== before;
  }

  releaseShared(id: string): boolean {
    const had = this.shared.delete(id);
    this.pump();
    return had;
  }

  releaseExclusive(): void {
    this.exclusive = false;
    this.pump();
  }

  /** FIFO: a waiting exclusive request holds back shared requests queued after it. */
  private pump(): void {
    for (;;) {
      const head = this.queue[0];
      if (head === undefined || this.exclusive) return;
      if (head.kind === 'exclusive' && this.shared.size > 0) return;
      this.queue.shift();
      head.resolve();
      if (head.kind === 'exclusive') return;
    }
  }
}

interface ControlServer {
  url: string;
  token: string;
  close(): Promise<void>;
}

async function startControlServer(cp: ControlPlane): Promise<ControlServer> {
  const token = randomBytes(24).toString('hex');
  const expected = Buffer.from(`Bearer ${token}`);
  const leases = new Leases();

  const authorized = (req: http.IncomingMessage): boolean => {
    const got = Buffer.from(req.headers.authorization ?? '');
    return got.length === expected.length && timingSafeEqual(got, expected);
  };
  const readBody = async (req: http.IncomingMessage): Promise<string> => {
    let body = '';
    req.setEncoding('utf8');
    for await (const chunk of req) body += chunk as string;
    return body;
  };

  const restart = async (leaseId: string | null): Promise<void> => {
    const file = leaseId !== null ? leases.fileOf(leaseId) : undefined;
    const heldShared = leaseId !== null && leases.releaseShared(leaseId);
    const exclusiveId = `restart-${randomBytes(6).toString('hex')}`;
    let timer: NodeJS.Timeout | undefined;
    let granted = await Promise.race([
      leases.acquire('exclusive', exclusiveId, 'restart').then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => {
          resolve(false);
        }, EXCLUSIVE_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    // Granted between the timer firing and now? Then it is no longer queued: treat as granted.
    if (!granted && !leases.cancel(exclusiveId)) granted = true;
    try {
      if (!granted) {
        throw new Error(
          `restart waited ${EXCLUSIVE_WAIT_MS / 1000} s for other test files to finish; still running: ${leases.holders().join(', ')}`,
        );
      }
      await cp.restartApiServer();
    } finally {
      if (granted) leases.releaseExclusive();
      if (heldShared) await leases.acquire('shared', leaseId, file ?? 'unknown');
    }
  };

  const server = http.createServer((req, res) => {
    const reply = (status: number, body?: unknown): void => {
      if (res.headersSent || res.destroyed) return;
      if (body === undefined) {
        res.writeHead(status).end();
        return;
      }
      const text = typeof body === 'string' ? body : JSON.stringify(body);
      res
        .writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json' })
        .end(text);
    };
    void (async () => {
      if (!authorized(req)) {
        reply(401, 'unauthorized');
        return;
      }
      const url = new URL(req.url ?? '/', 'http://control');
      if (req.method === 'POST' && url.pathname === '/leases') {
        const { file } = JSON.parse((await readBody(req)) || '{}') as { file?: string };
        const id = randomBytes(8).toString('hex');
        // If the worker goes away while waiting, drop the request so it cannot block restarts.
        const onClose = (): void => {
          leases.cancel(id);
        };
        req.socket.once('close', onClose);
        await leases.acquire('shared', id, file ?? 'unknown file');
        req.socket.off('close', onClose);
        if (res.destroyed) leases.releaseShared(id);
        else reply(200, { id });
        return;
      }
      if (req.method === 'DELETE' && url.pathname.startsWith('/leases/')) {
        leases.releaseShared(url.pathname.slice('/leases/'.length));
        reply(204);
        return;
      }
      if (req.method === 'POST' && url.pathname === '/restart-apiserver') {
        try {
          await restart(url.searchParams.get('lease'));
          reply(204);
        } catch (err) {
          reply(500, (err as Error).message);
        }
        return;
      }
      reply(404, 'not found');
    })().catch((err: unknown) => {
      reply(500, (err as Error).message);
    });
  });
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  // Idle keep-alive sockets stay open until the client closes them (undici after 4 s): with
  // Node's default 5 s server timeout, a loaded machine let a test file's lease DELETE go out on
  // a socket the server was closing ("other side closed"), the lease was never released, and the
  // API server restart test then waited 300 s for a file that had finished.
  server.keepAliveTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      resolve();
    });
  });
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('control endpoint: no TCP address');
  return {
    url: `http://127.0.0.1:${addr.port}`,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}
