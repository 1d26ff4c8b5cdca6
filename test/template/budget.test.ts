/**
 * B01, B02 — what one template may cost (src/template/limits.ts, budget.ts, sandbox.ts): source
 * size and nesting are checked before Handlebars parses, renders stop at their budget with the
 * line, the apply-time test render uses the largest event the API allows, and the sandbox's
 * workers are replaced when a request outlives its watchdog.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  compileTemplates,
  renderNotification,
  TEMPLATE_LIMITS,
  TemplateBudgetError,
  TemplateSandbox,
  templateContext,
  type RenderOptions,
} from '../../src/template/index.ts';
import { RenderBudget, withBudget } from '../../src/template/budget.ts';
import { checkSource } from '../../src/template/limits.ts';
import { plain } from '../../src/template/markup.ts';
import { stackEvent } from './fixtures.ts';

const opts: RenderOptions = { clusterName: 'c', providerType: 'slack', commentsEnabled: false, limits: {} };

/** B02's template: `{{lower (lower … message)}}` 10,000 deep, 84 KB with a prose header. */
function b02Template(): string {
  const deep = `{{${'lower ('.repeat(9_999)}lower message${')'.repeat(9_999)}}}`;
  return `${'Deployment report for the platform team.\n'.repeat(98)}${deep}`;
}

/** B01's template: `{{#each @root.metadata}}` four deep. */
const B01 = `{{#each @root.metadata}}{{#each @root.metadata}}{{#each @root.metadata}}{{#each @root.metadata}}{{@key}}={{this}}
{{/each}}{{/each}}{{/each}}{{/each}}`;

function labels(n: number): Record<string, string> {
  return Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`team.example.com/l${String(i)}`, `v${String(i)}`]),
  );
}

describe('B02: source size and nesting, checked before parsing', () => {
  it('the 84 KB, 10,000-deep template is InvalidTemplate with a line', () => {
    const src = b02Template();
    expect(Buffer.byteLength(src)).toBeGreaterThanOrEqual(84_000);
    const r = compileTemplates({ message: src });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.template).toBe('message');
    expect(r.line).not.toBeNull();
    expect(r.message).toMatch(/over the limit of 32,768 bytes/);
  });

  it('nesting under the size limit is refused with line and column (2,000 subexpressions)', () => {
    const deep = `line one\n  {{${'lower ('.repeat(1_999)}lower message${')'.repeat(1_999)}}}`;
    const r = compileTemplates({ message: deep });
    expect(!r.ok && [r.line, r.message]).toEqual([
      2,
      expect.stringMatching(
        /nests blocks and subexpressions more than 24 deep: flatten it \(line 2, column \d+\)/,
      ),
    ]);
  });

  it.each([
    ['blocks', `${'{{#if message}}'.repeat(25)}x${'{{/if}}'.repeat(25)}`],
    ['chained else-if', `{{#if message}}${'{{else if summary}}x'.repeat(30)}{{/if}}`],
    ['raw blocks', `${'{{#if message}}{{{{raw}}}}{{{{/raw}}}}'.repeat(30)}${'{{/if}}'.repeat(30)}`],
    ['inverse blocks', `${'{{^if message}}'.repeat(25)}x${'{{/if}}'.repeat(25)}`],
  ])('%s nested past the limit are refused', (_what, src) => {
    expect(checkSource(src)?.message).toMatch(/more than 24 deep/);
  });

  it('what the lexer skips does not count: strings, [segments] and comments with parentheses', () => {
    expect(
      checkSource(
        `{{truncate "((((((((((((((((((((((((((" 3}}{{lookup metadata '((((((((((((((((((((((((('}}`,
      ),
    ).toBeNull();
    expect(checkSource(`{{!-- ${'('.repeat(100)} {{ --}}{{!${'('.repeat(100)}}}ok`)).toBeNull();
    expect(checkSource(`{{[${'('.repeat(50)}]}}`)).toBeNull();
    // A string whose every closing quote is escaped ends at one of them for the lexer (found by
    // fuzzing): it must not hide the blocks after it.
    expect(
      checkSource(`{{eq "a\\\\" 1}}${'{{#if message}}'.repeat(25)}x${'{{/if}}'.repeat(25)}`),
    ).not.toBeNull();
    // …and a quote inside a segment does not hide what follows.
    expect(
      checkSource(`{{[it's]}}${'{{#if message}}'.repeat(25)}${'{{/if}}'.repeat(25)}{{lookup metadata 'x'}}`),
    ).not.toBeNull();
  });

  it('the built-in templates are far inside the limits', () => {
    const r = compileTemplates();
    expect(r.ok).toBe(true);
  });
});

