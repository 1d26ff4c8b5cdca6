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
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { readFileSync } from 'node:fs';
import Handlebars from 'handlebars';
import { eventId, type EventIdentity, type NotificationEvent } from '../api/event.ts';
import { isGitProviderType, type ProviderType } from '../api/v1alpha1.ts';
import type { ProviderLimits, RenderedNotification } from './rendered.ts';
import { buildContext, markerFor, withValues, stateOf, type TemplateContext } from './context.ts';
import { fitContext } from './fit.ts';
import { HELPER_NAMES, vettedHelpers } from './helpers.ts';
import { validateTemplateAst } from './validate.ts';
import { boundText, headAndTail, measure, singleLine, tailTo, type FieldLimit } from '../text.ts';

export { CONTEXT_KEYS, type TemplateContext } from './context.ts';
export type { CommitState, ContextLimit, ProviderLimits, RenderedNotification } from './rendered.ts';

export const TEMPLATE_NAMES = [
  'message',
  'commitStatusDescription',
  'commitStatusContext',
  'pullRequestComment',
] as const;
export type TemplateName = (typeof TEMPLATE_NAMES)[number];

type Compiled = (ctx: TemplateContext) => string;

/** Compiled templates of one Alert (and Provider context override), ready for rendering. */
export interface TemplateSet {
  readonly templates: Readonly<Record<TemplateName, Compiled>>;
  /** The built-in templates, used when a custom one fails at render time. */
  readonly builtins: Readonly<Record<TemplateName, Compiled>>;
  /** Which templates are not the built-in ones. */
  readonly overridden: readonly TemplateName[];
}

export type CompileResult =
  { ok: true; set: TemplateSet } | { ok: false; template: string; line: number | null; message: string };

export interface RenderOptions {
  /** The controller's cluster name (`--cluster-name`), part of the default commit status context. */
  clusterName: string;
  providerType: ProviderType;
  /** Git forges: also render the sticky pull-request comment (Provider `pullRequestComment.enabled`). */
  commentsEnabled: boolean;
  /** The provider type's field limits: every rendered field is fitted to them. */
  limits: ProviderLimits;
  /** Called when a custom template fails at render time; the built-in one is used instead. */
  onTemplateError?: (template: TemplateName, message: string) => void;
}

// ---------------------------------------------------------------------------------------------
// The isolated instance

const hb = Handlebars.create();
hb.unregisterHelper('log');
for (const [name, fn] of Object.entries(vettedHelpers())) hb.registerHelper(name, fn);

