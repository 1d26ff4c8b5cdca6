/**
 * B16: the previewed program's output can add changes, never hide one. A real recording
 * (test/fixtures/agent-logs/04-delete.log, the preview that deletes Value `b`; deletes are printed
 * after the program exits) with the lines a program can put into the log spliced in as it would
 * splice them: INFO lines written into the CLI's stdout (`/proc/<pid>/fd/1`), partial lines (no
 * newline: the CLI's next line gets them as a prefix), whole agent entries written into the
 * agent's own stdout (forged `server` lines, any time stamp), and WARN lines (what the program's
 * `console.log` becomes with `--diff`). Each gives the real delete in `resources`, or an
 * incomplete change set with a reason a reviewer can read; never complete without the delete; the
 * gate {operations: [delete]} never passes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { evaluateGate, gateDescription } from '../../src/changes/gate.ts';
import { parseWorkspaceLog } from '../../src/changes/parse.ts';
import type { ChangeSet, StepOp } from '../../src/changes/types.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 200);
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 20261203;

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'agent-logs');
const recording = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8');

/**
 * The preview run of every recording: up to the first banner after the agent's first end line
 * (09: the whole log, two previews at once; 10-*: a program forged lines in it, banners too).
 */
const previews = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.log'))
  .sort()
  .map((f) => {
    const lines = recording(f).split('\n');
    const end = lines.findIndex((l) => /\tserver\t(?:preview|up|refresh|destroy) completed/.test(l));
    const next = lines.findIndex((l, i) => i > end && /\tpulumi\t(?:Previewing|Updating) /.test(l));
    const run = lines.slice(0, f.startsWith('09-') || next < 0 ? undefined : next);
    // The Update's end as PKO writes it (whole seconds): the run's last line's second.
    const last = run.filter((l) => /^\d{4}-/.test(l)).at(-1) ?? '';
    const endTime = `${last.slice(0, 19)}Z`;
    return { name: f, lines: run, endTime };
  });

/** 04-delete's preview, one log line per element (no trailing empty line). */
const DELETE = (previews.find((p) => p.name === '04-delete.log')?.lines ?? []).filter((l) => l !== '');
const at = (pred: (l: string) => boolean): number => {
  const i = DELETE.findIndex(pred);
  if (i < 0) throw new Error('no such line in 04-delete.log');
  return i;
};
const DELETE_LINE = at((l) => l.endsWith('\tpulumi\t    - pkotest:index:Value: (delete)'));
const SUMMARY_LINE = at((l) => l.endsWith('\tpulumi\tResources:'));
const COUNT_LINE = at((l) => l.endsWith('\tpulumi\t    - 1 to delete'));
const STAMP = '2026-12-01T15:24:37.287Z';
const info = (m: string): string => `${STAMP}\tINFO\tpulumi\t${m}`;
const warn = (m: string): string => `${STAMP}\tWARN\tpulumi\t${m}`;

/** The log with `lines` inserted before line `i`. */
function spliced(i: number, ...lines: string[]): string {
  return [...DELETE.slice(0, i), ...lines, ...DELETE.slice(i)].join('\n') + '\n';
}
/** The log with `junk` written before the CLI's line `i` (a partial line: the two become one entry). */
function prefixed(log: string[], i: number, junk: string): string[] {
  const l = log[i] ?? '';
  const tab = l.indexOf('\tpulumi\t') + '\tpulumi\t'.length;
  return [...log.slice(0, i), `${l.slice(0, tab)}${junk}${l.slice(tab)}`, ...log.slice(i + 1)];
}
const parse = (log: string): ChangeSet =>
  parseWorkspaceLog(log, {}, { runComplete: true, endTime: '2026-12-01T15:24:37Z' });

