/**
 * The workspace router of the real-PKO harness (./workspace-router.ts) with two HTTP/2 servers
 * standing for two workspaces' agents: a call goes to the agent whose audience its bearer token
 * names, with its request body, and comes back with the agent's headers, messages and trailers;
 * a call for no known audience is answered gRPC UNAVAILABLE.
 */
import { connect, createServer, type Http2Server, type IncomingHttpHeaders } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkspaceRouter, tokenAudiences } from './workspace-router.ts';

const jwt = (payload: object): string =>
  `Bearer ${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.c2ln`;

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** An "agent": answers every call with `name:<request body>` in two messages, then trailers. */
async function agent(name: string): Promise<number> {
  const server: Http2Server = createServer();
  server.on('stream', (stream, headers) => {
    let body = '';
    stream.on('data', (b: Buffer) => (body += b.toString('utf8')));
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => {
        stream.sendTrailers({ 'grpc-status': '0', 'x-path': String(headers[':path']) });
      });
      stream.write(`${name}:`);
      stream.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(
    () =>
      new Promise((r) => {
        server.close(() => {
          r();
        });
      }),
  );
  return (server.address() as AddressInfo).port;
}

async function call(
  address: string,
  authorization: string | undefined,
  body: string,
): Promise<{ headers: IncomingHttpHeaders; data: string; trailers: IncomingHttpHeaders | undefined }> {
  const session = connect(`http://${address}`);
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({
        ':method': 'POST',
        ':path': '/agent.AutomationService/Preview',
        'content-type': 'application/grpc',
        te: 'trailers',
        ...(authorization !== undefined ? { authorization } : {}),
      });
      let headers: IncomingHttpHeaders = {};
      let trailers: IncomingHttpHeaders | undefined;
      let data = '';
      req.on('response', (h: IncomingHttpHeaders) => {
        headers = h;
      });
      req.on('trailers', (t: IncomingHttpHeaders) => {
        trailers = t;
      });
      req.on('data', (b: Buffer) => (data += b.toString('utf8')));
      req.on('end', () => {
        resolve({ headers, data, trailers });
      });
      req.on('error', reject);
      req.end(body);
    });
  } finally {
    session.close();
  }
}

describe('workspace router', () => {
  it('reads the audiences of a bearer JWT without verifying it', () => {
    expect(tokenAudiences(jwt({ aud: ['app.ns'] }))).toEqual(['app.ns']);
    expect(tokenAudiences(jwt({ aud: 'app.ns' }))).toEqual(['app.ns']);
    expect(tokenAudiences(jwt({}))).toEqual([]);
    expect(tokenAudiences('Bearer not-a-jwt')).toEqual([]);
    expect(tokenAudiences(undefined)).toEqual([]);
  });

  it("forwards each call to its workspace's agent with headers, messages and trailers; an unknown audience gets UNAVAILABLE", async () => {
    const router = await WorkspaceRouter.start(() => undefined);
    closers.push(() => router.close());
    const appPort = await agent('app');
    router.set('app.ns', appPort);
    router.set('app-pr-1.ns', await agent('app-pr-1'));

    const a = await call(router.address, jwt({ aud: ['app.ns'] }), 'one');
    expect([a.headers[':status'], a.data, a.trailers?.['grpc-status'], a.trailers?.['x-path']]).toEqual([
      200,
      'app:one',
      '0',
      '/agent.AutomationService/Preview',
    ]);
    const b = await call(router.address, jwt({ aud: ['app-pr-1.ns'] }), 'two');
    expect([b.data, b.trailers?.['grpc-status']]).toEqual(['app-pr-1:two', '0']);

    const unknown = await call(router.address, jwt({ aud: ['other.ns'] }), 'x');
    expect([unknown.headers['grpc-status'], unknown.data]).toEqual(['14', '']);
    const none = await call(router.address, undefined, 'x');
    expect(none.headers['grpc-status']).toBe('14');
    expect(router.unrouted).toEqual([['other.ns'], []]);
    expect(Object.fromEntries(router.forwarded)).toEqual({ 'app.ns': 1, 'app-pr-1.ns': 1 });

    // A route is removed only by the agent it points at (a newer agent's route stays), then gone.
    router.delete('app.ns', appPort + 1);
    expect((await call(router.address, jwt({ aud: ['app.ns'] }), 'y')).data).toBe('app:y');
    router.delete('app.ns', appPort);
    expect((await call(router.address, jwt({ aud: ['app.ns'] }), 'z')).headers['grpc-status']).toBe('14');
  });
});
