/**
 * `builtinsInline` (src/template/index.ts): the built-in templates render on the calling thread
 * (no worker is started for them), while anything a tenant wrote — ConfigMap data or a Provider's
 * `spec.commitStatus.context` — still goes through the sandbox's workers and their bounds.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  builtinsInline,
  compileTemplates,
  inlineTemplates,
  sourceKey,
  TemplateBudgetError,
  TemplateSandbox,
  type RenderOptions,
} from '../../src/template/index.ts';
import { stackEvent } from './fixtures.ts';

const github: RenderOptions = {
  clusterName: 'c',
  providerType: 'github',
  commentsEnabled: true,
  limits: {},
};

describe('builtinsInline', () => {
  const sandbox = new TemplateSandbox();
  const compiler = builtinsInline(sandbox);
  afterAll(() => sandbox.close());

  it('renders the built-ins without a worker, as the in-thread engine does', async () => {
    const r = await compiler.compile({});
    if (!r.ok) throw new Error(r.message);
    expect(r.templates.key).toBe(sourceKey({}));
    expect(r.templates.overridden).toEqual([]);
    const ev = stackEvent();
    const out = await r.templates.render(ev, github);
    const direct = compileTemplates();
    if (!direct.ok) throw new Error(direct.message);
    expect(out).toEqual(await inlineTemplates(direct.set).render(ev, github));
    expect(out.commitStatus?.state).toBe('failure');
    expect(out.comment?.body).toContain('app');
    // Compiled once per process: the same answer again.
    expect(await compiler.compile({})).toBe(r);
    expect(sandbox.workersStarted).toBe(0);
  });

  it('sends ConfigMap templates to the sandbox, with its budget', async () => {
    const r = await compiler.compile({
      message: '{{#each labels}}{{#each @root.labels}}{{@key}}{{/each}}{{/each}}',
    });
    if (!r.ok) throw new Error(r.message);
    const labels = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`team.example.com/l${i}`, 'x']));
    await expect(r.templates.render(stackEvent({ labels }), github)).rejects.toBeInstanceOf(
      TemplateBudgetError,
    );
    expect(sandbox.workersStarted).toBeGreaterThan(0);
  });

  it("sends a Provider's commit status context template to the sandbox", async () => {
    const started = sandbox.workersStarted;
    const fresh = new TemplateSandbox();
    try {
      const r = await builtinsInline(fresh).compile({}, { commitStatusContext: 'ci/{{stackName}}' });
      if (!r.ok) throw new Error(r.message);
      expect(r.templates.overridden).toEqual(['commitStatusContext']);
      const out = await r.templates.render(stackEvent(), github);
      expect(out.commitStatus?.context).toBe('ci/app');
      expect(fresh.workersStarted).toBeGreaterThan(0);
      expect(sandbox.workersStarted).toBe(started);
    } finally {
      await fresh.close();
    }
  });
});
