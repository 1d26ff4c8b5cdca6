/**
 * The preview controller's decisions (src/preview/plan.ts, naming.ts, stack.ts) with the values of
 * cases F30, P01, P03 and P05: trust rules, maxPreviews, names ≤ 42 characters, the preview spec.
 */
import { describe, expect, it } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import type { PullRequestPreview } from '../../src/api/v1alpha1.ts';
import { MAX_STACK_NAME, previewStackName } from '../../src/preview/naming.ts';
import { planSync, untrustedReason, type KnownPull } from '../../src/preview/plan.ts';
import { applyMergePatch, mergePatchBetween, previewStack } from '../../src/preview/stack.ts';

const sha = (c: string): string => c.repeat(40);

function pull(number: number, over: Partial<KnownPull> = {}): KnownPull {
  return {
    number,
    headSHA: sha('a'),
    headRef: `feature-${String(number)}`,
    baseRef: 'main',
    fork: false,
    author: 'alice',
    association: 'COLLABORATOR',
    labels: [],
    webURL: `https://git.example.com/acme/app/pulls/${String(number)}`,
    ...over,
  };
}

const prp = (spec: Partial<PullRequestPreview['spec']> = {}): PullRequestPreview => ({
  apiVersion: 'notification.pko.dev/v1alpha1',
  kind: 'PullRequestPreview',
  metadata: { name: 'previews', namespace: 'team', uid: 'prp-uid' },
  spec: { stackRef: { name: 'app' }, providerRef: { name: 'gitea' }, ...spec },
});

describe('previewStackName', () => {
  it('is <base>-pr-<number> when that fits in 42 characters', () => {
    expect(previewStackName('app', 7)).toBe('app-pr-7');
    const base = 'a'.repeat(MAX_STACK_NAME - '-pr-7'.length);
    expect(previewStackName(base, 7)).toBe(`${base}-pr-7`);
  });

  it('shortens a long base with a hash, stays ≤ 42, a DNS label, and different bases stay different', () => {
    const a = previewStackName('payments-infrastructure-production-eu-west-1', 12345);
    const b = previewStackName('payments-infrastructure-production-eu-west-2', 12345);
    for (const n of [a, b]) {
      expect(n.length).toBeLessThanOrEqual(MAX_STACK_NAME);
      expect(n).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(n.endsWith('-pr-12345')).toBe(true);
    }
    expect(a).not.toBe(b);
    expect(previewStackName('payments-infrastructure-production-eu-west-1', 12345)).toBe(a);
    // A cut that would end in '-' drops it.
    expect(previewStackName(`${'x'.repeat(25)}-${'y'.repeat(20)}`, 1)).not.toMatch(/--/);
  });
});

describe('trust (F30)', () => {
  it('refuses a fork by default and says why; an explicit allowForks lets it through', () => {
    const p = pull(10, { fork: true, headRef: 'main' });
    expect(untrustedReason(p, undefined)).toContain('fork');
    expect(untrustedReason(p, { allowForks: true })).toBeUndefined();
  });

  it('refuses an author without write access by default (NONE, CONTRIBUTOR); OWNER, MEMBER, COLLABORATOR pass', () => {
    for (const a of ['NONE', 'CONTRIBUTOR', 'FIRST_TIME_CONTRIBUTOR', 'FIRST_TIMER'] as const)
      expect(untrustedReason(pull(1, { association: a, author: 'bob' }), undefined)).toContain(
        `its author bob has association ${a}`,
      );
    for (const a of ['OWNER', 'MEMBER', 'COLLABORATOR'] as const)
      expect(untrustedReason(pull(1, { association: a }), undefined)).toBeUndefined();
    expect(
      untrustedReason(pull(1, { association: 'CONTRIBUTOR' }), { authorAssociations: ['CONTRIBUTOR'] }),
    ).toBeUndefined();
  });

  it('requires every required label', () => {
    const trust = { requiredLabels: ['preview', 'safe'] };
    expect(untrustedReason(pull(1, { labels: ['preview'] }), trust)).toContain("lacks the label 'safe'");
    expect(untrustedReason(pull(1, { labels: [] }), trust)).toContain("labels 'preview', 'safe'");
    expect(untrustedReason(pull(1, { labels: ['safe', 'preview', 'x'] }), trust)).toBeUndefined();
  });
});

