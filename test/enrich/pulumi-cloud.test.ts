/**
 * The Pulumi Cloud source (src/enrich/pulumi-cloud.ts) against the contract server
 * (test/support/pulumi-cloud.ts): permalinks, the Stack's token, counts and engine events, paging,
 * and every documented failure degrading to a reason that never holds the token.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  accessTokenRefOf,
  cloudRunOf,
  formatValue,
  permalinkMismatch,
  readCloudChangeSet,
  type CloudRunRef,
} from '../../src/enrich/pulumi-cloud.ts';
import { egressDispatcher, egressPolicy } from '../../src/provider-types.ts';
import { PulumiCloudServer, step, type EngineEvent } from '../support/pulumi-cloud.ts';

const TOKEN = 'pul-0123456789abcdef0123456789abcdef01234567';
const STACK = 'acme/app/dev';
let cloud: PulumiCloudServer;

beforeEach(async () => {
  cloud = await PulumiCloudServer.start([TOKEN]);
});
afterEach(async () => {
  await cloud.close();
});

function ref(run: CloudRunRef['run']): CloudRunRef {
  return { api: cloud.origin, org: 'acme', project: 'app', stack: 'dev', run };
}

/** A preview adding `b` and changing `a`'s `value`, as the engine reports it. */
function previewEvents(): EngineEvent[] {
  return [
    { preludeEvent: { config: {} } },
    {
      resourcePreEvent: {
        metadata: step('same', 'urn:pulumi:dev::app::pulumi:pulumi:Stack::app-dev'),
        planning: true,
      },
    },
    {
      resourcePreEvent: {
        metadata: step('update', 'urn:pulumi:dev::app::pkotest:index:Value::a', {
          old: { value: 'one' },
          new: { value: 'two' },
          detailedDiff: { value: { diffKind: 'update', inputDiff: true } },
        }),
        planning: true,
      },
    },
    {
      resourcePreEvent: {
        metadata: step('create', 'urn:pulumi:dev::app::pkotest:index:Value::b', {
          new: { value: 'new', tags: { env: 'dev' } },
        }),
        planning: true,
      },
    },
    { diagnosticEvent: { severity: 'info', message: 'hello', color: 'never' } },
    {
      summaryEvent: {
        maybeCorrupt: false,
        durationSeconds: 1,
        resourceChanges: { create: 1, update: 1, same: 1 },
        isPreview: true,
      },
    },
  ];
}

describe('permalinks', () => {
  it('app.pulumi.com updates and previews are read at api.pulumi.com', () => {
    expect(cloudRunOf('https://app.pulumi.com/acme/app/dev/updates/12', undefined)).toEqual({
      api: 'https://api.pulumi.com',
      org: 'acme',
      project: 'app',
      stack: 'dev',
      run: { kind: 'update', version: 12 },
    });
    expect(
      cloudRunOf('https://app.pulumi.com/acme/app/dev/previews/0a1b2c3d-0000-4000-8000-000000000001', '')
        ?.run,
    ).toEqual({
      kind: 'preview',
      id: '0a1b2c3d-0000-4000-8000-000000000001',
    });
  });

  it('a self-hosted Pulumi Cloud is read at the Stack backend, which must be http(s)', () => {
    expect(
      cloudRunOf('https://pulumi.example.com/acme/app/dev/updates/3', 'https://api.pulumi.example.com/')?.api,
    ).toBe('https://api.pulumi.example.com');
    expect(cloudRunOf('https://pulumi.example.com/acme/app/dev/updates/3', undefined)).toBeUndefined();
    expect(cloudRunOf('https://app.pulumi.com/acme/app/dev/updates/3', 's3://bucket')?.api).toBe(
      'https://api.pulumi.com',
    );
  });

  it('anything else is not a Pulumi Cloud permalink', () => {
    for (const p of [
      undefined,
      '',
      'not a url',
      'http://app.pulumi.com/acme/app/dev/updates/1',
      'https://app.pulumi.com/acme/app/dev/updates/x',
      'https://app.pulumi.com/acme/app/updates/1',
      'https://app.pulumi.com/ac%2Fme/app/dev/updates/1',
      'https://app.pulumi.com/acme/app/dev/previews/../../x',
      'https://evil.example/acme/app/dev/updates/1',
    ])
      expect(cloudRunOf(p, undefined)).toBeUndefined();
  });
});

