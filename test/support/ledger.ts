/**
 * Reads what the controller recorded in its delivery ledger (DeliveryLedger objects), as the API
 * server has it — for tests that kill the controller and compare what was recorded at that
 * moment with what is sent afterwards.
 */
import { runKey, type EventIdentity } from '../../src/api/event.ts';
import { GROUP, VERSION } from '../../src/api/v1alpha1.ts';
import { LEDGER_PLURAL } from '../../src/delivery/ledger.ts';
import {
  entryCovers,
  mergeEntries,
  parseEntry,
  runHash,
  runRecord,
  PHASE,
  type Entry,
} from '../../src/delivery/ledger-entry.ts';
import { kubeRequest, objectPath } from '../../src/kube/client.ts';
import { kubeConfig } from './cluster.ts';

/** Every entry stored in namespace `ns`, by `<alert uid>/<stack uid>` (overlapping objects merged). */
export async function storedLedger(ns: string): Promise<Map<string, Entry>> {
  const list = await kubeRequest<{
    items: { metadata: { labels?: Record<string, string> }; spec: { entries: string } }[];
  }>(kubeConfig('admin'), {
    method: 'GET',
    path: objectPath({ group: GROUP, version: VERSION, plural: LEDGER_PLURAL, namespace: ns }),
  });
  const out = new Map<string, Entry>();
  for (const o of list.items) {
    const alert = o.metadata.labels?.['notification.pko.dev/alert-uid'] ?? '';
    for (const line of o.spec.entries.split('\n')) {
      const i = line.indexOf('=');
      const e = i > 0 ? parseEntry(line.slice(i + 1)) : undefined;
      if (!e) continue;
      const key = `${alert}/${line.slice(0, i)}`;
      out.set(key, mergeEntries(out.get(key), e));
    }
  }
  return out;
}

/**
 * Whether the event with `identity` is recorded as handled in any entry of its Stack: its run has
 * a record with that phase, or the run is older than the floor (`observed` ≤ floor; pass the
 * observation resourceVersion when known, else only records count).
 */
export function isRecorded(ledger: Map<string, Entry>, identity: EventIdentity, observed?: number): boolean {
  const run = runHash(runKey(identity));
  const phase = identity.phase.kind;
  for (const [key, e] of ledger) {
    if (!key.endsWith(`/${identity.stack}`)) continue;
    if (runRecord(e, run) === undefined && observed === undefined) continue;
    if (phase === 'stalled') continue;
    if (entryCovers(e, { run, rv: observed ?? Number.MAX_SAFE_INTEGER, phase })) return true;
  }
  return false;
}

/** Whether any entry of Stack `stackUid` records the result (Succeeded or Failed) of Update `updateName`. */
export function resultRecorded(ledger: Map<string, Entry>, stackUid: string, updateName: string): boolean {
  const run = runHash(`${stackUid}/${encodeURIComponent(updateName)}`);
  for (const [key, e] of ledger) {
    if (!key.endsWith(`/${stackUid}`)) continue;
    const r = runRecord(e, run);
    if (r && (r.bits & (PHASE.succeeded | PHASE.failed)) !== 0) return true;
  }
  return false;
}
