/**
 * One truth for validity: generated addresses, URLs, durations and names go through the real API
 * server (our CRDs' OpenAPI patterns and CEL rules, server-side dry run) and through the
 * controller's own parsers (`resolveProvider`, `compileAlert`), and both must give the same
 * verdict — a value the API server admits must work, and a value the controller cannot use must
 * be refused at `kubectl apply`. fast-check with a fixed seed; a disagreement is shrunk to the
 * smallest value and printed.
 */
import { ApiException, CustomObjectsApi } from '@kubernetes/client-node';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { compileAlert } from '../../src/alert/compile.ts';
import { API_VERSION, GROUP, VERSION, type Alert, type Provider } from '../../src/api/v1alpha1.ts';
import { resolveProvider } from '../../src/credential/provider.ts';
import { parseRaw } from '../../src/forge/url.ts';
import { createTestNamespace, kubeConfig } from '../support/cluster.ts';

const SEED = 20260501;
const RUNS = 250;

let custom: CustomObjectsApi;
let ns: string;

beforeAll(async () => {
  custom = kubeConfig().makeApiClient(CustomObjectsApi);
  ns = await createTestNamespace('validity');
});

/** Whether the API server admits the object (server-side dry run: nothing is stored). */
async function admitted(plural: 'providers' | 'alerts', spec: object): Promise<boolean> {
  try {
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural,
      dryRun: 'All',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: plural === 'providers' ? 'Provider' : 'Alert',
        metadata: { name: 'probe' },
        spec,
      },
    });
    return true;
  } catch (err) {
    if (err instanceof ApiException && err.code === 422) return false;
    throw err;
  }
}

/** Whether the controller can use the Provider (its Secret holds a token). */
async function usable(spec: Provider['spec']): Promise<boolean> {
  const p: Provider = {
    apiVersion: API_VERSION,
    kind: 'Provider',
    metadata: { name: 'probe', namespace: ns },
    spec,
  };
  const r = await resolveProvider(p, () => Promise.resolve({ token: 'probe-token' }));
  return r.ok;
}

/** Strings shaped like URLs, valid and not: the parts people and tools get wrong. */
const urlish = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.constantFrom(
          'https://',
          'http://',
          'HTTPS://',
          'hTtP://',
          'SSH://',
          'ftp://',
          'https:/',
          'https:///',
          '',
          'ssh://',
          'git@',
        ),
        fc.constantFrom('', '', '', 'user@', 'u:p@'),
        fc.oneof(
          fc.constantFrom(
            'github.com',
            'a.b.c',
            'localhost',
            '1.2.3.4',
            '255.255.255.255',
            '999.1.1.1',
            '1.2.3.4.5',
            'a.1',
            'a_b.com',
            '-a.com',
            'a-.com',
            'a..com',
            '[::1]',
            '[::1',
            '[:::]',
            '[fe80::1]',
            '[::ffff:1.2.3.4]',
            'xn--a.com',
            'xn--nxasmq6b.com',
            'XN--A.com',
            'é.com',
            'a%41.com',
            'example.com.',
            '',
            '0x7f.0.0.1',
          ),
          fc.stringMatching(/^[a-z0-9][a-z0-9.-]{0,10}[a-z]$/),
        ),
        fc.constantFrom('', '', ':', ':0', ':80', ':65535', ':65536', ':99999', ':8a', ':00443'),
        fc.constantFrom(
          '',
          '/',
          '/api/v3',
          '/a b',
          '/x?y=1#z',
          '?q',
          '#f',
          '/%zz',
          '\\x',
          ':owner/repo',
          '/owner/repo.git',
          '/é',
        ),
      )
      .map((p) => p.join('')),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
);

/** `s` with each ASCII letter upper- or lower-cased as `flips` says (bit i: letter i upper). */
function recase(s: string, flips: number): string {
  let i = 0;
  return s.replace(/[a-z]/gi, (c) => ((flips >> i++) & 1 ? c.toUpperCase() : c.toLowerCase()));
}

/** Valid addresses whose scheme (and host) are written in generated mixes of case. */
const caseVariants = fc
  .tuple(
    fc.constantFrom('https://', 'http://', 'ssh://git@'),
    fc.integer({ min: 0, max: 0xffff }),
    fc.constantFrom('github.com', 'GitHub.COM', 'gitlab.example.com'),
    fc.integer({ min: 0, max: 0xffff }),
    fc.constantFrom('/Acme/Shop.git', '/acme/app', '/api/v3'),
  )
  .map(([scheme, f1, host, f2, path]) => `${recase(scheme, f1)}${recase(host, f2)}${path}`);

