/**
 * What a PullRequestPreview may put into its preview Stacks (case B10; src/preview/stack.ts): the
 * allow-list of `stackOverrides.spec`, envRefs types, reserved label and annotation keys, Secret
 * envRefs only with the admission policy, ownership; and that the CRD and the shipped admission
 * policy (config/admission) carry the same lists as the code.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { Stack } from '../../src/api/pko.ts';
import type { PullRequestPreview } from '../../src/api/v1alpha1.ts';
import { ADMISSION_POLICY_NAME } from '../../src/preview/admission.ts';
import { ALERT_SOURCES_POLICY_NAME } from '../../src/api/v1alpha1.ts';
import { REMEDIATION_POLICY_NAME } from '../../src/drift/controller.ts';
import {
  CONTROLLER_SPEC_FIELDS,
  MAX_SECRET_ENV_REFS,
  OVERRIDABLE_ENV_REF_TYPES,
  OVERRIDABLE_SPEC_FIELDS,
  RESERVED_KEY,
  ownedBy,
  previewSpec,
  refusedOverride,
  type SecretEnvRefsVerdict,
} from '../../src/preview/stack.ts';

type Overrides = PullRequestPreview['spec']['stackOverrides'];
const ALLOWED: SecretEnvRefsVerdict = { allowed: true };
const NO_POLICY: SecretEnvRefsVerdict = {
  allowed: false,
  why: 'ValidatingAdmissionPolicyBinding x does not exist',
};
const refused = (o: Overrides, secrets: SecretEnvRefsVerdict = ALLOWED): string | undefined =>
  refusedOverride(o, secrets);

/** Stack spec fields of PKO (v2.9 Stack CRD) that are not overridable, with a value of each. */
const REFUSED_FIELDS: Record<string, unknown> = {
  serviceAccountName: 'admin',
  projectRepo: 'https://git.example.org/evil/x.git',
  workspaceTemplate: {
    spec: {
      podTemplate: {
        spec: {
          hostPID: true,
          containers: [{ name: 'pulumi', securityContext: { privileged: true } }],
          volumes: [{ name: 'root', hostPath: { path: '/' } }],
        },
      },
    },
  },
  gitAuth: { accessToken: { type: 'Secret', secret: { name: 'git', key: 't' } } },
  gitAuthSecret: 'git',
  secretsRef: { k: { type: 'Secret', secret: { name: 's', key: 'k' } } },
  envs: ['cm'],
  envSecrets: ['s'],
  accessTokenSecret: 'token',
  backend: 's3://bucket',
  stack: 'other/stack',
  programRef: { name: 'p' },
  fluxSource: { sourceRef: { apiVersion: 'v1', kind: 'GitRepository', name: 'r' }, dir: '.' },
  repoDir: 'other',
  prerequisites: [{ name: 'x' }],
  updateTemplate: { spec: { ttlAfterCompleted: '1s' } },
  secretsProvider: 'passphrase',
  configRef: { k: { name: 'cm', key: 'k' } },
  secrets: { k: 'v' },
  environment: ['env'],
  shallow: true,
  useLocalStackOnly: true,
  runProgram: true,
};

