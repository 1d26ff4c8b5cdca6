/**
 * The floors of `npm run bench:flux` (started by it; not run by hand): a bare watcher of PKO
 * `Stack` objects — undici `fetch` on one watch, a `JSON.parse` per line — so that the benchmark
 * can measure what the input alone costs on this machine (the status write through the API server
 * and etcd, and the watch event back with the whole Stack) without any controller.
 *
 * With `BARE_HOOK` set it is also a bare deliverer: the least a controller can do that delivers
 * each event once and durably, as ours does — per watch event one webhook POST (a generic payload
 * of ~600 bytes) and then one write to the API server of a `DeliveryLedger`-sized object (a PUT of
 * ~1.8 KB conditioned on its resourceVersion, as ours records each delivered event; objects chosen
 * by the Stack's name among `BARE_OBJECTS`, writes to one object in turn), at most `BARE_WINDOW`
 * events in flight (ours' default window for `generic` Providers), nothing else: no matching, no
 * template, no retry, no metrics, no logs. An event counts as seen when its POST is answered.
 *
 * Env: BARE_SERVER (API server URL), BARE_CA (PEM of its CA), BARE_TOKEN (bearer token),
 * BARE_PATH (the Stacks' collection path, e.g. `/apis/pulumi.com/v1/namespaces/ours/stacks`);
 * deliverer: BARE_HOOK (receiver URL), BARE_LEDGER_PATH (a DeliveryLedger collection path),
 * BARE_OBJECTS (default 512), BARE_WINDOW (default 16).
 * IPC (`process.send`): `{ ready: true }` once the watch is open; on `{ take: true }` it answers
 * `{ seen: [[lastUpdate.name, epoch ms], …] }` with what was seen since the last take.
 * Times are `performance.timeOrigin + performance.now()`, comparable across processes.
 */
import { createHash } from 'node:crypto';
import { Agent, fetch, request } from 'undici';

const server = process.env.BARE_SERVER ?? '';
const path = process.env.BARE_PATH ?? '';
const hook = process.env.BARE_HOOK;
const ledgerPath = process.env.BARE_LEDGER_PATH ?? '';
const OBJECTS = Number(process.env.BARE_OBJECTS ?? 512);
const WINDOW = Number(process.env.BARE_WINDOW ?? 16);
const headers = { authorization: `Bearer ${process.env.BARE_TOKEN ?? ''}`, accept: 'application/json' };
const dispatcher = new Agent({ connect: { ca: process.env.BARE_CA ?? '' } });
const now = (): number => performance.timeOrigin + performance.now();
let seen: [string, number][] = [];

process.on('message', (m: { take?: boolean }) => {
  if (m.take !== true) return;
  const out = seen;
  seen = [];
  process.send?.({ seen: out });
});
process.on('disconnect', () => process.exit(0));

interface Stack {
  metadata?: { name?: string; namespace?: string; uid?: string };
  status?: { lastUpdate?: { name?: string; lastSuccessfulCommit?: string; message?: string } };
}

/** The deliverer's ledger objects: resourceVersion, and the tail of writes to each. */
const objects: { name: string; rv: string; chain: Promise<void> }[] = [];

async function api(method: string, p: string, body?: object): Promise<{ status: number; json: unknown }> {
  const res = await request(`${server}${p}`, {
    method: method as 'GET',
    headers: body ? { ...headers, 'content-type': 'application/json' } : headers,
    body: body ? JSON.stringify(body) : null,
    dispatcher,
  });
  return { status: res.statusCode, json: await res.body.json() };
}

function ledgerBody(i: number, rv: string, entries: string): object {
  return {
    apiVersion: 'notification.pko.dev/v1alpha1',
    kind: 'DeliveryLedger',
    metadata: {
      name: `bare-floor-${i}`,
      ...(rv ? { resourceVersion: rv } : {}),
      labels: { 'notification.pko.dev/alert-uid': '00000000-0000-4000-8000-000000000000' },
    },
    spec: { alert: 'bare', shard: i.toString(2), entries },
  };
}

