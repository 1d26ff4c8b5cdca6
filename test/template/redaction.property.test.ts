/**
 * Secrets never posted (issue 19; docs/previews.md, "Secrets never posted"), as a property: for
 * random Secret values placed anywhere a change set or a failed run's message holds text — in
 * property lines, names, types, URNs, error lines, the stack name, the source's note — raw, in
 * base64 (padded or not, standard or URL-safe), URL-encoded (upper- or lowercase hex), form-encoded,
 * inside `Basic base64(user:VALUE)`, as a URL's userinfo or JSON-escaped, across the lines of a
 * multi-line value; values the run itself marks secret (`{"Value": v, "Secret": true}` in a log
 * line of any logger, issue 36 R21/N21) in all those forms, as `[secret]`; and in a recorded
 * agent log cut by the parser's line cap in the middle of a value, after the controller's
 * redaction (src/enrich/secrets.ts) no value appears in anything any provider type receives:
 * the comment, the status description, context and name, the chat message, and the JSON bodies of
 * the webhook (`generic`), Discord, Google Chat and Teams — neither as sent nor once the markup's
 * escapes are undone.
 *
 * The documented minimum: values shorter than 4 characters are not redacted
 * (src/credential/redact.ts), nor lines shorter than 8 characters of a multi-line value, so the
 * generators make values of 4 characters or more and multi-line values of lines of 8 or more.
 * Values that are part of the templates' own text (`Stack`, `succeeded`) or of `[redacted]` itself
 * cannot be told from it and are skipped. Fixed seed; FUZZ_RUNS and FUZZ_SEED as in
 * test/fuzz.test.ts.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import type { NotificationEvent } from '../../src/api/event.ts';
import { PROVIDER_TYPES, isGitProviderType, type ProviderType } from '../../src/api/v1alpha1.ts';
import { parseWorkspaceLog } from '../../src/changes/parse.ts';
import type { ChangeSet } from '../../src/changes/types.ts';
import { redactChangeSet, redactText, SecretMarks, secretRedactor } from '../../src/enrich/secrets.ts';
import { discordPayload } from '../../src/notifier/discord.ts';
import { genericPayload } from '../../src/notifier/generic.ts';
import { googlechatPayload } from '../../src/notifier/googlechat.ts';
import { teamsPayload } from '../../src/notifier/msteams.ts';
import { limitsFor } from '../../src/provider-types.ts';
import {
  compileTemplates,
  renderNotification,
  sampleChangeSet,
  TemplateBudgetError,
  type TemplateSet,
} from '../../src/template/index.ts';
import { stackEvent } from './fixtures.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 60);
const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 19;

function builtins(): TemplateSet {
  const r = compileTemplates();
  if (!r.ok) throw new Error(r.message);
  return r.set;
}
const set = builtins();

/** Characters of values: letters, digits, Markdown/HTML/JSON/URL specials, non-ASCII. No `[`/`]` (the placeholder's own). */
const CHARS = [
  ...'abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ0123456789',
  ...'"\'\\/<>&*_~`|#@:;.,+-=%$!?(){} ',
  'é',
  'ß',
  '😀',
  '\t',
];
const char = fc.constantFrom(...CHARS);
const single = fc
  .array(char, { minLength: 4, maxLength: 40 })
  .map((a) => a.join(''))
  .filter((v) => v.trim().length >= 4);
const line8 = fc
  .array(fc.constantFrom(...CHARS.filter((c) => c !== '\t' && c !== ' ')), { minLength: 8, maxLength: 30 })
  .map((a) => a.join(''));
const multi = fc.array(line8, { minLength: 2, maxLength: 4 }).map((ls) => ls.join('\n'));
const secretValue = fc.oneof({ weight: 4, arbitrary: single }, { weight: 1, arbitrary: multi });

/** `%xx` escapes with lowercase hex. */
const lowerHex = (s: string): string => s.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());

/** `v` as a URL's password holds it (WHATWG userinfo percent-encoding). */
function userinfo(v: string): string {
  const u = new URL('https://bot@db.example/');
  u.password = v;
  return u.password;
}