describe("B15: a permalink is used only when it names the Stack's own stack", () => {
  const ref = cloudRunOf('https://app.pulumi.com/acme/app/dev/updates/3', undefined) as CloudRunRef;

  it('each part spec.stack names must match (the organization in any case); a part it leaves out is not checked', () => {
    for (const stack of ['acme/app/dev', 'ACME/app/dev', 'acme/dev', 'dev', ' acme/app/dev '])
      expect(permalinkMismatch(ref, { stack }), stack).toBeUndefined();
    for (const stack of [
      'acme/app/prod',
      'other/app/dev',
      'acme/web/dev',
      'acme/prod',
      'prod',
      'acme/App/dev',
    ])
      expect(permalinkMismatch(ref, { stack }), stack).toBe(
        `the run's permalink names another stack (acme/app/dev; the Stack's spec.stack is ${stack}); Pulumi Cloud was not read`,
      );
    for (const spec of [{}, { stack: '' }, { stack: 'a//b' }, { stack: 'a/b/c/d' }, null])
      expect(permalinkMismatch(ref, spec)).toBe(
        "the Stack's spec.stack names no stack to check the run's permalink (acme/app/dev) against; Pulumi Cloud was not read",
      );
  });

  it('a backend that is not Pulumi Cloud (spec.backend or a literal PULUMI_BACKEND_URL) uses no permalink', () => {
    for (const backend of ['s3://bucket', 'file://./state', 'azblob://c', 'gs://b'])
      expect(permalinkMismatch(ref, { stack: 'acme/app/dev', backend })).toMatch(
        /^the run's permalink names another stack \(Pulumi Cloud acme\/app\/dev; the Stack's backend is [a-z0-9]+:\/\/, not Pulumi Cloud\)/,
      );
    const envRefs = { PULUMI_BACKEND_URL: { type: 'Literal', literal: { value: 's3://x' } } };
    expect(permalinkMismatch(ref, { stack: 'acme/app/dev', envRefs })).toMatch(/backend is s3:\/\//);
    expect(
      permalinkMismatch(ref, { stack: 'acme/app/dev', backend: 'https://api.pulumi.com' }),
    ).toBeUndefined();
  });

  it('a backend of https://app.pulumi.com (the default PKO names) is read at api.pulumi.com', () => {
    expect(cloudRunOf('https://app.pulumi.com/acme/app/dev/updates/3', 'https://app.pulumi.com')?.api).toBe(
      'https://api.pulumi.com',
    );
  });
});

