/**
 * B16: the previewed program's output can add changes, never hide one — partial lines.
 *
 * The program writes part of a line (no newline) just before it exits; the CLI's next stdout
 * line, the real delete of 04-delete, is logged with that text before it. An unterminated escape,
 * or a prefix that fills the line cap, hides the CLI's text after it; a block the program wrote
 * earlier can keep the summary's count right. None of it may leave a complete set without the
 * real delete, or with it mistyped, and a gate on deletes never passes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { evaluateGate } from '../../src/changes/gate.ts';
import { parseWorkspaceLog } from '../../src/changes/parse.ts';
import type { ChangeSet } from '../../src/changes/types.ts';

const all = readFileSync(
  join(import.meta.dirname, '..', 'fixtures', 'agent-logs', '04-delete.log'),
  'utf8',
).split('\n');
/** The preview of 04-delete up to the agent's end line. */
const DELETE = all.slice(0, all.findIndex((l) => /\tserver\tpreview completed/.test(l)) + 1);
const REAL = 'urn:pulumi:dev::pkonc-changes::pkotest:index:Value::b';
const parse = (log: string[]) =>
  parseWorkspaceLog(`${log.join('\n')}\n`, {}, { runComplete: true, endTime: '2026-12-01T15:24:37Z' });
const realAt = DELETE.findIndex((l) => l.endsWith('\tpulumi\t    - pkotest:index:Value: (delete)'));
const HEAD = '2026-12-01T15:24:37.287Z\tINFO\tpulumi\t';
const MAX = 16 * 1024;

/** The log with `junk` written (no newline) just before the CLI's real delete line. */
function withPrefix(junk: string, log = DELETE): string[] {
  const l = log[realAt] ?? '';
  const tab = l.indexOf('\tpulumi\t') + 8;
  const out = [...log];
  out[realAt] = l.slice(0, tab) + junk + l.slice(tab);
  return out;
}

/** A whole delete block the program wrote, after the root stack's URN line: the summary's count stays right. */
function withDecoy(log: string[]): string[] {
  const u = log.findIndex((l) => l.includes('[urn=urn:pulumi:dev::pkonc-changes::pulumi:pulumi:Stack::'));
  const S = '2026-12-01T15:24:37.200Z\tINFO\tpulumi\t';
  return [
    ...log.slice(0, u + 1),
    `${S}    - pkotest:index:Value: (delete)`,
    `${S}        [id=scratch]`,
    `${S}        [urn=urn:pulumi:dev::pkonc-changes::pkotest:index:Value::scratch-tmp]`,
    ...log.slice(u + 1),
  ];
}

/** Fills the line from the agent's head to exactly the parser's line cap. */
const pad = (lead: string, tail: string) =>
  lead + '\u200b'.repeat(MAX - HEAD.length - lead.length - tail.length) + tail;

function expectNotHidden(cs: ChangeSet): void {
  const real = cs.resources.find((r) => r.urn === REAL);
  const intact = real?.op === 'delete' && real.type === 'pkotest:index:Value';
  // Never complete with the real delete missing or mistyped.
  if (!intact) expect(cs).toMatchObject({ complete: false });
  expect(cs.complete && !intact).toBe(false);
  for (const gate of [
    { operations: ['delete' as const] },
    { operations: ['delete' as const], resourceTypes: ['pkotest:*'] },
    { operations: ['delete' as const], resourceTypes: ['pkotest:index:Value'] },
  ])
    expect(evaluateGate(gate, cs).kind).not.toBe('pass');
}

