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
 * Every template is checked when compiled — statically (unknown keys and helpers, with line and
 * column) and by test-rendering against a full sample context and one where every optional key
 * is null — so the Alert reconciler can report `InvalidTemplate` before any event arrives.
 *
 */
import { readFileSync } from 'node:fs';
import Handlebars from 'handlebars';
import { eventId, type EventIdentity, type NotificationEvent } from '../api/event.ts';
import type { ProviderType } from '../api/v1alpha1.ts';
import { singleLine } from '../text.ts';
import { buildContext, withValues, type TemplateContext } from './context.ts';
import { cleanError, errorLine, errorMessage } from './errors.ts';
import { ESCAPE_HELPER, escapeHelper, escapeMustaches, MARKUP_DATA_KEY } from './escape.ts';
import { HELPER_NAMES, vettedHelpers } from './helpers.ts';
import { markupForTemplate, truncationNote } from './render.ts';
import { TEMPLATE_NAMES, type CompileResult, type Compiled, type TemplateName } from './types.ts';
import { validateTemplateAst } from './validate.ts';

export { CONTEXT_KEYS, type TemplateContext } from './context.ts';
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
for (const [name, fn] of Object.entries(vettedHelpers())) hb.registerHelper(name, fn);
hb.registerHelper(ESCAPE_HELPER, escapeHelper);

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

// ---------------------------------------------------------------------------------------------
// Sample contexts for test-rendering

const SAMPLE_COMMIT = '0123456789abcdef0123456789abcdef01234567';

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
  return [base, { ...base, reason: 'PreviewSucceeded', severity: 'info' }, bare];
}

function sampleContexts(providerType: ProviderType): TemplateContext[] {
  const out: TemplateContext[] = [];
  for (const ev of sampleEvents()) {
    const ctx = buildContext(ev, { clusterName: 'sample-cluster', providerType });
    out.push(ctx, withValues(ctx, { truncated: true, truncationNote: truncationNote(10, 100) }));
  }
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
 * Errors (never thrown): an unknown or duplicate key, an empty template, a syntax error, an
 * unknown key or helper (strict mode), a partial, a render failure, or a context template that
 * renders empty. `template` names the template (or ConfigMap key), `line` is 1-based when known.
 */
export function compileTemplates(
  overrides: Record<string, string> = {},
  opts: { commitStatusContext?: string } = {},
): CompileResult {
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

  // Test-render every template (built-ins too: they must keep working with the custom ones).
  for (const providerType of ['github', 'slack'] as const) {
    for (const ctx of sampleContexts(providerType)) {
      for (const name of TEMPLATE_NAMES) {
        let out: string;
        try {
          out = templates[name](ctx, markupForTemplate(name, providerType));
        } catch (err) {
          const label = sources.get(name)?.label ?? '';
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
  return { ok: true, set: { templates, builtins: base, overridden } };
}