describe('stackOverrides.spec allow-list (B10)', () => {
  it.each(Object.entries(REFUSED_FIELDS))(
    'refuses %s, naming it and the overridable fields',
    (field, value) => {
      const m = refused({ spec: { resyncFrequencySeconds: 60, [field]: value } });
      expect(m).toMatch(new RegExp(`^stackOverrides\\.spec\\.${field} may not be overridden: `));
      expect(m).toContain(`overridable: ${Object.keys(OVERRIDABLE_SPEC_FIELDS).join(', ')}`);
    },
  );

  it('refuses a null of a refused field too (removing the base service account is a change of identity)', () => {
    expect(refused({ spec: { serviceAccountName: null } })).toMatch(
      /serviceAccountName may not be overridden/,
    );
  });

  it.each(CONTROLLER_SPEC_FIELDS)('refuses %s: the controller sets it', (field) => {
    expect(refused({ spec: { [field]: 'x' } })).toMatch(
      new RegExp(
        `^stackOverrides\\.spec\\.${field} may not be overridden: a preview Stack always has preview true`,
      ),
    );
  });

  it('accepts every allowed field, nulls included, and nothing at all', () => {
    expect(
      refused({
        spec: {
          resyncFrequencySeconds: 3600,
          continueResyncOnCommitMatch: false,
          refresh: true,
          expectNoRefreshChanges: true,
          retryOnUpdateConflict: true,
          retryMaxBackoffDurationSeconds: 600,
          workspaceReclaimPolicy: 'Delete',
          targets: ['urn:pulumi:dev::app::aws:s3/bucket:Bucket::b'],
          targetDependents: true,
          config: { 'aws:region': 'eu-west-1', nested: { a: [1, 2] } },
          envRefs: {
            STAGE: { type: 'Literal', literal: { value: 'preview' } },
            PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'preview-token', key: 'token' } },
            CLOUD_KEY: null,
          },
        },
      }),
    ).toBeUndefined();
    expect(refused({ spec: { envRefs: null, config: null } })).toBeUndefined();
    expect(refused(undefined)).toBeUndefined();
    expect(refused({})).toBeUndefined();
  });

  it('every allowed field says why it is harmless', () => {
    for (const [f, why] of Object.entries(OVERRIDABLE_SPEC_FIELDS)) expect(why.length, f).toBeGreaterThan(10);
  });
});

describe('envRefs entries', () => {
  it.each([
    ['Env', { type: 'Env', env: { name: 'HOME' } }],
    ['FS', { type: 'FS', filesystem: { path: '/var/run/secrets/kubernetes.io/serviceaccount/token' } }],
    ['none', { literal: { value: 'x' } }],
  ])('refuses type %s, naming the entry', (type, entry) => {
    expect(refused({ spec: { envRefs: { OPERATOR: entry } } })).toBe(
      `stackOverrides.spec.envRefs.OPERATOR has type ${type}: only Literal and Secret are allowed (Env and FS read the PKO operator's own environment and files)`,
    );
  });

  it('refuses an entry that is not an object, and envRefs that is not one', () => {
    expect(refused({ spec: { envRefs: { A: 'x' } } })).toMatch(
      /^stackOverrides\.spec\.envRefs\.A has type none/,
    );
    expect(refused({ spec: { envRefs: ['A'] } })).toBe('stackOverrides.spec.envRefs must be an object');
  });

  it('refuses a Secret in another namespace', () => {
    expect(
      refused({
        spec: {
          envRefs: { T: { type: 'Secret', secret: { name: 't', key: 'k', namespace: 'kube-system' } } },
        },
      }),
    ).toBe(
      'stackOverrides.spec.envRefs.T.secret.namespace may not be set: a preview Stack reads Secrets of its own namespace only',
    );
    expect(
      refused({
        spec: { envRefs: { T: { type: 'Secret', secret: { name: 't', key: 'k', namespace: '' } } } },
      }),
    ).toBeUndefined();
  });

  it(`refuses more than ${String(MAX_SECRET_ENV_REFS)} Secret entries`, () => {
    const envRefs = (n: number) =>
      Object.fromEntries(
        Array.from({ length: n }, (_, i) => [
          `S${String(i)}`,
          { type: 'Secret', secret: { name: 's', key: `k${String(i)}` } },
        ]),
      );
    expect(refused({ spec: { envRefs: envRefs(MAX_SECRET_ENV_REFS) } })).toBeUndefined();
    expect(refused({ spec: { envRefs: envRefs(MAX_SECRET_ENV_REFS + 1) } })).toBe(
      `stackOverrides.spec.envRefs names ${String(MAX_SECRET_ENV_REFS + 1)} Secrets; at most ${String(MAX_SECRET_ENV_REFS)} are allowed`,
    );
  });

  it('applies Secret entries only while the admission policy checks them; Literal ones always', () => {
    const secret = {
      spec: { envRefs: { TOKEN: { type: 'Secret', secret: { name: 'admin-token', key: 't' } } } },
    };
    expect(refused(secret, ALLOWED)).toBeUndefined();
    expect(refused(secret, NO_POLICY)).toBe(
      'stackOverrides.spec.envRefs.TOKEN is of type Secret, and Secret envRefs are applied only while the admission policy checks that whoever writes the PullRequestPreview may get them: ValidatingAdmissionPolicyBinding x does not exist',
    );
    expect(
      refused({ spec: { envRefs: { A: { type: 'Literal', literal: { value: 'x' } } } } }, NO_POLICY),
    ).toBeUndefined();
  });

  it('never puts a value into the message', () => {
    const m = refused({
      spec: {
        envRefs: { A: { type: 'Env', literal: { value: 'hunter2-secret-value' } } },
        projectRepo: 'https://u:pw@x',
      },
    });
    expect(m).toBeDefined();
    expect(m).not.toContain('hunter2');
    expect(m).not.toContain('pw@');
  });
});

