/**
 * Credentials and identity helpers shared by the forges that call their REST API directly.
 */
import type { ResolvedProvider } from '../credential/provider.ts';
import { ProviderError } from '../notifier/errors.ts';

/** `Basic <base64(user:password)>`. */
export function basicAuth(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

/**
 * Authorization headers for forges taking either a token or a username/password pair:
 * with `username` and a password (or, lacking one, the token: Atlassian API tokens and Azure
 * DevOps PATs work as basic-auth passwords) → `Basic`; else the token with `tokenScheme`
 * (`Bearer`, or Gitea's `token`).
 * @throws Error when the Provider has neither (resolveProvider already refuses that).
 */
export function authHeaders(p: ResolvedProvider, tokenScheme: string, label: string): Record<string, string> {
  const secret = p.password ?? p.token;
  if (p.username !== undefined && secret !== undefined) {
    return { Authorization: basicAuth(p.username, secret) };
  }
  if (p.token !== undefined) return { Authorization: `${tokenScheme} ${p.token}` };
  throw new Error(
    `Provider ${p.namespace}/${p.name}: type '${label}' needs credentials: key 'token', or 'username' (or spec.username) and 'password', in the Provider's Secret`,
  );
}

/**
 * A value computed once on first use and kept; a failed computation is not kept (the next call
 * tries again). Used for the Provider's own identity (GET /user and the like).
 */
export class Lazy<T> {
  readonly #compute: () => Promise<T>;
  #value: Promise<T> | undefined;

  constructor(compute: () => Promise<T>) {
    this.#compute = compute;
  }

  get(): Promise<T> {
    if (this.#value === undefined) {
      const p = this.#compute();
      this.#value = p;
      p.catch(() => {
        if (this.#value === p) this.#value = undefined;
      });
    }
    return this.#value;
  }
}

/**
 * Values computed once per key on first use, each kept like a {@link Lazy} (a failed computation
 * is not kept): the credentials' own identity per API base.
 */
export class LazyPerKey<T> {
  readonly #values = new Map<string, Lazy<T>>();

  /** The value of `key`, computed by `compute` on first use (or again after a failure). */
  get(key: string, compute: () => Promise<T>): Promise<T> {
    let l = this.#values.get(key);
    if (l === undefined) {
      l = new Lazy(compute);
      this.#values.set(key, l);
    }
    return l.get();
  }
}

/**
 * The credentials' identity an identity call answered (`id`, as read from the answer).
 * @throws ProviderError `BAD_RESPONSE`, final, with `message` (which call, what to check) when
 *   the answer names no user (`id` undefined or empty).
 */
export function identityOf(id: string | undefined, message: string, secretValues: readonly string[]): string {
  if (id === undefined || id === '')
    throw new ProviderError(message, { code: 'BAD_RESPONSE', retryable: false, secretValues });
  return id;
}