/** What B16 asks of every forged log: the delete is listed, or the set says it is incomplete; the gate never passes. */
function neverHidden(cs: ChangeSet): void {
  const listed = cs.resources.some((r) => r.op === 'delete' && r.type === 'pkotest:index:Value');
  if (cs.complete) {
    expect(listed).toBe(true);
    expect(cs.counts.delete).toBe(1);
  } else expect(cs.incomplete.length).toBeGreaterThan(0);
  expect(listed || !cs.complete).toBe(true);
  expect(evaluateGate({ operations: ['delete'] }, cs).kind).not.toBe('pass');
  expect(evaluateGate({ operations: ['delete'], resourceTypes: ['pkotest:*'] }, cs).kind).not.toBe('pass');
}

describe('B16: what a program writes into the log can add changes, never hide one', () => {
  it('B16: the real recording itself: complete, the delete listed and counted, the gate matches', () => {
    const cs = parse(`${DELETE.join('\n')}\n`);
    expect(cs).toMatchObject({ complete: true, counts: { delete: 1, same: 3 }, countsFrom: 'summary' });
    expect(cs.resources.find((r) => r.op === 'delete')?.name).toBe('b');
    expect(evaluateGate({ operations: ['delete'] }, cs)).toMatchObject({
      kind: 'match',
      counts: [['delete', 1]],
    });
  });

  it("B16: 'Resources:' and '    1 unchanged' written into the CLI's stdout before the real delete", () => {
    const cs = parse(spliced(DELETE_LINE, info('Resources:'), info('    1 unchanged')));
    neverHidden(cs);
    expect(cs.complete).toBe(false);
    expect(cs.incomplete).toEqual(['summary-twice', 'unexpected-output']);
    expect(cs.resources.find((r) => r.op === 'delete')).toMatchObject({
      name: 'b',
      type: 'pkotest:index:Value',
    });
    expect(cs.counts.delete).toBe(1);
  });

  it("B16: a forged summary and the agent's end line (written into the agent's stdout) before the real delete", () => {
    const cs = parse(
      spliced(
        DELETE_LINE,
        info('Resources:'),
        info('    3 unchanged'),
        `${STAMP}\tINFO\tserver\tpreview completed`,
      ),
    );
    neverHidden(cs);
    expect(cs.incomplete).toContain('summary-twice');
    expect(cs.resources.some((r) => r.op === 'delete' && r.name === 'b')).toBe(true);
  });

  it('B16: a forged run after the real one (banner, summary, end line, stamped in the run or later)', () => {
    const forged = (stamp: string): string[] => [
      `${stamp}\tINFO\tpulumi\tPreviewing update (dev):`,
      `${stamp}\tINFO\tpulumi\t  pulumi:pulumi:Stack: (same)`,
      `${stamp}\tINFO\tpulumi\t    [urn=urn:pulumi:dev::pkonc-changes::pulumi:pulumi:Stack::pkonc-changes-dev]`,
      `${stamp}\tINFO\tpulumi\tResources:`,
      `${stamp}\tINFO\tpulumi\t    4 unchanged`,
      `${stamp}\tINFO\tserver\tpreview completed`,
    ];
    const end = DELETE.length;
    const inRun = parse(spliced(end, ...forged(STAMP)));
    neverHidden(inRun);
    expect(inRun.incomplete).toEqual(['interleaved']);
    // Stamped after the Update's end: a later run, not read; the real one stands.
    const later = parse(spliced(end, ...forged('2026-12-01T15:30:00.000Z')));
    neverHidden(later);
    expect(later).toMatchObject({ complete: true, counts: { delete: 1, same: 3 } });
  });

  it('B16: a forged banner before the real delete, stamped in the run or in the future', () => {
    const inRun = parse(spliced(DELETE_LINE, info('Previewing update (dev):')));
    neverHidden(inRun);
    expect(inRun.incomplete).toEqual(['interleaved']);
    expect(inRun.resources.some((r) => r.op === 'delete' && r.name === 'b')).toBe(true);
    // A "later run" banner followed by lines stamped inside the run: the two are mixed.
    const future = parse(
      spliced(
        DELETE_LINE,
        info('Resources:'),
        info('    3 unchanged'),
        `${STAMP}\tINFO\tserver\tpreview completed`,
        '2026-12-01T16:00:00.000Z\tINFO\tpulumi\tPreviewing update (dev):',
      ),
    );
    neverHidden(future);
    expect(future.incomplete).toContain('interleaved');
    expect(future.resources.some((r) => r.op === 'delete' && r.name === 'b')).toBe(true);
  });

  it('B16: a forged later run whose head is written before each real line after it: read as this run', () => {
    const future = '2026-12-01T16:00:00.000Z\tINFO\tpulumi\t';
    const log = [
      ...DELETE.slice(0, DELETE_LINE),
      info('Resources:'),
      info('    3 unchanged'),
      `${STAMP}\tINFO\tserver\tpreview completed`,
      `${future}Previewing update (dev):`,
      ...DELETE.slice(DELETE_LINE).map((l) => `${future}x${l}`),
    ];
    const cs = parse(`${log.join('\n')}\n`);
    neverHidden(cs);
    expect(cs.incomplete).toContain('interleaved');
  });

  it("B16: a forged 'server preview completed' neither ends the run nor hides what follows", () => {
    const cs = parse(spliced(DELETE_LINE, `${STAMP}\tINFO\tserver\tpreview completed`));
    neverHidden(cs);
    expect(cs).toMatchObject({ complete: true, counts: { delete: 1, same: 3 } });
    expect(cs.resources.find((r) => r.op === 'delete')?.name).toBe('b');
  });

  it('B16: a partial line before the real delete line, and before the real summary lines', () => {
    const onDelete = parse(`${prefixed(DELETE, DELETE_LINE, 'hello ').join('\n')}\n`);
    neverHidden(onDelete);
    expect(onDelete.incomplete).toEqual(['unexpected-output']);
    expect(onDelete.resources.find((r) => r.op === 'delete')).toMatchObject({ name: 'b' });
    for (const junk of ['x', '  ', '    ', '  x', 'Resources:']) {
      const both = prefixed(prefixed(DELETE, DELETE_LINE, junk), COUNT_LINE, junk);
      neverHidden(parse(`${both.join('\n')}\n`));
      const head = prefixed(prefixed(DELETE, DELETE_LINE, junk), SUMMARY_LINE, junk);
      neverHidden(parse(`${head.join('\n')}\n`));
      // The summary's head hidden in a line of its own, and a forged one after the real block.
      neverHidden(
        parse(
          spliced(DELETE.length, info('Resources:'), info('    3 unchanged')).replace(
            `${STAMP}\tINFO\tpulumi\tResources:\n`,
            `${STAMP}\tINFO\tpulumi\t${junk}Resources:\n`,
          ),
        ),
      );
    }
  });

  it('B16: a forged summary before the real delete, whose line then gets a partial-line prefix: still named', () => {
    const log = spliced(DELETE_LINE, info('Resources:'), info('    3 unchanged'), info('')).split('\n');
    const i = log.findIndex((l) => l.endsWith('\tpulumi\t    - pkotest:index:Value: (delete)'));
    const cs = parse(prefixed(log, i, 'x').join('\n'));
    neverHidden(cs);
    expect(cs.resources.find((r) => r.op === 'delete')).toMatchObject({
      name: 'b',
      type: 'pkotest:index:Value',
    });
  });

  it('B16: a partial agent entry written into the agent stdout before a real line (two entries joined)', () => {
    const joined = [...DELETE];
    joined[DELETE_LINE] = `2026-12-01T16:00:00.000Z\tINFO\tpulumi\tx${DELETE[DELETE_LINE] ?? ''}`;
    const cs = parse(`${joined.join('\n')}\n`);
    neverHidden(cs);
    expect(cs.incomplete).toContain('unexpected-output');
  });

  it('B16: WARN lines (console.log with --diff) never shape the change set', () => {
    const cs = parse(
      spliced(
        DELETE_LINE,
        warn('Resources:'),
        warn('    1 unchanged'),
        warn('Previewing update (dev):'),
        warn('    + pkotest:index:Value: (create)'),
        warn('    - 1 to delete'),
      ),
    );
    expect(cs).toEqual(parse(`${DELETE.join('\n')}\n`));
    // They may only add failure.
    expect(parse(spliced(DELETE_LINE, warn('error: forged'))).failed).toBe(true);
  });

  it('B16: a delete line printed as the program would print one is listed (padding, never hiding)', () => {
    const cs = parse(spliced(DELETE_LINE, info('    - aws:rds/instance:Instance: (delete)')));
    expect(cs.complete).toBe(false);
    // Its URN line is missing, and the summary counts one delete.
    expect(cs.incomplete).toEqual(['summary-mismatch', 'unexpected-output']);
    expect(cs.counts.delete).toBe(2);
    // Both deletes are named: the forged one pads the gate, the real one still fails it.
    const gate = evaluateGate({ operations: ['delete'] }, cs);
    expect(gate).toMatchObject({ kind: 'match', counts: [['delete', 2]] });
    expect(gate.kind === 'match' ? gate.incomplete : '').toContain(
      "the summary's counts disagree with the resources listed",
    );
  });
});

