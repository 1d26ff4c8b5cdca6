/**
 * Templates (templates/README.md): Handlebars in ONE isolated instance (`Handlebars.create()`), compiled
 * with `strict` and `knownHelpersOnly`, run without prototype access, with only the vetted
 * helpers of ./helpers.ts (Handlebars' `log` is removed: it writes to the console). No partials,
 * no decorators, no environment, no files beyond the built-in templates. Output is not
 * HTML-escaped (`noEscape`): templates produce Markdown and plain text; JSON payloads are built in
 * code by each notifier.
 *
 * Built-in defaults live in `templates/` at the repository root (`templates/README.md` documents
 * the context keys; `src/template/` and `dist/template/` both sit two levels below it). An Alert's
 * `templateRef` ConfigMap overrides them by key (`message`, `commitStatusDescription`,
 * `commitStatusContext`, `pullRequestComment`, `.hbs` suffix optional); a Provider's
 * `spec.commitStatus.context` overrides `commitStatusContext` over both.
 *
 * Every template is checked when compiled — on its source (size and nesting: ./limits.ts, before
 * Handlebars parses it), statically (unknown keys and helpers, with line and column) and by
 * test-rendering against a full sample context, one where every optional key is null, and the
 * worst case the API allows (64 `eventMetadata` entries of 1,024 characters, 64 labels, an
 * 8,192-character message) under the render budget (./budget.ts) — so the Alert reconciler can
 * report `InvalidTemplate` before any event arrives.
 *
 * These functions run a template in the calling thread. The controller runs a tenant's templates
 * only inside the template sandbox (./sandbox.ts, a worker thread), never on its event loop; the
 * built-in ones alone it runs on its own thread (`builtinsInline`).
 */
import { readFileSync } from 'node:fs';
import Handlebars from 'handlebars';
import { eventId, type EventIdentity, type NotificationEvent } from '../api/event.ts';
import type { ProviderType } from '../api/v1alpha1.ts';
import type { ChangeSet, ResourceChange, StepOp } from '../changes/types.ts';
import { singleLine } from '../text.ts';
import { budgeted, builtinBudgetMessage, RenderBudget, TemplateBudgetError, withBudget } from './budget.ts';
import { buildContext, withValues, type TemplateContext } from './context.ts';
import { cleanError, errorLine, errorMessage } from './errors.ts';
import { ESCAPE_HELPER, escapeHelper, escapeMustaches, MARKUP_DATA_KEY } from './escape.ts';
import { BUILTIN_HELPERS, HELPER_NAMES, vettedHelpers } from './helpers.ts';
import { checkSource, TEMPLATE_LIMITS } from './limits.ts';
import { markupForTemplate, truncationNote } from './render.ts';
import { TEMPLATE_NAMES, type CompileResult, type Compiled, type TemplateName } from './types.ts';
import { validateTemplateAst } from './validate.ts';
import { inlineTemplates, sourceKey, type SandboxCompileResult, type TemplateCompiler } from './sandbox.ts';

export { CONTEXT_KEYS, type TemplateContext } from './context.ts';
export { CHANGES_KEYS, CHANGES_CONTEXT_LIMITS, changeSummary, type ChangesContext } from './changes.ts';
export { TemplateBudgetError } from './budget.ts';
export { TEMPLATE_LIMITS } from './limits.ts';
export { renderNotification, templateContext, truncationNote } from './render.ts';
export {
  TEMPLATE_NAMES,
  type CompileResult,
  type RenderOptions,
  type TemplateName,
  type TemplateSet,
} from './types.ts';
export type { CommitState, ContextLimit, ProviderLimits, RenderedNotification } from './rendered.ts';

// ---------------------------------------------------------------------------------------------
// The isolated instance

const hb = Handlebars.create();
hb.unregisterHelper('log');
for (const [name, fn] of Object.entries(vettedHelpers())) hb.registerHelper(name, budgeted(fn));
// The escaping helper every `{{value}}` is compiled into (./escape.ts), charged like the others.
hb.registerHelper(ESCAPE_HELPER, budgeted(escapeHelper));
// Handlebars' own helpers, and the hooks it calls for `{{#value}}` blocks, charged to the budget too.
for (const name of [...BUILTIN_HELPERS, 'blockHelperMissing', 'helperMissing']) {
  const own = hb.helpers[name];
  if (own !== undefined) hb.registerHelper(name, budgeted(own));
}

