/**
 * Rendering one delivery (`RenderedNotification`, ./rendered.ts) from an Alert's compiled
 * templates: every `{{value}}` written in the target's markup (./markup.ts), every field fitted
 * to the provider type's limits (docs/architecture.md, "Limits"). Long output is bounded, not
 * beheaded: the start (the summary) and the end (where the Pulumi CLI prints the error) are kept,
 * and what was cut is said.
 *
 * Case ids (F13, F14, N01) are described in docs/cases.md.
 */
import type { EventChanges, NotificationEvent } from '../api/event.ts';
import { isGitProviderType, type ProviderType } from '../api/v1alpha1.ts';
import {
  boundText,
  formatCount,
  headAndTail,
  keepEnds,
  measure,
  singleLine,
  type FieldLimit,
} from '../text.ts';
import { changesContext, type ChangesContext } from './changes.ts';
import { buildContext, markerFor, stateOf, withValues, type TemplateContext } from './context.ts';
import { builtinBudgetMessage, RenderBudget, TemplateBudgetError, withBudget } from './budget.ts';
import { cleanError, errorMessage } from './errors.ts';
import { fitContext } from './fit.ts';
import { TEMPLATE_LIMITS } from './limits.ts';
import { markupFor, plain, type Markup } from './markup.ts';
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

/**
 * The markup template `name` is written in for `providerType`: the message in the type's chat
 * markup (plain for webhooks), the comment in the forge's Markdown, status fields plain.
 */
export function markupForTemplate(name: TemplateName, providerType: ProviderType): Markup {
  if (name === 'message') return markupFor(providerType).message;
  if (name === 'pullRequestComment') return markupFor(providerType).comment;
  return plain;
}

/** One notification's render options and the deadline its templates share (performance.now() ms). */
type Run = RenderOptions & { deadline: number };

/**
 * One template under a fresh budget (./budget.ts). A template that fails is replaced by the
 * built-in one (`onTemplateError`); one that runs out of budget is not — the whole render fails
 * with a `TemplateBudgetError` naming the template: the tenant's by its name, a built-in one as
 * the built-in, with its file (`builtin` set: nothing for the tenant to change).
 */
function render(set: TemplateSet, name: TemplateName, ctx: TemplateContext, opts: Run): string {
  const markup = markupForTemplate(name, opts.providerType);
  const budget = (): RenderBudget =>
    new RenderBudget({ deadline: Math.min(performance.now() + TEMPLATE_LIMITS.maxRenderMs, opts.deadline) });
  // A chat type's own built-in message (templates/message.<type>.hbs) unless the Alert overrides it.
  const typed = name === 'message' ? set.typedMessages?.[opts.providerType] : undefined;
  const builtin = typed ?? set.builtins[name];
  const builtinFile = `templates/${typed !== undefined ? `message.${opts.providerType}` : name}.hbs`;
  const tenants = set.overridden.includes(name);
  const renderBuiltin = (): string => {
    try {
      return withBudget(budget(), () => builtin(ctx, markup));
    } catch (err) {
      if (!(err instanceof TemplateBudgetError)) throw err;
      throw new TemplateBudgetError(err.kind, builtinBudgetMessage(name, builtinFile, err), err.line, true);
    }
  };
  if (!tenants) return renderBuiltin();
  try {
    return withBudget(budget(), () => set.templates[name](ctx, markup));
  } catch (err) {
    if (err instanceof TemplateBudgetError) {
      throw new TemplateBudgetError(err.kind, `template '${name}': ${err.message}`, err.line);
    }
    opts.onTemplateError?.(name, cleanError(errorMessage(err)));
    return renderBuiltin();
  }
}

/**
 * `Output truncated: showing N of M characters (the start and the end).` (code points). Plain
 * words and digits only, so every markup shows it as it is.
 */
export function truncationNote(kept: number, total: number): string {
  return `Output truncated: showing ${formatCount(kept)} of ${formatCount(total)} characters (the start and the end).`;
}

/**
 * Renders `name` and fits the result to `limit` by cutting the long values — `message` and
 * `output` — in their middle ({@link keepEnds}: first line, a line saying how much was cut, the
 * end), never the template's own text, until the whole fits; `truncated` and `truncationNote`
 * are set for templates that show them. `finish` post-processes a rendering (and may add the
 * note). Escaping may make a value longer than it is: the budget is corrected from each
 * measured attempt. `fallback` gives the last resort when even empty values do not fit.
 */
