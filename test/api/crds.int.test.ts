/**
 * Our Provider and Alert CRDs (crds/) on the real API server: valid objects of every type are
 * accepted and defaulted; invalid ones are rejected with HTTP 422 and a message that says what
 * to fix; the status subresource, short names and category are served.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  ApiException,
  ApiextensionsV1Api,
  CustomObjectsApi,
  loadAllYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import {
  GIT_PROVIDER_TYPES,
  GROUP,
  PROVIDER_TYPES,
  VERSION,
  type AlertSpec,
  type ProviderSpec,
  type ProviderType,
} from '../../src/api/v1alpha1.ts';
import type { Condition } from '../../src/api/meta.ts';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';

type Plural = 'providers' | 'alerts';
interface Stored<S> {
  metadata: { name: string; generation: number; resourceVersion: string };
  spec: S;
  status?: Record<string, unknown>;
}

let custom: CustomObjectsApi;
let ns: string;
let seq = 0;

beforeAll(async () => {
  custom = kubeConfig().makeApiClient(CustomObjectsApi);
  ns = await createTestNamespace('api-crds');
});

function body(plural: Plural, spec: unknown, name = `obj-${++seq}`): object {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: plural === 'providers' ? 'Provider' : 'Alert',
    metadata: { name },
    spec,
  };
}

async function create<S>(plural: Plural, spec: unknown, name?: string): Promise<Stored<S>> {
  return (await custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural,
    body: body(plural, spec, name),
  })) as Stored<S>;
}

async function read<S>(plural: Plural, name: string): Promise<Stored<S>> {
  return (await custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural,
    name,
  })) as Stored<S>;
}

/** Awaits a request that must fail; returns the HTTP status and the message of the returned Status. */
async function failure(request: Promise<unknown>, what: string): Promise<{ code: number; message: string }> {
  try {
    await request;
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const raw: unknown = err.body;
    const status = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { message?: string } | undefined;
    return { code: err.code, message: status?.message ?? '' };
  }
  throw new Error(`expected the API server to reject ${what}`);
}

/** Creates (dry run) and returns the HTTP status and the Status message of the rejection. */
function rejection(plural: Plural, spec: unknown): Promise<{ code: number; message: string }> {
  return failure(
    custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural,
      body: body(plural, spec),
      dryRun: 'All',
    }),
    `${plural} spec ${JSON.stringify(spec)}`,
  );
}

/** Replaces the status of `name` (dry run) with `status`; the request must fail. */
function statusRejection(
  plural: Plural,
  name: string,
  current: object,
  status: unknown,
): Promise<{ code: number; message: string }> {
  return failure(
    custom.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural,
      name,
      body: { ...current, status },
      dryRun: 'All',
    }),
    `${plural} status ${JSON.stringify(status)}`,
  );
}

const HOSTS: Record<ProviderType, string> = {
  github: 'https://github.com/acme/app',
  gitlab: 'https://gitlab.example.com/group/sub/app',
  gitea: 'https://gitea.example.com/acme/app',
  bitbucket: 'https://bitbucket.org/acme/app',
  bitbucketserver: 'https://bitbucket.example.com/scm/acme/app.git',
  azuredevops: 'https://dev.azure.com/acme/project/_git/app',
  slack: 'https://slack.com/api/chat.postMessage',
  msteams: 'https://acme.webhook.office.com/webhookb2/0000@0000/IncomingWebhook/REPLACE_ME/0000',
  discord: 'https://discord.com/api/webhooks/0/REPLACE_ME',
  googlechat: 'https://chat.googleapis.com/v1/spaces/AAAA/messages',
  generic: 'https://hooks.example.com/pko',
  'generic-hmac': 'http://receiver.example.com:8080/events?x=1',
};

function validProvider(type: ProviderType): ProviderSpec {
  const git = (GIT_PROVIDER_TYPES as readonly string[]).includes(type);
  const chat = ['slack', 'msteams', 'discord', 'googlechat'].includes(type);
  return {
    type,
    address: HOSTS[type],
    secretRef: { name: 'creds' },
    certSecretRef: { name: 'ca' },
    proxySecretRef: { name: 'proxy' },
    ...(git
      ? {
          apiURL: 'https://api.example.com/v3',
          commitStatus: { context: 'pulumi/{{stack}}' },
          pullRequestComment: {},
        }
      : {}),
    ...(chat ? { channel: 'infra', username: 'pulumi-operator' } : {}),
    ...(type === 'slack' ? { threading: 'update' } : type === 'googlechat' ? { threading: 'none' } : {}),
  };
}

