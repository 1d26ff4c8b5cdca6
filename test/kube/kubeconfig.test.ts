/**
 * The kubeconfig loader (src/kube/kubeconfig.ts through `loadKubeConfig`), against a real local
 * HTTPS server that asks for client certificates and answers with what it saw (Authorization
 * header, client certificate CN), a real CONNECT proxy (test/support/proxy.ts) and real
 * credential plugins (small node scripts).
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApiError, kubeRequest, loadKubeConfig, type KubeConfig } from '../../src/kube/client.ts';
import { FILE_REFRESH_MS, SERVICE_ACCOUNT_DIR } from '../../src/kube/kubeconfig.ts';
import { makeTestPKI, type TestPKI } from '../support/pki.ts';
import { startProxy } from '../support/proxy.ts';

interface Seen {
  authorization: string | null;
  clientCN: string | null;
}

let pki: TestPKI;
let server: Server;
let port = 0;
const b64 = (s: string): string => Buffer.from(s).toString('base64');

beforeAll(async () => {
  pki = await makeTestPKI();
  server = createServer(
    { key: pki.keyPem, cert: pki.certPem, ca: pki.caPem, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const sock = req.socket as TLSSocket;
      const peer = sock.authorized ? sock.getPeerCertificate() : undefined;
      const seen: Seen = {
        authorization: req.headers.authorization ?? null,
        clientCN: typeof peer?.subject.CN === 'string' ? peer.subject.CN : null,
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(seen));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** What the server saw of one GET made with `kc`. */
function call(kc: KubeConfig): Promise<Seen> {
  return kubeRequest<Seen>(kc, { method: 'GET', path: '/api/v1/namespaces/x', timeoutMs: 10_000 });
}

function tmp(): string {
  return mkdtempSync(join(tmpdir(), 'pkonc-kubeconfig-'));
}

/** A kubeconfig with one cluster, one user and a current context naming both. */
function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: `https://127.0.0.1:${port}`, ...cluster } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'x',
  });
}

function write(dir: string, name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** Loads `text` as the `--kubeconfig` file. */
function load(text: string, now?: () => number): KubeConfig {
  return loadKubeConfig({ kubeconfig: write(tmp(), 'config', text), ...(now ? { now } : {}) });
}

describe('cluster TLS', () => {
  it('trusts certificate-authority-data and presents client-certificate-data/client-key-data', async () => {
    const kc = load(
      kubeconfig(
        { 'certificate-authority-data': b64(pki.caPem) },
        { 'client-certificate-data': b64(pki.clientCertPem), 'client-key-data': b64(pki.clientKeyPem) },
      ),
    );
    expect(await call(kc)).toEqual({ authorization: null, clientCN: 'pko-test-client' });
  });

  it('resolves relative certificate paths against the kubeconfig file’s directory', async () => {
    const dir = tmp();
    mkdirSync(join(dir, 'certs'));
    write(dir, 'ca.pem', pki.caPem);
    write(dir, 'certs/client.pem', pki.clientCertPem);
    write(dir, 'certs/client.key', pki.clientKeyPem);
    const file = write(
      dir,
      'config',
      kubeconfig(
        { 'certificate-authority': 'ca.pem' },
        { 'client-certificate': 'certs/client.pem', 'client-key': 'certs/client.key' },
      ),
    );
    // From another working directory: the paths are relative to the file, not to the process.
    expect(process.cwd()).not.toBe(dir);
    expect(await call(loadKubeConfig({ kubeconfig: file }))).toEqual({
      authorization: null,
      clientCN: 'pko-test-client',
    });
  });

  it('refuses an unknown CA, and insecure-skip-tls-verify accepts it', async () => {
    const strict = load(kubeconfig({ 'certificate-authority-data': b64(pki.otherCaPem) }, { token: 't' }));
    const err = await call(strict).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).statusCode).toBe(0);
    const insecure = load(kubeconfig({ 'insecure-skip-tls-verify': true }, { token: 't' }));
    expect(await call(insecure)).toEqual({ authorization: 'Bearer t', clientCN: null });
  });

  it('checks the certificate against tls-server-name', async () => {
    const ok = load(
      kubeconfig({ 'certificate-authority-data': b64(pki.caPem), 'tls-server-name': 'localhost' }, {}),
    );
    expect((await call(ok)).authorization).toBeNull();
    const wrong = load(
      kubeconfig({ 'certificate-authority-data': b64(pki.caPem), 'tls-server-name': 'elsewhere.test' }, {}),
    );
    await expect(call(wrong)).rejects.toThrow(/elsewhere\.test/);
  });

  it('goes through an http proxy-url with CONNECT', async () => {
    const proxy = await startProxy();
    try {
      const kc = load(
        kubeconfig({ 'certificate-authority-data': b64(pki.caPem), 'proxy-url': proxy.url }, { token: 'p' }),
      );
      expect(await call(kc)).toEqual({ authorization: 'Bearer p', clientCN: null });
      expect(proxy.seen).toContain(`CONNECT 127.0.0.1:${port}`);
    } finally {
      await proxy.close();
    }
  });

  it('refuses a SOCKS proxy-url, saying so', () => {
    expect(() => load(kubeconfig({ 'proxy-url': 'socks5://127.0.0.1:1080' }, {}))).toThrow(
      /proxy-url with scheme socks5 is not supported \(SOCKS proxies are not\)/,
    );
  });
});