describe('reserved label and annotation keys', () => {
  it.each([
    ['labels', 'pulumi.com/reconciliation-request'],
    ['labels', 'auto.pulumi.com/workspace'],
    ['annotations', 'notification.pko.dev/pull-request'],
    ['annotations', 'x.pulumi.com/y'],
  ] as const)('refuses %s key %s', (kind, key) => {
    expect(refused({ [kind]: { ok: 'v', [key]: 'v' } })).toBe(
      `stackOverrides.${kind}.${key} is reserved: keys under pulumi.com/, auto.pulumi.com/ and notification.pko.dev/ belong to PKO and to this controller`,
    );
  });

  it('accepts other keys, also look-alikes', () => {
    expect(
      refused({
        labels: { team: 'a', 'example.com/x': 'y', 'pulumi.com.example.org/x': 'y', 'notpulumi.com/x': 'y' },
        annotations: { 'pko.dev/x': 'y' },
      }),
    ).toBeUndefined();
  });
});

const base: Stack = {
  apiVersion: 'pulumi.com/v1',
  kind: 'Stack',
  metadata: { name: 'app', namespace: 'team' },
  spec: {
    stack: 'acme/app/prod',
    projectRepo: 'https://git.example.com/acme/app.git',
    branch: 'main',
    serviceAccountName: 'app-deployer',
    envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi', key: 'token' } } },
  },
};
const prp = (stackOverrides: Overrides): PullRequestPreview => ({
  apiVersion: 'notification.pko.dev/v1alpha1',
  kind: 'PullRequestPreview',
  metadata: { name: 'previews', namespace: 'team', uid: 'prp-uid' },
  spec: {
    stackRef: { name: 'app' },
    providerRef: { name: 'gitea' },
    ...(stackOverrides ? { stackOverrides } : {}),
  },
});

