/**
 * Keeps the CRD YAMLs in `crds/` and the value lists of `src/api/v1alpha1.ts` equal, and checks
 * the schema conventions the API server does not enforce (a description on every field, bounds
 * on strings and arrays used by CEL rules).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  AUTHOR_ASSOCIATIONS,
  DELIVERY_RESULTS,
  DRIFT_RESULTS,
  EVENT_REASONS,
  GIT_PROVIDER_TYPES,
  GROUP,
  MESSAGE_PROVIDER_TYPES,
  PREVIEW_STATES,
  PROVIDER_TYPES,
  SEVERITIES,
  SOURCE_KINDS,
  THREADING_MODES,
  THREADING_PROVIDER_TYPES,
  VERSION,
} from '../../src/api/v1alpha1.ts';
import { HTTP_URL_PATTERN, SSH_URL_PATTERN } from '../../src/api/url.ts';
import { GATE_OPERATIONS, MAX_GATE_TYPE_CHARS, MAX_GATE_TYPES } from '../../src/api/gate.ts';

interface Schema {
  type?: string;
  description?: string;
  enum?: unknown[];
  default?: unknown;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  maxLength?: number;
  maxItems?: number;
  pattern?: string;
  'x-kubernetes-validations'?: { rule: string; message?: string; messageExpression?: string }[];
}

interface Crd {
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string; shortNames?: string[]; categories?: string[] };
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: { status?: object };
      additionalPrinterColumns?: { name: string; jsonPath: string }[];
      schema: { openAPIV3Schema: Schema };
    }[];
  };
}

function loadCrd(file: string): Crd {
  return parse(readFileSync(new URL(`../../crds/${file}`, import.meta.url), 'utf8')) as Crd;
}

function rootSchema(crd: Crd): Schema {
  const v = crd.spec.versions[0];
  if (!v) throw new Error(`${crd.metadata.name} has no versions`);
  return v.schema.openAPIV3Schema;
}

/** Follows a dotted path of property names (`[]` steps into array items). */
function at(schema: Schema, path: string): Schema {
  let cur: Schema | undefined = schema;
  for (const step of path.split('.')) {
    cur = step === '[]' ? cur.items : cur.properties?.[step];
    if (!cur) throw new Error(`no schema at ${path} (step ${step})`);
  }
  return cur;
}

/** Every (path, schema) pair of the tree, properties, items and additionalProperties included. */
function walk(schema: Schema, path = ''): [string, Schema][] {
  const out: [string, Schema][] = [[path || '<root>', schema]];
  for (const [k, v] of Object.entries(schema.properties ?? {})) out.push(...walk(v, `${path}.${k}`));
  if (schema.items) out.push(...walk(schema.items, `${path}[]`));
  if (typeof schema.additionalProperties === 'object')
    out.push(...walk(schema.additionalProperties, `${path}{}`));
  return out;
}

/** All CEL list literals that follow `self.type in` in the rules of a schema node. */
function typeLists(schema: Schema): string[][] {
  const lists: string[][] = [];
  for (const v of schema['x-kubernetes-validations'] ?? []) {
    for (const m of v.rule.matchAll(/self\.type in \[([^\]]*)\]/g)) {
      lists.push([...(m[1] ?? '').matchAll(/'([^']*)'/g)].map((x) => x[1] ?? ''));
    }
  }
  return lists;
}

const provider = loadCrd('notification.pko.dev_providers.yaml');
const alert = loadCrd('notification.pko.dev_alerts.yaml');
const preview = loadCrd('notification.pko.dev_pullrequestpreviews.yaml');
const drift = loadCrd('notification.pko.dev_driftdetections.yaml');

