/**
 * The `changes` template key and the built-in templates over the recordings of the real PKO v2
 * agent (test/fixtures/agent-logs/): counts, names and property lines reach every provider type,
 * and the comment fits every forge's limit, cut at whole resources with the summary kept.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PROVIDER_TYPES, isGitProviderType, type ProviderType } from '../../src/api/v1alpha1.ts';
import type { NotificationEvent } from '../../src/api/event.ts';
import { parseWorkspaceLog } from '../../src/changes/parse.ts';
import type { ChangeSet } from '../../src/changes/types.ts';
import { limitsFor } from '../../src/provider-types.ts';
import {
  compileTemplates,
  renderNotification,
  sampleChangeSet,
  templateContext,
  type TemplateSet,
} from '../../src/template/index.ts';
import { measure } from '../../src/text.ts';
import { exampleRendering } from './changes-example.ts';
import { fencesBalanced, stackEvent } from './fixtures.ts';

function builtins(): TemplateSet {
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  return r.set;
}
const set = builtins();

/** The run of a recording that starts at its `n`-th banner (0-based): its lines only. */
function recordedRun(file: string, n: number): ChangeSet {
  const text = readFileSync(new URL(`../fixtures/agent-logs/${file}`, import.meta.url), 'utf8');
  const lines = text.split('\n');
  const banners = lines
    .map((l, i) => (/\t(Previewing|Updating|Destroying|Refreshing) [^\t]*\(.+\):$/.test(l) ? i : -1))
    .filter((i) => i >= 0);
  const start = banners[n];
  if (start === undefined) throw new Error(`${file} has no run ${String(n)}`);
  return parseWorkspaceLog(lines.slice(start, banners[n + 1]).join('\n'));
}

function previewEvent(changes: NotificationEvent['changes'], reason = 'PreviewSucceeded'): NotificationEvent {
  return stackEvent({
    reason: reason as NotificationEvent['reason'],
    severity: reason.endsWith('Failed') ? 'error' : 'info',
    message: `Preview of stack acme/app/dev ${reason.endsWith('Failed') ? 'failed' : 'succeeded'}`,
    metadata: { ...stackEvent().metadata, pullRequest: '7' },
    ...(changes ? { changes } : {}),
  });
}

function renderAll(ev: NotificationEvent, type: ProviderType) {
  return renderNotification(set, ev, {
    clusterName: 'prod',
    providerType: type,
    commentsEnabled: isGitProviderType(type),
    limits: limitsFor(type),
  });
}

