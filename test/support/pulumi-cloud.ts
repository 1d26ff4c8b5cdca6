/**
 * A Pulumi Cloud REST API contract server for tests: a real local HTTP server answering the
 * endpoints src/enrich/pulumi-cloud.ts reads, as the API documents them, with their state.
 *
 * Sources (each quirk below names its own):
 * - https://www.pulumi.com/docs/reference/cloud-rest-api/ ("API Basics"): every request carries
 *   `Authorization: token <token>` and `Accept: application/vnd.pulumi+8`; "The Pulumi Cloud REST
 *   API will return a 401 status code if the token is missing or invalid".
 * - "Stack Updates" (same reference): `GET /api/stacks/{org}/{project}/{stack}/updates` lists
 *   updates newest first, paged with `page` and `pageSize` ("?pageSize=1&page=1 can be used to
 *   return only the most recent update"); `output-type=service` answers
 *   `GetStackUpdatesResponse` `{updates: [{info: UpdateInfo, updateID, version, latestVersion}],
 *   itemsPerPage, total}` (schema "GetStackUpdatesResponse"; `UpdateInfo.resourceChanges` "Count
 *   of resource changes by operation type").
 * - "Get Engine Events": `GET /api/stacks/{org}/{project}/{stack}/{kind}/{updateID}/events`,
 *   "Supports pagination via continuation tokens"; answer `{events: EngineEvent[],
 *   continuationToken}` (pulumi/pulumi `sdk/go/common/apitype/events.go`
 *   `GetUpdateEventsResponse`; `updates.go` `UpdateResults`: "The same continuation token may be
 *   returned if no new update events are available, but the update is still in-progress. A value
 *   of nil means that no new updates will be available").
 * - Errors: `ErrorResponse` `{code, message}` (`sdk/go/common/apitype/errors.go`). The message
 *   texts here are illustrative; the shape and the status codes are the documented ones.
 * - 429 carries `Retry-After` (seconds) when rate limiting is programmed (`fail`).
 *
 * Checks recorded in `violations` (tests assert it is empty): a request without the `Accept`
 * header, a method other than GET, an endpoint not modelled.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One engine event as the API serves it (`apitype.EngineEvent`): sequence, timestamp and one payload. */
export type EngineEvent = { sequence?: number; timestamp?: number } & Record<string, unknown>;

export interface CloudUpdate {
  /** `update`, `preview`, `refresh`, `destroy`, or the `P…` kinds. */
  kind: string;
  result: 'not-started' | 'in-progress' | 'succeeded' | 'failed';
  resourceChanges?: Record<string, number>;
  events: EngineEvent[];
  /** When true the events endpoint answers like an update still running (the same token, no events, at the end). */
  running?: boolean;
}

interface StoredUpdate extends CloudUpdate {
  id: string;
  version: number;
  startTime: number;
}

/** A programmed failure for the next matching request(s). */
export interface Failure {
  /** Path (without query) pattern. */
  path: RegExp;
  status?: number;
  /** `Retry-After` header value. */
  retryAfter?: string;
  /** Raw body (default: the documented ErrorResponse). */
  body?: string;
  /** Never answer (the request hangs until the client gives up). */
  stall?: boolean;
  /** How many requests it applies to. Default 1. */
  times?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  authorization: string | undefined;
  accept: string | undefined;
}

/** A step event's metadata (`apitype.StepEventMetadata`). */
export function step(
  op: string,
  urn: string,
  o: {
    old?: Record<string, unknown>;
    new?: Record<string, unknown>;
    diffs?: string[];
    detailedDiff?: Record<string, { diffKind: string; inputDiff?: boolean }> | null;
  } = {},
): Record<string, unknown> {
  const type = urn.split('::')[2] ?? '';
  return {
    op,
    urn,
    type,
    old: o.old ? { type, urn, id: 'id', parent: '', provider: '', inputs: o.old, outputs: o.old } : null,
    new: o.new ? { type, urn, id: '', parent: '', provider: '', inputs: o.new, outputs: {} } : null,
    ...(o.diffs ? { diffs: o.diffs } : {}),
    detailedDiff: o.detailedDiff ?? null,
    provider: '',
  };
}

