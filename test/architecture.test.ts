/**
 * The import graph of src/ follows the layers of docs/architecture.md: every relative import of
 * every source file is checked against the table below (a module may import its own folder and
 * the modules its layer lists, nothing else). The table is the one in docs/architecture.md; a test
 * keeps the two equal.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');
const src = join(root, 'src');

/** Module (folder or top-level file, without `.ts`) → the modules it may import. */
export const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  text: [],
  undici: [],
  'node-http': [],
  api: ['changes'],
  log: [],
  config: ['api', 'log'],
  kube: ['api', 'log', 'text', 'undici', 'node-http'],
  credential: ['api', 'kube', 'text'],
  template: ['api', 'changes', 'text'],
  changes: ['text'],
  enrich: ['changes', 'credential', 'kube', 'api', 'log', 'text', 'undici'],
  source: ['api', 'kube', 'log', 'text'],
  notifier: ['api', 'credential', 'template', 'log', 'text', 'undici', 'node-http'],
  forge: ['notifier', 'api', 'credential', 'template', 'log', 'text'],
  delivery: ['notifier', 'template', 'credential', 'kube', 'api', 'log', 'text'],
  alert: ['delivery', 'source', 'kube', 'api', 'log', 'text'],
  reconcile: ['alert', 'template', 'credential', 'kube', 'api', 'log', 'text'],
  'provider-types': ['forge', 'notifier', 'delivery', 'template', 'credential', 'api', 'undici'],
  preview: ['forge', 'notifier', 'template', 'credential', 'kube', 'api', 'log', 'text', 'node-http'],
  drift: ['changes', 'source', 'kube', 'api', 'log', 'text'],
  controller: [
    'preview',
    'drift',
    'provider-types',
    'reconcile',
    'alert',
    'delivery',
    'enrich',
    'source',
    'template',
    'credential',
    'kube',
    'config',
    'api',
    'log',
  ],
  envtest: [],
  main: ['controller', 'config', 'kube', 'credential', 'envtest', 'log'],
};

/**
 * Inside `delivery`, file → the files of the folder it may import: lanes pick the next event and
 * hand it to the engine (deliver); the engine runs the skip checks, the send façade's steps and
 * settles through outcome; skip checks are pure (nothing of delivery's I/O); outcome knows the
 * ledger but neither the engine nor the lanes; the send façade knows neither. docs/architecture.md,
 * "Delivery".
 */
export const DELIVERY_LAYERS: Readonly<Record<string, readonly string[]>> = {
  lanes: ['deliver', 'outcome', 'skip', 'order', 'ledger-entry', 'locks', 'send', 'types'],
  deliver: ['outcome', 'skip', 'send', 'class', 'locks', 'ledger-entry', 'types'],
  skip: ['types'],
  outcome: ['ledger', 'ledger-entry', 'types'],
  send: ['class', 'gate', 'health', 'locks', 'types'],
  class: ['types'],
  ledger: ['ledger-entry'],
  'ledger-entry': [],
  status: ['types'],
  order: [],
  locks: [],
  gate: [],
  health: [],
  types: [],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** `src/forge/github/client.ts` → `forge`; `src/controller.ts` → `controller`. */
function moduleOf(file: string): string {
  const rel = relative(src, file).split('/');
  return rel.length === 1 ? (rel[0] ?? '').replace(/\.ts$/, '') : (rel[0] ?? '');
}

/** Relative import specifiers of a file (static imports, re-exports and dynamic imports). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?\bfrom\s+'(\.[^']+)'/g))
    out.push(m[1] ?? '');
  for (const m of text.matchAll(/\bimport\(\s*'(\.[^']+)'\s*\)/g)) out.push(m[1] ?? '');
  return out;
}

/** Every cross-module edge `from → to` with the files that make it. */
export function importGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(src)) {
    const from = moduleOf(file);
    for (const spec of importsOf(file)) {
      const to = moduleOf(resolve(dirname(file), spec));
      if (to === from) continue;
      let set = graph.get(from);
      if (!set) graph.set(from, (set = new Set()));
      set.add(to);
    }
  }
  return graph;
}

describe('architecture', () => {
  it('every module of src/ is in the layer table', () => {
    const modules = new Set(sourceFiles(src).map(moduleOf));
    expect([...modules].filter((m) => !(m in ALLOWED))).toEqual([]);
  });

  it('no import runs against the layers (docs/architecture.md)', () => {
    const violations: string[] = [];
    for (const file of sourceFiles(src)) {
      const from = moduleOf(file);
      for (const spec of importsOf(file)) {
        const to = moduleOf(resolve(dirname(file), spec));
        if (to !== from && !(ALLOWED[from] ?? []).includes(to))
          violations.push(`${relative(root, file)} imports ${spec} (${from} → ${to})`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('the allowed graph has no cycle', () => {
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (m: string, path: string[]): void => {
      if (state.get(m) === 'done') return;
      if (state.get(m) === 'visiting') throw new Error(`cycle: ${[...path, m].join(' → ')}`);
      state.set(m, 'visiting');
      for (const n of ALLOWED[m] ?? []) visit(n, [...path, m]);
      state.set(m, 'done');
    };
    for (const m of Object.keys(ALLOWED))
      expect(() => {
        visit(m, []);
      }).not.toThrow();
  });

  it('delivery reads in layers: lanes → engine → skip checks, send façade, outcome (no import back up)', () => {
    const dir = join(src, 'delivery');
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.ts'))
      .map((f) => f.slice(0, -3));
    expect(
      files.filter((f) => !(f in DELIVERY_LAYERS)),
      'files missing from DELIVERY_LAYERS',
    ).toEqual([]);
    const violations: string[] = [];
    for (const f of files) {
      for (const spec of importsOf(join(dir, `${f}.ts`))) {
        if (!spec.startsWith('./')) continue;
        const to = spec.slice(2).replace(/\.ts$/, '');
        if (!(DELIVERY_LAYERS[f] ?? []).includes(to)) violations.push(`delivery/${f}.ts imports ${spec}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('docs/architecture.md lists the same table', () => {
    const doc = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8');
    for (const [m, deps] of Object.entries(ALLOWED)) {
      const row = new RegExp(`^\\|\\s*\`${m}\`\\s*\\|([^|]*)\\|`, 'm').exec(doc);
      expect(row, `row for ${m}`).not.toBeNull();
      const listed = (row?.[1] ?? '').match(/`[^`]+`/g)?.map((s) => s.slice(1, -1)) ?? [];
      expect([...listed].sort(), m).toEqual([...deps].sort());
    }
  });
});
