/**
 * B16 at the read: a program that pads the workspace log past the reader's caps, or forges the
 * agent's end line ahead of the real deletes, cannot make the controller stop reading before the
 * CLI's real lines and call what it read complete.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { Update } from '../../src/api/pko.ts';
import { evaluateGate } from '../../src/changes/gate.ts';
import { ChangeAttacher } from '../../src/enrich/changes.ts';
import type { WorkspaceLogRead, readWorkspaceLog } from '../../src/kube/workspace-log.ts';
import { createLogger } from '../../src/log.ts';
import { event, logRead, stack } from './kit.ts';

/** The delete preview of a real recording (test/fixtures/agent-logs/04-delete.log), as lines. */
const LOG = readFileSync(new URL('../fixtures/agent-logs/04-delete.log', import.meta.url), 'utf8').split(
  '\n',
);
const REAL = LOG.slice(0, LOG.findIndex((l) => l.includes('\tserver\tpreview completed')) + 1);
const DELETE = REAL.findIndex((l) => l.endsWith('\tpulumi\t    - pkotest:index:Value: (delete)'));
const AT = '2026-12-01T15:24:37.250Z';
/** What the program writes before it exits: a summary into the CLI's stdout, an end line into the agent's. */
const FORGED = [
  `${AT}\tINFO\tpulumi\tResources:`,
  `${AT}\tINFO\tpulumi\t    1 unchanged`,
  `${AT}\tINFO\tpulumi\t`,
  `${AT}\tINFO\tserver\tpreview completed`,
];

function attacher(update: Update, readLog: typeof readWorkspaceLog): ChangeAttacher {
  return new ChangeAttacher({
    kubeConfig: new KubeConfig(),
    update: () => update,
    readSecret: () => Promise.resolve(undefined),
    logger: createLogger({ level: 'silent' }),
    readLog,
    maxAgeMs: 1e13,
    waitMs: 10_000,
  });
}

describe('B16: a read that did not see the whole log is never complete', () => {
  const done: Update = {
    metadata: { name: 'u1', namespace: 'team-a', uid: 'uid-u1' },
    spec: { workspaceName: 'app', type: 'preview' },
    status: { startTime: '2026-12-01T15:24:36Z', endTime: '2026-12-01T15:24:38Z' },
  };
  // The reader passed the forged lines and stopped there (its byte cap reached by padding, a
  // deadline, a broken connection, a stop): the real delete and summary were not read.
  const cases: [string, Partial<WorkspaceLogRead>, string][] = [
    ['the byte cap', { end: 'byteLimit', droppedFragment: true }, 'input-cap'],
    ['the deadline', { end: 'deadline' }, 'no-end'],
    ['a broken connection', { end: 'interrupted' }, 'no-end'],
    ['a stop the controller did not make after the result', { end: 'stopped' }, 'no-end'],
    ['a fragment at the end of the log', { end: 'eof', droppedFragment: true }, 'no-end'],
    ['a line cut at the line cap', { cutLines: 1 }, 'input-cap'],
    ['a container restart during the run', { restartedDuringRun: true }, 'no-run'],
  ];
  it.each(cases)('B16 %s: incomplete, the gate fails', async (_what, how, reason) => {
    const lines = [...REAL.slice(0, DELETE), ...FORGED];
    const a = attacher(done, async (_run, sink) => {
      for (const l of lines) await sink(l, false);
      return logRead(lines.length, how);
    });
    const set = (await a.attach(stack, event('succeeded'))).changes?.set;
    expect(set?.complete).toBe(false);
    expect(set?.incomplete).toContain(reason);
    if (set === undefined) throw new Error('no change set');
    expect(evaluateGate({ operations: ['delete'] }, set).kind).not.toBe('pass');
  });

  it('the whole recording read to its end is complete (what the cases above are measured against)', async () => {
    const a = attacher(done, async (_run, sink) => {
      for (const l of REAL) await sink(l, false);
      return logRead(REAL.length, {});
    });
    const set = (await a.attach(stack, event('succeeded'))).changes?.set;
    expect(set).toMatchObject({ complete: true, counts: { delete: 1 } });
  });
});

describe('B16: a forged end line ahead of the real deletes does not end the follow at the result', () => {
  it('B16: the real lines 300 ms behind the forged end line are read; the delete is listed', async () => {
    const update: Update = {
      metadata: { name: 'u1', namespace: 'team-a', uid: 'uid-u2' },
      spec: { workspaceName: 'app', type: 'preview' },
      status: { startTime: new Date(Date.now() - 5_000).toISOString() },
    };
    const readLog: typeof readWorkspaceLog = async (_run, sink, opts) => {
      let n = 0;
      for (const l of [...REAL.slice(0, DELETE), ...FORGED]) {
        await sink(l, false);
        n++;
      }
      // The real tail is behind in the stream (the node, the API server, a burst of output).
      await new Promise((r) => setTimeout(r, 300));
      const signal = opts.signal;
      if (signal === undefined || signal.aborted) return logRead(n, { end: 'stopped' });
      for (const l of REAL.slice(DELETE)) {
        await sink(l, false);
        n++;
      }
      // A follow ends when the controller stops it.
      await new Promise<void>((resolve) => {
        const done = (): void => {
          resolve();
        };
        signal.addEventListener('abort', done, { once: true });
        if (signal.aborted) done();
      });
      return logRead(n, { end: 'stopped' });
    };
    const a = attacher(update, readLog);
    await a.attach(stack, event('started'));
    await new Promise((r) => setTimeout(r, 50));
    // The run ended (the agent wrote every real line); PKO wrote the result.
    update.status = { ...update.status, endTime: new Date().toISOString() };
    const set = (await a.attach(stack, event('succeeded'))).changes?.set;
    expect(set?.resources.find((r) => r.op === 'delete')).toMatchObject({ name: 'b' });
    expect(set?.complete).toBe(false);
    if (set === undefined) throw new Error('no change set');
    expect(evaluateGate({ operations: ['delete'] }, set).kind).toBe('match');
    a.stop();
  });
});
