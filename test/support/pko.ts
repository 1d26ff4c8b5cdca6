/**
 * A stand-in for the Pulumi Kubernetes Operator in integration tests: writes `Stack` and
 * `Update` objects — and their `/status` — through the real API server in the shapes PKO v1.16
 * and v2.x write them. Nothing here talks to Pulumi or runs a program. Real PKO v1.16 and v2.9
 * run in the `real-pko` test project (test/realpko/); their recordings are in
 * test/fixtures/realpko/ and test/source/replay.test.ts replays them through derivation.
 *
 * What is modelled, per version:
 * - v2 (`version: 'v2'`, `minor` default 9): a run is an `Update` (`auto.pulumi.com/v1alpha1`)
 *   named `<stack>-<hex millis>`, labelled `pulumi.com/component: stack` and
 *   `pulumi.com/stack-name: <stack>`, owned by the Stack's Workspace (controller) and the Stack,
 *   carrying PKO's finalizer while it is the Stack's current run. Order of writes as PKO: Stack
 *   `Reconciling/StackProcessing`, then Stack `currentUpdate`, then the Update is created, then
 *   its status (`message`, `outputs`, `permalink` empty; no `startTime`). A completed Update has
 *   `permalink` and `outputs` (both `""` when none) and a `message`: the CLI text on failure
 *   (`Failed` reason `Unknown`, as PKO's update controller writes for a failed `pulumi
 *   up`/`preview`; no start or end time), `spec.message` JSON-quoted after a successful
 *   `up`/`destroy` (`"Initial stack update"`), `""` after a successful preview. Then PKO moves
 *   the result into the Stack's `status.lastUpdate` (with `message` and `failures` on failure; the
 *   outputs are kept) and sets the kstatus conditions. From minor 8 on: `Stalled/UpdateFailed`
 *   after 3 failures, `Reconciling/PreviewFailed` for failed previews; retries are new Updates
 *   whose `spec.message` is `Backoff time elapsed: <cooldown>` ({@link syncMessage}).
 * - v1 (`version: 'v1'`): no Update objects (and no Update CRD on a real v1 cluster). One
 *   reconcile that runs the CLI ({@link PkoSimulator.v1Run}) writes `Reconciling/StackProcessing`,
 *   then `status.lastUpdate` {state, lastAttemptedCommit, lastSuccessfulCommit, permalink,
 *   lastResyncTime} and the conditions; a failure leaves `lastSuccessfulCommit` and puts the CLI
 *   text only in `Reconciling/RetryingAfterFailure` (v1 never writes `lastUpdate.message`); the
 *   outputs are set on success and kept on failure. The very first reconcile also adds the
 *   finalizer `finalizer.stack.pulumi.com` and writes an empty `lastUpdate: {}` before the run.
 *   PKO v1 retries a failed run at once and forever: call `v1Run` again (each retry is a full
 *   run with a new `lastResyncTime`). {@link PkoSimulator.v1Poll}: a branch poll that finds
 *   nothing new (StackProcessing, then Ready again, `lastUpdate` untouched).
 *   {@link PkoSimulator.v1Reset}: the branch reset to the deployed commit after a failure (PKO
 *   marks `state: succeeded` without running; `lastAttemptedCommit` stays the broken one).
 *
 * Verified against a real operator (test/realpko/, recordings in test/fixtures/realpko/, compared
 * shape by shape in test/support/pko-fidelity.int.test.ts):
 * - PKO v1.16.0: every v1 shape and write order above, the retry loop, no-op polls, the reset,
 *   `continueResyncOnCommitMatch` re-runs, the finalizer and the empty first `lastUpdate`.
 * - PKO v2.9.0 with a `file://` backend and git sources: run, failure, retry (`Backoff time
 *   elapsed`), `Stalled` after 3 failures (`failures` counted per generation and reconcile
 *   request: the first failure after a new generation or sync request is written as 0),
 *   `PreviewFailed`, resync runs, destroy on deletion (no commit: PKO destroys from the saved
 *   state), the Update finalizer, the quoted success messages, `Failed` reason `Unknown`.
 * Not verified against a real operator (modelled from PKO's source and docs): v2 minors before
 *   9 (e.g. unbounded retries before 2.8), permalinks (Pulumi Cloud backends only), Flux and
 *   Program sources, `refresh` runs, aborted/canceled Updates, `Failed` reasons other than
 *   `Unknown`/`UpdateSucceeded`, stalls other than `UpdateFailed`.
 *
 * Not modelled: Workspace objects and pods (no Workspace CRD in the test plane: the Update's
 * Workspace owner reference carries a stable made-up uid), Program objects, `spec.updateTemplate`,
 * Kubernetes Events, TTL expiry (call {@link PkoSimulator.deleteUpdate}).
 *
 * Every status write is a JSON merge patch on `/status`, computed as the difference between
 * the current status and the one PKO would hold afterwards (PKO itself uses server-side apply
 * with a dedicated field manager; the stored result is the same). Fields this class does not
 * manage (e.g. ones a test added) are left alone.
 *
 * Needs a KubeConfig allowed to create/patch Stacks, Updates (and their status), Flux
 * GitRepositories, Secrets and — only when the GitRepository CRD is missing — CRDs (admin).
 */
import { createHash, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Condition, OwnerReference } from '../../src/api/meta.ts';
import {
  STACK_GROUP,
  STACK_PLURAL,
  STACK_VERSION,
  UPDATE_GROUP,
  UPDATE_PLURAL,
  UPDATE_VERSION,
  type Stack,
  type StackLastUpdate,
  type StackStatus,
  type Update,
  type UpdateStatus,
} from '../../src/api/pko.ts';
import { errorStatusCode, kubeRequest, objectPath, type ResourceRef } from '../../src/kube/client.ts';
import { installCRDs, readCRDs } from '../../src/kube/crds.ts';
import { kubeTime, setCondition } from '../../src/kube/status.ts';

/** Flux GitRepository API (source-controller v1). */
export const FLUX_SOURCE_GROUP = 'source.toolkit.fluxcd.io';
export const FLUX_SOURCE_VERSION = 'v1';
export const GITREPOSITORY_PLURAL = 'gitrepositories';
/** Annotation that makes PKO start a new run (value: any string). */
export const RECONCILE_REQUEST_ANNOTATION = 'pulumi.com/reconciliation-request';
/** Finalizer PKO ≥ 2.x puts on Stacks and (recent releases) on the current Update. */
export const PKO_FINALIZER = 'finalizer.stack.pulumi.com';

const GITREPOSITORY_CRD_FILE = fileURLToPath(
  new URL('../crds/source.toolkit.fluxcd.io_gitrepositories.yaml', import.meta.url),
);

/** PKO major version whose object shapes are written. */
export type PkoVersion = 'v1' | 'v2';

/** Time source: milliseconds since the epoch. `systemClock` from src/kube/clock.ts fits. */
export interface SimClock {
  now(): number;
}

