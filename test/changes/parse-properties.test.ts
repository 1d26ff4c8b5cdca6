/**
 * Properties of the workspace-log parser (fast-check, fixed seed like test/fuzz.test.ts):
 * - any input (arbitrary bytes, arbitrary text, or plausible agent lines in any order) never
 *   throws and gives a change set within every cap of its limits;
 * - the result does not depend on how the input is split into chunks;
 * - a real recording cut at any byte gives either an incomplete change set whose resources are a
 *   prefix of that run's, or a complete one equal to what the uncut run gives.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChangeSetParser, parseWorkspaceLog } from '../../src/changes/parse.ts';
import { DEFAULT_PARSE_LIMITS, type ChangeSet, type ParseLimits } from '../../src/changes/types.ts';
import { measure } from '../../src/text.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 200);
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 20261201;
const params = { numRuns: RUNS, seed: SEED, endOnFailure: true } as const;

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'agent-logs');
const recordings = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.log'))
  .sort()
  .map((f) => ({ name: f, bytes: readFileSync(join(FIXTURES, f)) }));

/** Small caps, so that random inputs reach them. */
const SMALL: ParseLimits = {
  maxBytes: 4000,
  maxLines: 60,
  maxLineChars: 300,
  maxResources: 4,
  maxDiffLinesPerResource: 3,
  maxDiffLines: 7,
  maxDiffLineChars: 40,
  maxErrors: 2,
  maxErrorChars: 50,
};

function withinCaps(cs: ChangeSet, l: ParseLimits): void {
  expect(cs.source).toBe('workspace-log');
  expect(cs.complete).toBe(cs.incomplete.length === 0);
  expect(cs.resources.length).toBeLessThanOrEqual(l.maxResources);
  let diffLines = 0;
  for (const r of cs.resources) {
    expect(r.diff.length).toBeLessThanOrEqual(l.maxDiffLinesPerResource);
    for (const d of r.diff) expect(measure(d, 'codePoints')).toBeLessThanOrEqual(l.maxDiffLineChars);
    expect(measure(r.type, 'codePoints')).toBeLessThanOrEqual(400);
    expect(measure(r.name, 'codePoints')).toBeLessThanOrEqual(400);
    expect(measure(r.urn, 'codePoints')).toBeLessThanOrEqual(2000);
    diffLines += r.diff.length;
  }
  expect(diffLines).toBeLessThanOrEqual(l.maxDiffLines);
  expect(cs.errors.length).toBeLessThanOrEqual(l.maxErrors);
  for (const e of cs.errors) expect(measure(e, 'codePoints')).toBeLessThanOrEqual(l.maxErrorChars);
  for (const n of Object.values(cs.counts)) expect(Number.isSafeInteger(n) && n >= 0).toBe(true);
}