describe.each([
  ['Provider', provider],
  ['Alert', alert],
  ['PullRequestPreview', preview],
  ['DriftDetection', drift],
])('%s CRD conventions', (kind, crd) => {
  it('is namespaced v1alpha1 in our group, with status subresource, category and short name', () => {
    expect(crd.spec.group).toBe(GROUP);
    expect(crd.spec.scope).toBe('Namespaced');
    expect(crd.spec.names.kind).toBe(kind);
    expect(crd.metadata.name).toBe(`${crd.spec.names.plural}.${GROUP}`);
    expect(crd.spec.versions).toHaveLength(1);
    const v = crd.spec.versions[0]!;
    expect(v).toMatchObject({ name: VERSION, served: true, storage: true });
    expect(v.subresources?.status).toEqual({});
    expect(crd.spec.names.categories).toEqual(['pko-notification']);
    expect(crd.spec.names.categories).not.toContain('all');
    // Flux's notification-controller owns no short names, but never take the bare kind names.
    expect(crd.spec.names.shortNames?.every((s) => s.startsWith('pko'))).toBe(true);
    const ready = v.additionalPrinterColumns?.find((c) => c.name === 'Ready');
    expect(ready?.jsonPath).toBe('.status.conditions[?(@.type=="Ready")].status');
    expect(v.additionalPrinterColumns?.map((c) => c.name)).toContain('Age');
  });

  it('has a description on every field', () => {
    const missing = walk(rootSchema(crd))
      .filter(([, s]) => !s.description)
      .map(([p]) => p)
      // map values are described by their map; the API server forbids anything but `type` on metadata
      .filter((p) => !p.endsWith('{}') && p !== '.metadata');
    expect(missing).toEqual([]);
  });

  it('bounds every string and array in spec (keeps CEL cost estimates finite)', () => {
    const unbounded = walk(at(rootSchema(crd), 'spec'), 'spec')
      .filter(
        ([, s]) =>
          (s.type === 'string' && s.enum === undefined && s.maxLength === undefined) ||
          (s.type === 'array' && s.maxItems === undefined),
      )
      .map(([p]) => p);
    expect(unbounded).toEqual([]);
  });
});

describe('Provider CRD matches src/api/v1alpha1.ts', () => {
  const spec = at(rootSchema(provider), 'spec');

  it('spec.type enum equals PROVIDER_TYPES (same order)', () => {
    expect(at(spec, 'type').enum).toEqual([...PROVIDER_TYPES]);
  });

  it('every "self.type in [...]" list is exactly the git forges, the chat services or the threading types', () => {
    const lists = typeLists(spec);
    const git = [...GIT_PROVIDER_TYPES];
    const chat = MESSAGE_PROVIDER_TYPES.filter((t) => t !== 'generic' && t !== 'generic-hmac');
    const threading = [...THREADING_PROVIDER_TYPES];
    expect(lists.length).toBeGreaterThanOrEqual(6);
    for (const list of lists) {
      expect([git, chat, threading]).toContainEqual(list);
    }
    const threadingRule = (spec['x-kubernetes-validations'] ?? []).find((r) =>
      r.rule.startsWith('!has(self.threading) || self.type in'),
    );
    expect(typeLists({ 'x-kubernetes-validations': [threadingRule!] })).toEqual([threading]);
    // commitStatus, pullRequestComment and apiURL rules use the git list; channel the chat list.
    const rules = spec['x-kubernetes-validations'] ?? [];
    for (const field of ['commitStatus', 'pullRequestComment', 'apiURL']) {
      const rule = rules.find((r) => r.rule.startsWith(`!has(self.${field})`));
      expect(rule, field).toBeDefined();
      expect(typeLists({ 'x-kubernetes-validations': [rule!] })).toEqual([git]);
    }
    const channel = rules.find((r) => r.rule.startsWith('!has(self.channel)'));
    expect(typeLists({ 'x-kubernetes-validations': [channel!] })).toEqual([chat]);
  });

  it('URL patterns are src/api/url.ts (one truth for validity): apiURL pattern, address CEL rules', () => {
    expect(at(spec, 'apiURL').pattern).toBe(HTTP_URL_PATTERN);
    const rules = (spec['x-kubernetes-validations'] ?? []).map((r) => r.rule);
    expect(rules.some((r) => r.includes(`self.address.matches(r'${HTTP_URL_PATTERN}')`))).toBe(true);
    expect(rules.some((r) => r.includes(`self.address.matches(r'${SSH_URL_PATTERN}')`))).toBe(true);
  });

  it('timeout defaults to 15s and is a Go duration', () => {
    const timeout = at(spec, 'timeout');
    expect(timeout.default).toBe('15s');
    const re = new RegExp(timeout.pattern!);
    for (const ok of ['15s', '500ms', '1m30s', '1.5h', '2h45m']) expect(re.test(ok), ok).toBe(true);
    for (const bad of ['15', 's', '10 s', '1d', '-5s', '']) expect(re.test(bad), bad).toBe(false);
  });

  it('spec.threading enum equals THREADING_MODES', () => {
    expect(at(spec, 'threading').enum).toEqual([...THREADING_MODES]);
  });

  it('spec properties equal the ProviderSpec fields', () => {
    expect(Object.keys(spec.properties ?? {}).sort()).toEqual(
      [
        'type',
        'address',
        'apiURL',
        'channel',
        'username',
        'threading',
        'secretRef',
        'certSecretRef',
        'proxySecretRef',
        'timeout',
        'commitStatus',
        'pullRequestComment',
        'suspend',
      ].sort(),
    );
  });
});