export interface PkoSimulatorOptions {
  version: PkoVersion;
  /** v2 minor release (default 9). ≥ 8: bounded retries (Stalled after 3 failures), PreviewFailed. */
  minor?: number;
  /** Used for Update names (`<stack>-<hex millis>`) and every timestamp. Default `Date.now`. */
  clock?: SimClock;
  /**
   * v2 only: put {@link PKO_FINALIZER} on each Update while it is the Stack's current run and
   * remove it once the result is in the Stack's status, as PKO 2.9 does. Default true.
   */
  updateFinalizer?: boolean;
}

/** Where the Stack's program comes from (exactly one, as PKO requires). */
export type StackSource =
  | { git: { projectRepo: string; branch?: string; commit?: string; repoDir?: string } }
  | {
      flux: {
        /** Name of the Flux GitRepository (created when missing). */
        gitRepositoryName: string;
        /** `spec.url` of the GitRepository. */
        url: string;
        /** `spec.ref.branch` (default `main`). */
        branch?: string;
        /** When set, also write `status.artifact` with this revision (`main@sha1:<sha>`). */
        revision?: string;
        /** `spec.fluxSource.dir`. */
        dir?: string;
      };
    }
  | { program: { name: string } };

export interface CreateStackOptions {
  /** `spec.stack`: `org/project/stack` or a bare stack name. Default `acme/<name>/dev`. */
  stack?: string;
  /** `spec.preview` (PKO ≥ 2.3: preview-only Stack). */
  preview?: boolean;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** `spec.resyncFrequencySeconds` (PKO treats < 60 as 60). */
  resyncFrequencySeconds?: number;
  /** `spec.continueResyncOnCommitMatch`. */
  continueResyncOnCommitMatch?: boolean;
  /** More `spec` fields, merged last (e.g. `envRefs`, `destroyOnFinalize`). */
  spec?: Record<string, unknown>;
}

/** Operation of a v2 run (`Update.spec.type`). */
export type RunType = 'up' | 'preview' | 'destroy' | 'refresh';

export interface StartRunOptions {
  type: RunType;
  /**
   * The revision exactly as PKO stores it: 40-hex SHA (git), `main@sha1:<sha>` (Flux), `"3"`
   * (Program generation), `sha256:…` (v2.0 Flux digest).
   */
  commit: string;
  /**
   * `Update.spec.message`. Default: what PKO writes for the Stack's state — `Initial stack update`,
   * `New stack generation: N`, `Sync request: "x"`, `New commit detected: "<rev>"`,
   * `Resync time elapsed: 1m0s` or `Backoff time elapsed: 30s`.
   */
  message?: string;
  /**
   * The Update's name instead of PKO's `<stackName>-<hex millis>` — e.g. one created by hand or by
   * another tool (`<stack>-manual-refresh-000000001`; case B04).
   */
  name?: string;
}

/** A v2 run started by {@link PkoSimulator.startRun}. */
export interface RunHandle {
  namespace: string;
  /** Stack object name. */
  stackName: string;
  stackUid: string;
  /** `spec.stack` of the Stack (`org/project/stack`). */
  pulumiStack: string;
  /** Update object name, `<stackName>-<hex millis>`. */
  name: string;
  type: RunType;
  commit: string;
  /** Stack `metadata.generation` the run is for. */
  generation: number;
  /** Value of the reconcile-request annotation the run is for ('' when absent). */
  reconcileRequest: string;
  /** `Update.spec.message`. */
  message: string;
  /** Pulumi Cloud update version the run would get (non-preview runs), for default permalinks. */
  version: number | undefined;
  /** When the update controller started it (RFC 3339; `Update.status.startTime` once it succeeded). */
  startedAt?: string;
}

export type RunOutcome = 'succeeded' | 'failed' | 'aborted';

export interface FinishRunOptions {
  /**
   * `Update.status.permalink` (→ `lastUpdate.permalink`). Default: for a succeeded run of a Stack
   * named `org/project/stack`, `https://app.pulumi.com/<org>/<project>/<stack>/updates/<n>` (or
   * `…/previews/<uuid>`); none otherwise. `null`: none.
   */
  permalink?: string | null;
  /**
   * `Update.status.message` (→ `lastUpdate.message` on failure). Default: the run's spec message
   * on success; on failure `<type> failed: failed to run update: exit status 255` with the CLI
   * output PKO embeds; none when aborted.
   */
  message?: string;
  /** `lastUpdate.failures` override (default: computed as PKO does). */
  failures?: number;
  /** `Failed` condition reason of a failed run (default `Unknown`, what PKO 2.9 writes for a CLI failure). */
  failedReason?: string;
  /** Stack outputs (succeeded `up` only): `status.outputs` and an outputs Secret named by the Update. */
  outputs?: Record<string, unknown>;
}

export interface V1RunOptions {
  commit: string;
  state: 'succeeded' | 'failed';
  /** `lastUpdate.permalink`; default as in {@link FinishRunOptions.permalink}. `null`: none. */
  permalink?: string | null;
  /** Failure text (v1 puts it in the Reconciling condition). */
  message?: string;
  /** Stack outputs written on success (`status.outputs`); kept as they are on failure. */
  outputs?: Record<string, unknown>;
}

/** Result of a completed v2 run. */
export interface FinishedRun {
  update: Update;
  stack: Stack;
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const READY_MSG = 'the stack has been processed and is up to date';
const IN_PROGRESS_MSG = 'reconciliation is in progress';
const STALLED_MSG = 'reconciliation is stalled';
/** v2 `ReconcilingProcessingUpdateMessage`; v1's processing message is taken to be the same. */
const PROCESSING_MSG = 'stack is being processed';
const DEFAULT_FAILURE =
  'failed to run update: exit status 255\ncode: 255\nstdout: Updating (dev):\n\nstderr: error: update failed\n';
const MAX_UPDATE_FAILURES = 3;

/**
 * Simulates PKO for the Stacks of one namespace. Construct with a KubeConfig (admin in tests),
 * the namespace and `{ version }`; see the module comment for what is modelled.
 * Methods throw `KubeApiError` (src/kube/client.ts) when the API server rejects a write
 * (e.g. 422 for a Stack name over 42 characters) and `Error` when called out of order
 * (a v2 method on a v1 simulator, `finishRun` for a finished run, …).
 */
export class PkoSimulator {
  readonly namespace: string;
  readonly version: PkoVersion;
  readonly #kc: KubeConfig;
  readonly #minor: number;
  readonly #clock: SimClock;
  readonly #updateFinalizer: boolean;
  #lastMillis = 0;
  /** Pulumi Cloud update counter per `spec.stack`, for default permalinks. */
  readonly #versions = new Map<string, number>();

  constructor(kc: KubeConfig, namespace: string, opts: PkoSimulatorOptions) {
    this.#kc = kc;
    this.namespace = namespace;
    this.version = opts.version;
    this.#minor = opts.minor ?? 9;
    this.#clock = opts.clock ?? { now: () => Date.now() };
    this.#updateFinalizer = opts.updateFinalizer ?? true;
  }

