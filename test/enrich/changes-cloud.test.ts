/**
 * The order of the change-set sources in ChangeAttacher (docs/changes.md, "Sources"): the PKO v2
 * workspace log when it is complete, else Pulumi Cloud (the contract server,
 * test/support/pulumi-cloud.ts) with the Stack's own token, else the log's partial set or "no
 * details" — each with the reason, never the token. PKO v1 goes to Pulumi Cloud or "no details".
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import { ChangeAttacher, PKO_V1_UNAVAILABLE, type ChangeAttacherOptions } from '../../src/enrich/changes.ts';
import type { readWorkspaceLog } from '../../src/kube/workspace-log.ts';
import { createLogger } from '../../src/log.ts';
import { PulumiCloudServer, step } from '../support/pulumi-cloud.ts';
import { stackEvent } from '../template/fixtures.ts';

const TOKEN = 'pul-cafe0123456789abcdef0123456789abcdef01';
/** A Stack Secret's value a provider printed in a plain property. */
const LEAKED = 'hunter2-database-password';

const LOG = readFileSync(new URL('../fixtures/agent-logs/02-update.log', import.meta.url), 'utf8');
const PREVIEW = LOG.slice(0, LOG.indexOf('\n', LOG.indexOf('\tpreview completed')) + 1)
  .split('\n')
  .filter((l) => l !== '');
/** The same run cut before its summary (rotated, or the pod gone): incomplete. */
const CUT = PREVIEW.slice(
  0,
  PREVIEW.findIndex((l) => l.includes('\tResources:')),
);

let cloud: PulumiCloudServer;
beforeEach(async () => {
  cloud = await PulumiCloudServer.start([TOKEN]);
});
afterEach(async () => {
  await cloud.close();
});

function stackOf(spec: Record<string, unknown>): Stack {
  return {
    metadata: { name: 'app', namespace: 'team-a', uid: `uid-${String(Math.random())}`, resourceVersion: '1' },
    spec: { backend: cloud.origin, stack: 'acme/app/dev', ...spec },
  };
}
const withToken = (): Stack =>
  stackOf({
    envRefs: {
      PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi', key: 'accessToken' } },
      DB: { type: 'Secret', secret: { name: 'db', key: 'password' } },
    },
  });
const secrets: Record<string, Record<string, string>> = {
  pulumi: { accessToken: TOKEN },
  db: { password: LEAKED },
};

function logOf(lines: readonly string[]): typeof readWorkspaceLog {
  return async (_run, sink) => {
    for (const l of lines) await sink(l);
    return {
      ok: true,
      pod: 'app-workspace-0',
      lines: lines.length,
      bytes: 0,
      cutLines: 0,
      end: 'eof',
      restartedDuringRun: false,
      droppedFragment: false,
      message: 'read',
    };
  };
}
const forbiddenLog: typeof readWorkspaceLog = () =>
  Promise.resolve({
    ok: false,
    reason: 'Forbidden',
    message: 'the controller may not read pods/log in namespace team-a',
    lines: 0,
  });

function attacher(o: Partial<ChangeAttacherOptions> = {}): ChangeAttacher {
  const u: Update = {
    metadata: { name: 'u1', namespace: 'team-a', uid: `uid-u1-${String(Math.random())}` },
    spec: { workspaceName: 'app', type: 'preview' },
    status: { startTime: new Date(Date.now() - 5_000).toISOString(), endTime: new Date().toISOString() },
  };
  return new ChangeAttacher({
    kubeConfig: new KubeConfig(),
    update: (_ns, name) => (name === 'u1' ? u : undefined),
    readSecret: (_ns, name) => Promise.resolve(secrets[name]),
    logger: createLogger({ level: 'silent' }),
    ...o,
  });
}

/** A finished run's event whose permalink names Pulumi Cloud update `version` (or preview `id`). */
function finished(
  run: EventIdentity['run'],
  permalink: string,
  timestamp = new Date().toISOString(),
): NotificationEvent {
  const identity = { stack: 'stack-uid', run, phase: { kind: 'succeeded' } } as EventIdentity;
  return stackEvent({
    identity,
    id: eventId(identity),
    timestamp,
    metadata: { ...stackEvent().metadata, permalink },
  });
}

/** Pulumi Cloud holds update 1 of acme/app/dev: `a` updated (its value printed plainly), `b` created. */
function cloudUpdate(): string {
  cloud.addUpdate('acme/app/dev', {
    kind: 'update',
    result: 'succeeded',
    resourceChanges: { create: 1, update: 1, same: 1 },
    events: [
      {
        resourcePreEvent: {
          metadata: step('update', 'urn:pulumi:dev::app::pkotest:index:Value::a', {
            old: { value: 'one' },
            new: { value: LEAKED },
            detailedDiff: { value: { diffKind: 'update', inputDiff: true } },
          }),
        },
      },
      {
        resourcePreEvent: {
          metadata: step('create', 'urn:pulumi:dev::app::pkotest:index:Value::b', { new: { value: 'x' } }),
        },
      },
      { summaryEvent: { resourceChanges: { create: 1, update: 1, same: 1 } } },
    ],
  });
  return 'https://app.pulumi.com/acme/app/dev/updates/1';
}

