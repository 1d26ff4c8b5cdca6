/**
 * Escaping by target (src/template/markup.ts): a table of hostile strings written through every
 * target's markup must show literally and never mention, link, ping or format. Markdown output is
 * checked with a real CommonMark + GFM renderer (markdown-it, the renderer of Azure DevOps), with
 * HTML and linkify on; Slack output against Slack's documented rules (no Slack renderer exists
 * outside Slack). Case N01 is described in docs/cases.md.
 */
import MarkdownIt from 'markdown-it';
import { describe, expect, it } from 'vitest';
import { PROVIDER_TYPES, type ProviderType } from '../../src/api/v1alpha1.ts';
import { hasNotifier, limitsFor } from '../../src/provider-types.ts';
import { compileTemplates, renderNotification, type TemplateSet } from '../../src/template/index.ts';
import {
  discord,
  googlechat,
  markdown,
  markupFor,
  msteams,
  plain,
  PROVIDER_MARKUP,
  sanitize,
  slack,
  ZWSP,
  type Markup,
} from '../../src/template/markup.ts';
import { stackEvent } from './fixtures.ts';

const ESC = '\u001b';

/** Hostile values: what Pulumi output, names and metadata may carry. */
const HOSTILE: readonly [string, string][] = [
  ['Slack broadcast', '<!channel> please look'],
  ['Slack here', '<!here|here>'],
  ['bare @here', '@here and @channel'],
  ['user mention', 'ping @octocat now'],
  ['team mention', 'cc @org/team'],
  ['GitLab @all', '@all'],
  ['issue reference', 'fixes #12'],
  ['merge request / PR reference', 'see !3 and ~label and %milestone and $9 and &7 and ^alert#1'],
  ['Slack user ref', '<@U123> and <#C123|general> and <!subteam^S1>'],
  ['javascript link', '[x](javascript:alert(1))'],
  ['image', '![x](https://evil.example/a.png)'],
  ['HTML script', '<script>alert(1)</script>'],
  ['HTML img', '<img src=x onerror=alert(1)>'],
  ['HTML details', '</details><details open>'],
  ['entity', '&lt;b&gt; and &amp; and &#64;x'],
  ['backticks', '``` breakout ``` and `code` and ````'],
  ['emphasis', '*bold* _it_ ~strike~ ~~gone~~ **strong**'],
  ['intra-word', 'my_stack_dev and a*b*c'],
  ['quote', '> quoted\n>> nested'],
  ['heading', '# Heading\n## two'],
  ['lists', '- item\n+ item\n* item\n1. one\n2) two'],
  ['setext', 'Title\n===\nSub\n---'],
  ['table', '| a | b |\n|---|---|\n| c | d |'],
  ['math', '$x^2$ and $$y$$'],
  ['GitLab diff', '{+ added +} [- removed -]'],
  ['bare URL', 'see https://evil.example/x for details'],
  ['www autolink', 'visit www.evil.example now'],
  ['email', 'mail root@evil.example'],
  ['slack link', '<https://evil.example|click here>'],
  ['ANSI colours', `${ESC}[31merror${ESC}[0m: ${ESC}]8;;https://evil.example${ESC}\\link${ESC}]8;;${ESC}\\`],
  ['NUL and controls', 'a\u0000b\u0007c\u0008d'],
  ['RTL override', 'access \u202Eevil\u202C granted \u2066x\u2069 \u200F'],
  ['backslash', '\\*not bold\\* and \\'],
  ['emoji shortcode', ':white_check_mark: done'],
];

/** Text of markdown-it's HTML: tags removed, entities decoded. */
function textOf(html: string): string {
  return html
    .replace(/<[^>]*>/g, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&amp;/g, '&');
}

const md = new MarkdownIt({ html: true, linkify: true }).enable(['table', 'strikethrough']);

/** Collapses whitespace (line breaks and paragraph splits are layout, not content). */
const squash = (s: string): string => s.replace(/\s+/g, ' ').trim();