describe('one truth for validity (API server CEL/patterns ≡ controller parsers)', () => {
  it('schemes are case-insensitive everywhere: HTTPS://GitHub.COM/Acme/Shop.git and generated case variants', async () => {
    const shop = {
      type: 'github' as const,
      address: 'HTTPS://GitHub.COM/Acme/Shop.git',
      secretRef: { name: 'probe' },
    };
    expect(await admitted('providers', shop)).toBe(true);
    expect(await usable(shop)).toBe(true);
    expect(parseRaw(shop.address)).toMatchObject({
      scheme: 'https',
      hostname: 'github.com',
      segments: ['Acme', 'Shop'],
    });
    await fc.assert(
      fc.asyncProperty(caseVariants, async (address) => {
        const git = { type: 'gitlab' as const, address, secretRef: { name: 'probe' } };
        expect(await admitted('providers', git), `address ${JSON.stringify(address)}`).toBe(true);
        expect(await usable(git), `address ${JSON.stringify(address)}`).toBe(true);
        expect(typeof parseRaw(address), `address ${JSON.stringify(address)}`).toBe('object');
        if (/^https?:/i.test(address)) {
          const hook = { type: 'generic' as const, address };
          expect(await admitted('providers', hook), `webhook ${JSON.stringify(address)}`).toBe(true);
          expect(await usable(hook), `webhook ${JSON.stringify(address)}`).toBe(true);
          const api = { ...git, address: 'https://gitlab.example.com/acme/app', apiURL: address };
          expect(await admitted('providers', api), `apiURL ${JSON.stringify(address)}`).toBe(true);
          expect(await usable(api), `apiURL ${JSON.stringify(address)}`).toBe(true);
        }
      }),
      { seed: SEED, numRuns: 100 },
    );
  }, 300_000);

  it('spec.apiURL', async () => {
    await fc.assert(
      fc.asyncProperty(urlish, async (apiURL) => {
        const spec = {
          type: 'github' as const,
          address: 'https://github.com/acme/app',
          apiURL,
          secretRef: { name: 'probe' },
        };
        expect(await admitted('providers', spec), `apiURL ${JSON.stringify(apiURL)}`).toBe(
          await usable(spec),
        );
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }, 300_000);

  it('spec.address of a webhook (generic)', async () => {
    await fc.assert(
      fc.asyncProperty(urlish, async (address) => {
        const spec = { type: 'generic' as const, address };
        expect(await admitted('providers', spec), `address ${JSON.stringify(address)}`).toBe(
          await usable(spec),
        );
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }, 300_000);

  it('spec.address of a git forge (http(s), ssh:// and scp-like forms)', async () => {
    await fc.assert(
      fc.asyncProperty(urlish, async (address) => {
        const spec = { type: 'gitlab' as const, address, secretRef: { name: 'probe' } };
        expect(await admitted('providers', spec), `address ${JSON.stringify(address)}`).toBe(
          await usable(spec),
        );
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }, 300_000);

  it('spec.timeout (durations)', async () => {
    const duration = fc.oneof(
      fc
        .array(
          fc.tuple(
            fc.constantFrom('0', '1', '15', '1.5', '01', '.5', '1.', '999999999999999999999', ''),
            fc.constantFrom('ms', 's', 'm', 'h', 'S', 'us', 'd', ''),
          ),
          { minLength: 1, maxLength: 3 },
        )
        .map((parts) => parts.map((p) => p.join('')).join('')),
      fc.constantFrom(' 15s', '15s ', '-1s', '+1s', '1h30m', '1m30s500ms'),
      fc.string({ maxLength: 12 }),
    );
    await fc.assert(
      fc.asyncProperty(duration, async (timeout) => {
        const spec = { type: 'generic' as const, address: 'https://hooks.example.com/x', timeout };
        expect(await admitted('providers', spec), `timeout ${JSON.stringify(timeout)}`).toBe(
          await usable(spec),
        );
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }, 300_000);

  it('eventSources[].name (Stack names and globs)', async () => {
    const name = fc.oneof(
      fc.constantFrom(
        '*',
        'app',
        'app-*',
        '*-dev',
        'a*b',
        '**',
        'App',
        'a_b',
        '-a',
        'a-',
        '',
        'a.b',
        '[ab]',
        '{a,b}',
        '!a',
        'a?',
      ),
      fc.stringMatching(/^[a-z0-9*?[\]{}!,.-]{1,12}$/),
    );
    await fc.assert(
      fc.asyncProperty(name, async (n) => {
        const spec = { providerRef: { name: 'p' }, eventSources: [{ kind: 'Stack' as const, name: n }] };
        const alert: Alert = {
          apiVersion: API_VERSION,
          kind: 'Alert',
          metadata: { name: 'probe', namespace: ns },
          spec,
        };
        const compiled = compileAlert(alert, { allowCrossNamespace: true });
        expect(await admitted('alerts', spec), `name ${JSON.stringify(n)}`).toBe(compiled.ok);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  }, 300_000);
});