describe('B01: render budgets', () => {
  it('the four-deep #each over metadata is flagged at apply time, on the worst-case event', () => {
    const r = compileTemplates({ message: B01 });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.line).toBe(1);
    expect(r.message).toMatch(/on the largest event the API allows \(64 eventMetadata entries/);
    // Which budget runs out first depends on the machine's load.
    expect(r.message).toMatch(
      /produces more than 2,000,000 characters|more than 20,000 helper calls|longer than 250 ms/,
    );
  });

  it('a template that fits the worst case but not a real event fails the render with TemplateBudgetError', () => {
    const twoDeep = '{{#each labels}}{{#each @root.labels}}{{@key}}{{/each}}{{/each}}';
    const r = compileTemplates({ message: twoDeep });
    if (!r.ok) throw new Error(r.message);
    expect(() => renderNotification(r.set, stackEvent({ labels: labels(10) }), opts)).not.toThrow();
    let err: unknown;
    try {
      renderNotification(r.set, stackEvent({ labels: labels(300) }), opts);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TemplateBudgetError);
    // Steps run out first unless the machine is so loaded that 250 ms pass before 20,000 steps.
    expect(['steps', 'time']).toContain((err as TemplateBudgetError).kind);
    expect((err as TemplateBudgetError).message).toMatch(
      /^template 'message': template (needs more than 20,000 helper calls|render took longer than 250 ms)/,
    );
    expect((err as TemplateBudgetError).builtin).toBe(false);
  });

  it("a tenant template out of budget is named by its key; a built-in one as the controller's (compile)", () => {
    // A deadline already past: the first test render runs out of time, as on a CPU-starved controller.
    const past = { deadline: performance.now() - 1 };
    const tenant = compileTemplates({ message: '{{#if message}}{{message}}{{/if}}' }, {}, past);
    expect(tenant.ok).toBe(false);
    if (tenant.ok) return;
    expect(tenant.template).toBe('message');
    expect(tenant.builtin).toBeUndefined();
    expect(tenant.timedOut).toBe(true);
    expect(tenant.message).toMatch(
      /^on the largest event the API allows .*: template render took longer than 250 ms/,
    );

    const builtin = compileTemplates({}, {}, past);
    expect(builtin.ok).toBe(false);
    if (builtin.ok) return;
    expect(builtin.template).toBe('message');
    expect(builtin.builtin).toBe(true);
    expect(builtin.timedOut).toBe(true);
    expect(builtin.message).toMatch(
      /^the built-in template 'message' \(templates\/message\.hbs\) went over its render time budget \(250 ms\) on the largest event the API allows .*: the controller is short of CPU; nothing in the Alert's templates to change$/,
    );
    expect(builtin.message).not.toMatch(/ConfigMap|make it simpler/);

    // A ConfigMap that overrides another template: the built-in message is still the built-in.
    const other = compileTemplates({ commitStatusDescription: '{{reason}}' }, {}, past);
    expect(!other.ok && other.builtin).toBe(true);
  });

  it("a built-in template out of budget at delivery is named as the built-in, not as the tenant's", () => {
    // The built-in message replaced by a template that runs out on a large event: what a
    // built-in running out looks like (the real ones are checked on the largest event).
    const heavy = compileTemplates({
      message: '{{#each labels}}{{#each @root.labels}}{{@key}}{{/each}}{{/each}}',
    });
    const base = compileTemplates();
    if (!heavy.ok || !base.ok) throw new Error('templates do not compile');
    const set = {
      templates: { ...base.set.templates, message: heavy.set.templates.message },
      builtins: { ...base.set.builtins, message: heavy.set.templates.message },
      overridden: [],
    };
    let err: unknown;
    try {
      renderNotification(set, stackEvent({ labels: labels(300) }), opts);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TemplateBudgetError);
    const e = err as TemplateBudgetError;
    expect(e.builtin).toBe(true);
    // Steps run out first unless the machine is so loaded that 250 ms pass before 20,000 steps.
    expect(e.message).toMatch(
      /^the built-in template 'message' \(templates\/message\.hbs\) (ran out of its render budget \(steps\) \(line 1\): a controller bug, please report it|went over its render time budget \(250 ms\) \(line 1\): the controller is short of CPU); nothing in the Alert's templates to change$/,
    );

    // The same template as the tenant's: named by its key, with what to change.
    const own = { ...set, builtins: base.set.builtins, overridden: ['message' as const] };
    expect(() => renderNotification(own, stackEvent({ labels: labels(300) }), opts)).toThrow(
      /^template 'message': template (needs more than 20,000 helper calls|render took longer than 250 ms)/,
    );
  });

  it('output is bounded (2,000,000 characters, every level counted)', () => {
    const r = compileTemplates({
      message: '{{#each labels}}{{#each @root.labels}}{{@root.message}}{{/each}}{{/each}}',
    });
    expect(!r.ok && r.message).toMatch(/produces more than 2,000,000 characters|longer than 250 ms/);
  });

  it('time is bounded: a render past its deadline stops at the next step', () => {
    const r = compileTemplates({ message: '{{#each labels}}{{@key}}{{/each}}' });
    if (!r.ok) throw new Error(r.message);
    const set = r.set;
    const late = new RenderBudget({ deadline: performance.now() - 1 });
    expect(() => withBudget(late, () => set.templates.message(templateCtx(), plain))).toThrow(
      /took longer than 250 ms/,
    );
  });

  it('a template cannot run outside a budget', () => {
    const r = compileTemplates({ message: '{{#if message}}x{{/if}}' });
    if (!r.ok) throw new Error(r.message);
    const set = r.set;
    expect(() => set.templates.message(templateCtx(), plain)).toThrow(/outside a budget/);
  });

  it('limits are what the docs say', () => {
    expect(TEMPLATE_LIMITS).toMatchObject({
      maxSourceBytes: 32_768,
      maxDepth: 24,
      maxSteps: 20_000,
      maxOutputUnits: 2_000_000,
      maxRenderMs: 250,
    });
  });
});

