/**
 * What the integration files that read a PKO v2 run's change set from its workspace pod share,
 * on the suite's real control plane:
 * - PKO v2's Workspace CRD (upstream schema, ../shared/pko-crds) and the shipped workspace-logs
 *   ClusterRole as config/workspace-logs renders it ({@link installWorkspaceLogs});
 * - that ClusterRole (or a Role of other rules) bound to the test user `controller` in one
 *   namespace, waited for until the authorizer grants it ({@link grantWorkspaceLogs});
 * - the preview run of a recording of the real agent (test/fixtures/agent-logs;
 *   {@link recordedPreview});
 * - one PKO v2 preview run played on a Stack whose workspace pod — placed on the kubelet
 *   stand-in's Node as PKO v2.9.0 owns it (test/support/kubelet-standin.ts) — logs those lines
 *   ({@link playPreviewRun}).
 */
import path from 'node:path';
import { RbacAuthorizationV1Api, type KubeConfig, type V1PolicyRule } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { errorStatusCode, kubeRequest } from '../../src/kube/client.ts';
import { installCRDs, readCRDs } from '../../src/kube/crds.ts';
import { kubeConfig, waitFor } from './cluster.ts';
import { bindControllerRole } from './controller.ts';
import type { KubeletStandIn } from './kubelet-standin.ts';
import { ROOT, kustomize } from './kubectl.ts';
import type { PkoSimulator, RunHandle, RunOutcome } from './pko.ts';

/** The shipped workspace-logs ClusterRole's name (config/workspace-logs). */
export const WORKSPACE_LOGS_ROLE = 'pko-notification-controller-workspace-logs';

/** Bound of the wait until a new binding is in force (ms; the authorizer learns it from its informers). */
const GRANT_WAIT_MS = 30_000;

/** A control plane's admin and the test user `controller` (the suite's by default; a real-PKO plane's). */
export interface PlaneUsers {
  admin: KubeConfig;
  controller: KubeConfig;
}

const suiteUsers = (): PlaneUsers => ({ admin: kubeConfig('admin'), controller: kubeConfig('controller') });

/**
 * Creates, as `admin`, the shipped workspace-logs ClusterRole as config/workspace-logs renders it
 * (kept when it exists: test files share the API server). Throws when config/workspace-logs
 * renders no such ClusterRole.
 */
export async function createWorkspaceLogsRole(admin: KubeConfig): Promise<void> {
  const rendered = (await kustomize('config/workspace-logs')) as {
    kind: string;
    metadata: { name: string };
    rules?: V1PolicyRule[];
  }[];
  const role = rendered.find((o) => o.kind === 'ClusterRole' && o.metadata.name === WORKSPACE_LOGS_ROLE);
  if (!role?.rules) throw new Error(`config/workspace-logs renders no ClusterRole ${WORKSPACE_LOGS_ROLE}`);
  await admin
    .makeApiClient(RbacAuthorizationV1Api)
    .createClusterRole({ body: { metadata: { name: WORKSPACE_LOGS_ROLE }, rules: role.rules } })
    .catch((err: unknown) => {
      if (errorStatusCode(err) !== 409) throw err;
    });
}

/**
 * On the suite's control plane: installs PKO v2's Workspace CRD (the suite's test CRDs hold
 * Stack and Update only), binds the shipped controller rules (config/rbac) to the user
 * `controller` and creates the workspace-logs ClusterRole ({@link createWorkspaceLogsRole}).
 */
export async function installWorkspaceLogs(): Promise<void> {
  const admin = kubeConfig('admin');
  await installCRDs(
    admin,
    await readCRDs([path.resolve(ROOT, '..', 'shared', 'pko-crds', 'auto.pulumi.com_workspaces.yaml')]),
  );
  await bindControllerRole();
  await createWorkspaceLogsRole(admin);
}

