/**
 * The change set of a run whose backend is Pulumi Cloud, read from the Pulumi Cloud REST API
 * (docs/changes.md, "Sources"): the second source after the PKO v2 workspace log, and the only
 * one for PKO v1 (no workspace pod).
 *
 * Endpoints (Pulumi Cloud REST API reference, https://www.pulumi.com/docs/reference/cloud-rest-api/
 * "API Basics" and "Stack Updates"; shapes from `sdk/go/common/apitype` of pulumi/pulumi:
 * `updates.go`, `events.go`, `errors.go`):
 * - every request: `Authorization: token <token>`, `Accept: application/vnd.pulumi+8`; a missing
 *   or bad token answers 401; errors are `ErrorResponse` `{code, message}`.
 * - a permalink `…/<org>/<project>/<stack>/updates/<version>`: `GET /api/stacks/{org}/{project}/
 *   {stack}/updates?output-type=service&page=N&pageSize=M` lists updates newest first as
 *   `{updates: [{info: {kind, result, version, resourceChanges, startTime, endTime}, updateID,
 *   version}]}` — the entry of that version gives the counts (`resourceChanges`) and the
 *   `updateID`.
 * - engine events: `GET /api/stacks/{org}/{project}/{stack}/{kind}/{updateID}/events
 *   [?continuationToken=…]` answers `{events: EngineEvent[], continuationToken?}`; a missing or
 *   null token means every event was returned (the same token again with no event: the update is
 *   still running). `{kind}` is `update`, `preview`, `refresh` or `destroy`; a permalink
 *   `…/previews/<uuid>` names a preview's update id directly.
 * - an `EngineEvent` holds one of `resourcePreEvent` / `resOutputsEvent` / `resOpFailedEvent`
 *   (`{metadata: {op, urn, type, old, new, diffs, detailedDiff}}`), `summaryEvent`
 *   (`{resourceChanges, isPreview}`), `diagnosticEvent` (`{severity, message}`), and others not read.
 *
 * Bounded: every request has a deadline and the whole read another; each answer is read up to a
 * byte cap (streamed, the rest cancelled), pages and events are capped, and nothing of the
 * answers is trusted (every field is checked; values are printed with a depth and length bound).
 * A 429 is waited out once when its `Retry-After` fits in the time left. Failures never throw:
 * they give a reason (a sentence without the token) that the caller puts in the change set's note.
 *
 * The permalink is program output (PKO's agent copies the first `Permalink:` line of the CLI's
 * stdout): the caller reads only a run {@link permalinkMismatch} finds to be the Stack's own.
 */
import type { Dispatcher } from 'undici';
import { fetch as undiciFetch } from '../undici.ts';
import {
  DEFAULT_PARSE_LIMITS,
  STEP_OPS,
  type ChangeSet,
  type ParseLimits,
  type ResourceChange,
  type StepOp,
} from '../changes/types.ts';
import { readBounded } from '../text.ts';

/** Where one run lives in Pulumi Cloud, from its permalink. */
export interface CloudRunRef {
  /** API base URL without a trailing slash, e.g. `https://api.pulumi.com`. */
  api: string;
  org: string;
  project: string;
  stack: string;
  /** `/updates/<version>` (an up, refresh or destroy) or `/previews/<update id>`. */
  run: { kind: 'update'; version: number } | { kind: 'preview'; id: string };
}

/** The Pulumi Cloud console host whose API is `https://api.pulumi.com`. */
const CONSOLE_HOST = 'app.pulumi.com';
const SEGMENT = /^[A-Za-z0-9._-]{1,100}$/;
const UUID = /^[0-9A-Fa-f][0-9A-Fa-f-]{7,63}$/;

/**
 * The run a PKO permalink names, or undefined when it is not a Pulumi Cloud permalink.
 * `https://app.pulumi.com/<org>/<project>/<stack>/updates/<n>` or `…/previews/<uuid>` (PKO
 * v1 and v2 write these, ../shared/facts/pko.md) is read at `https://api.pulumi.com`; a
 * permalink on another host is read only when the Stack's `spec.backend` is an http(s) URL — a
 * self-hosted Pulumi Cloud, whose API URL that is — and then at that URL. A Stack whose backend is
 * http(s) is read there whatever the permalink's host (the console and the API have different hosts).
 */