const COMPILE_OPTIONS: NonNullable<Parameters<typeof hb.compile>[1]> = {
  strict: true,
  knownHelpersOnly: true,
  knownHelpers: {
    ...Object.fromEntries(HELPER_NAMES.map((n) => [n, true])),
    [ESCAPE_HELPER]: true,
    log: false,
  },
  noEscape: true,
  data: true,
};

const RUNTIME_OPTIONS: Handlebars.RuntimeOptions = {
  allowProtoPropertiesByDefault: false,
  allowProtoMethodsByDefault: false,
  allowCallsToHelperMissing: false,
};

type CompileOne = { ok: true; fn: Compiled } | { ok: false; line: number | null; message: string };

function compileOne(source: string): CompileOne {
  const tooBig = checkSource(source);
  if (tooBig) {
    return {
      ok: false,
      line: tooBig.line,
      message: `${tooBig.message} (line ${String(tooBig.line)}, column ${String(tooBig.column)})`,
    };
  }
  let ast: unknown;
  try {
    ast = hb.parse(source);
  } catch (err) {
    return { ok: false, line: errorLine(err), message: cleanError(errorMessage(err)) };
  }
  const problem = validateTemplateAst(ast);
  if (problem) {
    const where =
      problem.line === null ? '' : ` (line ${String(problem.line)}, column ${String(problem.column ?? 0)})`;
    return { ok: false, line: problem.line, message: `${problem.message}${where}` };
  }
  try {
    const tpl = hb.compile<TemplateContext>(escapeMustaches(ast), COMPILE_OPTIONS);
    // Handlebars compiles on first use; compile now, so the work is charged to compiling (and its
    // watchdog), not to the first render's time budget (a 30 KB template takes ~200 ms to
    // generate). `_setup` (handlebars/compiler/compiler.js, 4.7) compiles and then only does what
    // every call does first (runtime.js `ret` → `_setup`); not in the type definitions.
    (tpl as unknown as { _setup: (o: object) => void })._setup({});
    return {
      ok: true,
      fn: (ctx, markup) => tpl(ctx, { ...RUNTIME_OPTIONS, data: { [MARKUP_DATA_KEY]: markup } }),
    };
  } catch (err) {
    return { ok: false, line: errorLine(err), message: cleanError(errorMessage(err)) };
  }
}

// ---------------------------------------------------------------------------------------------
// Built-ins

let builtinSources: Record<TemplateName, string> | undefined;
let builtinCompiled: Record<TemplateName, Compiled> | undefined;

/** Sources of the built-in templates (`templates/<name>.hbs`), read once. */
export function builtinTemplateSources(): Readonly<Record<TemplateName, string>> {
  if (builtinSources === undefined) {
    const out = {} as Record<TemplateName, string>;
    for (const name of TEMPLATE_NAMES) {
      out[name] = readFileSync(new URL(`../../templates/${name}.hbs`, import.meta.url), 'utf8');
    }
    builtinSources = out;
  }
  return builtinSources;
}

function builtins(): Record<TemplateName, Compiled> {
  if (builtinCompiled === undefined) {
    const out = {} as Record<TemplateName, Compiled>;
    for (const [name, source] of Object.entries(builtinTemplateSources()) as [TemplateName, string][]) {
      const c = compileOne(source);
      if (!c.ok) throw new Error(`built-in template ${name} is invalid: ${c.message}`);
      out[name] = c.fn;
    }
    builtinCompiled = out;
  }
  return builtinCompiled;
}

/**
 * Provider types with a built-in `message` template of their own (`templates/message.<type>.hbs`,
 * written in the type's markup); the others use `templates/message.hbs`. An Alert's `message`
 * override replaces both.
 */
export const TYPED_MESSAGE_TYPES = [
  'msteams',
  'discord',
  'googlechat',
] as const satisfies readonly ProviderType[];

let typedMessages: Partial<Record<ProviderType, Compiled>> | undefined;

/** Source of `type`'s own built-in message template, or undefined (it uses `message.hbs`). */
export function builtinMessageSource(type: ProviderType): string | undefined {
  if (!(TYPED_MESSAGE_TYPES as readonly string[]).includes(type)) return undefined;
  return readFileSync(new URL(`../../templates/message.${type}.hbs`, import.meta.url), 'utf8');
}

/** `type`'s own built-in message template, compiled once, or undefined. */
export function builtinMessageFor(type: ProviderType): Compiled | undefined {
  if (typedMessages === undefined) {
    const out: Partial<Record<ProviderType, Compiled>> = {};
    for (const t of TYPED_MESSAGE_TYPES) {
      const c = compileOne(builtinMessageSource(t) ?? '');
      if (!c.ok) throw new Error(`built-in template message.${t} is invalid: ${c.message}`);
      out[t] = c.fn;
    }
    typedMessages = out;
  }
  return typedMessages[type];
}

