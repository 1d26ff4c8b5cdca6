/**
 * Reads one PKO v2 run's output from its workspace pod's log, through the API server's
 * `pods/log` subresource — the source of a run's change set (docs/workspace-logs.md).
 *
 * PKO v2 runs the Pulumi CLI in the agent of the Workspace's pod: Workspace `<ws>` (named after
 * the Stack; `Update.spec.workspaceName`), StatefulSet `<ws>-workspace`, pod `<ws>-workspace-0`,
 * container `pulumi`; the agent logs each CLI line (PKO v2.9.0 `agent/pkg/server/server.go`).
 * The pod lives across runs, so one run is the part of the log since the Update's `startTime`.
 *
 * `pods/log` is a broad right (any pod's log may hold another application's secrets), so before
 * the log is requested the pod must be the one PKO made for THAT Stack: labels
 * `auto.pulumi.com/component=workspace` and `auto.pulumi.com/workspace-name=<ws>`, and the
 * controller owner chain pod → StatefulSet `<ws>-workspace` → Workspace `<ws>` → the Stack, each
 * link checked by name, kind and uid. The StatefulSet and Workspace are read as metadata only
 * (their specs hold the Stack's environment, which may carry literal secrets). The pod, whose spec
 * holds the same environment, is read whole (its container statuses are needed, which metadata
 * only leaves out; the API has no field selection), and all but its metadata and container
 * states is dropped at once: nothing of its spec is kept or logged. After the read the
 * pod's uid is checked again, so a pod replaced during the read is reported, not trusted.
 *
 * Permissions (namespaced, all `get`): `pods`, `pods/log`, `apps` `statefulsets`,
 * `auto.pulumi.com` `workspaces` — config/components/workspace-logs/, docs/install.md.
 *
 * Nothing here throws for an unreadable log: every failure is a {@link WorkspaceLogResult} with a
 * reason and a message that names what to do (never a token, never log content).
 */
import type { KubeConfig } from './kubeconfig.ts';
import type { ObjectMeta, OwnerReference } from '../api/meta.ts';
import type { Stack, Update } from '../api/pko.ts';
import { errorMessage, kubeRequest, kubeStream, KubeApiError, objectPath } from './client.ts';

/** The container of PKO v2's workspace pod that runs the agent (and so the Pulumi CLI). */
export const WORKSPACE_CONTAINER = 'pulumi';
/** PKO v2's label on workspace StatefulSets and pods (value `workspace`). */
export const WORKSPACE_COMPONENT_LABEL = 'auto.pulumi.com/component';
/** PKO v2's label naming the Workspace of a StatefulSet or pod. */
export const WORKSPACE_NAME_LABEL = 'auto.pulumi.com/workspace-name';

/** Default cap on the bytes read from one log (also sent as `limitBytes`): 4 MiB. */
export const DEFAULT_LOG_MAX_BYTES = 4 * 1024 * 1024;
/** Default cap on one line, in UTF-8 bytes; the rest of a longer line is dropped and counted. */
export const DEFAULT_LOG_MAX_LINE_BYTES = 16 * 1024;
/** Default deadline for the whole read (checks and log), ms. */
export const DEFAULT_LOG_TIMEOUT_MS = 30_000;
/** Default deadline for each metadata GET and for the log's response headers, ms. */
export const DEFAULT_LOG_REQUEST_TIMEOUT_MS = 10_000;

const METADATA_ONLY = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/** Which run's log to read: what a PKO v2 Stack and its Update say. */
export interface WorkspaceRun {
  namespace: string;
  /** The Stack's `metadata.name`. */
  stackName: string;
  /** The Stack's `metadata.uid`: the Workspace must be owned by exactly this object. */
  stackUid: string;
  /** `Update.spec.workspaceName` (PKO v2 names the Workspace after the Stack). */
  workspaceName: string;
  /** `Update.status.startTime` (RFC 3339): `sinceTime` of the read, in whole seconds. */
  startTime: string;
}

/**
 * The {@link WorkspaceRun} of `update` (a PKO v2 Update of `stack`), or a sentence saying why
 * there is none: no uid, no namespace, or the Update has not started (no `status.startTime`).
 */
