/** Messages between the template sandbox (./sandbox.ts) and its worker (./sandbox-worker.ts). */
import type { NotificationEvent } from '../api/event.ts';
import type { BudgetKind } from './budget.ts';
import type { RenderedNotification } from './rendered.ts';
import type { RenderOptions, TemplateName } from './types.ts';

/** One Alert's template sources and their content key (SHA-256 of both). */
export interface TemplateSource {
  key: string;
  /** ConfigMap data as given (keys with or without `.hbs`). */
  overrides: Readonly<Record<string, string>>;
  /** The Provider's `spec.commitStatus.context`. */
  commitStatusContext?: string;
}

export type SandboxRequest =
  | { id: number; kind: 'compile'; source: TemplateSource }
  | {
      id: number;
      kind: 'render';
      source: TemplateSource;
      event: NotificationEvent;
      options: Omit<RenderOptions, 'onTemplateError'>;
    };

export type SandboxReply =
  | { id: number; kind: 'compiled'; overridden: TemplateName[] }
  | {
      id: number;
      kind: 'invalid';
      template: string;
      line: number | null;
      message: string;
      timedOut: boolean;
      builtin: boolean;
    }
  | {
      id: number;
      kind: 'rendered';
      rendered: RenderedNotification;
      templateErrors: { template: TemplateName; message: string }[];
    }
  | {
      id: number;
      kind: 'overBudget';
      budget: BudgetKind;
      line: number | null;
      message: string;
      builtin: boolean;
    }
  | { id: number; kind: 'failed'; message: string };
