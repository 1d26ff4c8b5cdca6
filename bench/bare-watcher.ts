/**
 * The floor of `npm run bench:flux` (started by it; not run by hand): a bare watcher of PKO
 * `Stack` objects — undici `fetch` on one watch, a `JSON.parse` per line, nothing else — so that
 * the benchmark can measure what the input alone costs on this machine (the status write through
 * the API server and etcd, and the watch event back with the whole Stack) without any controller.
 *
 * Env: BARE_SERVER (API server URL), BARE_CA (PEM of its CA), BARE_TOKEN (bearer token),
 * BARE_PATH (the Stacks' collection path, e.g. `/apis/pulumi.com/v1/namespaces/ours/stacks`).
 * IPC (`process.send`): `{ ready: true }` once the watch is open; on `{ take: true }` it answers
 * `{ seen: [[lastUpdate.name, epoch ms received], …] }` with what arrived since the last take.
 * Times are `performance.timeOrigin + performance.now()`, comparable across processes.
 */
import { Agent, fetch } from 'undici';

const server = process.env.BARE_SERVER ?? '';
const path = process.env.BARE_PATH ?? '';
const headers = { authorization: `Bearer ${process.env.BARE_TOKEN ?? ''}`, accept: 'application/json' };
const dispatcher = new Agent({ connect: { ca: process.env.BARE_CA ?? '' } });
let seen: [string, number][] = [];

process.on('message', (m: { take?: boolean }) => {
  if (m.take !== true) return;
  const out = seen;
  seen = [];
  process.send?.({ seen: out });
});
process.on('disconnect', () => process.exit(0));

const list = await fetch(`${server}${path}?limit=1`, { headers, dispatcher });
const rv = ((await list.json()) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
const res = await fetch(`${server}${path}?watch=1&resourceVersion=${rv}`, { headers, dispatcher });
if (!res.ok || !res.body) throw new Error(`watch answered ${res.status}`);
process.send?.({ ready: true });
const decoder = new TextDecoder();
let rest = '';
for await (const chunk of res.body) {
  const at = performance.timeOrigin + performance.now();
  rest += decoder.decode(chunk as Uint8Array, { stream: true });
  let nl: number;
  while ((nl = rest.indexOf('\n')) >= 0) {
    const line = rest.slice(0, nl);
    rest = rest.slice(nl + 1);
    const ev = JSON.parse(line) as { object?: { status?: { lastUpdate?: { name?: string } } } };
    const name = ev.object?.status?.lastUpdate?.name;
    if (name !== undefined) seen.push([name, at]);
  }
}
throw new Error('the watch ended');