describe('valid objects are accepted and defaulted', () => {
  it.each([...PROVIDER_TYPES])('Provider type %s', async (type) => {
    const p = await create<ProviderSpec>('providers', validProvider(type));
    expect(p.spec).toEqual({
      ...validProvider(type),
      timeout: '15s',
      ...((GIT_PROVIDER_TYPES as readonly string[]).includes(type)
        ? { pullRequestComment: { enabled: true } }
        : {}),
    });
  });

  it.each([
    ['github', 'git@github.com:acme/app.git'],
    ['gitlab', 'ssh://git@gitlab.example.com:2222/group/app.git'],
    ['azuredevops', 'git@ssh.dev.azure.com:v3/acme/project/app'],
    ['github', 'https://github.com/acme'],
    ['gitea', 'http://gitea.local:3000/acme/app'],
  ] as const)('git forge %s with address %s', async (type, address) => {
    const p = await create<ProviderSpec>('providers', { type, address, timeout: '1m30s' });
    expect(p.spec).toEqual({ type, address, timeout: '1m30s' });
  });

  it('a minimal Provider (address in the Secret) gets timeout 15s', async () => {
    const p = await create<ProviderSpec>('providers', { type: 'generic', secretRef: { name: 'hook' } });
    expect(p.spec).toEqual({ type: 'generic', secretRef: { name: 'hook' }, timeout: '15s' });
  });

  it('an Alert gets eventSeverity info and source name *', async () => {
    const a = await create<AlertSpec>('alerts', {
      providerRef: { name: 'github' },
      eventSources: [
        { kind: 'Stack' },
        { kind: 'Update', name: 'app-*', namespace: '*', matchLabels: { 'pulumi.com/component': 'stack' } },
      ],
    });
    expect(a.spec).toEqual({
      providerRef: { name: 'github' },
      eventSeverity: 'info',
      eventSources: [
        { kind: 'Stack', name: '*' },
        { kind: 'Update', name: 'app-*', namespace: '*', matchLabels: { 'pulumi.com/component': 'stack' } },
      ],
    });
  });

  it('an Alert with every field is stored as written', async () => {
    const spec: AlertSpec = {
      providerRef: { name: 'slack' },
      eventSources: [{ kind: 'Stack', name: 'prod-*', namespace: 'team-a' }],
      eventSeverity: 'error',
      eventReasons: ['UpdateFailed', 'DestroyFailed', 'StackStalled'],
      inclusionList: ['^up failed', '(?i)timeout'],
      exclusionList: ['canceled'],
      eventMetadata: { cluster: 'prod-eu', team: 'platform' },
      templateRef: { name: 'templates' },
      suspend: true,
    };
    const a = await create<AlertSpec>('alerts', spec);
    expect(a.spec).toEqual(spec);
  });
});

