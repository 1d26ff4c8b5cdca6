/**
 * Chat and webhook provider types: each one's field limits and, once implemented, its notifier
 * (one file per type in this folder). The git forges are registered in src/forge/registry.ts;
 * src/provider-types.ts puts both tables together.
 *
 * To add a type: write src/notifier/<type>.ts exporting a `NotifierFactory` (see ./slack.ts for the shape: build
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
import { msteams, msteamsLimits } from './msteams.ts';
import { discord, discordLimits } from './discord.ts';
import { googlechat, googlechatLimits } from './googlechat.ts';
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
  msteams: { limits: msteamsLimits, notifier: msteams },
  discord: { limits: discordLimits, notifier: discord },
  googlechat: { limits: googlechatLimits, notifier: googlechat },
};
