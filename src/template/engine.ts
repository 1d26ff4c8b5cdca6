/**
 * The template engine (Handlebars, its parser and this folder's compile path, ./index.ts), loaded
 * the first time something is compiled instead of with the controller. A controller with no Alert
 * and no PullRequestPreview never renders, and V8 keeps every loaded module's source in the heap:
 * Handlebars alone, with its inline source maps, is ~2.5 MiB of resident memory at idle
 * (issue 21; docs/benchmarks.md, ninth pass).
 *
 * {@link templateEngine} loads it (once; later calls share the promise);
 * {@link loadedTemplateEngine} is the engine once loaded, for synchronous callers whose
 * asynchronous entry point awaited {@link templateEngine} first. The sandbox workers import
 * ./index.ts themselves (./sandbox-worker.ts).
 */
import type { TemplateCompiler } from './sandbox.ts';

/** ./index.ts, the template engine's API. */
export type TemplateEngine = typeof import('./index.ts');

let loading: Promise<TemplateEngine> | undefined;
let loaded: TemplateEngine | undefined;

/** Loads the template engine (first call) and resolves to it. Rejects only if the module fails to load. */
export function templateEngine(): Promise<TemplateEngine> {
  loading ??= import('./index.ts').then((m) => (loaded = m));
  return loading;
}

/** The template engine when {@link templateEngine} has resolved, else undefined. */
export function loadedTemplateEngine(): TemplateEngine | undefined {
  return loaded;
}

/**
 * ./index.ts `builtinsInline(sandbox)` with the engine loaded on the first `compile`: the built-in
 * templates compile on this thread, overrides and a `commitStatus.context` in `sandbox`'s workers.
 */
export function lazyBuiltinsInline(sandbox: TemplateCompiler): TemplateCompiler {
  let inline: TemplateCompiler | undefined;
  return {
    async compile(overrides, opts) {
      inline ??= (await templateEngine()).builtinsInline(sandbox);
      return inline.compile(overrides, opts);
    },
  };
}