describe('B16: recorded with the real CLI on the real PKO v2.9.0 agent, a program forging lines', () => {
  // test/fixtures/agent-logs/10-forged-summary.log (README): a preview that deletes prod-db; the
  // program wrote a banner, 'Resources:', '    1 unchanged', 'Duration: 1s' and a partial line
  // into the CLI's stdout (and the same through console.log: WARN lines).
  const ten = previews.find((p) => p.name === '10-forged-summary.log');
  const lines = (ten?.lines ?? []).filter((l) => l !== '');
  const status = { runComplete: true, endTime: ten?.endTime ?? '' };
  const deleted = (cs: ChangeSet) => cs.resources.find((r) => r.op === 'delete');

  it('the recording 10-forged-summary.log is there', () => {
    expect(ten).toBeDefined();
  });

  it('B16 10-forged-summary.log: the delete of prod-db listed, incomplete, the gate fails', () => {
    const cs = parseWorkspaceLog(`${lines.join('\n')}\n`, {}, status);
    expect(cs.complete).toBe(false);
    expect(cs.incomplete).toEqual(['interleaved']);
    expect(deleted(cs)).toMatchObject({ type: 'pkotest:index:Value', name: 'prod-db' });
    expect(cs.counts.delete).toBe(1);
    const gate = evaluateGate({ operations: ['delete'] }, cs);
    expect(gate).toMatchObject({ kind: 'match', counts: [['delete', 1]] });
    if (gate.kind === 'pass') throw new Error('the gate passed');
    // The commit status names prod-db, and says the set is incomplete (case B16's value).
    expect(gateDescription(gate)).toBe(
      'gate: 1 to delete or more: pkotest:index:Value::prod-db (change set incomplete: two runs wrote to the log at the same time)',
    );
  });

  it('B16 10-forged-summary.log without the forged banner: two summaries, the delete still listed', () => {
    const forgedBanner = lines.findIndex(
      (l, i) =>
        i > lines.findIndex((x) => x.endsWith('\tINFO\tpulumi\tPreviewing update (dev):')) &&
        l.endsWith('\tINFO\tpulumi\tPreviewing update (dev):'),
    );
    expect(forgedBanner).toBeGreaterThan(0);
    const cs = parseWorkspaceLog(`${lines.filter((_, i) => i !== forgedBanner).join('\n')}\n`, {}, status);
    expect(cs.complete).toBe(false);
    expect(cs.incomplete).toEqual(['summary-twice', 'unexpected-output']);
    expect(deleted(cs)).toMatchObject({ name: 'prod-db' });
    const gate = evaluateGate({ operations: ['delete'] }, cs);
    expect(gate.kind === 'match' ? gate.resources.map((r) => r.name) : []).toEqual(['prod-db']);
    expect(gate.kind === 'match' ? gate.incomplete : '').toContain(
      "the program printed text that looks like Pulumi's summary",
    );
  });
});

