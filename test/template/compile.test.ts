import Handlebars from 'handlebars';
import { describe, expect, it } from 'vitest';
import { limitsFor } from '../../src/provider-types.ts';
import {
  compileTemplates,
  renderNotification,
  TEMPLATE_NAMES,
  type TemplateSet,
} from '../../src/template/index.ts';
import { stackEvent } from './fixtures.ts';

function render(message: string): string {
  const r = compileTemplates({ message });
  if (!r.ok) throw new Error(`${r.template}: ${r.message}`);
  return renderNotification(r.set, stackEvent(), {
    clusterName: 'c',
    providerType: 'generic',
    commentsEnabled: false,
    limits: {},
  }).message;
}

function failure(overrides: Record<string, string>, opts?: { commitStatusContext?: string }) {
  const r = compileTemplates(overrides, opts);
  if (r.ok) throw new Error('expected a compile error');
  return r;
}

describe('compileTemplates', () => {
  it('compiles the built-in templates', () => {
    const r = compileTemplates();
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(Object.keys(r.set.templates).sort()).toEqual([...TEMPLATE_NAMES].sort());
      expect(r.set.overridden).toEqual([]);
    }
  });

  it('applies ConfigMap overrides by name, with or without .hbs', () => {
    const r = compileTemplates({ 'message.hbs': 'M {{stackName}}', commitStatusDescription: 'D' });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect([...r.set.overridden].sort()).toEqual(['commitStatusDescription', 'message']);
    const out = renderNotification(r.set, stackEvent(), {
      clusterName: 'c',
      providerType: 'github',
      commentsEnabled: true,
      limits: limitsFor('github'),
    });
    expect(out.message).toBe('M app');
    expect(out.commitStatus?.description).toBe('D');
  });

  it.each([
    { name: 'strict-mode typo', src: 'Stack: {{stak}}', line: 1, msg: /unknown key `stak`/ },
    {
      name: 'typo on a later line, with a hint',
      src: 'a\nb\n  {{stakName}}',
      line: 3,
      msg: /unknown key `stakName` \(did you mean `stackName`\?\).*line 3, column 5/,
    },
    {
      name: 'typo inside #if (strict mode alone would render nothing)',
      src: '{{#if comit}}x{{/if}}',
      line: 1,
      msg: /unknown key `comit`/,
    },
    {
      name: 'typo in a helper argument',
      src: '\n{{truncate sumary 10}}',
      line: 2,
      msg: /unknown key `sumary`/,
    },
    {
      name: 'typo in a subexpression',
      src: '{{#if (eq reson "UpdateFailed")}}x{{/if}}',
      line: 1,
      msg: /unknown key `reson`/,
    },
    {
      name: 'typo after @root',
      src: '{{#each labels}}{{@root.stak}}{{/each}}',
      line: 1,
      msg: /unknown key `@root.stak`/,
    },
    {
      name: 'typo through ../',
      src: '{{#each labels}}{{../stak}}{{/each}}',
      line: 1,
      msg: /unknown key `..\/stak`/,
    },
    {
      name: 'property of a single value',
      src: '{{summary.length}}',
      line: 1,
      msg: /`summary` is a single value/,
    },
    { name: 'unknown helper', src: '{{shout summary}}', line: 1, msg: /unknown helper `shout`/ },
    {
      name: 'log helper (writes to the console) is not available',
      src: '{{log summary}}',
      line: 1,
      msg: /unknown helper `log`/,
    },
    { name: 'partial', src: '{{> header}}', line: 1, msg: /partials/ },
    { name: 'helper without arguments', src: '{{upper}}', line: 1, msg: /needs arguments/ },
    { name: 'syntax error', src: 'x\n{{#if commit}}', line: 2, msg: /Parse error on line 2/ },
    { name: 'unknown data variable', src: '{{@foo}}', line: 1, msg: /unknown data variable/ },
  ])('$name → error with line', ({ src, line, msg }) => {
    const r = failure({ message: src });
    expect(r.template).toBe('message');
    expect(r.line).toBe(line);
    expect(r.message).toMatch(msg);
  });

  it('strict mode inside #with: a map key missing from the sample events is refused', () => {
    expect(failure({ message: '{{#with metadata}}{{stack}}{{/with}}' }).message).toMatch(
      /"stack" not defined in metadata/,
    );
  });

  it('a template that fails when test-rendered is refused', () => {
    // Passes the static check (metadata is a map) but fails on the sample event.
    const r = failure({ pullRequestComment: '{{metadata.nothere}}' });
    expect(r.template).toBe('pullRequestComment');
    expect(r.message).toMatch(/"nothere" not defined in metadata/);
    expect(r.line).toBe(1);
  });

  it('unknown, duplicate and empty keys are refused', () => {
    expect(failure({ mesage: 'x' })).toMatchObject({ template: 'mesage', line: null });
    expect(failure({ mesage: 'x' }).message).toMatch(/unknown template key 'mesage'/);
    expect(failure({ message: 'a', 'message.hbs': 'b' }).message).toMatch(/given twice/);
    expect(failure({ commitStatusDescription: '  ' }).message).toMatch(/empty/);
  });

  it("errors in the Provider's context template say so", () => {
    const r = failure({}, { commitStatusContext: 'pko/{{clustername}}' });
    expect(r.template).toBe('commitStatusContext');
    expect(r.message).toMatch(
      /^Provider spec.commitStatus.context: unknown key `clustername` \(did you mean `clusterName`\?\)/,
    );
  });

  it('a context template that renders empty is refused', () => {
    expect(failure({ commitStatusContext: '{{#if false}}x{{/if}}' }).message).toMatch(
      /empty commit status context/,
    );
  });

  it('each, with, lookup, block params and data variables work', () => {
    expect(render('{{#each labels}}{{@key}}={{this}};{{/each}}')).toBe('team=a;');
    expect(render('{{#each labels as |v k|}}{{k}}:{{v}}{{/each}}')).toBe('team:a');
    expect(render('{{#with metadata}}{{lookup this "stack"}}{{/with}}')).toBe('acme/app/dev');
    expect(render('{{lookup metadata "stack"}}|{{lookup metadata "absent"}}|')).toBe('acme/app/dev||');
    expect(render('{{#eq phase "failed"}}F{{else}}not{{/eq}}')).toBe('F');
    expect(render('{{#if (eq reason "UpdateFailed")}}yes{{/if}}')).toBe('yes');
  });

  it('output is not HTML-escaped', () => {
    expect(render('{{default "<b>&\\"=`" stackName}}')).toBe('<b>&"=`');
  });
});