describe('Alert CRD matches src/api/v1alpha1.ts', () => {
  const spec = at(rootSchema(alert), 'spec');

  it('enums equal SEVERITIES, SOURCE_KINDS and EVENT_REASONS', () => {
    expect(at(spec, 'eventSeverity').enum).toEqual([...SEVERITIES]);
    expect(at(spec, 'eventSeverity').default).toBe('info');
    expect(at(spec, 'eventSources.[].kind').enum).toEqual([...SOURCE_KINDS]);
    expect(at(spec, 'eventSources.[].name').default).toBe('*');
    expect(at(spec, 'eventReasons.[]').enum).toEqual([...EVENT_REASONS]);
    expect(at(spec, 'eventReasons').maxItems).toBe(EVENT_REASONS.length);
  });

  it('spec properties equal the AlertSpec fields', () => {
    expect(Object.keys(spec.properties ?? {}).sort()).toEqual(
      [
        'providerRef',
        'eventSources',
        'eventSeverity',
        'eventReasons',
        'inclusionList',
        'exclusionList',
        'eventMetadata',
        'templateRef',
        'suspend',
      ].sort(),
    );
    expect(Object.keys(at(spec, 'eventSources.[]').properties ?? {}).sort()).toEqual([
      'kind',
      'matchLabels',
      'name',
      'namespace',
    ]);
  });

  it('lastDelivery result enum equals DeliveryOutcome.result', () => {
    const item = at(rootSchema(alert), 'status.lastDelivery.[]');
    expect(at(item, 'result').enum).toEqual([...DELIVERY_RESULTS]);
    expect(Object.keys(item.properties ?? {}).sort()).toEqual([
      'attempts',
      'event',
      'lastAttemptTime',
      'message',
      'nextAttemptTime',
      'provider',
      'reason',
      'result',
    ]);
    expect(at(item, 'message').maxLength).toBe(1024);
  });
});

describe('PullRequestPreview CRD matches src/api/v1alpha1.ts', () => {
  const spec = at(rootSchema(preview), 'spec');
  it('author associations are the same list', () => {
    expect(at(spec, 'trust.authorAssociations.[]').enum).toEqual([...AUTHOR_ASSOCIATIONS]);
  });
  it('defaults: interval 5m, maxPreviews 5, forks off, base-push reconcile off, not suspended', () => {
    expect(at(spec, 'interval').default).toBe('5m');
    expect(at(spec, 'maxPreviews').default).toBe(5);
    expect(at(spec, 'trust.allowForks').default).toBe(false);
    expect(at(spec, 'webhook.reconcileBaseOnPush').default).toBe(false);
    expect(at(spec, 'suspend').default).toBe(false);
    expect(at(spec, 'startTimeout').default).toBe('10m');
  });
  it('gate: operations are GATE_OPERATIONS, resource type globs bounded like checkGate', () => {
    expect(at(spec, 'gate.operations.[]').enum).toEqual([...GATE_OPERATIONS]);
    expect(at(spec, 'gate.operations').maxItems).toBe(GATE_OPERATIONS.length);
    expect(at(spec, 'gate.resourceTypes').maxItems).toBe(MAX_GATE_TYPES);
    expect(at(spec, 'gate.resourceTypes.[]').maxLength).toBe(MAX_GATE_TYPE_CHARS);
  });
  it('status previews states are the PreviewEntry states', () => {
    expect(at(rootSchema(preview), 'status.previews.[].state').enum).toEqual([...PREVIEW_STATES]);
  });
});

describe('DriftDetection CRD matches src/api/v1alpha1.ts and src/drift/plan.ts', () => {
  const spec = at(rootSchema(drift), 'spec');
  it('defaults: interval 1h, no remediation, not suspended', () => {
    expect(at(spec, 'interval').default).toBe('1h');
    expect(at(spec, 'remediate').default).toBe(false);
    expect(at(spec, 'suspend').default).toBe(false);
  });
  it('refuses an interval under 10m with a CEL rule (the floor of src/drift/plan.ts)', () => {
    const rules = at(spec, 'interval')['x-kubernetes-validations'] ?? [];
    expect(rules.map((r) => r.rule)).toContain("duration(self) >= duration('10m')");
  });
  it('status results are DRIFT_RESULTS; event reasons are the Drift* EVENT_REASONS', () => {
    const status = at(rootSchema(drift), 'status');
    expect(at(status, 'stacks.[].result').enum).toEqual([...DRIFT_RESULTS]);
    expect(at(status, 'stacks.[].lastEvent.reason').enum).toEqual(
      EVENT_REASONS.filter((r) => r.startsWith('Drift')),
    );
  });
});