describe('B16: a partial line the program writes cannot hide the real delete', () => {
  it('the recording as it is: complete, the real delete listed', () => {
    const cs = parse(DELETE);
    expect(cs).toMatchObject({ complete: true, incomplete: [] });
    expect(cs.resources.find((r) => r.urn === REAL)).toMatchObject({
      op: 'delete',
      type: 'pkotest:index:Value',
    });
  });

  it.each([
    ['ESC ]', '\u001b]'],
    ['C1 OSC', '\u009d'],
  ])('B16 3a: an unterminated OSC (%s) re-types the real delete: unexpected-output', (_, osc) => {
    const cs = parse(withPrefix(`    - aws:s3/bucket:Bucket: (delete)${osc}`));
    expect(cs.incomplete).toContain('unexpected-output');
    expectNotHidden(cs);
  });

  it.each([
    ['ESC', '\u001b'],
    ['CSI', '\u001b[33m'],
    ['C1 CSI', '\u009b'],
    ['BEL', '\u0007'],
    ['CR', '\r'],
    ['DEL', '\u007f'],
  ])('B16 3a: any control (%s) before the CLI line: unexpected-output', (_, c) => {
    const cs = parse(withPrefix(c));
    expect(cs.complete).toBe(false);
    expect(cs.incomplete).toContain('unexpected-output');
    expectNotHidden(cs);
  });

  it('B16 3a: a control in a WARN (stderr) line of the run: unexpected-output', () => {
    const at = DELETE.findIndex((l) => l.includes('\tWARN\tpulumi\t'));
    expect(at).toBeGreaterThan(0);
    const log = [...DELETE];
    log[at] = `${log[at] ?? ''}\u001b]8;;`;
    expect(parse(log).incomplete).toEqual(['unexpected-output']);
  });

  it('B16 3b: an OSC turns the real delete into (same), a decoy block keeps the count: unexpected-output', () => {
    const cs = parse(withDecoy(withPrefix('      pkotest:index:Value: (same)\u001b]')));
    expect(cs.incomplete).toContain('unexpected-output');
    expectNotHidden(cs);
  });

  it('B16 3b: a resource line whose URN names another type: unexpected-output', () => {
    const log = DELETE.map((l, i) =>
      i === realAt ? l.replace('pkotest:index:Value: (delete)', 'aws:s3/bucket:Bucket: (delete)') : l,
    );
    const cs = parse(log);
    expect(cs.incomplete).toEqual(['unexpected-output']);
    expectNotHidden(cs);
  });

  it.each([
    ['another stack', 'urn:pulumi:prod::pkonc-changes::'],
    ['another project', 'urn:pulumi:dev::other::'],
    ['not a URN', 'urn:x:dev::pkonc-changes::'],
  ])('B16 3b: a URN of %s: unexpected-output', (_, prefix) => {
    const log = DELETE.map((l) =>
      l.replace(`[urn=${REAL}]`, `[urn=${REAL.replace('urn:pulumi:dev::pkonc-changes::', prefix)}]`),
    );
    expect(log).not.toEqual(DELETE);
    expect(parse(log).incomplete).toEqual(['unexpected-output']);
  });

  it('B16 3b: a (same) line of a resource but the root stack, without a lock: unexpected-output', () => {
    const log = DELETE.map((l, i) =>
      i === realAt
        ? l.replace('    - pkotest:index:Value: (delete)', '      pkotest:index:Value: (same)')
        : l,
    );
    const cs = parse(withDecoy(log));
    expect(cs.incomplete).toEqual(['unexpected-output']);
    expectNotHidden(cs);
    // With a lock (its protection changes) the CLI prints one: the set stays complete.
    const u = DELETE.findIndex((l) =>
      l.includes('[urn=urn:pulumi:dev::pkonc-changes::pulumi:pulumi:Stack::'),
    );
    const S = '2026-12-01T15:24:37.200Z\tINFO\tpulumi\t';
    const locked = [
      ...DELETE.slice(0, u + 1),
      `${S}      pkotest:index:Value: (same) 🔒`,
      `${S}        [id=a]`,
      `${S}        [urn=urn:pulumi:dev::pkonc-changes::pkotest:index:Value::a]`,
      ...DELETE.slice(u + 1),
    ];
    expect(parse(locked)).toMatchObject({ complete: true, incomplete: [] });
    expect(parse(locked.map((l) => l.replace(' (same) 🔒', ' (same)'))).incomplete).toEqual([
      'unexpected-output',
    ]);
  });

  it('B16 3b: an unclosed `[urn=` line: unexpected-output', () => {
    const log = DELETE.map((l) => l.replace(`[urn=${REAL}]`, `[urn=${REAL} `));
    expect(log).not.toEqual(DELETE);
    expect(parse(log).incomplete).toEqual(['unexpected-output']);
  });

  it('B16 3b: a resource block printed twice in one run (the same URN): unexpected-output', () => {
    const log = withDecoy(DELETE).map((l) => l.replace('Value::scratch-tmp]', 'Value::b]'));
    const cs = parse(log);
    expect(cs.incomplete).toContain('unexpected-output');
  });

  it('B16 3b: a parent chain in the URN (`parent$child`): the last type is the resource line’s', () => {
    const log = DELETE.map((l) =>
      l.replace(
        `[urn=${REAL}]`,
        '[urn=urn:pulumi:dev::pkonc-changes::my:index:Component$pkotest:index:Value::b]',
      ),
    );
    expect(log).not.toEqual(DELETE);
    expect(parse(log)).toMatchObject({ complete: true, incomplete: [] });
  });

  it('B16 3c: a prefix that fills the line cap re-types the real delete: line-cut', () => {
    const junk = pad('    - aws:s3/bucket:Bucket', ': (delete)');
    expect(HEAD.length + junk.length).toBe(MAX);
    const cs = parse(withPrefix(junk));
    expect(cs.incomplete).toContain('line-cut');
    expect(cs.omitted.longLines).toBe(1);
    expectNotHidden(cs);
  });

  it('B16 3c: a prefix at the line cap turns the real delete into (same), a decoy keeps the count: line-cut', () => {
    const cs = parse(withDecoy(withPrefix(pad('      pkotest:index:Value', ': (same)'))));
    expect(cs.incomplete).toContain('line-cut');
    expectNotHidden(cs);
  });
});

describe('B16 4: hostile long lines parse in linear time', () => {
  const T = '2026-12-01T15:24:37.100Z\tINFO\tpulumi\t';
  const L = MAX - T.length - 1;
  // Each shape once backtracked on a 16 KiB line (`(\S+)$` after a line ending in whitespace).
  it.each([
    ['displaced, space before the tail', `${T}${'x'.repeat(L - 12)} : (delete)`],
    ['displaced, TAB before the tail', `${T}${'x'.repeat(L - 12)}\t: (delete)`],
    ['many tails', `${T}${': (a'.repeat(L / 4 - 3)}: (delete)`],
    ['spaces, then a resource tail', `${T}${' '.repeat(L - 10)}x: (same)`],
  ])('B16 4 MiB of %s: read, incomplete, within a generous bound', (_, line) => {
    const n = Math.floor((4 * 1024 * 1024) / (line.length + 1));
    const log = `${T}Previewing update (dev):\n${`${line}\n`.repeat(n)}`;
    const t0 = performance.now();
    const cs = parseWorkspaceLog(log, {}, { runComplete: true });
    // A sanity bound only (the machine may be loaded); bench numbers are in the commit message.
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(cs.complete).toBe(false);
    expect(cs.incomplete).toContain('unexpected-output');
  });
});
