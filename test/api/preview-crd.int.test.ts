/**
 * The PullRequestPreview CRD (crds/notification.pko.dev_pullrequestpreviews.yaml) on the real API
 * server: a complete object is stored with its defaults, invalid ones are refused with the
 * field named, the installed schema and printer columns are those of the file, and the short
 * name and category are served.
 */
import { readFileSync } from 'node:fs';
import {
  ApiException,
  ApiextensionsV1Api,
  CustomObjectsApi,
  loadAllYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { GROUP, VERSION, type PullRequestPreview } from '../../src/api/v1alpha1.ts';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';

let ns: string;
let custom: CustomObjectsApi;

beforeAll(async () => {
  ns = await createTestNamespace('api-preview');
  custom = kubeConfig().makeApiClient(CustomObjectsApi);
});

const create = (name: string, spec: unknown): Promise<PullRequestPreview> =>
  custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: 'pullrequestpreviews',
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'PullRequestPreview', metadata: { name }, spec },
  }) as Promise<PullRequestPreview>;

async function refused(name: string, spec: unknown): Promise<string> {
  try {
    await create(name, spec);
  } catch (err) {
    if (err instanceof ApiException) return (JSON.parse(String(err.body)) as { message: string }).message;
    throw err;
  }
  throw new Error(`${name} was accepted`);
}

const minimal = { stackRef: { name: 'app' }, providerRef: { name: 'gitea' } };

describe('PullRequestPreview CRD', () => {
  it('stores a minimal object with the defaults (interval 5m, maxPreviews 5, startTimeout 10m, forks off)', async () => {
    const got = await create('minimal', minimal);
    expect(got.spec).toEqual({
      ...minimal,
      interval: '5m',
      maxPreviews: 5,
      startTimeout: '10m',
      suspend: false,
    });
    const withTrust = await create('trust', { ...minimal, trust: {}, webhook: { secretRef: { name: 'h' } } });
    expect(withTrust.spec.trust).toEqual({ allowForks: false });
    expect(withTrust.spec.webhook).toEqual({ secretRef: { name: 'h' }, reconcileBaseOnPush: false });
  });

  it('keeps the allowed spec overrides as written', async () => {
    const got = await create('overrides', {
      ...minimal,
      stackOverrides: {
        spec: { resyncFrequencySeconds: 3600, envRefs: { A: { type: 'Literal', literal: { value: 'x' } } } },
      },
    });
    expect(got.spec.stackOverrides?.spec).toEqual({
      resyncFrequencySeconds: 3600,
      envRefs: { A: { type: 'Literal', literal: { value: 'x' } } },
    });
  });

  it.each<[string, unknown, RegExp]>([
    ['no-stack', { providerRef: { name: 'g' } }, /spec\.stackRef: Required value/],
    ['zero-max', { ...minimal, maxPreviews: 0 }, /spec\.maxPreviews: Invalid value: 0/],
    [
      'bad-assoc',
      { ...minimal, trust: { authorAssociations: ['ADMIN'] } },
      /spec\.trust\.authorAssociations\[0\]: Unsupported value: "ADMIN"/,
    ],
    ['bad-interval', { ...minimal, interval: 'soon' }, /spec\.interval in body should match/],
    ['bad-start', { ...minimal, startTimeout: 'later' }, /spec\.startTimeout in body should match/],
    [
      'bad-gate-op',
      { ...minimal, gate: { operations: ['same'] } },
      /spec\.gate\.operations\[0\]: Unsupported value: "same"/,
    ],
    ['empty-gate', { ...minimal, gate: { operations: [] } }, /spec\.gate\.operations: Invalid value/],
    [
      'long-glob',
      { ...minimal, gate: { operations: ['delete'], resourceTypes: ['x'.repeat(257)] } },
      /spec\.gate\.resourceTypes\[0\]: Too long/,
    ],
  ])('refuses %s', async (name, spec, message) => {
    expect(await refused(name, spec)).toMatch(message);
  });

  it('the installed CRD carries the schema and printer columns of the file; short name and category served', async () => {
    const [want] = loadAllYaml(
      readFileSync(
        new URL('../../crds/notification.pko.dev_pullrequestpreviews.yaml', import.meta.url),
        'utf8',
      ),
    ) as V1CustomResourceDefinition[];
    const got = await kubeConfig()
      .makeApiClient(ApiextensionsV1Api)
      .readCustomResourceDefinition({ name: 'pullrequestpreviews.notification.pko.dev' });
    expect(got.spec.versions.map((v) => v.schema?.openAPIV3Schema)).toEqual(
      want?.spec.versions.map((v) => v.schema?.openAPIV3Schema),
    );
    expect(got.spec.versions.map((v) => v.additionalPrinterColumns)).toEqual(
      want?.spec.versions.map((v) => v.additionalPrinterColumns),
    );
    const list = await custom.getAPIResources({ group: GROUP, version: VERSION });
    expect(list.resources.find((r) => r.name === 'pullrequestpreviews')).toMatchObject({
      kind: 'PullRequestPreview',
      namespaced: true,
      shortNames: ['pkopreview'],
      categories: ['pko-notification'],
    });
  });
});
