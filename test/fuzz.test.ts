/**
 * Property-based fuzzing (fast-check) of what tenants control, with a fixed seed so `npm test` is
 * reproducible: template sources, and PKO Stack/Update statuses rendered by the built-in and
 * fuzzed templates. `npm run fuzz` runs the same properties with many more runs and a random seed
 * (FUZZ_RUNS, FUZZ_SEED override both; a failure prints the seed and path that replay it).
 *
 * Properties:
 * - compiling any source never throws, never overflows the stack, and gives a line that exists;
 * - the pre-parse scan never lets through a source that Handlebars nests deeper than the limit;
 * - rendering any event with any template that compiled either succeeds with every field within
 *   the provider type's limits, or fails with `TemplateBudgetError` — nothing else;
 * - deriving events from any Stack or Update status never throws, and every event has a known
 *   reason, a severity, an id and a message within 8,192 code points.
 */
import fc from 'fast-check';
import Handlebars from 'handlebars';
import { describe, expect, it } from 'vitest';
import type { NotificationEvent } from '../src/api/event.ts';
import type { Stack, Update } from '../src/api/pko.ts';
import { PROVIDER_TYPES, type ProviderType } from '../src/api/v1alpha1.ts';
import { limitsFor } from '../src/provider-types.ts';
import { eventsFromStack, eventsFromUpdate } from '../src/source/derive.ts';
import { measure } from '../src/text.ts';
import {
  compileTemplates,
  CONTEXT_KEYS,
  renderNotification,
  TEMPLATE_LIMITS,
  TemplateBudgetError,
  type TemplateSet,
} from '../src/template/index.ts';
import { checkSource } from '../src/template/limits.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 400);
/** Fixed in `npm test`; random for a larger run (`npm run fuzz`) unless FUZZ_SEED is given. */
const SEED =
  process.env.FUZZ_SEED !== undefined
    ? Number(process.env.FUZZ_SEED)
    : process.env.FUZZ_RUNS !== undefined
      ? Date.now() % 2_147_483_647
      : 20_260_101;
const params = { numRuns: RUNS, seed: SEED, endOnFailure: true } as const;
const TIMEOUT = Math.max(60_000, RUNS * 400);

// ---------------------------------------------------------------------------------------------
// Template sources: fragments of Handlebars, valid and not, glued together.

const key = fc.constantFrom(
  ...CONTEXT_KEYS,
  'stak',
  '__proto__',
  'constructor',
  'metadata.commit',
  'labels.app',
);
const helper = fc.constantFrom(
  'truncate',
  'codeBlock',
  'pluralize',
  'duration',
  'lower',
  'upper',
  'default',
  'eq',
  'shortSha',
  'lookup',
  'log',
  'nope',
);
const literal = fc.oneof(
  fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s)),
  fc.integer({ min: -5, max: 1_000_000 }).map(String),
  fc.constantFrom('true', 'null', "'single'", '@root', '@index', '@key', 'this', '../stackName'),
);
const expr: fc.Arbitrary<string> = fc.letrec<{ e: string }>((tie) => ({
  e: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    key,
    literal,
    fc.tuple(helper, fc.array(tie('e'), { maxLength: 3 })).map(([h, args]) => `(${[h, ...args].join(' ')})`),
  ),
})).e;
const mustache = fc.oneof(
  key.map((k) => `{{${k}}}`),
  fc
    .tuple(helper, fc.array(expr, { minLength: 0, maxLength: 3 }))
    .map(([h, a]) => `{{${[h, ...a].join(' ')}}}`),
  fc.string({ maxLength: 20 }).map((s) => `{{!${s.replace(/}}/g, '')}}}`),
  fc.constantFrom(
    '{{else}}',
    '{{^}}',
    '{{> partial}}',
    '{{{message}}}',
    '{{~summary~}}',
    '\\{{escaped}}',
    '{{*decorator}}',
    '{{{{raw}}}}{{x}}{{{{/raw}}}}',
  ),
);
const node: fc.Arbitrary<string> = fc.letrec<{ n: string }>((tie) => ({
  n: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.string({ maxLength: 30 }),
    mustache,
    mustache,
    key.map((k) => `{{${k}}}`),
    fc
      .tuple(
        fc.constantFrom('if', 'unless', 'each', 'with', 'eq', 'metadata', 'nope'),
        expr,
        fc.array(tie('n'), { maxLength: 4 }),
        fc.boolean(),
      )
      .map(([b, e, body, inv]) => `{{#${b} ${e}}}${body.join('')}${inv ? '{{else}}x' : ''}{{/${b}}}`),
    // Deep nesting, around the limit (24): rarer than the rest.
    fc.nat({ max: 30 }).map((d) => `{{${'lower ('.repeat(d)}lower message${')'.repeat(d)}}}`),
    fc.nat({ max: 30 }).map((d) => `${'{{#if message}}'.repeat(d)}x${'{{/if}}'.repeat(d)}`),
  ),
})).n;
const source = fc
  .tuple(fc.array(node, { maxLength: 12 }), fc.constantFrom('', '\n', ' '))
  .map(([parts, sep]) => parts.join(sep));

