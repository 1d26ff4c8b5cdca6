/**
 * The informer's WATCH stream (src/kube/informer.ts over `kubeStream`) against a local HTTP
 * server that plays the API server's LIST and WATCH answers byte by byte: events split across
 * chunks, bookmarks, a silent connection (idle cut, resumed without a relist), an over-long line
 * and a line that is not JSON (both: an error, a log line and a relist).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { KubeObject } from '../../src/api/meta.ts';
import type { KubeConfig } from '../../src/kube/client.ts';
import { Informer, MAX_WATCH_LINE_BYTES } from '../../src/kube/informer.ts';
import { createLogger } from '../../src/log.ts';

/** One WATCH request the server saw: its query, and the response to write to. */
interface WatchCall {
  query: URLSearchParams;
  res: ServerResponse;
}

interface Fake {
  kc: KubeConfig;
  lists: number;
  watches: WatchCall[];
}

const servers: Server[] = [];
const informers: Informer<KubeObject>[] = [];
afterEach(async () => {
  for (const i of informers.splice(0)) await i.stop();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A fake API server for `/api/v1/configmaps`: LIST answers no items at resourceVersion 10. */
async function fakeServer(): Promise<Fake> {
  const seen = { lists: 0, watches: [] as WatchCall[] };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      seen.watches.push({ query: url.searchParams, res });
      return;
    }
    seen.lists++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        kind: 'ConfigMapList',
        apiVersion: 'v1',
        metadata: { resourceVersion: '10' },
        items: [],
      }),
    );
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const kc: KubeConfig = {
    getCurrentCluster: () => ({ name: 'fake', server: origin }),
    applySecurityAuthentication: () => Promise.resolve(),
  };
  return Object.assign(seen, { kc });
}

class Lines extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    for (const l of chunk.toString('utf8').split('\n'))
      if (l !== '') this.lines.push(JSON.parse(l) as Record<string, unknown>);
    cb();
  }
  has(msg: string): boolean {
    return this.lines.some((l) => l.msg === msg);
  }
}

function start(fake: Fake, logs: Lines, watchIdleMs = 60_000): Informer<KubeObject> {
  const inf = new Informer<KubeObject>({
    name: 'cms',
    kubeConfig: fake.kc,
    group: '',
    version: 'v1',
    plural: 'configmaps',
    logger: createLogger({ level: 'debug', destination: logs }),
    backoff: { initialMs: 50, maxMs: 100 },
    watchIdleMs,
  });
  informers.push(inf);
  inf.start();
  return inf;
}

async function until(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const event = (type: string, name: string, rv: string): string =>
  JSON.stringify({
    type,
    object: {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: 'ns', uid: `u-${name}`, resourceVersion: rv },
    },
  });

describe('Informer watch stream', () => {
  it('applies events split across chunks and resumes from a bookmark', async () => {
    const fake = await fakeServer();
    const inf = start(fake, new Lines());
    await inf.waitForSync();
    await until('the first watch', () => fake.watches.length === 1);
    const first = fake.watches[0] as WatchCall;
    expect(first.query.get('resourceVersion')).toBe('10');
    expect(first.query.get('allowWatchBookmarks')).toBe('true');
    const added = `${event('ADDED', 'a', '11')}\n`;
    first.res.write(added.slice(0, 17));
    first.res.write(added.slice(17) + event('ADDED', 'b', '12').slice(0, 5));
    first.res.write(`${event('ADDED', 'b', '12').slice(5)}\n`);
    first.res.write(
      `${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } })}\n`,
    );
    await until('two objects', () => inf.size() === 2);
    expect(inf.get('ns', 'a')?.metadata?.resourceVersion).toBe('11');
    first.res.end();
    await until('the second watch', () => fake.watches.length === 2);
    expect(fake.watches[1]?.query.get('resourceVersion')).toBe('15');
    expect(fake.lists).toBe(1);
  });

  it('cuts a watch that sends nothing and resumes it without a relist', async () => {
    const fake = await fakeServer();
    const logs = new Lines();
    const inf = start(fake, logs, 300);
    await inf.waitForSync();
    await until('a second watch after the idle cut', () => fake.watches.length >= 2);
    expect(fake.watches[1]?.query.get('resourceVersion')).toBe('10');
    expect(fake.lists).toBe(1);
    expect(inf.health().ok).toBe(true);
  });

  it('treats a line longer than the bound as an error: log line, relist', async () => {
    const fake = await fakeServer();
    const logs = new Lines();
    const inf = start(fake, logs);
    await inf.waitForSync();
    await until('the first watch', () => fake.watches.length === 1);
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    const res = (fake.watches[0] as WatchCall).res;
    for (let sent = 0; sent <= MAX_WATCH_LINE_BYTES; sent += chunk.length) res.write(chunk);
    await until('the relist', () => fake.lists === 2);
    expect(logs.has('watch event line too long; cutting the watch and relisting')).toBe(true);
    const failed = logs.lines.find((l) => l.msg === 'list/watch failed; relisting after backoff');
    expect(String(failed?.err)).toContain(`a watch event is longer than ${MAX_WATCH_LINE_BYTES} bytes`);
  });

  it('treats a line that is not JSON as an error: log line, relist', async () => {
    const fake = await fakeServer();
    const logs = new Lines();
    const inf = start(fake, logs);
    await inf.waitForSync();
    await until('the first watch', () => fake.watches.length === 1);
    (fake.watches[0] as WatchCall).res.write('<html>proxy error</html>\n');
    await until('the relist', () => fake.lists === 2);
    expect(logs.has('watch event is not JSON; cutting the watch and relisting')).toBe(true);
    expect(inf.hasSynced()).toBe(true);
  });

  it('relists on a 410 ERROR event without counting a failure', async () => {
    const fake = await fakeServer();
    const logs = new Lines();
    const inf = start(fake, logs);
    await inf.waitForSync();
    await until('the first watch', () => fake.watches.length === 1);
    (fake.watches[0] as WatchCall).res.write(
      `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' } })}\n`,
    );
    await until('the relist', () => fake.lists === 2);
    expect(logs.has('watch expired (410 Gone); relisting')).toBe(true);
    expect(logs.has('list/watch failed; relisting after backoff')).toBe(false);
    expect(inf.health().ok).toBe(true);
  });
});