describe("the Stack's access token", () => {
  it('envRefs PULUMI_ACCESS_TOKEN (Secret or Literal), accessTokenSecret, envSecrets', () => {
    expect(
      accessTokenRefOf({
        envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi', key: 'token' } } },
      }),
    ).toEqual({ secret: 'pulumi', key: 'token' });
    expect(
      accessTokenRefOf({ envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Literal', literal: { value: 'x' } } } }),
    ).toEqual({
      literal: 'x',
    });
    expect(accessTokenRefOf({ accessTokenSecret: 'v1-token' })).toEqual({
      secret: 'v1-token',
      key: 'accessToken',
    });
    expect(accessTokenRefOf({ envSecrets: ['a', 3, 'b'] })).toEqual({ envSecrets: ['a', 'b'] });
    expect(
      accessTokenRefOf({ envRefs: { OTHER: { type: 'Secret', secret: { name: 'x', key: 'y' } } } }),
    ).toBeUndefined();
    expect(accessTokenRefOf(null)).toBeUndefined();
  });
});

describe('reading a run', () => {
  it('a preview by its id: counts from the summary event, resources and property lines from the engine events', async () => {
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN);
    if (!r.ok) throw new Error(r.reason);
    expect(r.set).toMatchObject({
      source: 'pulumi-cloud',
      complete: true,
      incomplete: [],
      counts: { create: 1, update: 1, same: 1 },
      countsFrom: 'summary',
      failed: false,
      run: { kind: 'update', dryRun: true, stack: 'acme/app/dev' },
    });
    expect(r.set.resources.map((x) => [x.op, x.name, x.type, x.diff])).toEqual([
      ['update', 'a', 'pkotest:index:Value', ['~ value: "one" => "two"']],
      ['create', 'b', 'pkotest:index:Value', ['+ tags: {"env":"dev"}', '+ value: "new"']],
    ]);
    // Two pages of 3 events: the continuation token was followed.
    const paths = cloud.requests.map((q) => q.path);
    expect(paths).toEqual([
      `/api/stacks/acme/app/dev/preview/${id}/events`,
      `/api/stacks/acme/app/dev/preview/${id}/events`,
    ]);
    expect(cloud.requests[1]?.query.continuationToken).toBeDefined();
    expect(cloud.requests.every((q) => q.authorization === `token ${TOKEN}`)).toBe(true);
    expect(cloud.violations).toEqual([]);
  });

  it('an up by its version: found on the second page of the list, counts from resourceChanges', async () => {
    const { version } = cloud.addUpdate(STACK, {
      kind: 'update',
      result: 'succeeded',
      resourceChanges: { create: 1, update: 1, same: 1 },
      events: previewEvents().filter((e) => e.summaryEvent === undefined),
    });
    for (let i = 0; i < 25; i++) cloud.addUpdate(STACK, { kind: 'refresh', result: 'succeeded', events: [] });
    const r = await readCloudChangeSet(ref({ kind: 'update', version }), TOKEN);
    if (!r.ok) throw new Error(r.reason);
    expect(r.set.counts).toEqual({ create: 1, update: 1, same: 1 });
    expect(r.set.run?.dryRun).toBe(false);
    expect(r.set.complete).toBe(true);
    const lists = cloud.requests.filter((q) => q.path.endsWith('/updates'));
    expect(lists.map((q) => [q.query.page, q.query['output-type']])).toEqual([
      ['1', 'service'],
      ['2', 'service'],
    ]);
    expect(cloud.requests.at(-1)?.path).toMatch(
      /\/api\/stacks\/acme\/app\/dev\/update\/[0-9a-f-]{36}\/events$/,
    );
    expect(cloud.violations).toEqual([]);
  });

  it('a failed up: the error diagnostics and failed', async () => {
    const { version } = cloud.addUpdate(STACK, {
      kind: 'update',
      result: 'failed',
      resourceChanges: {},
      events: [
        {
          diagnosticEvent: { severity: 'error', message: '<{%fg 1%}>error: boom<{%reset%}>\n', color: 'raw' },
        },
        {
          resOpFailedEvent: {
            metadata: step('create', 'urn:pulumi:dev::app::x:y:Z::c'),
            status: 1,
            steps: 0,
          },
        },
      ],
    });
    const r = await readCloudChangeSet(ref({ kind: 'update', version }), TOKEN);
    if (!r.ok) throw new Error(r.reason);
    expect(r.set.failed).toBe(true);
    expect(r.set.errors).toEqual(['error: boom']);
  });
});

describe('failures degrade with the reason, never the token', () => {
  const noToken = (s: string): void => {
    expect(s).not.toContain(TOKEN);
  };

  it('401: a bad token', async () => {
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), 'pul-wrong-token-0000');
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reason).toMatch(/refused the Stack's access token \(401: Unauthorized/);
    noToken(r.reason);
  });

  it('a server message echoing the token is redacted', async () => {
    cloud.fail({
      path: /events$/,
      status: 403,
      body: JSON.stringify({ code: 403, message: `token ${TOKEN} lacks read` }),
    });
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reason).toContain('(403: token [redacted] lacks read)');
    noToken(r.reason);
  });

  it('403 and 404 from the documented API', async () => {
    cloud.addUpdate(STACK, { kind: 'update', result: 'succeeded', events: [] });
    cloud.forbid(TOKEN, STACK);
    const forbidden = await readCloudChangeSet(ref({ kind: 'update', version: 1 }), TOKEN);
    expect(forbidden).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/may not read .* \(403: No permission/) as string,
    });
    const missing = await readCloudChangeSet(
      { ...ref({ kind: 'update', version: 1 }), stack: 'other' },
      TOKEN,
    );
    expect(missing).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/has no .* \(404: Stack 'acme\/app\/other' not found\)/) as string,
    });
  });

  it('429 with a Retry-After that fits is waited out once', async () => {
    const slept: number[] = [];
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    cloud.fail({ path: /events$/, status: 429, retryAfter: '2' });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN, {
      sleep: (ms) => {
        slept.push(ms);
        return Promise.resolve();
      },
    });
    expect(r.ok && r.set.complete).toBe(true);
    expect(slept).toEqual([2000]);
  });

  it('429 with a Retry-After past the deadline: the reason says so', async () => {
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    cloud.fail({ path: /events$/, status: 429, retryAfter: '120' });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN);
    expect(r).toMatchObject({
      ok: false,
      reason: expect.stringContaining(
        'rate-limited the engine events of acme/app/dev (429, retry after 120 s)',
      ) as string,
    });
  });

  it('a 5xx on the second events page keeps the counts: incomplete, with the reason in the note', async () => {
    const { version } = cloud.addUpdate(STACK, {
      kind: 'update',
      result: 'succeeded',
      resourceChanges: { create: 1, update: 1 },
      events: previewEvents(),
    });
    let pages = 0;
    const r = await readCloudChangeSet(ref({ kind: 'update', version }), TOKEN, {
      fetch: (async (url: string, init: RequestInit) => {
        if (url.includes('/events') && ++pages === 2) cloud.fail({ path: /events$/, status: 503 });
        const { fetch } = await import('undici');
        return fetch(url, init as never);
      }) as never,
    });
    if (!r.ok) throw new Error(r.reason);
    expect(r.set.complete).toBe(false);
    expect(r.set.incomplete).toEqual(['partial-events']);
    expect(r.set.counts).toEqual({ create: 1, update: 1 });
    expect(r.set.note).toBe(
      "Pulumi Cloud's engine events were not all read: Pulumi Cloud answered 503 to the engine events of acme/app/dev: Internal Server Error",
    );
  });

  it('a server that never answers: the read ends at its deadline', async () => {
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    cloud.fail({ path: /events$/, stall: true });
    const t0 = Date.now();
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN, {
      requestTimeoutMs: 300,
      timeoutMs: 1000,
    });
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r).toMatchObject({
      ok: false,
      reason: expect.stringContaining('did not answer the engine events of acme/app/dev in time') as string,
    });
  });

  it('an answer over the byte cap is not read whole', async () => {
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    cloud.fail({
      path: /events$/,
      status: 200,
      body: JSON.stringify({ events: [], pad: 'x'.repeat(200_000) }),
    });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN, { maxPageBytes: 64 * 1024 });
    expect(r).toMatchObject({
      ok: false,
      reason: expect.stringContaining('longer than the controller reads') as string,
    });
  });

  it('a redirect is not followed (the token stays with the API)', async () => {
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    cloud.fail({ path: /events$/, status: 302 });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN);
    expect(r).toMatchObject({ ok: false, reason: expect.stringContaining('redirected') as string });
  });

  it('an address the egress policy refuses is not contacted, and the reason says so', async () => {
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: previewEvents() });
    const dispatcher = egressDispatcher(
      egressPolicy({ allowLoopback: false, allowCIDRs: [], denyCIDRs: [], allowHosts: [], denyHosts: [] }),
    );
    try {
      const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN, { dispatcher });
      expect(r).toMatchObject({
        ok: false,
        reason: expect.stringMatching(
          /^the controller's egress policy refuses 127\.0\.0\.1:\d+ \(127\.0\.0\.1 is loopback/,
        ) as string,
      });
      expect(cloud.requests).toEqual([]);
    } finally {
      await dispatcher.close();
    }
  });

  it('an update still running: events up to now, incomplete', async () => {
    const { version } = cloud.addUpdate(STACK, {
      kind: 'update',
      result: 'in-progress',
      events: previewEvents().slice(0, 4),
      running: true,
    });
    const r = await readCloudChangeSet(ref({ kind: 'update', version }), TOKEN);
    if (!r.ok) throw new Error(r.reason);
    expect(r.set.complete).toBe(false);
    expect(r.set.incomplete).toEqual(['no-summary', 'partial-events']);
    expect(r.set.countsFrom).toBe('resources');
    expect(r.set.note).toContain('still running');
  });
});