function templateCtx() {
  return templateContext(stackEvent(), opts);
}

describe('the sandbox (worker threads)', () => {
  const sandbox = new TemplateSandbox();
  afterAll(() => sandbox.close());

  it('compiles and renders off the event loop; results are cached by content', async () => {
    const a = await sandbox.compile({ message: 'Stack {{stackName}}: {{reason}}' });
    if (!a.ok) throw new Error(a.message);
    expect(await sandbox.compile({ 'message.hbs': 'Stack {{stackName}}: {{reason}}' })).not.toBe(a); // other key, other source
    expect(await sandbox.compile({ message: 'Stack {{stackName}}: {{reason}}' })).toBe(a);
    const out = await a.templates.render(stackEvent(), opts);
    expect(out.message).toBe('Stack app: UpdateFailed');
  });

  it('B02 in the sandbox: InvalidTemplate with a line', async () => {
    const r = await sandbox.compile({ message: b02Template() });
    expect(!r.ok && r.line !== null).toBe(true);
    expect(!r.ok && r.retry).toBeUndefined(); // a size verdict stands
  });

  it('the event loop keeps turning while a large template compiles', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    // 30 KB (within the 32 KiB limit): hundreds of milliseconds of Handlebars work in the worker,
    // while the apply-time render stays cheap (every value is escaped for its target, so a
    // template of 2,900 worst-case 690-character summaries is over the render budget).
    const r = await sandbox.compile({ message: '{{clusterName}}'.repeat(2_000) });
    clearInterval(timer);
    expect(r.ok).toBe(true);
    expect(ticks).toBeGreaterThan(0);
  });

  it('a render over budget rejects with TemplateBudgetError; the worker lives on', async () => {
    const r = await sandbox.compile({
      message: '{{#each labels}}{{#each @root.labels}}{{@key}}{{/each}}{{/each}}',
    });
    if (!r.ok) throw new Error(r.message);
    const over: unknown = await r.templates
      .render(stackEvent({ labels: labels(300) }), opts)
      .catch((e: unknown) => e);
    expect(over).toBeInstanceOf(TemplateBudgetError);
    // The tenant's template, named by its key (the worker's answer keeps whose it is).
    expect((over as TemplateBudgetError).builtin).toBe(false);
    expect((over as TemplateBudgetError).message).toMatch(/^template 'message': /);
    expect((await r.templates.render(stackEvent({ labels: labels(3) }), opts)).message).toContain(
      'team.example.com/l2',
    );
    expect(sandbox.workersReplaced).toBe(0);
  });

  it('an idle worker is ended and started again on the next request', async () => {
    const idle = new TemplateSandbox({ idleMs: { compile: 50, render: 50 } });
    try {
      const r = await idle.compile({ message: 'one {{reason}}' });
      if (!r.ok) throw new Error(r.message);
      await r.templates.render(stackEvent(), opts);
      expect(idle.workersStarted).toBe(2);
      await new Promise((res) => setTimeout(res, 300));
      expect((await r.templates.render(stackEvent(), opts)).message).toBe('one UpdateFailed');
      expect(idle.workersStarted).toBe(3);
      expect(idle.workersReplaced).toBe(0);
    } finally {
      await idle.close();
    }
  });

  it('a compile that outlives its watchdog ends the worker; the next request gets a new one', async () => {
    const replaced: string[] = [];
    const slow = new TemplateSandbox({
      compileTimeoutMs: 20,
      onWorkerReplaced: (lane, why) => replaced.push(`${lane}: ${why}`),
    });
    try {
      // ~30 KB of mustaches: within the limits, far more than 20 ms to parse and check.
      const big = '{{clusterName}}'.repeat(2_000);
      const r = await slow.compile({ message: big });
      expect(!r.ok && r.message).toMatch(/compiling the templates took longer than 20 ms/);
      // Not a verdict on the template: the Alert reconciler checks it again instead of InvalidTemplate.
      expect(!r.ok && r.retry).toBe(true);
      expect(replaced).toEqual([expect.stringMatching(/^compile: compiling the templates took longer/)]);
      // Not a verdict cached forever on content that is fine: a sandbox with time compiles it.
      const again = await sandbox.compile({ message: big });
      expect(again.ok).toBe(true);
    } finally {
      await slow.close();
    }
  });
});
