/**
 * Compatibility of this project's PKO test stand-ins (test/crds/) and PKO-shaped fixture objects
 * with the REAL upstream PKO CRDs (v2.9.0, and the v1.16.0 Stack) kept as reference data in
 * `<repo>/../shared/pko-crds` (shared/facts/pko.md).
 *
 * When that folder exists:
 * - every upstream CRD passes the API server's own CRD validation (server-side dry-run create,
 *   under a renamed group because our stand-ins already own `stacks.pulumi.com` and
 *   `updates.auto.pulumi.com`);
 * - the fixtures validate against the upstream openAPIV3Schema (ajv) and contain no field that
 *   the upstream structural schema would silently prune;
 * - every field our stand-ins declare exists upstream with the same type, list semantics and
 *   (at most the same) required fields, and both enforce the 42-character Stack name rule.
 * Always: the fixtures round-trip unchanged (spec and /status) through the Stack and Update CRDs
 * installed in the control plane (ours, or PKO's when the run sets PKO_CRDS_DIR).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  loadAllYaml,
  V1ObjectMeta,
  type KubernetesObject,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import type { Condition } from '../../src/api/meta.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PKO_DIR = path.resolve(ROOT, '..', 'shared', 'pko-crds');
const HAVE_PKO = existsSync(path.join(PKO_DIR, 'pulumi.com_stacks.yaml'));
const UPSTREAM_FILES = [
  'pulumi.com_stacks.yaml',
  'pulumi.com_programs.yaml',
  'auto.pulumi.com_workspaces.yaml',
  'auto.pulumi.com_updates.yaml',
  'v1.16.0/pulumi.com_stacks.yaml',
  'v1.16.0/pulumi.com_programs.yaml',
];

// ---------------------------------------------------------------------------------------------
// Fixtures: objects exactly as PKO writes them (shared/facts/pko.md), v2.9 and v1.16 shapes.

const SHA_A = '9f1c2e7d0a4b5c6d7e8f90112233445566778899';
const SHA_B = '2b0889718d3e63feeb6079ccd5e4488d8601e353';
const T = '2026-08-20T11:02:40Z';

function cond(
  type: string,
  status: Condition['status'],
  reason: string,
  message: string,
  observedGeneration?: number,
): Condition {
  return {
    type,
    status,
    reason,
    message,
    lastTransitionTime: T,
    ...(observedGeneration !== undefined ? { observedGeneration } : {}),
  };
}

interface Fixture<O> {
  what: string;
  /** Which upstream Stack schema(s) describe it. */
  shape: 'v2' | 'v1';
  obj: O & { metadata: { name: string }; apiVersion: string; kind: string };
}

