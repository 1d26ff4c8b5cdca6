/**
 * The preview webhook receiver with the controller as real OS processes (test/support/
 * controller-process.ts) on the test control plane:
 * - B11: inside a memory cgroup with the shipped Deployment's limit (config/manager/manager.yaml;
 *   the same approach as bench/flux.ts) and its V8 flags, 400 concurrent anonymous requests each
 *   streaming 1 MiB − 1 byte to /hooks/no-such-ns/no-such-name are refused unread, the process
 *   stays up within the limit (cgroup peak and sampled RSS), a generic-webhook delivery arrives
 *   meanwhile, and no log line is written per refused request. Without a writable cgroup the
 *   test measures RSS only and says so.
 * - R08 and B13 with two replicas under leader election (one Lease) and a restart, against the
 *   GitHub contract server: the same signed `opened` delivery twice at the leader, once at the
 *   other replica, 20 times more with new delivery ids, and again at both after the leader was
 *   replaced gives one sync (counted as the forge's pull-request listings), one preview Stack,
 *   one comment and one status per state, every answer 2xx; a signed push to the base branch
 *   sets `pulumi.com/reconciliation-request` once however often it is resent (the base Stack is
 *   written once: no extra PKO run); a signed push for another repository does nothing; a new
 *   delivery at the replica that does not lead makes the leader sync (the hand-off).
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Stack } from '../../src/api/pko.ts';
import { errorStatusCode } from '../../src/kube/client.ts';
import { installAdmission } from '../support/admission.ts';
import { createTestNamespace, kubeConfig, waitFor } from '../support/cluster.ts';
import { GROUP, Objects, VERSION, bindControllerRole } from '../support/controller.ts';
import { startControllerProcess, stopAll, type ControllerProcess } from '../support/controller-process.ts';
import { deploymentLimitMiB, memoryCgroup } from '../support/memory-cgroup.ts';
import { shippedNode } from '../../bench/shipped.ts';
import { PkoSimulator } from '../support/pko.ts';
import { startReceiver } from '../support/receiver.ts';
import { startGitHubServer } from '../forge/github/server.ts';

const MiB = 1024 * 1024;
const sha = (c: string): string => c.repeat(40);
const sha256 = (body: string): string => createHash('sha256').update(body).digest('hex');

afterAll(async () => {
  await stopAll();
});

/** Starts a controller process with the webhook receiver on a free port; resolves when ready. */
async function controller(
  ns: string,
  opts: { args?: string[]; env?: Record<string, string>; cgroupDir?: string; nodeArgs?: string[] } = {},
): Promise<{ p: ControllerProcess; webhookPort: number }> {
  await bindControllerRole();
  const p = await startControllerProcess({
    kubeconfig: inject('controllerKubeconfig'),
    args: [`--watch-namespace=${ns}`, '--preview-webhook-bind-address=127.0.0.1:0', ...(opts.args ?? [])],
    env: opts.env ?? {},
    ...(opts.cgroupDir !== undefined ? { cgroupDir: opts.cgroupDir } : {}),
    ...(opts.nodeArgs !== undefined ? { nodeArgs: opts.nodeArgs } : {}),
  });
  const started = await p.waitForLog((r) => r['msg'] === 'controller started', 1_000);
  const webhookPort = started['previewWebhookPort'];
  if (typeof webhookPort !== 'number' || webhookPort === 0) throw new Error('no previewWebhookPort');
  await p.waitReady(60_000);
  return { p, webhookPort };
}

/** `pkonc_preview_webhook_requests_total` of a process, by result. */
async function webhookCounts(p: ControllerProcess): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${String(p.metricsPort)}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^pkonc_preview_webhook_requests_total\{result="([a-z_]+)"\} (\d+)$/gm))
    out[m[1] ?? ''] = Number(m[2]);
  return out;
}

