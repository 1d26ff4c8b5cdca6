/**
 * The change-set parser over logs the real PKO v2.9.0 agent wrote while running the real Pulumi
 * CLI v3.276.0 (test/fixtures/agent-logs/, see its README), plus the failure shapes a log can
 * take: cut, rotated, interleaved, garbled, enormous.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ChangeSetParser, parseWorkspaceLog } from '../../src/changes/parse.ts';
import type { ChangeSet } from '../../src/changes/types.ts';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'agent-logs');
const recording = (name: string): string => readFileSync(join(FIXTURES, `${name}.log`), 'utf8');

/**
 * The log up to the `up` run (the preview run alone) and the log from the up's banner on (as a
 * read from the up's start gives it, without the preview's lines of the same second).
 */
function previewAndUp(name: string): { preview: ChangeSet; up: ChangeSet } {
  const text = recording(name);
  const at = text.lastIndexOf('\n', text.indexOf('\tpulumi\tUpdating (dev):')) + 1;
  expect(at).toBeGreaterThan(0);
  return { preview: parseWorkspaceLog(text.slice(0, at)), up: parseWorkspaceLog(text.slice(at)) };
}
const byName = (cs: ChangeSet): Record<string, string> =>
  Object.fromEntries(cs.resources.filter((r) => r.type !== 'pulumi:pulumi:Stack').map((r) => [r.name, r.op]));
const resource = (cs: ChangeSet, name: string, op?: string) => {
  const r = cs.resources.find((x) => x.name === name && (op === undefined || x.op === op));
  if (!r) throw new Error(`no resource ${name} ${op ?? ''}`);
  return r;
};

