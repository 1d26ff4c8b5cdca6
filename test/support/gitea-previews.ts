/**
 * What the PullRequestPreview files on a REAL Gitea (test/support/gitea.ts) share: a repository
 * of an organization with the bot as admin and an author as collaborator, a namespace served by
 * the in-process controller (test/support/controller.ts) with its preview webhook receiver, the
 * Secrets, a `gitea` Provider, an Alert for every Stack, the base Stack `app` (PKO v2 shapes,
 * test/support/pko.ts) deploying the repository's `main`, and a PullRequestPreview `previews`
 * on it; Gitea's signed webhook to the receiver is added once the first sync is done.
 */
import { randomBytes } from 'node:crypto';
import { createTestNamespace, kubeConfig, waitFor } from './cluster.ts';
import { Objects, startInProcess, type InProcessController } from './controller.ts';
import type { Gitea, GiteaUser } from './gitea.ts';
import { PkoSimulator, type CreateStackOptions } from './pko.ts';

/** Bound of the wait for the PullRequestPreview's first sync (ms; CPU hogs run beside the suite). */
const FIRST_SYNC_MS = 30_000;

/** Where {@link startGiteaPreviews} sets up. */
export interface GiteaPreviewsOptions {
  /** Prefix of the test namespace. */
  prefix: string;
  /** The organization (exists) and the repository created in it. */
  org: string;
  repo: string;
  /** Admin of the repository (Gitea shows other users' permissions to repository admins only); its token is the Provider's. */
  bot: GiteaUser;
  /** Collaborator (write) of the repository: the pull requests' author. */
  author: GiteaUser;
  /** `--cluster-name` of the controller. */
  cluster: string;
  /** More `spec` of the PullRequestPreview, merged last. */
  prp?: Record<string, unknown>;
  /** Options of the base Stack `app`. */
  stack?: CreateStackOptions;
  /** Gitea webhook events. Default `pull_request`, `push`. */
  events?: string[];
  /** Called with the namespace before the controller starts (bindings it should start with). */
  prepare?: (ns: string) => Promise<void>;
}

/** What {@link startGiteaPreviews} made. Stop `ctl` when done. */
export interface GiteaPreviews {
  ns: string;
  obj: Objects;
  ctl: InProcessController;
  sim: PkoSimulator;
  repo: string;
  /** The webhook's HMAC secret (the Secret `hook`). */
  hookSecret: string;
}

/**
 * Creates `o.repo` and the namespace, starts the controller, creates Secrets `gitea-token` (the
 * bot's token) and `hook`, Provider `gitea` (`<gitea>/<org>`), Alert `all`, the base Stack `app`
 * and — once the Provider is Ready — PullRequestPreview `previews` (interval 10m, so what follows
 * is driven by webhooks), waits (at most 30 s) for its first sync, then adds the webhook. Stops the
 * controller when a step fails.
 */
export async function startGiteaPreviews(gitea: Gitea, o: GiteaPreviewsOptions): Promise<GiteaPreviews> {
  const { org, repo } = o;
  await gitea.createRepo(repo, { org });
  await gitea.addCollaborator(org, repo, o.bot, 'admin');
  await gitea.addCollaborator(org, repo, o.author);
  const ns = await createTestNamespace(o.prefix);
  await o.prepare?.(ns);
  const obj = new Objects(ns);
  const ctl = await startInProcess(ns, {
    flags: [`--cluster-name=${o.cluster}`, '--preview-webhook-bind-address=127.0.0.1:0'],
  });
  try {
    const hookSecret = randomBytes(16).toString('hex');
    await obj.secret('gitea-token', { token: o.bot.token });
    await obj.secret('hook', { token: hookSecret });
    await obj.provider('gitea', {
      type: 'gitea',
      address: `${gitea.url}/${org}`,
      secretRef: { name: 'gitea-token' },
    });
    await obj.alert('all', { providerRef: { name: 'gitea' }, eventSources: [{ kind: 'Stack', name: '*' }] });
    const sim = new PkoSimulator(kubeConfig('admin'), ns, { version: 'v2' });
    await sim.createStack(
      'app',
      { git: { projectRepo: `${gitea.url}/${org}/${repo}.git`, branch: 'main' } },
      o.stack ?? {},
    );
    await obj.waitReady('providers', 'gitea');
    await obj.pullRequestPreview('previews', {
      stackRef: { name: 'app' },
      providerRef: { name: 'gitea' },
      interval: '10m',
      webhook: { secretRef: { name: 'hook' } },
      ...o.prp,
    });
    await waitFor(async () => (await obj.getPullRequestPreview('previews')).status?.lastSyncTime, {
      timeoutMs: FIRST_SYNC_MS,
      what: 'the first sync of PullRequestPreview previews',
    });
    await gitea.addWebhook(org, repo, {
      url: `http://127.0.0.1:${String(ctl.handle.previewWebhookPort)}/hooks/${ns}/previews`,
      secret: hookSecret,
      events: o.events ?? ['pull_request', 'push'],
    });
    return { ns, obj, ctl, sim, repo, hookSecret };
  } catch (err) {
    await ctl.stop();
    throw err;
  }
}
