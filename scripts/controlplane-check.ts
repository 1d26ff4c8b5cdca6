/**
 * `npm test` runs this first (pretest): starts the test control plane (etcd + kube-apiserver,
 * src/envtest/controlplane.ts) once and stops it, so a machine where it cannot start fails in
 * seconds with the reason, before type-checking, lint and the unit tests spend minutes.
 */
import { startControlPlane } from '../src/envtest/controlplane.ts';

const t0 = performance.now();
try {
  const cp = await startControlPlane({
    log: (line) => {
      if (line.startsWith('envtest-build:')) console.error(line);
    },
  });
  await cp.stop();
  console.error(
    `controlplane-check: kube-apiserver ${cp.serverVersion} + etcd ${cp.etcdVersion} start in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
} catch (err) {
  console.error(
    'npm test: the test control plane (etcd + kube-apiserver) cannot start, so the integration tests ' +
      `cannot run. Reason:\n${err instanceof Error ? err.message : String(err)}\n` +
      'Binaries: TEST_ASSET_ETCD / TEST_ASSET_KUBE_APISERVER, KUBEBUILDER_ASSETS, or the cache that ' +
      'scripts/envtest-build.sh fills (see README "The test control plane").',
  );
  process.exit(1);
}
