/** The PullRequestPreview gate over change sets (src/changes/gate.ts) and its spec checks (src/api/gate.ts). */
import { describe, expect, it } from 'vitest';
import { checkGate, parseGate } from '../../src/api/gate.ts';
import { compileTypeGlob, evaluateGate, gateDescription } from '../../src/changes/gate.ts';
import {
  INCOMPLETE_REASON_TEXT,
  type ChangeSet,
  type ResourceChange,
  type StepOp,
} from '../../src/changes/types.ts';

const res = (op: StepOp, type: string, name: string): ResourceChange => ({
  op,
  type,
  name,
  urn: `urn:pulumi:dev::app::${type}::${name}`,
  retain: false,
  diff: [],
  diffOmitted: 0,
});

function set(resources: ResourceChange[], extra: Partial<ChangeSet> = {}): ChangeSet {
  const counts: Partial<Record<StepOp, number>> = {};
  for (const r of resources) counts[r.op] = (counts[r.op] ?? 0) + 1;
  return {
    source: 'workspace-log',
    complete: true,
    incomplete: [],
    failed: false,
    counts,
    countsFrom: 'summary',
    resources,
    errors: [],
    omitted: { resources: 0, diffLines: 0, longLines: 0, errors: 0 },
    ...extra,
  };
}

describe('compileTypeGlob', () => {
  it('* is any characters (also / and :), ? one, the rest literal (regex characters too)', () => {
    const m = (glob: string, type: string): boolean => compileTypeGlob(glob).matches(type);
    expect(m('aws:*', 'aws:s3/bucket:Bucket')).toBe(true);
    expect(m('aws:rds/*', 'aws:s3/bucket:Bucket')).toBe(false);
    expect(m('pkotest:index:Fil?', 'pkotest:index:File')).toBe(true);
    expect(m('pkotest:index:File', 'pkotest:index:FileX')).toBe(false);
    expect(m('a.b', 'axb')).toBe(false);
    expect(m('(a|b)+', '(a|b)+')).toBe(true);
    expect(m('*', '')).toBe(true);
  });

  it('stays linear on a hostile glob and a long type (RE2: no backtracking)', () => {
    const glob = `${'*a'.repeat(120)}b`;
    const t0 = performance.now();
    expect(compileTypeGlob(glob).matches('a'.repeat(5_000))).toBe(false);
    expect(performance.now() - t0).toBeLessThan(2_000);
  });
});

describe('evaluateGate', () => {
  const file = res('delete', 'pkotest:index:File', 'a');
  const value = res('update', 'pkotest:index:Value', 'v');
  const db = res('replace', 'aws:rds/instance:Instance', 'db');

  it('fails on a gated operation, counting from the summary, naming the resources in display order', () => {
    const r = evaluateGate({ operations: ['delete', 'replace'] }, set([value, file, db]));
    expect(r).toEqual({
      kind: 'match',
      counts: [
        ['delete', 1],
        ['replace', 1],
      ],
      resources: [file, db],
    });
    if (r.kind === 'pass') throw new Error('expected a match');
    expect(gateDescription(r)).toBe(
      'gate: 1 to delete, 1 to replace: pkotest:index:File::a, aws:rds/instance:Instance::db',
    );
  });

  it('passes when nothing gated is planned, or only on other types', () => {
    expect(evaluateGate({ operations: ['delete'] }, set([value]))).toEqual({ kind: 'pass' });
    expect(
      evaluateGate({ operations: ['delete', 'replace'], resourceTypes: ['aws:*'] }, set([file])),
    ).toEqual({
      kind: 'pass',
    });
    expect(
      evaluateGate({ operations: ['delete', 'replace'], resourceTypes: ['aws:rds/*'] }, set([file, db])),
    ).toMatchObject({ kind: 'match', counts: [['replace', 1]], resources: [db] });
  });

  it('fails closed: an incomplete change set, or gated operations on resources whose lines were not kept', () => {
    expect(
      evaluateGate({ operations: ['delete'] }, set([value], { complete: false, incomplete: ['no-summary'] })),
    ).toEqual({
      kind: 'unknown',
      why: 'change set incomplete: the log has no summary of the run (cut, rotated, or the run stopped early): counts are a lower bound',
    });
    // A gated resource read in an incomplete set is named: the program cannot remove the CLI's lines.
    const db = res('delete', 'aws:rds/instance:Instance', 'prod-db');
    const partial = evaluateGate(
      { operations: ['delete'] },
      set([value, db], { complete: false, incomplete: ['summary-twice'] }),
    );
    expect(partial).toMatchObject({ kind: 'match', counts: [['delete', 1]], resources: [db] });
    if (partial.kind === 'pass') throw new Error('expected a match');
    expect(gateDescription(partial)).toBe(
      "gate: 1 to delete or more: aws:rds/instance:Instance::prod-db (change set incomplete: the program printed text that looks like Pulumi's summary: the log holds more than one)",
    );
    const capped = set([value], {
      counts: { update: 1, delete: 3 },
      omitted: { resources: 3, diffLines: 0, longLines: 0, errors: 0 },
    });
    const r = evaluateGate({ operations: ['delete'], resourceTypes: ['aws:*'] }, capped);
    expect(r).toEqual({ kind: 'unknown', why: '3 resource lines were not kept, so their types are unknown' });
    if (r.kind === 'pass') throw new Error('expected unknown');
    expect(gateDescription(r)).toBe('gate: 3 resource lines were not kept, so their types are unknown');
    // Without types the summary's count is exact: a match, whatever was kept.
    expect(evaluateGate({ operations: ['delete'] }, capped)).toMatchObject({
      kind: 'match',
      counts: [['delete', 3]],
    });
  });

  it('names at most 10 resources, then …', () => {
    const many = Array.from({ length: 12 }, (_, i) => res('delete', 't:m:R', `r${String(i)}`));
    const r = evaluateGate({ operations: ['delete'] }, set(many));
    if (r.kind === 'pass') throw new Error('expected a match');
    const d = gateDescription(r);
    expect(d.startsWith('gate: 12 to delete: t:m:R::r0, ')).toBe(true);
    expect(d.endsWith('t:m:R::r9 …')).toBe(true);
  });
});

