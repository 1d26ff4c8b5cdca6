/**
 * Stand-in for the one kubelet endpoint that `pods/log` reaches, so the production client path —
 * `GET /api/v1/namespaces/{ns}/pods/{pod}/log` through the real kube-apiserver — is testable on
 * a control plane without kubelets (../shared/facts/pod-logs.md, verified here).
 *
 * The API server proxies `pods/log` to the pod's node at
 * `https://<node InternalIP>:<status.daemonEndpoints.kubeletEndpoint.Port>/containerLogs/{ns}/{pod}/{container}`
 * with the query parameters it was given (`sinceTime`, `limitBytes`, `follow`, …). The stand-in:
 * - registers a `Node` (`<prefix>-<hex>`) whose status (written through `nodes/status`) has
 *   `addresses: [{type: InternalIP, address: 127.0.0.1}]` and that port; a pod runs "on" it when
 *   its `spec.nodeName` names it;
 * - serves `/containerLogs/…` over HTTPS (the test PKI's server certificate; the API server does
 *   not verify it here) from logs the test sets per (namespace, pod, container): recorded
 *   entries with their write time — filtered by `sinceTime` as the kubelet does (an entry written
 *   at or after it), cut at `limitBytes`, and with `follow=true` kept open for entries appended
 *   later until {@link KubeletStandIn.endFollow} or {@link KubeletStandIn.close} — or a generator
 *   of raw bytes (a huge log), written with backpressure;
 * - records every request (path, query) in `requests`, and counts the body bytes it wrote.
 * An unknown container answers 404 as the kubelet does.
 *
 * Joined with the workspace stand-in (test/support/workspace-standin.ts, option `kubelet`; also
 * `startPkoV2({ kubelet })`): its workspace pods are created on this Node and every line the real
 * PKO agent writes is appended here, so `pods/log` serves the real agent's output
 * (test/realpko/workspace-log.realpko.test.ts).
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Stack } from '../../src/api/pko.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { makeTestPKI } from './pki.ts';

/** One line a container wrote (without its newline) and when. */
export interface LogEntry {
  time: Date;
  line: string;
}

/** A log produced on demand: yields the body's bytes (sinceTime/limitBytes are the source's business). */
export type LogGenerator = (query: URLSearchParams) => Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

/** A request the API server forwarded. */
export interface ForwardedLogRequest {
  namespace: string;
  pod: string;
  container: string;
  query: Record<string, string>;
}

export interface KubeletStandInOptions {
  /** Admin access (creates and deletes the Node). */
  kubeConfig: KubeConfig;
  /** Node name prefix. Default `kubelet-standin`. */
  namePrefix?: string;
  /** Apply `limitBytes` as the kubelet does. Default true (false: a node that ignores it). */
  honourLimitBytes?: boolean;
}

interface StoredLog {
  entries: LogEntry[];
  generator?: LogGenerator | undefined;
  followers: Set<(e: LogEntry | null) => void>;
}

const key = (ns: string, pod: string, container: string): string => `${ns}/${pod}/${container}`;

export class KubeletStandIn {
  readonly nodeName: string;
  readonly requests: ForwardedLogRequest[] = [];
  /** Body bytes written, over all requests. */
  bytesWritten = 0;
  readonly #o: KubeletStandInOptions;
  readonly #logs = new Map<string, StoredLog>();
  readonly #server: Server;
  #port = 0;

  private constructor(opts: KubeletStandInOptions, server: Server) {
    this.#o = opts;
    this.#server = server;
    this.nodeName = `${opts.namePrefix ?? 'kubelet-standin'}-${randomBytes(3).toString('hex')}`;
  }

