/**
 * The send façade with the real registry and GitHub notifier against the GitHub contract server
 * (test/forge/github/server.ts): case F20 — a rate limit told to one Provider holds every Provider
 * that shares the credential, with no request before the time GitHub named.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProviderHealth } from '../../src/delivery/health.ts';
import { Sender, type PreparedSend } from '../../src/delivery/send.ts';
import { createGitHubNotifier } from '../../src/forge/github/index.ts';
import { ProviderHttp } from '../../src/notifier/http.ts';
import { limitsFor } from '../../src/provider-types.ts';
import { gitHubContract, startGitHubServer, type GitHubContractServer } from '../forge/github/server.ts';
import { FakeClock } from '../kube/fake-clock.ts';
import { resolved } from '../notifier/fixtures.ts';
import { deliveryAlert, quietLogger, runEvent } from './support.ts';

const COMMIT = 'a'.repeat(40);
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
beforeAll(() => {
  gitHubContract(); // load the OpenAPI description once, outside any test's timeout
}, 60_000);

describe('Sender', () => {
  for (const code of [429, 403] as const) {
    it(`F20: ${code} with Retry-After: 7 holds every Provider using that token for 7 s, then delivers`, async () => {
      const s: GitHubContractServer = await startGitHubServer();
      cleanups.push(() => s.close());
      const token = `ghp_${randomBytes(12).toString('hex')}`;
      s.addToken(token, 'pko-bot');
      const clock = new FakeClock(Date.now());
      const provider = (name: string) =>
        resolved({
          type: 'github',
          name,
          address: 'https://github.com/acme/app',
          apiURL: s.apiBase,
          token,
          secretValues: [token],
        });
      const sender = new Sender({
        ports: {
          notifiers: {
            create: (p) =>
              createGitHubNotifier(
                p,
                { http: new ProviderHttp(p) },
                { now: () => clock.now(), pacing: false },
              ),
            limits: limitsFor,
          },
          health: new ProviderHealth(),
        },
        clusterName: 'prod',
        logger: quietLogger(),
        clock,
      });
      cleanups.push(() => sender.close());
      const never = new AbortController().signal;
      // As delivery runs an attempt (src/delivery/deliver.ts): the credential gate, then the send.
      const attempt = async (p: PreparedSend) => {
        await sender.passGate(p, never);
        return sender.send(p, never, [never]);
      };
      const ev = runEvent('app-198c70e4c21', 'started', {
        commit: COMMIT,
        repository: 'https://github.com/acme/app',
      });
      const one = await sender.prepare(deliveryAlert(), 'team-a/one', provider('one'), ev);
      const two = await sender.prepare(deliveryAlert(), 'team-a/two', provider('two'), ev);
      if (!('notifier' in one) || !('notifier' in two)) throw new Error('not prepared');
      expect(one.credential).toBe(two.credential);

      s.throttle({ status: code, retryAfter: 7 });
      const first = await attempt(one);
      expect(first.kind === 'failed' && [first.error.retryAfterMs, first.error.retryable]).toEqual([
        7_000,
        true,
      ]);
      expect(s.log).toHaveLength(1);

      // The other Provider with the same token waits at the gate: no request to GitHub.
      let done = false;
      const second = attempt(two).then((r) => {
        done = true;
        return r;
      });
      await clock.advance(6_999);
      expect(done).toBe(false);
      expect(s.log).toHaveLength(1);
      await clock.advance(1);
      expect((await second).kind).toBe('sent');
      expect(s.statuses('acme/app', COMMIT).map((x) => x.state)).toEqual(['pending']);
      expect(s.violations).toEqual([]);
    });
  }

  it('a type without a notifier is a final NotImplemented, before anything is sent', async () => {
    const sender = new Sender({
      ports: {
        notifiers: {
          create: () => {
            throw new Error("type 'discord' has no notifier");
          },
          limits: limitsFor,
        },
        health: new ProviderHealth(),
      },
      clusterName: 'prod',
      logger: quietLogger(),
    });
    const p = resolved({ type: 'discord', address: 'https://discord.example/api/webhooks/x' });
    const r = await sender.prepare(deliveryAlert(), 'team-a/hook', p, runEvent('app-198c70e4c21', 'failed'));
    expect('notifier' in r).toBe(false);
    expect(!('notifier' in r) && [r.code, r.retryable]).toEqual(['NotImplemented', false]);
  });
});