  // -------------------------------------------------------------------------------------------
  // Objects

  /**
   * Creates a Stack (`pulumi.com/v1`) with `spec.stack` and the given source; for a Flux source
   * also the GitRepository (when missing). No status is written: PKO writes status when it runs.
   * @returns the Stack as stored.
   */
  async createStack(name: string, source: StackSource, opts: CreateStackOptions = {}): Promise<Stack> {
    const spec: Record<string, unknown> = { stack: opts.stack ?? `acme/${name}/dev` };
    if ('git' in source) {
      spec['projectRepo'] = source.git.projectRepo;
      if (source.git.branch !== undefined) spec['branch'] = source.git.branch;
      if (source.git.commit !== undefined) spec['commit'] = source.git.commit;
      if (source.git.repoDir !== undefined) spec['repoDir'] = source.git.repoDir;
    } else if ('flux' in source) {
      const f = source.flux;
      const exists = await this.getGitRepository(f.gitRepositoryName).then(
        () => true,
        (err: unknown) => {
          if (errorStatusCode(err) === 404) return false;
          throw err;
        },
      );
      if (!exists) {
        await this.createGitRepository(f.gitRepositoryName, f.url, {
          ...(f.branch !== undefined ? { branch: f.branch } : {}),
          ...(f.revision !== undefined ? { revision: f.revision } : {}),
        });
      } else if (f.revision !== undefined) {
        await this.setFluxRevision(f.gitRepositoryName, f.revision);
      }
      spec['fluxSource'] = {
        sourceRef: {
          apiVersion: `${FLUX_SOURCE_GROUP}/${FLUX_SOURCE_VERSION}`,
          kind: 'GitRepository',
          name: f.gitRepositoryName,
        },
        ...(f.dir !== undefined ? { dir: f.dir } : {}),
      };
    } else {
      spec['programRef'] = { name: source.program.name };
    }
    if (opts.preview !== undefined) spec['preview'] = opts.preview;
    if (opts.resyncFrequencySeconds !== undefined)
      spec['resyncFrequencySeconds'] = opts.resyncFrequencySeconds;
    if (opts.continueResyncOnCommitMatch !== undefined)
      spec['continueResyncOnCommitMatch'] = opts.continueResyncOnCommitMatch;
    Object.assign(spec, opts.spec);
    return kubeRequest<Stack>(this.#kc, {
      method: 'POST',
      path: objectPath(this.#stackRef()),
      body: {
        apiVersion: `${STACK_GROUP}/${STACK_VERSION}`,
        kind: 'Stack',
        metadata: {
          name,
          ...(opts.labels !== undefined ? { labels: opts.labels } : {}),
          ...(opts.annotations !== undefined ? { annotations: opts.annotations } : {}),
        },
        spec,
      },
    });
  }