/** Lines shaped like the agent's, from the parts the parser looks for, in any order. */
const cliLine = fc.oneof(
  fc.constantFrom(
    'Previewing update (dev):',
    'Updating (dev):',
    'Previewing refresh (dev):',
    'Resources:',
    '    + 2 to create',
    '    ~ 1 to update',
    '    +-1 to replace',
    '    - 3 deleted',
    '    2 changes. 4 unchanged',
    '    1 errored',
    '',
    '+ pulumi:pulumi:Stack: (create)',
    '    [urn=urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev]',
    '    + pkotest:index:Value: (create)',
    '    ~ pkotest:index:File: (update) 🔒',
    '    +-pkotest:index:Value: (replace)',
    '    - pkotest:index:Value: (delete[retain])',
    '        [urn=urn:pulumi:dev::p::pkotest:index:Value::a]',
    '        [id=a]',
    '      ~ value: "one" => "two"',
    '        content: "x"',
    '    --outputs:--',
    '        --outputs:--',
    'error: something failed',
  ),
  fc.string({ maxLength: 80 }),
  fc.string({ unit: 'grapheme', maxLength: 200 }),
);
const agentLine = fc.oneof(
  { weight: 8, arbitrary: cliLine.map((m) => `2026-12-01T13:58:29.546Z\tINFO\tpulumi\t${m}`) },
  { weight: 2, arbitrary: cliLine.map((m) => `2026-12-01T13:58:29.546Z\tWARN\tpulumi\t${m}`) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '2026-12-01T13:58:30.001Z\tINFO\tserver\tpreview completed',
      '2026-12-01T13:58:30.001Z\tERROR\tserver\tpreview completed with an error\t{"error": "exit status 255"}',
      '2026-12-01T13:58:30.001Z\tINFO\tserver\tup completed\t{"result": "succeeded"}',
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 120 }) },
);
const zap = (m: string): string => `2026-12-01T13:58:29.546Z\tINFO\tpulumi\t${m}`;
/** A whole run as the agent logs it (banner, resources with URN and property lines, summary, end). */
const resourceBlock = fc
  .record({
    level: fc.integer({ min: 0, max: 2 }),
    op: fc.constantFrom(
      ['+ ', 'create'],
      ['~ ', 'update'],
      ['- ', 'delete'],
      ['+-', 'replace'],
      ['  ', 'same'],
    ),
    name: fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/),
    props: fc.array(fc.string({ maxLength: 60 }), { maxLength: 8 }),
  })
  .map(({ level, op, name, props }) => {
    const pad = ' '.repeat(level * 4);
    return [
      `${pad}${op[0]}pkotest:index:Value: (${op[1]})`,
      `${pad}    [urn=urn:pulumi:dev::p::pkotest:index:Value::${name}]`,
      ...props.map((p) => `${pad}      ${op[0]}${p}`),
    ];
  });
const runBlock = fc
  .record({
    resources: fc.array(resourceBlock, { maxLength: 8 }),
    summary: fc.boolean(),
    end: fc.boolean(),
  })
  .map(({ resources, summary, end }) => [
    zap('Previewing update (dev):'),
    ...resources.flat().map(zap),
    ...(summary ? ['Resources:', ...summaryOf(resources.map((r) => r[0] ?? ''))].map(zap) : []),
    ...(end ? ['2026-12-01T13:58:30.001Z\tINFO\tserver\tpreview completed'] : []),
  ]);

/** The summary block the CLI prints after these resource lines (`renderSummaryEvent`). */
function summaryOf(resourceLines: readonly string[]): string[] {
  const n = (op: string): number => resourceLines.filter((l) => l.endsWith(`(${op})`)).length;
  const kinds = (
    [
      ['+ ', 'create'],
      ['~ ', 'update'],
      ['- ', 'delete'],
      ['+-', 'replace'],
    ] as const
  ).filter(([, op]) => n(op) > 0);
  const changes = kinds.reduce((t, [, op]) => t + n(op), 0);
  const unchanged = `${String(n('same') + 2)} unchanged`;
  return [
    ...kinds.map(([glyph, op]) => `    ${glyph}${String(n(op))} to ${op}`),
    kinds.length >= 2 ? `    ${String(changes)} changes. ${unchanged}` : `    ${unchanged}`,
  ];
}
/** Agent-shaped logs: runs and lines in any order, or one run alone (a log read from its start). */
const agentLog = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .array(
        fc.oneof({ weight: 1, arbitrary: runBlock }, { weight: 3, arbitrary: agentLine.map((l) => [l]) }),
        {
          maxLength: 40,
        },
      )
      .map((blocks) => blocks.flat().join('\n')),
  },
  { weight: 1, arbitrary: runBlock.map((lines) => `${lines.join('\n')}\n`) },
);

