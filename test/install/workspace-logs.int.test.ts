/**
 * The optional workspace-logs RBAC (config/components/workspace-logs, docs/install.md): what
 * `kubectl kustomize config/workspace-logs` adds to config/default is exactly one ClusterRole with
 * `get` on pods, pods/log, StatefulSets and Workspaces, the default install grants none of them
 * (pods/log is a broad right), and the shipped RoleBinding example binds that ClusterRole to the
 * ServiceAccount config/default creates. That the rules suffice for reading a workspace log is
 * shown in test/kube/workspace-log.int.test.ts (the same rendered ClusterRole, bound per namespace).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT, kustomize } from '../support/kubectl.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}
interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Rule[];
  roleRef?: { apiGroup: string; kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

const ROLE = 'pko-notification-controller-workspace-logs';
const id = (o: Obj): string => `${o.kind}/${o.metadata.name}`;

describe('config/components/workspace-logs', () => {
  it('adds only a get-only ClusterRole for pods, pods/log, statefulsets and workspaces; config/default has none of them', async () => {
    const base = (await kustomize('config/default')) as unknown as Obj[];
    const withLogs = (await kustomize('config/workspace-logs')) as unknown as Obj[];
    const added = withLogs.filter((o) => !base.some((b) => id(b) === id(o)));
    expect(added.map(id)).toEqual([`ClusterRole/${ROLE}`]);
    expect(withLogs.length).toBe(base.length + 1);
    const grants = (added[0]?.rules ?? []).flatMap((r) =>
      r.resources.flatMap((res) => r.verbs.map((v) => `${r.apiGroups.join(',')}/${res}:${v}`)),
    );
    expect(grants.sort()).toEqual([
      '/pods/log:get',
      '/pods:get',
      'apps/statefulsets:get',
      'auto.pulumi.com/workspaces:get',
    ]);

    const defaultGrants = base
      .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
      .flatMap((o) => o.rules ?? [])
      .filter((r) => r.apiGroups.includes('') || r.apiGroups.includes('apps'))
      .flatMap((r) => r.resources);
    for (const res of ['pods', 'pods/log', 'statefulsets', '*']) expect(defaultGrants).not.toContain(res);
  });

  it('the RoleBinding example binds that ClusterRole to the shipped ServiceAccount', async () => {
    const base = (await kustomize('config/default')) as unknown as Obj[];
    const sa = base.find((o) => o.kind === 'ServiceAccount');
    const example = parse(
      readFileSync(`${ROOT}/config/components/workspace-logs/rolebinding.example.yaml`, 'utf8'),
    ) as Obj;
    expect(example.kind).toBe('RoleBinding');
    expect(example.metadata.namespace).toBeDefined();
    expect(example.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: ROLE,
    });
    expect(example.subjects).toEqual([
      { kind: 'ServiceAccount', name: sa?.metadata.name, namespace: sa?.metadata.namespace },
    ]);
  });
});
