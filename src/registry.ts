/**
 * Provider type → implementation: the one table the delivery layer's `NotifierRegistry` port is
 * given (src/delivery/send.ts). Git forges live in src/forge/<name>/, chat and webhook types in
 * src/notifier/ (docs/architecture.md, "Providers").
 */
import type { NotifierRegistry } from './delivery/send.ts';
import { limitsFor } from './notifier/limits.ts';
import { createNotifier } from './notifier/registry.ts';

export const providerRegistry: NotifierRegistry = {
  create: (p) => createNotifier(p),
  limits: (type) => limitsFor(type),
};
