/**
 * The egress policy (case B09, docs/threat-model.md "Endpoints"): where the controller may open
 * connections on a tenant's behalf. A Provider address is tenant input, and the controller sits
 * inside the cluster with a network position the tenant does not have: without a policy an
 * Alert could make it call the cloud metadata service or its own pod.
 *
 * Refused by default, whatever the form the address takes:
 * - link-local (169.254.0.0/16, fe80::/10) — the metadata services of AWS, GCP, Azure, OCI and
 *   OpenStack answer at 169.254.169.254, ECS task metadata at 169.254.170.2 — and the other
 *   metadata addresses (100.100.100.200 Alibaba Cloud, fd00:ec2::254 AWS IPv6);
 * - "this network" 0.0.0.0/8 and `::` (connecting there reaches the controller itself),
 *   multicast and reserved ranges;
 * - loopback (127.0.0.0/8, ::1) unless `--egress-allow-loopback` (development: `npm start`, tests);
 * - host names matching `--egress-deny-hosts` (default: the GCP metadata names), or not matching
 *   `--egress-allow-hosts` when that is set; addresses in `--egress-deny-cidrs`, or outside
 *   `--egress-allow-cidrs` when that is set.
 * Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7) stay allowed: self-hosted forges live
 * there. The allow lists only confine further; they never re-open a default refusal.
 *
 * Checked on the address actually connected to: IP literals in the URL (the URL parser has already
 * turned decimal, octal and hex IPv4 forms into dotted quads), and every address a host name
 * resolves to, in the `lookup` the socket uses — so the connection goes to an address that was
 * checked (no second resolution to rebind). IPv6 forms that embed an IPv4 address are judged by
 * that address: IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`
 * and 6to4 `2002::/16`. A name resolving to several addresses is refused if any one is refused.
 *
 * Through a proxy (`proxySecretRef`) the proxy resolves the target: its connection is checked as
 * above, and the target is checked before the request by its literal address, its name, and what
 * that name resolves to here (best effort: a name only the proxy can resolve passes).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import picomatch from 'picomatch';
import { buildConnector } from '../undici.ts';

export interface EgressOptions {
  /** Allow loopback addresses (development and tests only). */
  allowLoopback: boolean;
  /** When not empty, only addresses in these CIDRs. */
  allowCIDRs: readonly string[];
  /** Addresses in these CIDRs are refused. */
  denyCIDRs: readonly string[];
  /** When not empty, only host names (or literal addresses) matching these globs. */
  allowHosts: readonly string[];
  /** Host names matching these globs are refused (added to the default ones). */
  denyHosts: readonly string[];
}

/** Host names refused whatever the flags say (what they resolve to is refused too). */
export const DEFAULT_DENIED_HOSTS = ['metadata.google.internal', 'metadata.goog'] as const;

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

