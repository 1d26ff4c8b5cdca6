/** Shared pieces of the forge notifier tests: providers, events, rendered notifications, cleanup. */
import { afterEach, expect } from 'vitest';
import type { NotificationEvent } from '../../src/api/event.ts';
import { API_VERSION, type Provider, type ProviderSpec } from '../../src/api/v1alpha1.ts';
import { resolveProvider, type ResolvedProvider } from '../../src/credential/provider.ts';
import { ProviderError } from '../../src/notifier/errors.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { createNotifier } from '../../src/provider-types.ts';
import type { CommitState, Notifier, RenderedNotification } from '../../src/notifier/types.ts';
import { resolved, sampleEvent } from '../notifier/fixtures.ts';

const cleanups: (() => Promise<void>)[] = [];

/** Registers cleanups run after each test (servers, proxies, notifiers), last first. */
export function useCleanup(): (fn: () => Promise<void>) => void {
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return (fn) => cleanups.push(fn);
}

/** A notifier built through the registry for `p`, closed after the test. */
export function forgeNotifier(p: ResolvedProvider, later: (fn: () => Promise<void>) => void): Notifier {
  const n = createNotifier(p, { http: new ProviderHttp(p) });
  later(() => n.close());
  return n;
}

export function provider(
  overrides: Partial<ResolvedProvider> & Pick<ResolvedProvider, 'address' | 'type'>,
): ResolvedProvider {
  const secrets = [overrides.token, overrides.password].filter((v): v is string => v !== undefined);
  return resolved({ secretValues: secrets, ...overrides });
}

/** An event on `commit` with the given extra metadata. */
export function event(commit: string, metadata: Record<string, string | undefined> = {}): NotificationEvent {
  return { ...sampleEvent, metadata: { ...sampleEvent.metadata, commit, ...metadata } };
}

/**
 * A preview run's event on `commit` (a Stack with `spec.preview: true`, as src/source/derive.ts
 * derives it: reason `PreviewSucceeded`, `metadata.updateType` `preview`): its comment goes on
 * the open pull requests whose head is the commit. A plain {@link event} is a deploy run's, which
 * comments only on a pull request it names (`metadata.pullRequest`).
 */
export function previewEvent(
  commit: string,
  metadata: Record<string, string | undefined> = {},
): NotificationEvent {
  return { ...event(commit, { updateType: 'preview', ...metadata }), reason: 'PreviewSucceeded' };
}

/**
 * The base Stack's deployment of `commit` (a merge) as the router marks it: `previewThread.merged`,
 * so the forge looks up the pull request the commit merged and edits its preview's comment.
 */
export function deployEvent(commit: string): NotificationEvent {
  return { ...event(commit), previewThread: { baseStack: 'web', merged: true } };
}

export const CONTEXT = 'pko/team-a/web';
export const MARKER = '<!-- pko-notification-controller: cluster=test ns=team-a stack=web -->';

/** A rendered notification with a commit status and, when `comment` is given, the sticky comment. */
export function rendered(
  state: CommitState,
  opts: { description?: string; comment?: string; context?: string; targetURL?: string } = {},
): RenderedNotification {
  return {
    message: `stack web: ${state}`,
    commitStatus: {
      state,
      context: opts.context ?? CONTEXT,
      description: opts.description ?? `Update ${state}`,
      targetURL: opts.targetURL ?? 'https://console.example.com/runs/1',
    },
    ...(opts.comment !== undefined
      ? { comment: { marker: MARKER, body: `${MARKER}\n${opts.comment}` } }
      : {}),
  };
}

/** Awaits a rejection and returns it as a ProviderError. */
export async function failure(fn: () => Promise<unknown>): Promise<ProviderError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a ProviderError, got success');
}

/**
 * A ResolvedProvider made the way the controller makes it: `resolveProvider` over a Provider
 * object and a Secret holding `data` (so trimming and credential rules apply: F10).
 */
export async function resolvedFromSecret(
  spec: Omit<ProviderSpec, 'secretRef'>,
  data: Record<string, string>,
): Promise<ResolvedProvider> {
  const p: Provider = {
    apiVersion: API_VERSION,
    kind: 'Provider',
    metadata: { name: 'forge', namespace: 'team-a' },
    spec: { ...spec, secretRef: { name: 'forge-credentials' } },
  };
  const r = await resolveProvider(p, (ns, name) =>
    Promise.resolve(ns === 'team-a' && name === 'forge-credentials' ? data : undefined),
  );
  if (!r.ok) throw new Error(`resolveProvider failed: ${r.reason}: ${r.message}`);
  return r.provider;
}