function fitByValues(
  set: TemplateSet,
  name: TemplateName,
  ctx: TemplateContext,
  limit: FieldLimit | undefined,
  opts: Run,
  finish: (text: string, note: string | null) => string,
  fallback: (first: string, note: string) => string,
): string {
  const first = finish(render(set, name, ctx, opts), null);
  if (limit === undefined || measure(first, limit.unit) <= limit.max) return first;
  const { max, unit } = limit;
  const total = measure(ctx.message, 'codePoints');
  const sampleNote = truncationNote(total, total);
  const over0 = measure(first, unit) - max;
  let budget = measure(ctx.message, unit) - over0 - measure(sampleNote, unit) - 64;
  // When the overflow is larger than the cuttable values themselves, the template's own text (or
  // other values) is what is too long: one render with both values empty says whether cutting
  // can help at all, instead of up to 20 renders of a template that may be expensive.
  if (over0 >= measure(ctx.message, unit) + (ctx.output === null ? 0 : measure(ctx.output, unit))) budget = 0;
  for (let i = 0; i < 20; i++) {
    const b = Math.max(0, budget);
    const message = keepEnds(ctx.message, { max: b, unit, source: 'budget' });
    const output = ctx.output === null ? null : headAndTail(ctx.output, { max: b, unit, source: 'budget' });
    const note = truncationNote(total - message.cut, total);
    const text = finish(
      render(
        set,
        name,
        withValues(ctx, { message: message.text, output, truncated: true, truncationNote: note }),
        opts,
      ),
      note,
    );
    const size = measure(text, unit);
    const over = size - max;
    if (over <= 0) return text;
    if (b === 0) break;
    // Values may grow when escaped: shrink by the overflow, or in proportion, whichever is more.
    budget = Math.min(b - over, Math.floor((b * max) / size)) - 16 * (i + 1);
  }
  return fallback(first, truncationNote(0, total));
}

function finishComment(body: string, marker: string, note: string | null): string {
  let out = body.trim();
  if (!out.includes(marker)) out = `${marker}\n${out}`;
  if (note !== null && !out.includes(note)) out = `${out}\n\n${note}`;
  return `${out}\n`;
}

/**
 * The sticky comment body within `limit`: rendered once; when too long and the event carries a
 * change set, the resources shown are cut at whole resources — the most that still fits, found by
 * bisection on the final rendered body — and `changes.note` says `Showing X of Y resources.`
 * (appended when the template does not show it); the summary, counts, title, commit and marker
 * are never cut. When even no resource fits, `message` and `output` are cut in the middle (the
 * start and the end stay) until the whole body fits, with `truncated` and `truncationNote` set
 * (the note is appended if the template does not show it). Code fences stay balanced: `codeBlock`
 * picks its fence from the content actually shown. Last resort (a template whose fixed text
 * alone is too long): the marker, the title, the change summary and the note.
 */
function renderComment(
  set: TemplateSet,
  ctx0: TemplateContext,
  limit: FieldLimit | undefined,
  opts: Run,
  changes: EventChanges | undefined,
): string {
  const marker = markerFor(ctx0.markerId);
  const md = markupForTemplate('pullRequestComment', opts.providerType);
  let ctx = ctx0;
  const resourcesNote = (c: TemplateContext): string | null => c.changes?.note ?? null;
  const finish = (c: TemplateContext, body: string, note: string | null): string => {
    let out = finishComment(body, marker, note);
    const rn = resourcesNote(c);
    if (rn !== null && !out.includes(rn)) out = `${out.trimEnd()}\n\n${rn}\n`;
    return out;
  };
  const shown = ctx0.changes?.shown ?? 0;
  if (limit !== undefined && shown > 0) {
    const withShown = (k: number): TemplateContext =>
      withValues(ctx0, { changes: changesContext(changes, k) });
    const fits = (c: TemplateContext): boolean =>
      measure(finish(c, render(set, 'pullRequestComment', c, opts), null), limit.unit) <= limit.max;
    if (!fits(ctx0)) {
      // The most resources that fit: bisection over [0, shown - 1] (shown already does not fit).
      let lo = 0;
      let hi = shown - 1;
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        if (fits(withShown(mid))) lo = mid;
        else hi = mid - 1;
      }
      ctx = withShown(lo);
    }
  }
  const summary = ctx.changes?.summary ? `\n\n${md.text(ctx.changes.summary)}` : '';
  return fitByValues(
    set,
    'pullRequestComment',
    ctx,
    limit,
    opts,
    (body, note) => finish(ctx, body, note),
    (_first, note) => {
      const text = `${marker}\n### ${ctx.emoji} ${md.text(ctx.title)}${summary}\n\n${note}\n`;
      return limit === undefined ? text : boundText(text, limit.max, limit.unit);
    },
  );
}

/**
 * The chat/webhook message within `limit`: like the comment, the long values are cut in their
 * middle so the template's lines (stack, commit, link) and the output's end stay; last resort,
 * the rendered text itself cut in its middle.
 */
function renderMessage(
  set: TemplateSet,
  ctx: TemplateContext,
  limit: FieldLimit | undefined,
  opts: Run,
): string {
  return fitByValues(
    set,
    'message',
    ctx,
    limit,
    opts,
    (text) => text.trim(),
    (first) => headAndTail(first, limit),
  );
}

/**
 * The commit status description, single-line, within `limit`. When too long: a change set not
 * read whole has its `changes.summary` (`change set incomplete: <why>`) cut with `…`
 * first, keeping at least its first 60 code points, so that the run's own summary and last line
 * still fit; then the `summary` is cut (with `…`) so that the end of the description — the
 * built-in template's `lastLine`, the error — still fits when it can ("where it fits");
 * otherwise the whole is cut with a trailing `…`.
 */
