/**
 * Escaping by target: how a value from outside (Pulumi output, messages, names, labels, metadata)
 * is written into each target's markup so that it shows literally and can never mention, link,
 * ping or format. The renderer applies the target's `Markup` to every `{{value}}` of a template
 * at render time (./escape.ts); the template's own text keeps its markup, and `{{{value}}}`
 * (triple braces) inserts a value raw on purpose (templates/README.md).
 *
 * One table, {@link PROVIDER_MARKUP}, says which markup each provider type's message and (git
 * forges) comment use. A chat type that gets a notifier adds its entry there (a `Markup` in this
 * file or beside it): `test/template/markup.test.ts` refuses a type with a notifier but no entry.
 *
 * Written here rather than taken from a library: no maintained npm package escapes untrusted text
 * for Slack mrkdwn or for the forges' Markdown with their reference syntax (`@user`, `#12`,
 * `!3`, `~label`); the rules below cite what each follows.
 */
import type { ProviderType } from '../api/v1alpha1.ts';
import { stripAnsi } from '../text.ts';

/** How untrusted text is written into one target's markup. */
export interface Markup {
  /** Name used in messages and tests (`slack`, `markdown`, `plain`). */
  readonly name: string;
  /** `s` as literal text where the template put `{{value}}`. */
  text(s: string): string;
  /** `s` as an inline code span (`{{code value}}`); '' for ''. */
  code(s: string): string;
  /** `s` as a code block the content cannot close (`{{codeBlock value}}`); '' for ''. */
  codeBlock(s: string, lang: string): string;
}

/**
 * Text a helper produced in the target's markup (`code`, `codeBlock`): written as is, never
 * escaped again.
 */
export class Marked {
  readonly markup: string;
  constructor(markup: string) {
    this.markup = markup;
  }
  toString(): string {
    return this.markup;
  }
}

// ---------------------------------------------------------------------------------------------
// Shared hygiene

/**
 * Explicit directional formatting characters (Unicode UAX #9: ALM, LRM, RLM, LRE/RLE/PDF/LRO/RLO,
 * LRI/RLI/FSI/PDI): they reorder how surrounding text is displayed ("Trojan Source",
 * CVE-2021-42574), so a value could show something other than what it says. Removed.
 */
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
/** C0/C1 controls except TAB and LF (NUL included); CR is turned into LF first. */
// eslint-disable-next-line no-control-regex -- removing control characters is the point
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * The hygiene every target gets: terminal escape sequences removed, CRLF/CR → LF, other control
 * characters (NUL included) and directional formatting characters removed. TAB and LF stay.
 */
export function sanitize(s: string): string {
  return stripAnsi(s).replace(/\r\n?/g, '\n').replace(CONTROLS, '').replace(BIDI, '');
}

/** ZERO WIDTH SPACE: breaks a reference or mention (`@` + name) without changing what is shown. */
export const ZWSP = '\u200b';

/**
 * A value that is one absolute http(s) URL (a permalink, a repository): kept linkable — what is
 * shown is where it leads — and normalised by the WHATWG URL parser, with the characters that
 * could end a link or start markup percent-encoded. Undefined for anything else.
 */
