/**
 * Resolves a Provider's referenced Secrets into typed settings, or a reason why it cannot be
 * used. Secrets are read on demand (never cached in an informer) and their values never leave
 * this module except inside `ResolvedProvider`, which only the notifiers see.
 *
 * Error messages name Secrets and keys, never values: a webhook URL kept in a Secret's
 * `address` key is itself a secret (it embeds the credential), so it is not echoed either.
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import { X509Certificate } from 'node:crypto';
import { parsePrivateKey } from './pem.ts';
import { yaml } from '../text.ts';
import type { Provider, ProviderType, Threading } from '../api/v1alpha1.ts';
import { isGitProviderType } from '../api/v1alpha1.ts';
import { parseDuration } from '../api/duration.ts';
import { isHttpURL, isSshURL } from '../api/url.ts';
import { checkHeaders } from './headers.ts';
import { secretParts, urlSecretParts } from './redact.ts';

/** Decoded Secret `data` (UTF-8), or undefined when the Secret does not exist. */
export type SecretReader = (namespace: string, name: string) => Promise<Record<string, string> | undefined>;

export interface GitHubAppCredentials {
  appID: string;
  installationID: string;
  privateKey: string;
  baseURL?: string;
}

export interface ResolvedProvider {
  namespace: string;
  name: string;
  type: ProviderType;
  /** Endpoint or forge URL (spec.address, else Secret key `address`). Secret when it came from the Secret. */
  address: string;
  addressFromSecret: boolean;
  apiURL?: string;
  channel?: string;
  username?: string;
  /** spec.threading (slack, googlechat); undefined: the type's default (`thread`). */
  threading?: Threading;
  token?: string;
  password?: string;
  githubApp?: GitHubAppCredentials;
  /** Extra HTTP headers from the Secret key `headers` (YAML map). */
  headers: Record<string, string>;
  tls?: { ca: string; cert?: string; key?: string };
  proxy?: { address: string; username?: string; password?: string };
  /** Per-request timeout in milliseconds (spec.timeout, default 15 s). */
  timeoutMs: number;
  /** spec.suspend: nothing is sent; events are recorded as skipped. */
  suspend: boolean;
  /** Git forges: post the sticky PR/MR comment (spec.pullRequestComment.enabled, default true). */
  pullRequestComment: boolean;
  /** Git forges: Handlebars template for the commit status name (spec.commitStatus.context). */
  commitStatusContext?: string;
  /** Every secret value, for redaction of anything derived from requests or responses. */
  secretValues: string[];
}

export type ProviderNotReadyReason =
  | 'SecretNotFound'
  | 'MissingSecretKey'
  | 'InvalidSecret'
  | 'InvalidAddress'
  | 'InvalidCertificate'
  | 'InvalidProxy'
  | 'RetiredEndpoint'
  | 'InvalidSpec'
  /** Set by the Provider reconciler: the egress policy refuses the address (src/notifier/egress.ts). */
  | 'EgressDenied';

export type ResolveResult =
  | { ok: true; provider: ResolvedProvider }
  | {
      ok: false;
      reason: ProviderNotReadyReason;
      message: string;
      /**
       * With `InvalidAddress`: the refused URL and the field it came from (worded as in
       * `message`), so the caller can say when it points somewhere the egress policy refuses
       * anyway (a metadata address in decimal form): that is the reason to tell.
       */
      invalidURL?: { url: string; where: string };
    };

/** `spec.timeout` bounds, ms: below 1 s no real endpoint answers, above 5 min a send holds its lane too long. */
export const TIMEOUT_RANGE_MS = { min: 1_000, max: 300_000 } as const;

/** Why the port of URL `s` cannot be used (`:0`), or undefined. Ports over 65535 do not parse at all. */
function portProblem(s: string): string | undefined {
  try {
    return new URL(s).port === '0' ? 'port 0 cannot be connected to: use a port from 1 to 65535' : undefined;
  } catch {
    return undefined;
  }
}