  /** Starts the HTTPS server and registers the Node (status patched) before resolving. */
  static async start(opts: KubeletStandInOptions): Promise<KubeletStandIn> {
    const pki = await makeTestPKI();
    const holder: { self?: KubeletStandIn } = {};
    const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
      void holder.self?.handle(req.url ?? '/', res);
    });
    const self = new KubeletStandIn(opts, server);
    holder.self = self;
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    self.#port = (server.address() as AddressInfo).port;
    const nodes = objectPath({ group: '', version: 'v1', plural: 'nodes' });
    await kubeRequest(opts.kubeConfig, {
      method: 'POST',
      path: nodes,
      body: { apiVersion: 'v1', kind: 'Node', metadata: { name: self.nodeName } },
    });
    await kubeRequest(opts.kubeConfig, {
      method: 'PATCH',
      path: `${nodes}/${self.nodeName}/status`,
      contentType: 'application/merge-patch+json',
      body: {
        status: {
          addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
          daemonEndpoints: { kubeletEndpoint: { Port: self.#port } },
        },
      },
    });
    return self;
  }

  get port(): number {
    return this.#port;
  }

  /** Sets the recorded log of a container (replacing any). */
  setLog(ns: string, pod: string, container: string, entries: LogEntry[]): void {
    this.#logs.set(key(ns, pod, container), { entries: [...entries], followers: new Set() });
  }

  /** Serves a container's log from a generator (for huge logs). */
  setGenerator(ns: string, pod: string, container: string, generator: LogGenerator): void {
    this.#logs.set(key(ns, pod, container), { entries: [], generator, followers: new Set() });
  }

  /** Appends a line (written now, or at `time`) and sends it to every follower. */
  append(ns: string, pod: string, container: string, line: string, time = new Date()): void {
    let log = this.#logs.get(key(ns, pod, container));
    if (!log) this.#logs.set(key(ns, pod, container), (log = { entries: [], followers: new Set() }));
    const e = { time, line };
    log.entries.push(e);
    for (const f of log.followers) f(e);
  }

  /** Ends every follow of a container's log (the container exited). */
  endFollow(ns: string, pod: string, container: string): void {
    const log = this.#logs.get(key(ns, pod, container));
    for (const f of log?.followers ?? []) f(null);
  }

  /** Ends followers, deletes the Node and closes the server. */
  async close(): Promise<void> {
    for (const log of this.#logs.values()) for (const f of log.followers) f(null);
    await kubeRequest(this.#o.kubeConfig, {
      method: 'DELETE',
      path: objectPath({ group: '', version: 'v1', plural: 'nodes', name: this.nodeName }),
    }).catch(() => undefined);
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
  }

  private async handle(rawUrl: string, res: ServerResponse): Promise<void> {
    const url = new URL(rawUrl, 'https://127.0.0.1');
    const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    if (!m) {
      res.writeHead(404).end('not found');
      return;
    }
    const [ns, pod, container] = [m[1], m[2], m[3]].map((s) => decodeURIComponent(s ?? ''));
    this.requests.push({
      namespace: ns ?? '',
      pod: pod ?? '',
      container: container ?? '',
      query: Object.fromEntries(url.searchParams),
    });
    const log = this.#logs.get(key(ns ?? '', pod ?? '', container ?? ''));
    if (!log) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end(`container "${container ?? ''}" not found`);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    const limitParam = url.searchParams.get('limitBytes');
    let room = limitParam !== null && this.#o.honourLimitBytes !== false ? Number(limitParam) : Infinity;
    const conn = { closed: false };
    res.on('close', () => {
      conn.closed = true;
    });
    const open = (): boolean => !conn.closed;
    const write = async (buf: Uint8Array): Promise<boolean> => {
      if (conn.closed || room <= 0) return false;
      const part = buf.byteLength > room ? buf.subarray(0, room) : buf;
      room -= part.byteLength;
      this.bytesWritten += part.byteLength;
      if (!res.write(part)) {
        const done = new AbortController();
        await Promise.race([
          once(res, 'drain', { signal: done.signal }),
          once(res, 'close', { signal: done.signal }),
        ]).finally(() => {
          done.abort();
        });
      }
      return open() && room > 0;
    };
    try {
      if (log.generator) {
        for await (const chunk of log.generator(url.searchParams)) if (!(await write(chunk))) break;
        res.end();
        return;
      }
      const sinceParam = url.searchParams.get('sinceTime');
      const since = sinceParam !== null ? Date.parse(sinceParam) : -Infinity;
      const wanted = (e: LogEntry): boolean => e.time.getTime() >= since;
      const line = (e: LogEntry): Buffer => Buffer.from(`${e.line}\n`);
      for (const e of log.entries) if (wanted(e) && !(await write(line(e)))) break;
      if (url.searchParams.get('follow') === 'true' && !conn.closed && room > 0) {
        const queue: (LogEntry | null)[] = [];
        let wake: (() => void) | undefined;
        const follower = (e: LogEntry | null): void => {
          queue.push(e);
          wake?.();
        };
        log.followers.add(follower);
        res.on('close', () => {
          wake?.();
        });
        try {
          while (open()) {
            const e = queue.shift();
            if (e === undefined) {
              await new Promise<void>((resolve) => {
                wake = resolve;
              });
              continue;
            }
            if (e === null) break;
            if (wanted(e) && !(await write(line(e)))) break;
          }
        } finally {
          log.followers.delete(follower);
        }
      }
      res.end();
    } catch {
      res.destroy();
    }
  }
}

