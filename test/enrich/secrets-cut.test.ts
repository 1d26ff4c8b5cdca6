/**
 * A line the log reader cut (longer than its 16 KiB) whose kept part may mark values secret
 * (issue 36, F1; case R21): the attacher withholds the change set's details and the message's
 * CLI output rather than post a value whose mark was in the part never read.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { eventId, type EventIdentity, type NotificationEvent } from '../../src/api/event.ts';
import type { Stack, Update } from '../../src/api/pko.ts';
import { ChangeAttacher } from '../../src/enrich/changes.ts';
import { CUT_LINE_OVERFLOW } from '../../src/enrich/secrets.ts';
import type { readWorkspaceLog } from '../../src/kube/workspace-log.ts';
import { createLogger } from '../../src/log.ts';
import { stackEvent } from '../template/fixtures.ts';

const stack: Stack = {
  metadata: { name: 'app', namespace: 'team-a', uid: 'stack-uid' },
  spec: { stack: 'dev' },
};
const SECRET = 'Zx9-value-QQ';
const T = '2026-12-01T15:24:37.100Z';

/** PKO 2.0/2.1's `up completed` with 300 plain config keys sorting before the marked one. */
function upCompleted(): string {
  const cfg: Record<string, { Value: string; Secret: boolean }> = {};
  for (let i = 0; i < 300; i++)
    cfg[`aws:key${String(i).padStart(3, '0')}`] = { Value: 'x'.repeat(40), Secret: false };
  cfg['proj:dbPassword'] = { Value: SECRET, Secret: true };
  return `${T}\tINFO\tserver\tup completed with an error\t${JSON.stringify({ summary: { config: cfg } })}`;
}

/** A reader passing `lines`, each with whether it was cut, as src/kube/workspace-log.ts does. */
function readerOf(lines: readonly (readonly [string, boolean])[]): typeof readWorkspaceLog {
  return async (_run, sink) => {
    for (const [l, cut] of lines) await sink(l, cut);
    return {
      ok: true,
      pod: 'app-workspace-0',
      lines: lines.length,
      bytes: 0,
      cutLines: lines.filter(([, c]) => c).length,
      end: 'eof',
      restartedDuringRun: false,
      droppedFragment: false,
      message: 'read',
    };
  };
}

describe('a cut log line that may mark values secret (R21, issue 36 F1)', () => {
  it('R21: withholds the change set and the CLI output; the value is nowhere', async () => {
    const line = upCompleted();
    expect(Buffer.byteLength(line)).toBeGreaterThan(16 * 1024);
    const kept = Buffer.from(line)
      .subarray(0, 16 * 1024)
      .toString('utf8');
    expect(kept).not.toContain('dbPassword');
    const provider = `${T}\tWARN\tpulumi\terror: provider said: password ${SECRET} rejected`;
    const update: Update = {
      metadata: { name: 'u1', namespace: 'team-a', uid: 'uid-u1' },
      spec: { workspaceName: 'app', type: 'up' },
      status: { startTime: '2026-12-01T15:24:36Z', endTime: '2026-12-01T15:24:38Z' },
    };
    const a = new ChangeAttacher({
      kubeConfig: new KubeConfig(),
      update: () => update,
      logger: createLogger({ level: 'silent' }),
      readSecret: () => Promise.resolve({}),
      readLog: readerOf([
        [`${T}\tINFO\tpulumi\tUpdating (dev):`, false],
        [provider, false],
        [kept, true],
      ]),
      maxAgeMs: 1e13,
      waitMs: 3000,
    });
    const identity = {
      stack: 'stack-uid',
      run: { kind: 'update', name: 'u1' },
      phase: { kind: 'failed' },
    } as EventIdentity;
    const e = stackEvent({ identity, id: eventId(identity) });
    const ev: NotificationEvent = {
      ...e,
      message: `Update of stack dev failed:\nerror: provider said: password ${SECRET} rejected`,
      metadata: { ...e.metadata, permalink: undefined },
    };
    const out = await a.attach(stack, ev);
    expect(JSON.stringify(out)).not.toContain(SECRET);
    expect(out.changes?.set).toBeUndefined();
    expect(out.changes?.unavailable).toContain(CUT_LINE_OVERFLOW);
    expect(out.message).toContain(CUT_LINE_OVERFLOW);
  });
});