  /**
   * Deletes a Stack as a user would, then finalizes it as PKO does when it is not told to destroy
   * (`destroyOnFinalize` unset): removes `finalizer.stack.pulumi.com` without writing status.
   * Resolves once the Stack is gone. A missing Stack is not an error.
   */
  async deleteStack(name: string): Promise<void> {
    try {
      await kubeRequest<unknown>(this.#kc, { method: 'DELETE', path: objectPath(this.#stackRef(name)) });
      const stack = await this.getStack(name);
      const fins = (stack.metadata as { finalizers?: string[] }).finalizers ?? [];
      if (fins.includes(PKO_FINALIZER)) {
        const rest = fins.filter((f) => f !== PKO_FINALIZER);
        await kubeRequest<unknown>(this.#kc, {
          method: 'PATCH',
          path: objectPath(this.#stackRef(name)),
          body: { metadata: { finalizers: rest.length > 0 ? rest : null } },
          contentType: 'application/merge-patch+json',
        });
      }
    } catch (err) {
      if (errorStatusCode(err) !== 404) throw err;
    }
  }

  /** The Stack as stored. @throws KubeApiError 404 when absent. */
  getStack(name: string): Promise<Stack> {
    return kubeRequest<Stack>(this.#kc, { method: 'GET', path: objectPath(this.#stackRef(name)) });
  }

  /** The Stack as stored, or undefined when there is none (404); other errors throw. */
  async findStack(name: string): Promise<Stack | undefined> {
    try {
      return await this.getStack(name);
    } catch (err) {
      if (errorStatusCode(err) === 404) return undefined;
      throw err;
    }
  }

  /** The Update as stored. @throws KubeApiError 404 when absent. */
  getUpdate(name: string): Promise<Update> {
    return kubeRequest<Update>(this.#kc, { method: 'GET', path: objectPath(this.#updateRef(name)) });
  }

  /** Updates of Stack `stackName` (by PKO's `pulumi.com/stack-name` label), oldest first by name. */
  async listUpdates(stackName: string): Promise<Update[]> {
    const list = await kubeRequest<{ items: Update[] }>(this.#kc, {
      method: 'GET',
      path: objectPath(this.#updateRef()),
      query: { labelSelector: `pulumi.com/component=stack,pulumi.com/stack-name=${stackName}` },
    });
    return list.items.sort((a, b) => (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''));
  }

  /**
   * Sets (or clears, with `undefined`) the `pulumi.com/reconciliation-request` annotation, which
   * makes PKO start a new run (`Sync request: "<value>"`). Does not change the generation.
   */
  async requestReconcile(stackName: string, value: string | undefined): Promise<Stack> {
    return kubeRequest<Stack>(this.#kc, {
      method: 'PATCH',
      path: objectPath(this.#stackRef(stackName)),
      body: { metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: value ?? null } } },
      contentType: 'application/merge-patch+json',
    });
  }

  // -------------------------------------------------------------------------------------------
  // Flux

  /**
   * Creates a Flux `GitRepository` (`spec.url`, `spec.interval: 1m0s`, `spec.ref.branch`) and,
   * when `revision` is given, its `status.artifact` as source-controller writes it. Installs the
   * test stand-in CRD first when the API server does not know the kind (runs with PKO_CRDS_DIR).
   */
  async createGitRepository(
    name: string,
    url: string,
    opts: { branch?: string; revision?: string } = {},
  ): Promise<Record<string, unknown>> {
    const body = {
      apiVersion: `${FLUX_SOURCE_GROUP}/${FLUX_SOURCE_VERSION}`,
      kind: 'GitRepository',
      metadata: { name },
      spec: { url, interval: '1m0s', ref: { branch: opts.branch ?? 'main' } },
    };
    const create = (): Promise<Record<string, unknown>> =>
      kubeRequest<Record<string, unknown>>(this.#kc, {
        method: 'POST',
        path: objectPath(this.#gitRepoRef()),
        body,
      });
    let created: Record<string, unknown>;
    try {
      created = await create();
    } catch (err) {
      if (errorStatusCode(err) !== 404) throw err;
      // 404 on the collection: the kind is unknown. Install the stand-in CRD and retry while
      // discovery catches up.
      await installCRDs(this.#kc, await readCRDs([GITREPOSITORY_CRD_FILE]));
      const deadline = Date.now() + 15_000;
      for (;;) {
        try {
          created = await create();
          break;
        } catch (retryErr) {
          if (errorStatusCode(retryErr) !== 404 || Date.now() > deadline) throw retryErr;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
    }
    if (opts.revision !== undefined) return this.setFluxRevision(name, opts.revision);
    return created;
  }

  /** The GitRepository as stored. @throws KubeApiError 404 when absent. */
  getGitRepository(name: string): Promise<Record<string, unknown>> {
    return kubeRequest<Record<string, unknown>>(this.#kc, {
      method: 'GET',
      path: objectPath(this.#gitRepoRef(name)),
    });
  }

  /**
   * Writes the GitRepository's `status` as source-controller does after storing an artifact for
   * `revision` (`<branch>@sha1:<sha>`): `artifact {path, url, revision, digest, lastUpdateTime,
   * size}` and `Ready`/`ArtifactInStorage` = True `Succeeded`.
   */
  async setFluxRevision(name: string, revision: string): Promise<Record<string, unknown>> {
    const repo = await this.getGitRepository(name);
    const meta = (repo['metadata'] ?? {}) as { generation?: number };
    const generation = meta.generation ?? 1;
    const now = this.#time();
    const sha =
      /sha1:([0-9a-f]{40})$/.exec(revision)?.[1] ?? createHash('sha1').update(revision).digest('hex');
    const file = `gitrepository/${this.namespace}/${name}/${sha}.tar.gz`;
    const msg = `stored artifact for revision '${revision}'`;
    const status = {
      observedGeneration: generation,
      artifact: {
        path: file,
        url: `http://source-controller.flux-system.svc.cluster.local./${file}`,
        revision,
        digest: `sha256:${createHash('sha256').update(revision).digest('hex')}`,
        lastUpdateTime: now,
        size: 4096,
      },
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          observedGeneration: generation,
          lastTransitionTime: now,
          reason: 'Succeeded',
          message: msg,
        },
        {
          type: 'ArtifactInStorage',
          status: 'True',
          observedGeneration: generation,
          lastTransitionTime: now,
          reason: 'Succeeded',
          message: msg,
        },
      ],
    };
    return kubeRequest<Record<string, unknown>>(this.#kc, {
      method: 'PATCH',
      path: `${objectPath(this.#gitRepoRef(name))}/status`,
      body: { status },
      contentType: 'application/merge-patch+json',
    });
  }

  // -------------------------------------------------------------------------------------------
  // v2 runs

  /**
   * Starts a v2 run as PKO's stack controller does: Stack status (`observedGeneration`,
   * `observedReconcileRequest`, `currentUpdate {generation, reconcileRequest, name, commit}`,
   * Ready=False `NotReadyInProgress` + Reconciling=True `StackProcessing`), then the Update
   * (spec `workspaceName`, `stackName`, `type`, `ttlAfterCompleted: 24h0m0s`, `message`, …), then —
   * as PKO's update controller — the Update's status (Progressing=True, Failed=False,
   * Complete=False, all reason `Progressing`; `observedGeneration`, and `message`, `outputs`,
   * `permalink` empty, as recorded from PKO 2.9: no `startTime` until the run succeeded).
   * @throws Error when the Stack already has a run in flight (PKO never starts two).
   */
  async startRun(stackName: string, opts: StartRunOptions): Promise<RunHandle> {
    this.#requireVersion('v2', 'startRun');
    const stack = await this.getStack(stackName);
    const inFlight = stack.status?.currentUpdate?.name;
    if (inFlight !== undefined && inFlight !== '') {
      throw new Error(`Stack ${this.namespace}/${stackName} already has a run in flight (${inFlight})`);
    }
    const stackUid = stack.metadata.uid ?? '';
    const generation = stack.metadata.generation ?? 1;
    const reconcileRequest = stack.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION] ?? '';
    const millis = Math.max(this.#clock.now(), this.#lastMillis + 1);
    this.#lastMillis = millis;
    const name = opts.name ?? `${stackName}-${millis.toString(16)}`;
    const message = opts.message ?? syncMessage(stack, opts.commit);
    const pulumiStack = stack.spec?.stack ?? stackName;
    let version: number | undefined;
    if (opts.type !== 'preview') {
      version = (this.#versions.get(pulumiStack) ?? 0) + 1;
      this.#versions.set(pulumiStack, version);
    }
    const run: RunHandle = {
      namespace: this.namespace,
      stackName,
      stackUid,
      pulumiStack,
      name,
      type: opts.type,
      commit: opts.commit,
      generation,
      reconcileRequest,
      message,
      version,
    };

    // 1. Stack status first: PKO marks it processing, then saves currentUpdate before it creates
    // the Update (two writes, as recorded from PKO 2.9).
    const now = this.#now();
    const processing = this.#baseStatus(stack);
    processing.conditions = markReconciling(stack.status?.conditions, 'StackProcessing', PROCESSING_MSG, now);
    const mid = await this.#writeStatus<Stack>(this.#stackRef(stackName), stack.status, processing);
    const status = structuredClone(mid.status ?? {});
    status.currentUpdate = {
      generation,
      ...(reconcileRequest !== '' ? { reconcileRequest } : {}),
      name,
      ...(opts.commit !== '' ? { commit: opts.commit } : {}),
    };
    await this.#writeStatus<Stack>(this.#stackRef(stackName), mid.status, status);

    // 2. The Update.
    const owners: OwnerReference[] = [
      {
        apiVersion: `${UPDATE_GROUP}/${UPDATE_VERSION}`,
        kind: 'Workspace',
        name: stackName,
        uid: workspaceUid(stackUid),
        controller: true,
        blockOwnerDeletion: true,
      },
      {
        apiVersion: `${STACK_GROUP}/${STACK_VERSION}`,
        kind: 'Stack',
        name: stackName,
        uid: stackUid,
        blockOwnerDeletion: true,
      },
    ];
    const spec: Record<string, unknown> = {
      workspaceName: stackName,
      stackName: pulumiStack,
      type: opts.type,
      ttlAfterCompleted: '24h0m0s',
      message,
    };
    if (opts.type === 'destroy') {
      spec['runProgram'] = stack.spec?.['runProgram'] === true;
    } else {
      const targets = stack.spec?.['targets'];
      if (Array.isArray(targets)) spec['target'] = targets;
      spec['targetDependents'] = stack.spec?.['targetDependents'] === true;
      spec['refresh'] = stack.spec?.['refresh'] === true;
    }
    const update = await kubeRequest<Update>(this.#kc, {
      method: 'POST',
      path: objectPath(this.#updateRef()),
      body: {
        apiVersion: `${UPDATE_GROUP}/${UPDATE_VERSION}`,
        kind: 'Update',
        metadata: {
          name,
          labels: { 'pulumi.com/component': 'stack', 'pulumi.com/stack-name': stackName },
          ownerReferences: owners,
        },
        spec,
      },
    });
    if (this.#updateFinalizer) {
      await kubeRequest<Update>(this.#kc, {
        method: 'PATCH',
        path: objectPath(this.#updateRef(name)),
        body: { metadata: { finalizers: [PKO_FINALIZER] } },
        contentType: 'application/merge-patch+json',
      });
    }

    // 3. The update controller marks it Progressing.
    const t = this.#time();
    const ugen = update.metadata.generation ?? 1;
    run.startedAt = t;
    const running: UpdateStatus = {
      observedGeneration: ugen,
      message: '',
      outputs: '',
      permalink: '',
      conditions: [
        updCond('Progressing', 'True', 'Progressing', '', ugen, t),
        updCond('Failed', 'False', 'Progressing', '', ugen, t),
        updCond('Complete', 'False', 'Progressing', '', ugen, t),
      ],
    };
    await this.#writeStatus<Update>(this.#updateRef(name), update.status, running);
    return run;
  }

  /**
   * Completes a v2 run. Update status per shared/facts/pko.md:
   * succeeded — Progressing=False `Complete`, Failed=False `UpdateSucceeded`, Complete=True `Updated`;
   * failed — Progressing=False `Complete`, Failed=True `UpdateFailed`, Complete=True `Updated`;
   * aborted — Progressing=False `Failed`, Failed=True `Aborted`, Complete=True `Failed`;
   * plus `permalink` and `outputs` (`""` when none), `message` (the CLI text on failure; the spec
   * message JSON-quoted after a successful up/destroy, `""` after a successful preview) and, for a
   * success only, `startTime` and `endTime` (PKO 2.9 writes neither for a failed run). Then the Stack: `currentUpdate`
   * removed, `lastUpdate {generation, reconcileRequest, name, type, state, message,
   * lastAttemptedCommit, lastSuccessfulCommit, permalink, lastResyncTime, failures}` (empty values
   * omitted, as Go's omitempty does) and the conditions PKO derives: Ready=True
   * `ProcessingCompleted`; or after a failure (aborted counts as failed) Ready=False +
   * Reconciling=True `RetryingAfterFailure` `N update failure(s)` — from minor 8 on
   * `PreviewFailed` `preview failed (N attempt(s))` for previews and Stalled=True `UpdateFailed`
   * once N ≥ 3. `failures` is PKO's count: previous + 1 when the previous result was for the same
   * generation and reconcile request, else 0.
   */
  async finishRun(run: RunHandle, outcome: RunOutcome, opts: FinishRunOptions = {}): Promise<FinishedRun> {
    this.#requireVersion('v2', 'finishRun');
    const before = await this.getUpdate(run.name);
    if (before.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')) {
      throw new Error(`Update ${this.namespace}/${run.name} is already complete`);
    }
    const ugen = before.metadata.generation ?? 1;
    const t = this.#time();
    const permalink =
      opts.permalink === null
        ? undefined
        : (opts.permalink ?? (outcome === 'succeeded' ? defaultPermalink(run) : undefined));
    // PKO 2.9's update controller JSON-quotes the spec message into a successful up/destroy's
    // status and writes none for a successful preview; a failure carries the CLI text.
    const message =
      opts.message ??
      (outcome === 'succeeded'
        ? run.type === 'preview'
          ? ''
          : JSON.stringify(run.message)
        : outcome === 'failed'
          ? `${run.type} failed: ${DEFAULT_FAILURE}`
          : undefined);
    const ustatus: UpdateStatus = { ...(before.status ?? {}), observedGeneration: ugen };
    if (outcome === 'succeeded') {
      ustatus.startTime = run.startedAt ?? t;
      ustatus.endTime = t;
    }
    ustatus.permalink = permalink ?? '';
    if (outcome !== 'aborted') ustatus.outputs = '';
    if (message !== undefined) ustatus.message = message;
    const msg = message ?? '';
    switch (outcome) {
      case 'succeeded':
        ustatus.conditions = [
          updCond('Progressing', 'False', 'Complete', '', ugen, t),
          updCond('Failed', 'False', 'UpdateSucceeded', '', ugen, t),
          updCond('Complete', 'True', 'Updated', '', ugen, t),
        ];
        break;
      case 'failed':
        ustatus.conditions = [
          updCond('Progressing', 'False', 'Complete', '', ugen, t),
          updCond('Failed', 'True', opts.failedReason ?? 'Unknown', '', ugen, t),
          updCond('Complete', 'True', 'Updated', '', ugen, t),
        ];
        break;
      case 'aborted':
        ustatus.conditions = [
          updCond('Progressing', 'False', 'Failed', '', ugen, t),
          updCond('Failed', 'True', 'Aborted', msg, ugen, t),
          updCond('Complete', 'True', 'Failed', '', ugen, t),
        ];
        break;
    }
    let outputsSecret: string | undefined;
    if (outcome === 'succeeded' && run.type === 'up' && opts.outputs !== undefined) {
      outputsSecret = `${run.name}-stack-outputs`;
      await this.#createOutputsSecret(outputsSecret, before, opts.outputs);
      ustatus.outputs = outputsSecret;
    }
    const update = await this.#writeStatus<Update>(this.#updateRef(run.name), before.status, ustatus);

    // The stack controller absorbs the result.
    const stack = await this.getStack(run.stackName);
    const now = this.#now();
    const last = stack.status?.lastUpdate;
    const status = this.#baseStatus(stack);
    delete status.currentUpdate;
    const common: StackLastUpdate = {
      generation: run.generation,
      ...(run.reconcileRequest !== '' ? { reconcileRequest: run.reconcileRequest } : {}),
      name: run.name,
      type: run.type,
    };
    if (outcome === 'succeeded') {
      status.lastUpdate = dropEmpty({
        ...common,
        state: 'succeeded',
        lastAttemptedCommit: run.commit,
        lastSuccessfulCommit: run.commit,
        permalink: permalink ?? '',
        lastResyncTime: kubeTime(now),
      });
      if (opts.outputs !== undefined) status['outputs'] = opts.outputs;
      status.conditions = markReady(stack.status?.conditions, now);
    } else {
      const sameRun =
        last !== undefined &&
        last.generation === run.generation &&
        (last.reconcileRequest ?? '') === run.reconcileRequest;
      const failures = opts.failures ?? (sameRun ? (last.failures ?? 0) + 1 : 0);
      status.lastUpdate = dropEmpty({
        ...common,
        state: 'failed',
        message: message ?? '',
        lastAttemptedCommit: run.commit,
        lastSuccessfulCommit: last?.lastSuccessfulCommit ?? '',
        permalink: permalink ?? '',
        lastResyncTime: kubeTime(now),
        failures,
      });
      const conds = stack.status?.conditions;
      if (this.#minor >= 8 && failures >= MAX_UPDATE_FAILURES) {
        status.conditions = markStalled(
          conds,
          'UpdateFailed',
          `${run.type} failed ${failures} times; not retrying until the spec or source changes`,
          now,
        );
      } else if (this.#minor >= 8 && run.type === 'preview') {
        status.conditions = markReconciling(
          conds,
          'PreviewFailed',
          `preview failed (${failures} attempt(s))`,
          now,
        );
      } else {
        status.conditions = markReconciling(
          conds,
          'RetryingAfterFailure',
          `${failures} update failure(s)`,
          now,
        );
      }
    }
    const stored = await this.#writeStatus<Stack>(this.#stackRef(run.stackName), stack.status, status);
    if (this.#updateFinalizer) await this.#dropUpdateFinalizer(run.name);
    return { update, stack: stored };
  }

  /**
   * Marks the Stack stalled as PKO does: Reconciling removed, Ready=False `NotReadyStalled`
   * `reconciliation is stalled`, Stalled=True `reason`. Default message for `UpdateFailed`:
   * `<type> failed <N> times; not retrying until the spec or source changes` (PKO ≥ 2.8, after 3
   * failures; {@link finishRun} already does this on the third failure). Works for v1 and v2.
   */
  async stall(stackName: string, reason = 'UpdateFailed', message?: string): Promise<Stack> {
    const stack = await this.getStack(stackName);
    const last = stack.status?.lastUpdate;
    const msg =
      message ??
      (reason === 'UpdateFailed'
        ? `${last?.type ?? 'up'} failed ${last?.failures ?? MAX_UPDATE_FAILURES} times; not retrying until the spec or source changes`
        : (STALL_MESSAGES[reason] ?? reason));
    const status = this.#baseStatus(stack);
    status.conditions = markStalled(stack.status?.conditions, reason, msg, this.#now());
    return this.#writeStatus<Stack>(this.#stackRef(stackName), stack.status, status);
  }

  /**
   * Deletes an Update, as its 24 h TTL (or a user) would; removes PKO's finalizer first when
   * present (PKO drops it once the result is in the Stack). A missing Update is not an error.
   */
  async deleteUpdate(run: RunHandle | string): Promise<void> {
    const name = typeof run === 'string' ? run : run.name;
    try {
      await this.#dropUpdateFinalizer(name);
      await kubeRequest<unknown>(this.#kc, { method: 'DELETE', path: objectPath(this.#updateRef(name)) });
    } catch (err) {
      if (errorStatusCode(err) !== 404) throw err;
    }
  }

  /**
   * What PKO does when `continueResyncOnCommitMatch` is set and the resync period elapsed.
   * v2: PKO's `isSynced` reports `Resync time elapsed: <freq>` and the stack controller starts a
   * NEW run (an Update of type `up`, or `preview` for a preview Stack) on the same commit;
   * `lastUpdate.lastResyncTime` changes only when that run completes. So this returns the started
   * run; finish it with {@link finishRun}. v1: the operator re-runs `pulumi up` in-process and
   * rewrites `lastUpdate` (same commits, new `lastResyncTime` and permalink): done here, returns
   * `undefined`.
   * @throws Error unless the last run succeeded (PKO resyncs only succeeded Stacks).
   */
  async resync(stackName: string): Promise<RunHandle | undefined> {
    const stack = await this.getStack(stackName);
    const last = stack.status?.lastUpdate;
    if (last?.state !== 'succeeded') {
      throw new Error(`Stack ${this.namespace}/${stackName}: resync needs a succeeded last update`);
    }
    const commit = last.lastSuccessfulCommit ?? '';
    if (this.version === 'v1') {
      await this.v1Run(stackName, { commit, state: 'succeeded' });
      return undefined;
    }
    return this.startRun(stackName, {
      type: stack.spec?.preview === true ? 'preview' : 'up',
      commit,
      message: `Resync time elapsed: ${goDuration(resyncSeconds(stack))}`,
    });
  }

  // -------------------------------------------------------------------------------------------
  // v1

  /**
   * One PKO v1.16 reconcile that runs `pulumi up`: first Ready=False `NotReadyInProgress` +
   * Reconciling=True `StackProcessing` (Stalled removed); on the Stack's very first reconcile
   * then the finalizer `finalizer.stack.pulumi.com` and an empty `lastUpdate: {}`; then the
   * outcome — succeeded: `lastUpdate = {state, lastAttemptedCommit, lastSuccessfulCommit,
   * permalink, lastResyncTime}`, `outputs` (when given) and Ready=True `ProcessingCompleted`;
   * failed: `lastUpdate` keeps `lastSuccessfulCommit` and gets `state: failed`, the attempted
   * commit, the permalink (usually none) and `lastResyncTime`, with Reconciling=True
   * `RetryingAfterFailure` carrying the error text; the outputs stay. `observedGeneration` (and
   * `observedReconcileRequest` when the annotation is set) come with the outcome. A retry of a
   * failed run is another call (PKO v1 retries at once, with backoff from 5 ms up to 1000 s).
   */
  async v1Run(stackName: string, opts: V1RunOptions): Promise<Stack> {
    this.#requireVersion('v1', 'v1Run');
    const stack = await this.getStack(stackName);
    let mid = await this.#v1Processing(stack);
    if (stack.status?.lastUpdate === undefined) {
      // First reconcile: finalizer, then an empty lastUpdate (recorded from PKO v1.16).
      await this.#addStackFinalizer(stackName);
      mid = await this.#writeStatus<Stack>(this.#stackRef(stackName), mid.status, {
        ...structuredClone(mid.status ?? {}),
        lastUpdate: {},
      });
    }

    const now = this.#now();
    const status = this.#v1Observed(stack, mid.status);
    const pulumiStack = stack.spec?.stack ?? stackName;
    let permalink: string | undefined;
    if (opts.permalink === null) permalink = undefined;
    else if (opts.permalink !== undefined) permalink = opts.permalink;
    else if (opts.state === 'succeeded') {
      const version = (this.#versions.get(pulumiStack) ?? 0) + 1;
      this.#versions.set(pulumiStack, version);
      permalink = cloudPermalink(pulumiStack, 'up', version);
    }
    if (opts.state === 'succeeded') {
      status.lastUpdate = dropEmpty({
        state: 'succeeded',
        lastAttemptedCommit: opts.commit,
        lastSuccessfulCommit: opts.commit,
        permalink: permalink ?? '',
        lastResyncTime: kubeTime(now),
      });
      if (opts.outputs !== undefined) status['outputs'] = opts.outputs;
      status.conditions = markReady(status.conditions, now);
    } else {
      status.lastUpdate = dropEmpty({
        ...(status.lastUpdate ?? {}),
        state: 'failed',
        lastAttemptedCommit: opts.commit,
        permalink: permalink ?? '',
        lastResyncTime: kubeTime(now),
      });
      status.conditions = markReconciling(
        status.conditions,
        'RetryingAfterFailure',
        opts.message ?? DEFAULT_FAILURE,
        now,
      );
    }
    return this.#writeStatus<Stack>(this.#stackRef(stackName), mid.status, status);
  }

  /**
   * A PKO v1.16 branch poll that finds the deployed commit unchanged (every
   * `resyncFrequencySeconds`, at least 60 s, without `continueResyncOnCommitMatch`):
   * `StackProcessing`, then Ready=True again; `lastUpdate` untouched. Nothing runs.
   */
  async v1Poll(stackName: string): Promise<Stack> {
    this.#requireVersion('v1', 'v1Poll');
    const stack = await this.getStack(stackName);
    if (stack.status?.lastUpdate?.state !== 'succeeded') {
      throw new Error(`Stack ${this.namespace}/${stackName}: a no-op poll needs a succeeded last update`);
    }
    const mid = await this.#v1Processing(stack);
    const status = this.#v1Observed(stack, mid.status);
    status.conditions = markReady(status.conditions, this.#now());
    return this.#writeStatus<Stack>(this.#stackRef(stackName), mid.status, status);
  }

  /**
   * PKO v1.16 after the branch was reset to the deployed commit (`lastSuccessfulCommit`) while
   * the last run had failed: its "commit unchanged" path marks the Stack `state: succeeded` with
   * a new `lastResyncTime` and Ready=True without running anything; `lastAttemptedCommit` stays
   * the broken commit.
   * @throws Error unless the last run failed.
   */
  async v1Reset(stackName: string): Promise<Stack> {
    this.#requireVersion('v1', 'v1Reset');
    const stack = await this.getStack(stackName);
    if (stack.status?.lastUpdate?.state !== 'failed') {
      throw new Error(
        `Stack ${this.namespace}/${stackName}: a reset after a failure needs a failed last update`,
      );
    }
    const mid = await this.#v1Processing(stack);
    const now = this.#now();
    const status = this.#v1Observed(stack, mid.status);
    status.lastUpdate = { ...(status.lastUpdate ?? {}), state: 'succeeded', lastResyncTime: kubeTime(now) };
    status.conditions = markReady(status.conditions, now);
    return this.#writeStatus<Stack>(this.#stackRef(stackName), mid.status, status);
  }

  /** v1's first write of a reconcile: Ready=False + Reconciling=True `StackProcessing`. */
  async #v1Processing(stack: Stack): Promise<Stack> {
    const inProgress = structuredClone(stack.status ?? {});
    inProgress.conditions = markReconciling(
      stack.status?.conditions,
      'StackProcessing',
      PROCESSING_MSG,
      this.#now(),
    );
    return this.#writeStatus<Stack>(this.#stackRef(stack.metadata.name ?? ''), stack.status, inProgress);
  }

  /** A copy of `status` with v1's observed markers for `stack`. */
  #v1Observed(stack: Stack, status: StackStatus | undefined): StackStatus {
    const out = structuredClone(status ?? {});
    out.observedGeneration = stack.metadata.generation ?? 1;
    const rr = stack.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION];
    if (rr !== undefined) out['observedReconcileRequest'] = rr;
    return out;
  }

  async #addStackFinalizer(stackName: string): Promise<void> {
    const stack = await this.getStack(stackName);
    const fins = (stack.metadata as { finalizers?: string[] }).finalizers ?? [];
    if (fins.includes(PKO_FINALIZER)) return;
    await kubeRequest<unknown>(this.#kc, {
      method: 'PATCH',
      path: objectPath(this.#stackRef(stackName)),
      body: { metadata: { finalizers: [...fins, PKO_FINALIZER] } },
      contentType: 'application/merge-patch+json',
    });
  }

  // -------------------------------------------------------------------------------------------
  // internals

  #requireVersion(v: PkoVersion, method: string): void {
    if (this.version !== v)
      throw new Error(`${method} simulates PKO ${v}; this simulator is ${this.version}`);
  }