describe('invalid objects are rejected with 422 and a message that says what to fix', () => {
  const gh = { type: 'github', address: 'https://github.com/acme/app' };
  const alert = { providerRef: { name: 'p' }, eventSources: [{ kind: 'Stack' }] };

  it.each<[string, Plural, unknown, RegExp[]]>([
    [
      'unknown provider type',
      'providers',
      { type: 'teams' },
      [/spec\.type: Unsupported value: "teams"/, /supported values: "github", .*"generic-hmac"/],
    ],
    [
      'missing provider type',
      'providers',
      { address: 'https://x.example.com' },
      [/spec\.type: Required value/],
    ],
    [
      'commitStatus on slack',
      'providers',
      { type: 'slack', commitStatus: { context: 'x' } },
      [
        /spec\.commitStatus: Forbidden/,
        /only used by git forge providers \(github, gitlab, gitea, bitbucket, bitbucketserver, azuredevops\)/,
        /remove it from this slack provider/,
      ],
    ],
    [
      'pullRequestComment on generic',
      'providers',
      { type: 'generic', pullRequestComment: { enabled: false } },
      [/spec\.pullRequestComment: Forbidden/, /remove it from this generic provider/],
    ],
    [
      'apiURL on discord',
      'providers',
      { type: 'discord', apiURL: 'https://discord.com/api' },
      [/spec\.apiURL: Forbidden/, /only used by git forge providers/, /remove it from this discord provider/],
    ],
    [
      'channel on github',
      'providers',
      { ...gh, channel: 'general' },
      [
        /spec\.channel: Forbidden/,
        /only used by chat providers \(slack, msteams, discord, googlechat\)/,
        /remove it from this github provider/,
      ],
    ],
    [
      'channel on generic',
      'providers',
      { type: 'generic', channel: 'general' },
      [/spec\.channel: Forbidden/, /remove it from this generic provider/],
    ],
    [
      'threading on discord',
      'providers',
      { type: 'discord', threading: 'thread' },
      [
        /spec\.threading: Forbidden/,
        /only used by slack and googlechat providers/,
        /remove it from this discord provider/,
      ],
    ],
    [
      'threading update on googlechat',
      'providers',
      { type: 'googlechat', threading: 'update' },
      [/spec\.threading: Invalid value/, /only slack \(bot token\) can do/],
    ],
    [
      'threading not in the enum',
      'providers',
      { type: 'slack', threading: 'reply' },
      [/spec\.threading: Unsupported value: "reply"/],
    ],
    [
      'username on generic',
      'providers',
      { type: 'generic', username: 'bot' },
      [/spec\.username: Forbidden/, /not used by generic webhooks/],
    ],
    [
      'timeout without unit',
      'providers',
      { type: 'generic', timeout: '15' },
      [/spec\.timeout: Invalid value: "15"/, /should match/],
    ],
    [
      'timeout in days',
      'providers',
      { type: 'generic', timeout: '1d' },
      [/spec\.timeout: Invalid value: "1d"/],
    ],
    [
      'timeout as a number',
      'providers',
      { type: 'generic', timeout: 15 },
      [/spec\.timeout: .*must be of type string/],
    ],
    [
      'non-http address on a webhook',
      'providers',
      { type: 'generic', address: 'ftp://files.example.com/hook' },
      [/spec\.address: Invalid value/, /must be an http:\/\/ or https:\/\/ URL/],
    ],
    [
      'address with credentials',
      'providers',
      { type: 'generic-hmac', address: 'https://user:REPLACE_ME@hooks.example.com/x' },
      [/spec\.address: Invalid value/, /without\s+credentials/, /Secret named by spec\.secretRef/],
    ],
    [
      'address without scheme on slack',
      'providers',
      { type: 'slack', address: 'hooks.slack.com/services/x' },
      [/must be an http:\/\/ or https:\/\/ URL/],
    ],
    [
      'non-URL address on a git forge',
      'providers',
      { type: 'github', address: 'github.com/acme/app' },
      [
        /spec\.address: Invalid value/,
        /git forge provider must be the repository or owner URL/,
        /git@host:owner\/repo/,
      ],
    ],
    [
      'token in a git forge address',
      'providers',
      { type: 'gitlab', address: 'https://oauth2:REPLACE_ME@gitlab.com/a/b' },
      [/git forge provider must be the repository or owner URL\s+without credentials/],
    ],
    [
      'bad secretRef name',
      'providers',
      { type: 'generic', secretRef: { name: 'Not_A_Name' } },
      [/spec\.secretRef\.name: Invalid value: "Not_A_Name"/],
    ],
    [
      'address too long',
      'providers',
      { type: 'generic', address: `https://x.example.com/${'a'.repeat(2100)}` },
      [/spec\.address: Too long/],
    ],
    [
      'empty eventSources',
      'alerts',
      { providerRef: { name: 'p' }, eventSources: [] },
      [/spec\.eventSources: Required value: spec\.eventSources must list at least one source/],
    ],
    [
      'missing eventSources',
      'alerts',
      { providerRef: { name: 'p' } },
      [/spec\.eventSources: Required value/],
    ],
    [
      'missing providerRef',
      'alerts',
      { eventSources: [{ kind: 'Stack' }] },
      [/spec\.providerRef: Required value/],
    ],
    [
      'unknown source kind',
      'alerts',
      { ...alert, eventSources: [{ kind: 'Workspace' }] },
      [/spec\.eventSources\[0\]\.kind: Unsupported value: "Workspace": supported values: "Stack", "Update"/],
    ],
    [
      'unknown eventReason',
      'alerts',
      { ...alert, eventReasons: ['UpdateFailed', 'Deployed'] },
      [
        /spec\.eventReasons\[1\]: Unsupported value: "Deployed"/,
        /supported values: "PreviewStarted", .*"StackStalled"/,
      ],
    ],
    [
      'duplicate eventReason',
      'alerts',
      { ...alert, eventReasons: ['UpdateFailed', 'UpdateFailed'] },
      [/spec\.eventReasons\[1\]: Duplicate value: "UpdateFailed"/],
    ],
    [
      'unknown severity',
      'alerts',
      { ...alert, eventSeverity: 'warning' },
      [/spec\.eventSeverity: Unsupported value: "warning": supported values: "info", "error"/],
    ],
    [
      'empty inclusionList entry',
      'alerts',
      { ...alert, inclusionList: ['ok', ''] },
      [
        /spec\.inclusionList: Invalid value/,
        /must be non-empty RE2 regular expressions/,
        /remove the empty entry/,
      ],
    ],
    [
      'blank exclusionList entry',
      'alerts',
      { ...alert, exclusionList: ['  '] },
      [/spec\.exclusionList: Invalid value/, /must be non-empty RE2 regular expressions/],
    ],
    [
      'bad source namespace',
      'alerts',
      { ...alert, eventSources: [{ kind: 'Stack', namespace: 'Team_A' }] },
      [/spec\.eventSources\[0\]\.namespace: Invalid value: "Team_A"/],
    ],
    [
      'empty source name',
      'alerts',
      { ...alert, eventSources: [{ kind: 'Stack', name: '' }] },
      [/spec\.eventSources\[0\]\.name: Invalid value: ""/],
    ],
  ])('%s', async (_what, plural, spec, patterns) => {
    const { code, message } = await rejection(plural, spec);
    expect(code).toBe(422);
    for (const p of patterns) expect(message).toMatch(p);
  });

  it('never echoes a rejected address (it may embed a secret) in the message', async () => {
    const secretish = 'https://user:S3CR3T-REPLACE_ME@hooks.example.com/T000/B000/XXXX';
    const { code, message } = await rejection('providers', { type: 'slack', address: secretish });
    expect(code).toBe(422);
    expect(message).not.toContain('S3CR3T');
  });
});