describe('recordings of the real agent', () => {
  it('01 create: a preview and the up that applied it', () => {
    const { preview, up } = previewAndUp('01-create');
    expect(preview).toMatchObject({
      source: 'workspace-log',
      complete: true,
      incomplete: [],
      run: {
        kind: 'update',
        dryRun: true,
        stack: 'dev',
        startedAt: '2026-12-01T15:24:28.125Z',
        endedAt: '2026-12-01T15:24:28.289Z',
      },
      failed: false,
      counts: { create: 4 },
      countsFrom: 'summary',
    });
    expect(byName(preview)).toEqual({ a: 'create', b: 'create', f: 'create' });
    expect(resource(preview, 'f')).toMatchObject({
      type: 'pkotest:index:File',
      urn: 'urn:pulumi:dev::pkonc-changes::pkotest:index:File::f',
      retain: false,
      diff: ['  content: "hello"', '  path   : "/tmp/pkonc-agent-logs/files/f.txt"', '  secret : [secret]'],
    });
    expect(resource(preview, 'pkonc-changes-dev').diff).toEqual(['  --outputs:--', '  aValue: "one"']);
    expect(up).toMatchObject({
      complete: true,
      run: { kind: 'update', dryRun: false },
      counts: { create: 4 },
    });
    expect(byName(up)).toEqual(byName(preview));
    // The File's own outputs (`size`), printed by `up` after other lines, are not attributed.
    expect(resource(up, 'f').diff.join('\n')).not.toContain('size');
  });

  it('docs/changes.md shows what the parser makes of 02-update.log', () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'changes.md'), 'utf8');
    const json = /```json\n([\s\S]*?)\n```/.exec(doc)?.[1];
    expect(json).toBeDefined();
    expect(previewAndUp('02-update').preview).toMatchObject(JSON.parse(json ?? '') as object);
  });

  it('02 update: property lines old => new; a changed secret stays masked', () => {
    const { preview, up } = previewAndUp('02-update');
    expect(preview).toMatchObject({ complete: true, counts: { update: 2, same: 2 } });
    expect(byName(preview)).toEqual({ a: 'update', f: 'update' });
    expect(resource(preview, 'a').diff).toEqual(['~ value: "one" => "two"']);
    expect(resource(preview, 'f').diff).toEqual([
      '~ content: "hello" => "hello-again"',
      '~ secret : [secret] => [secret]',
    ]);
    expect(resource(preview, 'pkonc-changes-dev')).toMatchObject({
      op: 'same',
      diff: ['  --outputs:--', '~ aValue: "one" => "two"'],
    });
    const log = recording('02-update');
    expect(log).not.toContain('s3cr3t');
    expect(up).toMatchObject({ complete: true, run: { dryRun: false }, counts: { update: 2, same: 2 } });
  });

  it('03 replace and 04 delete', () => {
    const replace = previewAndUp('03-replace');
    expect(replace.preview).toMatchObject({ complete: true, counts: { replace: 2, same: 2 } });
    expect(byName(replace.preview)).toEqual({ b: 'replace', f: 'replace' });
    expect(resource(replace.preview, 'b').diff).toEqual(['~ key: "k1" => "k2"']);
    expect(replace.up.counts).toEqual({ replace: 2, same: 2 });
    const del = previewAndUp('04-delete');
    expect(del.preview).toMatchObject({ complete: true, counts: { delete: 1, same: 3 } });
    expect(byName(del.preview)).toEqual({ b: 'delete' });
    expect(resource(del.preview, 'b').diff).toEqual(['  key  : "k2"', '  value: "bee"']);
    expect(del.up).toMatchObject({ complete: true, counts: { delete: 1, same: 3 } });
  });

  it('05 drift: preview --refresh shows what changed out of band and what the preview would undo', () => {
    const cs = parseWorkspaceLog(recording('05-drift'));
    expect(cs).toMatchObject({
      complete: true,
      run: { dryRun: true },
      counts: { update: 1, same: 2, refresh: 1 },
    });
    expect(resource(cs, 'f', 'refresh').diff).toEqual([
      '  --outputs:--',
      '~ content:',
      '    - hello-again',
      '    + changed out of band',
      '~ size   : 11 => 20',
    ]);
    expect(resource(cs, 'f', 'update').diff).toEqual([
      '~ content:',
      '    - changed out of band',
      '    + hello-again',
    ]);
  });

  it('06 a failing preview: failed, with the error lines, still complete', () => {
    const cs = parseWorkspaceLog(recording('06-error-program'));
    expect(cs).toMatchObject({ complete: true, failed: true, counts: { same: 3 } });
    expect(cs.errors).toEqual([
      'error: resource or variable named "doesNotExist" could not be found',
      'error: Error registering output [aValue]: no diagnostics',
    ]);
  });

  it('07 a failing up: the preview created, the up errored', () => {
    const { preview, up } = previewAndUp('07-error-up');
    expect(preview).toMatchObject({ complete: true, failed: false, counts: { create: 1, same: 3 } });
    expect(byName(preview)).toEqual({ c: 'create' });
    expect(up).toMatchObject({ complete: true, failed: true, counts: { same: 3 } });
    expect(up.errors).toEqual([
      'error: c: failing on create as asked (failOn: create)',
      'error: update failed',
    ]);
  });

  it('08 a large diff: all 31 resources and 152 property lines, or the caps with what they left out', () => {
    const log = recording('08-large');
    const cs = parseWorkspaceLog(log);
    expect(cs).toMatchObject({ complete: true, counts: { create: 30, update: 1, same: 2 } });
    expect(Object.keys(byName(cs))).toHaveLength(31);
    expect(resource(cs, 'a').diff).toHaveLength(152);
    expect(resource(cs, 'a').diff.slice(0, 2)).toEqual(['+ tags: {', '    + tag001: "value-001"']);

    const capped = parseWorkspaceLog(log, {
      maxResources: 5,
      maxDiffLinesPerResource: 10,
      maxDiffLineChars: 12,
    });
    expect(capped).toMatchObject({ complete: true, counts: { create: 30, update: 1, same: 2 } });
    expect(capped.resources).toHaveLength(5);
    expect(capped.omitted.resources).toBe(27);
    for (const r of capped.resources) {
      expect(r.diff.length).toBeLessThanOrEqual(10);
      for (const d of r.diff) expect([...d].length).toBeLessThanOrEqual(12);
    }
    if (capped.resources.some((r) => r.name === 'a')) expect(resource(capped, 'a').diffOmitted).toBe(142);
    const total = parseWorkspaceLog(log, { maxDiffLines: 20 });
    expect(total.resources.reduce((n, r) => n + r.diff.length, 0)).toBe(20);
    expect(total.omitted.diffLines).toBe(cs.resources.reduce((n, r) => n + r.diff.length, 0) - 20);
  });

  it('09 two runs at once: interleaved, never complete; what both listed is kept', () => {
    const cs = parseWorkspaceLog(recording('09-interleaved'));
    expect(cs.complete).toBe(false);
    expect(cs.incomplete).toEqual(['interleaved']);
    // The first banner's run, with the second's lines merged in (the two cannot be told apart).
    expect(cs.run?.startedAt).toBe('2026-12-01T15:24:46.133Z');
    expect(cs.resources.map((r) => r.op)).toEqual(['same', 'same', 'update', 'update']);
    expect(cs.countsFrom).toBe('resources');
    // Even with the Update's end known: both banners are in its time.
    const ended = parseWorkspaceLog(
      recording('09-interleaved'),
      {},
      {
        runComplete: true,
        endTime: '2026-12-01T15:24:46Z',
      },
    );
    expect(ended.incomplete).toEqual(['interleaved']);
  });
});