describe('checkGate / parseGate', () => {
  it('accepts the documented shape and normalises it', () => {
    expect(checkGate({ operations: ['delete', 'delete', 'replace'], resourceTypes: [] })).toEqual({
      gate: { operations: ['delete', 'replace'] },
    });
    expect(parseGate('{"operations":["delete"],"resourceTypes":["aws:*"]}')).toEqual({
      gate: { operations: ['delete'], resourceTypes: ['aws:*'] },
    });
  });

  it('says what is wrong with anything else (the gate then fails closed)', () => {
    expect(checkGate({ operations: [] }).invalid).toBe(
      'spec.gate.operations must list at least one operation',
    );
    expect(checkGate({ operations: ['same'] }).invalid).toMatch(
      /^spec.gate.operations: "same" is not one of create, /,
    );
    expect(checkGate({ operations: ['delete'], resourceTypes: Array(17).fill('x') }).invalid).toMatch(
      /at most 16 globs/,
    );
    expect(checkGate({ operations: ['delete'], resourceTypes: ['x'.repeat(257)] }).invalid).toMatch(
      /1 to 256/,
    );
    expect(parseGate('{').invalid).toBe('the gate annotation is not JSON');
    expect(parseGate(' '.repeat(17 * 1024)).invalid).toBe('the gate annotation is over 16 KiB');
  });
});

describe('B16: the gate fails closed on every incomplete change set', () => {
  const reasons: ChangeSet['incomplete'] = [
    'no-run',
    'no-summary',
    'summary-twice',
    'summary-mismatch',
    'no-end',
    'interleaved',
    'unexpected-output',
    'garbled',
    'input-cap',
    'line-cut',
    'partial-events',
  ];
  it.each(reasons)('B16 %s: unknown, even when nothing gated is listed', (reason) => {
    // What a forged summary leaves when the parser is fooled: no delete listed, a "clean" count.
    const fooled = set([res('same', 'pulumi:pulumi:Stack', 'app-dev')], {
      complete: false,
      incomplete: [reason],
    });
    expect(evaluateGate({ operations: ['delete'] }, fooled)).toEqual({
      kind: 'unknown',
      why: `change set incomplete: ${INCOMPLETE_REASON_TEXT[reason]}`,
    });
    expect(evaluateGate({ operations: ['delete'], resourceTypes: ['aws:rds/*'] }, fooled).kind).toBe(
      'unknown',
    );
  });
});