  #now(): Date {
    return new Date(this.#clock.now());
  }

  #time(): string {
    return kubeTime(this.#now());
  }

  #stackRef(name?: string): ResourceRef {
    return {
      group: STACK_GROUP,
      version: STACK_VERSION,
      plural: STACK_PLURAL,
      namespace: this.namespace,
      ...(name !== undefined ? { name } : {}),
    };
  }

  #updateRef(name?: string): ResourceRef {
    return {
      group: UPDATE_GROUP,
      version: UPDATE_VERSION,
      plural: UPDATE_PLURAL,
      namespace: this.namespace,
      ...(name !== undefined ? { name } : {}),
    };
  }

  #gitRepoRef(name?: string): ResourceRef {
    return {
      group: FLUX_SOURCE_GROUP,
      version: FLUX_SOURCE_VERSION,
      plural: GITREPOSITORY_PLURAL,
      namespace: this.namespace,
      ...(name !== undefined ? { name } : {}),
    };
  }

  /** v2 status fields PKO writes on every save: a copy of the current status plus the observed markers. */
  #baseStatus(stack: Stack): StackStatus {
    const status = structuredClone(stack.status ?? {});
    status.observedGeneration = stack.metadata.generation ?? 1;
    status['observedReconcileRequest'] = stack.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION] ?? '';
    return status;
  }

  /**
   * Merge-patches `/status` of `ref` from `current` to `desired` (fields absent from `desired`
   * are deleted with null) and returns the stored object; no request when nothing changes.
   */
  async #writeStatus<T>(ref: ResourceRef, current: object | undefined, desired: object): Promise<T> {
    const patch = mergePatch((current ?? {}) as Json, desired as Json);
    if (isObject(patch) && Object.keys(patch).length === 0) {
      return kubeRequest<T>(this.#kc, { method: 'GET', path: objectPath(ref) });
    }
    return kubeRequest<T>(this.#kc, {
      method: 'PATCH',
      path: `${objectPath(ref)}/status`,
      body: { status: patch },
      contentType: 'application/merge-patch+json',
    });
  }

  async #dropUpdateFinalizer(name: string): Promise<void> {
    const u = await this.getUpdate(name);
    const fins = (u.metadata as { finalizers?: string[] }).finalizers ?? [];
    if (!fins.includes(PKO_FINALIZER)) return;
    const rest = fins.filter((f) => f !== PKO_FINALIZER);
    await kubeRequest<unknown>(this.#kc, {
      method: 'PATCH',
      path: objectPath(this.#updateRef(name)),
      body: { metadata: { finalizers: rest.length > 0 ? rest : null } },
      contentType: 'application/merge-patch+json',
    });
  }

  async #createOutputsSecret(name: string, update: Update, outputs: Record<string, unknown>): Promise<void> {
    const data: Record<string, string> = {};
    const secretKeys: string[] = [];
    for (const [k, v] of Object.entries(outputs)) {
      if (v === '[secret]') secretKeys.push(k);
      data[k] = Buffer.from(JSON.stringify(v)).toString('base64');
    }
    await kubeRequest<unknown>(this.#kc, {
      method: 'POST',
      path: objectPath({ group: '', version: 'v1', plural: 'secrets', namespace: this.namespace }),
      body: {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name,
          annotations: { 'pulumi.com/secrets': JSON.stringify(secretKeys) },
          ownerReferences: [
            {
              apiVersion: `${UPDATE_GROUP}/${UPDATE_VERSION}`,
              kind: 'Update',
              name: update.metadata.name ?? '',
              uid: update.metadata.uid ?? '',
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        type: 'Opaque',
        data,
      },
    });
  }
}