describe('every run of every recording: complete, with the counts the summary alone gave before B16', () => {
  // Counts before the change (summary + reads/refreshes from the lines), per recording and run.
  const before: Record<string, Partial<Record<string, number>>[]> = {
    '01-create': [{ create: 4 }, { create: 4 }],
    '02-update': [
      { update: 2, same: 2 },
      { update: 2, same: 2 },
    ],
    '03-replace': [
      { replace: 2, same: 2 },
      { replace: 2, same: 2 },
    ],
    '04-delete': [
      { delete: 1, same: 3 },
      { delete: 1, same: 3 },
    ],
    '05-drift': [{ update: 1, same: 2, refresh: 1 }],
    '06-error-program': [{ same: 3 }],
    '07-error-up': [{ create: 1, same: 3 }, { same: 3 }],
    '08-large': [{ create: 30, update: 1, same: 2 }],
  };
  it.each(Object.entries(before))('%s', (name, runs) => {
    const lines = recording(name).split('\n');
    const banners = lines.flatMap((l, i) => (/\tpulumi\t(?:Previewing|Updating) /.test(l) ? [i] : []));
    expect(banners).toHaveLength(runs.length);
    runs.forEach((counts, n) => {
      const cs = parseWorkspaceLog(`${lines.slice(banners[n], banners[n + 1]).join('\n')}\n`);
      expect(cs).toMatchObject({ complete: true, incomplete: [], countsFrom: 'summary' });
      expect(cs.counts).toEqual(counts);
    });
  });
});