/** CLI-looking lines a program could print, and ways to put them in. */
const cliText = fc.oneof(
  fc.constantFrom(
    'Previewing update (dev):',
    'Updating (dev):',
    'Resources:',
    '    + 1 to create',
    '    - 1 to delete',
    '    ~ 2 to update',
    '    +-1 to replace',
    '    1 unchanged',
    '    3 unchanged',
    '    4 unchanged',
    '    2 changes. 3 unchanged',
    '    1 errored',
    '',
    'Duration: 1s',
    '  pulumi:pulumi:Stack: (same)',
    '    [urn=urn:pulumi:dev::pkonc-changes::pulumi:pulumi:Stack::pkonc-changes-dev]',
    '    + pkotest:index:Value: (create)',
    '    - pkotest:index:Value: (delete)',
    '        [urn=urn:pulumi:dev::pkonc-changes::pkotest:index:Value::b]',
    '      ~ value: "one" => "two"',
    '    --outputs:--',
    'View Live: https://app.pulumi.com/x',
    'error: forged',
  ),
  fc.string({ maxLength: 30 }),
);
const forgedLine = fc.oneof(
  { weight: 6, arbitrary: cliText.map((t) => ({ kind: 'line' as const, text: info(t) })) },
  { weight: 2, arbitrary: cliText.map((t) => ({ kind: 'line' as const, text: warn(t) })) },
  { weight: 3, arbitrary: cliText.map((t) => ({ kind: 'prefix' as const, text: t })) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        'INFO\tserver\tpreview completed',
        'ERROR\tserver\tpreview completed with an error',
        'INFO\tserver\tup completed',
      )
      .map((t) => ({ kind: 'line' as const, text: `${STAMP}\t${t}` })),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('2026-12-01T15:24:36.000Z', STAMP, '2026-12-01T15:30:00.000Z', 'not-a-time')
      .chain((stamp) =>
        cliText.map((t) => ({ kind: 'line' as const, text: `${stamp}\tINFO\tpulumi\t${t}` })),
      ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((t) => ({ kind: 'line' as const, text: t })) },
);