describe('the order of the sources', () => {
  it('a complete workspace log: Pulumi Cloud is not asked', async () => {
    const link = cloudUpdate();
    const ev = await attacher({ readLog: logOf(PREVIEW) }).attach(
      withToken(),
      finished({ kind: 'update', name: 'u1' }, link),
    );
    expect(ev.changes?.set?.source).toBe('workspace-log');
    expect(ev.changes?.set?.complete).toBe(true);
    expect(cloud.requests).toEqual([]);
  });

  it('a cut log: the run from Pulumi Cloud, with the Stack Secret values removed', async () => {
    const link = cloudUpdate();
    const ev = await attacher({ readLog: logOf(CUT) }).attach(
      withToken(),
      finished({ kind: 'update', name: 'u1' }, link),
    );
    const set = ev.changes?.set;
    expect(set?.source).toBe('pulumi-cloud');
    expect(set?.counts).toEqual({ create: 1, update: 1, same: 1 });
    expect(set?.resources.map((r) => r.name)).toEqual(['a', 'b']);
    expect(set?.resources[0]?.diff).toEqual(['~ value: "one" => "[redacted]"']);
    expect(JSON.stringify(ev)).not.toContain(LEAKED);
    expect(cloud.requests.every((r) => r.authorization === `token ${TOKEN}`)).toBe(true);
    expect(cloud.violations).toEqual([]);
  });

  it('a cut log and Pulumi Cloud failing: the log set, with why Pulumi Cloud was not read', async () => {
    const link = cloudUpdate();
    cloud.fail({ path: /\/updates$/, status: 503, times: 10 });
    const ev = await attacher({ readLog: logOf(CUT) }).attach(
      withToken(),
      finished({ kind: 'update', name: 'u1' }, link),
    );
    const set = ev.changes?.set;
    expect(set?.source).toBe('workspace-log');
    expect(set?.complete).toBe(false);
    expect(set?.note).toBe(
      'Pulumi Cloud: Pulumi Cloud answered 503 to the update list of acme/app/dev: Internal Server Error',
    );
  });

  it('no log and a refused token: no details, both reasons, never the token', async () => {
    const link = cloudUpdate();
    secrets.pulumi = { accessToken: 'pul-revoked-token-0000000000' };
    try {
      const ev = await attacher({ readLog: forbiddenLog }).attach(
        withToken(),
        finished({ kind: 'update', name: 'u1' }, link),
      );
      expect(ev.changes?.unavailable).toBe(
        "no change details: the controller may not read pods/log in namespace team-a; Pulumi Cloud: Pulumi Cloud refused the Stack's access token (401: Unauthorized: No credentials provided or are invalid.); check its PULUMI_ACCESS_TOKEN",
      );
      expect(JSON.stringify(ev)).not.toContain('pul-revoked');
    } finally {
      secrets.pulumi = { accessToken: TOKEN };
    }
  });

  it('a permalink that is not Pulumi Cloud: the log alone decides', async () => {
    const ev = await attacher({ readLog: logOf(CUT) }).attach(
      stackOf({ backend: 's3://bucket' }),
      finished({ kind: 'update', name: 'u1' }, 'https://console.example/x'),
    );
    expect(ev.changes?.set?.source).toBe('workspace-log');
    expect(ev.changes?.set?.note).toBeUndefined();
    expect(cloud.requests).toEqual([]);
  });
});