const fail = (
  reason: ProviderNotReadyReason,
  message: string,
  invalidURL?: { url: string; where: string },
): ResolveResult => ({
  ok: false,
  reason,
  message,
  ...(invalidURL !== undefined ? { invalidURL } : {}),
});

/** Values trimmed of surrounding whitespace: a `token` with a trailing newline (F10c) is the usual `echo` mistake. */
function trimmed(data: Record<string, string>, key: string): string | undefined {
  const v = data[key]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** Hosts of retired Office 365 connector webhooks (Microsoft retired them in 2026; Workflows replace them). */
function isRetiredTeamsHost(host: string): boolean {
  const h = host.toLowerCase();
  return h.endsWith('.webhook.office.com') || h === 'outlook.office.com' || h.endsWith('.outlook.office.com');
}

/**
 * Validates `provider` and loads its Secrets.
 * Errors are returned, not thrown, except for API failures of `readSecret` (which callers retry).
 */
export async function resolveProvider(provider: Provider, readSecret: SecretReader): Promise<ResolveResult> {
  const ns = provider.metadata.namespace ?? 'default';
  const spec = provider.spec;
  const secretValues: string[] = [];

  let timeoutMs = 15_000;
  if (spec.timeout !== undefined) {
    try {
      timeoutMs = parseDuration(spec.timeout);
    } catch (err) {
      return fail('InvalidSpec', `spec.timeout: ${(err as Error).message}`);
    }
    if (!(timeoutMs >= TIMEOUT_RANGE_MS.min && timeoutMs <= TIMEOUT_RANGE_MS.max)) {
      return fail(
        'InvalidSpec',
        `spec.timeout ${JSON.stringify(spec.timeout)} is outside the range 1s to 5m: set a duration in it (default 15s)`,
      );
    }
  }

  let data: Record<string, string> = {};
  if (spec.secretRef) {
    const s = await readSecret(ns, spec.secretRef.name);
    if (!s) return fail('SecretNotFound', `Secret '${ns}/${spec.secretRef.name}' (spec.secretRef) not found`);
    data = s;
  }
  const secretName = spec.secretRef
    ? `Secret '${ns}/${spec.secretRef.name}'`
    : 'no Secret (spec.secretRef unset)';

  // Address: spec first, else the Secret (Flux convention for webhook URLs).
  const secretAddress = trimmed(data, 'address');
  const address = spec.address ?? secretAddress;
  if (address === undefined) {
    return fail(
      'MissingSecretKey',
      `spec.address is empty and ${secretName} has no key 'address': set one of them to the ${
        isGitProviderType(spec.type) ? 'repository or owner URL' : 'endpoint URL'
      }`,
    );
  }
  const addressFromSecret = spec.address === undefined;
  if (addressFromSecret) {
    secretValues.push(address);
    // Endpoints often echo the path alone (Slack/Discord-style URLs carry the credential there).
    try {
      const u = new URL(address);
      if (u.search.length > 8) secretValues.push(u.search);
    } catch {
      // not a URL: InvalidAddress below
    }
    secretValues.push(...urlSecretParts(address));
  }
  const where = addressFromSecret ? `key 'address' of ${secretName}` : 'spec.address';
  const git = isGitProviderType(spec.type);
  if (!(isHttpURL(address, { userinfo: addressFromSecret }) || (git && isSshURL(address)))) {
    return fail(
      'InvalidAddress',
      `${where} is not a valid ${git ? 'http(s) or ssh repository' : 'http(s)'} URL`,
      { url: address, where },
    );
  }
  const badPort = portProblem(address);
  if (badPort !== undefined) return fail('InvalidAddress', `${where}: ${badPort}`);
  if (
    spec.type === 'msteams' &&
    isHttpURL(address, { userinfo: true }) &&
    isRetiredTeamsHost(new URL(address).hostname)
  ) {
    return fail(
      'RetiredEndpoint',
      `${where} is an Office 365 connector webhook, which Microsoft retired; create a Teams Workflows webhook ("When a Teams webhook request is received") and use its URL`,
    );
  }
  if (spec.apiURL !== undefined && !isHttpURL(spec.apiURL)) {
    return fail('InvalidAddress', 'spec.apiURL is not a valid http(s) URL', {
      url: spec.apiURL,
      where: 'spec.apiURL',
    });
  }
  const badApiPort = spec.apiURL === undefined ? undefined : portProblem(spec.apiURL);
  if (badApiPort !== undefined) return fail('InvalidAddress', `spec.apiURL: ${badApiPort}`);

  const token = trimmed(data, 'token');
  const password = trimmed(data, 'password');
  const username = spec.username ?? trimmed(data, 'username');
  if (token) secretValues.push(...secretParts(token));
  if (password) {
    secretValues.push(password);
    // An echoed `Authorization: Basic …` header is base64 of `user:password`, not of the password.
    if (username !== undefined) secretValues.push(`${username}:${password}`);
  }

  let githubApp: GitHubAppCredentials | undefined;
  const appID = trimmed(data, 'githubAppID');
  if (appID !== undefined || trimmed(data, 'githubAppPrivateKey') !== undefined) {
    if (spec.type !== 'github') {
      return fail('InvalidSecret', `${secretName} has GitHub App keys but the Provider type is ${spec.type}`);
    }
    const installationID = trimmed(data, 'githubAppInstallationID');
    const privateKey = trimmed(data, 'githubAppPrivateKey');
    const missing = [
      appID === undefined ? 'githubAppID' : undefined,
      installationID === undefined ? 'githubAppInstallationID' : undefined,
      privateKey === undefined ? 'githubAppPrivateKey' : undefined,
    ].filter((k) => k !== undefined);
    if (
      missing.length > 0 ||
      appID === undefined ||
      installationID === undefined ||
      privateKey === undefined
    ) {
      return fail('MissingSecretKey', `${secretName} is missing GitHub App key(s): ${missing.join(', ')}`);
    }
    // The forms people paste (literal \n, CRLF, quotes, base64 of the PEM) are normalised (N06).
    const key = parsePrivateKey(data.githubAppPrivateKey ?? privateKey);
    if (!key.ok) return fail('InvalidSecret', `key 'githubAppPrivateKey' of ${secretName} ${key.problem}`);
    secretValues.push(privateKey, key.pem);
    const baseURL = trimmed(data, 'githubAppBaseURL');
    githubApp = {
      appID,
      installationID,
      privateKey: key.pem,
      ...(baseURL !== undefined ? { baseURL } : {}),
    };
  }

  // Credentials each type needs. A partial username/password pair is refused (F10b): never an unauthenticated call.
  if (
    username !== undefined &&
    password === undefined &&
    token === undefined &&
    githubApp === undefined &&
    git
  ) {
    return fail(
      'MissingSecretKey',
      `${secretName} has no key 'password' for username '${username}' (or set key 'token')`,
    );
  }
  if (password !== undefined && username === undefined && token === undefined) {
    return fail(
      'MissingSecretKey',
      `${secretName} has key 'password' but no username: set spec.username or key 'username'`,
    );
  }
  if (git && token === undefined && password === undefined && githubApp === undefined) {
    return fail(
      'MissingSecretKey',
      `${secretName} has no credentials for ${spec.type}: add key 'token'${spec.type === 'github' ? ', GitHub App keys (githubAppID, githubAppInstallationID, githubAppPrivateKey)' : ''} or 'username'+'password'`,
    );
  }
  if (spec.type === 'generic-hmac' && token === undefined) {
    return fail('MissingSecretKey', `${secretName} has no key 'token' (the HMAC key for X-Signature)`);
  }

  let headers: Record<string, string> = {};
  const rawHeaders = data.headers;
  if (rawHeaders !== undefined && rawHeaders.trim() !== '') {
    let parsed: unknown;
    try {
      parsed = yaml().parse(rawHeaders);
    } catch {
      return fail(
        'InvalidSecret',
        `key 'headers' of ${secretName} is not valid YAML (expected a map of header names to strings)`,
      );
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return fail(
        'InvalidSecret',
        `key 'headers' of ${secretName} must be a YAML map of header names to strings`,
      );
    }
    const checked = checkHeaders(parsed as Record<string, unknown>, `key 'headers' of ${secretName}`);
    if (!checked.ok) return fail('InvalidSecret', checked.message);
    headers = checked.headers;
    // Each value and its parts: the token after `Bearer `, basic-auth forms, cookie values (B05).
    for (const value of Object.values(headers)) secretValues.push(...secretParts(value));
  }

  let tls: ResolvedProvider['tls'];
  if (spec.certSecretRef) {
    const s = await readSecret(ns, spec.certSecretRef.name);
    const certName = `Secret '${ns}/${spec.certSecretRef.name}'`;
    if (!s) return fail('SecretNotFound', `${certName} (spec.certSecretRef) not found`);
    const ca = s['ca.crt'];
    if (ca === undefined || ca.trim() === '') {
      return fail('MissingSecretKey', `${certName} has no key 'ca.crt' (PEM CA bundle)`);
    }
    try {
      new X509Certificate(ca);
    } catch {
      return fail('InvalidCertificate', `key 'ca.crt' of ${certName} is not a PEM certificate`);
    }
    const cert = s['tls.crt'];
    const key = s['tls.key'];
    if ((cert === undefined) !== (key === undefined)) {
      return fail(
        'MissingSecretKey',
        `${certName} must have both 'tls.crt' and 'tls.key' for a client certificate, or neither`,
      );
    }
    if (key !== undefined) secretValues.push(key);
    tls = { ca, ...(cert !== undefined && key !== undefined ? { cert, key } : {}) };
  }

  let proxy: ResolvedProvider['proxy'];
  if (spec.proxySecretRef) {
    const s = await readSecret(ns, spec.proxySecretRef.name);
    const proxyName = `Secret '${ns}/${spec.proxySecretRef.name}'`;
    if (!s) return fail('SecretNotFound', `${proxyName} (spec.proxySecretRef) not found`);
    const pAddress = trimmed(s, 'address');
    if (pAddress === undefined)
      return fail('MissingSecretKey', `${proxyName} has no key 'address' (proxy URL)`);
    if (!isHttpURL(pAddress, { userinfo: true }))
      return fail('InvalidProxy', `key 'address' of ${proxyName} is not an http(s) URL`);
    const badProxyPort = portProblem(pAddress);
    if (badProxyPort !== undefined)
      return fail('InvalidProxy', `key 'address' of ${proxyName}: ${badProxyPort}`);
    const pUser = trimmed(s, 'username');
    const pPass = trimmed(s, 'password');
    if ((pUser === undefined) !== (pPass === undefined)) {
      return fail('MissingSecretKey', `${proxyName} must have both 'username' and 'password', or neither`);
    }
    if (pPass !== undefined) secretValues.push(pPass);
    if (pUser !== undefined && pPass !== undefined) secretValues.push(`${pUser}:${pPass}`);
    secretValues.push(pAddress, ...urlSecretParts(pAddress));
    proxy = {
      address: pAddress,
      ...(pUser !== undefined && pPass !== undefined ? { username: pUser, password: pPass } : {}),
    };
  }

  return {
    ok: true,
    provider: {
      namespace: ns,
      name: provider.metadata.name ?? '',
      type: spec.type,
      address,
      addressFromSecret,
      ...(spec.apiURL !== undefined ? { apiURL: spec.apiURL } : {}),
      ...(spec.channel !== undefined ? { channel: spec.channel } : {}),
      ...(spec.threading !== undefined ? { threading: spec.threading } : {}),
      ...(username !== undefined ? { username } : {}),
      ...(token !== undefined ? { token } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(githubApp !== undefined ? { githubApp } : {}),
      headers,
      ...(tls !== undefined ? { tls } : {}),
      ...(proxy !== undefined ? { proxy } : {}),
      timeoutMs,
      suspend: spec.suspend === true,
      pullRequestComment: spec.pullRequestComment?.enabled ?? true,
      ...(spec.commitStatus?.context !== undefined ? { commitStatusContext: spec.commitStatus.context } : {}),
      secretValues,
    },
  };
}
