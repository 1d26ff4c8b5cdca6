/**
 * A real `pulumi up` of this program on this machine, against a throw-away local control plane
 * (src/envtest/controlplane.ts): `npm run local-up` here. Not part of `npm test` (the plugin
 * build takes tens of minutes); exits non-zero when something is not as expected.
 *
 * Needs, all built from Go modules and cached under ~/.cache/pko-notification-controller/:
 * - the Pulumi CLI 3.276.0 (the real-PKO suite builds it; or set PULUMI_CLI_ROOT to a folder
 *   holding `bin/pulumi`);
 * - the Kubernetes resource plugin (scripts/pulumi-kubernetes-build.sh; loaded from its path
 *   through the project's `plugins.providers`, since it is not the 4.34.2 the SDK names).
 * No Node.js language host (`pulumi-language-nodejs`: the module proxy refuses it): the program
 * runs inline through the Automation API, which serves the language runtime from this process.
 *
 * Steps: up (creates everything), up again (expects no change), `kubectl diff -k
 * config/default` against what Pulumi created (expects only the managed-by label to differ).
 * No `destroy`: the local control plane runs no kube-controller-manager, so a deleted Namespace
 * never finishes terminating and the provider would wait for it until its timeout. For the same
 * reason (no kubelet, Pods never run) a stack transform marks the Deployment and Service
 * `pulumi.com/skipAwait`: the provider would otherwise wait for ready Pods.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as pulumi from '@pulumi/pulumi';
import { LocalWorkspace, PulumiCommand } from '@pulumi/pulumi/automation/index.js';
import { startControlPlane } from '../../src/envtest/controlplane.ts';
import { PkoNotificationController } from './controller.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CACHE = path.join(
  process.env['XDG_CACHE_HOME'] ?? path.join(homedir(), '.cache'),
  'pko-notification-controller',
);
const secs = (t: number): string => `${((performance.now() - t) / 1000).toFixed(1)} s`;

function pulumiRoot(): string {
  const explicit = process.env['PULUMI_CLI_ROOT'];
  if (explicit !== undefined) return explicit;
  const realpko = path.join(CACHE, 'realpko');
  const found = existsSync(realpko)
    ? readdirSync(realpko)
        .filter((d) => d.startsWith('pulumi-3.276.0'))
        .map((d) => path.join(realpko, d))
        .find((d) => existsSync(path.join(d, 'bin', 'pulumi')))
    : undefined;
  if (found === undefined) {
    throw new Error(
      `no Pulumi CLI: build the real-PKO binaries first, or set PULUMI_CLI_ROOT (looked in ${realpko})`,
    );
  }
  return found;
}

const t0 = performance.now();
const plugin = execFileSync('bash', [path.join(REPO, 'scripts', 'pulumi-kubernetes-build.sh')], {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
}).trim();
const kubectl = execFileSync('bash', [path.join(REPO, 'scripts', 'kubectl-build.sh')], {
  encoding: 'utf8',
}).trim();
const plane = await startControlPlane({});
const work = mkdtempSync(path.join(tmpdir(), 'pko-nc-pulumi-up-'));
let failed = false;
const check = (ok: boolean, what: string): void => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failed = true;
};
try {
  const stack = await LocalWorkspace.createOrSelectStack(
    {
      stackName: 'local',
      projectName: 'pko-notification-controller',
      program: () => {
        pulumi.runtime.registerResourceTransform((a) => {
          if (a.type !== 'kubernetes:apps/v1:Deployment' && a.type !== 'kubernetes:core/v1:Service')
            return undefined;
          const props = a.props as { metadata?: { annotations?: Record<string, string> } };
          const annotations = { ...props.metadata?.annotations, 'pulumi.com/skipAwait': 'true' };
          return { props: { ...props, metadata: { ...props.metadata, annotations } }, opts: a.opts };
        });
        const c = new PkoNotificationController('pko-notification-controller', {});
        return Promise.resolve({ namespace: c.namespace });
      },
    },
    {
      pulumiCommand: await PulumiCommand.get({ root: pulumiRoot(), skipVersionCheck: true }),
      pulumiHome: path.join(work, 'home'),
      // `plugins` is a Pulumi.yaml setting the Automation API's type does not list.
      projectSettings: {
        name: 'pko-notification-controller',
        runtime: 'nodejs',
        plugins: { providers: [{ name: 'kubernetes', path: plugin }] },
      } as never,
      envVars: {
        PULUMI_BACKEND_URL: `file://${work}`,
        PULUMI_CONFIG_PASSPHRASE: 'local-only',
        KUBECONFIG: plane.kubeconfigPath,
        PULUMI_SKIP_UPDATE_CHECK: 'true',
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
        PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: 'true',
      },
    },
  );
  let t = performance.now();
  const up = await stack.up({ onOutput: () => undefined });
  const created = up.summary.resourceChanges?.['create'] ?? 0;
  check(
    up.summary.result === 'succeeded',
    `pulumi up: ${up.summary.result}, ${created} created in ${secs(t)}`,
  );
  t = performance.now();
  const again = await stack.up({ onOutput: () => undefined });
  const changes = Object.entries(again.summary.resourceChanges ?? {}).filter(([k]) => k !== 'same');
  check(
    changes.length === 0,
    `second pulumi up changes nothing (${JSON.stringify(again.summary.resourceChanges)}, ${secs(t)})`,
  );

  const diff = spawnSync(
    kubectl,
    ['--kubeconfig', plane.kubeconfigPath, 'diff', '-k', path.join(REPO, 'config', 'default')],
    {
      encoding: 'utf8',
    },
  );
  const changed = diff.stdout.split('\n').filter((l) => /^[-+] /.test(l));
  const other = changed.filter((l) => !/^[-+] +app\.kubernetes\.io\/managed-by: (pulumi|kustomize)$/.test(l));
  check(
    diff.status !== null && diff.status <= 1 && other.length === 0,
    `kubectl diff -k config/default against the Pulumi-created objects: ${changed.length / 2} managed-by labels differ, nothing else${other.length > 0 ? `; also:\n${other.join('\n')}` : ''}`,
  );
} finally {
  await plane.stop();
}
console.log(`${failed ? 'FAILED' : 'done'} in ${secs(t0)}`);
process.exit(failed ? 1 : 0);