/**
 * Binds the workspace-logs ClusterRole — or, with `o.rules`, a Role `partial` holding them — to
 * the user `controller` in `ns` (RoleBinding `workspace-logs`), then waits (at most 30 s) until a
 * SelfSubjectAccessReview of that user allows `get pods/log` there (`get pods` with `o.rules`):
 * the authorizer learns new bindings from its informers. On the suite's plane unless `o.plane`.
 */
export async function grantWorkspaceLogs(
  ns: string,
  o: { rules?: V1PolicyRule[]; plane?: PlaneUsers } = {},
): Promise<void> {
  const { admin, controller } = o.plane ?? suiteUsers();
  const { rules } = o;
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  let roleRef = { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: WORKSPACE_LOGS_ROLE };
  if (rules) {
    await rbac.createNamespacedRole({ namespace: ns, body: { metadata: { name: 'partial' }, rules } });
    roleRef = { ...roleRef, kind: 'Role', name: 'partial' };
  }
  await rbac.createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: 'workspace-logs' },
      roleRef,
      subjects: [{ kind: 'User', name: 'controller', apiGroup: 'rbac.authorization.k8s.io' }],
    },
  });
  const resource = rules ? 'pods' : 'pods/log';
  await waitFor(
    async () => {
      const review = await kubeRequest<{ status?: { allowed?: boolean } }>(controller, {
        method: 'POST',
        path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: {
              namespace: ns,
              verb: 'get',
              resource: 'pods',
              ...(rules ? {} : { subresource: 'log' }),
            },
          },
        },
      });
      return review.status?.allowed === true;
    },
    { timeoutMs: GRANT_WAIT_MS, what: `get ${resource} allowed for the user controller in ${ns}` },
  );
}

/**
 * The preview run of the recording test/fixtures/agent-logs/`file`: its non-empty lines from the
 * banner (`Previewing update (`) to the end line (`preview completed`), both included.
 */
export function recordedPreview(file: string): string[] {
  const lines = readFileSync(new URL(`../fixtures/agent-logs/${file}`, import.meta.url), 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  const start = lines.findIndex((l) => l.includes('\tPreviewing update ('));
  const end = lines.findIndex((l) => l.includes('\tpreview completed'));
  return lines.slice(start, end + 1);
}

/** One preview run for {@link playPreviewRun}. */
export interface PreviewRunPlay {
  /** The Stack's name in `sim`'s namespace. */
  stack: string;
  /** Its workspace pod (from placeWorkspacePod), on `kubelet`'s Node. */
  pod: string;
  /** The commit the run previews. */
  commit: string;
  /** What the agent writes to the pod's `pulumi` container during the run. */
  lines: string[];
  /** Default `succeeded`. */
  outcome?: RunOutcome;
  /** The Update's message (a failed run's reason). */
  message?: string;
  /** Called after the run started, before the lines are written. */
  started?: (run: RunHandle) => Promise<void>;
  /** Called after the lines are written, before the run ends. */
  written?: () => Promise<void>;
}

/**
 * Plays PKO v2 for one preview run whose agent logs `p.lines`: the pod's `pulumi` container gets
 * an empty log (it runs), 1.1 s pass (the reader's `sinceTime` is in whole seconds: the pod's
 * earlier lines stay before the run's start), the run starts at `p.commit`, the lines are
 * appended (to followers too), the run ends with `p.outcome`.
 */
export async function playPreviewRun(
  sim: PkoSimulator,
  kubelet: KubeletStandIn,
  p: PreviewRunPlay,
): Promise<void> {
  kubelet.setLog(sim.namespace, p.pod, 'pulumi', []);
  await new Promise((r) => setTimeout(r, 1_100));
  const run = await sim.startRun(p.stack, { type: 'preview', commit: p.commit });
  await p.started?.(run);
  for (const line of p.lines) kubelet.append(sim.namespace, p.pod, 'pulumi', line);
  await p.written?.();
  await sim.finishRun(run, p.outcome ?? 'succeeded', {
    permalink: null,
    ...(p.message !== undefined ? { message: p.message } : {}),
  });
}