export function cloudRunOf(permalink: string | undefined, backend: unknown): CloudRunRef | undefined {
  if (permalink === undefined || permalink === '') return undefined;
  let url: URL;
  try {
    url = new URL(permalink);
  } catch {
    return undefined;
  }
  let api: string | undefined;
  if (typeof backend === 'string' && /^https?:\/\//i.test(backend)) {
    try {
      const b = new URL(backend);
      // The CLI logs in to `https://app.pulumi.com` at the API's host (PKO's CRD names it the default).
      api =
        b.hostname.toLowerCase() === CONSOLE_HOST
          ? 'https://api.pulumi.com'
          : `${b.origin}${b.pathname.replace(/\/+$/, '')}`;
    } catch {
      return undefined;
    }
  } else if (url.protocol === 'https:' && url.hostname.toLowerCase() === CONSOLE_HOST) {
    api = 'https://api.pulumi.com';
  }
  if (api === undefined) return undefined;
  const parts = url.pathname.split('/').filter((p) => p !== '');
  if (parts.length < 5) return undefined;
  const [org, project, stack, what, id] = parts.slice(-5).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return '';
    }
  }) as [string, string, string, string, string];
  if (![org, project, stack].every((s) => SEGMENT.test(s))) return undefined;
  if (what === 'updates' && /^\d{1,9}$/.test(id))
    return { api, org, project, stack, run: { kind: 'update', version: Number(id) } };
  if (what === 'previews' && UUID.test(id)) return { api, org, project, stack, run: { kind: 'preview', id } };
  return undefined;
}

/**
 * Why the run `ref` (from the Update's permalink) is not the Stack's own, or undefined when it
 * is. PKO's agent takes the permalink from the first `Permalink:`/`View Live:` line of the CLI's
 * stdout, which the program can write into (../shared/facts/pko.md): a permalink is trusted only
 * when it names the Stack's own stack. Checked against the spec (PKO's Stack, `pulumi.com/v1`):
 * - `spec.backend` (or a `Literal` `spec.envRefs.PULUMI_BACKEND_URL`): when set and not an
 *   http(s) URL (`s3://`, `file://`, `azblob://`, `gs://`), the stack is not in Pulumi Cloud;
 *   an http(s) backend is where `ref` is read (see {@link cloudRunOf}), so its host matches.
 * - `spec.stack`: `org/project/stack`, `org/stack` or `stack` — each part it names must equal
 *   the permalink's (the organization case-insensitively, as Pulumi Cloud treats it); a part it
 *   leaves out (the project of `org/stack`, the default organization of `stack`) is not checked.
 */
export function permalinkMismatch(ref: CloudRunRef, spec: unknown): string | undefined {
  const named = `${ref.org}/${ref.project}/${ref.stack}`;
  const s = isRecord(spec) ? spec : {};
  const envRefs = isRecord(s.envRefs) ? s.envRefs : {};
  const backendRef = isRecord(envRefs.PULUMI_BACKEND_URL) ? envRefs.PULUMI_BACKEND_URL : undefined;
  const backend =
    typeof s.backend === 'string' && s.backend !== ''
      ? s.backend
      : backendRef?.type === 'Literal' &&
          isRecord(backendRef.literal) &&
          typeof backendRef.literal.value === 'string'
        ? backendRef.literal.value
        : undefined;
  if (backend !== undefined && !/^https?:\/\//i.test(backend)) {
    const scheme = /^([A-Za-z][A-Za-z0-9+.-]{0,20}):/.exec(backend)?.[1] ?? 'not a URL';
    return `the run's permalink names another stack (Pulumi Cloud ${named}; the Stack's backend is ${scheme}://, not Pulumi Cloud); Pulumi Cloud was not read`;
  }
  const name = typeof s.stack === 'string' ? s.stack.trim() : '';
  const parts = name.split('/');
  if (name === '' || parts.length > 3 || parts.some((x) => x === ''))
    return `the Stack's spec.stack names no stack to check the run's permalink (${named}) against; Pulumi Cloud was not read`;
  const [org, project, stack] =
    parts.length === 3
      ? parts
      : parts.length === 2
        ? [parts[0], undefined, parts[1]]
        : [undefined, undefined, parts[0]];
  const same =
    stack === ref.stack &&
    (project === undefined || project === ref.project) &&
    (org === undefined || org.toLowerCase() === ref.org.toLowerCase());
  if (same) return undefined;
  return `the run's permalink names another stack (${named}; the Stack's spec.stack is ${name.slice(0, 200)}); Pulumi Cloud was not read`;
}

/** Where a Stack keeps its Pulumi access token (what PKO gives the CLI as `PULUMI_ACCESS_TOKEN`). */
export type AccessTokenRef =
  | { secret: string; key: string }
  | { literal: string }
  /** PKO v1 `envSecrets`: Secrets whose every key becomes a variable; the token is key `PULUMI_ACCESS_TOKEN` of one. */
  | { envSecrets: string[] };