const STACKS: Fixture<Stack>[] = [
  {
    what: 'v2.9 git Stack after a failed up (retrying)',
    shape: 'v2',
    obj: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'app-dev', annotations: { 'pulumi.com/reconciliation-request': 'r1' } },
      spec: {
        stack: 'acme/app/dev',
        projectRepo: 'https://github.com/acme/app',
        branch: 'main',
        repoDir: 'infra',
        envRefs: {
          PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi-api', key: 'accessToken' } },
        },
        resyncFrequencySeconds: 60,
        destroyOnFinalize: true,
      },
      status: {
        observedGeneration: 3,
        observedReconcileRequest: 'r1',
        conditions: [
          cond('Ready', 'False', 'NotReadyInProgress', 'reconciliation is in progress'),
          cond('Reconciling', 'True', 'RetryingAfterFailure', '1 update failure(s)'),
        ],
        lastUpdate: {
          generation: 3,
          reconcileRequest: 'r1',
          name: 'app-dev-198c70e4c21',
          type: 'up',
          state: 'failed',
          message:
            'up failed: failed to run update: exit status 255\ncode: 255\nstdout: ...\nstderr: error: update failed\n',
          lastAttemptedCommit: SHA_A,
          lastSuccessfulCommit: SHA_B,
          lastResyncTime: T,
          failures: 1,
        },
        outputs: { bucket: 'acme-app-dev', dbPassword: '[secret]', ports: [80, 443] },
        projectInfo: { name: 'app', runtime: 'nodejs' },
      },
    },
  },
  {
    what: 'v2.9 Flux preview Stack, succeeded',
    shape: 'v2',
    obj: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'app-pr-42' },
      spec: {
        stack: 'acme/app/pr-42',
        preview: true,
        fluxSource: {
          sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'app' },
          dir: 'infra',
        },
      },
      status: {
        observedGeneration: 1,
        conditions: [
          cond('Ready', 'True', 'ProcessingCompleted', 'the stack has been processed and is up to date', 1),
        ],
        lastUpdate: {
          generation: 1,
          name: 'app-pr-42-198c70e5000',
          type: 'preview',
          state: 'succeeded',
          message: 'Previewed stack',
          lastAttemptedCommit: `main@sha1:${SHA_A}`,
          lastSuccessfulCommit: `main@sha1:${SHA_A}`,
          permalink: 'https://app.pulumi.com/acme/app/pr-42/previews/0c6a1b2e-4d5f-4a7b-9c8d-1e2f3a4b5c6d',
          lastResyncTime: T,
        },
      },
    },
  },
  {
    what: 'v2.9 Program Stack, stalled after 3 failures',
    shape: 'v2',
    obj: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'program-prod' },
      spec: { stack: 'prod', programRef: { name: 'site' } },
      status: {
        observedGeneration: 3,
        conditions: [
          cond('Ready', 'False', 'NotReadyStalled', 'the stack is stalled'),
          cond(
            'Stalled',
            'True',
            'UpdateFailed',
            'up failed 3 times; not retrying until the spec or source changes',
          ),
        ],
        lastUpdate: {
          generation: 3,
          name: 'program-prod-198c70e6000',
          type: 'up',
          state: 'failed',
          message: 'up failed',
          lastAttemptedCommit: '3',
          failures: 3,
        },
      },
    },
  },
  {
    what: 'v2.9 Stack with a run in flight',
    shape: 'v2',
    obj: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'app-staging' },
      spec: { stack: 'acme/app/staging', projectRepo: 'git@github.com:acme/app.git', commit: SHA_A },
      status: {
        observedGeneration: 2,
        conditions: [
          cond('Ready', 'False', 'NotReadyInProgress', 'reconciliation is in progress'),
          cond('Reconciling', 'True', 'StackProcessing', 'Processing stack'),
        ],
        currentUpdate: { generation: 2, name: 'app-staging-198c70e7000', commit: SHA_A },
      },
    },
  },
  {
    what: 'v1.16 Stack (single controller, no Update objects)',
    shape: 'v1',
    obj: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'legacy-prod' },
      spec: {
        stack: 'acme/legacy/prod',
        projectRepo: 'https://github.com/acme/legacy',
        branch: 'refs/heads/main',
        accessTokenSecret: 'pulumi-api',
      },
      status: {
        observedGeneration: 5,
        conditions: [
          cond('Ready', 'True', 'ProcessingCompleted', 'the stack has been processed and is up to date', 5),
        ],
        lastUpdate: {
          state: 'succeeded',
          lastAttemptedCommit: SHA_B,
          lastSuccessfulCommit: SHA_B,
          permalink: 'https://app.pulumi.com/acme/legacy/prod/updates/17',
          lastResyncTime: T,
        },
        outputs: { url: 'https://legacy.example.com' },
      },
    },
  },
];

function update(
  name: string,
  type: string,
  conditions: Condition[],
  extra: Record<string, unknown> = {},
): Fixture<Update> {
  return {
    what: `v2.9 Update ${name}`,
    shape: 'v2',
    obj: {
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Update',
      metadata: { name, labels: { 'pulumi.com/component': 'stack', 'pulumi.com/stack-name': 'app-dev' } },
      spec: {
        workspaceName: 'app-dev',
        stackName: 'acme/app/dev',
        type,
        ttlAfterCompleted: '24h0m0s',
        message: `New commit detected: "${SHA_A}"`,
      },
      status: { observedGeneration: 1, conditions, ...extra },
    },
  };
}

const UPDATES: Fixture<Update>[] = [
  update(
    'app-dev-198c70e4c21',
    'up',
    [
      cond('Progressing', 'True', 'Progressing', 'Update is in progress'),
      cond('Failed', 'False', 'Progressing', ''),
      cond('Complete', 'False', 'Progressing', ''),
    ],
    { startTime: T },
  ),
  update(
    'app-dev-198c70e4c22',
    'up',
    [
      cond('Progressing', 'False', 'Complete', ''),
      cond('Failed', 'False', 'UpdateSucceeded', ''),
      cond('Complete', 'True', 'Updated', ''),
    ],
    {
      startTime: T,
      endTime: T,
      permalink: 'https://app.pulumi.com/acme/app/dev/updates/18',
      message: 'update succeeded',
      outputs: 'app-dev-198c70e4c22-stack-outputs',
    },
  ),
  update(
    'app-dev-198c70e4c23',
    'preview',
    [
      cond('Progressing', 'False', 'Complete', ''),
      cond('Failed', 'True', 'UpdateFailed', 'preview failed'),
      cond('Complete', 'True', 'Updated', ''),
    ],
    { startTime: T, endTime: T, message: 'preview failed: exit status 255' },
  ),
  update(
    'app-dev-198c70e4c24',
    'destroy',
    [
      cond('Progressing', 'False', 'Failed', ''),
      cond('Failed', 'True', 'Aborted', 'the workspace was deleted'),
      cond('Complete', 'True', 'Failed', ''),
    ],
    { startTime: T, endTime: T },
  ),
];