// ---------------------------------------------------------------------------------------------
// Sample contexts for test-rendering

const SAMPLE_COMMIT = '0123456789abcdef0123456789abcdef01234567';

/**
 * A change set for test renders: `resources` resources cycling through create, update, replace
 * and delete, each with `lines` property lines of `lineChars` characters (the parser's caps are
 * 1,000 resources, 200 lines per resource, 5,000 lines, 500 characters: src/changes/types.ts).
 */
export function sampleChangeSet(resources = 4, lines = 2, lineChars = 40): ChangeSet {
  const ops = ['create', 'update', 'replace', 'delete'] as const;
  const counts: Partial<Record<StepOp, number>> = {};
  const list: ResourceChange[] = [];
  for (let i = 0; i < resources; i++) {
    const op = ops[i % ops.length] ?? 'create';
    counts[op] = (counts[op] ?? 0) + 1;
    const name = `res-${String(i)}`;
    list.push({
      op,
      type: 'aws:s3/bucket:Bucket',
      name,
      urn: `urn:pulumi:dev::app::aws:s3/bucket:Bucket::${name}`,
      retain: false,
      diff: Array.from(
        { length: lines },
        (_, j) => `~ tag${String(j)}: "${'a'.repeat(Math.max(0, lineChars - 12))}" => "b"`,
      ),
      diffOmitted: 0,
    });
  }
  return {
    source: 'workspace-log',
    complete: true,
    incomplete: [],
    run: { kind: 'update', dryRun: true, stack: 'dev', startedAt: '2026-01-01T00:00:00Z' },
    failed: false,
    counts,
    countsFrom: 'summary',
    resources: list,
    errors: [],
    omitted: { resources: 0, diffLines: 0, longLines: 0, errors: 0 },
  };
}

function sampleEvents(): NotificationEvent[] {
  const identity: EventIdentity = {
    stack: 'sample-uid',
    run: { kind: 'update', name: 'update-sample' },
    phase: { kind: 'failed' },
  };
  const base: NotificationEvent = {
    identity,
    id: eventId(identity),
    involvedObject: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      namespace: 'sample-ns',
      name: 'sample-stack',
      uid: 'sample-uid',
    },
    labels: { app: 'sample' },
    severity: 'error',
    reason: 'UpdateFailed',
    message: 'Update of stack acme/app/dev failed:\nerror: resource `x` failed\n```\nexit status 1',
    timestamp: '2026-01-01T00:00:00Z',
    metadata: {
      revision: `main@sha1:${SAMPLE_COMMIT}`,
      commit: SAMPLE_COMMIT,
      repository: 'https://github.com/acme/app',
      branch: 'main',
      stack: 'acme/app/dev',
      updateName: 'update-sample',
      updateType: 'up',
      permalink: 'https://app.pulumi.com/acme/app/dev/updates/1',
      failures: '1',
      pullRequest: '42',
    },
    reportingController: 'pko-notification-controller',
  };
  const bare: NotificationEvent = {
    ...base,
    involvedObject: { ...base.involvedObject, kind: 'Update' },
    labels: {},
    severity: 'info',
    reason: 'StackStalled',
    message: 'Stack sample-ns/sample-stack stalled',
    metadata: {},
  };
  return [
    base,
    { ...base, reason: 'PreviewSucceeded', severity: 'info', changes: { set: sampleChangeSet() } },
    { ...base, changes: { unavailable: 'no change details: the sample has none' } },
    bare,
  ];
}

/** What the API lets one event carry at most (docs/threat-model.md, "Templates"). */
export const WORST_CASE = {
  /** Alert `spec.eventMetadata`: `maxProperties` and value `maxLength` in crds/. */
  eventMetadataEntries: 64,
  eventMetadataValueLength: 1024,
  /** Labels of a Stack (no API bound on the count; Kubernetes bounds their total size). */
  labels: 64,
  /** Event messages are cut to 8,192 code points where they are made (src/source). */
  messageCodePoints: 8192,
} as const;

/**
 * The largest event the test render uses: the sample failure with every `eventMetadata` entry the
 * Alert API allows at full length, 64 labels at the label length limits, and a message of 8,192
 * code points (an emoji at the end of each line, so it is also long in UTF-16 units).
 */