/**
 * The Stack's access token reference: `spec.envRefs.PULUMI_ACCESS_TOKEN` (a `Secret` ResourceRef
 * `{type: Secret, secret: {name, key}}` or a `Literal` `{type: Literal, literal: {value}}`; PKO v1
 * and v2), else `spec.accessTokenSecret` (PKO v1, deprecated: a Secret's name, key `accessToken`),
 * else `spec.envSecrets` (PKO v1). Undefined when the Stack names none.
 */
export function accessTokenRefOf(spec: unknown): AccessTokenRef | undefined {
  if (!isRecord(spec)) return undefined;
  const envRefs = spec.envRefs;
  if (isRecord(envRefs) && isRecord(envRefs.PULUMI_ACCESS_TOKEN)) {
    const ref = envRefs.PULUMI_ACCESS_TOKEN;
    if (ref.type === 'Secret' && isRecord(ref.secret)) {
      const name = ref.secret.name;
      const key = ref.secret.key;
      if (typeof name === 'string' && name !== '' && typeof key === 'string' && key !== '')
        return { secret: name, key };
    }
    if (ref.type === 'Literal' && isRecord(ref.literal) && typeof ref.literal.value === 'string')
      return { literal: ref.literal.value };
  }
  if (typeof spec.accessTokenSecret === 'string' && spec.accessTokenSecret !== '')
    return { secret: spec.accessTokenSecret, key: 'accessToken' };
  if (Array.isArray(spec.envSecrets)) {
    const names = spec.envSecrets.filter((s): s is string => typeof s === 'string' && s !== '').slice(0, 16);
    if (names.length > 0) return { envSecrets: names };
  }
  return undefined;
}

/** Bounds of one read (all optional; defaults below). */
export interface PulumiCloudOptions {
  /** undici's fetch (tests pass their own; production: undici's). */
  fetch?: typeof undiciFetch;
  /** The dispatcher requests go through (production: one obeying the egress policy). */
  dispatcher?: Dispatcher;
  /** Deadline of one request (connect, send, read), ms. Default 5,000. */
  requestTimeoutMs?: number;
  /** Deadline of the whole read (every page, a 429 wait included), ms. Default 10,000. */
  timeoutMs?: number;
  /** Bytes of one answer. Default 4 MiB. */
  maxPageBytes?: number;
  /** Bytes of all answers of one read. Default 16 MiB. */
  maxBytes?: number;
  /** Pages of the update list looked at for a version. Default 5 (of 20 updates). */
  maxListPages?: number;
  /** Pages of engine events. Default 50. */
  maxEventPages?: number;
  /** Engine events read. Default 20,000. */
  maxEvents?: number;
  /** Caps of the change set (resources, property lines, errors), as the log parser's. */
  limits?: Partial<ParseLimits>;
  /** Waits `ms` (tests inject a fake); default setTimeout. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  now?: () => number;
  /** Aborts the read (the controller stopping). */
  signal?: AbortSignal;
}

/**
 * A read's change set and the values the engine events mark secret with Pulumi's signature and
 * carry in plain text (`plaintext`/`value`; the caller redacts them as `[secret]`), or why none.
 */
export type CloudResult = { ok: true; set: ChangeSet; marked: string[] } | { ok: false; reason: string };

const LIST_PAGE_SIZE = 20;

/** A failed request, its reason said without the token. */
class CloudError extends Error {}

interface Ctx {
  ref: CloudRunRef;
  token: string;
  o: Required<Omit<PulumiCloudOptions, 'dispatcher' | 'signal' | 'limits'>> &
    Pick<PulumiCloudOptions, 'dispatcher' | 'signal'>;
  deadline: number;
  bytes: number;
  retried: boolean;
}

const defaultSleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

function stackPath(ref: CloudRunRef): string {
  return `/api/stacks/${encodeURIComponent(ref.org)}/${encodeURIComponent(ref.project)}/${encodeURIComponent(ref.stack)}`;
}

/** One sentence of a server's error message: its `message` field, bounded, the token removed. */
function serverMessage(text: string, token: string): string {
  let msg = '';
  try {
    const body: unknown = JSON.parse(text);
    if (isRecord(body) && typeof body.message === 'string') msg = body.message;
  } catch {
    // not the documented shape: say nothing of it
  }
  // eslint-disable-next-line no-control-regex -- removing control characters is the point
  msg = msg.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  if (token.length >= 4) msg = msg.replaceAll(token, '[redacted]');
  return msg.length > 200 ? `${msg.slice(0, 199)}…` : msg;
}