/** Sigil directly followed by a name or number: what forges turn into mentions and references. */
const REFERENCE = /[@#!~%$&^][\p{L}\p{N}_]/u;

function checkMarkdown(input: string, out: string): void {
  const html = md.render(out);
  // Nothing but paragraphs and line breaks: no links, images, emphasis, code, HTML, blocks.
  const tags = [...html.matchAll(/<\/?([a-z0-9]+)/gi)].map((m) => (m[1] ?? '').toLowerCase());
  expect(
    tags.filter((t) => t !== 'p' && t !== 'br'),
    html,
  ).toEqual([]);
  const text = textOf(html);
  expect(squash(text.replaceAll(ZWSP, '')), html).toBe(squash(sanitize(input)));
  expect(text).not.toMatch(REFERENCE);
  expect(text).not.toMatch(/:\/\/|www\./);
}

const SLACK_LITERAL = /<!date\^00000000\^\{_\}\|([*_~`])>/g;

/** Slack mrkdwn rules ("Formatting text for app surfaces"; jsx-slack's escaping notes). */
function checkSlack(input: string, out: string): void {
  const plainText = out.replace(SLACK_LITERAL, '\u0001');
  expect(plainText, 'no control sequence but our literals').not.toMatch(/[<>]/);
  expect(plainText, 'every & starts an entity').not.toMatch(/&(?!amp;|lt;|gt;)/);
  expect(plainText, 'no code').not.toContain('`');
  expect(plainText, 'no formatting at a word boundary').not.toMatch(
    /(^|[^\p{L}\p{N}])[*_~]|[*_~]($|[^\p{L}\p{N}])/mu,
  );
  expect(plainText, 'no quote').not.toMatch(/^&gt;/m);
  expect(plainText).not.toMatch(/[@#][\p{L}\p{N}_]/u);
  expect(plainText).not.toMatch(/:\/\//);
  const decoded = out
    .replace(SLACK_LITERAL, '$1')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replaceAll(ZWSP, '')
    .replaceAll('\u00ad', '');
  expect(decoded, 'shows the characters literally').toBe(sanitize(input));
}

function checkPlain(input: string, out: string): void {
  expect(out).toBe(sanitize(input));
  // eslint-disable-next-line no-control-regex -- asserting control characters are gone
  expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f]/);
}

/**
 * Teams Adaptive Card TextBlock Markdown: checked with markdown-it (CommonMark, as the Adaptive
 * Cards JavaScript renderer's Markdown processing), each line as the msteams notifier sends it
 * (lines joined by blank lines: "use \\n\\n for a line break", Teams "Format cards in Teams").
 */
function checkTeams(input: string, out: string): void {
  const html = md.render(out.split('\n').join('\n\n'));
  const tags = [...html.matchAll(/<\/?([a-z0-9]+)/gi)].map((m) => (m[1] ?? '').toLowerCase());
  expect(
    tags.filter((t) => t !== 'p' && t !== 'br'),
    html,
  ).toEqual([]);
  const text = textOf(html);
  expect(squash(text.replaceAll(ZWSP, '')), html).toBe(squash(sanitize(input)));
  expect(text).not.toMatch(/@[\p{L}\p{N}_]/u);
  expect(text).not.toMatch(/:\/\/|www\./);
}

const DISCORD_SYNTAX = new Set(['\\', '*', '_', '~', '`', '|', '>', '<', '[', ']', '(', ')', '#', ':']);

/** Discord Markdown ("Markdown Text 101"): every syntax character escaped with a backslash, nothing mentions or links. */
function checkDiscord(input: string, out: string): void {
  const chars = Array.from(out);
  let decoded = '';
  let lineStart = true;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i] ?? '';
    if (c === '\\') {
      decoded += chars[++i] ?? '';
      lineStart = false;
      continue;
    }
    expect(DISCORD_SYNTAX.has(c), `unescaped ${c} in ${out}`).toBe(false);
    if (lineStart) expect(c, `list marker at a line start in ${out}`).not.toMatch(/^[-+]$/);
    lineStart = c === '\n';
    decoded += c;
  }
  expect(decoded).not.toMatch(/@[\p{L}\p{N}_]/u);
  expect(decoded).not.toMatch(/:\/\/|www\./);
  expect(decoded.replaceAll(ZWSP, ''), 'shows the characters literally').toBe(sanitize(input));
}

/** Google Chat card text (an HTML subset): no tag, every & an entity, nothing links or mentions. */
function checkGoogleChat(input: string, out: string): void {
  expect(out).not.toMatch(/[<>"]/);
  expect(out, 'every & starts an entity').not.toMatch(/&(?!amp;|lt;|gt;|quot;)/);
  const decoded = out
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');
  expect(decoded).not.toMatch(/@[\p{L}\p{N}_]/u);
  expect(decoded).not.toMatch(/:\/\/|www\./);
  expect(decoded.replaceAll(ZWSP, ''), 'shows the characters literally').toBe(sanitize(input));
}

const CHECKS: [Markup, (input: string, out: string) => void][] = [
  [markdown, checkMarkdown],
  [slack, checkSlack],
  [plain, checkPlain],
  [msteams, checkTeams],
  [discord, checkDiscord],
  [googlechat, checkGoogleChat],
];

describe('hostile-string table per markup', () => {
  for (const [markup, check] of CHECKS) {
    describe(markup.name, () => {
      it.each(HOSTILE)('%s', (_name, input) => {
        check(input, markup.text(input));
      });
    });
  }

  it('sanitize removes escape sequences, NUL, controls and directional overrides, keeps TAB and LF', () => {
    expect(sanitize(`${ESC}[31ma\u0000\tb\r\nc\u202Ed\u2066e`)).toBe('a\tb\ncde');
  });

  it('a value that is one URL stays a link whose target is what is shown', () => {
    const url = 'https://app.pulumi.com/acme/app/dev/updates/7?x=1&y=(2)';
    const out = markdown.text(url);
    expect(out).toBe('https://app.pulumi.com/acme/app/dev/updates/7?x=1&amp;y=%282%29');
    const html = md.render(`[View the update](${out}) and ${out}`);
    expect(html).toContain('href="https://app.pulumi.com/acme/app/dev/updates/7?x=1&amp;y=%282%29"');
    expect(slack.text(url)).toBe('https://app.pulumi.com/acme/app/dev/updates/7?x=1&amp;y=%282%29');
    // Not http(s): text, never a link.
    expect(md.render(markdown.text('javascript:alert(1)'))).not.toContain('<a ');
  });

  it('Markdown code spans and blocks: the content cannot close them, and nothing inside is markup', () => {
    for (const [, input] of HOSTILE) {
      const span = md.render(`x ${markdown.code(input)} y`);
      expect(span.match(/<code>/g)?.length ?? 0).toBe(1);
      expect([...span.matchAll(/<([a-z]+)/g)].map((m) => m[1])).toEqual(['p', 'code']);
      const block = md.render(`${markdown.codeBlock(input, '')}\n\nafter`);
      expect(block).toMatch(/^<pre><code>[\s\S]*<\/code><\/pre>\n<p>after<\/p>\n$/);
    }
  });

  it('Markdown code spans stay whole inside a table cell', () => {
    const html = md.render(`| a | b |\n|---|---|\n| ${markdown.code('x|[y](https://evil.example)|')} | z |`);
    expect(html).not.toContain('<a ');
    expect(html.match(/<td>/g)?.length).toBe(2);
  });

  it('Slack code blocks cannot be closed by the content and keep control sequences escaped', () => {
    const block = slack.codeBlock('a ``` b\n<!channel>', '');
    expect(block.startsWith('```\n')).toBe(true);
    expect(block.endsWith('\n```')).toBe(true);
    expect(block.slice(3, -3)).not.toContain('```');
    expect(block).toContain('&lt;!channel&gt;');
    expect(slack.code('a`b')).not.toContain('`a');
  });
});

describe('the markup table', () => {
  it('every provider type with a notifier has its markup', () => {
    for (const type of PROVIDER_TYPES) {
      if (hasNotifier(type)) expect(PROVIDER_MARKUP[type], type).toBeDefined();
    }
  });

  it('slack messages are Slack mrkdwn, forge comments Markdown, webhooks plain', () => {
    expect(markupFor('slack').message).toBe(slack);
    expect(markupFor('generic').message).toBe(plain);
    expect(markupFor('msteams').message).toBe(msteams);
    expect(markupFor('discord').message).toBe(discord);
    expect(markupFor('googlechat').message).toBe(googlechat);
    for (const type of ['github', 'gitlab', 'gitea', 'bitbucket', 'bitbucketserver', 'azuredevops'] as const)
      expect(markupFor(type).comment).toBe(markdown);
  });
});

// ---------------------------------------------------------------------------------------------
// Through the templates: every value of the context is escaped, template markup stays.

function set(overrides?: Record<string, string>): TemplateSet {
  const r = compileTemplates(overrides);
  if (!r.ok) throw new Error(`${r.template}: ${r.message}`);
  return r.set;
}

const opts = (providerType: ProviderType) => ({
  clusterName: 'prod',
  providerType,
  commentsEnabled: true,
  limits: limitsFor(providerType),
});

describe('rendered templates escape every outside value', () => {
  const hostile = '<!channel> @here #12 [x](javascript:alert(1)) <script>x</script> *b* `c`';
  const ev = stackEvent({
    message: `Update of stack ${hostile} failed:\n${hostile}\nerror: ${hostile}`,
    labels: { team: 'a' },
    metadata: { ...stackEvent().metadata, stack: hostile, branch: hostile, custom: hostile },
  });

  it('slack: the built-in message', () => {
    const m = renderNotification(set(), ev, opts('slack')).message;
    expect(m).not.toContain('<!channel>');
    expect(m).not.toContain('<script>');
    expect(m).toContain('&lt;!channel&gt;');
    // Outside the output's code block (where Slack formats and links nothing) no bare mention.
    const outside = m.replace(/\n```\n[\s\S]*\n```$/, '');
    expect(outside).not.toMatch(/[@#][\p{L}\p{N}]/u);
    expect(outside.replace(SLACK_LITERAL, '')).not.toMatch(/[*`]/);
  });

  it('slack: a custom template keeps its own markup, values are escaped, {{{ }}} is raw on purpose', () => {
    const s = set({ message: '*{{summary}}* <{{permalink}}|details> {{{lookup metadata "custom"}}}' });
    const m = renderNotification(s, ev, opts('slack')).message;
    expect(m.startsWith('*Update of stack &lt;!channel&gt;')).toBe(true);
    expect(m).toContain('* <https://app.pulumi.com/acme/app/dev/updates/7|details> ');
    expect(m.endsWith(hostile)).toBe(true);
  });

  it.each(['github', 'gitlab', 'gitea', 'bitbucket', 'bitbucketserver', 'azuredevops'] as const)(
    '%s: the built-in comment links only the update and mentions nobody',
    (type) => {
      const body = renderNotification(set(), ev, opts(type)).comment?.body ?? '';
      const html = md.render(body);
      const links = [...html.matchAll(/<a href="([^"]*)"/g)].map((m) => m[1]);
      expect(links).toEqual(['https://app.pulumi.com/acme/app/dev/updates/7']);
      expect(html).not.toContain('<script>');
      expect(html).not.toMatch(/<(em|img|blockquote|h[1245])\b/);
      // The template's own markup: one heading, five bold labels, one details block.
      expect(html.match(/<h3>/g)).toHaveLength(1);
      expect(html.match(/<strong>/g)).toHaveLength(5);
      expect(html.match(/<details>/g)).toHaveLength(1);
      // Outside code, no sigil touches a name: nothing is mentioned or referenced.
      const outsideCode = textOf(html.replace(/<code>[\s\S]*?<\/code>/g, ''));
      expect(outsideCode).not.toMatch(REFERENCE);
    },
  );

  it('status descriptions and contexts are plain: no control or directional characters', () => {
    const bidi = stackEvent({
      message: `Update of stack x\u202Eevil failed:\n${ESC}[31merror: a\u0000b`,
      involvedObject: { ...stackEvent().involvedObject },
    });
    const cs = renderNotification(
      set({ commitStatusContext: 'pko/{{lookup metadata "custom"}}' }),
      {
        ...bidi,
        metadata: { ...bidi.metadata, custom: 'a\u202Eb\u0000c' },
      },
      opts('github'),
    ).commitStatus;
    expect(cs?.description).toBe('Update of stack xevil failed: error: ab');
    expect(cs?.context).toBe('pko/abc');
  });
});

describe('N01: untrusted text rendered into Slack mrkdwn', () => {
  it("an error 'value <nil> for a && b' and a line '<!channel> please look' show literally, nothing pings", () => {
    const ev = stackEvent({
      message: 'Update of stack acme/app/dev failed:\nvalue <nil> for a && b\n<!channel> please look',
    });
    const m = renderNotification(set(), ev, opts('slack')).message;
    expect(m).toContain('value &lt;nil&gt; for a &amp;&amp; b\n&lt;!channel&gt; please look');
    expect(m).not.toMatch(/<!channel>|<nil>|&&/);
    // Template markup itself still works: the output is in a code block.
    expect(m).toMatch(/\n```\nvalue &lt;nil&gt;[\s\S]*\n```$/);
  });
});
