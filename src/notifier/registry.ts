/**
 * Chat and webhook provider types: each one's field limits and, once implemented, its notifier
 * (one file per type in this folder). The git forges are registered in src/forge/registry.ts;
 * src/registry.ts puts both tables together.
 *
 * To add a type (msteams, discord and googlechat are declared in the API but not built yet):
 * write src/notifier/<type>.ts exporting a `NotifierFactory` (see ./slack.ts for the shape: build
 * the JSON payload in code, send it with `http.request`, map the service's error answers to
 * `ProviderError`s), set `notifier` below, move its limits beside it, and add a page in
 * docs/providers/. Until then a Provider of that type is Ready but its deliveries fail with
 * reason `NotImplemented`.
 */
import type { GitProviderType, ProviderType } from '../api/v1alpha1.ts';
import type { ProviderLimits } from '../template/rendered.ts';
import { generic } from './generic.ts';
import { genericHmac } from './generic-hmac.ts';
import { slack, slackLimits } from './slack.ts';
import type { NotifierFactory } from './types.ts';

export type MessageProviderType = Exclude<ProviderType, GitProviderType>;

/** One chat or webhook provider type. */
export interface MessageProvider {
  /** What the renderer fits `message` to (webhooks: none; their message is bounded by the source, 8,192 code points). */
  readonly limits: ProviderLimits;
  /** Absent while the type is not implemented. */
  readonly notifier?: NotifierFactory;
}

export const MESSAGE_PROVIDERS: { readonly [T in MessageProviderType]: MessageProvider } = {
  generic: { limits: {}, notifier: generic },
  'generic-hmac': { limits: {}, notifier: genericHmac },
  slack: { limits: slackLimits, notifier: slack },
  msteams: {
    limits: {
      message: {
        max: 20_000,
        unit: 'utf8',
        source:
          'Teams Workflows webhook payload ≤ 28 KB; 20,000 bytes of text leave room for the Adaptive Card and JSON escaping',
      },
    },
  },
  discord: {
    limits: {
      message: { max: 2_000, unit: 'utf16', source: 'Discord webhook: content ≤ 2,000 characters' },
    },
  },
  googlechat: {
    limits: {
      message: {
        max: 28_000,
        unit: 'utf8',
        source:
          'Google Chat spaces.messages.create: message ≤ 32,000 bytes including cards; 28,000 bytes of text leave room for the payload',
      },
    },
  },
};
