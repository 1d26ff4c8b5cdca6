import { describe, expect, it } from 'vitest';
import { boundText, cleanMessage, headAndTail, meaningfulLine, stripAnsi } from '../src/text.ts';

const ESC = '\u001b';

/** Code points, counted independently of the implementation under test. */
function codePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

describe('stripAnsi', () => {
  it.each([
    { name: 'SGR colours', input: `${ESC}[31merror${ESC}[0m: boom`, want: 'error: boom' },
    { name: '256 colours and bold', input: `${ESC}[1;38;5;196mfail${ESC}[39;22m`, want: 'fail' },
    { name: 'cursor movement and erase', input: `a${ESC}[2K${ESC}[1A${ESC}[?25lb`, want: 'ab' },
    {
      name: 'OSC 8 hyperlink (ST)',
      input: `${ESC}]8;;https://x.test${ESC}\\link${ESC}]8;;${ESC}\\`,
      want: 'link',
    },
    { name: 'OSC title (BEL)', input: `${ESC}]0;title\u0007text`, want: 'text' },
    { name: 'unterminated OSC stops at the line end', input: `${ESC}]0;title\nnext`, want: '\nnext' },
    { name: 'charset designation', input: `${ESC}(Bplain`, want: 'plain' },
    { name: '8-bit CSI', input: '\u009b31mred', want: 'red' },
    { name: 'no escapes', input: 'plain [31m text', want: 'plain [31m text' },
  ])('$name', ({ input, want }) => {
    expect(stripAnsi(input)).toBe(want);
  });
});

describe('boundText', () => {
  it('returns short strings unchanged', () => {
    expect(boundText('héllo', 5)).toBe('héllo');
    expect(boundText('😀😀', 2)).toBe('😀😀'); // 4 UTF-16 units, 2 code points: no cut
  });

  it('cuts at code points and appends an ellipsis within the limit', () => {
    expect(boundText('abcdef', 3)).toBe('ab…');
    expect(boundText('a😀b😀', 3)).toBe('a😀…');
    expect(boundText('ab', 1)).toBe('…');
    expect(boundText('ab', 0)).toBe('');
  });

  it('bounds a 5,000-character multibyte message without splitting a surrogate pair', () => {
    const units = ['é', '中', '😀', 'a', '👩‍💻', '\u0301'];
    let s = '';
    for (let i = 0; codePoints(s) < 5000; i++) s += units[i % units.length]!;
    expect(codePoints(s)).toBeGreaterThanOrEqual(5000);
    for (const max of [140, 1000, 4095, 4096, 4999]) {
      const out = boundText(s, max);
      expect(codePoints(out)).toBe(max);
      expect(out.endsWith('…')).toBe(true);
      expect(out.isWellFormed()).toBe(true);
      expect(s.startsWith(out.slice(0, -1))).toBe(true);
    }
    // Every cut position, including one between the halves of an astral character.
    const astral = '😀'.repeat(5000);
    for (let max = 1; max < 40; max++) {
      const out = boundText(astral, max);
      expect(out.isWellFormed()).toBe(true);
      expect(codePoints(out)).toBe(max);
    }
  });
});

describe('cleanMessage', () => {
  it('strips ANSI, normalises CRLF and lone CR, drops stray controls, keeps tabs, trims the end', () => {
    const raw = `up failed: exit status 255\r\ncode: 255\r\nstdout: ${ESC}[32m+ \u0000created\tok${ESC}[0m\rprogress\nstderr: ${ESC}[31merror: update failed${ESC}[0m\n\n`;
    expect(cleanMessage(raw)).toBe(
      'up failed: exit status 255\ncode: 255\nstdout: + created\tok\nprogress\nstderr: error: update failed',
    );
  });

  it('bounds to 8192 code points by default and to the given maximum, keeping both ends', () => {
    const long = `${'中'.repeat(5_000)}END${'文'.repeat(5_000)}`;
    const out = cleanMessage(long);
    expect(codePoints(out)).toBeLessThanOrEqual(8192);
    expect(codePoints(out)).toBeGreaterThan(8100);
    expect(out.startsWith('中中中')).toBe(true);
    expect(out.endsWith('文文文')).toBe(true);
    const small = cleanMessage(long, 100);
    expect(codePoints(small)).toBeLessThanOrEqual(100);
    expect(small).toMatch(/^中+ \[… [\d,]+ characters cut …\] 文+$/);
  });

  it('a 30,000-character failure keeps its summary and its last line, and says how much was cut', () => {
    const lines = ['Update of stack acme/app/dev failed:', 'up failed: exit status 255'];
    for (let i = 0; lines.join('\n').length < 30_000; i++)
      lines.push(`  + resource-${String(i)} creating ${'x'.repeat(60)}`);
    lines.push('error: THE-LAST-LINE could not be created');
    const msg = lines.join('\n');
    const out = cleanMessage(msg);
    expect(codePoints(out)).toBeLessThanOrEqual(8192);
    expect(
      out.startsWith('Update of stack acme/app/dev failed:\nup failed: exit status 255\n  + resource-0 '),
    ).toBe(true);
    expect(out.endsWith('\nerror: THE-LAST-LINE could not be created')).toBe(true);
    const m = /\n\[… ([\d,]+) characters cut …\]\n/.exec(out);
    const cut = Number((m?.[1] ?? '').replaceAll(',', ''));
    // What is shown plus what the note says was cut is the whole message.
    expect(codePoints(out) - codePoints(m?.[0] ?? '') + cut).toBe(codePoints(msg));
  });

  it('bounds after stripping, so escape sequences do not consume the budget', () => {
    const coloured = `${ESC}[31m${'x'.repeat(10)}${ESC}[0m`;
    expect(cleanMessage(coloured, 10)).toBe('x'.repeat(10));
  });
});