describe('user credentials', () => {
  it('sends token, tokenFile and username/password', async () => {
    const ca = { 'certificate-authority-data': b64(pki.caPem) };
    expect((await call(load(kubeconfig(ca, { token: 'abc' })))).authorization).toBe('Bearer abc');
    const dir = tmp();
    write(dir, 'tok', 'from-file\n');
    const file = write(dir, 'config', kubeconfig(ca, { tokenFile: 'tok' }));
    expect((await call(loadKubeConfig({ kubeconfig: file }))).authorization).toBe('Bearer from-file');
    expect((await call(load(kubeconfig(ca, { username: 'ann', password: 'pw' })))).authorization).toBe(
      `Basic ${b64('ann:pw')}`,
    );
  });

  it('refuses auth-provider and naming both a token and a password', () => {
    expect(() => load(kubeconfig({}, { 'auth-provider': { name: 'gcp', config: {} } }))).toThrow(
      /auth-provider gcp is not supported \(kubectl removed the in-tree auth providers in Kubernetes 1\.26\); use an exec credential plugin/,
    );
    expect(() => load(kubeconfig({}, { token: 't', username: 'u', password: 'p' }))).toThrow(
      /only one is allowed/,
    );
  });

  it('loads a file whose other users it cannot serve', async () => {
    const doc = JSON.parse(kubeconfig({ 'certificate-authority-data': b64(pki.caPem) }, { token: 'ok' })) as {
      users: unknown[];
    };
    doc.users.push({ name: 'old-gke', user: { 'auth-provider': { name: 'gcp' } } });
    expect((await call(load(JSON.stringify(doc)))).authorization).toBe('Bearer ok');
  });

  it('reads a kubeconfig in YAML, and a YAML flow mapping that is not JSON, like JSON', async () => {
    const ca = b64(pki.caPem);
    const block = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: c`,
      `  cluster: {server: "https://127.0.0.1:${port}", certificate-authority-data: ${ca}}`,
      'users:',
      '- name: u',
      '  user:',
      '    token: from-yaml',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n');
    expect((await call(load(block))).authorization).toBe('Bearer from-yaml');
    // Starts with `{` but is no JSON (unquoted keys): the YAML parser reads it.
    const flow = `{apiVersion: v1, kind: Config, clusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}", certificate-authority-data: ${ca}}}], users: [{name: u, user: {token: from-flow}}], contexts: [{name: x, context: {cluster: c, user: u}}], current-context: x}`;
    expect(() => JSON.parse(flow) as unknown).toThrow();
    expect((await call(load(flow))).authorization).toBe('Bearer from-flow');
  });
});

describe('exec credential plugins', () => {
  /**
   * A plugin that counts its runs in `<dir>/runs`, checks KUBERNETES_EXEC_INFO and its env,
   * and prints a token `tok-<run>` expiring at `$EXPIRES` (none when empty).
   */
  function plugin(dir: string, apiVersion: string): string {
    return write(
      dir,
      'plugin.mjs',
      `import { readFileSync, writeFileSync, existsSync } from 'node:fs';
const runs = (existsSync('${dir}/runs') ? Number(readFileSync('${dir}/runs', 'utf8')) : 0) + 1;
writeFileSync('${dir}/runs', String(runs));
const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO);
if (info.kind !== 'ExecCredential' || info.spec.interactive !== false) process.exit(3);
if (info.spec.cluster?.server !== 'https://127.0.0.1:${port}') process.exit(4);
if (process.env.PLUGIN_MODE !== 'token') process.exit(5);
const status = { token: 'tok-' + runs };
if (process.env.EXPIRES) status.expirationTimestamp = process.env.EXPIRES;
process.stdout.write(JSON.stringify({ apiVersion: '${apiVersion}', kind: 'ExecCredential', status }));
`,
    );
  }

  for (const apiVersion of ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1']) {
    it(`${apiVersion}: runs the plugin, caches its token until expirationTimestamp`, async () => {
      const dir = tmp();
      let now = Date.parse('2030-01-01T00:00:00Z');
      const kc = load(
        kubeconfig(
          { 'certificate-authority-data': b64(pki.caPem) },
          {
            exec: {
              apiVersion,
              command: process.execPath,
              args: [plugin(dir, apiVersion)],
              env: [
                { name: 'PLUGIN_MODE', value: 'token' },
                { name: 'EXPIRES', value: '2030-01-01T00:10:00Z' },
              ],
              provideClusterInfo: true,
              interactiveMode: 'Never',
            },
          },
        ),
        () => now,
      );
      expect((await call(kc)).authorization).toBe('Bearer tok-1');
      now += 9 * 60_000;
      expect((await call(kc)).authorization).toBe('Bearer tok-1');
      expect(readFileSync(join(dir, 'runs'), 'utf8')).toBe('1');
      now += 2 * 60_000;
      expect((await call(kc)).authorization).toBe('Bearer tok-2');
      expect(readFileSync(join(dir, 'runs'), 'utf8')).toBe('2');
    });
  }

  it('gives client certificates from the plugin to TLS', async () => {
    const dir = tmp();
    const script = write(
      dir,
      'cert.mjs',
      `process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',
  status: { clientCertificateData: ${JSON.stringify(pki.clientCertPem)}, clientKeyData: ${JSON.stringify(pki.clientKeyPem)} } }));`,
    );
    const kc = load(
      kubeconfig(
        { 'certificate-authority-data': b64(pki.caPem) },
        {
          exec: {
            apiVersion: 'client.authentication.k8s.io/v1',
            command: process.execPath,
            args: [script],
            interactiveMode: 'Never',
          },
        },
      ),
    );
    expect(await call(kc)).toEqual({ authorization: null, clientCN: 'pko-test-client' });
  });

  it('a failing plugin gives a clear error without its stderr', async () => {
    const dir = tmp();
    const script = write(
      dir,
      'fail.sh',
      '#!/bin/sh\necho "token=hunter2-secret could not be refreshed" >&2\nexit 7\n',
    );
    chmodSync(script, 0o755);
    const kc = load(
      kubeconfig(
        { 'certificate-authority-data': b64(pki.caPem) },
        {
          exec: { apiVersion: 'client.authentication.k8s.io/v1', command: script, interactiveMode: 'Never' },
        },
      ),
    );
    const err = (await call(kc).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(KubeApiError);
    expect(err.message).toContain(
      `credential plugin ${JSON.stringify(script)} of user u failed (exit code 7)`,
    );
    expect(err.message).toContain('its stderr is not shown');
    expect(err.message).not.toContain('hunter2');
  });

  it('names the install hint when the command does not exist', async () => {
    const kc = load(
      kubeconfig(
        {},
        {
          exec: {
            apiVersion: 'client.authentication.k8s.io/v1beta1',
            command: 'pkonc-no-such-plugin',
            installHint: 'install it from example.test',
          },
        },
      ),
    );
    await expect(call(kc)).rejects.toThrow(/could not be started: ENOENT \(install it from example\.test\)/);
  });

  it('refuses an old or missing exec apiVersion', () => {
    expect(() =>
      load(kubeconfig({}, { exec: { apiVersion: 'client.authentication.k8s.io/v1alpha1', command: 'x' } })),
    ).toThrow(/exec\.apiVersion "client\.authentication\.k8s\.io\/v1alpha1" is not supported/);
  });
});

describe('in-cluster', () => {
  /** A service-account folder under a fresh prefix with `token` and `ca.crt`. */
  function serviceAccount(token: string): string {
    const prefix = tmp();
    const dir = `${prefix}${SERVICE_ACCOUNT_DIR}`;
    mkdirSync(dir, { recursive: true });
    write(dir, 'token', token);
    write(dir, 'ca.crt', pki.caPem);
    return prefix;
  }

  it('uses the service account token, reading it again as it rotates', async () => {
    const prefix = serviceAccount('first');
    let now = 1_000_000;
    const kc = loadKubeConfig({
      inClusterPathPrefix: prefix,
      env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(port) },
      now: () => now,
    });
    expect(kc.getCurrentCluster()?.server).toBe(`https://127.0.0.1:${port}`);
    expect((await call(kc)).authorization).toBe('Bearer first');
    write(`${prefix}${SERVICE_ACCOUNT_DIR}`, 'token', 'second');
    now += FILE_REFRESH_MS - 1;
    expect((await call(kc)).authorization).toBe('Bearer first');
    now += 1;
    expect((await call(kc)).authorization).toBe('Bearer second');
  });

  it('puts an IPv6 service host in brackets', () => {
    const kc = loadKubeConfig({
      inClusterPathPrefix: serviceAccount('t'),
      env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' },
    });
    expect(kc.getCurrentCluster()?.server).toBe('https://[fd00::1]:443');
  });

  it('without KUBERNETES_SERVICE_HOST falls through and names every source tried', () => {
    const prefix = serviceAccount('t');
    expect(() => loadKubeConfig({ inClusterPathPrefix: prefix, env: {}, home: tmp() })).toThrow(
      `no Kubernetes configuration found: tried --kubeconfig (not given); in-cluster (${prefix}${SERVICE_ACCOUNT_DIR}/token exists but KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are unset); KUBECONFIG and ~/.kube/config (none found or no current context)`,
    );
  });
});

describe('KUBECONFIG', () => {
  const file = (dir: string, name: string, doc: Record<string, unknown>): string =>
    write(dir, name, JSON.stringify({ apiVersion: 'v1', kind: 'Config', ...doc }));

  it('merges the list as kubectl: first to set a name wins, first current-context wins', () => {
    const dir = tmp();
    const a = file(dir, 'a', {
      clusters: [{ name: 'c1', cluster: { server: 'https://first.test' } }],
      contexts: [],
    });
    const b = file(dir, 'b', {
      clusters: [
        { name: 'c1', cluster: { server: 'https://second.test' } },
        { name: 'c2', cluster: { server: 'https://c2.test' } },
      ],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [
        { name: 'one', context: { cluster: 'c1', user: 'u' } },
        { name: 'two', context: { cluster: 'c2', user: 'u' } },
      ],
      'current-context': 'one',
    });
    const c = file(dir, 'c', { 'current-context': 'two' });
    const missing = join(dir, 'missing');
    const env = { KUBECONFIG: [missing, a, b, c].join(':') };
    const kc = loadKubeConfig({ inClusterPathPrefix: tmp(), env });
    expect(kc.getCurrentCluster()).toEqual({ name: 'c1', server: 'https://first.test' });
    const later = loadKubeConfig({ inClusterPathPrefix: tmp(), env: { KUBECONFIG: [a, c, b].join(':') } });
    expect(later.getCurrentCluster()).toEqual({ name: 'c2', server: 'https://c2.test' });
  });

  it('falls back to ~/.kube/config, and names the file that does not parse', () => {
    const home = tmp();
    mkdirSync(join(home, '.kube'));
    file(home, '.kube/config', {
      clusters: [{ name: 'h', cluster: { server: 'https://home.test' } }],
      contexts: [{ name: 'h', context: { cluster: 'h' } }],
      'current-context': 'h',
    });
    expect(loadKubeConfig({ inClusterPathPrefix: tmp(), env: {}, home }).getCurrentCluster()?.server).toBe(
      'https://home.test',
    );
    const bad = write(tmp(), 'bad', 'clusters: [unclosed');
    expect(() => loadKubeConfig({ inClusterPathPrefix: tmp(), env: { KUBECONFIG: bad } })).toThrow(
      new RegExp(`KUBECONFIG or ~/.kube/config failed to load: ${bad}: `),
    );
  });
});
