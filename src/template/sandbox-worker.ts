/**
 * The template sandbox's worker thread (./sandbox.ts): compiles and renders tenant templates with
 * the in-thread engine (./index.ts, ./render.ts) so that neither can stall the controller's event
 * loop or exhaust its heap. Compiled sets are kept by content key, so a template is compiled once
 * per content (again only after this worker was replaced).
 *
 * Protocol: requests `{ id, kind: 'compile' | 'render', … }` are answered in order with
 * `{ id, … }` (./sandbox-protocol.ts).
 */
import { parentPort } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import { TemplateBudgetError } from './budget.ts';
import { errorMessage } from './errors.ts';
import { compileTemplates } from './index.ts';
import { renderNotification } from './render.ts';
import type { SandboxReply, SandboxRequest, TemplateSource } from './sandbox-protocol.ts';
import type { TemplateName, TemplateSet } from './types.ts';

/** Compiled sets by content key, bounded by the size of their sources (the code V8 makes grows with it). */
const sets = new LRUCache<string, TemplateSet>({
  maxSize: 16 * 1024 * 1024,
  sizeCalculation: (_v, key) => Math.max(1, sourceSizes.get(key) ?? 1),
  dispose: (_v, key) => sourceSizes.delete(key),
});
const sourceSizes = new Map<string, number>();

function sizeOf(src: TemplateSource): number {
  let n = src.commitStatusContext?.length ?? 0;
  for (const v of Object.values(src.overrides)) n += v.length;
  return n + 1024;
}

function compiled(src: TemplateSource, verify: boolean): ReturnType<typeof compileTemplates> {
  const r = compileTemplates(
    src.overrides,
    src.commitStatusContext !== undefined ? { commitStatusContext: src.commitStatusContext } : {},
    { verify },
  );
  if (r.ok) {
    sourceSizes.set(src.key, sizeOf(src));
    sets.set(src.key, r.set);
  }
  return r;
}

function handle(req: SandboxRequest): SandboxReply {
  if (req.kind === 'compile') {
    const r = compiled(req.source, true);
    return r.ok
      ? { id: req.id, kind: 'compiled', overridden: [...r.set.overridden] }
      : {
          id: req.id,
          kind: 'invalid',
          template: r.template,
          line: r.line,
          message: r.message,
          timedOut: r.timedOut === true,
          builtin: r.builtin === true,
        };
  }
  let set = sets.get(req.source.key);
  if (set === undefined) {
    const r = compiled(req.source, false);
    if (!r.ok) return { id: req.id, kind: 'failed', message: `${r.template}: ${r.message}` };
    set = r.set;
  }
  const templateErrors: { template: TemplateName; message: string }[] = [];
  try {
    const rendered = renderNotification(set, req.event, {
      ...req.options,
      onTemplateError: (template, message) => {
        templateErrors.push({ template, message });
      },
    });
    return { id: req.id, kind: 'rendered', rendered, templateErrors };
  } catch (err) {
    if (err instanceof TemplateBudgetError) {
      return {
        id: req.id,
        kind: 'overBudget',
        budget: err.kind,
        line: err.line,
        message: err.message,
        builtin: err.builtin,
      };
    }
    return { id: req.id, kind: 'failed', message: errorMessage(err) };
  }
}

const port = parentPort;
if (port === null) throw new Error('sandbox-worker.ts runs only as a worker thread');
port.on('message', (req: SandboxRequest) => {
  let reply: SandboxReply;
  try {
    reply = handle(req);
  } catch (err) {
    // A stack overflow or another engine error: the request fails, the worker lives on.
    reply = { id: req.id, kind: 'failed', message: errorMessage(err) };
  }
  port.postMessage(reply);
});