describe('status subresource', () => {
  const condition: Condition = {
    type: 'Ready',
    status: 'True',
    reason: 'Succeeded',
    message: 'Provider is ready',
    lastTransitionTime: '2026-08-20T11:02:40Z',
    observedGeneration: 1,
  };

  it('PUT /status writes status and leaves spec and generation alone; spec writes ignore status', async () => {
    const created = await create<ProviderSpec>(
      'providers',
      { type: 'generic', address: 'https://hooks.example.com/a' },
      'status-sub',
    );
    const withStatus = (await custom.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'providers',
      name: 'status-sub',
      body: {
        ...created,
        spec: { type: 'slack' },
        status: { observedGeneration: 1, conditions: [condition] },
      },
    })) as Stored<ProviderSpec>;
    expect(withStatus.status).toEqual({ observedGeneration: 1, conditions: [condition] });
    expect(withStatus.spec).toEqual(created.spec);
    expect(withStatus.metadata.generation).toBe(created.metadata.generation);

    const specChanged = (await custom.replaceNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'providers',
      name: 'status-sub',
      body: {
        ...withStatus,
        spec: { ...withStatus.spec, timeout: '30s' },
        status: { observedGeneration: 99, conditions: [] },
      },
    })) as Stored<ProviderSpec>;
    expect(specChanged.spec.timeout).toBe('30s');
    expect(specChanged.metadata.generation).toBe(created.metadata.generation + 1);
    expect((await read<ProviderSpec>('providers', 'status-sub')).status).toEqual({
      observedGeneration: 1,
      conditions: [condition],
    });
  });

  it('Alert status carries lastDelivery entries and validates them', async () => {
    const created = await create<AlertSpec>(
      'alerts',
      { providerRef: { name: 'p' }, eventSources: [{ kind: 'Stack' }] },
      'alert-status',
    );
    const status = {
      observedGeneration: 1,
      conditions: [condition],
      lastDelivery: [
        { provider: 'p', lastAttemptTime: '2026-08-20T11:03:00Z', result: 'Delivered' },
        {
          provider: 'old',
          lastAttemptTime: '2026-08-20T11:00:00Z',
          result: 'Failed',
          reason: 'HTTPError',
          message: 'POST returned 500',
        },
      ],
    };
    const written = (await custom.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'alerts',
      name: 'alert-status',
      body: { ...created, status },
    })) as Stored<AlertSpec>;
    expect(written.status).toEqual(status);

    const bad = await statusRejection('alerts', 'alert-status', written, {
      ...status,
      lastDelivery: [{ provider: 'p', lastAttemptTime: 'yesterday', result: 'Sent' }],
    });
    expect(bad.code).toBe(422);
    expect(bad.message).toMatch(
      /status\.lastDelivery\[0\]\.result: Unsupported value: "Sent": supported values: "Delivered", "Skipped", "Failed"/,
    );
    expect(bad.message).toMatch(/status\.lastDelivery\[0\]\.lastAttemptTime: Invalid value: "yesterday"/);

    const dup = await statusRejection('alerts', 'alert-status', written, {
      ...status,
      lastDelivery: [status.lastDelivery[0], status.lastDelivery[0]],
    });
    expect(dup.code).toBe(422);
    expect(dup.message).toMatch(/status\.lastDelivery\[1\]: Duplicate value/);

    const long = await statusRejection('alerts', 'alert-status', written, {
      ...status,
      lastDelivery: [
        {
          provider: 'p',
          lastAttemptTime: '2026-08-20T11:03:00Z',
          result: 'Failed',
          message: 'x'.repeat(1025),
        },
      ],
    });
    expect(long.code).toBe(422);
    expect(long.message).toMatch(/status\.lastDelivery\[0\]\.message: Too long/);
  });

  it('conditions must have the metav1.Condition shape', async () => {
    const created = await create<ProviderSpec>('providers', { type: 'generic' }, 'bad-condition');
    const err = await statusRejection('providers', 'bad-condition', created, {
      conditions: [{ type: 'Ready', status: 'Yes' }],
    });
    expect(err.code).toBe(422);
    expect(err.message).toMatch(/status\.conditions\[0\]\.status: Unsupported value: "Yes"/);
    expect(err.message).toMatch(/status\.conditions\[0\]\.reason: Required value/);
    expect(err.message).toMatch(/status\.conditions\[0\]\.lastTransitionTime: Required value/);
  });
});