// ---------------------------------------------------------------------------------------------
// PKO objects: the fields derivation reads, with hostile values.

const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', '\u001b[31mred\u001b[0m', 'a\rb\rc', '😀'.repeat(10), 'x'.repeat(20_000)),
);
const time = fc.oneof(
  fc
    .date({ min: new Date('1970-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc.constantFrom('', 'not a time', '2026-13-45T99:99:99Z'),
);
const sha = fc.oneof(
  fc.stringMatching(/^[0-9a-f]{40}$/),
  text,
  fc.constantFrom('main@sha1:' + 'a'.repeat(40), 'sha256:abc', '3'),
);
const condition = fc.record({
  type: fc.constantFrom('Ready', 'Reconciling', 'Stalled', 'Complete', 'Failed', 'Progressing', 'Other'),
  status: fc.constantFrom('True', 'False', 'Unknown'),
  reason: fc.oneof(
    fc.constantFrom('UpdateFailed', 'Aborted', 'Canceled', 'Succeeded', 'Unknown', 'StackProcessing'),
    text,
  ),
  message: text,
  lastTransitionTime: time,
});
const runType = fc.oneof(fc.constantFrom('up', 'preview', 'destroy', 'refresh'), text);
const runName = fc.oneof(
  fc.tuple(fc.constantFrom('app', 'x'), fc.stringMatching(/^[0-9a-f]{1,16}$/)).map(([s, h]) => `${s}-${h}`),
  fc.constantFrom('app-fffffffffff', 'app-manual-refresh-000000001', ''),
  text,
);
const meta = (name: fc.Arbitrary<string>) =>
  fc.record(
    {
      name,
      namespace: fc.constantFrom('team-a', ''),
      uid: fc.uuid(),
      resourceVersion: fc.nat().map(String),
      labels: fc.dictionary(fc.string({ minLength: 1, maxLength: 20 }), fc.string({ maxLength: 20 }), {
        maxKeys: 5,
      }),
    },
    { requiredKeys: ['uid'] },
  );
const stackArb: fc.Arbitrary<Stack> = fc.record({
  apiVersion: fc.constant('pulumi.com/v1'),
  kind: fc.constant('Stack'),
  metadata: meta(fc.constantFrom('app', 'x')),
  spec: fc.record(
    {
      stack: fc.oneof(fc.constantFrom('acme/app/dev', 'dev'), text),
      projectRepo: fc.oneof(
        fc.constantFrom('https://github.com/acme/app', 'git@github.com:acme/app.git'),
        text,
      ),
      branch: text,
      commit: sha,
      fluxSource: fc.record({ sourceRef: fc.record({ kind: fc.constant('GitRepository'), name: text }) }),
      programRef: fc.record({ name: text }),
    },
    { requiredKeys: [] },
  ),
  status: fc.record(
    {
      observedGeneration: fc.nat(),
      conditions: fc.array(condition, { maxLength: 4 }),
      lastUpdate: fc.record(
        {
          generation: fc.nat(),
          name: runName,
          type: runType,
          state: fc.oneof(fc.constantFrom('succeeded', 'failed'), text),
          message: text,
          lastAttemptedCommit: sha,
          lastSuccessfulCommit: sha,
          permalink: text,
          lastResyncTime: time,
          failures: fc.integer({ min: -1, max: 1_000_000 }),
        },
        { requiredKeys: [] },
      ),
      currentUpdate: fc.record({ generation: fc.nat(), name: runName, commit: sha }, { requiredKeys: [] }),
    },
    { requiredKeys: [] },
  ),
});
const updateArb = (stack: Stack): fc.Arbitrary<Update> =>
  fc.record({
    apiVersion: fc.constant('auto.pulumi.com/v1alpha1'),
    kind: fc.constant('Update'),
    metadata: meta(runName).map((m) => ({
      ...m,
      ownerReferences: [
        {
          apiVersion: 'pulumi.com/v1',
          kind: 'Stack',
          name: stack.metadata.name ?? '',
          uid: stack.metadata.uid ?? '',
        },
      ],
    })),
    spec: fc.record({ type: runType, message: text, stackName: text }, { requiredKeys: [] }),
    status: fc.record(
      {
        startTime: time,
        endTime: time,
        permalink: text,
        message: text,
        outputs: text,
        conditions: fc.array(condition, { maxLength: 4 }),
      },
      { requiredKeys: [] },
    ),
  });

const ctx = { reportingController: 'pko-notification-controller' };
const REASONS = new Set(
  ['Preview', 'Update', 'Destroy', 'Refresh']
    .flatMap((o) => ['Started', 'Succeeded', 'Failed'].map((p) => `${o}${p}`))
    .concat('StackStalled'),
);

function derive(stack: Stack, updates: readonly Update[]): NotificationEvent[] {
  const names = new Set(updates.map((u) => `${u.metadata.namespace ?? ''}/${u.metadata.name ?? ''}`));
  return [
    ...eventsFromStack(stack, ctx, { updateExists: (ns, n) => names.has(`${ns}/${n}`) }),
    ...updates.flatMap((u) => eventsFromUpdate(u, stack, ctx)),
  ];
}

/** Renders `ev` with `set` for `type`; every field within the type's limits, or a budget error. */
function renderChecked(set: TemplateSet, ev: NotificationEvent, type: ProviderType): void {
  const limits = limitsFor(type);
  try {
    const r = renderNotification(set, ev, {
      clusterName: 'fuzz',
      providerType: type,
      commentsEnabled: true,
      limits,
    });
    const fits = (value: string | undefined, limit: (typeof limits)['message']): void => {
      if (value !== undefined && limit !== undefined)
        expect(measure(value, limit.unit)).toBeLessThanOrEqual(limit.max);
    };
    fits(r.message, limits.message);
    fits(r.commitStatus?.description, limits.statusDescription);
    fits(r.commitStatus?.context, limits.statusContext);
    fits(r.comment?.body, limits.comment);
  } catch (err) {
    if (!(err instanceof TemplateBudgetError)) throw err;
  }
}

const builtins = (() => {
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  return r.set;
})();

/** Depth of blocks and subexpressions of a parsed template (what the scan bounds). */
function astDepth(node: unknown, depth = 0): number {
  if (node === null || typeof node !== 'object') return depth;
  const n = node as {
    type?: string;
    body?: unknown[];
    program?: unknown;
    inverse?: unknown;
    params?: unknown[];
    path?: unknown;
  };
  const here = n.type === 'BlockStatement' || n.type === 'SubExpression' ? depth + 1 : depth;
  let max = here;
  for (const child of [...(n.body ?? []), n.program, n.inverse, ...(n.params ?? []), n.path]) {
    if (child !== undefined) max = Math.max(max, astDepth(child, here));
  }
  return max;
}

describe(`fuzz (fast-check, seed ${String(SEED)}, ${String(RUNS)} runs per property)`, () => {
  it(
    'any template source: compiling never throws or overflows; a line given exists',
    () => {
      fc.assert(
        fc.property(source, (src) => {
          const r = compileTemplates({ message: src });
          if (!r.ok) {
            expect(r.message).not.toMatch(/Maximum call stack/);
            if (r.line !== null) expect(r.line).toBeGreaterThanOrEqual(1);
            if (r.line !== null) expect(r.line).toBeLessThanOrEqual(src.split('\n').length + 1);
          }
        }),
        params,
      );
    },
    TIMEOUT,
  );

  it(
    'the pre-parse scan never passes a source Handlebars nests deeper than the limit',
    () => {
      fc.assert(
        fc.property(source, (src) => {
          if (checkSource(src) !== null) return;
          let ast: unknown;
          try {
            ast = Handlebars.parseWithoutProcessing(src);
          } catch {
            return; // not a template at all: refused later with the parser's message
          }
          // Blocks (chained `{{else if}}` included: each is a block inside the previous one's
          // inverse) and subexpressions, as the compiler recurses through them.
          expect(astDepth(ast)).toBeLessThanOrEqual(TEMPLATE_LIMITS.maxDepth);
        }),
        params,
      );
    },
    TIMEOUT,
  );

  it(
    'any compiled template × any event × any provider type: fields within limits, or a budget error',
    () => {
      fc.assert(
        fc.property(source, stackArb, fc.constantFrom(...PROVIDER_TYPES), (src, stack, type) => {
          const r = compileTemplates({ message: src, commitStatusDescription: src, pullRequestComment: src });
          const set = r.ok ? r.set : builtins;
          for (const ev of derive(stack, [])) renderChecked(set, ev, type);
        }),
        params,
      );
    },
    TIMEOUT,
  );

  it(
    'any Stack and Update status: derivation never throws; events are well-formed and render within limits',
    () => {
      fc.assert(
        fc.property(
          stackArb.chain((s) => fc.tuple(fc.constant(s), fc.array(updateArb(s), { maxLength: 3 }))),
          fc.constantFrom(...PROVIDER_TYPES),
          ([stack, updates], type) => {
            const events = derive(stack, updates);
            for (const ev of events) {
              expect(REASONS.has(ev.reason)).toBe(true);
              expect(['info', 'error']).toContain(ev.severity);
              expect(typeof ev.id).toBe('string');
              expect(ev.id.length).toBeGreaterThan(0);
              expect(measure(ev.message, 'codePoints')).toBeLessThanOrEqual(8192);
              renderChecked(builtins, ev, type);
            }
          },
        ),
        params,
      );
    },
    TIMEOUT,
  );
});
