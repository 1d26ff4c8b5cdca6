/**
 * Response bodies, bounded (docs/threat-model.md, "Endpoints"): an endpoint chooses how much it
 * answers, so the controller reads only what a call needs, streamed, up to a cap chosen for that
 * use, and never more (case B03: eight 30 MB answers must not exhaust a 160 MiB heap).
 *
 * - A body nobody needs (a webhook's "ok") is drained up to {@link DRAIN_BYTES} without being kept,
 *   so a small answer leaves the connection reusable, and cancelled beyond that (undici then
 *   closes the connection).
 * - A body that is needed is read up to the caller's cap; over it the call fails with
 *   `RESPONSE_TOO_LARGE` instead of reading on.
 */
/** Caps per use, in bytes. */
export const RESPONSE_CAPS = {
  /** A chat API's JSON answer (`{"ok":false,"error":"…"}`), e.g. Slack's chat.postMessage. */
  chatAnswer: 64 * 1024,
  /**
   * A forge API answer: one object or one page of a list (100 statuses, or comments of up to
   * 65,536 characters each on most forges).
   */
  apiPage: 8 * 1024 * 1024,
  /** An error answer: only a recognised error message is ever shown (./reflect.ts). */
  error: 16 * 1024,
} as const;

/** How much of an unneeded body is drained before the connection is given up instead. */
export const DRAIN_BYTES = 64 * 1024;

export { readBounded, type BoundedText } from '../text.ts';

/** The JSON object `text` holds, or undefined: not JSON, or JSON of another kind (array, string, null, …). */
export function jsonObject(text: string): Record<string, unknown> | undefined {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return undefined;
  }
  return data !== null && typeof data === 'object' && !Array.isArray(data)
    ? (data as Record<string, unknown>)
    : undefined;
}

/**
 * Disposes of a body nobody reads — a web `ReadableStream` (fetch) or a Node `Readable` (undici's
 * `request`): up to {@link DRAIN_BYTES} are read and dropped (nothing is kept), then the rest is
 * cancelled (destroyed). Never rejects.
 */
export async function discardBody(body: AsyncIterable<Uint8Array> | null): Promise<void> {
  if (body === null) return;
  try {
    await readWithin(body, DRAIN_BYTES);
  } catch {
    // The connection failed while draining: nothing to keep either way.
  }
}

/**
 * Reads `body` to its end, its chunks pushed onto `keep` when given; resolves true, or false once
 * more than `max` bytes arrived (the rest is cancelled unread). Rejects when the read fails.
 */
async function readWithin(
  body: AsyncIterable<Uint8Array>,
  max: number,
  keep?: Uint8Array[],
): Promise<boolean> {
  let seen = 0;
  for await (const value of body) {
    seen += value.byteLength;
    // Leaving the loop cancels (web stream) or destroys (Node stream) the rest of the body.
    if (seen > max) return false;
    keep?.push(value);
  }
  return true;
}

/** A whole body read into memory, or how far it went before the cap. */
export interface BoundedBytes {
  /** The bytes read (at most `max`; empty when `truncated`: they are not kept). */
  bytes: Uint8Array;
  /** The body had more than `max` bytes; the rest was cancelled unread. */
  truncated: boolean;
}

/**
 * Reads all of `body` (at most `max` bytes) into memory, for client libraries that read bodies
 * themselves (Octokit through `ProviderHttp.fetch`). Reading it before handing it over is the
 * point: Octokit turns a body that fails mid-read into `""` (`response.text().catch(() => "")`
 * in @octokit/request), which reads as an empty answer — a 50 MB pull-request listing became
 * "no pull requests" (case N17). Over the cap the caller fails the call instead.
 */
export async function readAllBounded(
  body: AsyncIterable<Uint8Array> | null,
  max: number,
): Promise<BoundedBytes> {
  if (body === null) return { bytes: new Uint8Array(0), truncated: false };
  const chunks: Uint8Array[] = [];
  if (!(await readWithin(body, max, chunks))) return { bytes: new Uint8Array(0), truncated: true };
  return { bytes: Buffer.concat(chunks), truncated: false };
}
