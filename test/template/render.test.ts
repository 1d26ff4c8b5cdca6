import { describe, expect, it } from 'vitest';
import { GIT_PROVIDER_TYPES, type ProviderType } from '../../src/api/v1alpha1.ts';
import { limitsFor } from '../../src/provider-types.ts';
import { measure } from '../../src/text.ts';
import { compileTemplates, renderNotification, type TemplateSet } from '../../src/template/index.ts';
import { bareEvent, COMMIT, fencesBalanced, stackEvent } from './fixtures.ts';

const ESC = '\u001b';

function set(overrides?: Record<string, string>, opts?: { commitStatusContext?: string }): TemplateSet {
  const r = compileTemplates(overrides, opts);
  if (!r.ok) throw new Error(`${r.template}: ${r.message}`);
  return r.set;
}

const opts = (providerType: ProviderType, commentsEnabled = true) => ({
  clusterName: 'prod-eu',
  providerType,
  commentsEnabled,
  limits: limitsFor(providerType),
});

describe('F13: forge field limits', () => {
  // 5,000 characters on one line: multibyte text, emoji and ANSI colour codes.
  const unit = `${ESC}[31mÉchec: ressource «日本語» 😀 ${ESC}[0m${ESC}[1mfailed${ESC}[22m `;
  let long = 'Update of stack acme/app/dev failed: ';
  while (long.length < 5_000) long += unit;
  long = long.slice(0, 5_000);
  const ev = stackEvent({ message: long });

  it('GitHub description ≤ 140 code points, ends with an ellipsis, no escape codes', () => {
    const d = renderNotification(set(), ev, opts('github')).commitStatus?.description ?? '';
    expect(measure(d, 'codePoints')).toBeLessThanOrEqual(140);
    expect(measure(d, 'codePoints')).toBeGreaterThan(100);
    expect(d.endsWith('…')).toBe(true);
    expect(d).not.toContain(ESC);
    expect(d).not.toMatch(/\[\d+m/);
    expect(d.startsWith('Update of stack acme/app/dev failed: Échec')).toBe(true);
  });

  it('a multi-line custom description is made single-line and bounded too', () => {
    const multi = stackEvent({ message: `Update failed:\n${long}\n${long}` });
    const d =
      renderNotification(set({ commitStatusDescription: '{{message}}' }), multi, opts('github')).commitStatus
        ?.description ?? '';
    expect(measure(d, 'codePoints')).toBeLessThanOrEqual(140);
    expect(d.endsWith('…')).toBe(true);
    for (const ch of ['\n', '\r', '\t', ESC]) expect(d).not.toContain(ch);
  });

  it.each(GIT_PROVIDER_TYPES)('%s: description within the forge limit in its unit', (type) => {
    const limit = limitsFor(type).statusDescription;
    const d = renderNotification(set(), ev, opts(type)).commitStatus?.description ?? '';
    expect(limit).toBeDefined();
    if (limit) expect(measure(d, limit.unit)).toBeLessThanOrEqual(limit.max);
    expect(d.endsWith('…')).toBe(true);
  });

  it('a short description is left alone; a failure shows its last line', () => {
    const d = renderNotification(
      set(),
      stackEvent({ message: 'Update of stack acme/app/dev failed:\nboom\n\nerror: the end\n' }),
      opts('github'),
    );
    expect(d.commitStatus?.description).toBe('Update of stack acme/app/dev failed: error: the end');
    const ok = renderNotification(
      set(),
      stackEvent({
        reason: 'UpdateSucceeded',
        message: 'Update of stack acme/app/dev succeeded:\nDuration: 3s',
      }),
      opts('github'),
    );
    expect(ok.commitStatus?.description).toBe('Update of stack acme/app/dev succeeded');
  });

  it('a long summary is cut so that the last line still fits ("where it fits")', () => {
    const ev = stackEvent({
      message: `Update of stack acme/app/dev failed because ${'of many reasons '.repeat(20)}:\nlots of output\nerror: THE-LAST-LINE`,
    });
    const d = renderNotification(set(), ev, opts('github')).commitStatus?.description ?? '';
    expect(measure(d, 'codePoints')).toBeLessThanOrEqual(140);
    expect(d.startsWith('Update of stack acme/app/dev failed because of many')).toBe(true);
    expect(d.endsWith('…: error: THE-LAST-LINE')).toBe(true);
  });
});

describe('F14: comment size limits', () => {
  // 200 KB of CLI output with backtick runs in it; the real error is on the last line.
  const lines: string[] = ['Previewing update (dev):', 'FIRST-LINE-OF-OUTPUT'];
  let i = 0;
  while (lines.join('\n').length < 200 * 1024) {
    lines.push(
      i % 50 === 0
        ? '```'
        : `  + aws:s3/bucket:Bucket resource-${String(i)} creating (0s) \`name\` ${'x'.repeat(40)}`,
    );
    i++;
  }
  lines.push('error: THE-REAL-ERROR at the end');
  const ev = stackEvent({
    reason: 'PreviewFailed',
    message: `Preview of stack acme/app/dev failed:\n${lines.join('\n')}`,
    metadata: { ...stackEvent().metadata, pullRequest: '42' },
  });

  function checkComment(body: string, max: number, truncated: boolean): void {
    expect(body.length).toBeLessThanOrEqual(max);
    expect(body).toContain('<!-- pko-notification-controller:');
    expect(body).toContain('### ❌ Preview of stack acme/app/dev failed'); // header
    expect(body).toContain('| **Result** | ❌ failed |'); // result
    expect(body).toContain(COMMIT); // commit
    expect(body).toContain('(https://app.pulumi.com/acme/app/dev/updates/7)'); // link
    expect(body).toContain('THE-REAL-ERROR'); // the end of the output is kept
    expect(fencesBalanced(body)).toBe(true);
    if (truncated) {
      expect(body).toMatch(
        /Output truncated: showing [\d,]+ of [\d,]+ characters \(the start and the end\)\./,
      );
      expect(body).toMatch(/\n\[… [\d,]+ characters cut …\]\n/);
      // The start is kept too: the summary and the first lines of the output.
      expect(body.indexOf('FIRST-LINE-OF-OUTPUT')).toBeLessThan(body.indexOf('characters cut'));
    } else {
      expect(body).not.toContain('Output truncated');
      expect(body).toContain('FIRST-LINE-OF-OUTPUT');
    }
  }

  it('GitHub comment ≤ 65,536 characters, keeping header, result, commit, link and a truncated note', () => {
    const body = renderNotification(set(), ev, opts('github')).comment?.body ?? '';
    checkComment(body, 65_536, true);
    expect(body.length).toBeGreaterThan(60_000); // uses the room it has
  });

  it('GitLab note ≤ 1,000,000: 200 KB fits whole', () => {
    checkComment(renderNotification(set(), ev, opts('gitlab')).comment?.body ?? '', 1_000_000, false);
  });

  it('Bitbucket Data Center comment ≤ 32,768', () => {
    checkComment(renderNotification(set(), ev, opts('bitbucketserver')).comment?.body ?? '', 32_768, true);
  });

  it('the truncated note states the numbers', () => {
    const body = renderNotification(set(), ev, opts('github')).comment?.body ?? '';
    const m = /showing ([\d,]+) of ([\d,]+) characters/.exec(body);
    const kept = Number((m?.[1] ?? '').replaceAll(',', ''));
    const total = Number((m?.[2] ?? '').replaceAll(',', ''));
    expect(total).toBe(measure(ev.message, 'codePoints'));
    expect(kept).toBeGreaterThan(50_000);
    expect(kept).toBeLessThan(total);
  });

  it('a custom comment template without marker or note gets both, and still fits', () => {
    const s = set({ pullRequestComment: '# {{title}}\n{{codeBlock output}}' });
    const r = renderNotification(s, ev, opts('github'));
    const body = r.comment?.body ?? '';
    expect(body.length).toBeLessThanOrEqual(65_536);
    expect(body.startsWith(r.comment?.marker ?? '?')).toBe(true);
    expect(body).toMatch(/Output truncated: showing /);
    expect(body).toContain('THE-REAL-ERROR');
    expect(fencesBalanced(body)).toBe(true);
  });

  it('astral characters: the body stays within the limit in UTF-16 units', () => {
    const emoji = stackEvent({
      message: `Update of stack acme/app/dev failed:\n${'😀 boom\n'.repeat(20_000)}end`,
    });
    const body = renderNotification(set(), emoji, opts('github')).comment?.body ?? '';
    expect(body.length).toBeLessThanOrEqual(65_536);
    expect(body).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/); // no split surrogate
    expect(fencesBalanced(body)).toBe(true);
  });

  it('a template whose fixed text alone exceeds the limit falls back to marker, title and note', () => {
    // 32,731 bytes: within the template size limit (32 KiB), over Bitbucket Data Center's 32,768
    // characters once the marker line is added.
    const s = set({ pullRequestComment: `${'padding '.repeat(4_090)}{{message}}` });
    const body = renderNotification(s, ev, opts('bitbucketserver')).comment?.body ?? '';
    expect(body.length).toBeLessThanOrEqual(32_768);
    expect(body).not.toContain('padding');
    expect(body).toContain('<!-- pko-notification-controller:');
    expect(body).toContain('Preview of stack acme/app/dev failed');
  });
});

