/**
 * B07 — settings that cannot work are refused with a reason saying what to change (the Provider
 * resolver, behind the CRD's own checks: test/hostile/settings.int.test.ts) — and B05 — every
 * secret is registered with its meaningful parts for redaction.
 */
import { describe, expect, it } from 'vitest';
import type { Provider, ProviderSpec } from '../../src/api/v1alpha1.ts';
import { resolveProvider, type ResolveResult } from '../../src/credential/provider.ts';
import { redact, secretParts, urlSecretParts } from '../../src/credential/redact.ts';

type SpecPatch = { [K in keyof ProviderSpec]?: ProviderSpec[K] | undefined };

function provider(spec: SpecPatch): Provider {
  const merged: Record<string, unknown> = {
    type: 'generic',
    address: 'https://hooks.example.com/pko',
    ...spec,
  };
  for (const [k, v] of Object.entries(merged)) if (v === undefined) Reflect.deleteProperty(merged, k);
  return {
    apiVersion: 'notification.pko.dev/v1alpha1',
    kind: 'Provider',
    metadata: { namespace: 'team-a', name: 'hook' },
    spec: merged,
  } as unknown as Provider;
}

function resolve(spec: SpecPatch, secret?: Record<string, string>): Promise<ResolveResult> {
  return resolveProvider(
    provider({ ...spec, ...(secret ? { secretRef: { name: 'creds' } } : {}) }),
    (_ns, name) => Promise.resolve(name === 'creds' ? secret : undefined),
  );
}

function refusal(r: ResolveResult): { reason: string; message: string } {
  if (r.ok) throw new Error('expected a refusal');
  return r;
}

describe('B07: timeouts from 1 s to 5 min', () => {
  it.each(['0s', '0.0001ms', '500ms', '999ms', '1000h', '10000000h', '5m1s'])(
    'timeout %s is InvalidSpec',
    async (t) => {
      const r = refusal(await resolve({ timeout: t }));
      expect(r.reason).toBe('InvalidSpec');
      expect(r.message).toContain(`spec.timeout ${JSON.stringify(t)} is outside the range 1s to 5m`);
    },
  );
  it.each(['1s', '15s', '1m30s', '5m', '1000ms'])('timeout %s is accepted', async (t) => {
    expect((await resolve({ timeout: t })).ok).toBe(true);
  });
});

describe('B07: ports from 1 to 65535', () => {
  it('port 0 in spec.address, the Secret address, spec.apiURL or the proxy is refused', async () => {
    expect(refusal(await resolve({ address: 'http://hooks.example.com:0/x' })).message).toMatch(
      /spec\.address: port 0 cannot be connected to/,
    );
    const fromSecret = refusal(
      await resolve({ address: undefined }, { address: 'http://hooks.example.com:0/s3cr3t-path' }),
    );
    expect(fromSecret.reason).toBe('InvalidAddress');
    expect(fromSecret.message).not.toContain('s3cr3t');
    expect(
      refusal(
        await resolve(
          {
            type: 'gitea',
            address: 'https://git.example.com/a/b',
            apiURL: 'https://git.example.com:0/api/v1',
          },
          { token: 'tok-123456' },
        ),
      ).message,
    ).toMatch(/spec\.apiURL: port 0/);
  });
  it('a port over 65535 is not a URL at all', async () => {
    expect(refusal(await resolve({ address: 'http://hooks.example.com:70000/x' })).reason).toBe(
      'InvalidAddress',
    );
  });
});