/**
 * Anonymous requests over raw sockets, all at once: each sends headers declaring `length` bytes,
 * then the body in 64 KiB writes (with backpressure) except its last byte, and waits until every
 * request has done so (or was closed; at most `holdMs`) before sending that byte — so a receiver
 * that buffers bodies holds all of them at the same time, as a slow attacker makes it. Resolves
 * when all are closed, with each answer's status (undefined when the connection ended without
 * one) and the bytes written.
 */
async function flood(
  port: number,
  path: string,
  count: number,
  length: number,
  holdMs: number,
): Promise<{ status?: number; sent: number }[]> {
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  let arrived = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const timer = setTimeout(release, holdMs);
  const arrive = (): void => {
    if (++arrived === count) release();
  };
  const one = (): Promise<{ status?: number; sent: number }> =>
    new Promise((resolve) => {
      let answer = '';
      let sent = 0;
      let closed = false;
      let counted = false;
      const once = (): void => {
        if (!counted) {
          counted = true;
          arrive();
        }
      };
      const s = connect(port, '127.0.0.1');
      s.setEncoding('latin1');
      s.on('data', (d: string) => {
        if (answer.length < 64) answer += d;
      });
      s.on('error', () => undefined);
      s.on('close', () => {
        closed = true;
        once();
        const m = /^HTTP\/1\.1 (\d{3})/.exec(answer);
        resolve({ ...(m ? { status: Number(m[1]) } : {}), sent });
      });
      s.on('connect', () => {
        s.write(
          `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${String(length)}\r\n\r\n`,
        );
        const pump = (): void => {
          while (!closed && sent < length - 1) {
            const n = Math.min(chunk.length, length - 1 - sent);
            sent += n;
            if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
              s.once('drain', pump);
              return;
            }
          }
          if (closed) return;
          once();
          void released.then(() => {
            if (!closed) {
              sent += 1;
              s.end('a');
            }
          });
        };
        pump();
      });
    });
  try {
    return await Promise.all(Array.from({ length: count }, one));
  } finally {
    clearTimeout(timer);
  }
}