describe('PKO v1', () => {
  const v1 = { kind: 'v1', commit: 'abc', at: 'x' } as const;

  it('a Pulumi Cloud permalink and the Stack token (accessTokenSecret): counts and resources', async () => {
    const link = cloudUpdate();
    secrets['v1-token'] = { accessToken: TOKEN };
    const ev = await attacher().attach(stackOf({ accessTokenSecret: 'v1-token' }), finished(v1, link));
    expect(ev.changes?.set?.source).toBe('pulumi-cloud');
    expect(ev.changes?.set?.counts.create).toBe(1);
  });

  it('no token: "no details", saying PKO v1 and what is missing', async () => {
    const link = cloudUpdate();
    const ev = await attacher().attach(stackOf({}), finished(v1, link));
    expect(ev.changes?.unavailable).toBe(
      `${PKO_V1_UNAVAILABLE}; Pulumi Cloud: the Stack names no Pulumi access token (spec.envRefs.PULUMI_ACCESS_TOKEN or spec.accessTokenSecret) to read the run with`,
    );
    expect(cloud.requests).toEqual([]);
  });

  it('a run older than maxAge (routed again after a restart): Pulumi Cloud is not asked', async () => {
    const link = cloudUpdate();
    const ev = await attacher().attach(
      withToken(),
      finished(v1, link, new Date(Date.now() - 3_600_000).toISOString()),
    );
    expect(ev.changes).toEqual({ unavailable: PKO_V1_UNAVAILABLE });
    expect(cloud.requests).toEqual([]);
  });

  it('a failure is remembered 30 s, then asked again; waits at most cloud.waitMs', async () => {
    const link = cloudUpdate();
    let now = Date.now();
    cloud.fail({ path: /\/updates$/, status: 500, times: 1 });
    const a = attacher({ now: () => now });
    const st = withToken();
    const first = await a.attach(st, finished(v1, link, new Date(now).toISOString()));
    expect(first.changes?.unavailable).toMatch(/Pulumi Cloud answered 500/);
    await a.attach(st, finished(v1, link, new Date(now).toISOString()));
    expect(cloud.requests).toHaveLength(1);
    now += 31_000;
    const again = await a.attach(st, finished(v1, link, new Date(now).toISOString()));
    expect(again.changes?.set?.source).toBe('pulumi-cloud');
    // A server that never answers: the event goes after waitMs.
    cloud.fail({ path: /events$/, stall: true, times: 5 });
    const slow = attacher({ cloud: { waitMs: 300 } });
    const t0 = performance.now();
    const late = await slow.attach(
      withToken(),
      finished(v1, 'https://app.pulumi.com/acme/app/dev/updates/1'),
    );
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(late.changes?.unavailable).toBe(
      `${PKO_V1_UNAVAILABLE}; Pulumi Cloud: Pulumi Cloud was not read within 0.3 s; the result was sent without it`,
    );
    slow.stop();
  });
});