describe('installation', () => {
  it.each(['notification.pko.dev_providers.yaml', 'notification.pko.dev_alerts.yaml'])(
    'the installed CRD carries the whole schema of crds/%s (enums, defaults, CEL rules, list types)',
    async (file) => {
      const [want] = loadAllYaml(
        readFileSync(new URL(`../../crds/${file}`, import.meta.url), 'utf8'),
      ) as V1CustomResourceDefinition[];
      if (!want) throw new Error(`${file} holds no CRD`);
      const got = await kubeConfig()
        .makeApiClient(ApiextensionsV1Api)
        .readCustomResourceDefinition({ name: want.metadata?.name ?? '' });
      expect(got.spec.versions.map((v) => v.schema?.openAPIV3Schema)).toEqual(
        want.spec.versions.map((v) => v.schema?.openAPIV3Schema),
      );
      expect(got.spec.versions.map((v) => v.additionalPrinterColumns)).toEqual(
        want.spec.versions.map((v) => v.additionalPrinterColumns),
      );
    },
  );
});

describe('discovery', () => {
  it('serves short names and the pko-notification category (not "all")', async () => {
    const list = await custom.getAPIResources({ group: GROUP, version: VERSION });
    const byName = new Map(list.resources.map((r) => [r.name, r]));
    expect(byName.get('providers')).toMatchObject({
      kind: 'Provider',
      namespaced: true,
      shortNames: ['pkoprovider', 'pkoprov'],
      categories: ['pko-notification'],
    });
    expect(byName.get('alerts')).toMatchObject({
      kind: 'Alert',
      namespaced: true,
      shortNames: ['pkoalert'],
      categories: ['pko-notification'],
    });
    expect(byName.has('providers/status')).toBe(true);
    expect(byName.has('alerts/status')).toBe(true);
  });
});
