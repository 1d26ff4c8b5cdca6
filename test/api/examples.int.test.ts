/**
 * Every document of every file in examples/ is accepted by the real API server (server-side
 * dry run, so nothing is stored) and follows the example conventions: no namespace, fake secret
 * values only, each Alert points at a Provider of the same file.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { API_VERSION } from '../../src/api/v1alpha1.ts';
import { createTestNamespace, kubeConfig, parseManifests } from '../support/cluster.ts';

const DIR = new URL('../../examples/', import.meta.url);
const FILES = readdirSync(DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

interface Doc extends KubernetesObject {
  spec?: { providerRef?: { name?: string } };
  stringData?: Record<string, string>;
  data?: Record<string, string>;
}

function docsOf(file: string): Doc[] {
  return parseManifests(readFileSync(new URL(file, DIR), 'utf8'));
}

let api: KubernetesObjectApi;
let ns: string;

beforeAll(async () => {
  api = KubernetesObjectApi.makeApiClient(kubeConfig());
  ns = await createTestNamespace('api-examples');
});

describe('examples/', () => {
  it('holds the documented examples', () => {
    expect(FILES).toEqual(
      expect.arrayContaining([
        'generic-hmac.yaml',
        'generic-webhook.yaml',
        'github.yaml',
        'slack.yaml',
        'slack-routing.yaml',
        'msteams.yaml',
        'discord.yaml',
        'googlechat.yaml',
      ]),
    );
  });

  describe.each(FILES)('%s', (file) => {
    const docs = docsOf(file);

    it('has a Secret, a Provider and an Alert, without namespaces and with fake secret values', () => {
      expect(docs.map((d) => d.kind)).toEqual(expect.arrayContaining(['Secret', 'Provider', 'Alert']));
      for (const d of docs)
        expect(d.metadata?.namespace, `${d.kind ?? '?'} ${d.metadata?.name ?? '?'}`).toBeUndefined();
      for (const d of docs.filter((x) => x.kind === 'Secret')) {
        expect(d.data, 'use stringData in examples').toBeUndefined();
        for (const [key, value] of Object.entries(d.stringData ?? {}))
          expect(value, `${file} Secret key ${key}`).toContain('REPLACE_ME');
      }
      const providers = new Set(docs.filter((d) => d.kind === 'Provider').map((d) => d.metadata?.name));
      for (const a of docs.filter((d) => d.kind === 'Alert')) {
        expect(a.apiVersion).toBe(API_VERSION);
        expect(providers.has(a.spec?.providerRef?.name)).toBe(true);
      }
    });

    it('every document is accepted by the API server (dryRun=All)', async () => {
      for (const d of docs) {
        const obj: Doc = { ...d, metadata: Object.assign({}, d.metadata, { namespace: ns }) };
        const what = `${file}: ${d.kind ?? '?'} ${d.metadata?.name ?? '?'}`;
        const created = await api.create(obj, undefined, 'All').catch((err: unknown) => {
          throw new Error(`${what} rejected: ${err instanceof Error ? err.message : String(err)}`, {
            cause: err,
          });
        });
        expect(created.metadata?.name, what).toBe(d.metadata?.name);
      }
    });
  });
});