/** `GET api + path` as JSON, within the deadlines and byte caps; one wait for a 429's Retry-After. */
async function getJson(c: Ctx, path: string, what: string): Promise<unknown> {
  for (;;) {
    const left = c.deadline - c.o.now();
    if (left <= 0)
      throw new CloudError(`Pulumi Cloud did not answer within ${String(c.o.timeoutMs / 1000)} s`);
    const signals = [AbortSignal.timeout(Math.min(left, c.o.requestTimeoutMs))];
    if (c.o.signal !== undefined) signals.push(c.o.signal);
    const signal = AbortSignal.any(signals);
    let res: Awaited<ReturnType<typeof undiciFetch>>;
    try {
      res = await c.o.fetch(`${c.ref.api}${path}`, {
        method: 'GET',
        headers: {
          Authorization: `token ${c.token}`,
          Accept: 'application/vnd.pulumi+8',
          'Content-Type': 'application/json',
        },
        redirect: 'manual',
        signal,
        ...(c.o.dispatcher ? { dispatcher: c.o.dispatcher } : {}),
      });
    } catch (err) {
      if (signal.aborted) throw new CloudError(`Pulumi Cloud did not answer ${what} in time`);
      const denied = egressRefusal(err);
      if (denied !== undefined)
        throw new CloudError(
          `the controller's egress policy refuses ${new URL(c.ref.api).host} (${denied}); Pulumi Cloud was not asked for ${what}`,
        );
      throw new CloudError(`Pulumi Cloud could not be reached for ${what}`);
    }
    if (res.status === 200) {
      const cap = Math.min(c.o.maxPageBytes, c.o.maxBytes - c.bytes);
      let body;
      try {
        body = await readBounded(res.body, Math.max(0, cap));
      } catch {
        throw new CloudError(`Pulumi Cloud's answer to ${what} broke off`);
      }
      c.bytes += body.bytes;
      if (body.truncated)
        throw new CloudError(`Pulumi Cloud's answer to ${what} was longer than the controller reads`);
      try {
        return JSON.parse(body.text) as unknown;
      } catch {
        throw new CloudError(`Pulumi Cloud's answer to ${what} is not JSON`);
      }
    }
    const err = await readBounded(res.body, 16 * 1024).catch(() => ({ text: '' }));
    const msg = serverMessage(err.text, c.token);
    const said = msg === '' ? '' : `: ${msg}`;
    if (res.status === 429) {
      const ra = Number(res.headers.get('retry-after') ?? '');
      const waitMs = Number.isFinite(ra) && ra >= 0 ? ra * 1000 : undefined;
      if (!c.retried && waitMs !== undefined && waitMs < c.deadline - c.o.now() - 500) {
        c.retried = true;
        await c.o.sleep(waitMs, c.o.signal ?? new AbortController().signal);
        continue;
      }
      throw new CloudError(
        `Pulumi Cloud rate-limited ${what} (429${waitMs === undefined ? '' : `, retry after ${String(Math.ceil(waitMs / 1000))} s`})`,
      );
    }
    if (res.status === 401)
      throw new CloudError(
        `Pulumi Cloud refused the Stack's access token (401${said}); check its PULUMI_ACCESS_TOKEN`,
      );
    if (res.status === 403)
      throw new CloudError(`the Stack's access token may not read ${what} in Pulumi Cloud (403${said})`);
    if (res.status === 404) throw new CloudError(`Pulumi Cloud has no ${what} (404${said})`);
    if (res.status >= 300 && res.status < 400)
      throw new CloudError(`Pulumi Cloud redirected ${what} (${String(res.status)}); not followed`);
    throw new CloudError(`Pulumi Cloud answered ${String(res.status)} to ${what}${said}`);
  }
}

/** The list entry of update `version`: its id, kind, result and counts. */
interface UpdateEntry {
  id: string;
  kind: string;
  result: string;
  startTime?: number;
  counts?: Partial<Record<StepOp, number>>;
}

