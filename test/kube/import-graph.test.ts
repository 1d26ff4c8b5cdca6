/**
 * The controller process loads no module of `@kubernetes/client-node` (issue 21: importing it
 * costs +80 MiB RSS per process), and loads the GitHub and GitLab client libraries (Octokit,
 * gitbeaker: ~17 and ~19 MiB) only when a Provider of that type first sends, and the template
 * engine (Handlebars) and re2js only with the first compile, and the YAML library only with the
 * first YAML it reads. A child `node` runs the entry point `src/main.ts --help` —
 * whose static imports are the whole controller — with a resolve hook recording every module,
 * and the list is checked. The same hook on a process that does import client-node must see it,
 * so the check cannot pass for a hook that records nothing.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '..', '..');
const hook = join(root, 'test', 'support', 'record-imports.ts');

/** URLs of the modules a `node` child with `args` resolved. */
async function modulesLoaded(args: string[]): Promise<string[]> {
  const file = join(mkdtempSync(join(tmpdir(), 'pkonc-imports-')), 'modules.txt');
  await run(process.execPath, ['--import', hook, ...args], {
    cwd: root,
    env: { ...process.env, RECORD_IMPORTS_FILE: file },
    timeout: 60_000,
  });
  return readFileSync(file, 'utf8').split('\n');
}

describe('controller import graph', () => {
  it('src/main.ts loads the controller without @kubernetes/client-node', async () => {
    const modules = await modulesLoaded([join(root, 'src', 'main.ts'), '--help']);
    // The hook saw the controller's own graph …
    expect(modules.some((m) => m.endsWith('/src/kube/informer.ts'))).toBe(true);
    expect(modules.some((m) => m.endsWith('/src/controller.ts'))).toBe(true);
    expect(modules.some((m) => m.includes('/node_modules/undici/'))).toBe(true);
    // … and nothing of client-node.
    expect(modules.filter((m) => m.includes('@kubernetes/client-node'))).toEqual([]);
    // The forges are in the graph, their client libraries are not (imported on first use).
    expect(modules.some((m) => m.endsWith('/src/forge/github/client.ts'))).toBe(true);
    expect(modules.some((m) => m.endsWith('/src/forge/gitlab/client.ts'))).toBe(true);
    expect(modules.filter((m) => m.includes('/node_modules/@octokit/'))).toEqual([]);
    expect(modules.filter((m) => m.includes('/node_modules/@gitbeaker/'))).toEqual([]);
    // The template engine (Handlebars) loads with the first compile (src/template/engine.ts).
    expect(modules.some((m) => m.endsWith('/src/template/engine.ts'))).toBe(true);
    expect(modules.filter((m) => m.includes('/node_modules/handlebars/'))).toEqual([]);
    expect(modules.filter((m) => m.endsWith('/src/template/index.ts'))).toEqual([]);
    // re2js with the first pattern compiled (src/text.ts `re2`).
    expect(modules.filter((m) => m.includes('/node_modules/re2js/'))).toEqual([]);
    // The YAML library with the first YAML read (src/text.ts `yaml`): a kubeconfig in YAML, a Provider's headers.
    expect(modules.filter((m) => m.includes('/node_modules/yaml/'))).toEqual([]);
  }, 90_000);

  it('the recording sees client-node when a process imports it', async () => {
    const modules = await modulesLoaded([
      '--input-type=module',
      '-e',
      "import { KubeConfig } from '@kubernetes/client-node'; new KubeConfig();",
    ]);
    expect(modules.some((m) => m.includes('/node_modules/@kubernetes/client-node/dist/config.js'))).toBe(
      true,
    );
  }, 90_000);
});