describe('B15: the Pulumi Cloud cache is keyed by who may see it', () => {
  const v1 = { kind: 'v1', commit: 'abc', at: 'x' } as const;
  /** A Stack of tenant `ns` claiming acme/app/dev, with `spec` (its token reference, or none). */
  const tenant = (ns: string, spec: Record<string, unknown>): Stack => ({
    metadata: { name: 'app', namespace: ns, uid: `uid-${ns}`, resourceVersion: '1' },
    spec: { backend: cloud.origin, stack: 'acme/app/dev', ...spec },
  });
  const tokenOf = (secret: string): Record<string, unknown> => ({
    envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: secret, key: 'accessToken' } } },
  });

  it("A without a token gets no change set of B's: no request for A, nothing served from B's entry", async () => {
    // Both runs' permalinks name update 1 of acme/app/dev (A's program printed B's).
    const link = cloudUpdate();
    const a = attacher();
    const b = await a.attach(tenant('tenant-b', tokenOf('pulumi')), finished(v1, link));
    expect(b.changes?.set?.source).toBe('pulumi-cloud');
    expect(b.changes?.set?.resources.map((r) => r.name)).toEqual(['a', 'b']);
    const asked = cloud.requests.length;
    expect(asked).toBeGreaterThan(0);
    const other = await a.attach(tenant('tenant-a', {}), finished(v1, link));
    expect(other.changes).toEqual({
      unavailable: `${PKO_V1_UNAVAILABLE}; Pulumi Cloud: the Stack names no Pulumi access token (spec.envRefs.PULUMI_ACCESS_TOKEN or spec.accessTokenSecret) to read the run with`,
    });
    expect(cloud.requests).toHaveLength(asked);
    // Nor with a token of its own that Pulumi Cloud refuses: asked with that token, not served B's read.
    secrets['a-token'] = { accessToken: 'pul-tenant-a-0000000000000000000000000000' };
    const refused = await a.attach(tenant('tenant-a', tokenOf('a-token')), finished(v1, link));
    expect(refused.changes?.set).toBeUndefined();
    expect(refused.changes?.unavailable).toMatch(/Pulumi Cloud refused the Stack's access token \(401/);
    expect(cloud.requests.slice(asked).map((r) => r.authorization)).toEqual([
      'token pul-tenant-a-0000000000000000000000000000',
    ]);
    expect(JSON.stringify(refused)).not.toContain('pul-tenant-a');
  });

  it("B's event is not given A's cached failure", async () => {
    const link = cloudUpdate();
    const a = attacher();
    // A goes first, with a token that may not read acme/app/dev (403), and fails.
    const A_TOKEN = 'pul-tenant-a-1111111111111111111111111111';
    cloud.addToken(A_TOKEN);
    cloud.forbid(A_TOKEN, 'acme/app/dev');
    secrets['a-token'] = { accessToken: A_TOKEN };
    const first = await a.attach(tenant('tenant-a', tokenOf('a-token')), finished(v1, link));
    expect(first.changes?.unavailable).toMatch(
      /may not read the update list of acme\/app\/dev in Pulumi Cloud \(403/,
    );
    // B, within the 30 s a failure is remembered, with its own token: read, not A's failure.
    const b = await a.attach(tenant('tenant-b', tokenOf('pulumi')), finished(v1, link));
    expect(b.changes?.set?.source).toBe('pulumi-cloud');
    expect(b.changes?.set?.counts).toEqual({ create: 1, update: 1, same: 1 });
    expect(cloud.requests.filter((r) => r.authorization === `token ${TOKEN}`).length).toBeGreaterThan(0);
    // A again: its own failure, remembered (no new request with A's token).
    const before = cloud.requests.length;
    const again = await a.attach(tenant('tenant-a', tokenOf('a-token')), finished(v1, link));
    expect(again.changes?.unavailable).toMatch(/\(403/);
    expect(cloud.requests).toHaveLength(before);
  });

  it("a permalink that does not match the Stack's own backend/org/project/stack is not used", async () => {
    cloudUpdate();
    cloud.addUpdate('acme/app/prod', {
      kind: 'update',
      result: 'succeeded',
      resourceChanges: { delete: 3 },
      events: [{ summaryEvent: { resourceChanges: { delete: 3 } } }],
    });
    const prod = 'https://app.pulumi.com/acme/app/prod/updates/1';
    const a = attacher({ readLog: logOf(CUT) });
    const ev = await a.attach(withToken(), finished({ kind: 'update', name: 'u1' }, prod));
    expect(ev.changes?.set?.source).toBe('workspace-log');
    expect(ev.changes?.set?.note).toBe(
      "Pulumi Cloud: the run's permalink names another stack (acme/app/prod; the Stack's spec.stack is acme/app/dev); Pulumi Cloud was not read",
    );
    // Another organization, or a Stack whose backend is not Pulumi Cloud at all.
    const other = await attacher().attach(
      stackOf({ ...withToken().spec, stack: 'other-org/app/dev' }),
      finished(v1, cloudUpdate()),
    );
    expect(other.changes?.unavailable).toMatch(
      /the run's permalink names another stack \(acme\/app\/dev; the Stack's spec.stack is other-org\/app\/dev\)/,
    );
    const s3 = await attacher().attach(
      stackOf({ ...withToken().spec, backend: 's3://state-bucket' }),
      finished(v1, 'https://app.pulumi.com/acme/app/dev/updates/1'),
    );
    expect(s3.changes?.unavailable).toBe(
      `${PKO_V1_UNAVAILABLE}; Pulumi Cloud: the run's permalink names another stack (Pulumi Cloud acme/app/dev; the Stack's backend is s3://, not Pulumi Cloud); Pulumi Cloud was not read`,
    );
    expect(cloud.requests).toEqual([]);
    // `org/stack` and `stack` check the parts they name.
    const short = await attacher().attach(
      stackOf({ ...withToken().spec, stack: 'ACME/dev' }),
      finished(v1, 'https://app.pulumi.com/acme/app/dev/updates/1'),
    );
    expect(short.changes?.set?.source).toBe('pulumi-cloud');
  });
});

describe('values Pulumi Cloud marks secret', () => {
  it("a value under Pulumi's secret signature with its plaintext goes as [secret] wherever it is printed", async () => {
    const plain = 'cloud-marked-Value-9';
    cloud.addUpdate('acme/app/dev', {
      kind: 'update',
      result: 'succeeded',
      resourceChanges: { update: 1 },
      events: [
        {
          resourcePreEvent: {
            metadata: step('update', 'urn:pulumi:dev::app::pkotest:index:Value::a', {
              old: { value: 'one', password: 'x' },
              new: {
                value: plain,
                password: {
                  '4dabf18193072939515e22adb298388d': '1b47061264138c4ac30d75fd1eb44270',
                  plaintext: JSON.stringify(plain),
                },
              },
              detailedDiff: {
                value: { diffKind: 'update', inputDiff: true },
                password: { diffKind: 'update', inputDiff: true },
              },
            }),
          },
        },
        { summaryEvent: { resourceChanges: { update: 1 } } },
      ],
    });
    const ev = await attacher().attach(
      withToken(),
      finished({ kind: 'v1', commit: 'abc', at: 'x' }, 'https://app.pulumi.com/acme/app/dev/updates/1'),
    );
    expect(ev.changes?.set?.resources[0]?.diff).toEqual([
      '~ password: "x" => [secret]',
      // The plaintext is JSON (`"…"`): its quoted form is a marked value too.
      '~ value: "one" => [secret]',
    ]);
    expect(JSON.stringify(ev)).not.toContain(plain);
  });
});
