/**
 * Rendering one delivery (`RenderedNotification`, ./rendered.ts) from an Alert's compiled
 * templates, fitting every field to the provider type's limits (docs/architecture.md, "Limits").
 *
 * Case ids (F13, F14) are described in docs/cases.md.
 */
import type { NotificationEvent } from '../api/event.ts';
import { isGitProviderType } from '../api/v1alpha1.ts';
import { boundText, headAndTail, measure, singleLine, tailTo, type FieldLimit } from '../text.ts';
import { buildContext, markerFor, stateOf, withValues, type TemplateContext } from './context.ts';
import { RenderBudget, TemplateBudgetError, withBudget } from './budget.ts';
import { cleanError, errorMessage } from './errors.ts';
import { fitContext } from './fit.ts';
import { TEMPLATE_LIMITS } from './limits.ts';
import type { RenderedNotification } from './rendered.ts';
import type { RenderOptions, TemplateName, TemplateSet } from './types.ts';

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

/** One notification's render: its options and the deadline shared by all its templates (performance.now() ms). */
interface Run {
  opts: RenderOptions;
  deadline: number;
}

/**
 * One template under a fresh budget (./budget.ts). A template that fails is replaced by the
 * built-in one (`onTemplateError`); one that runs out of budget is not — the whole render fails
 * with a `TemplateBudgetError` naming the template.
 */
function render(set: TemplateSet, name: TemplateName, ctx: TemplateContext, run: Run): string {
  const budget = (): RenderBudget =>
    new RenderBudget({ deadline: Math.min(performance.now() + TEMPLATE_LIMITS.maxRenderMs, run.deadline) });
  try {
    return withBudget(budget(), () => set.templates[name](ctx));
  } catch (err) {
    if (err instanceof TemplateBudgetError) {
      throw new TemplateBudgetError(err.kind, `template '${name}': ${err.message}`, err.line);
    }
    run.opts.onTemplateError?.(name, cleanError(errorMessage(err)));
    return withBudget(budget(), () => set.builtins[name](ctx));
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
  run: Run,
): string {
  const marker = markerFor(ctx.markerId);
  const first = finishComment(render(set, 'pullRequestComment', ctx, run), marker, null);
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
        run,
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
  run: Run,
): string {
  let text = singleLine(render(set, 'commitStatusDescription', ctx, run));
  if (text === '') text = ctx.title;
  return limit === undefined ? text : boundText(text, limit.max, limit.unit);
}

function statusContext(set: TemplateSet, ctx: TemplateContext, run: Run): string {
  let text = singleLine(render(set, 'commitStatusContext', ctx, run));
  if (text === '') {
    text = singleLine(withBudget(new RenderBudget(), () => set.builtins.commitStatusContext(ctx)));
  }
  if (text === '') text = `pko/${ctx.clusterName}/${ctx.namespace}/${ctx.stackName}`;
  return fitContext(text, run.opts.limits.statusContext);
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
 * Every template runs under the render budget (./limits.ts: steps, output, time per template and
 * per notification).
 * @throws TemplateBudgetError when a template runs out of budget (never replaced by a built-in:
 *   the delivery fails with that reason).
 */
export function renderNotification(
  set: TemplateSet,
  ev: NotificationEvent,
  opts: RenderOptions,
): RenderedNotification {
  const run: Run = { opts, deadline: performance.now() + TEMPLATE_LIMITS.maxNotificationMs };
  const ctx = templateContext(ev, opts);
  const { limits } = opts;
  const message = headAndTail(render(set, 'message', ctx, run).trim(), limits.message);
  const out: RenderedNotification = { message };
  if (!isGitProviderType(opts.providerType)) return out;
  out.commitStatus = {
    state: stateOf(ev.reason),
    context: statusContext(set, ctx, run),
    description: statusDescription(set, ctx, limits.statusDescription, run),
    targetURL: targetURL(ctx, limits.statusTargetURL),
  };
  if (opts.commentsEnabled) {
    out.comment = { marker: markerFor(ctx.markerId), body: renderComment(set, ctx, limits.comment, run) };
  }
  return out;
}