describe('B07: Secret headers per RFC 9110, forbidden names refused', () => {
  const headers = (yaml: string) => resolve({}, { headers: yaml });
  it.each([
    ['X-Team: "a\\r\\nX-Injected: 1"', /line break \(CR or LF\)/],
    ['X-Team: "a\\nb"', /line break/],
    ['X-Team: "a\\u0000b"', /control character/],
    ['X-Team: "caf\\u00e9 \\u2603"', /outside ISO-8859-1/],
    ['X-Team: ""', /is empty/],
    ['"Bad Name": x', /not a valid HTTP header name/],
    ['"X-A:B": x', /not a valid HTTP header name/],
    ['Content-Length: "0"', /'Content-Length' may not be set \(the HTTP client computes the body length\)/],
    ['Host: internal.svc', /'Host' may not be set/],
    ['Transfer-Encoding: chunked', /'Transfer-Encoding' may not be set/],
    ['Connection: close', /'Connection' may not be set/],
    ['Keep-Alive: timeout=5', /'Keep-Alive' may not be set/],
    ['Upgrade: h2c', /'Upgrade' may not be set/],
    ['TE: trailers', /'TE' may not be set/],
    ['Proxy-Authorization: Basic eDp5', /proxySecretRef/],
    ['X-PKO-Event-Id: forged', /the controller sets it/],
    ['X-Signature: sha256=00', /generic-hmac/],
    ['Metadata-Flavor: Google', /cloud metadata/],
    ['Metadata: "true"', /cloud metadata/],
    ['X-aws-ec2-metadata-token: abc', /cloud metadata/],
    ['X-A: a\nx-a: b', /given twice/],
  ])('%s → InvalidSecret', async (yaml, why) => {
    const r = refusal(await headers(yaml));
    expect(r.reason).toBe('InvalidSecret');
    expect(r.message).toMatch(/^key 'headers' of Secret 'team-a\/creds'/);
    expect(r.message).toMatch(why);
  });
  it('more than 32 headers, or a value over 8,192 characters, is refused', async () => {
    const many = Array.from({ length: 33 }, (_, i) => `X-H${String(i)}: v`).join('\n');
    expect(refusal(await headers(many)).message).toMatch(/33 headers, over the limit of 32/);
    expect(refusal(await headers(`X-Big: ${'v'.repeat(8_193)}`)).message).toMatch(/over the limit of 8192/);
  });
  it('a value is never quoted in the message', async () => {
    const r = refusal(await headers('Authorization: "Bearer leak-TOKEN-7777\\r\\n"'));
    expect(r.message).not.toContain('leak-TOKEN-7777');
  });
  it('valid headers are kept, trimmed', async () => {
    const r = await headers('Authorization: "  Bearer abc.def-123  "\nX-Team: platform\n');
    expect(r.ok && r.provider.headers).toEqual({ Authorization: 'Bearer abc.def-123', 'X-Team': 'platform' });
  });
});

describe('B05: secrets are registered with their meaningful parts', () => {
  it('the token after an authentication scheme', () => {
    expect(secretParts('Bearer leak-TOKEN-7777')).toEqual(['Bearer leak-TOKEN-7777', 'leak-TOKEN-7777']);
    expect(secretParts('token ghp_abcdefghij')).toContain('ghp_abcdefghij');
  });
  it('basic auth: the encoded form, the decoded user:password and the password', () => {
    const b64 = Buffer.from('ci-bot:p4ssw0rd-B05').toString('base64');
    expect(secretParts(`Basic ${b64}`)).toEqual(
      expect.arrayContaining([b64, 'ci-bot:p4ssw0rd-B05', 'p4ssw0rd-B05']),
    );
  });
  it('key=value pairs (cookies, Digest parameters) and URLs inside a value', () => {
    const parts = secretParts(
      'session=s3ss10n-v4lue; theme=dark; hook=https://u:pw-B05-xyz@h.example.com/p?sig=abcdef123456',
    );
    expect(parts).toEqual(
      expect.arrayContaining(['s3ss10n-v4lue', 'pw-B05-xyz', 'u:pw-B05-xyz', 'abcdef123456']),
    );
    expect(parts).not.toContain('dark'); // too short to be a credential, and would redact ordinary words
  });
  it('URL parts: credentials, query values, a long path', () => {
    expect(
      urlSecretParts('https://bot:pa55word@hooks.example.com/services/T0/B0/XXXX?token=q-secret-1'),
    ).toEqual(expect.arrayContaining(['pa55word', 'bot:pa55word', 'q-secret-1', '/services/T0/B0/XXXX']));
  });
  it('an echoed token is redacted though the whole header value never appears', async () => {
    const r = await resolve({}, { headers: 'Authorization: Bearer leak-TOKEN-7777\n' });
    if (!r.ok) throw new Error(r.message);
    const b64 = Buffer.from('leak-TOKEN-7777').toString('base64');
    const echoed = `denied: token=leak-TOKEN-7777 (${b64} in base64)`;
    const out = redact(echoed, r.provider.secretValues);
    expect(out).not.toContain('leak-TOKEN-7777');
    expect(out).not.toContain(b64);
    expect(out).toBe('denied: token=[redacted] ([redacted] in base64)');
  });
});
