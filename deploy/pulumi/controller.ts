/**
 * `PkoNotificationController`: a Pulumi component that installs pko-notification-controller —
 * the same objects as `kubectl apply -k config/default` (test/controller.test.ts compares the
 * two object by object): Namespace, the Provider and Alert CRDs, ServiceAccount, ClusterRole +
 * binding, the leader-election Role + binding, Deployment, metrics Service, PodDisruptionBudget,
 * the admission policies + bindings (PullRequestPreview overrides, DriftDetection remediation,
 * Alert sources in other namespaces),
 * and optionally a Prometheus Operator ServiceMonitor.
 *
 * Read from the repository, so there is one copy of each: the CRDs (`crds/*.yaml`), the RBAC
 * rules (`config/rbac/role.yaml`, `config/rbac/leader_election_role.yaml`) and the admission
 * policies and bindings (`config/admission/*.yaml`). Everything else is typed here, with the knobs
 * of {@link ControllerArgs}.
 */
import { readFileSync, readdirSync } from 'node:fs';
import * as k8s from '@pulumi/kubernetes';
import * as pulumi from '@pulumi/pulumi';
import { parse, parseAllDocuments } from 'yaml';

const REPO = new URL('../../', import.meta.url);

/** Name of every namespaced object and of the cluster-scoped RBAC objects. */
export const APP = 'pko-notification-controller';
export const DEFAULT_NAMESPACE = 'pko-notification-system';

/** The release this checkout builds (root package.json `version`): the default image tag. */
export function releaseVersion(): string {
  return (JSON.parse(readFileSync(new URL('package.json', REPO), 'utf8')) as { version: string }).version;
}

export interface ControllerArgs {
  /** Namespace to create and run in. Default `pko-notification-system`. */
  namespace?: string;
  /** Container image. Default `pko-notification-controller:<package.json version>`. */
  image?: string;
  /** Default 2 (leader election: one sends, the other takes over). */
  replicas?: number;
  /**
   * `--cluster-name` (part of default commit-status contexts). Unset: the controller derives one from
   * the cluster's `kube-system` namespace UID (docs/install.md), so two clusters never share it.
   */
  clusterName?: string;
  /**
   * Let Alerts select Stacks of other namespaces (`--no-cross-namespace-refs=false`). Default
   * false: an Alert sees its own namespace only. With true an Alert selecting namespace b is
   * admitted only from a writer who may list Stacks in b (`*`: cluster-wide; the alert-sources
   * admission policy installed here) and honoured only for Alerts created after it (case B14,
   * docs/threat-model.md).
   */
  crossNamespaceRefs?: boolean;
  /** More controller flags, appended after the defaults. */
  extraArgs?: string[];
  /**
   * `NODE_OPTIONS` of the container. Default `--max-old-space-size=160`: with 10,000 Stacks the
   * RSS peaked at 305 MiB draining a 10,000-event backlog when first measured (189 MiB since;
   * docs/benchmarks.md); raise it with `resources`.
   */
  nodeOptions?: string;
  /** Container resources. Default requests cpu 50m / memory 96Mi, limit memory 384Mi (the measured peak plus ~25 %). */
  resources?: k8s.types.input.core.v1.ResourceRequirements;
  /** Create a `monitoring.coreos.com/v1` ServiceMonitor (needs the Prometheus Operator CRDs). */
  serviceMonitor?: boolean;
}

type Rules = k8s.types.input.rbac.v1.PolicyRule[];

function rulesOf(file: string): Rules {
  const doc = parse(readFileSync(new URL(file, REPO), 'utf8')) as { rules?: Rules };
  if (!Array.isArray(doc.rules)) throw new Error(`${file}: no rules`);
  return doc.rules;
}

interface CrdDoc {
  kind: string;
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec: k8s.types.input.apiextensions.v1.CustomResourceDefinitionSpec;
}

function crds(): CrdDoc[] {
  const dir = new URL('crds/', REPO);
  const out: CrdDoc[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(new URL(file, dir), 'utf8'))) {
      const obj = doc.toJS() as CrdDoc | null;
      if (obj?.kind === 'CustomResourceDefinition') out.push(obj);
    }
  }
  return out;
}

/** A cluster-scoped object of config/admission (policy or binding), as written there. */
function admission<Spec>(file: string): { metadata: { name: string }; spec: Spec } {
  return parse(readFileSync(new URL(`config/admission/${file}`, REPO), 'utf8')) as {
    metadata: { name: string };
    spec: Spec;
  };
}