// ---------------------------------------------------------------------------------------------
// PKO's rules, as pure functions

const STALL_MESSAGES: Record<string, string> = {
  SpecInvalid: 'cross-namespace refs are not allowed',
  SourceUnavailable: 'Flux source has no artifact',
  PulumiVersionTooLow: 'IncompatibleConfiguration: pulumi CLI version is too low',
  WorkspaceFailed: 'WorkspaceFailed: the workspace pod failed',
  NamespaceTerminating: 'namespace is terminating',
};

function updCond(
  type: string,
  status: Condition['status'],
  reason: string,
  message: string,
  observedGeneration: number,
  lastTransitionTime: string,
): Condition {
  return { type, status, observedGeneration, lastTransitionTime, reason, message };
}

/** PKO's `MarkReconcilingCondition`: Stalled removed, Ready=False NotReadyInProgress, Reconciling=True. */
function markReconciling(
  conds: Condition[] | undefined,
  reason: string,
  message: string,
  now: Date,
): Condition[] {
  let list = (conds ?? []).filter((c) => c.type !== 'Stalled');
  list = setCondition(
    list,
    { type: 'Ready', status: 'False', reason: 'NotReadyInProgress', message: IN_PROGRESS_MSG },
    now,
  );
  return setCondition(list, { type: 'Reconciling', status: 'True', reason, message }, now);
}