export function urlValue(s: string): string | undefined {
  if (!/^https?:\/\/[^\s]+$/i.test(s)) return undefined;
  let href: string;
  try {
    href = new URL(s).href;
  } catch {
    return undefined;
  }
  return href.replace(
    /[()[\]{}|\\^`"'<> *]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
}

/** Longest run of consecutive backticks in `s`. */
export function longestBacktickRun(s: string): number {
  // By index, not by `for…of` (a string per character: measured 1.5 % of all bytes allocated
  // per delivered event, docs/benchmarks.md).
  let best = 0;
  for (let i = s.indexOf('`'); i !== -1;) {
    let j = i + 1;
    while (s.charCodeAt(j) === 96) j++;
    if (j - i > best) best = j - i;
    i = s.indexOf('`', j);
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// plain: webhooks, commit status descriptions and contexts

/** No markup: the value as it is, after {@link sanitize} (generic webhooks, status fields). */
export const plain: Markup = {
  name: 'plain',
  text: sanitize,
  code: sanitize,
  codeBlock: (s) => sanitize(s).replace(/\n+$/, ''),
};

// ---------------------------------------------------------------------------------------------
// Slack mrkdwn

/**
 * Slack's control characters, as its "Formatting text" reference asks: `&` → `&amp;`, `<` →
 * `&lt;`, `>` → `&gt;`. Every mention, broadcast (`<!channel>`, `<!here>`), user/channel/group
 * reference (`<@U…>`, `<#C…>`, `<!subteam^…>`) and masked link (`<url|label>`) needs `<`, so
 * none survives.
 */
function slackEntities(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * A formatting character shown literally: Slack has no escape for `*`, `_`, `~` and `` ` ``; a
 * date token with an invalid format makes the client show its fallback text as plain text
 * (the technique of jsx-slack's `<Escape>`, docs/about-escape-and-exact-mode.md).
 */
function slackLiteral(c: string): string {
  return `<!date^00000000^{_}|${c}>`;
}

/** Word characters: Slack formats `*x*` only at word boundaries (`a_b_c` stays as it is). */
const WORD = /[\p{L}\p{N}]/u;

/**
 * Slack mrkdwn (`text` of `chat.postMessage` and incoming webhooks):
 * - `&`, `<`, `>` as entities (see {@link slackEntities});
 * - `*`, `_`, `~` next to a word boundary and every `` ` `` as date-fallback literals (see
 *   {@link slackLiteral}): no bold, italics, strike or code;
 * - a `&gt;` starting a line gets a SOFT HYPHEN before it: Slack quotes a line that starts with
 *   `>` even when it is escaped (jsx-slack, same page);
 * - `@` and `#` followed by a word character get a ZERO WIDTH SPACE after them, so `@here`,
 *   `@channel` or `#general` are not linked even where `link_names` or `parse=full` apply
 *   (Slack treats U+200B as a word break: jsx-slack's "exact mode").
 * - `://` gets a ZERO WIDTH SPACE after the colon outside whole-URL values, so a URL inside
 *   output is not turned into a link; a value that is one URL stays linkable ({@link urlValue}).
 */
export const slack: Markup = {
  name: 'slack',
  text(raw) {
    const s = sanitize(raw);
    const url = urlValue(s);
    if (url !== undefined) return slackEntities(url);
    const chars = Array.from(s);
    let out = '';
    for (let i = 0; i < chars.length; i++) {
      const c = chars[i] ?? '';
      const prev = chars[i - 1];
      const next = chars[i + 1];
      if (c === '`') out += slackLiteral(c);
      else if (c === '*' || c === '_' || c === '~') {
        const boundary = prev === undefined || next === undefined || !WORD.test(prev) || !WORD.test(next);
        out += boundary ? slackLiteral(c) : c;
      } else if (c === '>') out += (prev === undefined || prev === '\n' ? '\u00ad' : '') + '&gt;';
      else if (c === '<') out += '&lt;';
      else if (c === '&') out += '&amp;';
      else if ((c === '@' || c === '#') && next !== undefined && /[\p{L}\p{N}_]/u.test(next)) out += c + ZWSP;
      else if (c === ':' && next === '/' && chars[i + 2] === '/') out += `:${ZWSP}`;
      else out += c;
    }
    return out;
  },
  code(raw) {
    const s = sanitize(raw);
    if (s === '') return '';
    // Slack code spans cannot hold a backtick or a line break: such values are written as text.
    if (/[`\n]/.test(s)) return slack.text(s);
    return `\`${slackEntities(s)}\``;
  },
  codeBlock(raw) {
    const s = sanitize(raw).replace(/\n+$/, '');
    if (s === '') return '';
    // Slack has one fence, ```; a run of three backticks inside would close the block early.
    const body = slackEntities(s).replace(/``+/g, (run) => Array.from(run).join(ZWSP));
    return `\`\`\`\n${body}\n\`\`\``;
  },
};

// ---------------------------------------------------------------------------------------------
// Markdown: GitHub, GitLab, Gitea, Bitbucket Cloud and Data Center, Azure DevOps

/**
 * Characters that start Markdown syntax anywhere in a line (CommonMark 0.31 §2.4 and the GFM,
 * GitLab and Python-Markdown extensions: emphasis, code, links and images, HTML and autolinks,
 * entities, tables, strikethrough, math `$…$`, GitLab inline diffs `{+ +}`, `@` of e-mail
 * autolinks). Written as numeric
 * character references, which CommonMark (GitHub, GitLab, Gitea's goldmark, Bitbucket Data
 * Center, Azure DevOps' markdown-it) and Bitbucket Cloud's Python-Markdown all show as the
 * character; a backslash escape would show literally in Python-Markdown for `|`, `<`, `~`, `&`.
 */
const MD_INLINE = new Set([
  '\\',
  '`',
  '*',
  '_',
  '[',
  ']',
  '<',
  '>',
  '&',
  '|',
  '~',
  '$',
  '{',
  '}',
  '!',
  '#',
  '@',
]);
/** Characters that start a block only at the start of a line (lists, headings, setext, breaks). */
const MD_LINE_START = new Set(['-', '+', '=']);
/**
 * Sigils of the forges' references and mentions: GitHub `@user` `@org/team` `#12`; GitLab also
 * `!3` (merge request) `~label` `%milestone` `$snippet` `&epic` `^alert` and `@all`; Gitea `!3`;
 * Azure DevOps `#12` (work item) `!3` (pull request). The forges find these in the rendered
 * text (after entities are decoded), so an escape does not stop them: a ZERO WIDTH SPACE after
 * the sigil does (the approach of Dependabot's and Renovate's pull-request bodies).
 */
const MD_SIGILS = new Set(['@', '#', '!', '~', '%', '$', '&', '^']);

function numericRef(c: string): string {
  return `&#${String(c.codePointAt(0) ?? 0)};`;
}

/**
 * Markdown as the git forges render comments:
 * - the syntax characters of {@link MD_INLINE} anywhere, and `-`, `+`, `=`, and a `.`/`)` after
 *   leading digits at the start of a line, as numeric character references (no emphasis, code,
 *   links, images, HTML, tables, lists or headings);
 * - a ZERO WIDTH SPACE after each sigil of {@link MD_SIGILS} followed by a word character, `"`,
 *   `{`, `<`, `(` or `[` (no mention or reference), and after the colon of `://` and the `www` of
 *   `www.` (no autolink);
 * - a value that is one URL stays linkable ({@link urlValue}), with `&` as `&amp;` so it is
 *   valid both as text and as a link destination (`[text]({{permalink}})`).
 * Line breaks are kept (a soft break inside a paragraph).
 */
export const markdown: Markup = {
  name: 'markdown',
  text(raw) {
    const s = sanitize(raw);
    const url = urlValue(s);
    if (url !== undefined) return url.replace(/&/g, '&amp;');
    return rewriteChars(Array.from(s), (c, i, chars, { atStart, afterDigits }) => {
      const next = chars[i + 1];
      const w = MD_INLINE.has(c) || (atStart && MD_LINE_START.has(c)) || afterDigits ? numericRef(c) : c;
      if (MD_SIGILS.has(c) && next !== undefined && /[\p{L}\p{N}_"{<([]/u.test(next)) return w + ZWSP;
      return breaksLink(chars, i) ? w + ZWSP : w;
    });
  },
  code(raw) {
    // CommonMark code span (§6.1): a backtick string longer than any run inside, padded with a
    // space when the content starts or ends with a backtick. Line breaks become spaces (as a
    // code span shows them). `|` is written `\|`: inside a table cell a bare `|` would end the
    // cell even within a code span (GFM §4.10), and the table removes the backslash.
    const s = sanitize(raw).replace(/\n/g, ' ');
    if (s === '') return '';
    const fence = '`'.repeat(longestBacktickRun(s) + 1);
    const pad = s.startsWith('`') || s.endsWith('`') ? ' ' : '';
    return `${fence}${pad}${s.replace(/\|/g, '\\|')}${pad}${fence}`;
  },
  codeBlock(raw, lang) {
    return markdownCodeBlock(sanitize(raw), lang);
  },
};

/**
 * A Markdown fenced code block around `content` that the content cannot close: the fence is one
 * backtick longer than the longest backtick run inside (at least 3). `lang` must be a bare word.
 * Nothing inside a code block is markup (no mentions, references, links or HTML).
 */
export function markdownCodeBlock(content: string, lang = ''): string {
  if (content === '') return '';
  const fence = '`'.repeat(Math.max(3, longestBacktickRun(content) + 1));
  const info = /^[\w+.-]*$/.test(lang) ? lang : '';
  return `${fence}${info}\n${content.replace(/\n+$/, '')}\n${fence}`;
}

/** Where a character stands for the line-start syntax of Markdown (lists, headings, quotes). */
interface LinePlace {
  /** Nothing but spaces and tabs before it on its line. */
  atStart: boolean;
  /** A `.` or `)` right after the digits its line starts with (an ordered-list marker). */
  afterDigits: boolean;
}

/**
 * `chars` with every character but a line break written as `write` says (given its index, all
 * the characters and its {@link LinePlace}); line breaks are kept as they are.
 */
function rewriteChars(
  chars: readonly string[],
  write: (c: string, i: number, chars: readonly string[], place: LinePlace) => string,
): string {
  let out = '';
  let lineStart = true;
  let leadingDigits = false;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i] ?? '';
    if (c === '\n') {
      out += c;
      lineStart = true;
      leadingDigits = false;
      continue;
    }
    const atStart = lineStart;
    if (lineStart && c !== ' ' && c !== '\t') lineStart = false;
    if (atStart && /[0-9]/.test(c)) leadingDigits = true;
    const afterDigits = leadingDigits && (c === '.' || c === ')');
    if (!/[0-9]/.test(c)) leadingDigits = false;
    out += write(c, i, chars, { atStart, afterDigits });
  }
  return out;
}

/** Whether `chars[i]` starts `://` (a URL scheme separator) or is the last `w` of `www.`. */
function breaksLink(chars: readonly string[], i: number): boolean {
  const c = chars[i] ?? '';
  if (c === ':' && chars[i + 1] === '/' && chars[i + 2] === '/') return true;
  return (
    c.toLowerCase() === 'w' &&
    chars[i + 1] === '.' &&
    chars[i - 1]?.toLowerCase() === 'w' &&
    chars[i - 2]?.toLowerCase() === 'w'
  );
}

// ---------------------------------------------------------------------------------------------
// Chat services other than Slack

/**
 * Backslash-escaped Markdown (CommonMark §2.4: any ASCII punctuation may be escaped), the way
 * Microsoft Teams Adaptive Cards and Discord read it: every character of `inline` anywhere, and
 * `-`, `+`, a `.`/`)` after leading digits at the start of a line (lists); a ZERO WIDTH SPACE after
 * `@` before a word character (no mention, no e-mail autolink) and in `://` / `www.` (no
 * autolink). Line breaks are kept.
 */
function backslashMarkdown(raw: string, inline: ReadonlySet<string>): string {
  return rewriteChars(Array.from(sanitize(raw)), (c, i, chars, { atStart, afterDigits }) => {
    const w = inline.has(c) || (atStart && (c === '-' || c === '+')) || afterDigits ? `\\${c}` : c;
    return breaksMention(chars, i) || breaksLink(chars, i) ? w + ZWSP : w;
  });
}

/** Whether `chars[i]` is an `@` before a word character (a mention, or an e-mail autolink). */
function breaksMention(chars: readonly string[], i: number): boolean {
  const next = chars[i + 1];
  return chars[i] === '@' && next !== undefined && /[\p{L}\p{N}_]/u.test(next);
}

/**
 * Characters Adaptive Card TextBlock Markdown reads as syntax (bold `**`, italic `_`, links
 * `[t](u)`; Teams docs "Format cards in Teams") plus what CommonMark would (code, HTML, headings,
 * quotes, tables, strikethrough): escaped with a backslash. Mentions in cards need `<at>` with
 * `msteams.entities`, which the notifier never sends; `<` is escaped anyway.
 */
const TEAMS_INLINE: ReadonlySet<string> = new Set('\\*_[]()<>`~#|!&=@');

/**
 * Microsoft Teams Adaptive Card TextBlock Markdown (`msteams`): backslash escapes (see
 * {@link backslashMarkdown}); a value that is one URL stays linkable. Adaptive Cards have no code
 * spans or blocks: `code` writes the value as escaped text, `codeBlock` writes a ```` ``` ````
 * fence whose lines are escaped text — the msteams notifier turns each fenced part into a
 * monospace TextBlock (an escaped line can never be a fence: its backticks are escaped).
 */
export const msteams: Markup = {
  name: 'msteams',
  text(raw) {
    const url = urlValue(sanitize(raw));
    return url ?? backslashMarkdown(raw, TEAMS_INLINE);
  },
  code(raw) {
    return backslashMarkdown(raw.replace(/\n/g, ' '), TEAMS_INLINE);
  },
  codeBlock(raw) {
    const s = sanitize(raw).replace(/\n+$/, '');
    if (s === '') return '';
    return `\`\`\`\n${backslashMarkdown(s, TEAMS_INLINE)}\n\`\`\``;
  },
};

/**
 * Characters Discord Markdown reads as syntax (discord.com "Markdown Text 101": `*`, `_`, `~~`,
 * `||` spoilers, `` ` ``, `>` quotes, `#` headings, `-#` subtext, lists, `[t](u)` masked links,
 * `<@id>` / `<#id>` / `<t:…>` / `<:emoji:id>` tags, `<url>`), escaped with a backslash as
 * Discord's client does.
 */
const DISCORD_INLINE: ReadonlySet<string> = new Set('\\*_~`|><[]()#:');

/**
 * Discord Markdown (`discord`): backslash escapes (see {@link backslashMarkdown}), `@everyone`,
 * `@here` and `@name` broken by a ZERO WIDTH SPACE (the notifier also sends `allowed_mentions:
 * {parse: []}`, so nothing pings whatever the text); a value that is one URL stays linkable.
 * Code spans and blocks as in Slack: one fence, backtick runs inside broken by ZERO WIDTH SPACEs.
 */
export const discord: Markup = {
  name: 'discord',
  text(raw) {
    const url = urlValue(sanitize(raw));
    return url ?? backslashMarkdown(raw, DISCORD_INLINE);
  },
  code(raw) {
    const s = sanitize(raw);
    if (s === '') return '';
    if (/[`\n]/.test(s)) return discord.text(s);
    return `\`${s}\``;
  },
  codeBlock(raw) {
    const s = sanitize(raw).replace(/\n+$/, '');
    if (s === '') return '';
    return `\`\`\`\n${s.replace(/``+/g, (run) => Array.from(run).join(ZWSP))}\n\`\`\``;
  },
};

function htmlEntities(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/**
 * Google Chat card text (`googlechat`): the notifier sends the message as a card v2
 * `textParagraph`, whose text is the HTML subset Google Chat documents ("Format text in Google
 * Chat apps": `<b>`, `<i>`, `<u>`, `<s>`, `<font color>`, `<a href>`, `<br>`) — no Markdown, and
 * mentions (`<users/…>`) are not read in cards. Values: `&`, `<`, `>`, `"` as entities; a ZERO
 * WIDTH SPACE in `://` and `www.` (no autolink) and after `@` before a word character; a value
 * that is one URL stays linkable. Code spans and blocks are written as escaped text (cards have
 * no code formatting); the notifier turns line breaks into `<br>`.
 */
export const googlechat: Markup = {
  name: 'googlechat',
  text(raw) {
    const s = sanitize(raw);
    const url = urlValue(s);
    if (url !== undefined) return htmlEntities(url);
    return rewriteChars(Array.from(s), (c, i, chars) => {
      const w = htmlEntities(c);
      return breaksMention(chars, i) || breaksLink(chars, i) ? w + ZWSP : w;
    });
  },
  code(raw) {
    return googlechat.text(raw.replace(/\n/g, ' '));
  },
  codeBlock(raw) {
    return googlechat.text(sanitize(raw).replace(/\n+$/, ''));
  },
};

// ---------------------------------------------------------------------------------------------
// The table

/** Which markup a provider type's rendered texts are written in. */
export interface ProviderMarkup {
  /** The `message` template (chat text, webhook `message`). */
  message: Markup;
  /** The `pullRequestComment` template (git forges). */
  comment?: Markup;
}

/**
 * The markup of every provider type. Commit status descriptions and contexts are `plain` for all
 * forges (none renders markup there). `undefined`: the type has no notifier yet — when it gets
 * one, it gets its entry here.
 */
export const PROVIDER_MARKUP: { readonly [T in ProviderType]: ProviderMarkup | undefined } = {
  generic: { message: plain },
  'generic-hmac': { message: plain },
  slack: { message: slack },
  msteams: { message: msteams },
  discord: { message: discord },
  googlechat: { message: googlechat },
  github: { message: plain, comment: markdown },
  gitlab: { message: plain, comment: markdown },
  gitea: { message: plain, comment: markdown },
  bitbucket: { message: plain, comment: markdown },
  bitbucketserver: { message: plain, comment: markdown },
  azuredevops: { message: plain, comment: markdown },
};

/** The markup of `type`'s message and comment (`plain` where the table has none). */
export function markupFor(type: ProviderType): Required<ProviderMarkup> {
  const m = PROVIDER_MARKUP[type];
  return { message: m?.message ?? plain, comment: m?.comment ?? m?.message ?? plain };
}