describe('logs that do not hold a whole run', () => {
  const preview = (): string => {
    const text = recording('02-update');
    return text.slice(0, text.indexOf('\tpulumi\tUpdating (dev):'));
  };
  const lines = (): string[] => preview().split('\n');

  it('no run at all (rotated away, or read from too late)', () => {
    expect(parseWorkspaceLog('')).toMatchObject({ complete: false, incomplete: ['no-run'], counts: {} });
    const tail = lines()
      .filter((l) => !l.includes('Previewing update'))
      .join('\n');
    expect(parseWorkspaceLog(tail).incomplete).toEqual(['no-run']);
  });

  it('cut before the summary: counts from the resource lines read, a lower bound', () => {
    const ls = lines();
    const cut = ls
      .slice(
        0,
        ls.findIndex((l) => l.endsWith('\tResources:')),
      )
      .join('\n');
    expect(parseWorkspaceLog(cut)).toMatchObject({
      complete: false,
      incomplete: ['no-summary'],
      countsFrom: 'resources',
      counts: { same: 1, update: 2 },
    });
  });

  it('cut after the summary but before the end line', () => {
    const ls = lines();
    const cut = ls
      .slice(
        0,
        ls.findIndex((l) => l.includes('\tserver\tpreview completed')),
      )
      .join('\n');
    expect(parseWorkspaceLog(cut)).toMatchObject({
      complete: false,
      incomplete: ['no-end'],
      countsFrom: 'summary',
    });
  });

  it('a garbled line inside the run', () => {
    const ls = lines();
    ls.splice(ls.findIndex((l) => l.includes('(update)')) + 1, 0, 'garbage \u0000\u00ff not a log line');
    expect(parseWorkspaceLog(ls.join('\n')).incomplete).toEqual(['garbled']);
  });

  it('B16 an enormous property line is cut and counted: the set is incomplete (line-cut)', () => {
    const ls = lines();
    const at = ls.findIndex((l) => l.includes('~ value: "one" => "two"'));
    ls[at] = `${ls[at]}${'x'.repeat(100_000)}`;
    const cs = parseWorkspaceLog(ls.join('\n'));
    // What a cut line said after the cut is not known (the CLI's own line may be there).
    expect(cs).toMatchObject({ complete: false, incomplete: ['line-cut'], omitted: { longLines: 1 } });
    expect(resource(cs, 'a').diff[0]).toMatch(/^~ value: "one" => "two"x+…$/);
    expect([...(resource(cs, 'a').diff[0] ?? '')].length).toBe(500);
  });

  it('CRLF line ends and chunks split inside a UTF-8 character give the same change set; ANSI colours the same resources, incomplete', () => {
    const text = preview();
    const plain = parseWorkspaceLog(text);
    expect(parseWorkspaceLog(text.replace(/\n/g, '\r\n'))).toEqual(plain);
    // B16: the CLI writes no escape into the agent log; an escape is stripped for display, and is the program's.
    const coloured = text.replace(/(\tpulumi\t)(.*)/g, '$1\u001b[33m$2\u001b[0m').replace(/\n/g, '\r\n');
    expect(coloured).toContain('\u001b[33m    ~ ');
    expect(parseWorkspaceLog(coloured)).toEqual({
      ...plain,
      complete: false,
      incomplete: ['unexpected-output'],
    });
    const bytes = new TextEncoder().encode(`${text}\n`.replace('pkonc-changes-dev]', 'pkonc-changes-dév]'));
    const p = new ChangeSetParser();
    for (let i = 0; i < bytes.length; i += 7) p.push(bytes.subarray(i, i + 7));
    expect(resource(p.end({ runComplete: true }), 'pkonc-changes-dév').op).toBe('same');
  });

  it("a long-lived pod: later runs (banner after the Update's end) are not read; without the end they mix", () => {
    const text = recording('02-update');
    const at = text.lastIndexOf('\n', text.indexOf('\tpulumi\tUpdating (dev):')) + 1;
    const { preview } = previewAndUp('02-update');
    // The up as a later run of the same pod: its lines stamped a minute later.
    const later = text.slice(at).replace(/^2026-12-01T15:24:/gm, '2026-12-01T15:25:');
    const ended = { runComplete: true, endTime: '2026-12-01T15:24:31Z' };
    expect(parseWorkspaceLog(text.slice(0, at) + later, {}, ended)).toEqual(preview);
    // Within 6 s of the end (clock allowance) a banner is this run's: two runs mixed.
    expect(parseWorkspaceLog(text, {}, ended).incomplete).toEqual(['interleaved']);
    // No end time given: every banner is this run's.
    expect(parseWorkspaceLog(text.slice(0, at) + later).incomplete).toEqual(['interleaved']);
    // A line stamped inside the run's time after a later banner: the runs are mixed after all.
    const back = `${text.slice(0, at)}${later}2026-12-01T15:24:31.300Z\tINFO\tpulumi\t    - pkotest:index:Value: (delete)\n`;
    const mixed = parseWorkspaceLog(back, {}, ended);
    expect(mixed.incomplete).toContain('interleaved');
    expect(mixed.resources.some((r) => r.op === 'delete')).toBe(true);
  });

  it('the run had not ended when the log was read (the Update says so): no-end', () => {
    const { preview } = previewAndUp('02-update');
    expect(preview.complete).toBe(true);
    const text = recording('02-update');
    const at = text.lastIndexOf('\n', text.indexOf('\tpulumi\tUpdating (dev):')) + 1;
    expect(parseWorkspaceLog(text.slice(0, at), {}, { runComplete: false })).toMatchObject({
      complete: false,
      incomplete: ['no-end'],
      counts: preview.counts,
    });
  });
});