describe('prototype access', () => {
  it.each([
    '{{constructor.name}}',
    '{{constructor}}',
    '{{__proto__}}',
    '{{toString}}',
    '{{@root.constructor}}',
  ])('%s is an unknown key', (src) => {
    expect(failure({ message: src }).message).toMatch(/unknown key/);
  });

  it.each([
    '{{lookup this "__proto__"}}',
    '{{lookup this "constructor"}}',
    '{{lookup summary "constructor"}}',
    '{{#with metadata}}{{lookup this "constructor"}}{{lookup this "__proto__"}}{{/with}}',
    '{{#each labels}}{{lookup this "constructor"}}{{/each}}',
    '{{lookup metadata "hasOwnProperty"}}',
  ])('%s renders nothing', (src) => {
    expect(render(`[${src}]`)).toBe('[]');
  });

  it('a metadata key named __proto__ is an ordinary key', () => {
    const r = compileTemplates({ message: '{{lookup metadata "__proto__"}}' });
    if (!r.ok) throw new Error(r.message);
    const ev = stackEvent({ metadata: { ['__proto__']: 'plain' } });
    expect(
      renderNotification(r.set, ev, {
        clusterName: 'c',
        providerType: 'generic',
        commentsEnabled: false,
        limits: {},
      }).message,
    ).toBe('plain');
  });

  it('the helpers live on an isolated instance, not the global Handlebars', () => {
    expect(Handlebars.helpers).not.toHaveProperty('truncate');
    expect(Handlebars.helpers).toHaveProperty('log');
  });
});

describe('TemplateSet', () => {
  it('is reusable across events and provider types', () => {
    const r = compileTemplates();
    if (!r.ok) throw new Error(r.message);
    const s: TemplateSet = r.set;
    for (const providerType of ['github', 'gitlab', 'slack', 'generic'] as const) {
      const out = renderNotification(s, stackEvent(), {
        clusterName: 'c',
        providerType,
        commentsEnabled: true,
        limits: limitsFor(providerType),
      });
      expect(out.message.length).toBeGreaterThan(0);
    }
  });
});

describe('blocks on plain values', () => {
  it('a block on a map changes the context like #with (inner keys are not root keys)', () => {
    expect(render('{{#labels}}{{lookup this "team"}}{{/labels}}')).toBe('a');
    expect(failure({ message: '{{#labels}}{{team}}{{/labels}}' }).message).toMatch(
      /"team" not defined in labels/,
    );
  });
});