const DEFAULT_DENIED: readonly (readonly [string, string])[] = [
  ['169.254.0.0/16', 'link-local (cloud metadata services answer at 169.254.169.254)'],
  ['100.100.100.200/32', 'a cloud metadata service'],
  ['0.0.0.0/8', '"this network" (it reaches the controller itself)'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['fe80::/10', 'link-local'],
  ['fd00:ec2::254/128', 'a cloud metadata service'],
  ['ff00::/8', 'multicast'],
  ['::/128', 'unspecified (it reaches the controller itself)'],
];
const LOOPBACK: readonly (readonly [string, string])[] = [
  ['127.0.0.0/8', 'loopback (allowed only with --egress-allow-loopback, for development)'],
  ['::1/128', 'loopback (allowed only with --egress-allow-loopback, for development)'],
];

function cidr(s: string): Range {
  return ipaddr.parseCIDR(s);
}

function toRange(s: string): Range {
  if (ipaddr.isValidCIDR(s)) return cidr(s);
  const a = ipaddr.parse(s);
  return [a, a.kind() === 'ipv4' ? 32 : 128];
}

function inRange(a: ipaddr.IPv4 | ipaddr.IPv6, r: Range): boolean {
  return a.kind() === r[0].kind() && a.match(r);
}

const NAT64 = cidr('64:ff9b::/96');
const SIX_TO_FOUR = cidr('2002::/16');
const V4_COMPATIBLE = cidr('::/96');

/** The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64, 6to4), or the address itself. */
function effective(a: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  if (a.kind() === 'ipv4') return a;
  const v6 = a as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const bytes = v6.toByteArray();
  const tail = (from: number): ipaddr.IPv4 =>
    new ipaddr.IPv4([bytes[from] ?? 0, bytes[from + 1] ?? 0, bytes[from + 2] ?? 0, bytes[from + 3] ?? 0]);
  if (inRange(v6, NAT64)) return tail(12);
  if (inRange(v6, SIX_TO_FOUR)) return tail(2);
  // `::` and `::1` are themselves, not 0.0.0.0 and 0.0.0.1.
  if (
    inRange(v6, V4_COMPATIBLE) &&
    bytes.slice(0, 12).every((b) => b === 0) &&
    !bytes.slice(12, 15).every((b) => b === 0)
  )
    return tail(12);
  return v6;
}

/** A connection the egress policy refused; `code` is `EGRESS_DENIED`. */
export class EgressDeniedError extends Error {
  override name = 'EgressDeniedError';
  readonly code = 'EGRESS_DENIED';
  /** The refused host name or address. */
  readonly host: string;
  /** The refused address, when a name resolved to it. */
  readonly address: string | undefined;
  /** Why, in words (e.g. "link-local (…)"). */
  readonly why: string;
  constructor(host: string, address: string | undefined, why: string) {
    super(
      address === undefined || address === host
        ? `${host} is ${why}`
        : `${host} resolves to ${address}, which is ${why}`,
    );
    this.host = host;
    this.address = address;
    this.why = why;
  }
}

/**
 * The refusal as a `ProviderError`-shaped description: what was not sent, why, and what to do.
 * `target` is how the request is named in messages (a Secret-held address is not shown).
 */
export function egressMessage(method: string, target: string, denied: EgressDeniedError): string {
  return `${method} ${target} not sent: ${denied.message}, where the controller does not connect (its egress policy, docs/threat-model.md): point the Provider at another address`;
}

/** The first `EgressDeniedError` in `err`'s cause chain (undici wraps connector errors). */
export function egressDenial(err: unknown): EgressDeniedError | undefined {
  let cur: unknown = err;
  for (let i = 0; i < 8 && cur !== null && typeof cur === 'object'; i++) {
    if (cur instanceof EgressDeniedError) return cur;
    const next = (cur as { cause?: unknown; errors?: unknown }).cause;
    const errors = (cur as { errors?: unknown }).errors;
    cur = next ?? (Array.isArray(errors) ? errors[0] : undefined);
  }
  return undefined;
}

function bareHost(host: string): string {
  let h = host.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/** The egress policy of one controller; see the module comment. */
export class EgressPolicy {
  readonly options: EgressOptions;
  readonly #denied: readonly (readonly [Range, string])[];
  readonly #allowCIDRs: readonly Range[];
  readonly #denyCIDRs: readonly Range[];
  readonly #allowHost: ((h: string) => boolean) | undefined;
  readonly #denyHost: (h: string) => boolean;

  /** @throws Error when a CIDR or pattern does not parse (config.ts checks the flags first). */
  constructor(opts: EgressOptions) {
    this.options = opts;
    this.#denied = [...DEFAULT_DENIED, ...(opts.allowLoopback ? [] : LOOPBACK)].map(
      ([c, why]) => [cidr(c), why] as const,
    );
    this.#allowCIDRs = opts.allowCIDRs.map(toRange);
    this.#denyCIDRs = opts.denyCIDRs.map(toRange);
    const glob = { nocase: true, dot: true };
    this.#allowHost = opts.allowHosts.length > 0 ? picomatch([...opts.allowHosts], glob) : undefined;
    this.#denyHost = picomatch([...DEFAULT_DENIED_HOSTS, ...opts.denyHosts], glob);
  }

  /** Why the controller may not connect to IP address `ip`, or undefined. Not an IP: refused. */
  refuseAddress(ip: string): string | undefined {
    const h = bareHost(ip);
    if (!ipaddr.isValid(h) || isIP(h) === 0) return 'not an IP address';
    const a = effective(ipaddr.parse(h));
    for (const [r, why] of this.#denied) if (inRange(a, r)) return why;
    if (this.#denyCIDRs.some((r) => inRange(a, r)))
      return 'in a range the operator denies (--egress-deny-cidrs)';
    if (this.#allowCIDRs.length > 0 && !this.#allowCIDRs.some((r) => inRange(a, r)))
      return 'outside the ranges the operator allows (--egress-allow-cidrs)';
    return undefined;
  }

  /**
   * Why the controller may not contact `host` (a name or a literal address, as in a URL),
   * judged without DNS: host patterns, and the address itself when it is one.
   */
  refuseHost(host: string): string | undefined {
    const h = bareHost(host);
    if (isIP(h) !== 0) return this.refuseAddress(h);
    if (this.#denyHost(h)) return 'a host name the controller does not contact (--egress-deny-hosts)';
    if (this.#allowHost && !this.#allowHost(h))
      return 'not among the host names the operator allows (--egress-allow-hosts)';
    return undefined;
  }

  /** The refusal of `url`'s host (see {@link refuseHost}) as an error, or undefined. Not a URL: undefined. */
  refuseURL(url: string): EgressDeniedError | undefined {
    let host: string;
    try {
      host = new URL(url).hostname;
    } catch {
      return undefined;
    }
    const why = this.refuseHost(host);
    return why === undefined ? undefined : new EgressDeniedError(bareHost(host), undefined, why);
  }

  /**
   * A `lookup` for sockets (net/tls `connect`): resolves like `dns.lookup`, and fails with an
   * `EgressDeniedError` when any resolved address is refused.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) {
        callback(err, '', 0);
        return;
      }
      for (const a of addresses) {
        const why = this.refuseAddress(a.address);
        if (why !== undefined) {
          callback(
            Object.assign(new EgressDeniedError(hostname, a.address, why), { errno: 0, syscall: 'lookup' }),
            '',
            0,
          );
          return;
        }
      }
      const first = addresses[0];
      if (options.all === true) callback(null, addresses);
      else callback(null, first?.address ?? '', first?.family ?? 4);
    });
  };

  /**
   * Checks a target reached through a proxy, before the request: its name or literal address,
   * and what the name resolves to here when it resolves (best effort; see the module comment).
   */
  async checkThroughProxy(url: string): Promise<EgressDeniedError | undefined> {
    const literal = this.refuseURL(url);
    if (literal) return literal;
    let host: string;
    try {
      host = bareHost(new URL(url).hostname);
    } catch {
      return undefined;
    }
    if (isIP(host) !== 0) return undefined;
    const addresses = await new Promise<LookupAddress[]>((resolve) => {
      dnsLookup(host, { all: true }, (err, list) => {
        resolve(err ? [] : list);
      });
    });
    for (const a of addresses) {
      const why = this.refuseAddress(a.address);
      if (why !== undefined) return new EgressDeniedError(host, a.address, why);
    }
    return undefined;
  }

  /**
   * An undici connector (`Agent({ connect })`) that refuses what this policy refuses before any
   * socket is opened: literal addresses and host patterns at once, resolved names in `lookup`.
   * `options` are undici's connector options (TLS material, `timeout`).
   */
  connector(options: buildConnector.BuildOptions): buildConnector.connector {
    const base = buildConnector({ ...options, lookup: this.lookup });
    return (opts, callback) => {
      const why = this.refuseHost(opts.hostname);
      if (why !== undefined) {
        callback(new EgressDeniedError(bareHost(opts.hostname), undefined, why), null);
        return;
      }
      base(opts, callback);
    };
  }
}