/**
 * The forms a value is redacted in (src/enrich/secrets.ts `secretRedactor`, docs/previews.md
 * "Secrets never posted"): verbatim, base64 padded and unpadded, URL-safe base64 (both),
 * `encodeURIComponent` and form-encoding (`+` for space) with upper- and lowercase hex, inside
 * `Basic base64(user:VALUE)`, as a URL's userinfo, JSON-escaped.
 */
function forms(v: string): string[] {
  const json = JSON.stringify(v).slice(1, -1);
  const b64 = Buffer.from(v, 'utf8').toString('base64');
  const form = new URLSearchParams({ q: v }).toString().slice(2);
  const out = [
    v,
    b64,
    encodeURIComponent(v),
    json,
    json.replaceAll('/', '\\/'),
    b64.replace(/=+$/, ''),
    Buffer.from(v, 'utf8').toString('base64url'),
    b64.replaceAll('+', '-').replaceAll('/', '_'),
    lowerHex(encodeURIComponent(v)),
    form,
    lowerHex(form),
    Buffer.from(`deploy-bot:${v}`, 'utf8').toString('base64'),
    userinfo(v),
  ];
  if (v.includes('\n')) for (const l of v.split(/\r?\n/)) if (l.trim().length >= 8) out.push(l.trim());
  return [...new Set(out)].filter((f) => f.length >= 4);
}