export function worstCaseEvent(): NotificationEvent {
  const [base] = sampleEvents();
  if (base === undefined) throw new Error('no sample event');
  const metadata: Record<string, string | undefined> = { ...base.metadata };
  for (let i = 0; i < WORST_CASE.eventMetadataEntries; i++) {
    metadata[`meta-${String(i).padStart(2, '0')}-${'k'.repeat(56)}`] = 'v'.repeat(
      WORST_CASE.eventMetadataValueLength,
    );
  }
  const labels: Record<string, string> = {};
  for (let i = 0; i < WORST_CASE.labels; i++) {
    labels[`label-${String(i).padStart(2, '0')}.${'l'.repeat(54)}`] = 'v'.repeat(63);
  }
  const line = `${'x'.repeat(126)}😀`;
  const head = 'Update of stack acme/app/dev failed:\n';
  let message = head;
  let codePoints = [...head].length;
  while (codePoints + 128 <= WORST_CASE.messageCodePoints) {
    message += `${line}\n`;
    codePoints += 128;
  }
  // The largest change set the parser keeps: 1,000 resources, 5,000 property lines of 500 characters.
  return { ...base, metadata, labels, message, changes: { set: sampleChangeSet(1000, 5, 500) } };
}

function sampleContexts(providerType: ProviderType): TemplateContext[] {
  const out: TemplateContext[] = [];
  for (const ev of sampleEvents()) {
    const ctx = buildContext(ev, { clusterName: 'sample-cluster', providerType });
    out.push(ctx, withValues(ctx, { truncated: true, truncationNote: truncationNote(10, 100) }));
  }
  out.push(buildContext(worstCaseEvent(), { clusterName: 'sample-cluster', providerType }));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Compile

function normalizeKey(key: string): string {
  return key.endsWith('.hbs') ? key.slice(0, -'.hbs'.length) : key;
}

function isTemplateName(s: string): s is TemplateName {
  return (TEMPLATE_NAMES as readonly string[]).includes(s);
}

/**
 * Compiles the built-in templates with `overrides` (ConfigMap data: keys named like
 * {@link TEMPLATE_NAMES}, optional `.hbs` suffix) and `opts.commitStatusContext` (the Provider's
 * `spec.commitStatus.context`, which wins over both) applied, and test-renders each against
 * sample contexts (all keys set; optional keys null; truncated comment).
 *
 * Errors (never thrown): an unknown or duplicate key, an empty template, a source over the size or
 * nesting limit (./limits.ts), a syntax error, an unknown key or helper (strict mode), a partial,
 * a render failure, a render over budget on the worst-case event, or a context template that
 * renders empty. `template` names the template (or ConfigMap key), `line` is 1-based when known.
 * `check.verify: false` skips the test renders (for sources that passed them before);
 * `check.deadline` (`performance.now()` ms) is when they must be done by, default
 * {@link TEMPLATE_LIMITS}`.maxCompileMs` after the call.
 */
export function compileTemplates(
  overrides: Readonly<Record<string, string>> = {},
  opts: { commitStatusContext?: string } = {},
  check: { verify?: boolean; deadline?: number } = {},
): CompileResult {
  const started = performance.now();
  let base: Record<TemplateName, Compiled>;
  try {
    base = builtins();
  } catch (err) {
    return { ok: false, template: 'built-in', line: null, message: errorMessage(err) };
  }
  const sources = new Map<TemplateName, { source: string; label: string }>();
  for (const [key, source] of Object.entries(overrides)) {
    const name = normalizeKey(key);
    if (!isTemplateName(name)) {
      return {
        ok: false,
        template: key,
        line: null,
        message: `unknown template key '${key}' (expected one of ${TEMPLATE_NAMES.join(', ')}, optionally with .hbs)`,
      };
    }
    if (sources.has(name)) {
      return {
        ok: false,
        template: key,
        line: null,
        message: `template '${name}' is given twice (with and without .hbs)`,
      };
    }
    sources.set(name, { source, label: '' });
  }
  if (opts.commitStatusContext !== undefined) {
    sources.set('commitStatusContext', {
      source: opts.commitStatusContext,
      label: 'Provider spec.commitStatus.context: ',
    });
  }

  const templates: Record<TemplateName, Compiled> = { ...base };
  const overridden: TemplateName[] = [];
  for (const [name, { source, label }] of sources) {
    const fail = (line: number | null, message: string): CompileResult => ({
      ok: false,
      template: name,
      line,
      message: `${label}${message}`,
    });
    if (source.trim() === '') return fail(null, 'template is empty');
    const c = compileOne(source);
    if (!c.ok) return fail(c.line, c.message);
    templates[name] = c.fn;
    overridden.push(name);
  }

  let typedMessages: Partial<Record<ProviderType, Compiled>>;
  try {
    typedMessages = Object.fromEntries(TYPED_MESSAGE_TYPES.map((t) => [t, builtinMessageFor(t)]));
  } catch (err) {
    return { ok: false, template: 'built-in', line: null, message: errorMessage(err) };
  }
  if (check.verify === false)
    return { ok: true, set: { templates, builtins: base, overridden, typedMessages } };
  // Test-render every template (built-ins too: they must keep working with the custom ones),
  // under the render budget, within the compile deadline.
  const deadline = check.deadline ?? started + TEMPLATE_LIMITS.maxCompileMs;
  for (const providerType of ['github', 'slack'] as const) {
    for (const ctx of sampleContexts(providerType)) {
      for (const name of TEMPLATE_NAMES) {
        let out: string;
        try {
          const budget = new RenderBudget({
            deadline: Math.min(performance.now() + TEMPLATE_LIMITS.maxRenderMs, deadline),
          });
          const fn = templates[name];
          out = withBudget(budget, () => fn(ctx, markupForTemplate(name, providerType)));
        } catch (err) {
          const source = sources.get(name);
          const label = source?.label ?? '';
          if (err instanceof TemplateBudgetError) {
            const largest =
              'on the largest event the API allows (64 eventMetadata entries of 1,024 characters, 64 labels, an 8,192-character message)';
            return {
              ok: false,
              template: name,
              line: err.line,
              ...(err.kind === 'time' ? { timedOut: true } : {}),
              ...(source === undefined
                ? {
                    builtin: true,
                    message: builtinBudgetMessage(name, `templates/${name}.hbs`, err, ` ${largest}`),
                  }
                : { message: `${label}${largest}: ${err.message}` }),
            };
          }
          return {
            ok: false,
            template: name,
            line: errorLine(err),
            message: `${label}${cleanError(errorMessage(err))}`,
          };
        }
        if (
          name === 'commitStatusContext' &&
          !ctx.truncated &&
          ctx.commit !== null &&
          singleLine(out) === ''
        ) {
          const label = sources.get(name)?.label ?? '';
          return {
            ok: false,
            template: name,
            line: null,
            message: `${label}renders an empty commit status context`,
          };
        }
      }
    }
  }
  return { ok: true, set: { templates, builtins: base, overridden, typedMessages } };
}

/**
 * The controller's template compiler: an Alert that brings no template of a tenant's — no
 * `templateRef` ConfigMap data and no Provider `spec.commitStatus.context` — gets the built-in
 * templates, compiled and test-rendered once per process (~85 ms; the test renders also run V8's
 * first-call compilation of each template, which would otherwise fall on the first deliveries and
 * could exceed their render time budget) and rendered on the calling thread, which spares a worker round
 * trip per event (issue 21). Anything a tenant wrote is compiled and rendered by `sandbox`, within
 * its time and memory bounds. The content key is the sandbox's for the same (empty) source.
 * `compile` never rejects; a built-in set that does not compile (a bug) is answered as invalid,
 * one whose test renders ran out of time as not checked (`retry`); neither answer is kept.
 */
export function builtinsInline(sandbox: TemplateCompiler): TemplateCompiler {
  let builtin: SandboxCompileResult | undefined;
  return {
    compile(overrides, opts = {}) {
      if (Object.keys(overrides).length > 0 || opts.commitStatusContext !== undefined)
        return sandbox.compile(overrides, opts);
      if (builtin === undefined) {
        const r = compileTemplates();
        // A failure is not kept: out of time (a loaded machine) is asked again (`retry`).
        if (!r.ok)
          return Promise.resolve({
            ok: false,
            template: r.template,
            line: r.line,
            message: r.message,
            ...(r.builtin === true ? { builtin: true as const } : {}),
            ...(r.timedOut === true ? { retry: true as const } : {}),
          });
        builtin = { ok: true, templates: inlineTemplates(r.set, sourceKey({})) };
      }
      return Promise.resolve(builtin);
    },
  };
}

export {
  inlineTemplates,
  sourceKey,
  TemplateSandbox,
  type AlertTemplates,
  type SandboxCompileResult,
  type SandboxOptions,
  type TemplateCompiler,
} from './sandbox.ts';