describe('changes in the template context', () => {
  it('is null when the event carries no change information', () => {
    expect(templateContext(stackEvent(), { clusterName: 'c', providerType: 'github' }).changes).toBeNull();
  });

  it('counts, summary, resources by operation and property lines of the update preview', () => {
    const cs = recordedRun('02-update.log', 0);
    expect(cs.run?.dryRun).toBe(true);
    const c = templateContext(previewEvent({ set: cs }), {
      clusterName: 'c',
      providerType: 'github',
    }).changes;
    expect(c).not.toBeNull();
    expect(c?.summary).toBe('~2 to update');
    expect(c?.short).toBe('~2');
    expect(c?.counts.update).toBe(2);
    expect(c?.counts.create).toBe(0);
    expect(c?.changed).toBe(2);
    expect(c?.operations.map((o) => [o.op, o.count, o.resources.map((r) => r.name)])).toEqual([
      ['update', 2, ['a', 'f']],
    ]);
    expect(c?.resources[0]?.urn).toBe('urn:pulumi:dev::pkonc-changes::pkotest:index:Value::a');
    expect(c?.resources[0]?.diff).toEqual(['~ value: "one" => "two"']);
    expect(c?.complete).toBe(true);
    expect(c?.source).toBe('workspace-log');
    expect(c?.unavailable).toBeNull();
  });

  it('a run that applied says what it did in the past tense', () => {
    const c = templateContext(previewEvent({ set: recordedRun('01-create.log', 1) }), {
      clusterName: 'c',
      providerType: 'github',
    }).changes;
    expect(c?.dryRun).toBe(false);
    expect(c?.summary).toBe('+4 created');
  });

  it('orders the summary create, update, delete, replace', () => {
    const cs: ChangeSet = { ...sampleChangeSet(4), counts: { replace: 1, delete: 1, update: 1, create: 1 } };
    const c = templateContext(previewEvent({ set: cs }), {
      clusterName: 'c',
      providerType: 'github',
    }).changes;
    expect(c?.summary).toBe('+1 to create, ~1 to update, -1 to delete, +-1 to replace');
    expect(c?.short).toBe('+1 ~1 -1 +-1');
  });

  it('R22: unavailable: the summary says so with the reason, no counts', () => {
    const c = templateContext(previewEvent({ unavailable: 'no change details: the pod is gone' }), {
      clusterName: 'c',
      providerType: 'github',
    }).changes;
    expect(c?.unavailable).toBe('no change details: the pod is gone');
    expect(c?.summary).toBe('change set unavailable: the pod is gone');
    expect(c?.short).toBe('change set unavailable: the pod is gone');
    expect(c?.complete).toBe(false);
    expect(c?.resources).toEqual([]);
  });

  it('R22: incomplete: the summary says so with the reason; what was read is a lower bound, never "no changes"', () => {
    const cut: ChangeSet = { ...sampleChangeSet(0), complete: false, incomplete: ['no-summary'], counts: {} };
    const c = templateContext(previewEvent({ set: cut }), {
      clusterName: 'c',
      providerType: 'github',
    }).changes;
    const why =
      'the log has no summary of the run (cut, rotated, or the run stopped early): counts are a lower bound';
    expect(c?.summary).toBe(`change set incomplete: ${why}`);
    expect(c?.short).toBe(c?.summary);
    expect(c?.incomplete).toBe(why);
    const some: ChangeSet = {
      ...sampleChangeSet(2),
      complete: false,
      incomplete: ['no-end'],
      note: 'Pulumi Cloud: rate-limited',
    };
    const s = templateContext(previewEvent({ set: some }), {
      clusterName: 'c',
      providerType: 'github',
    }).changes;
    expect(s?.summary).toBe(
      'change set incomplete (read so far: +1 to create, ~1 to update): the end of the run was not in the log; Pulumi Cloud: rate-limited',
    );
    // Only a complete set with nothing to change says "no changes".
    const none: ChangeSet = { ...sampleChangeSet(0), counts: {} };
    expect(
      templateContext(previewEvent({ set: none }), { clusterName: 'c', providerType: 'github' }).changes
        ?.summary,
    ).toBe('no changes');
  });
});