describe('headAndTail', () => {
  it('leaves text that fits alone', () => {
    expect(headAndTail('a\nb', { max: 3, unit: 'codePoints', source: 'test' })).toBe('a\nb');
    expect(headAndTail('abc', undefined)).toBe('abc');
  });

  it.each(['codePoints', 'utf16', 'utf8'] as const)(
    'never exceeds the limit in %s and keeps the end',
    (unit) => {
      const s = `first line\n${'😀é中a\n'.repeat(3_000)}the end`;
      for (const max of [60, 100, 1_000, 4_000]) {
        const out = headAndTail(s, { max, unit, source: 'test' });
        const size =
          unit === 'utf16' ? out.length : unit === 'utf8' ? Buffer.byteLength(out) : codePoints(out);
        expect(size).toBeLessThanOrEqual(max);
        expect(out.isWellFormed()).toBe(true);
        expect(out.endsWith('the end')).toBe(true);
        expect(out).toMatch(/characters cut/);
      }
    },
  );

  it('falls back to a plain cut when even the marker does not fit', () => {
    expect(headAndTail('x'.repeat(100), { max: 10, unit: 'codePoints', source: 'test' })).toBe('xxxxxxxxx…');
  });
});

describe('meaningfulLine (N19)', () => {
  // Real PKO v1.16 `RetryingAfterFailure` message (/work/shared/pko-traces/v1.16.0-real).
  const v1 = [
    'failed to run update: exit status 1',
    'code: 1',
    'stdout: Updating (dev):',
    '',
    '    pulumi:pulumi:Stack demo-app-dev running error: resource or variable named "doesNotExist" could not be found',
    '    pulumi:pulumi:Stack demo-app-dev **failed** 2 errors',
    'Diagnostics:',
    '  pulumi:pulumi:Stack (demo-app-dev):',
    '    error: resource or variable named "doesNotExist" could not be found',
    '    ',
    '      on Pulumi.yaml line 5:',
    '       5:   greeting: ${doesNotExist}',
    '    error: Error registering output [greeting]: no diagnostics',
    '',
    'Outputs:',
    '    greeting: "hello-2"',
    '',
    'Resources:',
    '    1 errored',
    '',
    'Duration: 1s',
    '',
    '',
    'stderr: ',
  ].join('\n');

  it('PKO v1: the first diagnostic error, not the empty stderr: block', () => {
    expect(meaningfulLine(v1)).toBe('error: resource or variable named "doesNotExist" could not be found');
  });

  it('PKO v2: the error under stderr:, not the source line after it', () => {
    const v2 = [
      'stdout: Updating (dev):',
      'Duration: 1s',
      '',
      'stderr: error: resource or variable named "doesNotExist" could not be found',
      '',
      '  on Pulumi.yaml line 4:',
      '   4:   greeting: ${doesNotExist}',
      '',
      'error: Error registering output [greeting]: no diagnostics',
    ].join('\n');
    expect(meaningfulLine(v2)).toBe(
      'stderr: error: resource or variable named "doesNotExist" could not be found',
    );
  });

  it('a block ends at the next section: its error is not taken from the Outputs after it', () => {
    // The v1 trace, with the Diagnostics block holding only a warning and an output named
    // `error`; the cause is in a `stderr:` block (PKO v2's form) before it.
    const lines = v1.split('\n');
    const at = lines.indexOf('Diagnostics:');
    const mixed = [
      'stderr: error: resource or variable named "doesNotExist" could not be found',
      ...lines.slice(0, at),
      'Diagnostics:',
      '  pulumi:pulumi:Stack (demo-app-dev):',
      '    warning: using pulumi-language-yaml from $PATH',
      '',
      'Outputs:',
      '    error: "none"',
      '    greeting: "hello-2"',
      '',
      'Resources:',
      '    1 unchanged',
    ].join('\n');
    expect(meaningfulLine(mixed)).toBe(
      'stderr: error: resource or variable named "doesNotExist" could not be found',
    );
  });

  it('without error lines: the last line that is not a bare label; null when none', () => {
    expect(meaningfulLine('exit status 1\nstderr:\n\n')).toBe('exit status 1');
    expect(meaningfulLine('the run timed out\nOutputs:')).toBe('the run timed out');
    expect(meaningfulLine('stderr:\n  \n')).toBeNull();
    expect(meaningfulLine('a\nerror: late failure\nexit status 2')).toBe('error: late failure');
  });
});
