import { describe, expect, it } from 'vitest';
import { compileTemplates, renderNotification } from '../../src/template/index.ts';
import { formatDuration } from '../../src/template/helpers.ts';
import { longestBacktickRun, markdownCodeBlock as codeBlock } from '../../src/template/markup.ts';
import { fencesBalanced, stackEvent } from './fixtures.ts';

function render(message: string, ev = stackEvent()): string {
  const r = compileTemplates({ message });
  if (!r.ok) throw new Error(`${r.template}: ${r.message}`);
  return renderNotification(r.set, ev, {
    clusterName: 'c',
    providerType: 'generic',
    commentsEnabled: false,
    limits: {},
  }).message;
}

describe('helpers', () => {
  it('truncate counts code points and ends with …', () => {
    expect(render('{{truncate summary 10}}')).toBe('Update of…');
    expect(render('{{truncate "😀😀😀😀" 3}}')).toBe('😀😀…');
    expect(render('{{truncate "short" 10}}')).toBe('short');
    expect(render('[{{truncate pullRequest 5}}]')).toBe('[]');
  });

  it('codeBlock picks a fence the content cannot close', () => {
    const content = 'a\n```\nb ```` c\n`';
    expect(longestBacktickRun(content)).toBe(4);
    const block = codeBlock(content);
    expect(block.startsWith('`````\n')).toBe(true);
    expect(block.endsWith('\n`````')).toBe(true);
    expect(fencesBalanced(`${block}\nafter`)).toBe(true);
    expect(codeBlock('plain', 'text')).toBe('```text\nplain\n```');
    expect(codeBlock('x', 'bad lang`')).toBe('```\nx\n```');
    expect(render('[{{codeBlock pullRequest}}]')).toBe('[]');
  });

  it('pluralize', () => {
    expect(
      render(
        '{{pluralize 1 "failure" "failures"}} {{pluralize failures "failure" "failures"}} {{pluralize 0 "item"}}',
      ),
    ).toBe('failure failures items');
  });

  it('duration', () => {
    expect(formatDuration(850)).toBe('850ms');
    expect(formatDuration(93_000)).toBe('1m 33s');
    expect(formatDuration(3_723_000)).toBe('1h 2m 3s');
    expect(formatDuration(3_600_000)).toBe('1h');
    expect(formatDuration(-5)).toBe('0ms');
    expect(render('{{duration 93000}}|{{duration pullRequest}}|')).toBe('1m 33s||');
  });

  it('lower, upper, default, shortSha', () => {
    expect(render('{{upper phase}} {{lower kind}}')).toBe('FAILED stack');
    expect(render('{{default pullRequest "none"}} {{default pulumiStack "x"}} {{default "" "empty"}}')).toBe(
      'none acme/app/dev empty',
    );
    expect(render('{{shortSha commit}} {{shortSha commit 10}} [{{shortSha pullRequest}}]')).toBe(
      '1111111 1111111111 []',
    );
  });

  it('eq as subexpression and block', () => {
    expect(render('{{#if (eq failures "2")}}two{{/if}}')).toBe('two');
    expect(render('{{#eq severity "info"}}info{{else}}not info{{/eq}}')).toBe('not info');
  });

  it('a helper given a non-string value it cannot use fails the compile (test-render)', () => {
    const r = compileTemplates({ message: '{{upper labels}}' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(/expected a string/);
    const n = compileTemplates({ message: '{{truncate summary "many"}}' });
    expect(n.ok).toBe(false);
    if (!n.ok) expect(n.message).toMatch(/expected a number/);
  });
});