describe('hostile answers', () => {
  it('wrong types, deep nesting and huge values: no throw, bounded lines', async () => {
    const events: EngineEvent[] = [
      { resourcePreEvent: 'nope' },
      { resourcePreEvent: { metadata: { op: 'explode', urn: 'urn:x' } } },
      { resourcePreEvent: { metadata: { op: 'update', urn: 42 } } },
      {
        resourcePreEvent: {
          metadata: step('update', 'urn:pulumi:dev::app::x:y:Z::big', {
            old: { v: 'DEEP', s: 'a'.repeat(100_000) },
            new: { v: 1, s: 'b' },
            detailedDiff: {
              v: { diffKind: 'update' },
              s: { diffKind: 'update' },
              'no.such[3]': { diffKind: 'weird' },
            },
          }),
        },
      },
      { summaryEvent: { resourceChanges: { update: 'many', create: -1, delete: 1e300, replace: 2 } } },
      { diagnosticEvent: { severity: 'error', message: { not: 'a string' } } },
    ];
    // 100,000 levels of nesting in one value: written raw (the server's own JSON.stringify would overflow).
    const depth = 100_000;
    const body = JSON.stringify({ events }).replaceAll(
      '"DEEP"',
      `${'{"d":'.repeat(depth)}"bottom"${'}'.repeat(depth)}`,
    );
    const id = cloud.addPreview(STACK, { result: 'succeeded', events: [] });
    cloud.fail({ path: /events$/, status: 200, body });
    const r = await readCloudChangeSet(ref({ kind: 'preview', id }), TOKEN);
    if (!r.ok) throw new Error(r.reason);
    expect(r.set.counts).toEqual({ replace: 2 });
    expect(r.set.resources).toHaveLength(1);
    for (const line of r.set.resources[0]?.diff ?? []) expect([...line].length).toBeLessThanOrEqual(500);
    expect(r.set.resources[0]?.diff).toHaveLength(3);
    expect(r.set.resources[0]?.diff[0]).toMatch(/^~ no\.such\[3\]: null => null$/);
    expect(r.set.resources[0]?.diff[2]).toMatch(/^~ v: (\{"d":){8}…\}{8} => 1$/);
  });

  it('formatValue: secrets shown as [secret], bounded whatever the value', () => {
    expect(
      formatValue(
        { '4dabf18193072939515e22adb298388d': '1b47061264138c4ac30d75fd1eb44270', value: 'x' },
        100,
      ),
    ).toBe('[secret]');
    expect(formatValue(['a', 1, true, null], 100)).toBe('["a",1,true,null]');
    expect([...formatValue({ a: 'x'.repeat(10_000) }, 50)].length).toBeLessThanOrEqual(50);
    const wide = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${String(i)}`, i]));
    expect([...formatValue(wide, 80)].length).toBeLessThanOrEqual(80);
  });
});