/** PKO's `MarkStalledCondition`: Reconciling removed, Ready=False NotReadyStalled, Stalled=True. */
function markStalled(
  conds: Condition[] | undefined,
  reason: string,
  message: string,
  now: Date,
): Condition[] {
  let list = (conds ?? []).filter((c) => c.type !== 'Reconciling');
  list = setCondition(
    list,
    { type: 'Ready', status: 'False', reason: 'NotReadyStalled', message: STALLED_MSG },
    now,
  );
  return setCondition(list, { type: 'Stalled', status: 'True', reason, message }, now);
}

/** PKO's `MarkReadyCondition`: Reconciling and Stalled removed, Ready=True ProcessingCompleted. */
function markReady(conds: Condition[] | undefined, now: Date): Condition[] {
  const list = (conds ?? []).filter((c) => c.type !== 'Reconciling' && c.type !== 'Stalled');
  return setCondition(
    list,
    { type: 'Ready', status: 'True', reason: 'ProcessingCompleted', message: READY_MSG },
    now,
  );
}

/** Go's `time.Duration.String()` for whole seconds: `30s`, `1m0s`, `4m30s`, `24h0m0s`. */
export function goDuration(seconds: number): string {
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h > 0) return `${h}h${m}m${sec}s`;
  if (m > 0) return `${m}m${sec}s`;
  return `${sec}s`;
}