async function findUpdate(c: Ctx, version: number): Promise<UpdateEntry> {
  for (let page = 1; page <= c.o.maxListPages; page++) {
    const body = await getJson(
      c,
      `${stackPath(c.ref)}/updates?output-type=service&page=${String(page)}&pageSize=${String(LIST_PAGE_SIZE)}`,
      `the update list of ${c.ref.org}/${c.ref.project}/${c.ref.stack}`,
    );
    const updates = isRecord(body) && Array.isArray(body.updates) ? body.updates : undefined;
    if (updates === undefined)
      throw new CloudError('Pulumi Cloud answered the update list in an unknown shape');
    let oldest = Infinity;
    for (const u of updates.slice(0, 1000)) {
      if (!isRecord(u)) continue;
      const info = isRecord(u.info) ? u.info : u;
      const v = typeof u.version === 'number' ? u.version : info.version;
      if (typeof v === 'number') oldest = Math.min(oldest, v);
      if (v !== version) continue;
      const id = typeof u.updateID === 'string' ? u.updateID : undefined;
      if (id === undefined || !UUID.test(id))
        throw new CloudError(`Pulumi Cloud gave no update id for version ${String(version)}`);
      return {
        id,
        kind: typeof info.kind === 'string' ? info.kind : 'update',
        result: typeof info.result === 'string' ? info.result : '',
        ...(typeof info.startTime === 'number' ? { startTime: info.startTime } : {}),
        ...(isRecord(info.resourceChanges) ? { counts: countsOf(info.resourceChanges) } : {}),
      };
    }
    // Newest first: past the version, or the end of the list.
    if (updates.length < LIST_PAGE_SIZE || oldest < version) break;
  }
  throw new CloudError(
    `Pulumi Cloud lists no update ${String(version)} of ${c.ref.org}/${c.ref.project}/${c.ref.stack} among the latest`,
  );
}

function countsOf(v: Record<string, unknown>): Partial<Record<StepOp, number>> {
  const out: Partial<Record<StepOp, number>> = {};
  for (const op of STEP_OPS) {
    const n = v[op];
    if (typeof n === 'number' && Number.isSafeInteger(n) && n > 0) out[op] = n;
  }
  return out;
}

/** The events path segment of an update kind (`Pupdate` etc. are previews). */
function eventsKind(kind: string): string {
  if (kind.startsWith('P') || kind === 'preview') return 'preview';
  return ['update', 'refresh', 'destroy', 'import'].includes(kind) ? kind : 'update';
}

/** Pulumi's secret signature (`resource.SigKey` → `resource.SecretSig`): a value so marked is shown `[secret]`. */
const SIG_KEY = '4dabf18193072939515e22adb298388d';
const SECRET_SIG = '1b47061264138c4ac30d75fd1eb44270';

/** A property value as the CLI prints it (strings quoted, objects as compact JSON), at most `max` code points. */
export function formatValue(v: unknown, max: number): string {
  let out = '';
  let depth = 0;
  const put = (s: string): boolean => {
    out += s;
    return out.length <= max * 2;
  };
  const walk = (x: unknown): boolean => {
    if (x === null || x === undefined) return put('null');
    if (typeof x === 'string') return put(JSON.stringify(x.length > max ? x.slice(0, max) : x));
    if (typeof x === 'number' || typeof x === 'boolean') return put(String(x));
    if (typeof x !== 'object') return put('null');
    if (depth >= 8) return put('…');
    if (!Array.isArray(x) && (x as Record<string, unknown>)[SIG_KEY] === SECRET_SIG) return put('[secret]');
    depth++;
    try {
      if (Array.isArray(x)) {
        if (!put('[')) return false;
        for (let i = 0; i < x.length; i++) if (!(i === 0 || put(',')) || !walk(x[i])) return false;
        return put(']');
      }
      if (!put('{')) return false;
      let first = true;
      for (const [k, val] of Object.entries(x as Record<string, unknown>)) {
        if (!(first || put(',')) || !put(`${JSON.stringify(k)}:`) || !walk(val)) return false;
        first = false;
      }
      return put('}');
    } finally {
      depth--;
    }
  };
  walk(v);
  const cps = [...out];
  return cps.length > max ? `${cps.slice(0, Math.max(0, max - 1)).join('')}…` : out;
}

/** The value at a property path (`a.b[0]`, `["x.y"]`) of `root`, or undefined. */
function at(root: unknown, path: string): unknown {
  const parts = path.match(/[^.[\]"]+|\[(?:\d+|"[^"]*")\]/g) ?? [];
  let cur = root;
  for (const p of parts.slice(0, 16)) {
    const key = p.startsWith('[') ? p.slice(1, -1).replace(/^"|"$/g, '') : p;
    if (Array.isArray(cur) && /^\d+$/.test(key)) cur = cur[Number(key)];
    else if (isRecord(cur) && Object.hasOwn(cur, key)) cur = cur[key];
    else return undefined;
  }
  return cur;
}

const DIFF_GLYPH: Readonly<Record<string, string>> = {
  add: '+',
  'add-replace': '+',
  delete: '-',
  'delete-replace': '-',
  update: '~',
  'update-replace': '~',
};

