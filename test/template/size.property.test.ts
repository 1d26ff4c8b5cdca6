/**
 * The comment fits every forge, as a property (issue 19): for random change sets — up to the
 * parser's 1,000 resources and past it in the counts, long names and types with Markdown
 * specials, backticks and emoji, up to 200 property lines of up to 500 code points per resource,
 * an incomplete set's long note, a long failed run's message — the built-in comment of every git provider type measures within
 * that forge's limit after rendering (src/forge/<type>/limits.ts: GitHub 65,536, GitLab
 * 1,000,000, Bitbucket Data Center 32,768, Gitea and Bitbucket Cloud 65,536, Azure DevOps
 * 150,000 UTF-16 units), starts with the marker, keeps the summary line and the commit, keeps its
 * code fences balanced, and when resources are left out says `Showing X of Y resources.` with
 * exactly the first X resources shown whole (their block in the property diff) and no other.
 * Fixed seed; FUZZ_RUNS and FUZZ_SEED as in test/fuzz.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { NotificationEvent } from '../../src/api/event.ts';
import { GIT_PROVIDER_TYPES } from '../../src/api/v1alpha1.ts';
import { STEP_OPS, type ChangeSet, type ResourceChange, type StepOp } from '../../src/changes/types.ts';
import { limitsFor } from '../../src/provider-types.ts';
import { changesContext } from '../../src/template/changes.ts';
import { markupFor } from '../../src/template/markup.ts';
import {
  changeSummary,
  compileTemplates,
  renderNotification,
  TemplateBudgetError,
  type TemplateSet,
} from '../../src/template/index.ts';
import { measure } from '../../src/text.ts';
import { COMMIT, fencesBalanced, stackEvent } from './fixtures.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 12);
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 65536;

function builtins(): TemplateSet {
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  return r.set;
}
const set = builtins();

const OPS = [
  'create',
  'update',
  'replace',
  'delete',
  'read',
  'import',
  'refresh',
] as const satisfies readonly StepOp[];
const piece = fc.constantFrom(
  'a',
  'Z',
  '9',
  '-',
  '_',
  '*',
  '`',
  '```',
  '<b>',
  '|',
  '😀',
  'é',
  '[x](y)',
  ' ',
  '\\',
  '#',
);
const text = (max: number): fc.Arbitrary<string> =>
  fc
    .tuple(fc.array(piece, { maxLength: 16 }), fc.integer({ min: 0, max }))
    .map(([p, n]) => `${p.join('')}${'n'.repeat(n)}`);

const resource = fc.record({
  op: fc.constantFrom(...OPS),
  name: text(300),
  type: text(120),
  lines: fc.integer({ min: 0, max: 200 }),
  lineChars: fc.integer({ min: 1, max: 500 }),
  fence: fc.boolean(),
});

/** A change set of `n` resources (names made unique by their index) and counts at least as large. */
const changeSet = fc
  .record({
    resources: fc
      .oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 300, max: 1000 }))
      .chain((n) => fc.array(resource, { minLength: n, maxLength: n })),
    extra: fc.dictionary(fc.constantFrom(...STEP_OPS), fc.integer({ min: 0, max: 5_000_000 })),
    dryRun: fc.boolean(),
    note: fc.option(text(2000)),
  })
  .map(({ resources, extra, dryRun, note }): ChangeSet => {
    const counts: Partial<Record<StepOp, number>> = {};
    const list: ResourceChange[] = resources.map((r, i) => {
      counts[r.op] = (counts[r.op] ?? 0) + 1;
      const name = `r${String(i)}-${r.name}`;
      return {
        op: r.op,
        type: `pkg:index:${r.type}`,
        name,
        urn: `urn:pulumi:dev::app::pkg:index:T::${name}`,
        retain: false,
        diff: Array.from({ length: r.lines }, (_, j) =>
          `~ p${String(j)}: "${(r.fence ? '````' : '😀').repeat(Math.ceil(r.lineChars / 8))}${'v'.repeat(r.lineChars)}"`.slice(
            0,
            500,
          ),
        ),
        diffOmitted: 0,
      };
    });
    for (const [op, n] of Object.entries(extra)) counts[op as StepOp] = (counts[op as StepOp] ?? 0) + n;
    return {
      source: note === null ? 'workspace-log' : 'pulumi-cloud',
      complete: note === null,
      incomplete: note === null ? [] : ['partial-events'],
      ...(note === null ? {} : { note }),
      run: { kind: 'update', dryRun, stack: 'dev', startedAt: '2026-12-01T00:00:00Z' },
      failed: false,
      counts,
      countsFrom: 'summary',
      resources: list,
      errors: [],
      omitted: { resources: 0, diffLines: 0, longLines: 0, errors: 0 },
    };
  });

/** A failed run's message of up to 8,192 code points (the cap where events are made). */
const message = fc
  .integer({ min: 0, max: 8000 })
  .map((n) => `Update of stack acme/app/dev failed:\n${'😀x'.repeat(Math.floor(n / 2))}\nerror: boom`);

describe('the comment fits every forge, whatever the change set', () => {
  it('within the limit; marker, summary, commit kept; cut at whole resources with "Showing X of Y"', () => {
    fc.assert(
      fc.property(changeSet, message, (cs, msg) => {
        const ev: NotificationEvent = stackEvent({
          reason: 'PreviewFailed',
          message: msg,
          metadata: { ...stackEvent().metadata, pullRequest: '7' },
          changes: { set: cs },
        });
        const summary = changeSummary(cs).summary;
        for (const type of GIT_PROVIDER_TYPES) {
          const limits = limitsFor(type);
          let out;
          try {
            out = renderNotification(set, ev, {
              clusterName: 'prod',
              providerType: type,
              commentsEnabled: true,
              limits,
            });
          } catch (err) {
            // A machine under load may run out of render time: nothing is posted then.
            if (err instanceof TemplateBudgetError && err.kind === 'time') continue;
            throw err;
          }
          const body = out.comment?.body ?? '';
          const limit = limits.comment;
          if (limit === undefined) throw new Error(`${type} has no comment limit`);
          expect(measure(body, limit.unit)).toBeLessThanOrEqual(limit.max);
          expect(body.startsWith(out.comment?.marker ?? '?')).toBe(true);
          // R22: an incomplete set's summary says so, with its reason, escaped (it carries text).
          expect(body).toContain(
            cs.complete ? `**${summary}**` : `**⚠️ ${markupFor(type).comment.text(summary)}**`,
          );
          expect(body).toContain(COMMIT);
          expect(fencesBalanced(body)).toBe(true);
          const full = changesContext({ set: cs });
          const m = /Showing ([\d,]+) of ([\d,]+) resources\./.exec(body);
          const shown = m === null ? (full?.shown ?? 0) : Number((m[1] ?? '').replace(/,/g, ''));
          if (m !== null) expect(Number((m[2] ?? '').replace(/,/g, ''))).toBe(full?.total);
          else expect(full?.omitted).toBe(0);
          // Exactly the first `shown` resources, each whole; the next one not at all.
          const ctx = changesContext({ set: cs }, shown);
          expect(ctx?.shown).toBe(shown);
          for (const r of ctx?.resources ?? []) expect(body).toContain(r.diffText);
          const next = full?.resources[shown];
          if (next !== undefined) expect(body).not.toContain(`${next.diffText}\n`);
        }
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 600_000);
});