export class PkoNotificationController extends pulumi.ComponentResource {
  /** The namespace the controller runs in. */
  readonly namespace: string;
  /** Every Kubernetes object created, in creation order. */
  readonly children: pulumi.CustomResource[] = [];

  constructor(name: string, args: ControllerArgs = {}, opts?: pulumi.ComponentResourceOptions) {
    super('pko-notification-controller:index:Controller', name, {}, opts);
    const ns = args.namespace ?? DEFAULT_NAMESPACE;
    this.namespace = ns;
    const parent = { parent: this };
    const labels = {
      'app.kubernetes.io/part-of': APP,
      'app.kubernetes.io/managed-by': 'pulumi',
    };
    const selector = { 'app.kubernetes.io/name': APP };
    const add = <T extends pulumi.CustomResource>(r: T): T => {
      this.children.push(r);
      return r;
    };

    const namespace = add(
      new k8s.core.v1.Namespace(
        `${name}-namespace`,
        {
          metadata: {
            name: ns,
            labels: {
              ...labels,
              'pod-security.kubernetes.io/enforce': 'restricted',
              'pod-security.kubernetes.io/warn': 'restricted',
            },
          },
        },
        parent,
      ),
    );
    const crdResources = crds().map((crd) =>
      add(
        new k8s.apiextensions.v1.CustomResourceDefinition(
          `${name}-${crd.metadata.name}`,
          {
            metadata: { ...crd.metadata, labels: { ...crd.metadata.labels, ...labels } },
            spec: crd.spec,
          },
          parent,
        ),
      ),
    );
    const inNs = { parent: this, dependsOn: [namespace] };
    const sa = add(
      new k8s.core.v1.ServiceAccount(`${name}-sa`, { metadata: { name: APP, namespace: ns, labels } }, inNs),
    );
    const clusterRole = add(
      new k8s.rbac.v1.ClusterRole(
        `${name}-clusterrole`,
        { metadata: { name: APP, labels }, rules: rulesOf('config/rbac/role.yaml') },
        parent,
      ),
    );
    const subjects = [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: ns }];
    add(
      new k8s.rbac.v1.ClusterRoleBinding(
        `${name}-clusterrolebinding`,
        {
          metadata: { name: APP, labels },
          roleRef: {
            apiGroup: 'rbac.authorization.k8s.io',
            kind: 'ClusterRole',
            name: clusterRole.metadata.name,
          },
          subjects,
        },
        parent,
      ),
    );
    const leaderRole = add(
      new k8s.rbac.v1.Role(
        `${name}-leader-election-role`,
        {
          metadata: { name: `${APP}-leader-election`, namespace: ns, labels },
          rules: rulesOf('config/rbac/leader_election_role.yaml'),
        },
        inNs,
      ),
    );
    add(
      new k8s.rbac.v1.RoleBinding(
        `${name}-leader-election-rolebinding`,
        {
          metadata: { name: `${APP}-leader-election`, namespace: ns, labels },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: leaderRole.metadata.name },
          subjects,
        },
        inNs,
      ),
    );

    add(
      new k8s.apps.v1.Deployment(
        `${name}-deployment`,
        {
          metadata: { name: APP, namespace: ns, labels },
          spec: {
            replicas: args.replicas ?? 2,
            selector: { matchLabels: selector },
            template: {
              metadata: { labels: selector },
              spec: {
                serviceAccountName: sa.metadata.name,
                // --shutdown-timeout (30 s) to drain in-flight sends, plus the 5 s hard deadline.
                terminationGracePeriodSeconds: 40,
                securityContext: {
                  runAsNonRoot: true,
                  runAsUser: 65532,
                  runAsGroup: 65532,
                  seccompProfile: { type: 'RuntimeDefault' },
                },
                affinity: {
                  podAntiAffinity: {
                    preferredDuringSchedulingIgnoredDuringExecution: [
                      {
                        weight: 100,
                        podAffinityTerm: {
                          topologyKey: 'kubernetes.io/hostname',
                          labelSelector: { matchLabels: selector },
                        },
                      },
                    ],
                  },
                },
                containers: [
                  {
                    name: 'manager',
                    image: args.image ?? `${APP}:${releaseVersion()}`,
                    imagePullPolicy: 'IfNotPresent',
                    args: [
                      '--leader-elect',
                      '--metrics-bind-address=:8080',
                      '--health-probe-bind-address=:8081',
                      `--no-cross-namespace-refs=${String(args.crossNamespaceRefs !== true)}`,
                      ...(args.clusterName !== undefined ? [`--cluster-name=${args.clusterName}`] : []),
                      ...(args.extraArgs ?? []),
                    ],
                    env: [
                      { name: 'NODE_OPTIONS', value: args.nodeOptions ?? '--max-old-space-size=160' },
                      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                    ],
                    ports: [
                      { name: 'metrics', containerPort: 8080, protocol: 'TCP' },
                      { name: 'probes', containerPort: 8081, protocol: 'TCP' },
                    ],
                    livenessProbe: {
                      httpGet: { path: '/healthz', port: 'probes' },
                      periodSeconds: 10,
                      failureThreshold: 3,
                    },
                    readinessProbe: { httpGet: { path: '/readyz', port: 'probes' }, periodSeconds: 5 },
                    resources: args.resources ?? {
                      requests: { cpu: '50m', memory: '96Mi' },
                      limits: { memory: '384Mi' },
                    },
                    securityContext: {
                      allowPrivilegeEscalation: false,
                      readOnlyRootFilesystem: true,
                      capabilities: { drop: ['ALL'] },
                    },
                  },
                ],
              },
            },
          },
        },
        { parent: this, dependsOn: [namespace, ...crdResources] },
      ),
    );
    const metricsLabels = { ...labels, ...selector, 'app.kubernetes.io/component': 'metrics' };
    add(
      new k8s.core.v1.Service(
        `${name}-metrics`,
        {
          metadata: { name: `${APP}-metrics`, namespace: ns, labels: metricsLabels },
          spec: {
            selector,
            ports: [{ name: 'metrics', port: 8080, targetPort: 'metrics', protocol: 'TCP' }],
          },
        },
        inNs,
      ),
    );
    add(
      new k8s.policy.v1.PodDisruptionBudget(
        `${name}-pdb`,
        {
          metadata: { name: APP, namespace: ns, labels },
          spec: { maxUnavailable: 1, selector: { matchLabels: selector } },
        },
        inNs,
      ),
    );
    // Admission policies of config/admission, cluster-scoped, not moved by `namespace`:
    // PullRequestPreview overrides (docs/previews.md, "Admission"), DriftDetection remediation
    // (docs/drift.md) and Alert sources in other namespaces (case B14, docs/threat-model.md).
    // Each binding is created after its policy.
    for (const [policyFile, bindingFile, id] of [
      ['preview_overrides_policy.yaml', 'preview_overrides_binding.yaml', 'preview-overrides'],
      ['drift_remediation_policy.yaml', 'drift_remediation_binding.yaml', 'drift-remediation'],
      ['alert_sources_policy.yaml', 'alert_sources_binding.yaml', 'alert-sources'],
    ] as const) {
      const policyDoc =
        admission<k8s.types.input.admissionregistration.v1.ValidatingAdmissionPolicySpec>(policyFile);
      const policy = add(
        new k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
          `${name}-${id}-policy`,
          {
            metadata: { name: policyDoc.metadata.name, labels },
            spec: policyDoc.spec,
          },
          { parent: this, dependsOn: crdResources },
        ),
      );
      const bindingDoc =
        admission<k8s.types.input.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec>(bindingFile);
      add(
        new k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
          `${name}-${id}-binding`,
          {
            metadata: { name: bindingDoc.metadata.name, labels },
            spec: bindingDoc.spec,
          },
          { parent: this, dependsOn: [policy] },
        ),
      );
    }
    if (args.serviceMonitor === true) {
      add(
        new k8s.apiextensions.CustomResource(
          `${name}-servicemonitor`,
          {
            apiVersion: 'monitoring.coreos.com/v1',
            kind: 'ServiceMonitor',
            metadata: { name: APP, namespace: ns, labels: { ...labels, ...selector } },
            spec: {
              selector: { matchLabels: { ...selector, 'app.kubernetes.io/component': 'metrics' } },
              endpoints: [{ port: 'metrics', path: '/metrics', interval: '30s' }],
            },
          },
          inNs,
        ),
      );
    }
    this.registerOutputs({ namespace: ns });
  }
}