/** Property lines of one step, in the log parser's form (`~ value: "a" => "b"`). */
function diffLines(m: Record<string, unknown>, op: StepOp, maxChars: number): string[] {
  const old = isRecord(m.old) ? m.old : {};
  const neu = isRecord(m.new) ? m.new : {};
  const lines: string[] = [];
  const line = (s: string): string => {
    const cps = [...s];
    return cps.length > maxChars ? `${cps.slice(0, maxChars - 1).join('')}…` : s;
  };
  if (isRecord(m.detailedDiff)) {
    for (const path of Object.keys(m.detailedDiff).sort().slice(0, 1000)) {
      const d = m.detailedDiff[path];
      const kind = isRecord(d) && typeof d.diffKind === 'string' ? d.diffKind : 'update';
      const g = DIFF_GLYPH[kind] ?? '~';
      const before = at(isRecord(d) && d.inputDiff === true ? old.inputs : (old.outputs ?? old.inputs), path);
      const after = at(neu.inputs, path);
      const replace = kind.endsWith('-replace') ? ' (forces replacement)' : '';
      if (g === '+') lines.push(line(`+ ${path}: ${formatValue(after, maxChars)}${replace}`));
      else if (g === '-') lines.push(line(`- ${path}: ${formatValue(before, maxChars)}${replace}`));
      else
        lines.push(
          line(`~ ${path}: ${formatValue(before, maxChars)} => ${formatValue(after, maxChars)}${replace}`),
        );
    }
    return lines;
  }
  if (Array.isArray(m.diffs)) {
    for (const k of m.diffs.slice(0, 1000)) {
      if (typeof k !== 'string') continue;
      lines.push(
        line(
          `~ ${k}: ${formatValue(at(old.inputs, k), maxChars)} => ${formatValue(at(neu.inputs, k), maxChars)}`,
        ),
      );
    }
    return lines;
  }
  // No diff computed: a create shows its inputs, a delete those it had (as the CLI's display does).
  const src = op === 'create' ? neu.inputs : op === 'delete' ? old.inputs : undefined;
  if (isRecord(src)) {
    const g = op === 'create' ? '+' : '-';
    for (const k of Object.keys(src).sort().slice(0, 1000)) {
      if (k.startsWith('__')) continue;
      lines.push(line(`${g} ${k}: ${formatValue(src[k], maxChars)}`));
    }
  }
  return lines;
}

