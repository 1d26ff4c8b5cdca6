/**
 * Secrets never posted: the Secrets a Stack references are found, and no value of theirs reaches
 * any rendered output of any built-in template for any provider type, whatever the program
 * printed (raw, base64, JSON-escaped, cut by the parser's line cap).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { NotificationEvent } from '../../src/api/event.ts';
import type { Stack } from '../../src/api/pko.ts';
import { PROVIDER_TYPES, isGitProviderType } from '../../src/api/v1alpha1.ts';
import { parseWorkspaceLog } from '../../src/changes/parse.ts';
import type { ChangeSet } from '../../src/changes/types.ts';
import {
  MAX_REDACTED_VALUES,
  REDACTION_WORK_BUDGET,
  RedactionBudgetExceeded,
  MAX_MARKED_VALUES,
  CUT_LINE_OVERFLOW,
  redactChangeSet,
  redactText,
  SecretMarks,
  secretOutputValues,
  secretRedactor,
  stackSecretRefs,
  type SecretRedactor,
} from '../../src/enrich/secrets.ts';
import { limitsFor } from '../../src/provider-types.ts';
import { compileTemplates, renderNotification } from '../../src/template/index.ts';
import { stackEvent } from '../template/fixtures.ts';

const compiled = compileTemplates();
if (!compiled.ok) throw new Error(compiled.message);
const set = compiled.set;

/** The update preview of the recording (its first run), as text. */
const LOG = readFileSync(new URL('../fixtures/agent-logs/02-update.log', import.meta.url), 'utf8');
const PREVIEW = LOG.slice(0, LOG.indexOf('\n', LOG.indexOf('\tpreview completed')) + 1);

/** What a reader sees: character references decoded, zero-width spaces removed. */
function shown(text: string): string {
  return text
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&#x([0-9a-f]+);/gi, (_, n: string) => String.fromCodePoint(parseInt(n, 16)))
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&amp;', '&')
    .replaceAll('\u200b', '');
}

function everything(ev: NotificationEvent): string[] {
  const out: string[] = [];
  for (const type of PROVIDER_TYPES) {
    const r = renderNotification(set, ev, {
      clusterName: 'prod',
      providerType: type,
      commentsEnabled: isGitProviderType(type),
      limits: limitsFor(type),
    });
    out.push(r.message, r.commitStatus?.description ?? '', r.comment?.body ?? '');
  }
  return out;
}

describe('stackSecretRefs', () => {
  it('finds every place PKO v2 lets a Secret in, and only Secrets', () => {
    const stack: Stack = {
      metadata: { name: 's', namespace: 'ns', uid: 'u' },
      spec: {
        stack: 'dev',
        envRefs: {
          AWS_SECRET: { type: 'Secret', secret: { name: 'aws', key: 'secret' } },
          PLAIN: { type: 'Literal', literal: { value: 'x' } },
          FROM_ENV: { type: 'Env', env: { name: 'HOME' } },
        },
        secretsRef: { dbPassword: { type: 'Secret', secret: { name: 'db', key: 'password' } } },
        gitAuth: {
          accessToken: { type: 'Secret', secret: { name: 'git-token', key: 'token' } },
          sshAuth: { sshPrivateKey: { type: 'Secret', secret: { name: 'git-ssh', key: 'key' } } },
        },
        gitAuthSecret: 'git-legacy',
        accessTokenSecret: 'pulumi-token',
        envSecrets: ['env-a', 'env-b'],
        configRef: { region: { name: 'a-configmap', key: 'region' } },
        secrets: { apiKey: 'inline-secret-value', nested: { a: 1 } },
        workspaceTemplate: {
          spec: {
            podTemplate: {
              spec: {
                containers: [
                  {
                    name: 'pulumi',
                    env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 'pod-env', key: 'x' } } }],
                    envFrom: [{ secretRef: { name: 'pod-envfrom' } }, { configMapRef: { name: 'cm' } }],
                  },
                ],
                volumes: [{ name: 'v', secret: { secretName: 'pod-volume' } }],
              },
            },
          },
        },
      },
    };
    expect(stackSecretRefs(stack)).toEqual({
      secrets: [
        'aws',
        'db',
        'env-a',
        'env-b',
        'git-legacy',
        'git-ssh',
        'git-token',
        'pod-env',
        'pod-envfrom',
        'pod-volume',
        'pulumi-token',
      ],
      literals: ['inline-secret-value', '{"a":1}'],
    });
  });
});

