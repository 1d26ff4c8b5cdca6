/**
 * Values that test/setup/global.ts provides to integration tests (read them with `inject`).
 */
import 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Path of the admin kubeconfig (token user `admin`, group `system:masters`). */
    kubeconfig: string;
    /** Kubeconfig of token user `controller` (no groups, no bindings until a test adds some). */
    controllerKubeconfig: string;
    /** Kubeconfig of token user `viewer` (no groups, no bindings: RBAC denies everything). */
    viewerKubeconfig: string;
    /** `https://127.0.0.1:<port>`. */
    server: string;
    /**
     * etcd's client URL, `http://127.0.0.1:<port>`: only for writing what an older API server would
     * have stored (objects from before a CRD or admission rule existed).
     */
    etcdUrl: string;
    /** kube-apiserver `gitVersion`, e.g. `v1.35.4`. */
    kubeVersion: string;
    /** Base URL of the loopback control endpoint (leases, API server restart). */
    controlUrl: string;
    /** Bearer token for the control endpoint. */
    controlToken: string;
    /** `real-pko` project: folder of the built real PKO parts (scripts/realpko-build.sh). */
    realPkoDir: string;
  }
}