const key = (r: { op: StepOp; type: string; name: string }): string => `${r.op} ${r.type} ${r.name}`;
function tally(cs: ChangeSet): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of cs.resources) m.set(key(r), (m.get(key(r)) ?? 0) + 1);
  return m;
}

describe('B16: forged lines anywhere in any recorded preview', () => {
  it.each(previews.map((p) => [p.name, p.lines, p.endTime] as const))(
    'B16 %s: never complete with fewer resources or a lower count of any operation',
    (_name, lines, endTime) => {
      const log = lines.filter((l) => l !== '');
      const status = { runComplete: true, endTime };
      const original = parseWorkspaceLog(`${log.join('\n')}\n`, {}, status);
      fc.assert(
        fc.property(fc.array(fc.tuple(fc.nat(), forgedLine), { minLength: 1, maxLength: 6 }), (inserts) => {
          let out = [...log];
          for (const [pos, f] of inserts) {
            const i = pos % (out.length + 1);
            if (f.kind === 'line') out = [...out.slice(0, i), f.text, ...out.slice(i)];
            else if (i < out.length && out[i]?.includes('\tpulumi\t') === true)
              out = prefixed(out, i, f.text);
          }
          const cs = parseWorkspaceLog(`${out.join('\n')}\n`, {}, status);
          if (!cs.complete) return;
          for (const [op, n] of Object.entries(original.counts))
            expect(cs.counts[op as StepOp] ?? 0).toBeGreaterThanOrEqual(n);
          const got = tally(cs);
          for (const [k, n] of tally(original)) expect(got.get(k) ?? 0).toBeGreaterThanOrEqual(n);
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      );
    },
  );
});
