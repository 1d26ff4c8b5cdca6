/**
 * ChangeAttacher without a cluster: which events get a change set, the bounded wait, the cache.
 * (Reading a real workspace log end to end: ./changes.int.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import {
  ChangeAttacher,
  FORBIDDEN_TTL_MS,
  withoutOutput,
  PKO_V1_UNAVAILABLE,
  type ChangeAttacherOptions,
} from '../../src/enrich/changes.ts';
import type { readWorkspaceLog } from '../../src/kube/workspace-log.ts';
import { createLogger } from '../../src/log.ts';
import { stackEvent } from '../template/fixtures.ts';

const stack: Stack = {
  metadata: { name: 'app', namespace: 'team-a', uid: 'stack-uid' },
  spec: { stack: 'acme/app/dev', envRefs: { X: { type: 'Secret', secret: { name: 'creds', key: 'x' } } } },
};

/** The update preview of a real recording (its first run), as log lines. */
const LOG = readFileSync(new URL('../fixtures/agent-logs/02-update.log', import.meta.url), 'utf8');
const PREVIEW = LOG.slice(0, LOG.indexOf('\n', LOG.indexOf('\tpreview completed')) + 1)
  .split('\n')
  .filter((l) => l !== '');

/** A log reader passing `lines` (counting its calls in `calls`). */
function logOf(lines: readonly string[], calls: { n: number } = { n: 0 }): typeof readWorkspaceLog {
  return async (_run, sink) => {
    calls.n++;
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

/**
 * What the events of these tests add to "no change details": their permalink is a Pulumi Cloud one
 * (test/template/fixtures.ts) and the Stack names no access token to read it with.
 */
const NO_TOKEN =
  '; Pulumi Cloud: the Stack names no Pulumi access token (spec.envRefs.PULUMI_ACCESS_TOKEN or spec.accessTokenSecret) to read the run with';

/** What src/kube/workspace-log.ts says of a `pods/log` 403 in team-a, for Stack `name`. */
const refusal = (name: string): string =>
  `cannot read the workspace log of Stack team-a/${name}: the controller may not get pods/log in namespace team-a; grant the ClusterRole pko-notification-controller-workspace-logs there with a RoleBinding (config/components/workspace-logs, docs/install.md)`;
/** A `pods/log` 403 as src/kube/workspace-log.ts answers it, for Stack `name`. */
const refused = (name: string): Awaited<ReturnType<typeof readWorkspaceLog>> => ({
  ok: false,
  reason: 'Forbidden',
  message: refusal(name),
  permission: { verb: 'get', apiGroup: '', resource: 'pods/log', namespace: 'team-a' },
  lines: 0,
});

/** A failed run's message: the synthesized line, then the CLI output. */
const FAILED = 'Update of stack acme/app/dev failed:\n  ~ password: "sup3r-secret-value" => "x"\nerror: boom';

function update(name: string, endTime = new Date().toISOString()): Update {
  return {
    metadata: { name, namespace: 'team-a', uid: `uid-${name}` },
    spec: { workspaceName: 'app', type: 'preview' },
    status: { startTime: new Date(Date.now() - 5_000).toISOString(), endTime },
  };
}

function event(run: EventIdentity['run'], phase: EventIdentity['phase']['kind']): NotificationEvent {
  const identity = { stack: 'stack-uid', run, phase: { kind: phase } } as EventIdentity;
  return stackEvent({ identity, id: eventId(identity) });
}

function attacher(
  o: Partial<ChangeAttacherOptions> & Pick<ChangeAttacherOptions, 'readSecret'>,
): ChangeAttacher {
  const updates = new Map(['u1', 'u2', 'u3', 'old'].map((n) => [n, update(n)]));
  updates.set('old', update('old', new Date(Date.now() - 3_600_000).toISOString()));
  // A failed run as PKO 2.9 leaves it: no endTime, a Complete condition.
  updates.set('oldFailed', {
    ...update('oldFailed'),
    status: {
      conditions: [
        {
          type: 'Complete',
          status: 'True',
          reason: 'Updated',
          message: '',
          lastTransitionTime: new Date(Date.now() - 3_600_000).toISOString(),
        },
      ],
    },
  });
  return new ChangeAttacher({
    kubeConfig: new KubeConfig(),
    update: (_ns, name) => updates.get(name),
    logger: createLogger({ level: 'silent' }),
    ...o,
  });
}

describe('ChangeAttacher', () => {
  it('leaves started and stalled events alone; PKO v1 runs say why there are no details', async () => {
    let reads = 0;
    const logs = { n: 0 };
    const a = attacher({
      readSecret: () => {
        reads++;
        return Promise.resolve(undefined);
      },
      readLog: logOf(PREVIEW, logs),
    });
    const started = event({ kind: 'update', name: 'u1' }, 'started');
    expect(await a.attach(stack, started)).toBe(started);
    const v1 = await a.attach(stack, event({ kind: 'v1', commit: 'abc', at: 'x' }, 'failed'));
    expect(v1.changes).toEqual({ unavailable: PKO_V1_UNAVAILABLE });
    const gone = await a.attach(stack, event({ kind: 'update', name: 'nope' }, 'succeeded'));
    expect(gone.changes?.unavailable).toBe('no change details: the Update team-a/nope is gone');
    const old = await a.attach(stack, event({ kind: 'update', name: 'old' }, 'succeeded'));
    expect(old.changes?.unavailable).toMatch(/^no change details: the run ended more than 15 minutes before/);
    const oldFailed = await a.attach(stack, event({ kind: 'update', name: 'oldFailed' }, 'failed'));
    expect(oldFailed.changes?.unavailable).toMatch(
      /^no change details: the run ended more than 15 minutes before/,
    );
    // No log read; the Stack's Secrets read once (cached), for the messages.
    expect(logs.n).toBe(0);
    expect(reads).toBe(1);
  });

  it('never posts details it could not clean: a Secret that cannot be read makes them unavailable', async () => {
    const a = attacher({
      readSecret: () => Promise.reject(new Error('secrets "creds" is forbidden')),
      readLog: logOf(PREVIEW),
    });
    const ev = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    const why =
      'the controller could not read the Secret team-a/creds the Stack references, to remove its values (it needs get on secrets in namespace team-a)';
    expect(ev.changes?.unavailable).toBe(`no change details: ${why}${NO_TOKEN}`);
    // Nor the CLI output of a failed run's message.
    const failed = await a.attach(
      stack,
      stackEvent({
        identity: { stack: 'stack-uid', run: { kind: 'update', name: 'u2' }, phase: { kind: 'failed' } },
        message: FAILED,
      }),
    );
    expect(failed.message).toBe(`Update of stack acme/app/dev failed:\n(the CLI output is left out: ${why})`);
  });

  it('waits at most waitMs, then the event goes without details; one read per Update, bounded cache', async () => {
    const calls: string[] = [];
    const a = attacher({
      waitMs: 300,
      cacheSize: 2,
      readSecret: () => Promise.resolve(undefined),
      // Never answers: the read never ends.
      readLog: (run) => {
        calls.push(run.workspaceName);
        return new Promise(() => undefined);
      },
    });
    const t0 = performance.now();
    const ev = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    const waited = performance.now() - t0;
    expect(ev.changes?.unavailable).toBe(
      `no change details: the workspace log was not read within 0.3 s; the result was sent without it${NO_TOKEN}`,
    );
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(5_000);
    await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    expect(calls).toHaveLength(1);
    await a.attach(stack, event({ kind: 'update', name: 'u2' }, 'succeeded'));
    await a.attach(stack, event({ kind: 'update', name: 'u3' }, 'failed'));
    expect(a.cached).toBe(2);
    expect(calls).toHaveLength(3);
    // u1 was evicted (least recently used): read again.
    await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    expect(calls).toHaveLength(4);
  });

  it("removes the Stack's Secret values from the event's message too (a failed run embeds the CLI output)", async () => {
    const a = attacher({ readSecret: () => Promise.resolve({ x: 'sup3r-secret-value' }) });
    const ev = stackEvent({
      identity: { stack: 'stack-uid', run: { kind: 'update', name: 'u2' }, phase: { kind: 'failed' } },
      message: FAILED,
    });
    const out = await a.attach(stack, ev);
    expect(out.message).toBe(
      'Update of stack acme/app/dev failed:\n  ~ password: "[redacted]" => "x"\nerror: boom',
    );
    // No cluster here: the log could not be read, which is said.
    expect(out.changes?.unavailable).toMatch(/^no change details: /);
  });

  it("redacts the message however the log read ends: late, PKO v1, or the Stack's Secrets unknown", async () => {
    const failed = (run: EventIdentity['run']): NotificationEvent =>
      stackEvent({ identity: { stack: 'stack-uid', run, phase: { kind: 'failed' } }, message: FAILED });
    // The log never comes: the message is redacted all the same.
    const late = attacher({
      waitMs: 200,
      readSecret: () => Promise.resolve({ x: 'sup3r-secret-value' }),
      readLog: () => new Promise(() => undefined),
    });
    const ev = await late.attach(stack, failed({ kind: 'update', name: 'u1' }));
    expect(ev.changes?.unavailable).toMatch(/not read within 0.2 s/);
    expect(ev.message).toBe(
      'Update of stack acme/app/dev failed:\n  ~ password: "[redacted]" => "x"\nerror: boom',
    );
    // PKO v1: no log at all, the message is redacted.
    const v1 = await late.attach(stack, failed({ kind: 'v1', commit: 'abc', at: 'x' }));
    expect(v1.message).not.toContain('sup3r');
    expect(v1.changes).toEqual({ unavailable: PKO_V1_UNAVAILABLE });
    // The Secrets cannot be read in time: the CLI output is left out, not posted.
    const slow = attacher({
      waitMs: 200,
      readSecret: () => new Promise(() => undefined),
      readLog: logOf(PREVIEW),
    });
    expect((await slow.attach(stack, failed({ kind: 'v1', commit: 'abc', at: 'x' }))).message).toBe(
      "Update of stack acme/app/dev failed:\n(the CLI output is left out: the Stack's Secrets were not read within 0.2 s)",
    );
    // More Secrets than are read: likewise.
    const many: Stack = {
      metadata: { name: 'app', namespace: 'team-a', uid: 'many' },
      spec: { envSecrets: Array.from({ length: 65 }, (_, i) => `s${String(i)}`) },
    };
    const m = await late.attach(many, failed({ kind: 'update', name: 'u2' }));
    expect(m.message).toMatch(
      /^Update of stack acme\/app\/dev failed:\n\(the CLI output is left out: the Stack references 65 Secrets/,
    );
  });

  it('N23: a refusal remembered for the namespace names each Stack, not the one that met it', async () => {
    const logs: string[] = [];
    const warnings: string[] = [];
    const a = attacher({
      readSecret: () => Promise.resolve(undefined),
      readLog: (run) => {
        logs.push(run.stackName);
        return Promise.resolve(refused(run.stackName));
      },
      warn: (s, _r, msg) => warnings.push(`${s.metadata.name ?? ''}: ${msg}`),
    });
    const dev: Stack = { ...stack, metadata: { ...stack.metadata, name: 'dev-pr-7', uid: 'dev-uid' } };
    const prod: Stack = { ...stack, metadata: { ...stack.metadata, name: 'prod', uid: 'prod-uid' } };
    const first = await a.attach(dev, event({ kind: 'update', name: 'u1' }, 'failed'));
    const second = await a.attach(prod, event({ kind: 'update', name: 'u2' }, 'failed'));
    // dev met the refusal; prod was not read (remembered), and its text names prod.
    expect(logs).toEqual(['dev-pr-7']);
    expect(first.changes?.unavailable).toBe(`no change details: ${refusal('dev-pr-7')}${NO_TOKEN}`);
    expect(second.changes?.unavailable).toBe(`no change details: ${refusal('prod')}${NO_TOKEN}`);
    expect(second.changes?.unavailable).not.toContain('dev-pr-7');
    expect(warnings).toEqual([`dev-pr-7: no change details: ${refusal('dev-pr-7')}`]);
  });

  it('reads the log before the Secrets; a 403 on pods/log is remembered per namespace, warned once', async () => {
    let now = Date.parse('2026-12-01T12:00:00Z');
    let reads = 0;
    const logs = { n: 0 };
    const warnings: string[] = [];
    const forbidden: typeof readWorkspaceLog = (run) => {
      logs.n++;
      return Promise.resolve(refused(run.stackName));
    };
    const a = attacher({
      now: () => now,
      maxAgeMs: Number.MAX_SAFE_INTEGER,
      readSecret: () => {
        reads++;
        return Promise.resolve(undefined);
      },
      readLog: forbidden,
      warn: (_s, _r, msg) => warnings.push(msg),
    });
    for (const n of ['u1', 'u2', 'u3']) {
      const ev = await a.attach(stack, event({ kind: 'update', name: n }, 'succeeded'));
      expect(ev.changes?.unavailable).toBe(`no change details: ${refusal('app')}${NO_TOKEN}`);
    }
    expect(logs.n).toBe(1);
    expect(warnings).toHaveLength(1);
    // Only the message's redaction read the Secrets (once: cached).
    expect(reads).toBe(1);
    now += FORBIDDEN_TTL_MS + 1;
    await a.attach(stack, event({ kind: 'update', name: 'old' }, 'succeeded'));
    expect(logs.n).toBe(2);
    expect(warnings).toHaveLength(2);
  });

  it('a Secret too large to remove is said, not posted', async () => {
    const big = 'k'.repeat(1024 * 1024 + 1);
    const a = attacher({ readSecret: () => Promise.resolve({ x: big }), readLog: logOf(PREVIEW) });
    const ev = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    expect(ev.changes?.unavailable).toMatch(
      /^no change details: the Stack's Secrets hold 1 values of 1048577 characters/,
    );
  });

  it('leaving the CLI output out keeps only the synthesized head, whatever the shape', () => {
    const why = 'x';
    expect(withoutOutput('Update of stack a/b/c failed: error: sup3r-secret-value', why)).toBe(
      'Update of stack a/b/c failed:\n(the CLI output is left out: x)',
    );
    expect(withoutOutput('Update of stack a/b/c failed:\nerror: sup3r-secret-value', why)).toBe(
      'Update of stack a/b/c failed:\n(the CLI output is left out: x)',
    );
    expect(withoutOutput('Preview of stack a/b/c succeeded', why)).toBe('Preview of stack a/b/c succeeded');
    expect(withoutOutput('sup3r-secret-value\nmore', why)).toBe('(the message is left out: x)');
  });
});

/**
 * The `up` run of the recording (test/fixtures/agent-logs/02-update.log, real PKO v2.9.0 agent and
 * Pulumi CLI) as a PKO v2.0/v2.1 agent logged it: its `up completed` line carried the update
 * summary with the whole config map (PKO #988; agent/pkg/server/server.go logged
 * `"summary", res.Summary`, the Automation API's `UpdateSummary` whose `config` holds `ConfigValue
 * {Value, Secret}` — no JSON tags, so the keys are `Value` and `Secret`; fixed in 2.2 by #990),
 * zap's console encoder writing it after a tab as JSON. `value` is also printed earlier: by a
 * provider's diagnostic (WARN, the CLI's stderr) and in a plain property.
 */
function upRunMarking(value: string): string[] {
  const lines = LOG.split('\n');
  const from = lines.findIndex((l) => l.endsWith('\tUpdating (dev):'));
  const to = lines.findIndex((l) => l.includes('\tserver\tup completed'));
  const run = lines.slice(from, to + 1);
  const stamp = (run[0] ?? '').split('\t')[0] ?? '';
  const at = run.findIndex((l) => l.includes('~ content: "hello" => "hello-again"'));
  run[at] = (run[at] ?? '').replace('"hello-again"', JSON.stringify(value));
  run.splice(
    2,
    0,
    `${stamp}\tWARN\tpulumi\twarning: pkotest:index:Value resource 'a': connecting with password "${value}" failed, retrying`,
  );
  const summary = {
    kind: 'update',
    startTime: '2026-12-01T15:24:31Z',
    message: '',
    environment: { 'exec.kind': 'auto.local' },
    config: {
      'pkonc-changes:region': { Value: 'eu-west-1', Secret: false },
      'pkonc-changes:dbPassword': { Value: value, Secret: true },
    },
    result: 'succeeded',
    endTime: '2026-12-01T15:24:33Z',
    version: 2,
    resourceChanges: { same: 2, update: 2 },
  };
  run[run.length - 1] = `${stamp}\tINFO\tserver\tup completed\t{"summary": ${JSON.stringify(summary)}}`;
  return run;
}

/** `v` as a URL's password: the WHATWG URL userinfo percent-encoding (what a URL built with it holds). */
function userinfoOf(v: string): string {
  const u = new URL('postgres://bot@db.example/');
  u.password = v;
  return u.password;
}

describe('values the run marks secret (R21) and every encoding of a Secret value (N21)', () => {
  const MARKED = 'Zx9-value-QQ';

  it('R21: a value the agent log marks "Secret":true is in no change set or message; [secret] instead', async () => {
    const lines = upRunMarking(MARKED);
    expect(lines.join('\n')).toContain(`"pkonc-changes:dbPassword":{"Value":"${MARKED}","Secret":true}`);
    // The value is in no Secret the Stack references.
    const a = attacher({
      readSecret: () => Promise.resolve({ x: 'unrelated-secret-value' }),
      readLog: logOf(lines),
    });
    const ok = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    const set = ok.changes?.set;
    expect(set?.resources.find((r) => r.name === 'f')?.diff).toContain('~ content: "hello" => "[secret]"');
    expect(JSON.stringify(ok)).not.toContain(MARKED);
    // A failed run's message holds the CLI output, the provider's line with the value among it.
    const failed = stackEvent({
      identity: {
        stack: 'stack-uid',
        run: { kind: 'update', name: 'u2' },
        phase: { kind: 'failed' },
      },
      message: `Update of stack acme/app/dev failed:\nup failed: exit status 255\nstderr: error: pkotest: password "${MARKED}" rejected by the server`,
    });
    const b = attacher({ readSecret: () => Promise.resolve(undefined), readLog: logOf(lines) });
    const ev = await b.attach(stack, { ...failed, id: eventId(failed.identity) });
    expect(ev.message).toBe(
      'Update of stack acme/app/dev failed:\nup failed: exit status 255\nstderr: error: pkotest: password "[secret]" rejected by the server',
    );
    expect(JSON.stringify(ev)).not.toContain(MARKED);
    expect(JSON.stringify(ev.changes)).toContain('[secret]');
  });

  it('R21: a mark (program output) never hides which resource changes', async () => {
    // A program prints a "secret" that is the File resource's type: the type, name and URN stay.
    const lines = [
      ...PREVIEW.slice(0, 20),
      '2026-12-01T15:24:31.140Z\tINFO\tpulumi\t{"Value":"pkotest:index:File","Secret":true}',
      ...PREVIEW.slice(20),
    ];
    const a = attacher({ readSecret: () => Promise.resolve(undefined), readLog: logOf(lines) });
    const ev = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    const f = ev.changes?.set?.resources.find((r) => r.name === 'f');
    expect(f?.type).toBe('pkotest:index:File');
    expect(f?.urn).toBe('urn:pulumi:dev::pkonc-changes::pkotest:index:File::f');
  });

  it('R21: the mark in the message itself (another logger, JSON quoted in a field) is enough', async () => {
    const a = attacher({ readSecret: () => Promise.resolve(undefined), readLog: logOf(PREVIEW) });
    const quoted = JSON.stringify({
      cfg: JSON.stringify({ 'proj:key': { value: 'q-Marked-77', secret: true } }),
    });
    const failed = stackEvent({
      identity: {
        stack: 'stack-uid',
        run: { kind: 'update', name: 'u3' },
        phase: { kind: 'failed' },
      },
      message: `Update of stack acme/app/dev failed:\n${quoted}\nerror: key q-Marked-77 is invalid`,
    });
    const ev = await a.attach(stack, { ...failed, id: eventId(failed.identity) });
    expect(ev.message).not.toContain('q-Marked-77');
    expect(ev.message).toContain('error: key [secret] is invalid');
  });

  it('N21: unpadded and URL-safe base64, form-encoding, lowercase hex, Basic credentials and URLs of a Secret value go', async () => {
    const value = 'Pa ss/wörd?+~7>';
    const b64 = Buffer.from(value).toString('base64');
    const forms = {
      unpadded: b64.replace(/=+$/, ''),
      urlSafe: Buffer.from(value).toString('base64url'),
      urlSafePadded: b64.replaceAll('+', '-').replaceAll('/', '_'),
      form: new URLSearchParams({ q: value }).toString().slice(2),
      lowerHex: encodeURIComponent(value).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
      basic: Buffer.from(`deploy-bot:${value}`).toString('base64'),
      userinfo: userinfoOf(value),
    };
    // Each form differs from the value and from the forms redacted before (verbatim, padded base64, encodeURIComponent).
    const before = [value, b64, encodeURIComponent(value)];
    for (const f of Object.values(forms)) expect(before).not.toContain(f);
    expect(new Set(Object.values(forms)).size).toBe(Object.keys(forms).length);
    const shown = [
      `~ content: "hello" => "${forms.unpadded}"`,
      `~ content: "hello" => "${forms.urlSafe}"`,
      `~ content: "hello" => "${forms.urlSafePadded}"`,
      `~ content: "hello" => "https://api.example/x?user=bot&q=${forms.form}&z=1"`,
      `~ content: "hello" => "https://api.example/x?q=${forms.lowerHex}"`,
      `~ content: "hello" => "Authorization: Basic ${forms.basic}"`,
      `~ content: "hello" => "postgres://bot:${forms.userinfo}@db.example:5432/app"`,
    ];
    const lines = PREVIEW.flatMap((l) =>
      l.includes('~ content: "hello" => "hello-again"')
        ? shown.map((s) => l.replace('~ content: "hello" => "hello-again"', s))
        : [l],
    );
    const message = `Update of stack acme/app/dev failed:\n${shown.join('\n')}\nerror: boom`;
    const a = attacher({ readSecret: () => Promise.resolve({ x: value }), readLog: logOf(lines) });
    const done = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    const failedEv = stackEvent({
      identity: {
        stack: 'stack-uid',
        run: { kind: 'update', name: 'u2' },
        phase: { kind: 'failed' },
      },
      message,
    });
    const failed = await a.attach(stack, { ...failedEv, id: eventId(failedEv.identity) });
    const diff = done.changes?.set?.resources.find((r) => r.name === 'f')?.diff ?? [];
    expect(diff.filter((d) => d.includes('[redacted]'))).toHaveLength(shown.length);
    for (const [name, f] of Object.entries(forms)) {
      expect(JSON.stringify(done), name).not.toContain(f);
      expect(failed.message, name).not.toContain(f);
    }
    expect(diff).toContain('~ content: "hello" => "Authorization: Basic [redacted]"');
    expect(failed.message).toContain('postgres://bot:[redacted]@db.example:5432/app');
    expect(failed.message).toContain('https://api.example/x?user=bot&q=[redacted]&z=1');
  });
});

describe('secret outputs and Pulumi Cloud markers', () => {
  it("an up's secret outputs (PKO's outputs Secret, pulumi.com/secrets) go as [secret]; the others stay", async () => {
    const out = 'postgres://app:Out-Secret-42@db.internal:5432/app';
    const lines = PREVIEW.map((l) =>
      l.replace('~ content: "hello" => "hello-again"', `~ content: "hello" => ${JSON.stringify(out)}`),
    );
    const read: string[] = [];
    const up: Update = { ...update('u1'), status: { ...update('u1').status, outputs: 'u1-stack-outputs' } };
    const a = new ChangeAttacher({
      kubeConfig: new KubeConfig(),
      update: () => up,
      readSecret: () => Promise.resolve(undefined),
      logger: createLogger({ level: 'silent' }),
      readLog: logOf(lines),
      readSecretObject: (ns, name) => {
        read.push(`${ns}/${name}`);
        return Promise.resolve({
          data: { dbUrl: JSON.stringify(out), bucket: '"hello"' },
          annotations: { 'pulumi.com/secrets': '["dbUrl"]' },
        });
      },
    });
    const ev = await a.attach(stack, event({ kind: 'update', name: 'u1' }, 'succeeded'));
    expect(read).toEqual(['team-a/u1-stack-outputs']);
    const diff = ev.changes?.set?.resources.find((r) => r.name === 'f')?.diff;
    expect(diff).toContain('~ content: "hello" => "[secret]"');
    expect(JSON.stringify(ev)).not.toContain('Out-Secret-42');
  });
});