function statusDescription(
  set: TemplateSet,
  ctx: TemplateContext,
  limit: FieldLimit | undefined,
  opts: Run,
): string {
  const once = (c: TemplateContext): string => {
    const text = singleLine(render(set, 'commitStatusDescription', c, opts));
    return text === '' ? c.title : text;
  };
  const full = once(ctx);
  if (limit === undefined || measure(full, limit.unit) <= limit.max) return full;
  const { max, unit } = limit;
  const over = measure(full, unit) - max;
  const changes = ctx.changes;
  if (changes !== null && !changes.complete) {
    const keep = measure(changes.summary, unit) - over;
    if (keep >= Math.min(60, max / 2)) {
      const cut = Object.assign(Object.create(null) as ChangesContext, changes, {
        summary: boundText(changes.summary, keep, unit),
      });
      const shorter = once(withValues(ctx, { changes: cut }));
      if (measure(shorter, unit) <= max) return shorter;
    }
  }
  const room = measure(ctx.summary, unit) - over;
  // Keep at least a readable start of the summary; else the last line does not fit.
  if (ctx.lastLine !== null && room >= Math.min(24, max / 4)) {
    const shorter = once(withValues(ctx, { summary: boundText(ctx.summary, room, unit) }));
    if (measure(shorter, unit) <= max) return shorter;
  }
  return boundText(full, max, unit);
}

function statusContext(set: TemplateSet, ctx: TemplateContext, opts: Run): string {
  let text = singleLine(render(set, 'commitStatusContext', ctx, opts));
  if (text === '') {
    text = singleLine(withBudget(new RenderBudget(), () => set.builtins.commitStatusContext(ctx, plain)));
  }
  if (text === '') text = `pko/${ctx.clusterName}/${ctx.namespace}/${ctx.stackName}`;
  return text;
}

function targetURL(ctx: TemplateContext, limit: FieldLimit | undefined): string | undefined {
  const url = ctx.permalink;
  if (url === null || !/^https?:\/\//i.test(url)) return undefined;
  return limit === undefined || measure(url, limit.unit) <= limit.max ? url : undefined;
}

/**
 * Renders everything one delivery needs (./rendered.ts `RenderedNotification`), every
 * `{{value}}` escaped for the target (./markup.ts) and every field fitted to `opts.limits`:
 * - `message` (always): the `message` template, trimmed and fitted to the chat limit of
 *   `providerType` by cutting the output in its middle (start and end kept, the cut stated).
 * - git provider types: `commitStatus` — `state` from the reason (*Started → pending, *Succeeded →
 *   success, *Failed/StackStalled → failure), or `failure` with the context's `gate` as the
 *   description (bounded) when a PullRequestPreview's gate fails the preview; `name` the rendered context, single-line, cut to the
 *   forge's name limit; `context` the same fitted to the forge's key limit by prefix + hash
 *   (Bitbucket keys ≤ 40); `description` rendered, escape-free, single-line, bounded in the
 *   forge's unit (GitHub ≤ 140 code points, F13), keeping its end when it can; `targetURL` the
 *   permalink when it is http(s) and within the forge's URL limit.
 *   A started event of a superseded head (`supersededBy`, case N18) is `failure` "superseded by
 *   <short sha>".
 * - git provider types with `commentsEnabled`: `comment` {marker, body} — see the comment limits
 *   (none for an event of a superseded head: N18)
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
  options: RenderOptions,
): RenderedNotification {
  const opts: Run = { ...options, deadline: performance.now() + TEMPLATE_LIMITS.maxNotificationMs };
  const ctx = templateContext(ev, opts);
  const { limits } = opts;
  const out: RenderedNotification = { message: renderMessage(set, ctx, limits.message, opts) };
  if (!isGitProviderType(opts.providerType)) return out;
  const context = statusContext(set, ctx, opts);
  // A failing gate (docs/previews.md) decides the state and the description, whatever the templates say.
  // N18: a started run of a superseded head never leaves its commit pending.
  const superseded =
    ev.supersededBy !== undefined && stateOf(ev.reason) === 'pending'
      ? `superseded by ${ev.supersededBy.slice(0, 7)}`
      : null;
  const override = ctx.gate ?? superseded;
  const overrideLimit = limits.statusDescription;
  out.commitStatus = {
    state: override !== null ? 'failure' : stateOf(ev.reason),
    context: fitContext(context, limits.statusContext),
    ...(limits.statusName === undefined
      ? {}
      : { name: boundText(context, limits.statusName.max, limits.statusName.unit) }),
    description:
      override === null
        ? statusDescription(set, ctx, limits.statusDescription, opts)
        : overrideLimit === undefined
          ? override
          : boundText(override, overrideLimit.max, overrideLimit.unit),
    targetURL: targetURL(ctx, limits.statusTargetURL),
  };
  // N18: a result for an older head never replaces the newer head's comment.
  if (opts.commentsEnabled && ev.supersededBy === undefined) {
    out.comment = {
      marker: markerFor(ctx.markerId),
      body: renderComment(set, ctx, limits.comment, opts, ev.changes),
    };
  }
  return out;
}