describe('B11: anonymous load on the webhook receiver (controller process in the Deployment memory limit)', () => {
  it('400 concurrent 1 MiB − 1 byte requests to an unknown target: all refused, the process stays up within the limit, a delivery arrives meanwhile, no log line per request', async () => {
    const ns = await createTestNamespace('wh-load');
    const obj = new Objects(ns);
    const receiver = await startReceiver();
    const shipped = shippedNode(fileURLToPath(new URL('../..', import.meta.url)));
    const limitBytes = deploymentLimitMiB() * MiB;
    const cg = memoryCgroup('pko-nc-webhook-load', limitBytes);
    if (typeof cg === 'string') console.log(`${cg}: measuring the process's RSS against the limit instead`);
    try {
      await obj.provider('hook', { type: 'generic', address: `${receiver.url}/hook` });
      await obj.alert('all', { providerRef: { name: 'hook' }, eventSources: [{ kind: 'Stack' }] });
      const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
      await sim.createStack('app', { git: { projectRepo: 'https://github.com/acme/app', branch: 'main' } });
      const { p, webhookPort } = await controller(ns, {
        // As the image and the Deployment run it: the ENTRYPOINT's flags, the Deployment's NODE_OPTIONS.
        env: { NODE_OPTIONS: shipped.nodeOptions },
        nodeArgs: shipped.flags,
        ...(typeof cg !== 'string' ? { cgroupDir: cg.dir } : {}),
      });
      await obj.waitReady('providers', 'hook');
      const idleRss = await p.rssBytes();
      let peakRss = idleRss;
      const sampler = setInterval(() => {
        p.rssBytes().then(
          (v) => (peakRss = Math.max(peakRss, v)),
          () => undefined,
        );
      }, 50);
      const linesBefore = p.logs().length;
      const t0 = Date.now();
      let answers: { status?: number; sent: number }[];
      try {
        const requests = flood(webhookPort, '/hooks/no-such-ns/no-such-name', 400, MiB - 1, 15_000);
        // A run finishing while the flood is on is delivered.
        const run = await sim.startRun('app', { type: 'up', commit: sha('a') });
        await sim.finishRun(run, 'succeeded');
        answers = await requests;
        await waitFor(
          () =>
            Promise.resolve(
              receiver.requests.some(
                (r) => (JSON.parse(r.body) as { reason?: string }).reason === 'UpdateSucceeded',
              ),
            ),
          { timeoutMs: 30_000, what: 'the UpdateSucceeded delivery' },
        );
      } finally {
        clearInterval(sampler);
      }
      const floodMs = Date.now() - t0;
      const counts = await webhookCounts(p);
      const peakCg = typeof cg !== 'string' ? cg.peakBytes() : undefined;
      console.log(
        `B11: ${String(answers.length)} requests in ${String(floodMs)} ms; answers ${JSON.stringify(
          Object.fromEntries(
            [...new Set(answers.map((a) => String(a.status ?? 'closed')))].map((s) => [
              s,
              answers.filter((a) => String(a.status ?? 'closed') === s).length,
            ]),
          ),
        )}; metric ${JSON.stringify(counts)}; RSS idle ${(idleRss / MiB).toFixed(0)} MiB, peak sampled ${(peakRss / MiB).toFixed(0)} MiB; cgroup peak ${peakCg === undefined ? 'n/a' : `${(peakCg / MiB).toFixed(0)} MiB`} of ${String(limitBytes / MiB)} MiB`,
      );

      // Up, and within the Deployment's limit.
      expect(p.logs().some((l) => l.includes('"msg":"controller started"'))).toBe(true);
      await p.waitReady(5_000);
      expect(peakRss).toBeLessThan(limitBytes);
      if (typeof cg !== 'string') {
        expect(cg.oomKills()).toBe(0);
        expect(cg.peakBytes()).toBeLessThan(limitBytes);
      }
      // Refused: never 2xx; each either 401 or closed (over the connection cap).
      for (const a of answers) expect(a.status === undefined || a.status === 401).toBe(true);
      expect((counts['unknown_target'] ?? 0) + (counts['overloaded'] ?? 0)).toBe(400);
      expect(counts['accepted'] ?? 0).toBe(0);
      // Counted, not logged one line each (a summary line comes at most once a minute).
      const webhookLines = p
        .logs()
        .slice(linesBefore)
        .filter((l) => l.includes('webhook'));
      expect(webhookLines.length).toBeLessThanOrEqual(1);
      p.kill('SIGTERM');
      await p.exited;
    } finally {
      await receiver.close();
      if (typeof cg !== 'string') cg.close();
    }
  }, 180_000);
});