export function workspaceRunOf(stack: Stack, update: Update): WorkspaceRun | string {
  const namespace = stack.metadata.namespace ?? '';
  const stackName = stack.metadata.name ?? '';
  const stackUid = stack.metadata.uid ?? '';
  if (namespace === '' || stackName === '' || stackUid === '')
    return 'the Stack has no namespace, name or uid';
  if ((update.metadata.namespace ?? namespace) !== namespace) return 'the Update is in another namespace';
  const startTime = update.status?.startTime ?? '';
  if (startTime === '' || Number.isNaN(Date.parse(startTime)))
    return 'the Update has not started (no startTime)';
  const workspaceName = update.spec?.workspaceName ?? stackName;
  return { namespace, stackName, stackUid, workspaceName: workspaceName || stackName, startTime };
}

/**
 * A line of the log, without its newline (a trailing `\r` is dropped too), and whether it was
 * cut: longer than `maxLineBytes`, so only its first `maxLineBytes` bytes (at a character
 * boundary) are passed and the rest is never read (counted in `cutLines`). {@link readWorkspaceLog}
 * always passes `cut`; a caller that leaves it out (a test's reader) means a whole line.
 */
export type LogLineSink = (line: string, cut?: boolean) => void | Promise<void>;

export interface WorkspaceLogOptions {
  kubeConfig: KubeConfig;
  /**
   * Keep the log open and pass lines as the agent writes them (`follow=true`) until `signal`
   * ends the read, the deadline passes, the byte cap is reached or the pod goes away. Use it
   * while the run is in progress: with `workspaceReclaimPolicy: Delete` PKO deletes the pod right
   * after a successful run. Default false: read what is there and return.
   */
  follow?: boolean;
  /** Cap on the bytes read, sent as `limitBytes` and enforced here too. Default 4 MiB. */
  maxBytes?: number;
  /** Cap on one line in UTF-8 bytes (cut at a character boundary). Default 16 KiB. */
  maxLineBytes?: number;
  /** Deadline for the whole read in ms. Default 30 000. */
  timeoutMs?: number;
  /** Deadline for each metadata GET and the log's response headers in ms. Default 10 000. */
  requestTimeoutMs?: number;
  /**
   * Ends the read when aborted, keeping what was read (`end: 'stopped'`): e.g. once the Update
   * is complete and a short grace period has passed, when following.
   */
  signal?: AbortSignal;
}

/** Why a run's log could not be read. */
export type WorkspaceLogUnavailableReason =
  /** A permission is missing: see `permission`. */
  | 'Forbidden'
  /** No pod `<ws>-workspace-0`: deleted after the run (`workspaceReclaimPolicy: Delete`) or not made yet. */
  | 'PodNotFound'
  /** The pod was created after the run started (or changed during the read): the run's lines were in its predecessor's log. */
  | 'PodReplaced'
  /** The pod is not the one PKO made for this Stack's Workspace: refused, nothing was read. */
  | 'NotOwned'
  /** The log holds no line since the run's start: rotated by the kubelet, or nothing logged yet. */
  | 'LogEmpty'
  /** The deadline passed (or `signal` ended the read) before a line arrived. */
  | 'Timeout'
  /** Anything else the API server or the node answered (message says what). */
  | 'Failed';

/** The permission a `Forbidden` result needs (namespaced, verb `get`). */
export interface MissingPermission {
  verb: 'get';
  /** API group: '' (core), `apps` or `auto.pulumi.com`. */
  apiGroup: string;
  /** `pods`, `pods/log`, `statefulsets` or `workspaces`. */
  resource: string;
  namespace: string;
}

export interface WorkspaceLogUnavailable {
  ok: false;
  reason: WorkspaceLogUnavailableReason;
  /** One sentence for a condition or Event: what happened and what to do. No secrets, no log content. */
  message: string;
  /** Set for `Forbidden`. */
  permission?: MissingPermission;
  /** The pod, when it was found. */
  pod?: string;
  /** Lines passed to the sink before the failure (only `PodReplaced` after a read, else 0): not this run's. */
  lines: number;
}

/** How a read that passed lines ended. */
export type WorkspaceLogEnd =
  /** The log (or, following, the pod's container) ended. */
  | 'eof'
  /** `maxBytes` was reached; later lines were not read. */
  | 'byteLimit'
  /** The deadline passed. */
  | 'deadline'
  /** `signal` ended the read. */
  | 'stopped'
  /** The connection broke after some lines. */
  | 'interrupted';