/** `text` with the markup's escapes undone: character references, backslash escapes, zero-width breaks. */
function unescaped(text: string): string {
  return text
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&#x([0-9a-f]+);/gi, (_, n: string) => String.fromCodePoint(parseInt(n, 16)))
    .replace(
      /&(lt|gt|quot|apos|amp);/g,
      (_, e: string) => ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' })[e] ?? '',
    )
    .replace(/\u200b|\u200c|\u200d|\u2060|\ufeff/g, '')
    .replace(/\\([!-/:-@[-`{-~])/g, '$1');
}

/** Where a form is put: a field of the change set (or the message) and how it is surrounded. */
const placement = fc.record({
  field: fc.constantFrom('diff', 'name', 'type', 'urn', 'error', 'stack', 'note', 'message'),
  form: fc.nat(20),
  before: fc.constantFrom('', ' ', '"', 'password=', 'x'),
  after: fc.constantFrom('', '"', ' => "x"', '\n', 'y'),
});

/** Puts `text` into `cs` (or returns it as message text) at `p.field`. */
function place(cs: ChangeSet, field: string, text: string): string | undefined {
  const r = cs.resources[0];
  if (r === undefined) throw new Error('no resource');
  if (field === 'diff') r.diff.push(`~ password: "${text}" => "x"`);
  else if (field === 'name') r.name += text;
  else if (field === 'type') r.type += text;
  else if (field === 'urn') r.urn += text;
  else if (field === 'error') cs.errors.push(`error: ${text}`);
  else if (field === 'stack' && cs.run) cs.run.stack += text;
  else if (field === 'note') cs.note = `Pulumi Cloud: ${text}`;
  else return text;
  return undefined;
}

/**
 * Everything providers of `type` receive for `ev`, as sent. A render over its time budget (a
 * machine under load) sends nothing: the delivery fails (src/template/render.ts).
 */
function delivered(ev: NotificationEvent, type: ProviderType): string[] {
  let r;
  try {
    r = renderNotification(set, ev, {
      clusterName: 'prod',
      providerType: type,
      commentsEnabled: isGitProviderType(type),
      limits: limitsFor(type),
    });
  } catch (err) {
    if (err instanceof TemplateBudgetError && err.kind === 'time') return [];
    throw err;
  }
  const out = [r.message, genericPayload(ev, r)];
  if (type === 'discord') out.push(JSON.stringify(discordPayload(ev, r.message)));
  if (type === 'googlechat') out.push(googlechatPayload(ev, r.message));
  if (type === 'msteams') out.push(teamsPayload(ev, r.message));
  if (r.commitStatus) out.push(r.commitStatus.description, r.commitStatus.context, r.commitStatus.name ?? '');
  if (r.comment) out.push(r.comment.body);
  return out;
}

/** What no value may be part of: the templates' and fixtures' own text, for every type. */
const BASELINE = (() => {
  const ev = stackEvent({
    reason: 'PreviewSucceeded',
    severity: 'info',
    changes: { set: sampleChangeSet(4) },
  });
  const all = PROVIDER_TYPES.flatMap((t) => delivered(ev, t));
  return [...all, ...all.map(unescaped), '[redacted]', '[secret]'].join('\n');
})();

const RECORDING = readFileSync(new URL('../fixtures/agent-logs/02-update.log', import.meta.url), 'utf8');
const PREVIEW = RECORDING.slice(0, RECORDING.indexOf('\n', RECORDING.indexOf('\tpreview completed')) + 1);

function assertNoLeak(values: string[], ev: NotificationEvent): void {
  for (const type of PROVIDER_TYPES) {
    for (const text of delivered(ev, type)) {
      const plain = unescaped(text);
      for (const v of values)
        for (const f of forms(v)) {
          if (text.includes(f) || plain.includes(f))
            throw new Error(
              `${type}: the value ${JSON.stringify(v)} appears as ${JSON.stringify(f)} in:\n${text}`,
            );
        }
    }
  }
}

describe('no Secret value in anything posted, for every built-in template and provider type', () => {
  it('values placed anywhere in a change set or message, in every form', () => {
    fc.assert(
      fc.property(
        fc.array(secretValue, { minLength: 1, maxLength: 3 }),
        fc.array(placement, { minLength: 1, maxLength: 6 }),
        (values, places) => {
          fc.pre(values.every((v) => forms(v).every((f) => !BASELINE.includes(f))));
          const cs = structuredClone(sampleChangeSet(3));
          let message = 'Update of stack acme/app/dev failed:\n';
          places.forEach((p, i) => {
            const v = values[i % values.length] ?? '';
            const f = forms(v)[p.form % forms(v).length] ?? v;
            const m = place(cs, p.field, `${p.before}${f}${p.after}`);
            if (m !== undefined) message += `${m}\n`;
          });
          const red = secretRedactor(values);
          if (typeof red === 'string') throw new Error(red);
          const ev = stackEvent({
            message: redactText(message, red),
            changes: { set: redactChangeSet(cs, red) },
          });
          assertNoLeak(values, ev);
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
  }, 600_000);

  it('values in a recorded agent log, cut by the parser at any line length, across its lines', () => {
    fc.assert(
      fc.property(
        secretValue,
        fc.integer({ min: 12, max: 120 }),
        fc.constantFrom('json', 'raw', 'lines'),
        (v, maxDiffLineChars, how) => {
          fc.pre(forms(v).every((f) => !BASELINE.includes(f)));
          // The CLI prints a string property JSON-quoted; a provider may print it raw, and a
          // multi-line value may come as one log line per line of the value.
          const lines = PREVIEW.split('\n');
          const at = lines.findIndex((l) => l.includes('"hello-again"'));
          const prefix = (lines[at] ?? '').split('\t').slice(0, 3).join('\t');
          const [first = '', ...rest] =
            how === 'lines'
              ? v.split('\n')
              : [how === 'json' ? JSON.stringify(v).slice(1, -1) : v.replace(/\n/g, ' ')];
          lines[at] = (lines[at] ?? '').replace(
            '"hello-again"',
            `"prefix-${first}${rest.length === 0 ? '-suffix"' : ''}`,
          );
          lines.splice(
            at + 1,
            0,
            ...rest.map((l, i) => `${prefix}\t        ${l}${i === rest.length - 1 ? '-suffix"' : ''}`),
          );
          const cs = parseWorkspaceLog(lines.join('\n'), { maxDiffLineChars });
          const red = secretRedactor([v]);
          if (typeof red === 'string') throw new Error(red);
          const ev = stackEvent({
            reason: 'PreviewSucceeded',
            severity: 'info',
            changes: { set: redactChangeSet(cs, red) },
          });
          assertNoLeak([v], ev);
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
  }, 600_000);
  it('values the run marks "Secret":true in any log line, in every form anywhere, go as [secret]', () => {
    /** How a logger may write the mark: zap's console summary (PKO 2.0/2.1), a JSON logger, JSON quoted in a field. */
    const shape = fc.constantFrom('zap', 'json', 'quoted', 'lower');
    fc.assert(
      fc.property(
        fc.array(secretValue, { minLength: 1, maxLength: 3 }),
        // A mark is program output: it never hides a resource's identity (type, name, URN, stack
        // name; src/enrich/secrets.ts `redactChangeSet`), so marked values go where values are shown.
        fc.array(
          placement.filter((p) => ['diff', 'error', 'note', 'message'].includes(p.field)),
          { minLength: 1, maxLength: 6 },
        ),
        shape,
        (values, places, how) => {
          fc.pre(values.every((v) => forms(v).every((f) => !BASELINE.includes(f))));
          const stamp = '2026-12-01T15:24:33.115Z';
          const config = Object.fromEntries(
            values.map((v, i) => [
              `proj:secret${String(i)}`,
              how === 'lower' ? { value: v, secret: true } : { Value: v, Secret: true },
            ]),
          );
          const line =
            how === 'zap' || how === 'lower'
              ? `${stamp}\tINFO\tserver\tup completed\t{"summary": ${JSON.stringify({ kind: 'update', config, result: 'succeeded' })}}`
              : how === 'json'
                ? JSON.stringify({ level: 'info', ts: stamp, msg: 'up completed', summary: { config } })
                : JSON.stringify({ level: 'info', msg: 'config', config: JSON.stringify(config) });
          const marks = new SecretMarks();
          for (const l of [...PREVIEW.split('\n'), line]) marks.take(l);
          const cs = structuredClone(sampleChangeSet(3));
          let message = 'Update of stack acme/app/dev failed:\n';
          places.forEach((p, i) => {
            const v = values[i % values.length] ?? '';
            const f = forms(v)[p.form % forms(v).length] ?? v;
            const m = place(cs, p.field, `${p.before}${f}${p.after}`);
            if (m !== undefined) message += `${m}\n`;
          });
          // No Secret the Stack references holds them: only the marks do.
          const red = secretRedactor([], [...marks.values]);
          if (typeof red === 'string') throw new Error(red);
          const none = secretRedactor([]);
          if (typeof none === 'string') throw new Error(none);
          const ev = stackEvent({
            message: redactText(message, red),
            changes: { set: redactChangeSet(cs, red, { work: 0 }, none) },
          });
          assertNoLeak(values, ev);
          if (!`${ev.message}${JSON.stringify(ev.changes)}`.includes('[secret]'))
            throw new Error('no [secret] in the redacted event');
        },
      ),
      { numRuns: RUNS, seed: SEED },
    );
  }, 600_000);

  it('R21: marks after any number of other objects are all taken; a line cut anywhere after a `{` withholds or lost none', () => {
    fc.assert(
      fc.property(
        fc.array(secretValue, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 300 }),
        fc.constantFrom('zap', 'json', 'quoted', 'objects'),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (values, noise, how, at) => {
          const config: Record<string, unknown> = {};
          for (let i = 0; i < noise; i++)
            config[`aws:k${String(i).padStart(3, '0')}`] = { Value: 'plain', Secret: false };
          values.forEach((v, i) => {
            config[`proj:secret${String(i)}`] = { Value: v, Secret: true };
          });
          const line =
            how === 'zap'
              ? `2026-12-01T15:24:33.115Z\tINFO\tserver\tup completed\t${JSON.stringify({ summary: { config } })}`
              : how === 'json'
                ? JSON.stringify({ level: 'info', msg: 'up completed', summary: { config } })
                : how === 'quoted'
                  ? JSON.stringify({ level: 'info', msg: 'config', config: JSON.stringify(config) })
                  : Object.values(config)
                      .map((o) => JSON.stringify(o))
                      .join(' then ');
          const whole = new SecretMarks();
          whole.take(line);
          if (whole.overflow !== undefined || !values.every((v) => v.length < 4 || whole.values.has(v)))
            throw new Error(`not every mark was taken from a line of ${String(noise)} other objects`);
          // The log reader keeps the start of a line longer than it reads: fail closed, or lose none.
          const kept = line.slice(0, Math.floor(at * line.length));
          fc.pre(kept.includes('{'));
          const cut = new SecretMarks();
          cut.take(kept, true);
          if (cut.overflow === undefined && !values.every((v) => v.length < 4 || cut.values.has(v)))
            throw new Error(`a cut line lost a mark without withholding: ${kept.slice(-80)}`);
        },
      ),
      { numRuns: RUNS * 4, seed: SEED },
    );
  }, 600_000);
});