describe('commit status', () => {
  it.each([
    ['PreviewStarted', 'pending'],
    ['UpdateStarted', 'pending'],
    ['DestroySucceeded', 'success'],
    ['RefreshSucceeded', 'success'],
    ['UpdateFailed', 'failure'],
    ['PreviewFailed', 'failure'],
    ['StackStalled', 'failure'],
  ] as const)('%s → %s', (reason, state) => {
    expect(renderNotification(set(), stackEvent({ reason }), opts('github')).commitStatus?.state).toBe(state);
  });

  it('default context is unique per cluster, namespace and Stack', () => {
    const a = renderNotification(set(), stackEvent(), opts('github')).commitStatus?.context;
    expect(a).toBe('pko/prod-eu/team-a/app');
    const other = stackEvent({ involvedObject: { ...stackEvent().involvedObject, namespace: 'team-b' } });
    expect(renderNotification(set(), other, opts('github')).commitStatus?.context).toBe(
      'pko/prod-eu/team-b/app',
    );
    expect(
      renderNotification(set(), stackEvent(), { ...opts('github'), clusterName: 'prod-us' }).commitStatus
        ?.context,
    ).toBe('pko/prod-us/team-a/app');
  });

  it('Bitbucket keys over 40 characters become prefix + hash, distinct for distinct contexts', () => {
    const mk = (name: string) =>
      stackEvent({
        involvedObject: { ...stackEvent().involvedObject, namespace: 'a-rather-long-namespace', name },
      });
    const k1 =
      renderNotification(set(), mk('application-one'), opts('bitbucket')).commitStatus?.context ?? '';
    const k2 =
      renderNotification(set(), mk('application-two'), opts('bitbucket')).commitStatus?.context ?? '';
    expect(k1.length).toBeLessThanOrEqual(40);
    expect(k2.length).toBeLessThanOrEqual(40);
    expect(k1).not.toBe(k2);
    expect(k1.startsWith('pko/prod-eu/a-rather-long-nam')).toBe(true);
    expect(k1).toMatch(/~[0-9a-f]{10}$/);
    // Keys bounded, names whole: Bitbucket shows the name, which keeps the whole context.
    expect(renderNotification(set(), mk('application-one'), opts('bitbucket')).commitStatus?.name).toBe(
      'pko/prod-eu/a-rather-long-namespace/application-one',
    );
    expect(
      renderNotification(set(), mk('application-one'), opts('github')).commitStatus?.name,
    ).toBeUndefined();
    // Stable: the same Stack always gets the same key.
    expect(renderNotification(set(), mk('application-one'), opts('bitbucket')).commitStatus?.context).toBe(
      k1,
    );
  });

  it("the Provider's context template wins over the ConfigMap's", () => {
    const s = set(
      { commitStatusContext: 'cm/{{stackName}}' },
      { commitStatusContext: 'provider/{{namespace}}/{{stackName}}' },
    );
    expect(renderNotification(s, stackEvent(), opts('github')).commitStatus?.context).toBe(
      'provider/team-a/app',
    );
    expect(
      renderNotification(set({ commitStatusContext: 'cm/{{stackName}}' }), stackEvent(), opts('github'))
        .commitStatus?.context,
    ).toBe('cm/app');
  });

  it('a context that renders empty for an event falls back to the default', () => {
    const s = set({ commitStatusContext: '{{pulumiStack}}' });
    expect(
      renderNotification(s, bareEvent({ metadata: { commit: COMMIT } }), opts('github')).commitStatus
        ?.context,
    ).toBe('pko/prod-eu/team-a/app');
  });

  it('targetURL is the permalink; GitLab omits one over 255 characters', () => {
    expect(renderNotification(set(), stackEvent(), opts('github')).commitStatus?.targetURL).toBe(
      'https://app.pulumi.com/acme/app/dev/updates/7',
    );
    const longURL = `https://app.pulumi.com/${'x'.repeat(300)}`;
    const ev = stackEvent({ metadata: { ...stackEvent().metadata, permalink: longURL } });
    expect(renderNotification(set(), ev, opts('gitlab')).commitStatus?.targetURL).toBeUndefined();
    expect(renderNotification(set(), ev, opts('github')).commitStatus?.targetURL).toBe(longURL);
    expect(renderNotification(set(), bareEvent(), opts('github')).commitStatus?.targetURL).toBeUndefined();
  });

  it('chat types get no commit status and no comment; comments only when enabled', () => {
    const chat = renderNotification(set(), stackEvent(), opts('slack'));
    expect(chat.commitStatus).toBeUndefined();
    expect(chat.comment).toBeUndefined();
    expect(renderNotification(set(), stackEvent(), opts('github', false)).comment).toBeUndefined();
    expect(renderNotification(set(), stackEvent(), opts('github', true)).comment).toBeDefined();
  });

  it('the comment marker is stable per cluster, namespace and Stack', () => {
    const a = renderNotification(set(), stackEvent(), opts('github')).comment?.marker;
    const b = renderNotification(
      set(),
      stackEvent({ reason: 'PreviewSucceeded', id: 'other' }),
      opts('github'),
    ).comment?.marker;
    expect(a).toMatch(/^<!-- pko-notification-controller:[0-9a-f]{16} -->$/);
    expect(b).toBe(a);
    const c = renderNotification(set(), stackEvent(), { ...opts('github'), clusterName: 'other' }).comment
      ?.marker;
    expect(c).not.toBe(a);
  });
});