describe('previewSpec merges only allowed fields', () => {
  it('keeps the base identity and source even when handed refused overrides', () => {
    const spec = previewSpec(
      base,
      prp({
        spec: {
          serviceAccountName: 'admin',
          projectRepo: 'https://git.example.org/evil/x.git',
          workspaceTemplate: REFUSED_FIELDS['workspaceTemplate'],
          resyncFrequencySeconds: 3600,
          envRefs: { STAGE: { type: 'Literal', literal: { value: 'preview' } } },
        },
      }),
      'a'.repeat(40),
    );
    expect(spec).toEqual({
      stack: 'acme/app/prod',
      projectRepo: 'https://git.example.com/acme/app.git',
      serviceAccountName: 'app-deployer',
      resyncFrequencySeconds: 3600,
      envRefs: {
        PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi', key: 'token' } },
        STAGE: { type: 'Literal', literal: { value: 'preview' } },
      },
      commit: 'a'.repeat(40),
      preview: true,
      workspaceReclaimPolicy: 'Retain',
    });
  });

  it('leaves out top-level zero values, which PKO drops when it writes the Stack back (a second generation, a second preview)', () => {
    const spec = previewSpec(
      base,
      prp({
        spec: { refresh: false, continueResyncOnCommitMatch: false, resyncFrequencySeconds: 0, targets: [] },
      }),
      'a'.repeat(40),
    );
    for (const k of [
      'refresh',
      'continueResyncOnCommitMatch',
      'resyncFrequencySeconds',
      'targets',
      'destroyOnFinalize',
    ])
      expect(k in spec, k).toBe(false);
    expect(spec).toMatchObject({ preview: true, commit: 'a'.repeat(40), stack: 'acme/app/prod' });
  });

  it("keeps the workspace (Retain) whatever the base Stack says, unless the overrides say otherwise: the change set is read from the workspace pod's log", () => {
    const deleting: Stack = { ...base, spec: { ...base.spec, workspaceReclaimPolicy: 'Delete' } };
    expect(previewSpec(deleting, prp(undefined), 'a'.repeat(40))['workspaceReclaimPolicy']).toBe('Retain');
    expect(
      previewSpec(base, prp({ spec: { workspaceReclaimPolicy: 'Delete' } }), 'a'.repeat(40))[
        'workspaceReclaimPolicy'
      ],
    ).toBe('Delete');
  });
});

describe('ownedBy', () => {
  const stack = (refs: NonNullable<Stack['metadata']['ownerReferences']>): Stack => ({
    ...base,
    metadata: { name: 'app-pr-7', ownerReferences: refs },
  });
  const ref = { apiVersion: 'notification.pko.dev/v1alpha1', kind: 'PullRequestPreview', name: 'previews' };
  it('needs the controller owner reference with the uid; labels or a plain owner reference are not enough', () => {
    expect(ownedBy(stack([{ ...ref, uid: 'prp-uid', controller: true }]), 'prp-uid')).toBe(true);
    expect(ownedBy(stack([{ ...ref, uid: 'prp-uid' }]), 'prp-uid')).toBe(false);
    expect(ownedBy(stack([{ ...ref, uid: 'other', controller: true }]), 'prp-uid')).toBe(false);
    expect(
      ownedBy(stack([{ ...ref, kind: 'Deployment', uid: 'prp-uid', controller: true }]), 'prp-uid'),
    ).toBe(false);
    expect(ownedBy(stack([{ ...ref, uid: '', controller: true }]), '')).toBe(false);
  });
});

// --- the CRD and the admission policy carry the same lists ---------------------------------------