// eslint-disable-next-line no-control-regex -- removing escape codes is the point
const ANSI = /\u001b\[[0-9;]*[A-Za-z]|<\{%[^%]*%\}>/g;

/** What the engine events say: resources, counts, errors, and whether the run failed. */
interface EventsRead {
  resources: ResourceChange[];
  omittedResources: number;
  diffLines: number;
  diffOmitted: number;
  counts?: Partial<Record<StepOp, number>>;
  isPreview?: boolean;
  errors: string[];
  omittedErrors: number;
  failed: boolean;
  firstTimestamp?: number;
  events: number;
  /** Plain texts of values the events mark secret (bounded). */
  marked: Set<string>;
}

function newEventsRead(): EventsRead {
  return {
    resources: [],
    omittedResources: 0,
    diffLines: 0,
    diffOmitted: 0,
    errors: [],
    omittedErrors: 0,
    failed: false,
    events: 0,
    marked: new Set(),
  };
}

function takeEvents(r: EventsRead, events: unknown[], limits: ParseLimits, seen: Set<string>): void {
  for (const e of events) {
    if (!isRecord(e)) continue;
    r.events++;
    if (r.firstTimestamp === undefined && typeof e.timestamp === 'number') r.firstTimestamp = e.timestamp;
    if (isRecord(e.summaryEvent)) {
      if (isRecord(e.summaryEvent.resourceChanges)) r.counts = countsOf(e.summaryEvent.resourceChanges);
      if (typeof e.summaryEvent.isPreview === 'boolean') r.isPreview = e.summaryEvent.isPreview;
      continue;
    }
    if (isRecord(e.diagnosticEvent)) {
      const d = e.diagnosticEvent;
      if (d.severity === 'error' && typeof d.message === 'string') {
        r.failed = true;
        const text = d.message.replace(ANSI, '').trim();
        if (text === '') continue;
        if (r.errors.length >= limits.maxErrors) r.omittedErrors++;
        else {
          const cps = [...text.slice(0, limits.maxErrorChars * 2)];
          r.errors.push(
            cps.length > limits.maxErrorChars
              ? `${cps.slice(0, limits.maxErrorChars - 1).join('')}…`
              : cps.join(''),
          );
        }
      }
      continue;
    }
    if (isRecord(e.resOpFailedEvent)) r.failed = true;
    const step = isRecord(e.resourcePreEvent)
      ? e.resourcePreEvent
      : isRecord(e.resOutputsEvent)
        ? e.resOutputsEvent
        : undefined;
    if (step === undefined || !isRecord(step.metadata)) continue;
    const m = step.metadata;
    markedIn(m, r.marked);
    const op =
      typeof m.op === 'string' && (STEP_OPS as readonly string[]).includes(m.op)
        ? (m.op as StepOp)
        : undefined;
    const urn = typeof m.urn === 'string' ? m.urn.slice(0, 2048) : '';
    const type = typeof m.type === 'string' ? m.type.slice(0, 512) : '';
    if (op === undefined || op === 'same' || urn === '') continue;
    const key = `${op}\u0000${urn}`;
    if (seen.has(key)) continue;
    if (seen.size < 100_000) seen.add(key);
    if (r.resources.length >= limits.maxResources) {
      r.omittedResources++;
      continue;
    }
    const all = diffLines(m, op, limits.maxDiffLineChars);
    const room = Math.max(0, Math.min(limits.maxDiffLinesPerResource, limits.maxDiffLines - r.diffLines));
    const diff = all.slice(0, room);
    r.diffLines += diff.length;
    r.diffOmitted += all.length - diff.length;
    const neu = isRecord(m.new) ? m.new : isRecord(m.old) ? m.old : {};
    const sep = urn.lastIndexOf('::');
    r.resources.push({
      op,
      type,
      name: sep < 0 ? '' : urn.slice(sep + 2),
      urn,
      retain: neu.retainOnDelete === true,
      ...(neu.protect === true ? { protect: 'protected' as const } : {}),
      diff,
      diffOmitted: all.length - diff.length,
    });
  }
}

/**
 * The change set of the run `ref` names, read with `token` (see the module comment): counts from
 * the update list's `resourceChanges` or the events' `summaryEvent`, resources and property
 * lines from the engine events. Complete when the counts were read and every event page was.
 * When the events cannot be read but the counts were, an incomplete change set with the counts
 * and a `note` saying why. Never throws.
 */
export async function readCloudChangeSet(
  ref: CloudRunRef,
  token: string,
  opts: PulumiCloudOptions = {},
): Promise<CloudResult> {
  const limits: ParseLimits = { ...DEFAULT_PARSE_LIMITS, ...opts.limits };
  const now = opts.now ?? Date.now;
  const c: Ctx = {
    ref,
    token,
    o: {
      fetch: opts.fetch ?? undiciFetch,
      ...(opts.dispatcher ? { dispatcher: opts.dispatcher } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
      requestTimeoutMs: opts.requestTimeoutMs ?? 5_000,
      timeoutMs: opts.timeoutMs ?? 10_000,
      maxPageBytes: opts.maxPageBytes ?? 4 * 1024 * 1024,
      maxBytes: opts.maxBytes ?? 16 * 1024 * 1024,
      maxListPages: opts.maxListPages ?? 5,
      maxEventPages: opts.maxEventPages ?? 50,
      maxEvents: opts.maxEvents ?? 20_000,
      sleep: opts.sleep ?? defaultSleep,
      now,
    },
    deadline: now() + (opts.timeoutMs ?? 10_000),
    bytes: 0,
    retried: false,
  };
  const where = `${ref.org}/${ref.project}/${ref.stack}`;
  let entry: UpdateEntry | undefined;
  let id: string;
  let kind: string;
  try {
    if (ref.run.kind === 'update') {
      entry = await findUpdate(c, ref.run.version);
      id = entry.id;
      kind = eventsKind(entry.kind);
    } else {
      id = ref.run.id;
      kind = 'preview';
    }
  } catch (err) {
    return { ok: false, reason: err instanceof CloudError ? err.message : 'reading Pulumi Cloud failed' };
  }
  const r = newEventsRead();
  const seen = new Set<string>();
  let note: string | undefined;
  let why: string | undefined;
  let allRead = false;
  try {
    let token: string | undefined;
    for (let page = 0; page < c.o.maxEventPages; page++) {
      const q = token === undefined ? '' : `?continuationToken=${encodeURIComponent(token)}`;
      const body = await getJson(
        c,
        `${stackPath(ref)}/${kind}/${encodeURIComponent(id)}/events${q}`,
        `the engine events of ${where}`,
      );
      if (!isRecord(body) || !Array.isArray(body.events))
        throw new CloudError('Pulumi Cloud answered the engine events in an unknown shape');
      const room = c.o.maxEvents - r.events;
      takeEvents(r, body.events.slice(0, Math.max(0, room)), limits, seen);
      if (body.events.length > room)
        throw new CloudError(
          `the update has more than ${String(c.o.maxEvents)} engine events; the rest were not read`,
        );
      const next =
        typeof body.continuationToken === 'string' && body.continuationToken !== ''
          ? body.continuationToken.slice(0, 4096)
          : undefined;
      // No token: every event was returned. The same token with no event: the update still runs.
      if (next === undefined) {
        allRead = true;
        break;
      }
      if (next === token && body.events.length === 0)
        throw new CloudError('the update was still running in Pulumi Cloud');
      token = next;
    }
    if (!allRead)
      throw new CloudError(
        `the update has more than ${String(c.o.maxEventPages)} pages of engine events; the rest were not read`,
      );
  } catch (err) {
    why = err instanceof CloudError ? err.message : 'reading the engine events failed';
    note = `Pulumi Cloud's engine events were not all read: ${why}`;
  }
  const counts = r.counts ?? entry?.counts;
  if (counts === undefined && r.events === 0)
    return { ok: false, reason: why ?? `Pulumi Cloud holds no events of ${where}` };
  const byResources: Partial<Record<StepOp, number>> = {};
  for (const x of r.resources) byResources[x.op] = (byResources[x.op] ?? 0) + 1;
  const dryRun =
    ref.run.kind === 'preview' ||
    r.isPreview === true ||
    (entry?.kind.startsWith('P') ?? false) ||
    entry?.kind === 'preview';
  const entryKind = entry?.kind.toLowerCase() ?? 'update';
  const runKind = (['refresh', 'destroy', 'import'] as const).find((k) => entryKind.endsWith(k)) ?? 'update';
  const started = r.firstTimestamp ?? entry?.startTime;
  const incomplete: ChangeSet['incomplete'] = [];
  if (counts === undefined) incomplete.push('no-summary');
  if (!allRead) incomplete.push('partial-events');
  const set: ChangeSet = {
    source: 'pulumi-cloud',
    complete: incomplete.length === 0,
    incomplete,
    run: {
      kind: runKind,
      dryRun,
      stack: where,
      startedAt: started === undefined ? '' : new Date(started * 1000).toISOString(),
    },
    failed: r.failed || entry?.result === 'failed',
    counts: counts ?? byResources,
    countsFrom: counts === undefined ? 'resources' : 'summary',
    resources: r.resources,
    errors: r.errors,
    omitted: {
      resources: r.omittedResources,
      diffLines: r.diffOmitted,
      longLines: 0,
      errors: r.omittedErrors,
    },
    ...(note === undefined ? {} : { note }),
  };
  return { ok: true, set, marked: [...r.marked] };
}

/** Marked plain texts one read keeps at most. */
const MAX_MARKED = 1_000;

/**
 * Adds to `out` the plain text of every value in `v` carrying Pulumi's secret signature with a
 * `plaintext` (JSON text; its string too) or `value` string. Bounded: 12 levels, 5,000 nodes.
 */
function markedIn(v: unknown, out: Set<string>): void {
  let nodes = 0;
  const add = (s: string): void => {
    if (s.length >= 4 && s !== '[secret]' && out.size < MAX_MARKED) out.add(s);
  };
  const walk = (x: unknown, depth: number): void => {
    if (++nodes > 5_000 || depth > 12 || x === null || typeof x !== 'object') return;
    if (Array.isArray(x)) {
      for (const y of x) walk(y, depth + 1);
      return;
    }
    const o = x as Record<string, unknown>;
    if (o[SIG_KEY] === SECRET_SIG) {
      if (typeof o.value === 'string') add(o.value);
      if (typeof o.plaintext === 'string') {
        add(o.plaintext);
        try {
          const p: unknown = JSON.parse(o.plaintext);
          if (typeof p === 'string') add(p);
        } catch {
          // not JSON: the text itself
        }
      }
      return;
    }
    for (const y of Object.values(o)) walk(y, depth + 1);
  };
  walk(v, 0);
}

/**
 * The message of an egress refusal in `err`'s cause chain (src/notifier/egress.ts
 * `EgressDeniedError`, code `EGRESS_DENIED`: undici wraps connector errors), or undefined.
 */
function egressRefusal(err: unknown): string | undefined {
  let cur: unknown = err;
  for (let i = 0; i < 8 && cur !== null && typeof cur === 'object'; i++) {
    const e = cur as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (e.code === 'EGRESS_DENIED' && typeof e.message === 'string') return e.message.slice(0, 300);
    cur = e.cause ?? (Array.isArray(e.errors) ? (e.errors as unknown[])[0] : undefined);
  }
  return undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