describe('R08/B13: redelivered, replayed and cross-repository deliveries at two replicas and after a restart', () => {
  it('one sync, one preview Stack, one comment, one status per state, every answer 2xx; a resent push runs the base Stack once; another repository does nothing; the replica that does not lead hands over', async () => {
    const gh = await startGitHubServer({
      basePath: '/api/v3',
      repos: ['acme/app', 'acme/other'],
      tokens: { ghp_prev0123456789: 'pko-bot' },
    });
    gh.addPullRequest('acme/app', { number: 7, headSha: sha('a'), author: 'alice', association: 'MEMBER' });
    const ns = await createTestNamespace('wh-r08');
    const obj = new Objects(ns);
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    const secret = randomBytes(12).toString('hex');
    const repo = (name: string): Record<string, string> => ({
      full_name: `acme/${name}`,
      clone_url: `${gh.origin}/acme/${name}.git`,
      html_url: `${gh.origin}/acme/${name}`,
    });
    const opened = JSON.stringify({
      action: 'opened',
      number: 7,
      pull_request: { number: 7 },
      repository: repo('app'),
    });
    const push = (name: string, after: string): string =>
      JSON.stringify({ ref: 'refs/heads/main', after, repository: repo(name) });
    let ids = 0;
    const deliver = async (
      port: number,
      event: string,
      body: string,
    ): Promise<{ status: number; text: string }> => {
      const res = await fetch(`http://127.0.0.1:${String(port)}/hooks/${ns}/previews`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': event,
          'x-github-delivery': `id-${String(++ids)}`,
          'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
        },
        body,
      });
      return { status: res.status, text: (await res.text()).trim() };
    };
    const listings = (): number => gh.log.filter((r) => r.operationId === 'pulls/list').length;
    /** Waits until the listing count has not moved for 3 s; returns it. */
    const settled = async (): Promise<number> => {
      let last = listings();
      let since = Date.now();
      return waitFor(
        () => {
          const now = listings();
          if (now !== last) {
            last = now;
            since = Date.now();
          }
          return Promise.resolve(Date.now() - since >= 3_000 ? now : undefined);
        },
        { timeoutMs: 60_000, what: 'no more listings for 3 s' },
      );
    };
    const baseStack = (): Promise<Stack> => sim.getStack('app');
    const election = [
      '--leader-elect',
      `--leader-election-namespace=${ns}`,
      '--leader-election-lease-duration=8s',
      '--leader-election-renew-deadline=6s',
      '--leader-election-retry-period=1s',
      '--cluster-name=e2e',
    ];
    try {
      await obj.secret('gh', { token: 'ghp_prev0123456789' });
      await obj.secret('hook', { token: secret });
      await obj.provider('gh', { type: 'github', address: `${gh.origin}/acme`, secretRef: { name: 'gh' } });
      await obj.alert('gh', { providerRef: { name: 'gh' }, eventSources: [{ kind: 'Stack' }] });
      await sim.createStack('app', { git: { projectRepo: `${gh.origin}/acme/app.git`, branch: 'main' } });
      // reconcileBaseOnPush is honoured only while the shipped admission policy checks it (confused deputy, as B10).
      await installAdmission();
      const replicas = await Promise.all(
        ['replica-1', 'replica-2'].map((id) => controller(ns, { args: election, env: { POD_NAME: id } })),
      );
      const leader = await Promise.race(
        replicas.map((r) => r.p.waitForLog((l) => l['msg'] === 'became leader', 60_000).then(() => r)),
      );
      const follower = replicas.find((r) => r !== leader);
      if (follower === undefined) throw new Error('no second replica');
      await obj.custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'pullrequestpreviews',
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'PullRequestPreview',
          metadata: { name: 'previews' },
          spec: {
            stackRef: { name: 'app' },
            providerRef: { name: 'gh' },
            interval: '10m',
            webhook: { secretRef: { name: 'hook' }, reconcileBaseOnPush: true },
          },
        },
      });
      const preview = await waitFor(
        async () => {
          try {
            return await sim.getStack('app-pr-7');
          } catch (err) {
            if (errorStatusCode(err) === 404) return undefined;
            throw err;
          }
        },
        { timeoutMs: 60_000, what: 'the preview Stack of #7' },
      );
      // Its run posts a status per state and the comment.
      const run = await sim.startRun('app-pr-7', { type: 'preview', commit: sha('a') });
      await waitFor(
        () => Promise.resolve(gh.statuses('acme/app', sha('a')).some((s) => s.state === 'pending')),
        { timeoutMs: 60_000, what: 'the pending status on #7' },
      );
      await sim.finishRun(run, 'succeeded');
      const bot = (): number => gh.comments('acme/app', 7).filter((c) => c.login === 'pko-bot').length;
      await waitFor(
        () =>
          Promise.resolve(
            gh.statuses('acme/app', sha('a')).some((s) => s.state === 'success') && bot() === 1,
          ),
        {
          timeoutMs: 60_000,
          what: 'the success status and the comment on #7',
        },
      );
      const n0 = await settled();

      // R08: the same delivery twice at the leader, once at the other replica: one sync.
      const answers: number[] = [];
      const first = await deliver(leader.webhookPort, 'pull_request', opened);
      expect(first.status).toBe(202);
      await waitFor(() => Promise.resolve(listings() > n0 || undefined), {
        timeoutMs: 30_000,
        what: 'the sync',
      });
      answers.push((await deliver(leader.webhookPort, 'pull_request', opened)).status);
      answers.push((await deliver(follower.webhookPort, 'pull_request', opened)).status);
      // B13: resent 20 times with new delivery ids, to both replicas.
      for (let i = 0; i < 20; i++)
        answers.push((await deliver((i % 2 ? leader : follower).webhookPort, 'pull_request', opened)).status);
      const n1 = await settled();
      expect(n1).toBe(n0 + 1);
      for (const s of answers) expect(s >= 200 && s < 300).toBe(true);
      const prp = (await obj.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'pullrequestpreviews',
        name: 'previews',
      })) as { metadata?: { annotations?: Record<string, string> } };
      expect(prp.metadata?.annotations?.['notification.pko.dev/sync-requested']).toBe(sha256(opened));

      // Restart: the leader goes, the other replica leads, a new replica starts.
      leader.p.kill('SIGTERM');
      await leader.p.exited;
      await follower.p.waitForLog((l) => l['msg'] === 'became leader', 60_000);
      const restarted = await controller(ns, { args: election, env: { POD_NAME: 'replica-3' } });
      const n2 = await settled(); // the new leader syncs every PullRequestPreview once at start
      const again = [
        await deliver(follower.webhookPort, 'pull_request', opened),
        await deliver(restarted.webhookPort, 'pull_request', opened),
      ];
      for (const a of again) expect(a.status >= 200 && a.status < 300).toBe(true);
      expect(await settled()).toBe(n2);
      // One preview Stack, one comment, one status per state.
      const stacks = (await obj.custom.listNamespacedCustomObject({
        group: 'pulumi.com',
        version: 'v1',
        namespace: ns,
        plural: 'stacks',
      })) as { items: Stack[] };
      const owned = stacks.items.filter((s) => s.metadata.name?.startsWith('app-pr-'));
      expect(owned.map((s) => s.metadata.name)).toEqual(['app-pr-7']);
      expect((await sim.getStack('app-pr-7')).metadata.uid).toBe(preview.metadata.uid);
      expect(bot()).toBe(1);
      const states = gh.statuses('acme/app', sha('a')).filter((s) => s.context === `pko/e2e/${ns}/app-pr-7`);
      expect(states.map((s) => s.state).sort()).toEqual(['pending', 'success']);

      // B13: a push to the base branch asks PKO for one run, however often it is resent.
      const pushMain = push('app', sha('c'));
      expect((await deliver(restarted.webhookPort, 'push', pushMain)).status).toBe(202);
      const requested = await waitFor(
        async () => {
          const s = await baseStack();
          return s.metadata.annotations?.['pulumi.com/reconciliation-request'] === sha256(pushMain)
            ? s
            : undefined;
        },
        { timeoutMs: 30_000, what: 'the reconcile request on the base Stack' },
      );
      for (let i = 0; i < 20; i++) {
        const a = await deliver((i % 2 ? follower : restarted).webhookPort, 'push', pushMain);
        expect(a.status >= 200 && a.status < 300).toBe(true);
      }
      // A signed push for another repository: authentic, ignored.
      const pushOther = push('other', sha('d'));
      const other = await deliver(follower.webhookPort, 'push', pushOther);
      expect(other.status).toBe(200);
      expect(other.text).toContain('ignored');
      const n3 = await settled();
      expect((await baseStack()).metadata.resourceVersion).toBe(requested.metadata.resourceVersion);

      // The hand-off: a new delivery at the replica that does not lead makes the leader sync.
      gh.updatePullRequest('acme/app', 7, { headSha: sha('b') });
      const synchronize = JSON.stringify({
        action: 'synchronize',
        number: 7,
        after: sha('b'),
        repository: repo('app'),
      });
      expect((await deliver(restarted.webhookPort, 'pull_request', synchronize)).status).toBe(202);
      await waitFor(
        async () => ((await sim.getStack('app-pr-7')).spec?.commit === sha('b') ? true : undefined),
        {
          timeoutMs: 30_000,
          what: 'the leader synced app-pr-7 to the new head',
        },
      );
      expect(listings()).toBeGreaterThan(n3);
    } finally {
      await stopAll();
      await gh.close();
    }
  }, 300_000);
});
