/**
 * Test PKI made with the `openssl` CLI in a temporary directory: a CA, a server certificate
 * for `localhost` / `127.0.0.1` / `::1` signed by it, a client certificate (for mutual TLS)
 * signed by it, and an unrelated second CA for negative tests. EC P-256 keys, valid 2 days.
 * Generated once per test worker (the promise is memoised).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestPKI {
  /** CA that signed `certPem` and `clientCertPem`. */
  caPem: string;
  /** Server certificate, SAN `DNS:localhost, IP:127.0.0.1, IP:::1`. */
  certPem: string;
  keyPem: string;
  /** Client certificate (extendedKeyUsage clientAuth), CN `pko-test-client`. */
  clientCertPem: string;
  clientKeyPem: string;
  /** A different CA that signed nothing here. */
  otherCaPem: string;
}

let cached: Promise<TestPKI> | undefined;

/** The worker's test PKI (generated on first call). Requires `openssl` on the PATH. */
export function makeTestPKI(): Promise<TestPKI> {
  cached ??= generate();
  return cached;
}

async function openssl(dir: string, args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

async function makeCA(dir: string, name: string): Promise<void> {
  await openssl(dir, [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
}

async function makeLeaf(dir: string, name: string, cn: string, ext: string): Promise<void> {
  await writeFile(join(dir, `${name}.ext`), ext);
  await openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
  await openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    `${name}.crt`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

async function generate(): Promise<TestPKI> {
  const dir = await mkdtemp(join(tmpdir(), 'pko-test-pki-'));
  try {
    await makeCA(dir, 'ca');
    await makeCA(dir, 'other-ca');
    await makeLeaf(
      dir,
      'server',
      'localhost',
      [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature',
        'extendedKeyUsage=serverAuth',
        'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1',
        '',
      ].join('\n'),
    );
    await makeLeaf(
      dir,
      'client',
      'pko-test-client',
      [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature',
        'extendedKeyUsage=clientAuth',
        '',
      ].join('\n'),
    );
    const read = (f: string): Promise<string> => readFile(join(dir, f), 'utf8');
    return {
      caPem: await read('ca.crt'),
      certPem: await read('server.crt'),
      keyPem: await read('server.key'),
      clientCertPem: await read('client.crt'),
      clientKeyPem: await read('client.key'),
      otherCaPem: await read('other-ca.crt'),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