// ---------------------------------------------------------------------------------------------
// Schema helpers.

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  required?: string[];
  enum?: unknown[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: { rule: string; message?: string }[];
}

/** The parts of a CustomResourceDefinition these checks read (a plain parsed object, not a client class). */
interface Crd {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [key: string]: unknown };
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string; [key: string]: unknown };
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: { status?: object };
      schema?: { openAPIV3Schema?: Schema };
    }[];
    [key: string]: unknown;
  };
}

function readCrd(file: string): Crd {
  return parse(readFileSync(file, 'utf8')) as Crd;
}

function schemaOf(crd: Crd, version: string): Schema {
  const s = crd.spec.versions.find((v) => v.name === version)?.schema?.openAPIV3Schema;
  if (!s) throw new Error(`${crd.metadata.name} has no schema for ${version}`);
  return s;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Paths of `value` that a structural schema would prune (fields it neither declares nor keeps
 * through x-kubernetes-preserve-unknown-fields). The root's apiVersion/kind/metadata are
 * handled by the API server itself.
 */
function prunedPaths(schema: Schema, value: unknown, at = ''): string[] {
  const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
  if (Array.isArray(value))
    return schema.items ? value.flatMap((v, i) => prunedPaths(schema.items!, v, `${at}[${i}]`)) : [];
  if (!isPlainObject(value)) return [];
  const out: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    const p = `${at}.${key}`;
    if (at === '' && (key === 'apiVersion' || key === 'kind' || key === 'metadata')) continue;
    const declared = schema.properties?.[key];
    if (declared) out.push(...prunedPaths(declared, v, p));
    else if (typeof schema.additionalProperties === 'object')
      out.push(...prunedPaths(schema.additionalProperties, v, p));
    else if (!preserve && schema.additionalProperties !== true) out.push(p);
  }
  return out;
}

/**
 * Where our stand-in schema disagrees with upstream: a declared field upstream lacks (and does
 * not preserve), a different type, list type or map keys, a required field upstream does not
 * require (we would reject what PKO accepts), or enum values upstream does not allow.
 */
function schemaMismatches(ours: Schema, theirs: Schema, at = '<root>'): string[] {
  const out: string[] = [];
  if (ours.type !== undefined && theirs.type !== undefined && ours.type !== theirs.type)
    out.push(`${at}: type ${ours.type} vs upstream ${theirs.type}`);
  for (const k of ['x-kubernetes-list-type', 'x-kubernetes-list-map-keys'] as const) {
    if (theirs[k] !== undefined && JSON.stringify(ours[k]) !== JSON.stringify(theirs[k])) {
      out.push(`${at}: ${k} ${JSON.stringify(ours[k])} vs upstream ${JSON.stringify(theirs[k])}`);
    }
  }
  for (const r of ours.required ?? [])
    if (!(theirs.required ?? []).includes(r)) out.push(`${at}: requires ${r}, upstream does not`);
  if (ours.enum && theirs.enum) {
    for (const e of ours.enum)
      if (!theirs.enum.includes(e)) out.push(`${at}: enum value ${String(e)} not allowed upstream`);
  }
  for (const [key, sub] of Object.entries(ours.properties ?? {})) {
    if (at === '<root>' && key === 'metadata') continue;
    const up =
      theirs.properties?.[key] ??
      (typeof theirs.additionalProperties === 'object' ? theirs.additionalProperties : undefined);
    if (up) out.push(...schemaMismatches(sub, up, `${at}.${key}`));
    else if (theirs['x-kubernetes-preserve-unknown-fields'] !== true)
      out.push(`${at}.${key}: not declared upstream`);
  }
  if (ours.items && theirs.items) out.push(...schemaMismatches(ours.items, theirs.items, `${at}[]`));
  if (typeof ours.additionalProperties === 'object' && typeof theirs.additionalProperties === 'object') {
    out.push(...schemaMismatches(ours.additionalProperties, theirs.additionalProperties, `${at}{}`));
  }
  return out;
}

function makeAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv, ['date-time']);
  ajv.addFormat('int32', {
    type: 'number',
    validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31,
  });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  return ajv;
}

function describeErrors(errors: ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword}`);
}

// ---------------------------------------------------------------------------------------------

describe('PKO fixtures round-trip through the installed Stack and Update CRDs', () => {
  let custom: CustomObjectsApi;
  let ns: string;

  beforeAll(async () => {
    custom = kubeConfig().makeApiClient(CustomObjectsApi);
    ns = await createTestNamespace('api-pko-compat');
  });

  it('reports whether the upstream compatibility suite runs', () => {
    const line = HAVE_PKO
      ? `pko-compat: upstream PKO CRDs found in ${PKO_DIR}; compatibility suite runs`
      : `pko-compat: ${PKO_DIR} not found; only the round-trip tests ran (no upstream comparison)`;
    console.info(line);
    expect(HAVE_PKO).toBe(existsSync(path.join(PKO_DIR, 'pulumi.com_stacks.yaml')));
  });

  it.each([...STACKS, ...UPDATES].map((f) => [f.what, f] as const))('%s', async (_what, { obj }) => {
    const [group, version] = obj.apiVersion.split('/') as [string, string];
    const plural = obj.kind === 'Stack' ? 'stacks' : 'updates';
    const { status, ...withoutStatus } = obj;
    const created = (await custom.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural,
      body: withoutStatus,
    })) as KubernetesObject & { spec: unknown };
    expect(created.spec).toEqual(obj.spec);
    await custom.replaceNamespacedCustomObjectStatus({
      group,
      version,
      namespace: ns,
      plural,
      name: obj.metadata.name,
      body: { ...created, status },
    });
    const back = (await custom.getNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural,
      name: obj.metadata.name,
    })) as typeof obj;
    expect(back.spec).toEqual(obj.spec);
    expect(back.status).toEqual(status);
  });

  it('serves Stack as pulumi.com/v1alpha1 too, and rejects names over 42 characters', async () => {
    const v1alpha1 = {
      apiVersion: 'pulumi.com/v1alpha1',
      kind: 'Stack',
      metadata: { name: 'old-api' },
      spec: { stack: 'dev', projectRepo: 'https://github.com/acme/app', branch: 'main' },
    };
    const created = (await custom.createNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1alpha1',
      namespace: ns,
      plural: 'stacks',
      body: v1alpha1,
    })) as { spec: unknown };
    expect(created.spec).toEqual(v1alpha1.spec);
    const asV1 = (await custom.getNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace: ns,
      plural: 'stacks',
      name: 'old-api',
    })) as { apiVersion: string };
    expect(asV1.apiVersion).toBe('pulumi.com/v1');

    const tooLong = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'a'.repeat(43) },
      spec: { stack: 'dev' },
    };
    const err = await custom
      .createNamespacedCustomObject({
        group: 'pulumi.com',
        version: 'v1',
        namespace: ns,
        plural: 'stacks',
        body: tooLong,
        dryRun: 'All',
      })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number; body?: string },
      );
    expect(err?.code).toBe(422);
    expect(err?.body).toContain('Stack name must be no more than 42 characters in length.');
  });
});

describe.runIf(HAVE_PKO)(`upstream PKO CRDs (${PKO_DIR})`, () => {
  const read = (f: string): Crd => readCrd(path.join(PKO_DIR, f));

  it.each(UPSTREAM_FILES)(
    '%s passes the API server CRD validation (dry-run create, renamed group)',
    async (file) => {
      const ext = kubeConfig().makeApiClient(ApiextensionsV1Api);
      // loadAllYaml yields the client's typed models: the typed API serialises only model
      // properties, so a raw parsed object would lose enum, default and every x-kubernetes-* key.
      const docs = loadAllYaml(
        readFileSync(path.join(PKO_DIR, file), 'utf8'),
      ) as V1CustomResourceDefinition[];
      expect(docs.length).toBeGreaterThan(0);
      for (const crd of docs) {
        const versions = crd.spec.versions.map((v) => v.name);
        const group = `pko-compat.${crd.spec.group}`;
        crd.spec.group = group;
        crd.metadata ??= new V1ObjectMeta();
        crd.metadata.name = `${crd.spec.names.plural}.${group}`;
        const created = await ext.createCustomResourceDefinition({ body: crd, dryRun: 'All' });
        expect(created.spec.versions.map((v) => v.name)).toEqual(versions);
      }
    },
  );

  describe('fixtures validate against the upstream schemas and lose no field', () => {
    // Loaded in beforeAll: a skipped suite's body still runs at collection time.
    let stackV2Schema: Schema;
    let stackV1Schema: Schema;
    let updateSchema: Schema;
    let stackV2: ValidateFunction;
    let stackV1: ValidateFunction;
    let updateV2: ValidateFunction;

    beforeAll(() => {
      const ajv = makeAjv();
      stackV2Schema = schemaOf(read('pulumi.com_stacks.yaml'), 'v1');
      stackV1Schema = schemaOf(read('v1.16.0/pulumi.com_stacks.yaml'), 'v1');
      updateSchema = schemaOf(read('auto.pulumi.com_updates.yaml'), 'v1alpha1');
      stackV2 = ajv.compile(stackV2Schema);
      stackV1 = ajv.compile(stackV1Schema);
      updateV2 = ajv.compile(updateSchema);
    });

    it.each(STACKS.map((f) => [f.what, f] as const))('%s', (_what, f) => {
      expect(stackV2(f.obj) ? [] : describeErrors(stackV2.errors), 'against v2.9').toEqual([]);
      expect(prunedPaths(stackV2Schema, f.obj), 'pruned by v2.9').toEqual([]);
      if (f.shape === 'v1') {
        expect(stackV1(f.obj) ? [] : describeErrors(stackV1.errors), 'against v1.16').toEqual([]);
        expect(prunedPaths(stackV1Schema, f.obj), 'pruned by v1.16').toEqual([]);
      }
      expect(f.obj.metadata.name.length).toBeLessThanOrEqual(42);
    });

    it.each(UPDATES.map((f) => [f.what, f] as const))('%s', (_what, f) => {
      expect(updateV2(f.obj) ? [] : describeErrors(updateV2.errors)).toEqual([]);
      expect(prunedPaths(updateSchema, f.obj)).toEqual([]);
    });

    it('the checks catch what they should (a wrong type, a field PKO would prune)', () => {
      const bad = {
        ...STACKS[0]!.obj,
        status: {
          lastUpdate: { failures: 'one', bogus: true },
          conditions: [{ type: 'Ready', status: 'True' }],
        },
      };
      expect(stackV2(bad)).toBe(false);
      expect(describeErrors(stackV2.errors)).toEqual(
        expect.arrayContaining([
          '/status/lastUpdate/failures must be integer',
          "/status/conditions/0 must have required property 'reason'",
        ]),
      );
      expect(prunedPaths(stackV2Schema, bad)).toEqual(['.status.lastUpdate.bogus']);
    });
  });

  describe('our stand-ins in test/crds/ agree with upstream', () => {
    const ours = (f: string): Crd => readCrd(path.join(ROOT, 'test', 'crds', f));

    it.each([
      ['pulumi.com_stacks.yaml', 'v1'],
      ['pulumi.com_stacks.yaml', 'v1alpha1'],
      ['auto.pulumi.com_updates.yaml', 'v1alpha1'],
    ])('%s %s: declared fields, types, list semantics and required fields', (file, version) => {
      expect(schemaMismatches(schemaOf(ours(file), version), schemaOf(read(file), version))).toEqual([]);
    });

    it.each(['pulumi.com_stacks.yaml', 'auto.pulumi.com_updates.yaml'])(
      '%s: same name, scope, versions and status subresource',
      (file) => {
        const summary = (c: Crd): unknown => ({
          name: c.metadata.name,
          group: c.spec.group,
          scope: c.spec.scope,
          kind: c.spec.names.kind,
          plural: c.spec.names.plural,
          versions: c.spec.versions.map((v) => ({
            name: v.name,
            served: v.served,
            storage: v.storage,
            status: v.subresources?.status !== undefined,
          })),
        });
        expect(summary(ours(file))).toEqual(summary(read(file)));
      },
    );

    it('both enforce the 42-character Stack name rule on v1', () => {
      const rules = (c: Crd): string[] =>
        (schemaOf(c, 'v1')['x-kubernetes-validations'] ?? []).map((v) => v.rule);
      expect(rules(read('pulumi.com_stacks.yaml'))).toContain('size(self.metadata.name) <= 42');
      expect(rules(ours('pulumi.com_stacks.yaml'))).toContain('size(self.metadata.name) <= 42');
    });
  });
});