describe('parser properties', () => {
  it('never throws on arbitrary bytes and stays within its caps', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 6000 }), (bytes) => {
        withinCaps(parseWorkspaceLog(bytes, SMALL), SMALL);
      }),
      params,
    );
  });

  it('the agent-shaped inputs reach resources, property lines and complete runs (generator check)', () => {
    const sample = fc.sample(agentLog, { numRuns: 300, seed: SEED }).map((t) => parseWorkspaceLog(t));
    expect(sample.filter((cs) => cs.resources.some((r) => r.diff.length > 0)).length).toBeGreaterThan(30);
    expect(sample.filter((cs) => cs.complete && cs.resources.length > 0).length).toBeGreaterThan(10);
  });

  it('never throws on agent-shaped lines in any order and stays within its caps (small and default caps)', () => {
    fc.assert(
      fc.property(agentLog, (text) => {
        withinCaps(parseWorkspaceLog(text, SMALL), SMALL);
        withinCaps(parseWorkspaceLog(text), DEFAULT_PARSE_LIMITS);
      }),
      params,
    );
  });

  it('gives the same change set however the input is split into chunks', () => {
    const input = fc.oneof(
      agentLog.map((t) => new TextEncoder().encode(t)),
      ...recordings.map((r) => fc.constant(new Uint8Array(r.bytes))),
    );
    fc.assert(
      fc.property(input, fc.array(fc.nat(), { maxLength: 12 }), (bytes, cuts) => {
        const whole = parseWorkspaceLog(bytes);
        const p = new ChangeSetParser();
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        let at = 0;
        for (const c of points) {
          p.push(bytes.subarray(at, c));
          at = c;
        }
        p.push(bytes.subarray(at));
        expect(p.end({ runComplete: true })).toEqual(whole);
      }),
      params,
    );
  });

  it('a one-line input of 8 MB without a newline is cut, not held', () => {
    const huge = `2026-12-01T13:58:29.546Z\tINFO\tpulumi\t${'x'.repeat(8 * 1024 * 1024)}`;
    const cs = parseWorkspaceLog(huge);
    expect(cs.complete).toBe(false);
    expect(cs.incomplete).toEqual(['no-run']);
  });

  it('stops reading at maxBytes and maxLines and says so', () => {
    const line = '2026-12-01T13:58:29.546Z\tINFO\tpulumi\tPreviewing update (dev):\n';
    expect(parseWorkspaceLog(line.repeat(100), { maxLines: 10 }).incomplete).toContain('input-cap');
    expect(parseWorkspaceLog(line.repeat(100), { maxBytes: 1000 }).incomplete).toContain('input-cap');
  });
});

/**
 * Where the run read from the first `k` bytes ends: the start of the first banner line that is
 * not read whole within those bytes (the input's length if none). A banner counts as read once
 * its newline is in (the parser reads a line when its newline is read).
 */
function runEnd(bytes: Buffer, k: number): number {
  const text = bytes.toString('latin1');
  const re =
    /\tpulumi\t(?:Previewing (?:update|refresh|destroy|import|stack import)|Updating|Refreshing|Destroying|Importing) \([^\n]*\):/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const nl = text.indexOf('\n', m.index);
    if (nl < 0 || nl >= k) return text.lastIndexOf('\n', m.index) + 1;
  }
  return bytes.length;
}

describe('recordings cut at any byte', () => {
  it.each(recordings.map((r) => [r.name, r.bytes] as const))(
    '%s: incomplete, or the complete result of the uncut run',
    (_name, bytes) => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: bytes.length }), (k) => {
          const cut = parseWorkspaceLog(bytes.subarray(0, k));
          const uncut = parseWorkspaceLog(bytes.subarray(0, runEnd(bytes, k)));
          if (cut.complete) expect(cut).toEqual(uncut);
          else {
            const kinds = (cs: ChangeSet): string[] => cs.resources.map((r) => `${r.op} ${r.type}`);
            expect(kinds(uncut).slice(0, cut.resources.length)).toEqual(kinds(cut));
          }
        }),
        { ...params, numRuns: Math.min(RUNS, 100) },
      );
    },
  );
});