describe('planSync', () => {
  it('creates previews for trusted PRs, none for untrusted ones (F30)', () => {
    const plan = planSync({
      pulls: [pull(1), pull(2, { fork: true }), pull(3, { association: 'NONE' })],
      trust: undefined,
      maxPreviews: 5,
      existing: [],
    });
    expect(plan.create.map((p) => p.number)).toEqual([1]);
    expect(plan.verdicts.map((v) => [v.pull.number, v.kind])).toEqual([
      [1, 'preview'],
      [2, 'untrusted'],
      [3, 'untrusted'],
    ]);
    expect(plan.remove).toEqual([]);
  });

  it('P01: a preview whose PR lost the required label is removed with the reason; the label back recreates it', () => {
    const existing = [{ number: 7, stackName: 'app-pr-7', headSHA: sha('a') }];
    const trust = { requiredLabels: ['preview'] };
    const without = planSync({ pulls: [pull(7)], trust, maxPreviews: 5, existing });
    expect(without.remove).toHaveLength(1);
    const why = without.remove[0]?.why;
    expect(why !== 'gone' && why?.kind === 'untrusted' ? why.reason : '').toContain(
      "lacks the label 'preview'",
    );
    const back = planSync({ pulls: [pull(7, { labels: ['preview'] })], trust, maxPreviews: 5, existing: [] });
    expect(back.create.map((p) => p.number)).toEqual([7]);
  });

  it('P03: a preview whose PR no longer targets the branch (not listed) is removed as gone', () => {
    const plan = planSync({
      pulls: [],
      trust: undefined,
      maxPreviews: 5,
      existing: [{ number: 9, stackName: 'app-pr-9', headSHA: sha('a') }],
    });
    expect(plan.remove).toEqual([
      { preview: { number: 9, stackName: 'app-pr-9', headSHA: sha('a') }, why: 'gone' },
    ]);
  });

  it('a new head commit updates the preview; the same one changes nothing', () => {
    const existing = [{ number: 4, stackName: 'app-pr-4', headSHA: sha('a') }];
    expect(
      planSync({ pulls: [pull(4, { headSHA: sha('b') })], trust: undefined, maxPreviews: 5, existing })
        .update,
    ).toEqual([{ pull: pull(4, { headSHA: sha('b') }), stackName: 'app-pr-4' }]);
    const same = planSync({ pulls: [pull(4)], trust: undefined, maxPreviews: 5, existing });
    expect([same.create, same.update, same.remove]).toEqual([[], [], []]);
  });

  it('maxPreviews: existing previews keep their slot, then the lowest numbers; the rest wait and say why', () => {
    const plan = planSync({
      pulls: [pull(1), pull(2), pull(3), pull(8)],
      trust: undefined,
      maxPreviews: 2,
      existing: [{ number: 8, stackName: 'app-pr-8', headSHA: sha('a') }],
    });
    expect(plan.create.map((p) => p.number)).toEqual([1]);
    const waiting = plan.verdicts.filter((v) => v.kind === 'waiting');
    expect(waiting.map((v) => v.pull.number)).toEqual([2, 3]);
    expect(waiting[0]?.kind === 'waiting' ? waiting[0].reason : '').toContain(
      '2 previews already run (spec.maxPreviews)',
    );
    // Lowered below what runs: the highest-ranked keep theirs, the others are removed and wait.
    const lowered = planSync({
      pulls: [pull(1), pull(8)],
      trust: undefined,
      maxPreviews: 1,
      existing: [
        { number: 1, stackName: 'app-pr-1', headSHA: sha('a') },
        { number: 8, stackName: 'app-pr-8', headSHA: sha('a') },
      ],
    });
    expect(lowered.remove.map((r) => [r.preview.number, r.why === 'gone' ? 'gone' : r.why.kind])).toEqual([
      [8, 'waiting'],
    ]);
  });
});

describe('the preview Stack', () => {
  const base: Stack = {
    metadata: { name: 'app', namespace: 'team' },
    spec: {
      stack: 'acme/app/prod',
      projectRepo: 'https://git.example.com/acme/app.git',
      branch: 'refs/heads/main',
      destroyOnFinalize: true,
      envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'p', key: 'k' } } },
      resyncFrequencySeconds: 60,
    },
  };

  it('P05: a fork PR whose head branch is "main" pins its head SHA, has no branch and is named by the number', () => {
    const p = pull(10, { fork: true, headRef: 'main', headSHA: sha('f') });
    const s = previewStack(base, prp(), p, 'https://git.example.com/acme/app.git');
    expect(s.metadata.name).toBe('app-pr-10');
    expect(s.spec).toMatchObject({
      commit: sha('f'),
      preview: true,
      projectRepo: base.spec?.projectRepo,
    });
    expect(s.spec && 'branch' in s.spec).toBe(false);
    // The base's destroyOnFinalize: true is not copied; absent is PKO's false.
    expect(s.spec && 'destroyOnFinalize' in s.spec).toBe(false);
    expect(s.metadata.annotations?.['notification.pko.dev/head-ref']).toBe('main');
  });

  it('copies the base spec, applies overrides, and owns it; controller fields win over overrides', () => {
    const s = previewStack(
      base,
      prp({
        stackOverrides: {
          labels: { team: 'x' },
          annotations: { note: 'y' },
          spec: {
            resyncFrequencySeconds: 3600,
            preview: false,
            commit: 'nope',
            branch: 'dev',
            envRefs: null,
          },
        },
      }),
      pull(3),
      'https://git.example.com/acme/app.git',
    );
    expect(s.spec).toEqual({
      stack: 'acme/app/prod',
      projectRepo: 'https://git.example.com/acme/app.git',
      resyncFrequencySeconds: 3600,
      preview: true,
      commit: sha('a'),
      workspaceReclaimPolicy: 'Retain',
    });
    expect(s.metadata.labels).toEqual({
      team: 'x',
      'notification.pko.dev/pull-request-preview': 'previews',
      'notification.pko.dev/pull-request': '3',
    });
    expect(s.metadata.annotations).toMatchObject({
      note: 'y',
      'notification.pko.dev/pull-request-url': pull(3).webURL,
    });
    expect(s.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'notification.pko.dev/v1alpha1',
        kind: 'PullRequestPreview',
        name: 'previews',
        uid: 'prp-uid',
        controller: true,
      },
    ]);
  });

  it('merge patches: applying the computed patch turns one spec into the other', () => {
    const from = { a: 1, b: { c: 2, d: 3 }, e: [1, 2], gone: true };
    const to = { a: 1, b: { c: 5 }, e: [2], added: 'x' };
    const patch = mergePatchBetween(from, to);
    expect(patch).toEqual({ gone: null, b: { c: 5, d: null }, e: [2], added: 'x' });
    expect(applyMergePatch(from, patch)).toEqual(to);
    expect(mergePatchBetween(to, to)).toBeUndefined();
  });
});