export interface WorkspaceLogRead {
  ok: true;
  pod: string;
  /** Lines passed to the sink. */
  lines: number;
  /** Bytes of log read (at most `maxBytes`). */
  bytes: number;
  /** Lines longer than `maxLineBytes`, passed cut. */
  cutLines: number;
  end: WorkspaceLogEnd;
  /**
   * The `pulumi` container (re)started after the run started: lines it wrote before are in the
   * previous container's log and were not read.
   */
  restartedDuringRun: boolean;
  /**
   * The read ended inside a line (no newline after its last bytes): that fragment was dropped.
   * At `end: 'eof'` this means the node broke off mid-line.
   */
  droppedFragment: boolean;
  /** One sentence on how the read ended (for logs, conditions). */
  message: string;
}

export type WorkspaceLogResult = WorkspaceLogRead | WorkspaceLogUnavailable;

interface PodLike {
  metadata: ObjectMeta;
  status?: {
    containerStatuses?: {
      name: string;
      state?: { running?: { startedAt?: string }; terminated?: { startedAt?: string } };
    }[];
  };
}

/** `sinceTime` for `pods/log`: the instant cut to whole seconds, `YYYY-MM-DDTHH:MM:SSZ`. */
export function sinceTimeOf(startTime: string): string {
  const ms = Date.parse(startTime);
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Name of the workspace pod of Workspace `ws`: StatefulSet `<ws>-workspace`, ordinal 0. */
export function workspacePodName(ws: string): string {
  return `${ws}-workspace-0`;
}

function controllerOf(meta: ObjectMeta): OwnerReference | undefined {
  return (meta.ownerReferences ?? []).find((o) => o.controller === true);
}

function owned(
  meta: ObjectMeta,
  kind: string,
  apiGroup: string,
  name: string,
  uid?: string,
): string | undefined {
  const o = controllerOf(meta);
  const what = `${kind} ${name}`;
  if (!o) return `it has no controller owner (expected ${what})`;
  const group = o.apiVersion.includes('/') ? o.apiVersion.slice(0, o.apiVersion.indexOf('/')) : '';
  if (o.kind !== kind || group !== apiGroup || o.name !== name) {
    return `its controller is ${o.kind} ${o.name}, not ${what}`;
  }
  if (uid !== undefined && o.uid !== uid)
    return `its controller ${what} has another uid than the ${kind} found`;
  return undefined;
}

/** A result that passed no line to the sink (`lines`: only `PodReplaced` after a read has some). */
function unavailable(
  pod: string,
  reason: WorkspaceLogUnavailableReason,
  message: string,
  lines = 0,
): WorkspaceLogUnavailable {
  return { ok: false, reason, pod, lines, message };
}

interface Ctx {
  o: WorkspaceLogOptions;
  run: WorkspaceRun;
  pod: string;
  deadline: AbortSignal;
}

/** The result for a failed API call (`permission` names what a 403 lacks). */
function fromError(
  ctx: Ctx,
  err: unknown,
  permission: Omit<MissingPermission, 'namespace' | 'verb'>,
): WorkspaceLogUnavailable {
  const { run, pod } = ctx;
  const code = err instanceof KubeApiError ? err.statusCode : 0;
  if (code === 403) {
    const perm: MissingPermission = { verb: 'get', ...permission, namespace: run.namespace };
    const res = perm.apiGroup === '' ? perm.resource : `${perm.resource}.${perm.apiGroup}`;
    return {
      ...unavailable(
        pod,
        'Forbidden',
        `cannot read the workspace log of Stack ${run.namespace}/${run.stackName}: the controller may not get ${res} in namespace ${run.namespace}; grant the ClusterRole pko-notification-controller-workspace-logs there with a RoleBinding (config/components/workspace-logs, docs/install.md)`,
      ),
      permission: perm,
    };
  }
  if (ctx.deadline.aborted || ctx.o.signal?.aborted === true) {
    return unavailable(
      pod,
      'Timeout',
      `reading the workspace log of Stack ${run.namespace}/${run.stackName} timed out`,
    );
  }
  return unavailable(
    pod,
    'Failed',
    `cannot read the workspace log of Stack ${run.namespace}/${run.stackName}: ${errorMessage(err).slice(0, 300)}`,
  );
}

/** The pod after the ownership checks, or the refusal. */
async function checkedPod(ctx: Ctx): Promise<PodLike | WorkspaceLogUnavailable> {
  const { o, run, pod } = ctx;
  const kc = o.kubeConfig;
  const timeoutMs = o.requestTimeoutMs ?? DEFAULT_LOG_REQUEST_TIMEOUT_MS;
  const get = <T>(path: string, accept?: string): Promise<T> =>
    kubeRequest<T>(kc, {
      method: 'GET',
      path,
      timeoutMs,
      signal: ctx.deadline,
      ...(accept ? { accept } : {}),
    });
  const ns = run.namespace;
  const refuse = (why: string): WorkspaceLogUnavailable =>
    unavailable(
      pod,
      'NotOwned',
      `refused to read pod ${ns}/${pod}: it is not the workspace pod of Stack ${ns}/${run.stackName} (${why})`,
    );

  let p: PodLike;
  try {
    // Whole (the API has no field selection, and metadata-only leaves out the container statuses
    // the restart check needs); only metadata and container states are kept, the spec (the
    // Stack's environment) is dropped here.
    const whole = await get<PodLike>(
      objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns, name: pod }),
    );
    p = {
      metadata: whole.metadata,
      ...(whole.status?.containerStatuses
        ? {
            status: {
              containerStatuses: whole.status.containerStatuses.map((c) => ({
                name: c.name,
                ...(c.state ? { state: c.state } : {}),
              })),
            },
          }
        : {}),
    };
  } catch (err) {
    if (err instanceof KubeApiError && err.statusCode === 404) {
      return unavailable(
        pod,
        'PodNotFound',
        `the workspace pod ${ns}/${pod} of Stack ${run.stackName} does not exist: deleted after the run (workspaceReclaimPolicy: Delete) or not created yet`,
      );
    }
    return fromError(ctx, err, { apiGroup: '', resource: 'pods' });
  }
  const labels = p.metadata.labels ?? {};
  if (
    labels[WORKSPACE_COMPONENT_LABEL] !== 'workspace' ||
    labels[WORKSPACE_NAME_LABEL] !== run.workspaceName
  ) {
    return refuse(
      `labels ${WORKSPACE_COMPONENT_LABEL}=workspace and ${WORKSPACE_NAME_LABEL}=${run.workspaceName} missing`,
    );
  }
  const stsName = `${run.workspaceName}-workspace`;
  const podOwner = owned(p.metadata, 'StatefulSet', 'apps', stsName);
  if (podOwner !== undefined) return refuse(podOwner);

  let sts: { metadata: ObjectMeta };
  try {
    sts = await get(
      objectPath({ group: 'apps', version: 'v1', plural: 'statefulsets', namespace: ns, name: stsName }),
      METADATA_ONLY,
    );
  } catch (err) {
    if (err instanceof KubeApiError && err.statusCode === 404)
      return refuse(`its StatefulSet ${stsName} does not exist`);
    return fromError(ctx, err, { apiGroup: 'apps', resource: 'statefulsets' });
  }
  if (sts.metadata.uid !== controllerOf(p.metadata)?.uid)
    return refuse(`its owner is not the StatefulSet ${stsName} that exists`);
  const stsOwner = owned(sts.metadata, 'Workspace', 'auto.pulumi.com', run.workspaceName);
  if (stsOwner !== undefined) return refuse(`StatefulSet ${stsName}: ${stsOwner}`);

  let ws: { metadata: ObjectMeta };
  try {
    ws = await get(
      objectPath({
        group: 'auto.pulumi.com',
        version: 'v1alpha1',
        plural: 'workspaces',
        namespace: ns,
        name: run.workspaceName,
      }),
      METADATA_ONLY,
    );
  } catch (err) {
    if (err instanceof KubeApiError && err.statusCode === 404)
      return refuse(`its Workspace ${run.workspaceName} does not exist`);
    return fromError(ctx, err, { apiGroup: 'auto.pulumi.com', resource: 'workspaces' });
  }
  if (ws.metadata.uid !== controllerOf(sts.metadata)?.uid) {
    return refuse(
      `StatefulSet ${stsName} is owned by another Workspace ${run.workspaceName} than the one that exists`,
    );
  }
  const wsOwner = owned(ws.metadata, 'Stack', 'pulumi.com', run.stackName, run.stackUid);
  if (wsOwner !== undefined) return refuse(`Workspace ${run.workspaceName}: ${wsOwner}`);
  return p;
}

