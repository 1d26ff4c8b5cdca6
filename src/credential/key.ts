/**
 * Identity of a credential, for everything that must treat "the same account on the same
 * service" as one: rate-limit holds (src/delivery/gate.ts) and client-side pacing (GitHub's
 * throttling). Keys are hashes, never tokens.
 */
import { createHash } from 'node:crypto';
import type { ResolvedProvider } from './provider.ts';

/** A stable, non-reversible key: provider type, API host and credential (16 hex characters). */
export function credentialKey(p: ResolvedProvider): string {
  let key = keys.get(p);
  if (key === undefined) {
    key = computeKey(p);
    keys.set(p, key);
  }
  return key;
}

/** Per resolved Provider (resolved once per Provider generation and Secret change; never mutated). */
const keys = new WeakMap<ResolvedProvider, string>();

function computeKey(p: ResolvedProvider): string {
  let host: string;
  try {
    host = new URL(p.apiURL ?? p.address).host.toLowerCase();
  } catch {
    host = p.address;
  }
  const who = p.githubApp
    ? `app:${p.githubApp.appID}:${p.githubApp.installationID}`
    : `${p.username ?? ''}:${p.token ?? p.password ?? ''}`;
  return createHash('sha256').update(`${p.type}\n${host}\n${who}`).digest('hex').slice(0, 16);
}
