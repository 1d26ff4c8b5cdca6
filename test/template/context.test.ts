import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONTEXT_KEYS, templateContext } from '../../src/template/index.ts';
import { bareEvent, COMMIT, stackEvent } from './fixtures.ts';

const opts = { clusterName: 'prod-eu', providerType: 'github', commentsEnabled: true } as const;

interface ReadmeRow {
  key: string;
  type: string;
  nullWhen: string;
}

/** Rows of the "Context keys" table of templates/README.md. */
function readmeRows(): ReadmeRow[] {
  const text = readFileSync(new URL('../../templates/README.md', import.meta.url), 'utf8');
  const section = text.split(/^## Context keys$/m)[1]?.split(/^## /m)[0] ?? '';
  const rows: ReadmeRow[] = [];
  for (const line of section.split('\n')) {
    if (!line.startsWith('|')) continue;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const key = /^`([^`]+)`$/.exec(cells[0] ?? '')?.[1];
    if (key !== undefined && cells.length === 4)
      rows.push({ key, type: cells[1] ?? '', nullWhen: cells[3] ?? '' });
  }
  return rows;
}

describe('templateContext', () => {
  it('templates/README.md lists exactly the keys of the context, in order', () => {
    const keys = Object.keys(templateContext(stackEvent(), opts));
    expect(readmeRows().map((r) => r.key)).toEqual(keys);
    expect(keys).toEqual([...CONTEXT_KEYS]);
  });

  it('every documented key is present, also when the event knows little (F26)', () => {
    const ctx = templateContext(bareEvent({ metadata: {} }), opts) as unknown as Record<string, unknown>;
    for (const k of CONTEXT_KEYS) expect(Object.hasOwn(ctx, k), k).toBe(true);
    for (const k of [
      'commit',
      'shortCommit',
      'repository',
      'branch',
      'permalink',
      'pulumiStack',
      'pullRequest',
      'revision',
    ]) {
      expect(ctx[k], k).toBeNull();
    }
  });

  it('keys that can be null are exactly those the README gives a "null when"', () => {
    const nullable = readmeRows()
      .filter((r) => r.nullWhen !== '')
      .map((r) => r.key)
      .sort();
    const ctx = templateContext(
      bareEvent({ reason: 'StackStalled', message: 'Stack team-a/app stalled', metadata: {} }),
      opts,
    ) as unknown as Record<string, unknown>;
    const nulls = Object.keys(ctx)
      .filter((k) => ctx[k] === null)
      .sort();
    expect(nulls).toEqual(nullable);
  });

  it('README types match the values', () => {
    const ctx = templateContext(stackEvent(), opts) as unknown as Record<string, unknown>;
    for (const row of readmeRows()) {
      const v = ctx[row.key];
      if (v === null) continue;
      const want = row.type === 'map' ? 'object' : row.type;
      expect(typeof v, row.key).toBe(want);
    }
  });

  it('fills values from the event', () => {
    const ctx = templateContext(stackEvent(), opts);
    expect(ctx).toMatchObject({
      clusterName: 'prod-eu',
      namespace: 'team-a',
      kind: 'Stack',
      stackName: 'app',
      pulumiStack: 'acme/app/dev',
      reason: 'UpdateFailed',
      operation: 'update',
      phase: 'failed',
      state: 'failure',
      emoji: '❌',
      title: 'Update of stack acme/app/dev failed',
      summary: 'Update of stack acme/app/dev failed',
      output: 'error: resource failed',
      commit: COMMIT,
      shortCommit: '1111111',
      failures: '2',
      providerType: 'github',
      truncated: false,
      truncationNote: null,
    });
    expect({ ...ctx.metadata }).toEqual(stackEvent().metadata);
    expect({ ...ctx.labels }).toEqual({ team: 'a' });
  });

  it('StackStalled has no operation', () => {
    const ctx = templateContext(stackEvent({ reason: 'StackStalled', message: 'stalled' }), opts);
    expect(ctx.operation).toBeNull();
    expect(ctx.phase).toBe('stalled');
    expect(ctx.title).toBe('Stack acme/app/dev stalled');
  });

  it('removes escape codes from the message', () => {
    const ctx = templateContext(
      stackEvent({ message: 'Update failed:\n\u001b[31merror\u001b[0m: boom\r\n' }),
      opts,
    );
    expect(ctx.message).toBe('Update failed:\nerror: boom');
    expect(ctx.output).toBe('error: boom');
  });

  it('has no prototype (nothing inherited is reachable)', () => {
    const ctx = templateContext(stackEvent(), opts);
    expect(Object.getPrototypeOf(ctx)).toBeNull();
    expect(Object.getPrototypeOf(ctx.metadata)).toBeNull();
    expect(Object.getPrototypeOf(ctx.labels)).toBeNull();
  });

  it('markerId is stable per cluster, namespace and Stack name', () => {
    const id = (cluster: string, ns: string, name: string) =>
      templateContext(
        stackEvent({ involvedObject: { ...stackEvent().involvedObject, namespace: ns, name } }),
        {
          ...opts,
          clusterName: cluster,
        },
      ).markerId;
    expect(id('c', 'n', 's')).toBe(id('c', 'n', 's'));
    expect(id('c', 'n', 's')).toMatch(/^[0-9a-f]{16}$/);
    expect(
      new Set([id('c', 'n', 's'), id('c2', 'n', 's'), id('c', 'n2', 's'), id('c', 'n', 's2')]).size,
    ).toBe(4);
  });
});
