/** The shapes shared by template compilation (./index.ts) and rendering (./render.ts). */
import type { ProviderType } from '../api/v1alpha1.ts';
import type { TemplateContext } from './context.ts';
import type { Markup } from './markup.ts';
import type { ProviderLimits } from './rendered.ts';

export const TEMPLATE_NAMES = [
  'message',
  'commitStatusDescription',
  'commitStatusContext',
  'pullRequestComment',
] as const;
export type TemplateName = (typeof TEMPLATE_NAMES)[number];

/** A compiled template; every `{{value}}` is written with `markup` (./markup.ts). */
export type Compiled = (ctx: TemplateContext, markup: Markup) => string;

/** Compiled templates of one Alert (and Provider context override), ready for rendering. */
export interface TemplateSet {
  readonly templates: Readonly<Record<TemplateName, Compiled>>;
  /** The built-in templates, used when a custom one fails at render time. */
  readonly builtins: Readonly<Record<TemplateName, Compiled>>;
  /** Which templates are not the built-in ones. */
  readonly overridden: readonly TemplateName[];
  /**
   * Built-in `message` templates of the chat types that have their own
   * (`templates/message.<type>.hbs`), used for those types unless `message` is overridden.
   */
  readonly typedMessages?: Readonly<Partial<Record<ProviderType, Compiled>>>;
}

/** Templates refused: which one, where, and why (the message says what to change). */
export interface TemplateFailure {
  ok: false;
  /** The template (a {@link TemplateName}), the ConfigMap key when the key is wrong, or `built-in`. */
  template: string;
  /** 1-based line, when known. */
  line: number | null;
  message: string;
  /**
   * A built-in template (none of the tenant's) ran out of its render budget on the test render:
   * the message says so, and there is nothing in the Alert's templates to change.
   */
  builtin?: true;
}

export type CompileResult =
  | { ok: true; set: TemplateSet }
  | (TemplateFailure & {
      /** Set when the test render ran out of time: a verdict of the moment (load), not of the template. */
      timedOut?: boolean;
    });

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