describe('redactChangeSet', () => {
  it('a changed secret property still shows as changed', () => {
    const log = PREVIEW.replaceAll('"hello-again"', '"hunter2-new-password"').replaceAll(
      '"hello"',
      '"hunter2-old-password"',
    );
    const cs = redactChangeSet(parseWorkspaceLog(log), ['hunter2-new-password', 'hunter2-old-password']);
    const f = cs.resources.find((r) => r.name === 'f');
    expect(f?.diff).toContain('~ content: "[redacted]" => "[redacted]"');
    expect(JSON.stringify(cs)).not.toContain('hunter2');
  });

  it('removes each line of a multi-line value (a PEM key) and JSON-escaped values', () => {
    const pem = '-----BEGIN KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END KEY-----';
    const log = PREVIEW.replaceAll('"hello-again"', '"MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo"').replaceAll(
      '"hello"',
      JSON.stringify('say "quoted" secret\\path'),
    );
    const cs = redactChangeSet(parseWorkspaceLog(log), [pem, 'say "quoted" secret\\path']);
    const text = JSON.stringify(cs);
    expect(text).not.toContain('MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo');
    expect(text).not.toContain('quoted');
  });

  it('a value the parser cut at its line cap loses its start too', () => {
    const a = 'S3cretValueThatIsLong';
    let cuts = 0;
    for (let pad = 440; pad <= 500; pad++) {
      const cs = parseWorkspaceLog(PREVIEW.replaceAll('"hello-again"', `"${'x'.repeat(pad)}${a}"`));
      const line = cs.resources.find((r) => r.name === 'f')?.diff[0] ?? '';
      const cutInside = line.endsWith('…') && /S3c/.test(line);
      if (cutInside) cuts++;
      const red = redactChangeSet(cs, [a]).resources.find((r) => r.name === 'f')?.diff[0] ?? '';
      // At most 3 characters of it may stay (shorter parts are not redacted).
      expect(red, String(pad)).not.toMatch(/S3cr/);
    }
    expect(cuts).toBeGreaterThan(5);
  });
});

