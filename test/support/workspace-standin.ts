/**
 * Stand-in for the parts of Kubernetes that PKO v2's workspace pods need and that a bare
 * etcd + kube-apiserver lacks: the StatefulSet controller and the kubelet. PKO v2's operator
 * puts each Stack's program in a `Workspace`, which it runs as a StatefulSet `<ws>-workspace`
 * whose one pod `<ws>-workspace-0` serves PKO's **agent** over gRPC; the operator's Update
 * controller then runs `up`/`preview`/`destroy` through that agent. Here the agent is the real
 * one (built from PKO's source by scripts/realpko-build.sh) and runs as a local process; only
 * the container plumbing around it is played.
 *
 * What the stand-in does, for each StatefulSet labelled `auto.pulumi.com/component=workspace`
 * in its namespace (polled every 250 ms; a stand-in need not scale, so no watch):
 * 1. For every new `metadata.generation` (a new commit or spec changes the pod template): stop
 *    the previous agent, delete the previous pod object.
 * 2. Run the template's init containers locally, in a fresh folder standing for the pod's
 *    `/share` emptyDir: `bootstrap` (`cp /agent /tini /share/`) becomes a link to the built
 *    agent; any other init container runs its `command`/`args` (PKO's `fetch` runs
 *    `sh -c "/share/agent init -t /share/source --git-url … --git-revision … && ln -s …"`) with
 *    `/share` mapped to that folder and its env resolved. A failing init step is retried every
 *    5 s, as a kubelet restarts init containers.
 * 3. Create the pod object `<sts>-0` (template labels plus `controller-revision-hash`), which
 *    stays Pending: PKO checks the pod's revision label, never its phase or IP.
 * 4. Start the main container's command locally: PKO's template runs
 *    `/share/tini /share/agent -- serve …`; tini and the literal `--` are dropped and
 *    `--host 127.0.0.1 --port <port>` appended, a free port per workspace. The operator dials
 *    every workspace at the one `WORKSPACE_LOCALHOST` address: that is the
 *    {@link WorkspaceRouter} (test/support/workspace-router.ts), to which the stand-in adds a
 *    route from the agent's `--kube-audience` (`<workspace>.<namespace>`) to its port once it
 *    listens, and from which it removes it when the agent stops — so any number of workspaces
 *    run at once, as in a cluster. Env: the template's (values,
 *    `fieldRef` namespace/name/serviceAccountName, `resourceFieldRef`, Secret/ConfigMap refs and
 *    `envFrom`) plus `PATH` (Pulumi CLI and YAML host first), `HOME`, `TMPDIR`, `KUBECONFIG`
 *    (the agent's own API access, for TokenReview/SubjectAccessReview in `--auth-mode kube`),
 *    `SSL_CERT_FILE` and the Pulumi settings a `pulumi/pulumi` image bakes in (no update check,
 *    no plugin downloads).
 * 5. Once the port accepts connections (and the route is in), write the StatefulSet status as the StatefulSet
 *    controller would for one ready pod: `observedGeneration`, replicas/ready/current/updated/
 *    available = 1, `currentRevision = updateRevision = <sts>-g<generation>`.
 * A deleted StatefulSet stops its agent. Everything the stand-in could not do is kept in
 * `errors` (tests assert it is empty) and logged with `log`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { errorStatusCode, kubeRequest, objectPath } from '../../src/kube/client.ts';
import type { KubeletStandIn } from './kubelet-standin.ts';
import { freePort } from './realpko.ts';
import type { WorkspaceRouter } from './workspace-router.ts';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath: string };
    resourceFieldRef?: { containerName?: string; resource: string; divisor?: string | number };
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
  };
}
interface Container {
  name: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: { secretRef?: { name: string }; configMapRef?: { name: string }; prefix?: string }[];
  workingDir?: string;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}
interface StatefulSet {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    generation?: number;
    labels?: Record<string, string>;
  };
  spec: {
    template: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: { containers: Container[]; initContainers?: Container[]; serviceAccountName?: string } & Record<
        string,
        unknown
      >;
    };
  };
}

export interface WorkspaceStandInOptions {
  /** Admin access to the control plane (pods, StatefulSet status, Secrets). */
  kubeConfig: KubeConfig;
  /** Path of that admin kubeconfig (given to the agent as `KUBECONFIG`). */
  kubeconfigPath: string;
  namespace: string;
  /** The built PKO v2 agent binary. */
  agent: string;
  /** Folder holding `pulumi` and `pulumi-language-yaml`. */
  pulumiBinDir: string;
  /** The operator's `WORKSPACE_LOCALHOST`: each agent gets a route there by its audience. */
  router: WorkspaceRouter;
  /**
   * A Pulumi plugin cache (`plugins/` of a `PULUMI_HOME`) linked into every pod's home, as an
   * image with plugins installed (`pulumi plugin install`) has them: PKO's `Install` runs
   * `pulumi install`, which downloads every provider a program names that is not in the cache
   * (with no version: asks GitHub for the latest), and the test machine is offline.
   */
  pulumiPlugins?: string;
  /** CA bundle for TLS clients in the pod (the git server's CA). */
  caFile: string;
  /** Parent folder for pod folders. */
  workRoot: string;
  log: (line: string) => void;
  /**
   * A kubelet stand-in (test/support/kubelet-standin.ts): when set, pods are created on its Node
   * (`spec.nodeName`) and every line the agent writes (stdout and stderr, as a container runtime
   * keeps both) is appended to that pod's `pulumi` log there, so `pods/log` through the API
   * server serves the real agent's output. A new pod starts with an empty log.
   */
  kubelet?: KubeletStandIn;
}

