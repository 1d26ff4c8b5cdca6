/**
 * B16 in the follow: a run's log is followed from its start and stopped a grace after its result;
 * a `server … completed` line the previewed program writes into the agent's output stops nothing,
 * and the parser is told the run's end by the Update (its Complete condition), not by the log.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { Update } from '../../src/api/pko.ts';
import { ChangeAttacher } from '../../src/enrich/changes.ts';
import type { readWorkspaceLog } from '../../src/kube/workspace-log.ts';
import { createLogger } from '../../src/log.ts';
import { completeUpdate, event, logRead, stack } from './kit.ts';

/** The delete preview of a real recording, as log lines. */
const LOG = readFileSync(new URL('../fixtures/agent-logs/04-delete.log', import.meta.url), 'utf8');
const PREVIEW = LOG.slice(0, LOG.indexOf('\n', LOG.indexOf('\tpreview completed')) + 1)
  .split('\n')
  .filter((l) => l !== '');
const DELETE = PREVIEW.findIndex((l) => l.endsWith('\tpulumi\t    - pkotest:index:Value: (delete)'));
/** What the program writes into the agent's stdout before the delete is printed. */
const FORGED = [
  '2026-12-01T15:24:37.287Z\tINFO\tpulumi\tResources:',
  '2026-12-01T15:24:37.287Z\tINFO\tpulumi\t    3 unchanged',
  '2026-12-01T15:24:37.287Z\tINFO\tserver\tpreview completed',
];

describe('B16: the follow of a run ends by the Update, never by a log line', () => {
  it('B16: a forged end line before the real delete stops neither the follow nor the run', async () => {
    const update: Update = {
      metadata: { name: 'u1', namespace: 'team-a', uid: 'uid-u1' },
      spec: { workspaceName: 'app', type: 'preview' },
      status: { startTime: new Date(Date.now() - 5_000).toISOString() },
    };
    let abortedAfterForged: boolean | undefined;
    let release: () => void = () => undefined;
    const written = new Promise<void>((resolve) => {
      release = resolve;
    });
    // A follow: lines arrive while the run goes on; the stream ends when the caller aborts it.
    const readLog: typeof readWorkspaceLog = async (_run, sink, opts) => {
      const lines = [...PREVIEW.slice(0, DELETE), ...FORGED, ...PREVIEW.slice(DELETE)];
      for (const [i, l] of lines.entries()) {
        if (opts.signal?.aborted === true) break;
        await sink(l);
        if (i === DELETE + FORGED.length - 1) {
          await new Promise((r) => setTimeout(r, 50));
          abortedAfterForged = opts.signal?.aborted;
        }
      }
      release();
      if (opts.signal !== undefined && !opts.signal.aborted)
        await new Promise((r) => opts.signal?.addEventListener('abort', r, { once: true }));
      return logRead(lines.length);
    };
    const a = new ChangeAttacher({
      kubeConfig: new KubeConfig(),
      update: () => update,
      readSecret: () => Promise.resolve(undefined),
      logger: createLogger({ level: 'silent' }),
      readLog,
      followGraceMs: 100,
    });
    await a.attach(stack, event('started'));
    await written;
    expect(abortedAfterForged).toBe(false);
    // The run's result: the Update is complete now.
    completeUpdate(update);
    const done = await a.attach(stack, event('succeeded'));
    const set = done.changes?.set;
    expect(set?.resources.find((r) => r.op === 'delete')).toMatchObject({
      name: 'b',
      type: 'pkotest:index:Value',
    });
    expect(set?.complete).toBe(false);
    expect(set?.incomplete).toContain('summary-twice');
    a.stop();
  });
  it('the result of a run whose end line was read stops the follow at once, not after the grace', async () => {
    const update: Update = {
      metadata: { name: 'u1', namespace: 'team-a', uid: 'uid-u2' },
      spec: { workspaceName: 'app', type: 'preview' },
      status: { startTime: new Date(Date.now() - 5_000).toISOString() },
    };
    let release: () => void = () => undefined;
    const written = new Promise<void>((resolve) => {
      release = resolve;
    });
    let abortedAt: number | undefined;
    const readLog: typeof readWorkspaceLog = async (_run, sink, opts) => {
      for (const l of PREVIEW) await sink(l);
      release();
      if (opts.signal !== undefined && !opts.signal.aborted)
        await new Promise((r) => opts.signal?.addEventListener('abort', r, { once: true }));
      abortedAt = Date.now();
      return logRead(PREVIEW.length, { end: 'stopped' });
    };
    const a = new ChangeAttacher({
      kubeConfig: new KubeConfig(),
      update: () => update,
      readSecret: () => Promise.resolve(undefined),
      logger: createLogger({ level: 'silent' }),
      readLog,
      // Longer than the event's wait: a follow that waited for it would send no change set.
      followGraceMs: 10_000,
      waitMs: 3_000,
    });
    await a.attach(stack, event('started'));
    await written;
    // The end line alone stops nothing: the API has not said the run is over.
    await new Promise((r) => setTimeout(r, 50));
    expect(abortedAt).toBeUndefined();
    completeUpdate(update);
    const resultAt = Date.now();
    const done = await a.attach(stack, event('succeeded'));
    expect(abortedAt).toBeDefined();
    expect((abortedAt ?? Infinity) - resultAt).toBeLessThan(1_000);
    expect(done.changes?.set?.complete).toBe(true);
    expect(done.changes?.set?.counts.delete).toBe(1);
    a.stop();
  });
});