/** PKO's resync period: `spec.resyncFrequencySeconds`, at least 60 s. */
function resyncSeconds(stack: Stack): number {
  const v = stack.spec?.['resyncFrequencySeconds'];
  return typeof v === 'number' && v >= 60 ? v : 60;
}

/** PKO's retry cooldown after `failures` failures: 10 s × 3^failures, capped (24 h or spec). */
function cooldownSeconds(stack: Stack, failures: number): number {
  const capSpec = stack.spec?.['retryMaxBackoffDurationSeconds'];
  const cap = typeof capSpec === 'number' && capSpec > 0 ? capSpec : 24 * 3600;
  let d = 10;
  for (let i = 0; i < failures && d < cap; i++) d *= 3;
  return Math.min(d, cap);
}

/** `Update.spec.message` PKO v2 writes for a run on `commit` (its `isSynced` reasons). */
export function syncMessage(stack: Stack, commit: string): string {
  const last = stack.status?.lastUpdate;
  const generation = stack.metadata.generation ?? 1;
  const rr = stack.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION] ?? '';
  if (last === undefined) return 'Initial stack update';
  if (last.generation !== generation) {
    return stack.metadata.deletionTimestamp !== undefined
      ? 'Stack marked for deletion'
      : `New stack generation: ${generation}`;
  }
  if ((last.reconcileRequest ?? '') !== rr) return `Sync request: ${JSON.stringify(rr)}`;
  if (last.state === 'succeeded') {
    if ((last.lastSuccessfulCommit ?? '') !== commit) return `New commit detected: ${JSON.stringify(commit)}`;
    return `Resync time elapsed: ${goDuration(resyncSeconds(stack))}`;
  }
  if ((last.lastAttemptedCommit ?? '') !== commit) return `New commit detected: ${JSON.stringify(commit)}`;
  return `Backoff time elapsed: ${goDuration(cooldownSeconds(stack, last.failures ?? 0))}`;
}

function cloudPermalink(pulumiStack: string, type: RunType, version: number | undefined): string | undefined {
  const parts = pulumiStack.split('/');
  if (parts.length !== 3) return undefined;
  const base = `https://app.pulumi.com/${parts.join('/')}`;
  if (type === 'preview') return `${base}/previews/${randomUUID()}`;
  return version !== undefined ? `${base}/updates/${version}` : undefined;
}

function defaultPermalink(run: RunHandle): string | undefined {
  return cloudPermalink(run.pulumiStack, run.type, run.version);
}

/** A uid for the Stack's (not simulated) Workspace, stable per Stack uid, UUID-shaped. */
function workspaceUid(stackUid: string): string {
  const h = createHash('sha256').update(`workspace:${stackUid}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** Drops '' and 0 values (Go `omitempty`). */
function dropEmpty<T extends object>(obj: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (v !== '' && v !== 0 && v !== undefined) out[k] = v;
  }
  return out as T;
}

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function deepEqual(a: Json, b: Json): boolean {
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => k in b && deepEqual(a[k] as Json, b[k] as Json));
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i] as Json));
  }
  return a === b;
}

/** RFC 7386 merge patch that turns `from` into `to` (arrays and scalars are replaced whole). */
export function mergePatch(from: Json, to: Json): Json {
  if (!isObject(from) || !isObject(to)) return to;
  const patch: Record<string, Json> = {};
  for (const k of Object.keys(from)) if (!(k in to)) patch[k] = null;
  for (const [k, v] of Object.entries(to)) {
    const old = from[k];
    if (old === undefined) patch[k] = v;
    else if (!deepEqual(old, v)) patch[k] = mergePatch(old, v);
  }
  return patch;
}