describe('built-in templates render the recordings', () => {
  const runs: [string, number, string, string[], string][] = [
    ['01-create.log', 0, '+4 to create', ['a', 'b', 'f'], '  value: "one"'],
    ['02-update.log', 0, '~2 to update', ['a', 'f'], '~ content: "hello" => "hello-again"'],
    ['03-replace.log', 0, '+-2 to replace', ['b', 'f'], '~ key: "k1" => "k2"'],
    ['04-delete.log', 0, '-1 to delete', ['b'], '  key  : "k2"'],
    ['08-large.log', 0, '+30 to create, ~1 to update', ['n01', 'a'], '+ tag001: "value-001"'],
  ];
  for (const [file, n, summary, names, line] of runs) {
    for (const type of PROVIDER_TYPES) {
      it(`${file} → ${type}`, () => {
        const out = renderAll(previewEvent({ set: recordedRun(file, n) }), type);
        const short = summary.replace(/ to [a-z]+/g, '').replace(/, /g, ' ');
        expect(out.message).toContain(short);
        if (!isGitProviderType(type)) return;
        expect(out.commitStatus?.description).toContain(summary);
        const body = out.comment?.body ?? '';
        const lines = body.split('\n');
        // The summary line comes right after the title.
        expect(lines.slice(0, 4).join('\n')).toContain(`**${summary}**`);
        for (const name of names) expect(body).toContain(`\`${name}\``);
        expect(body).toContain(line);
        expect(body).toMatch(/<details><summary>Property changes<\/summary>/);
        expect(fencesBalanced(body)).toBe(true);
      });
    }
  }

  it('a failed up: the CLI summary counts no change, the resource it tried is listed', () => {
    const out = renderAll(previewEvent({ set: recordedRun('07-error-up.log', 1) }, 'UpdateFailed'), 'github');
    expect(out.commitStatus?.description).toMatch(/^no changes · /);
    expect(out.comment?.body).toContain('`c`');
    expect(out.comment?.body).toContain('failOn: "create"');
    // The summary says what was done (nothing); the group what was attempted.
    expect(out.comment?.body).toContain('**+1 create attempted**');
  });

  it('one operation: its line is not repeated under the summary', () => {
    const body =
      renderAll(previewEvent({ set: recordedRun('02-update.log', 0) }), 'github').comment?.body ?? '';
    expect(body.split('**~2 to update**')).toHaveLength(2);
    // The resources follow the summary after one blank line.
    expect(body).toContain(
      '**~2 to update**\n\n- `a` (`pkotest:index:Value`)\n- `f` (`pkotest:index:File`)\n',
    );
    const ctx = templateContext(previewEvent({ set: recordedRun('02-update.log', 0) }), {
      clusterName: 'c',
      providerType: 'github',
    }).changes;
    expect(ctx?.operations.map((o) => o.heading)).toEqual([false]);
  });

  it('several operations, or one whose line differs from the summary, keep their lines', () => {
    const two =
      renderAll(previewEvent({ set: recordedRun('08-large.log', 0) }), 'github').comment?.body ?? '';
    expect(two).toContain('**+30 to create, ~1 to update**');
    expect(two).toContain('\n**+30 to create**\n- `');
    expect(two).toContain('\n**~1 to update**\n- `a`');
    // A failed up: the summary says what was done, the one group what was attempted.
    const failed = renderAll(
      previewEvent({ set: recordedRun('07-error-up.log', 1) }, 'UpdateFailed'),
      'github',
    );
    expect(failed.comment?.body).toContain('**+1 create attempted**');
  });

  it("R22: a status description too long for the forge cuts the change set's reason first, so the run's last line fits", () => {
    const cut: ChangeSet = {
      ...sampleChangeSet(0),
      run: { kind: 'update', dryRun: false, stack: 'dev', startedAt: '2026-12-01T00:00:00Z' },
      complete: false,
      incomplete: ['no-summary', 'no-end'],
      counts: {},
    };
    const ev = stackEvent({
      message: 'Update of stack acme/app/dev failed:\nerror: boom',
      changes: { set: cut },
    });
    for (const type of ['github'] as const) {
      const d = renderAll(ev, type).commitStatus?.description ?? '';
      expect(measure(d, limitsFor(type).statusDescription?.unit ?? 'codePoints')).toBeLessThanOrEqual(
        limitsFor(type).statusDescription?.max ?? 0,
      );
      expect(d).toMatch(
        /^change set incomplete: the log has no summary of the run \(cut, rotated, or the run/,
      );
      expect(d).toMatch(/… · Update of stack acme\/app\/dev failed: error: boom$/);
      expect(d).not.toContain('no changes');
    }
  });

  it('R22: unavailable details are said in the comment and in the status', () => {
    const why = 'the controller may not read pods/log in namespace team-a';
    const out = renderAll(previewEvent({ unavailable: `no change details: ${why}` }), 'github');
    const shown = (out.comment?.body ?? '')
      .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
      .replaceAll('\u200b', '');
    expect(shown).toContain(`**⚠️ change set unavailable: ${why}**`);
    expect(out.commitStatus?.description).toBe(
      `change set unavailable: ${why} · Preview of stack acme/app/dev succeeded`,
    );
    expect(out.message).toContain(`Changes: change set unavailable: ${why}`);
  });
});

describe('the comment fits every forge, cut at whole resources', () => {
  const huge = sampleChangeSet(1000, 5, 500);
  for (const type of PROVIDER_TYPES.filter(isGitProviderType)) {
    it(`${type}: within the limit, summary, SHA and marker kept, "showing X of Y"`, () => {
      const limit = limitsFor(type).comment;
      const out = renderAll(previewEvent({ set: huge }), type);
      const body = out.comment?.body ?? '';
      if (limit !== undefined) expect(measure(body, limit.unit)).toBeLessThanOrEqual(limit.max);
      expect(body.startsWith(out.comment?.marker ?? '?')).toBe(true);
      expect(body).toContain('**+250 to create, ~250 to update, -250 to delete, +-250 to replace**');
      expect(body).toContain('1111111111111111111111111111111111111111');
      const m = /Showing ([\d,]+) of 1,000 resources\./.exec(body);
      expect(m).not.toBeNull();
      const shown = Number((m?.[1] ?? '').replace(/,/g, ''));
      expect(shown).toBeGreaterThan(0);
      // Whole resources: every listed resource has its whole block in the diff, no other is there.
      const listed = [...body.matchAll(/^- `(res-\d+)`/gm)].map((x) => x[1]);
      expect(listed).toHaveLength(shown);
      for (const name of listed)
        expect(body).toMatch(
          new RegExp(` ${name ?? ''} \\((create|update|replace|delete)\\)\\n(    .*\\n){5}`),
        );
      expect(fencesBalanced(body)).toBe(true);
      const desc = limitsFor(type).statusDescription;
      if (desc !== undefined)
        expect(measure(out.commitStatus?.description ?? '', desc.unit)).toBeLessThanOrEqual(desc.max);
    });
  }

  it('shows the most resources that fit: one more would not', () => {
    const limit = limitsFor('github').comment;
    if (limit === undefined) throw new Error('github has a comment limit');
    const body = renderAll(previewEvent({ set: huge }), 'github').comment?.body ?? '';
    const shown = Number(/Showing ([\d,]+) of/.exec(body)?.[1] ?? 'NaN');
    // Each sample resource adds > 2,500 characters (5 lines of 500), and the body is within one of the limit.
    expect(limit.max - measure(body, limit.unit)).toBeLessThan(2 * 2600);
    expect(shown).toBeGreaterThan(10);
  });

  it('nothing is cut when it fits', () => {
    const body =
      renderAll(previewEvent({ set: recordedRun('08-large.log', 0) }), 'github').comment?.body ?? '';
    expect(body).not.toContain('Showing');
  });
});

describe('the documents show a real rendering', () => {
  for (const doc of ['../../docs/previews.md', '../../templates/README.md']) {
    it(`${doc.slice(6)} shows the comment, status and message the code renders from the recording`, () => {
      const text = readFileSync(new URL(doc, import.meta.url), 'utf8');
      const e = exampleRendering();
      expect(text).toContain(`\`\`\`\`text\n${e.comment}\`\`\`\`\n`);
      expect(text).toContain(`Commit status description: \`${e.status}\`.`);
      expect(text).toContain(`\`\`\`text\n${e.message}\n\`\`\`\n`);
      expect(e.comment).toContain('~ value: "one" => "two"');
    });
  }
});

describe('custom templates and `changes`', () => {
  it('checks the keys of `changes` when the Alert is applied', () => {
    const typo = compileTemplates({ message: '{{#if changes}}{{changes.sumary}}{{/if}}' });
    expect(typo.ok).toBe(false);
    if (!typo.ok)
      expect(typo.message).toMatch(/unknown key `changes.sumary` \(`changes` has: summary, short/);
    const deep = compileTemplates({ message: '{{#if changes}}{{changes.counts.bogus}}{{/if}}' });
    expect(deep.ok).toBe(false);
    const fine = compileTemplates({
      message:
        '{{#if changes}}{{changes.counts.create}} {{{changes.short}}}{{#each changes.resources}} {{name}}{{/each}}{{/if}}',
    });
    expect(fine.ok).toBe(true);
  });

  it('a template reading `changes` without `{{#if changes}}` is refused: changes is null on most events', () => {
    const r = compileTemplates({ message: '{{changes.summary}}' });
    expect(r.ok).toBe(false);
  });
});