describe('redaction work is bounded (tenant input: Secrets and program output)', () => {
  /** Many PEM-like values sharing their start, as a Stack with many keys holds. */
  const pems = Array.from(
    { length: 60 },
    (_, i) =>
      `-----BEGIN PRIVATE KEY-----\n${Array.from({ length: 25 }, (_, j) =>
        createHash('sha512')
          .update(`${String(i)}/${String(j)}`)
          .digest('base64'),
      ).join('\n')}\n-----END PRIVATE KEY-----`,
  );
  /** 5,000 cut lines of 16 KiB made of the values' common start: the worst case of the old prefix scan. */
  const cutLines = (n: number): ChangeSet =>
    ({
      resources: [
        {
          op: 'update',
          type: 'random:index/randomString:RandomString',
          name: 'r',
          urn: 'urn:pulumi:dev::app::random:index/randomString:RandomString::r',
          diff: Array.from({ length: n }, () => `${'-----BEGIN PRIVATE KEY-----MII0'.repeat(512)}…`),
        },
      ],
      errors: [],
    }) as unknown as ChangeSet;

  it('counts its work and stops at the budget rather than blocking the event loop', () => {
    const r = secretRedactor(pems) as SecretRedactor;
    expect(typeof r).toBe('object');
    const work = { work: 0 };
    const t0 = performance.now();
    expect(() => redactChangeSet(cutLines(5_000), r, work)).toThrow(RedactionBudgetExceeded);
    const ms = performance.now() - t0;
    expect(work.work).toBeGreaterThan(REDACTION_WORK_BUDGET);
    // Counted work stops right after the budget (one comparison of at most a line's length).
    expect(work.work).toBeLessThan(REDACTION_WORK_BUDGET + 20_000);
    // Generous (the old scan took minutes here).
    expect(ms).toBeLessThan(20_000);
  });

  it('an ordinary change set with the same Secrets costs about its length, and is cleaned', () => {
    const r = secretRedactor(pems) as SecretRedactor;
    const key = pems[7]?.split('\n')[3] ?? '';
    const log = PREVIEW.replaceAll('"hello-again"', JSON.stringify(key));
    const cs = parseWorkspaceLog(log);
    const chars = JSON.stringify(cs).length;
    const work = { work: 0 };
    const out = JSON.stringify(redactChangeSet(cs, r, work));
    expect(out).not.toContain(key);
    expect(out).toContain('[redacted]');
    expect(work.work).toBeLessThan(4 * chars);
  });

  it('output printing many other PEM blocks stays well within the budget', () => {
    const r = secretRedactor(pems) as SecretRedactor;
    const cert = (i: number): string =>
      `    tls.crt: "-----BEGIN CERTIFICATE-----\\n${createHash('sha512').update(String(i)).digest('base64')}\\n-----END CERTIFICATE-----\\n"`;
    const set = cutLines(0);
    set.resources[0]?.diff.push(...Array.from({ length: 2_000 }, (_, i) => cert(i)));
    const work = { work: 0 };
    redactChangeSet(set, r, work);
    expect(work.work).toBeLessThan(REDACTION_WORK_BUDGET / 4);
  });

  it('N21: many short base64 runs are charged their decodings and fail closed at the budget', () => {
    // 300,000 runs of 8 mixed-case base64 characters, each decodable into 6 bytes (a 4-character
    // value fits): each decoding is charged its allocations, not only its 8 characters.
    const text = 'AbCdEfGh '.repeat(300_000);
    const work = { work: 0 };
    expect(() => redactText(text, ['Zx9q'], work)).toThrow(RedactionBudgetExceeded);
    expect(work.work).toBeGreaterThan(REDACTION_WORK_BUDGET);
    expect(work.work).toBeLessThan(REDACTION_WORK_BUDGET + 1_000);
    // A value no 6-byte decoding can hold: those runs are not decoded at all, and the text passes.
    const cheap = { work: 0 };
    expect(redactText(text, ['Zx9-value-QQ'], cheap)).toBe(text);
    expect(cheap.work).toBeLessThan(4 * text.length);
    // A run that does hold it still goes.
    const b64 = Buffer.from('user:Zx9-value-QQ').toString('base64');
    expect(redactText(`Basic ${b64} ok`, ['Zx9-value-QQ'])).toBe('Basic [redacted] ok');
  });

  it('refuses more values or characters than it removes, saying so', () => {
    expect(
      secretRedactor(Array.from({ length: MAX_REDACTED_VALUES + 1 }, (_, i) => `value-${String(i)}`)),
    ).toMatch(/^the Stack's Secrets hold 2001 values/);
    expect(secretRedactor(['x'.repeat(1024 * 1024 + 1)])).toMatch(/1048577 characters in all, more than/);
  });
});

describe('no Secret value in any rendered output (property)', () => {
  it('any built-in template × any provider type', () => {
    const secretArb = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9.-]{5,47}$/);
    fc.assert(
      fc.property(
        secretArb,
        secretArb,
        fc.integer({ min: 0, max: 520 }),
        fc.constantFrom('raw', 'base64', 'json'),
        (a, b, pad, form) => {
          fc.pre(a !== b && !a.includes(b) && !b.includes(a));
          const enc = (s: string): string =>
            form === 'base64'
              ? Buffer.from(s).toString('base64')
              : form === 'json'
                ? JSON.stringify(s).slice(1, -1)
                : s;
          // `a` after `pad` characters (so the parser's 500-character line cap may cut it), `b` as
          // a whole property value, both in the update preview of a real recording.
          const log = PREVIEW.replaceAll('"hello-again"', `"${'x'.repeat(pad)}${enc(a)}"`)
            .replaceAll('"hello"', `"${enc(b)}"`)
            .replaceAll('"one"', `"${b}"`);
          const cs = redactChangeSet(parseWorkspaceLog(log), [a, b]);
          const ev = stackEvent({
            reason: 'PreviewSucceeded',
            severity: 'info',
            message: 'Preview of stack acme/app/dev succeeded',
            changes: { set: cs },
          });
          for (const out of everything(ev)) {
            const s = shown(out);
            for (const v of [a, b]) {
              expect(s).not.toContain(v);
              expect(s).not.toContain(Buffer.from(v).toString('base64'));
            }
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('SecretMarks: the values a run marks secret (R21)', () => {
  const marks = (...lines: string[]): string[] => {
    const m = new SecretMarks();
    for (const l of lines) m.take(l);
    return [...m.values];
  };

  it('finds {Value, Secret: true} objects of any logger, any case, JSON quoted in a field, and the secret signature', () => {
    expect(
      marks(
        '2026-12-01T15:24:33.115Z\tINFO\tserver\tup completed\t{"summary": {"config":{"p:a":{"Value":"value-one","Secret":true},"p:b":{"Value":"plain-one","Secret":false}}}}',
        '{"level":"info","cfg":"{\\"p:c\\":{\\"secret\\": true, \\"value\\": \\"value-two\\"}}"}',
        'text with { a brace and "quotes" then {"Secret":true,"Value":"value-three"} and { more',
        '{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","plaintext":"\\"value-four\\""}',
        '{"Value":"cut-before-its-end","Secret":tr',
        '{"Value":"no","Secret":true}',
      ),
    ).toEqual(['value-one', 'value-two', 'value-three', '"value-four"', 'value-four']);
  });

  it('is linear in a hostile line and bounded in count and length (overflow withholds)', () => {
    const hostile = `${'{"a":['.repeat(20_000)}${'{"x":"{'.repeat(20_000)}`;
    const t0 = performance.now();
    expect(marks(`secret ${hostile}`)).toEqual([]);
    expect(performance.now() - t0).toBeLessThan(2_000);
    const m = new SecretMarks();
    for (let i = 0; i <= MAX_MARKED_VALUES; i++) m.take(`{"Value":"value-${String(i)}","Secret":true}`);
    expect(m.values.size).toBe(MAX_MARKED_VALUES);
    expect(m.overflow).toMatch(/marks more than 1000 values secret/);
    const long = new SecretMarks();
    long.take(`{"Value":"${'v'.repeat(70_000)}","Secret":true}`);
    expect(long.overflow).toMatch(/longer than the 65536 characters/);
  });

  /** PKO 2.0/2.1's `up completed` with 300 plain config keys sorting before the marked one. */
  const upCompleted = (secretKey: string, value: string): string => {
    const cfg: Record<string, { Value: string; Secret: boolean }> = {};
    for (let i = 0; i < 300; i++)
      cfg[`aws:key${String(i).padStart(3, '0')}`] = { Value: 'x'.repeat(40), Secret: false };
    cfg[secretKey] = { Value: value, Secret: true };
    return `2026-12-01T15:24:37.100Z\tINFO\tserver\tup completed with an error\t${JSON.stringify({ summary: { config: cfg } })}`;
  };
  /** What src/kube/workspace-log.ts passes of a line longer than its 16 KiB. */
  const cut16k = (line: string): string =>
    Buffer.from(line)
      .subarray(0, 16 * 1024)
      .toString('utf8');

  it('R21: a cut line whose kept part may mark values secret withholds (overflow); a line without a brace does not', () => {
    const line = upCompleted('proj:dbPassword', 'Zx9-value-QQ');
    const kept = cut16k(line);
    expect(kept).not.toContain('dbPassword'); // the mark is in the part never read
    const m = new SecretMarks();
    m.take(kept, true);
    expect(m.overflow).toBe(CUT_LINE_OVERFLOW);
    expect(CUT_LINE_OVERFLOW).toBe(
      'a log line that may mark values secret was longer than the controller reads',
    );
    // An object still open at the cut, even without `secret` in the kept part (a signature object
    // may follow): withheld too.
    const open = new SecretMarks();
    open.take(`{"outputs":{"a":"${'y'.repeat(20_000)}`.slice(0, 16 * 1024), true);
    expect(open.overflow).toBe(CUT_LINE_OVERFLOW);
    // Nesting deeper than the parse follows, cut: unknown, so withheld too.
    const deep = new SecretMarks();
    deep.take(`{"a":${'['.repeat(100)}1${']'.repeat(100)}} ${'z'.repeat(20_000)}`, true);
    expect(deep.overflow).toBe(CUT_LINE_OVERFLOW);
    // The same kept text, not cut (a whole line that ends so): nothing withheld.
    const whole = new SecretMarks();
    whole.take(kept);
    expect(whole.overflow).toBeUndefined();
    // A cut CLI line without a brace (a long property value), or whose objects all closed
    // without a hint of a mark: the details stay.
    const plain = new SecretMarks();
    plain.take(`    ~ data: "${'é'.repeat(9_000)}`, true);
    plain.take(`{"a":1} then ${'z'.repeat(20_000)}`, true);
    expect(plain.overflow).toBeUndefined();
  });

  it('R21: every marked object of a line is collected, past 64 braces (no cap that drops marks)', () => {
    const objs = Array.from(
      { length: 290 },
      (_, i) => `{"Value":"marked-${String(i).padStart(3, '0')}","Secret":true}`,
    );
    const m = new SecretMarks();
    m.take(`text ${objs.join(' and ')}`);
    expect(m.values.size).toBe(290);
    expect(m.values.has('marked-289')).toBe(true);
    expect(m.overflow).toBeUndefined();
    // Non-JSON braces before them count for nothing either.
    const n = new SecretMarks();
    n.take(`${'{ x '.repeat(500)}{"Value":"after-the-braces","Secret":true}`);
    expect([...n.values]).toEqual(['after-the-braces']);
  });

  it("an outputs Secret's secret keys (pulumi.com/secrets) give their values, strings decoded", () => {
    expect(
      secretOutputValues({
        data: { url: '"postgres://u:p@h"', obj: '{"k":1}', plain: '"visible"' },
        annotations: { 'pulumi.com/secrets': '["obj","url","missing"]' },
      }),
    ).toEqual(['{"k":1}', 'postgres://u:p@h']);
    expect(
      secretOutputValues({ data: { a: '"x"' }, annotations: { 'pulumi.com/secrets': 'not json' } }),
    ).toEqual([]);
  });
});