const POLL_MS = 250;
const INIT_RETRY_MS = 5000;

interface Running {
  key: string;
  uid: string;
  generation: number;
  agent?: ChildProcess | undefined;
  share: string;
  /** The agent's port and the audience routed to it, once it listens. */
  route?: { audience: string; port: number } | undefined;
}

/** Quantities as the API writes them (`64Mi`, `1Gi`, `500m`, `100`), in base units. */
function quantity(q: string): number {
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(q);
  if (!m) return 0;
  const n = Number(m[1]);
  const mult: Record<string, number> = {
    '': 1,
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    Ki: 1024,
    Mi: 1024 ** 2,
    Gi: 1024 ** 3,
  };
  return n * (mult[m[2] ?? ''] ?? 1);
}

/** Replaces the pod path `/share` (as a whole path prefix) by `share`. */
function mapShare(s: string, share: string): string {
  return s.replace(/(^|[\s"'=:;(])\/share(?=\/|$|[\s"';)])/g, `$1${share}`);
}

export class WorkspaceStandIn {
  readonly errors: string[] = [];
  readonly #o: WorkspaceStandInOptions;
  readonly #running = new Map<string, Running>();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #stopped = false;

  constructor(opts: WorkspaceStandInOptions) {
    this.#o = opts;
  }

  start(): void {
    const tick = (): void => {
      if (this.#stopped) return;
      if (!this.#busy) {
        this.#busy = true;
        void this.#sync()
          .catch((err: unknown) => {
            this.#o.log(`workspace stand-in: ${(err as Error).message}`);
          })
          .finally(() => {
            this.#busy = false;
          });
      }
      this.#timer = setTimeout(tick, POLL_MS);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    for (;;) {
      if (!this.#busy) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const r of this.#running.values()) await this.#stopAgent(r);
    this.#running.clear();
  }

  #fail(msg: string): void {
    this.errors.push(msg);
    this.#o.log(`workspace stand-in: ${msg}`);
  }

  async #sync(): Promise<void> {
    const { kubeConfig: kc, namespace } = this.#o;
    const list = await kubeRequest<{ items: StatefulSet[] }>(kc, {
      method: 'GET',
      path: objectPath({ group: 'apps', version: 'v1', plural: 'statefulsets', namespace }),
      query: { labelSelector: 'auto.pulumi.com/component=workspace' },
    });
    const seen = new Set<string>();
    for (const sts of list.items) {
      const key = sts.metadata.name;
      seen.add(key);
      const gen = sts.metadata.generation ?? 1;
      const cur = this.#running.get(key);
      if (cur?.uid === sts.metadata.uid && cur.generation === gen) continue;
      if (cur) await this.#stopAgent(cur);
      try {
        await this.#rollOut(sts, gen);
      } catch (err) {
        // Retried on the next poll, as the StatefulSet controller would keep trying.
        const r = this.#running.get(key);
        if (r) await this.#stopAgent(r);
        this.#running.delete(key);
        this.#fail(`rolling out ${namespace}/${key} generation ${gen}: ${(err as Error).message}`);
        await new Promise((res) => setTimeout(res, INIT_RETRY_MS));
      }
    }
    for (const [key, r] of this.#running) {
      if (!seen.has(key)) {
        await this.#stopAgent(r);
        this.#running.delete(key);
      }
    }
  }

  async #stopAgent(r: Running): Promise<void> {
    const child = r.agent;
    r.agent = undefined;
    if (r.route) this.#o.router.delete(r.route.audience, r.route.port);
    r.route = undefined;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    }
    await rm(r.share, { recursive: true, force: true }).catch(() => undefined);
  }

  async #resolveEnv(c: Container, sts: StatefulSet, share: string): Promise<Record<string, string>> {
    const { kubeConfig: kc, namespace } = this.#o;
    const out: Record<string, string> = {};
    const podName = `${sts.metadata.name}-0`;
    const getData = async (kind: 'secrets' | 'configmaps', name: string): Promise<Record<string, string>> => {
      const obj = await kubeRequest<{ data?: Record<string, string> }>(kc, {
        method: 'GET',
        path: objectPath({ group: '', version: 'v1', plural: kind, namespace, name }),
      });
      const data = obj.data ?? {};
      if (kind === 'configmaps') return data;
      return Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
      );
    };
    for (const from of c.envFrom ?? []) {
      const data = from.secretRef
        ? await getData('secrets', from.secretRef.name)
        : from.configMapRef
          ? await getData('configmaps', from.configMapRef.name)
          : {};
      for (const [k, v] of Object.entries(data)) out[`${from.prefix ?? ''}${k}`] = v;
    }
    for (const e of c.env ?? []) {
      if (e.value !== undefined) {
        out[e.name] = mapShare(e.value, share);
        continue;
      }
      const vf = e.valueFrom;
      if (vf?.fieldRef) {
        const f = vf.fieldRef.fieldPath;
        const v =
          f === 'metadata.namespace'
            ? namespace
            : f === 'metadata.name'
              ? podName
              : f === 'spec.serviceAccountName'
                ? (sts.spec.template.spec.serviceAccountName ?? 'default')
                : undefined;
        if (v === undefined) throw new Error(`env ${e.name}: fieldRef ${f} not supported by the stand-in`);
        out[e.name] = v;
      } else if (vf?.resourceFieldRef) {
        const [kind, res] = vf.resourceFieldRef.resource.split('.') as ['requests' | 'limits', string];
        const target =
          sts.spec.template.spec.containers.find((x) => x.name === vf.resourceFieldRef?.containerName) ?? c;
        const q = target.resources?.[kind]?.[res];
        const divisor = quantity(String(vf.resourceFieldRef.divisor ?? '1')) || 1;
        if (q !== undefined) out[e.name] = String(Math.ceil(quantity(q) / divisor));
      } else if (vf?.secretKeyRef) {
        const v = (await getData('secrets', vf.secretKeyRef.name))[vf.secretKeyRef.key];
        if (v !== undefined) out[e.name] = v;
      } else if (vf?.configMapKeyRef) {
        const v = (await getData('configmaps', vf.configMapKeyRef.name))[vf.configMapKeyRef.key];
        if (v !== undefined) out[e.name] = v;
      } else {
        out[e.name] = '';
      }
    }
    return out;
  }

  /** What a container image with the Pulumi CLI gives every process (see the file header). */
  #baseEnv(share: string): Record<string, string> {
    return {
      PATH: `${this.#o.pulumiBinDir}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      HOME: path.join(share, '.home'),
      // The Pulumi CLI takes its home from the passwd entry, not HOME: as root on a test machine
      // that is /root/.pulumi, shared by every run and without the plugin cache linked above.
      PULUMI_HOME: path.join(share, '.home', '.pulumi'),
      TMPDIR: path.join(share, '.tmp'),
      KUBECONFIG: this.#o.kubeconfigPath,
      SSL_CERT_FILE: this.#o.caFile,
      PULUMI_SKIP_UPDATE_CHECK: 'true',
      PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
    };
  }

  async #runInit(c: Container, sts: StatefulSet, share: string): Promise<void> {
    const argv = [...(c.command ?? []), ...(c.args ?? [])];
    if (argv[0] === 'cp' && argv.includes('/agent')) {
      // `bootstrap`: copies the agent (and tini) from the operator image into /share.
      await symlink(this.#o.agent, path.join(share, 'agent'));
      return;
    }
    const env = { ...(await this.#resolveEnv(c, sts, share)), ...this.#baseEnv(share) };
    const mapped = argv.map((a) => mapShare(a, share));
    const [cmd, ...args] = mapped;
    if (cmd === undefined) return;
    await new Promise<void>((resolve, reject) => {
      const child = spawn(cmd, args, { env, cwd: share, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      const keep = (b: Buffer): void => {
        out = (out + b.toString('utf8')).slice(-4000);
      };
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      child.on('error', reject);
      child.on('exit', (code) => {
        if (code === 0) resolve();
        else reject(new Error(`init container ${c.name} exited ${String(code)}: ${out}`));
      });
    });
  }

  async #rollOut(sts: StatefulSet, gen: number): Promise<void> {
    const { kubeConfig: kc, namespace } = this.#o;
    const key = sts.metadata.name;
    const podName = `${key}-0`;
    const revision = `${key}-g${gen}`;
    const podPath = objectPath({ group: '', version: 'v1', plural: 'pods', namespace, name: podName });
    await kubeRequest(kc, { method: 'DELETE', path: podPath, query: { gracePeriodSeconds: 0 } }).catch(
      (err: unknown) => {
        if (errorStatusCode(err) !== 404) throw err;
      },
    );
    await mkdir(this.#o.workRoot, { recursive: true });
    const share = await mkdtemp(path.join(this.#o.workRoot, `${key}-g${gen}-`));
    await mkdir(path.join(share, '.home', '.pulumi'), { recursive: true });
    if (this.#o.pulumiPlugins !== undefined) {
      await symlink(this.#o.pulumiPlugins, path.join(share, '.home', '.pulumi', 'plugins'));
    }
    await mkdir(path.join(share, '.tmp'), { recursive: true });
    const r: Running = { key, uid: sts.metadata.uid, generation: gen, share };
    this.#running.set(key, r);
    this.#o.log(`workspace stand-in: rolling out ${namespace}/${key} generation ${gen}`);

    const tpl = sts.spec.template;
    for (const c of tpl.spec.initContainers ?? []) {
      for (;;) {
        try {
          await this.#runInit(c, sts, share);
          break;
        } catch (err) {
          this.#o.log(`workspace stand-in: ${(err as Error).message}; retrying in ${INIT_RETRY_MS / 1000} s`);
          if (this.#stopped) return;
          await new Promise((res) => setTimeout(res, INIT_RETRY_MS));
          // A newer generation replaces this roll-out.
          const now = await this.#get(key);
          if (now?.metadata.uid !== sts.metadata.uid || (now.metadata.generation ?? 1) !== gen) return;
        }
      }
    }

    // The pod object (never scheduled: no kubelet or scheduler here).
    const { serviceAccount: _sa, ...podSpec } = tpl.spec as Record<string, unknown>;
    await kubeRequest(kc, {
      method: 'POST',
      path: objectPath({ group: '', version: 'v1', plural: 'pods', namespace }),
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: podName,
          labels: {
            ...(tpl.metadata?.labels ?? {}),
            'controller-revision-hash': revision,
            'statefulset.kubernetes.io/pod-name': podName,
          },
          annotations: tpl.metadata?.annotations ?? {},
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'StatefulSet',
              name: key,
              uid: sts.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: this.#o.kubelet ? { ...podSpec, nodeName: this.#o.kubelet.nodeName } : podSpec,
      },
    });

    // The main container: the agent's gRPC server.
    const main = tpl.spec.containers.find((c) => c.name === 'pulumi') ?? tpl.spec.containers[0];
    if (!main) throw new Error(`${key}: template has no containers`);
    let argv = [...(main.command ?? []), ...(main.args ?? [])].map((a) => mapShare(a, share));
    if (argv[0]?.endsWith('/tini')) argv = argv.slice(1);
    if (argv[1] === '--') argv = [argv[0] ?? '', ...argv.slice(2)];
    const port = await freePort();
    // The audience the agent checks tokens for: PKO's operator asks for tokens with it per workspace.
    const at = argv.indexOf('--kube-audience');
    const audience = at >= 0 ? argv[at + 1] : undefined;
    if (audience === undefined)
      throw new Error(`${key}: the agent's command has no --kube-audience to route by`);
    argv.push('--host', '127.0.0.1', '--port', String(port));
    const env = { ...(await this.#resolveEnv(main, sts, share)), ...this.#baseEnv(share) };
    const [cmd, ...args] = argv;
    if (cmd === undefined) throw new Error(`${key}: empty command`);
    const cwd = main.workingDir !== undefined ? mapShare(main.workingDir, share) : share;
    const child = spawn(cmd, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    r.agent = child;
    const tag = `agent ${namespace}/${key}`;
    const pipeLog = (b: Buffer): void => {
      for (const line of b.toString('utf8').split('\n')) if (line !== '') this.#o.log(`${tag}: ${line}`);
    };
    child.stdout.on('data', pipeLog);
    child.stderr.on('data', pipeLog);
    const kubelet = this.#o.kubelet;
    if (kubelet) {
      const container = main.name;
      kubelet.setLog(namespace, podName, container, []);
      for (const stream of [child.stdout, child.stderr]) {
        // Whole lines only, each stamped when it arrives (as the kubelet's CRI log does).
        createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
          kubelet.append(namespace, podName, container, line);
        });
      }
      child.on('exit', () => {
        kubelet.endFollow(namespace, podName, container);
      });
    }
    child.on('exit', (code, signal) => {
      if (r.agent === child) this.#fail(`${tag} exited (${String(code ?? signal)}) while serving`);
    });
    await this.#waitForPort(child, tag, port);
    if (r.agent !== child) throw new Error(`${tag} was stopped while starting`);
    this.#o.router.set(audience, port);
    r.route = { audience, port };

    await kubeRequest(kc, {
      method: 'PATCH',
      path: `${objectPath({ group: 'apps', version: 'v1', plural: 'statefulsets', namespace, name: key })}/status`,
      contentType: 'application/merge-patch+json',
      body: {
        status: {
          observedGeneration: gen,
          replicas: 1,
          readyReplicas: 1,
          currentReplicas: 1,
          updatedReplicas: 1,
          availableReplicas: 1,
          currentRevision: revision,
          updateRevision: revision,
        },
      },
    });
    this.#o.log(
      `workspace stand-in: ${namespace}/${key} generation ${gen} ready on 127.0.0.1:${port} (audience ${audience})`,
    );
  }

  async #get(name: string): Promise<StatefulSet | undefined> {
    try {
      return await kubeRequest<StatefulSet>(this.#o.kubeConfig, {
        method: 'GET',
        path: objectPath({
          group: 'apps',
          version: 'v1',
          plural: 'statefulsets',
          namespace: this.#o.namespace,
          name,
        }),
      });
    } catch (err) {
      if (errorStatusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async #waitForPort(child: ChildProcess, tag: string, port: number): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`${tag} exited before listening`);
      const ok = await new Promise<boolean>((resolve) => {
        const s = connect({ host: '127.0.0.1', port }, () => {
          s.destroy();
          resolve(true);
        });
        s.on('error', () => {
          resolve(false);
        });
      });
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`${tag} did not listen on port ${port} within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
