/**
 * Where a chat notifier keeps what it must remember about one run of a Stack between that run's
 * events: the id of the message the run's first event posted (Slack `channel` + `ts`), for the
 * later events to reply in its thread or edit it (docs/providers/slack.md, "Threads").
 *
 * The note also travels through the delivery API (`SendContext.runNote` in, `SendOutcome.note`
 * out, ./types.ts): when the delivery layer keeps it with the run in its ledger, it survives a
 * restart and a leader change. {@link memoryRunNotes} is the in-process fallback used when
 * delivery passes no note: it is lost when the process exits and is not shared between
 * replicas, so after a restart or a leader change the run's next event starts a new message
 * (docs/providers/slack.md says so).
 */
import { LRUCache } from 'lru-cache';

/** Notes of runs, by key (`<namespace>/<provider>` + the run key of the event). */
export interface RunNotes {
  get(key: string): string | undefined;
  set(key: string, note: string): void;
}

/** Longest note, in UTF-8 bytes (the delivery API's bound). */
export const MAX_RUN_NOTE_BYTES = 128;

/**
 * An in-memory {@link RunNotes}: at most `max` runs (least recently used dropped first), each
 * forgotten `ttlMs` after it was written (default 10,000 runs, 24 hours: a run that has not ended
 * in a day has stalled and starts a new message).
 */
export function memoryRunNotes(max = 10_000, ttlMs = 24 * 3_600_000): RunNotes {
  const cache = new LRUCache<string, string>({ max, ttl: ttlMs });
  return {
    get: (key) => cache.get(key),
    set: (key, note) => {
      if (Buffer.byteLength(note, 'utf8') <= MAX_RUN_NOTE_BYTES && !/[\r\n]/.test(note)) cache.set(key, note);
    },
  };
}

/** The process-wide fallback store: shared by every notifier of the process, so a Provider rebuilt (Secret rotated) keeps its runs' notes. */
export const processRunNotes: RunNotes = memoryRunNotes();