/** Where {@link placeWorkspacePod} puts the pod, and what it may forge. */
export interface WorkspacePlacement {
  /** The Node the pod runs on (a kubelet stand-in's `nodeName`). */
  nodeName: string;
  /** Owner of the Workspace instead of the Stack (a forgery). */
  workspaceOwner?: Stack;
  /** The pod's labels instead of PKO's. */
  podLabels?: Record<string, string>;
}

/**
 * Creates, as `kc`, what PKO v2.9.0 makes for `stack` (names and labels as in
 * ../shared/pko-traces/v2.9.0-real): Workspace `<stack>` owned by the Stack, StatefulSet
 * `<stack>-workspace` owned by the Workspace, pod `<stack>-workspace-0` owned by the StatefulSet,
 * on node `p.nodeName`. @returns the pod's name.
 */
export async function placeWorkspacePod(
  kc: KubeConfig,
  ns: string,
  stack: Stack,
  p: WorkspacePlacement,
): Promise<string> {
  const post = <T>(path: string, body: unknown): Promise<T> =>
    kubeRequest<T>(kc, { method: 'POST', path, body });
  const name = stack.metadata.name ?? '';
  const owner = p.workspaceOwner ?? stack;
  const ctl = (apiVersion: string, kind: string, n: string, uid: string): unknown => ({
    apiVersion,
    kind,
    name: n,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  });
  const ws = await post<{ metadata: { uid: string } }>(
    objectPath({ group: 'auto.pulumi.com', version: 'v1alpha1', plural: 'workspaces', namespace: ns }),
    {
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Workspace',
      metadata: {
        name,
        labels: { 'pulumi.com/component': 'stack', 'pulumi.com/stack-name': name },
        ownerReferences: [ctl('pulumi.com/v1', 'Stack', owner.metadata.name ?? '', owner.metadata.uid ?? '')],
      },
      spec: { stacks: [{ name: 'dev', create: true }] },
    },
  );
  const labels = { 'auto.pulumi.com/component': 'workspace', 'auto.pulumi.com/workspace-name': name };
  const sts = await post<{ metadata: { uid: string } }>(
    objectPath({ group: 'apps', version: 'v1', plural: 'statefulsets', namespace: ns }),
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {
        name: `${name}-workspace`,
        labels,
        ownerReferences: [ctl('auto.pulumi.com/v1alpha1', 'Workspace', name, ws.metadata.uid)],
      },
      spec: {
        replicas: 1,
        serviceName: `${name}-workspace`,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'pulumi', image: 'pulumi/pulumi:3.276.0' }] },
        },
      },
    },
  );
  const pod = `${name}-workspace-0`;
  await post(objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns }), {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: pod,
      labels: { ...(p.podLabels ?? labels), 'statefulset.kubernetes.io/pod-name': pod },
      ownerReferences: [ctl('apps/v1', 'StatefulSet', `${name}-workspace`, sts.metadata.uid)],
    },
    spec: { nodeName: p.nodeName, containers: [{ name: 'pulumi', image: 'pulumi/pulumi:3.276.0' }] },
  });
  return pod;
}
