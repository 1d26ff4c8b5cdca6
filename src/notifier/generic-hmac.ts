/**
 * `generic-hmac` provider: the `generic` webhook (./generic.ts) plus, following Flux's
 * convention, `X-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes>` keyed by the
 * Secret's `token` (docs/providers/generic-hmac.md). Receivers verify it over the raw body they received.
 */
import { createHmac } from 'node:crypto';
import { webhookNotifier } from './generic.ts';
import type { NotifierFactory } from './types.ts';

export const SIGNATURE_HEADER = 'X-Signature';

/** `sha256=<hex>` of `body` (UTF-8 bytes) under `key`. */
export function hmacSignature(key: string, body: string): string {
  return `sha256=${createHmac('sha256', key).update(body, 'utf8').digest('hex')}`;
}

/** Factory of the `generic-hmac` provider type; throws when the Provider has no `token`. */
export const genericHmac: NotifierFactory = (p, { http }) => {
  const key = p.token;
  if (key === undefined) {
    throw new Error(
      `Provider ${p.namespace}/${p.name} (generic-hmac) has no key 'token' in its Secret: it is the HMAC key for ${SIGNATURE_HEADER}`,
    );
  }
  return webhookNotifier(p, http, (body) => ({ [SIGNATURE_HEADER]: hmacSignature(key, body) }));
};