export class PulumiCloudServer {
  readonly requests: RecordedRequest[] = [];
  readonly violations: string[] = [];
  /** Events per page of the events endpoint. */
  eventsPerPage = 3;
  readonly #server: Server;
  readonly #tokens = new Set<string>();
  /** Tokens that may not read a given `org/project/stack` (403). */
  readonly #forbidden = new Map<string, Set<string>>();
  readonly #stacks = new Map<string, StoredUpdate[]>();
  readonly #previews = new Map<string, StoredUpdate>();
  readonly #failures: Failure[] = [];
  readonly #stalled = new Set<ServerResponse>();
  origin = '';

  private constructor() {
    this.#server = createServer((req, res) => {
      this.#handle(req, res);
    });
  }

  static async start(tokens: string[] = []): Promise<PulumiCloudServer> {
    const s = new PulumiCloudServer();
    for (const t of tokens) s.#tokens.add(t);
    await new Promise<void>((resolve) => s.#server.listen(0, '127.0.0.1', resolve));
    s.origin = `http://127.0.0.1:${String((s.#server.address() as AddressInfo).port)}`;
    return s;
  }

  async close(): Promise<void> {
    for (const r of this.#stalled) r.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
  }

  addToken(token: string): void {
    this.#tokens.add(token);
  }

  /** `token` gets 403 on `org/project/stack`. */
  forbid(token: string, stack: string): void {
    const s = this.#forbidden.get(stack) ?? new Set<string>();
    s.add(token);
    this.#forbidden.set(stack, s);
  }

  /** Adds an update to `org/project/stack` (created when new); returns its version and id. */
  addUpdate(stack: string, u: CloudUpdate): { version: number; id: string } {
    const list = this.#stacks.get(stack) ?? [];
    this.#stacks.set(stack, list);
    const stored: StoredUpdate = {
      ...u,
      id: randomUUID(),
      version: list.length + 1,
      startTime: 1_780_000_000 + list.length,
    };
    list.push(stored);
    return { version: stored.version, id: stored.id };
  }

  /** Adds a preview (not in the update list; read by its id, as a `/previews/<id>` permalink names it). */
  addPreview(stack: string, u: Omit<CloudUpdate, 'kind'>): string {
    if (!this.#stacks.has(stack)) this.#stacks.set(stack, []);
    const id = randomUUID();
    this.#previews.set(`${stack}/${id}`, { ...u, kind: 'preview', id, version: 0, startTime: 1_780_000_000 });
    return id;
  }

  /** Programs a failure for the next matching request(s). */
  fail(f: Failure): void {
    this.#failures.push({ ...f, times: f.times ?? 1 });
  }

  #json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  }

  #error(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
    this.#json(res, status, { code: status, message }, headers);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    const query = Object.fromEntries(url.searchParams);
    this.requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query,
      authorization: req.headers.authorization,
      accept: req.headers.accept,
    });
    const f = this.#failures.find((x) => x.path.test(url.pathname) && (x.times ?? 1) > 0);
    if (f !== undefined) {
      f.times = (f.times ?? 1) - 1;
      if (f.stall === true) {
        this.#stalled.add(res);
        return;
      }
      const status = f.status ?? 500;
      res.writeHead(status, {
        'Content-Type': 'application/json',
        ...(f.retryAfter !== undefined ? { 'Retry-After': f.retryAfter } : {}),
      });
      res.end(
        f.body ??
          JSON.stringify({
            code: status,
            message: status === 429 ? 'Too many requests' : 'Internal Server Error',
          }),
      );
      return;
    }
    if (req.method !== 'GET') {
      this.violations.push(`${req.method ?? ''} ${url.pathname}: only GET is modelled`);
      this.#error(res, 405, 'Method Not Allowed');
      return;
    }
    // API Basics: the Accept header is required on every operation.
    if (req.headers.accept !== 'application/vnd.pulumi+8')
      this.violations.push(
        `${url.pathname}: Accept is ${req.headers.accept ?? '(none)'}, not application/vnd.pulumi+8`,
      );
    // API Basics: `Authorization: token <token>`; 401 when missing or invalid.
    const m = /^token (.+)$/.exec(req.headers.authorization ?? '');
    const token = m?.[1];
    if (token === undefined || !this.#tokens.has(token)) {
      this.#error(res, 401, 'Unauthorized: No credentials provided or are invalid.');
      return;
    }
    const list = /^\/api\/stacks\/([^/]+)\/([^/]+)\/([^/]+)\/updates$/.exec(url.pathname);
    const events =
      /^\/api\/stacks\/([^/]+)\/([^/]+)\/([^/]+)\/(update|preview|refresh|destroy|import)\/([^/]+)\/events$/.exec(
        url.pathname,
      );
    const parts = list ?? events;
    if (parts === null) {
      this.violations.push(`GET ${url.pathname}: not modelled`);
      this.#error(res, 404, 'Not Found');
      return;
    }
    const stack = parts.slice(1, 4).map(decodeURIComponent).join('/');
    const updates = this.#stacks.get(stack);
    if (updates === undefined) {
      this.#error(res, 404, `Stack '${stack}' not found`);
      return;
    }
    if (this.#forbidden.get(stack)?.has(token) === true) {
      this.#error(res, 403, `No permission to read stack '${stack}'`);
      return;
    }
    if (list !== null) {
      const service = query['output-type'] === 'service';
      const newest = [...updates].reverse();
      const size = query.pageSize === undefined ? newest.length : Math.max(1, Number(query.pageSize));
      const page = query.page === undefined ? 1 : Math.max(1, Number(query.page));
      const slice = newest.slice((page - 1) * size, page * size);
      const info = (u: StoredUpdate): Record<string, unknown> => ({
        kind: u.kind,
        startTime: u.startTime,
        message: '',
        environment: {},
        config: {},
        result: u.result,
        endTime: u.startTime + 10,
        version: u.version,
        ...(u.resourceChanges ? { resourceChanges: u.resourceChanges } : {}),
        resourceCount: 1,
      });
      this.#json(res, 200, {
        updates: slice.map((u) =>
          service
            ? {
                info: info(u),
                updateID: u.id,
                version: u.version,
                latestVersion: updates.length,
                requestedBy: { name: 'ci', githubLogin: 'ci', avatarUrl: '' },
              }
            : info(u),
        ),
        itemsPerPage: size,
        total: updates.length,
      });
      return;
    }
    const [, , , , kind, id] = events ?? [];
    const u =
      kind === 'preview' ? this.#previews.get(`${stack}/${id ?? ''}`) : updates.find((x) => x.id === id);
    if (u === undefined) {
      this.#error(res, 404, `Update '${id ?? ''}' not found`);
      return;
    }
    const from =
      query.continuationToken === undefined
        ? 0
        : Number(Buffer.from(query.continuationToken, 'base64url').toString());
    if (!Number.isInteger(from) || from < 0) {
      this.#error(res, 400, 'invalid continuation token');
      return;
    }
    const page = u.events
      .slice(from, from + this.eventsPerPage)
      .map((e, i) => ({ sequence: from + i + 1, timestamp: 1_780_000_000, ...e }));
    const next = from + page.length;
    const more = next < u.events.length;
    // UpdateResults: a running update answers its token again with no new events.
    const cont = more || u.running === true ? Buffer.from(String(next)).toString('base64url') : undefined;
    this.#json(res, 200, { events: page, ...(cont !== undefined ? { continuationToken: cont } : {}) });
  }
}