describe('chat message limits', () => {
  const output = Array.from({ length: 2_000 }, (_, n) => `line ${String(n)} of the CLI output`).join('\n');
  const ev = stackEvent({ message: `Update of stack acme/app/dev failed:\n${output}\nerror: LAST` });

  it.each([
    [
      'slack',
      4_000,
      'utf16',
      '❌ Update of stack acme/app/dev failed',
      'Details: https://app.pulumi.com/acme/app/dev/updates/7',
    ],
    ['discord', 2_000, 'utf16', '❌ **Update of stack acme/app/dev failed**', '**Stack:** acme/app/dev'],
    ['msteams', 20_000, 'utf8', '❌ Update of stack acme/app/dev failed', '**Stack:** acme/app/dev'],
    [
      'googlechat',
      28_000,
      'utf8',
      '<b>❌ Update of stack acme/app/dev failed</b>',
      '<b>Stack:</b> acme/app/dev',
    ],
  ] as const)('%s: ≤ %d (%s), first line and the end kept', (type, max, unit, first, line) => {
    const m = renderNotification(set(), ev, opts(type)).message;
    expect(measure(m, unit)).toBeLessThanOrEqual(max);
    expect(m.startsWith(first)).toBe(true);
    // The template's own lines stay; the output is cut in its middle, its end kept.
    expect(m).toContain(line);
    expect(m).toMatch(/error: LAST(\n```)?$/);
    // Inside Teams' code TextBlock the marker is escaped Markdown (`\[`), shown as `[`.
    expect(m).toMatch(/\\?\[… [\d,]+ characters cut …\\?\]/);
  });

  it('chat types with their own built-in message use it unless the Alert overrides message', () => {
    expect(renderNotification(set(), stackEvent(), opts('msteams')).message).toContain('**Stack:**');
    expect(renderNotification(set(), stackEvent(), opts('slack')).message).toContain('\nStack: ');
    const custom = set({ message: 'custom {{summary}}' });
    for (const type of ['msteams', 'discord', 'googlechat', 'slack'] as const)
      expect(renderNotification(custom, stackEvent(), opts(type)).message).toMatch(/^custom /);
  });

  it('generic webhooks are not cut', () => {
    const m = renderNotification(set(), ev, opts('generic')).message;
    expect(m).toContain('line 0 of the CLI output');
    expect(m.endsWith('error: LAST')).toBe(true);
  });
});

describe('F26: missing metadata', () => {
  it('an event without commit or repository renders for slack and generic; absent fields are empty', () => {
    const s = set({
      message:
        'commit=[{{commit}}] repo=[{{repository}}] short=[{{shortCommit}}] {{#if commit}}HAS{{else}}NONE{{/if}}',
    });
    for (const type of ['slack', 'generic'] as const) {
      const r = renderNotification(s, bareEvent(), opts(type));
      expect(r.message).toBe('commit=[] repo=[] short=[] NONE');
    }
  });

  it('the built-in templates render without commit, repository, permalink or stack', () => {
    const r = renderNotification(set(), bareEvent({ metadata: {} }), opts('github'));
    expect(r.message).toContain('✅ Update of stack team-a/app succeeded');
    expect(r.message).not.toContain('Commit:');
    expect(r.comment?.body).toContain('### ✅ Update of stack team-a/app succeeded');
    expect(r.comment?.body).not.toContain('**Commit**');
    expect(r.commitStatus?.targetURL).toBeUndefined();
  });
});

describe('render-time failures of custom templates', () => {
  it('fall back to the built-in template and are reported', () => {
    // metadata.custom is absent in the samples (the `if` hides the branch at compile time) and a
    // plain string at run time, so `.x` fails only for real events.
    const s = set({ message: '{{#if (lookup metadata "custom")}}{{metadata.custom.x}}{{/if}}custom' });
    const errors: string[] = [];
    const ev = stackEvent({ metadata: { ...stackEvent().metadata, custom: 'v' } });
    const r = renderNotification(s, ev, {
      ...opts('slack'),
      onTemplateError: (t, m) => errors.push(`${t}: ${m}`),
    });
    expect(r.message.startsWith('❌ Update of stack acme/app/dev failed')).toBe(true);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^message: /);
    // Without the failing value, the custom template is used.
    expect(renderNotification(s, stackEvent(), opts('slack')).message).toBe('custom');
  });
});

describe('built-in templates (golden: catches accidental reformatting of templates/*.hbs)', () => {
  const ev = stackEvent({ metadata: { ...stackEvent().metadata, pullRequest: '42' } });
  const r = renderNotification(set(), ev, opts('github'));

  it('message', () => {
    expect(r.message).toBe(
      [
        '❌ Update of stack acme/app/dev failed',
        'Stack: acme/app/dev (team-a/app) on cluster prod-eu',
        `Commit: 1111111 (main) in https://github.com/acme/app`,
        'Pull request: #42',
        'Details: https://app.pulumi.com/acme/app/dev/updates/7',
        '',
        'error: resource failed',
      ].join('\n'),
    );
  });

  it('commit status', () => {
    expect(r.commitStatus).toEqual({
      state: 'failure',
      context: 'pko/prod-eu/team-a/app',
      description: 'Update of stack acme/app/dev failed: error: resource failed',
      targetURL: 'https://app.pulumi.com/acme/app/dev/updates/7',
    });
  });

  it('pull request comment', () => {
    expect(r.comment?.body).toBe(
      [
        r.comment?.marker,
        '### ❌ Update of stack acme/app/dev failed',
        '',
        '| | |',
        '|---|---|',
        '| **Stack** | `acme/app/dev` (team-a/app, cluster prod-eu) |',
        '| **Operation** | update |',
        '| **Result** | ❌ failed |',
        `| **Commit** | ${COMMIT} on \`main\` |`,
        '| **Details** | [View the update](https://app.pulumi.com/acme/app/dev/updates/7) |',
        '',
        '<details><summary>Output</summary>',
        '',
        '```',
        'Update of stack acme/app/dev failed:',
        'error: resource failed',
        '```',
        '',
        '</details>',
        '',
      ].join('\n'),
    );
  });
});

describe('one comment follows the change (docs/previews.md)', () => {
  const base = stackEvent({
    reason: 'UpdateSucceeded',
    severity: 'info',
    message: 'Update of stack acme/app/dev succeeded',
  });
  const preview: ReturnType<typeof stackEvent> = {
    ...stackEvent({
      reason: 'PreviewSucceeded',
      severity: 'info',
      message: 'Preview of stack acme/app/dev succeeded',
    }),
    involvedObject: { ...base.involvedObject, name: 'app-pr-7', uid: 'uid-7' },
    previewThread: { baseStack: 'app', merged: false },
  };
  const deployed = { ...base, previewThread: { baseStack: 'app', merged: true } };

  it("a preview Stack's comment carries its base Stack's marker; the base Stack's deployment of the merge says it is deployed", () => {
    const p = renderNotification(set(), preview, opts('gitea')).comment;
    const d = renderNotification(set(), deployed, opts('gitea')).comment;
    const plain = renderNotification(set(), base, opts('gitea')).comment;
    expect(p?.marker).toBe(d?.marker);
    expect(plain?.marker).toBe(d?.marker);
    const { previewThread: _thread, ...unthreaded } = preview;
    const own = renderNotification(set(), unthreaded, opts('gitea')).comment?.marker;
    expect(own).not.toBe(d?.marker);
    expect(d?.body).toContain(`**Deployed ${COMMIT.slice(0, 7)}** · this pull request was merged`);
    expect(p?.body).not.toContain('Deployed');
    expect(plain?.body).not.toContain('Deployed');
    const failed = renderNotification(
      set(),
      { ...deployed, reason: 'UpdateFailed', message: 'Update of stack acme/app/dev failed' },
      opts('gitea'),
    ).comment;
    expect(failed?.body).toContain(`**Deployment failed: ${COMMIT.slice(0, 7)}**`);
  });
});

describe('the gate of a PullRequestPreview (docs/previews.md)', () => {
  const deletion = {
    op: 'delete' as const,
    type: 'pkotest:index:File',
    name: 'a',
    urn: 'urn:pulumi:dev::app::pkotest:index:File::a',
    retain: false,
    diff: [],
    diffOmitted: 0,
  };
  const changeSet = (resources: (typeof deletion)[]) => ({
    source: 'workspace-log' as const,
    complete: true,
    incomplete: [],
    failed: false,
    counts: { [resources[0]?.op ?? 'delete']: resources.length },
    countsFrom: 'summary' as const,
    resources,
    errors: [],
    omitted: { resources: 0, diffLines: 0, longLines: 0, errors: 0 },
  });
  const preview = (extra: Partial<ReturnType<typeof stackEvent>>) =>
    stackEvent({
      reason: 'PreviewSucceeded',
      severity: 'info',
      message: 'Preview of stack acme/app/dev succeeded',
      gate: { gate: { operations: ['delete', 'replace'] } },
      ...extra,
    });

  it('a gated change turns the status into failure naming the count and the first resources, within GitHub’s 140', () => {
    const many = Array.from({ length: 30 }, (_, i) => ({
      ...deletion,
      name: `resource-number-${String(i)}`,
    }));
    const r = renderNotification(set(), preview({ changes: { set: changeSet(many) } }), opts('github'));
    expect(r.commitStatus?.state).toBe('failure');
    const d = r.commitStatus?.description ?? '';
    expect(d.startsWith('gate: 30 to delete: pkotest:index:File::resource-number-0, ')).toBe(true);
    expect(measure(d, 'codePoints')).toBeLessThanOrEqual(140);
    expect(r.comment?.body).toContain('**🚧 gate: 30 to delete: pkotest:index:File::resource-number-0');
    const one = renderNotification(
      set(),
      preview({ changes: { set: changeSet([deletion]) } }),
      opts('gitea'),
    );
    expect(one.commitStatus?.description).toBe('gate: 1 to delete: pkotest:index:File::a');
  });

  it('fails closed without a change set, with an unusable gate; passes when nothing gated is planned; only previews that succeeded are judged', () => {
    const unavailable = renderNotification(
      set(),
      preview({ changes: { unavailable: 'no change details: the workspace pod is gone' } }),
      opts('github'),
    ).commitStatus;
    expect(unavailable).toMatchObject({
      state: 'failure',
      description: 'gate: change set unavailable: the workspace pod is gone',
    });
    expect(renderNotification(set(), preview({}), opts('gitea')).commitStatus?.description).toBe(
      'gate: change set unavailable: not read',
    );
    expect(
      renderNotification(
        set(),
        preview({ gate: { invalid: 'the gate annotation is not JSON' } }),
        opts('gitea'),
      ).commitStatus,
    ).toMatchObject({ state: 'failure', description: 'gate: invalid: the gate annotation is not JSON' });
    const passing = renderNotification(
      set(),
      preview({ changes: { set: changeSet([{ ...deletion, op: 'update' as never }]) } }),
      opts('gitea'),
    );
    expect(passing.commitStatus?.state).toBe('success');
    expect(passing.comment?.body).not.toContain('🚧');
    expect(
      renderNotification(set(), preview({ reason: 'PreviewStarted' }), opts('gitea')).commitStatus?.state,
    ).toBe('pending');
  });
});

describe('N18: a late result for an older head', () => {
  const newer = 'b'.repeat(40);
  const late = (reason: 'PreviewStarted' | 'PreviewSucceeded' | 'PreviewFailed') =>
    stackEvent({
      reason,
      severity: reason === 'PreviewFailed' ? 'error' : 'info',
      message: `Preview of stack acme/app/dev ${reason.slice(7).toLowerCase()}`,
      supersededBy: newer,
    });

  it('writes no comment (the newer head keeps it); its result is set on its own commit', () => {
    const r = renderNotification(set(), late('PreviewSucceeded'), opts('github'));
    expect(r.comment).toBeUndefined();
    expect(r.commitStatus?.state).toBe('success');
    expect(renderNotification(set(), late('PreviewFailed'), opts('gitea')).commitStatus?.state).toBe(
      'failure',
    );
  });

  it('a started run of an older head is never left pending: failure "superseded by <short sha>"', () => {
    const r = renderNotification(set(), late('PreviewStarted'), opts('github'));
    expect(r.commitStatus).toMatchObject({ state: 'failure', description: 'superseded by bbbbbbb' });
    expect(r.comment).toBeUndefined();
  });
});