const COMPILE_OPTIONS: NonNullable<Parameters<typeof hb.compile>[1]> = {
  strict: true,
  knownHelpersOnly: true,
  knownHelpers: {
    ...Object.fromEntries(HELPER_NAMES.map((n) => [n, true])),
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

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Line number of a Handlebars error: `lineNumber` (compile/strict errors) or "on line N" (parse errors). */
function errorLine(err: unknown): number | null {
  if (typeof err === 'object' && err !== null && 'lineNumber' in err && typeof err.lineNumber === 'number') {
    return err.lineNumber;
  }
  const m = /line (\d+)/.exec(errorMessage(err));
  return m?.[1] === undefined ? null : Number(m[1]);
}

/**
 * Single-line, bounded form of a Handlebars error message. Parse errors span several lines
 * (message, source excerpt, caret, "Expecting …"): the first and the "Expecting" line are kept.
 */
function cleanError(message: string): string {
  const [first = '', ...rest] = message.split('\n');
  const expecting = rest.find((l) => l.startsWith('Expecting'));
  const text = expecting === undefined ? first : `${first} ${expecting}`;
  return boundText(text.replace(/\s+/g, ' ').trim(), 400, 'codePoints');
}

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
    const tpl = hb.compile<TemplateContext>(source, COMPILE_OPTIONS);
    return { ok: true, fn: (ctx) => tpl(ctx, RUNTIME_OPTIONS) };
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
          out = templates[name](ctx);
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

// ---------------------------------------------------------------------------------------------
// Render

/**
 * The template context of `ev` (see templates/README.md): every documented key present, `null`
 * when unknown.
 */
export function templateContext(
  ev: NotificationEvent,
  opts: Pick<RenderOptions, 'clusterName' | 'providerType'>,
): TemplateContext {
  return buildContext(ev, { clusterName: opts.clusterName, providerType: opts.providerType });
}

function render(set: TemplateSet, name: TemplateName, ctx: TemplateContext, opts: RenderOptions): string {
  try {
    return set.templates[name](ctx);
  } catch (err) {
    opts.onTemplateError?.(name, cleanError(errorMessage(err)));
    return set.builtins[name](ctx);
  }
}

/** `_Output truncated: showing the last N of M characters._` (code points). */
export function truncationNote(kept: number, total: number): string {
  return `_Output truncated: showing the last ${kept.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} characters._`;
}

function finishComment(body: string, marker: string, note: string | null): string {
  let out = body.trim();
  if (!out.includes(marker)) out = `${marker}\n${out}`;
  if (note !== null && !out.includes(note)) out = `${out}\n\n${note}`;
  return `${out}\n`;
}

/**
 * The sticky comment body within `limit`: rendered once; when too long, `message` and `output`
 * are cut from the front (CLI errors come last) until the whole body fits, with `truncated` and
 * `truncationNote` set (the note is appended if the template does not show it). The header, result,
 * commit and link of the template are never cut. Code fences stay balanced: `codeBlock` picks
 * its fence from the content actually shown. Last resort (a template whose fixed text alone is too
 * long): the marker, the title and the note.
 */
function renderComment(
  set: TemplateSet,
  ctx: TemplateContext,
  limit: FieldLimit | undefined,
  opts: RenderOptions,
): string {
  const marker = markerFor(ctx.markerId);
  const first = finishComment(render(set, 'pullRequestComment', ctx, opts), marker, null);
  if (limit === undefined || measure(first, limit.unit) <= limit.max) return first;
  const { max, unit } = limit;
  const total = measure(ctx.message, 'codePoints');
  const sampleNote = truncationNote(total, total);
  let budget = measure(ctx.message, unit) - (measure(first, unit) - max) - measure(sampleNote, unit) - 64;
  for (let i = 0; i < 12; i++) {
    const b = Math.max(0, budget);
    const message = tailTo(ctx.message, b, unit);
    const output = ctx.output === null ? null : tailTo(ctx.output, b, unit);
    const note = truncationNote(measure(message, 'codePoints'), total);
    const body = finishComment(
      render(
        set,
        'pullRequestComment',
        withValues(ctx, { message, output, truncated: true, truncationNote: note }),
        opts,
      ),
      marker,
      note,
    );
    const over = measure(body, unit) - max;
    if (over <= 0) return body;
    if (b === 0) break;
    budget = b - over - 16 * (i + 1);
  }
  const note = truncationNote(0, total);
  return boundText(`${marker}\n### ${ctx.emoji} ${ctx.title}\n\n${note}\n`, max, unit);
}

function statusDescription(
  set: TemplateSet,
  ctx: TemplateContext,
  limit: FieldLimit | undefined,
  opts: RenderOptions,
): string {
  let text = singleLine(render(set, 'commitStatusDescription', ctx, opts));
  if (text === '') text = ctx.title;
  return limit === undefined ? text : boundText(text, limit.max, limit.unit);
}

function statusContext(set: TemplateSet, ctx: TemplateContext, opts: RenderOptions): string {
  let text = singleLine(render(set, 'commitStatusContext', ctx, opts));
  if (text === '') text = singleLine(set.builtins.commitStatusContext(ctx));
  if (text === '') text = `pko/${ctx.clusterName}/${ctx.namespace}/${ctx.stackName}`;
  return fitContext(text, opts.limits.statusContext);
}

function targetURL(ctx: TemplateContext, limit: FieldLimit | undefined): string | undefined {
  const url = ctx.permalink;
  if (url === null || !/^https?:\/\//i.test(url)) return undefined;
  return limit === undefined || measure(url, limit.unit) <= limit.max ? url : undefined;
}

/**
 * Renders everything one delivery needs (./rendered.ts `RenderedNotification`), fitted to
 * `opts.limits`:
 * - `message` (always): the `message` template, trimmed and fitted to the chat limit of
 *   `providerType` (first line kept, then the end of the output).
 * - git provider types: `commitStatus` — `state` from the reason (*Started → pending, *Succeeded →
 *   success, *Failed/StackStalled → failure); `context` rendered, single-line, and fitted to the
 *   forge's limit by prefix + hash (Bitbucket keys ≤ 40); `description` rendered, escape-free,
 *   single-line, bounded in the forge's unit with a trailing `…` (GitHub ≤ 140 code points, F13);
 *   `targetURL` the permalink when it is http(s) and within the forge's URL limit.
 * - git provider types with `commentsEnabled`: `comment` {marker, body} — see the comment limits
 *   (F14: GitHub ≤ 65,536, GitLab ≤ 1,000,000).
 * A custom template that fails at render time is replaced by the built-in one (`onTemplateError`).
 */
export function renderNotification(
  set: TemplateSet,
  ev: NotificationEvent,
  opts: RenderOptions,
): RenderedNotification {
  const ctx = templateContext(ev, opts);
  const { limits } = opts;
  const message = headAndTail(render(set, 'message', ctx, opts).trim(), limits.message);
  const out: RenderedNotification = { message };
  if (!isGitProviderType(opts.providerType)) return out;
  out.commitStatus = {
    state: stateOf(ev.reason),
    context: statusContext(set, ctx, opts),
    description: statusDescription(set, ctx, limits.statusDescription, opts),
    targetURL: targetURL(ctx, limits.statusTargetURL),
  };
  if (opts.commentsEnabled) {
    out.comment = { marker: markerFor(ctx.markerId), body: renderComment(set, ctx, limits.comment, opts) };
  }
  return out;
}