async function prepareObjects(): Promise<void> {
  for (let i = 0; i < OBJECTS; i++) {
    const got = await api('GET', `${ledgerPath}/bare-floor-${i}`);
    let rv = (got.json as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
    if (got.status === 404) {
      const made = await api('POST', ledgerPath, ledgerBody(i, '', ''));
      if (made.status !== 201)
        throw new Error(`creating a ledger object answered ${made.status}: ${JSON.stringify(made.json)}`);
      rv = (made.json as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
    }
    objects.push({ name: `bare-floor-${i}`, rv: rv ?? '', chain: Promise.resolve() });
  }
}

/** The entries an object holds after an event: ~1,500 characters, the event's line among them. */
function entries(stackUid: string, update: string): string {
  const line = `${stackUid}=${update}:s`;
  return `${line}\n${'x'.repeat(Math.max(0, 1500 - line.length))}`;
}

async function deliver(s: Stack, update: string): Promise<void> {
  const md = s.metadata ?? {};
  const payload = {
    involvedObject: {
      kind: 'Stack',
      apiVersion: 'pulumi.com/v1',
      namespace: md.namespace,
      name: md.name,
      uid: md.uid,
    },
    severity: 'info',
    timestamp: new Date().toISOString(),
    message: `Update ${update} of stack ${md.name} succeeded: ${s.status?.lastUpdate?.message ?? ''}`,
    reason: 'UpdateSucceeded',
    reportingController: 'pko-notification-controller',
    reportingInstance: 'bare',
    metadata: {
      updateName: update,
      revision: s.status?.lastUpdate?.lastSuccessfulCommit ?? '',
      permalink: '',
      eventId: createHash('sha256')
        .update(`${md.uid ?? ''}/${update}`)
        .digest('hex')
        .slice(0, 32),
    },
  };
  const res = await request(hook as string, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  await res.body.dump();
  if (res.statusCode >= 300) throw new Error(`the receiver answered ${res.statusCode}`);
  seen.push([update, now()]);
  // The record: one write of the Stack's ledger object, after the previous write to it.
  const h = createHash('sha1')
    .update(md.uid ?? '')
    .digest()
    .readUInt32BE(0);
  const o = objects[h % objects.length] as (typeof objects)[number];
  const write = o.chain.then(async () => {
    const i = Number(o.name.slice('bare-floor-'.length));
    const put = await api(
      'PUT',
      `${ledgerPath}/${o.name}`,
      ledgerBody(i, o.rv, entries(md.uid ?? '', update)),
    );
    if (put.status !== 200) throw new Error(`a ledger write answered ${put.status}`);
    o.rv = (put.json as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  });
  o.chain = write;
  await write;
}

/** Events waiting for a slot of the window, and the slots in use. */
const waiting: [Stack, string][] = [];
let inFlight = 0;
function offer(s: Stack, update: string): void {
  waiting.push([s, update]);
  pump();
}
function pump(): void {
  while (inFlight < WINDOW && waiting.length > 0) {
    const [s, update] = waiting.shift() as [Stack, string];
    inFlight++;
    deliver(s, update).then(
      () => {
        inFlight--;
        pump();
      },
      (err: unknown) => {
        console.error('bare deliverer:', err);
        process.exit(1);
      },
    );
  }
}

if (hook) await prepareObjects();
const list = await fetch(`${server}${path}?limit=1`, { headers, dispatcher });
const rv = ((await list.json()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
const res = await fetch(`${server}${path}?watch=1&resourceVersion=${rv}`, { headers, dispatcher });
if (!res.ok || !res.body) throw new Error(`watch answered ${res.status}`);
process.send?.({ ready: true });
const decoder = new TextDecoder();
let rest = '';
for await (const chunk of res.body) {
  const at = now();
  rest += decoder.decode(chunk as Uint8Array, { stream: true });
  let nl: number;
  while ((nl = rest.indexOf('\n')) >= 0) {
    const line = rest.slice(0, nl);
    rest = rest.slice(nl + 1);
    const ev = JSON.parse(line) as { object?: Stack };
    const name = ev.object?.status?.lastUpdate?.name;
    if (name === undefined) continue;
    if (hook) offer(ev.object as Stack, name);
    else seen.push([name, at]);
  }
}
throw new Error('the watch ended');