interface Node {
  properties?: Record<string, Node>;
  additionalProperties?: Node;
  'x-kubernetes-validations'?: { rule: string }[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}
const crd = parse(
  readFileSync(new URL('../../crds/notification.pko.dev_pullrequestpreviews.yaml', import.meta.url), 'utf8'),
) as { spec: { versions: { schema: { openAPIV3Schema: Node } }[] } };
const overrides =
  crd.spec.versions[0]!.schema.openAPIV3Schema.properties!['spec']!.properties!['stackOverrides']!;
const policy = parse(
  readFileSync(new URL('../../config/admission/preview_overrides_policy.yaml', import.meta.url), 'utf8'),
) as {
  metadata: { name: string };
  spec: { variables: { name: string; expression: string }[]; validations: { expression: string }[] };
};
const binding = parse(
  readFileSync(new URL('../../config/admission/preview_overrides_binding.yaml', import.meta.url), 'utf8'),
) as { metadata: { name: string }; spec: { policyName: string; validationActions: string[] } };
const quoted = (s: string): string[] => [...s.matchAll(/'([^']*)'/g)].map((m) => m[1] ?? '');

describe('CRD and admission policy agree with src/preview/stack.ts', () => {
  it('the CRD declares exactly the overridable fields and keeps unknown ones for the policy to refuse', () => {
    const spec = overrides.properties!['spec']!;
    expect(Object.keys(spec.properties ?? {})).toEqual(Object.keys(OVERRIDABLE_SPEC_FIELDS));
    expect(spec['x-kubernetes-preserve-unknown-fields']).toBe(true);
  });

  it('the policy allows exactly the overridable fields and checks each of the Secret entries', () => {
    const allowed = policy.spec.variables.find((v) => v.name === 'allowed');
    expect(quoted(allowed?.expression ?? '')).toEqual(Object.keys(OVERRIDABLE_SPEC_FIELDS));
    const perSecret = policy.spec.validations.filter((v) => v.expression.includes(".resource('secrets')"));
    expect(perSecret).toHaveLength(MAX_SECRET_ENV_REFS);
    perSecret.forEach((v, i) => {
      expect(v.expression).toContain(`variables.sortedSecretKeys[${String(i)}]`);
    });
    const sorted = policy.spec.variables.find((v) => v.name === 'sortedSecretKeys')?.expression ?? '';
    expect(sorted).toContain(
      `[${Array.from({ length: MAX_SECRET_ENV_REFS }, (_, i) => String(i)).join(', ')}]`,
    );
    expect(
      policy.spec.validations.some(
        (v) => v.expression === `size(variables.secretKeys) <= ${String(MAX_SECRET_ENV_REFS)}`,
      ),
    ).toBe(true);
  });

  it('the policy allows reconcileBaseOnPush only to who may patch the base Stack', () => {
    const rule = policy.spec.validations.filter((v) => v.expression.includes('reconcileBaseOnPush'));
    expect(rule).toHaveLength(1);
    expect(rule[0]?.expression.replace(/\s+/g, '')).toContain(
      "authorizer.group('pulumi.com').resource('stacks').namespace(request.namespace).name(object.spec.stackRef.name).check('patch').allowed()",
    );
  });

  it('the CRD allows the same envRefs types and Secret count', () => {
    const entry = overrides.properties!['spec']!.properties!['envRefs']!;
    const typeRule = entry.additionalProperties!.properties!['type']!['x-kubernetes-validations']![0]!.rule;
    expect(quoted(typeRule)).toEqual([...OVERRIDABLE_ENV_REF_TYPES]);
    expect(entry['x-kubernetes-validations']![0]!.rule).toMatch(
      new RegExp(`<= ${String(MAX_SECRET_ENV_REFS)}$`),
    );
  });

  it('the CRD reserves the same label and annotation keys', () => {
    for (const kind of ['labels', 'annotations']) {
      const rule = overrides.properties![kind]!['x-kubernetes-validations']![0]!.rule;
      const pattern = new RegExp(quoted(rule)[0] ?? '');
      for (const key of [
        'pulumi.com/a',
        'auto.pulumi.com/a',
        'notification.pko.dev/a',
        'x.pulumi.com/a',
        'team',
        'example.com/a',
        'pulumi.com.example.org/a',
        'notpulumi.com/a',
      ]) {
        expect(pattern.test(key), `${kind} ${key}`).toBe(RESERVED_KEY.test(key));
      }
    }
  });

  it('the controller may read exactly that policy and binding, and the drift remediation one (config/rbac/role.yaml)', () => {
    const role = parse(readFileSync(new URL('../../config/rbac/role.yaml', import.meta.url), 'utf8')) as {
      rules: { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }[];
    };
    const rules = role.rules.filter((r) => r.apiGroups.includes('admissionregistration.k8s.io'));
    expect(rules).toEqual([
      {
        apiGroups: ['admissionregistration.k8s.io'],
        resources: ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'],
        resourceNames: [ADMISSION_POLICY_NAME, REMEDIATION_POLICY_NAME, ALERT_SOURCES_POLICY_NAME],
        verbs: ['get'],
      },
    ]);
  });

  it('the binding denies with the policy the controller looks up', () => {
    expect(policy.metadata.name).toBe(ADMISSION_POLICY_NAME);
    expect(binding.metadata.name).toBe(ADMISSION_POLICY_NAME);
    expect(binding.spec).toMatchObject({ policyName: ADMISSION_POLICY_NAME, validationActions: ['Deny'] });
  });
});