/** A failure of the caller's sink (ends the read as `Failed`, not as a broken connection). */
class SinkError extends Error {
  constructor(cause: unknown) {
    super('the line sink failed', { cause });
  }
}

/** Cuts `bytes` to at most `max` bytes at a UTF-8 character boundary. */
function cutUtf8(bytes: Uint8Array, max: number): Uint8Array {
  if (bytes.byteLength <= max) return bytes;
  let end = max;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}

/**
 * Reads the log of `run` from its workspace pod through `pods/log` (container `pulumi`,
 * `sinceTime` = the run's start in whole seconds, `limitBytes` = `maxBytes`, `follow` when
 * asked), passing each line to `sink` in order and awaiting it (a slow sink slows the read; the
 * deadline still holds). Memory: one line (≤ `maxLineBytes`) plus one network chunk.
 *
 * Lines passed belong to the run only when the result is `ok`: a `PodReplaced` result after the
 * read means the pod changed while it was read, and its lines must be discarded.
 *
 * Never throws (a throwing sink ends the read as `Failed`).
 */
export async function readWorkspaceLog(
  run: WorkspaceRun,
  sink: LogLineSink,
  opts: WorkspaceLogOptions,
): Promise<WorkspaceLogResult> {
  const pod = workspacePodName(run.workspaceName);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_LOG_TIMEOUT_MS;
  const deadline = AbortSignal.timeout(timeoutMs);
  const ctx: Ctx = { o: opts, run, pod, deadline };
  try {
    return await readChecked(ctx, sink);
  } catch (err) {
    return unavailable(
      pod,
      'Failed',
      `reading pod ${run.namespace}/${pod}'s log failed: ${errorMessage(err).slice(0, 300)}`,
    );
  }
}

async function readChecked(ctx: Ctx, sink: LogLineSink): Promise<WorkspaceLogResult> {
  const { o, run, pod, deadline } = ctx;
  const ns = run.namespace;
  const checked = await checkedPod(ctx);
  if ('ok' in checked) return checked;
  const podUid = checked.metadata.uid;
  const started = Date.parse(sinceTimeOf(run.startTime));
  const createdAt = String(checked.metadata.creationTimestamp ?? '');
  const created = Date.parse(createdAt);
  if (!Number.isNaN(created) && created > started) {
    return unavailable(
      pod,
      'PodReplaced',
      `the workspace pod ${ns}/${pod} was created at ${createdAt}, after the run started at ${run.startTime}: the run's log was in the pod it replaced`,
    );
  }
  const status = checked.status?.containerStatuses?.find((c) => c.name === WORKSPACE_CONTAINER);
  const containerStart = Date.parse(
    status?.state?.running?.startedAt ?? status?.state?.terminated?.startedAt ?? '',
  );
  const restartedDuringRun = !Number.isNaN(containerStart) && containerStart > started;

  const maxBytes = Math.max(1, Math.floor(o.maxBytes ?? DEFAULT_LOG_MAX_BYTES));
  const maxLine = Math.max(1, Math.floor(o.maxLineBytes ?? DEFAULT_LOG_MAX_LINE_BYTES));
  const stop = o.signal;
  const signal = stop ? AbortSignal.any([stop, deadline]) : deadline;
  let body: ReadableStream<Uint8Array>;
  try {
    body = await kubeStream(o.kubeConfig, {
      path: `${objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns, name: pod })}/log`,
      query: {
        container: WORKSPACE_CONTAINER,
        sinceTime: sinceTimeOf(run.startTime),
        limitBytes: maxBytes,
        ...(o.follow === true ? { follow: true } : {}),
      },
      signal,
      headersTimeoutMs: o.requestTimeoutMs ?? DEFAULT_LOG_REQUEST_TIMEOUT_MS,
    });
  } catch (err) {
    if (err instanceof KubeApiError && err.statusCode === 404) {
      return unavailable(
        pod,
        'PodNotFound',
        `the workspace pod ${ns}/${pod} went away before its log was read`,
      );
    }
    return fromError(ctx, err, { apiGroup: '', resource: 'pods/log' });
  }

  const decoder = new TextDecoder('utf-8', { fatal: false });
  let lines = 0;
  let bytes = 0;
  let cutLines = 0;
  let end: WorkspaceLogEnd = 'eof';
  let brokeWith = '';
  // The line being assembled: at most maxLine bytes kept; `cut` once more arrived.
  let parts: Uint8Array[] = [];
  let partLen = 0;
  const line = { cut: false };
  const emit = async (): Promise<void> => {
    let buf: Uint8Array = Buffer.concat(parts, partLen);
    if (buf.byteLength > 0 && buf[buf.byteLength - 1] === 0x0d) buf = buf.subarray(0, buf.byteLength - 1);
    parts = [];
    partLen = 0;
    const wasCut = line.cut;
    if (wasCut) cutLines++;
    line.cut = false;
    lines++;
    try {
      await sink(decoder.decode(buf), wasCut);
    } catch (err) {
      throw new SinkError(err);
    }
  };
  const take = (chunk: Uint8Array): void => {
    if (line.cut) return;
    const room = maxLine - partLen;
    if (chunk.byteLength > room) {
      const kept = cutUtf8(Buffer.concat([...parts, chunk.subarray(0, room + 4)]), maxLine);
      parts = [kept];
      partLen = kept.byteLength;
      line.cut = true;
      return;
    }
    // A copy: a view would keep the whole network chunk alive while the line is assembled.
    parts.push(chunk.slice());
    partLen += chunk.byteLength;
  };

  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let chunk = value;
      if (bytes + chunk.byteLength > maxBytes) chunk = chunk.subarray(0, maxBytes - bytes);
      bytes += chunk.byteLength;
      let start = 0;
      for (;;) {
        const nl = chunk.indexOf(0x0a, start);
        if (nl < 0) break;
        take(chunk.subarray(start, nl));
        await emit();
        start = nl + 1;
      }
      if (start < chunk.byteLength) take(chunk.subarray(start));
      if (bytes >= maxBytes) {
        end = 'byteLimit';
        break;
      }
    }
  } catch (err) {
    if (err instanceof SinkError) throw err.cause;
    if (stop?.aborted === true) end = 'stopped';
    else if (deadline.aborted) end = 'deadline';
    else {
      end = 'interrupted';
      brokeWith = errorMessage(err).slice(0, 200);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  // The agent ends every line with a newline, so text after the last one is a fragment: the byte
  // cap cut it, the read was stopped, or the node broke off (the API server ends its own answer
  // cleanly then, so that looks like the end of the log). Dropped, never passed as a line.
  const droppedFragment = partLen > 0 || line.cut;
  if (end === 'eof' && bytes >= maxBytes) end = 'byteLimit';

  // The pod must still be the one checked: a replacement in between would have served its own log.
  try {
    const now = await kubeRequest<{ metadata: ObjectMeta }>(o.kubeConfig, {
      method: 'GET',
      path: objectPath({ group: '', version: 'v1', plural: 'pods', namespace: ns, name: pod }),
      accept: METADATA_ONLY,
      timeoutMs: o.requestTimeoutMs ?? DEFAULT_LOG_REQUEST_TIMEOUT_MS,
    });
    if (now.metadata.uid !== podUid) {
      return unavailable(
        pod,
        'PodReplaced',
        `the workspace pod ${ns}/${pod} was replaced while its log was read: the lines read are not trusted`,
        lines,
      );
    }
  } catch (err) {
    // Gone after the read (workspaceReclaimPolicy: Delete right after the run): the lines came from the checked pod.
    if (!(err instanceof KubeApiError && err.statusCode === 404))
      return fromError(ctx, err, { apiGroup: '', resource: 'pods' });
  }

  if (lines === 0) {
    if (end === 'eof' || end === 'byteLimit') {
      return unavailable(
        pod,
        'LogEmpty',
        `the log of pod ${ns}/${pod} holds no line since ${sinceTimeOf(run.startTime)}: rotated by the kubelet, or the run has not logged yet`,
      );
    }
    if (end === 'interrupted')
      return unavailable(pod, 'Failed', `the log of pod ${ns}/${pod} broke off: ${brokeWith}`);
    return unavailable(pod, 'Timeout', `no line of pod ${ns}/${pod}'s log arrived before the read ended`);
  }
  const how: Record<WorkspaceLogEnd, string> = {
    eof: 'to its end',
    byteLimit: `up to the cap of ${maxBytes} bytes (later lines not read)`,
    deadline: `until the deadline of ${o.timeoutMs ?? DEFAULT_LOG_TIMEOUT_MS} ms`,
    stopped: 'until stopped',
    interrupted: `until the connection broke (${brokeWith})`,
  };
  const notes = [
    cutLines > 0 ? `${cutLines} line(s) longer than ${maxLine} bytes cut` : '',
    droppedFragment && end === 'eof'
      ? 'the log ended inside a line (the node broke off?): that part was dropped'
      : '',
    restartedDuringRun
      ? `container ${WORKSPACE_CONTAINER} restarted during the run: its earlier lines are not in this log`
      : '',
  ].filter((s) => s !== '');
  return {
    ok: true,
    pod,
    lines,
    bytes,
    cutLines,
    end,
    restartedDuringRun,
    droppedFragment,
    message: `read ${lines} line(s) of pod ${ns}/${pod}'s log since ${sinceTimeOf(run.startTime)} ${how[end]}${notes.length > 0 ? `; ${notes.join('; ')}` : ''}`,
  };
}
