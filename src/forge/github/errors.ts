/**
 * GitHub's answers as `ProviderError`s: status classes, rate limits (primary and secondary: a
 * 403/429 carrying `Retry-After` or `x-ratelimit-*`, or saying "rate limit"), and what to do about
 * each, worded for the Provider's owner.
 */
import { classifyAnswer, type Verdict } from '../../notifier/classify.ts';
import { ProviderError, type HeaderReader } from '../../notifier/errors.ts';

/** Wait for a secondary rate limit that names no time (GitHub: "wait at least 60 s"). */
export const SECONDARY_LIMIT_FALLBACK_MS = 60_000;

/** Shape of an Octokit `RequestError` (not imported: @octokit/request-error is not a direct dependency). */
interface OctokitRequestError {
  status: number;
  message: string;
  cause?: unknown;
  request?: { method?: string; url?: string };
  response?: { headers?: Record<string, string | number | undefined>; data?: unknown };
}

function asRequestError(err: unknown): OctokitRequestError | undefined {
  if (!(err instanceof Error)) return undefined;
  const e = err as Error & Partial<OctokitRequestError>;
  return typeof e.status === 'number' ? (e as OctokitRequestError) : undefined;
}

export function statusOf(err: unknown): number | undefined {
  if (err instanceof ProviderError) return err.status;
  return asRequestError(err)?.status;
}

function headerReader(headers: Record<string, string | number | undefined> | undefined): HeaderReader {
  return {
    get: (name: string) => {
      const v = headers?.[name.toLowerCase()];
      return v === undefined ? null : String(v);
    },
  };
}

/** GitHub's error text: `message` plus each `errors[].message`/`code`. */
function gitHubMessage(data: unknown, fallback: string): string {
  if (data === null || typeof data !== 'object')
    return typeof data === 'string' && data !== '' ? data : fallback;
  const d = data as { message?: unknown; errors?: unknown };
  const parts: string[] = [];
  if (typeof d.message === 'string') parts.push(d.message);
  if (Array.isArray(d.errors)) {
    for (const e of d.errors as unknown[]) {
      if (typeof e === 'string') parts.push(e);
      else if (e !== null && typeof e === 'object') {
        const m = (e as { message?: unknown; code?: unknown; field?: unknown }).message;
        const code = (e as { code?: unknown }).code;
        const field = (e as { field?: unknown }).field;
        if (typeof m === 'string') parts.push(m);
        else if (typeof code === 'string')
          parts.push(`${typeof field === 'string' ? `${field}: ` : ''}${code}`);
      }
    }
  }
  return parts.length > 0 ? parts.join('; ') : fallback;
}

/**
 * Maps whatever an Octokit call threw to a redacted `ProviderError`:
 * - a `ProviderError` from the transport (TLS, proxy, timeout; possibly wrapped by Octokit) as is;
 * - an HTTP error: `HTTP_<status>` with the verdict of src/notifier/classify.ts (status, headers
 *   and GitHub's message: a 403 "issue is locked" is `locked`, not a permission problem, N02;
 *   rate limits wait for `Retry-After` / `x-ratelimit-reset`, else 60 s: docs/providers/github.md);
 * - anything else (e.g. an unusable App private key): `GITHUB_CLIENT`, not retryable.
 */
export function toProviderError(err: unknown, secretValues: readonly string[], nowMs: number): ProviderError {
  if (err instanceof ProviderError) return err;
  const re = asRequestError(err);
  if (re === undefined) {
    const msg = err instanceof Error ? err.message : String(err);
    return new ProviderError(`GitHub client failed: ${msg}`, {
      code: 'GITHUB_CLIENT',
      retryable: false,
      secretValues,
    });
  }
  if (re.cause instanceof ProviderError) return re.cause;
  const status = re.status;
  const method = (re.request?.method ?? 'GET').toUpperCase();
  const url = re.request?.url ?? 'GitHub';
  if (re.response === undefined) {
    // Octokit's own failure without an answer (should not happen: transport errors are ProviderErrors).
    return new ProviderError(`${method} ${url} failed: ${re.message}; will retry`, {
      code: 'NETWORK',
      retryable: true,
      secretValues,
    });
  }
  const headers = headerReader(re.response.headers);
  const said = gitHubMessage(re.response.data, re.message);
  const data = re.response.data;
  const body = typeof data === 'string' ? data : JSON.stringify(data ?? null);
  const classified = classifyAnswer(
    { status, headers, body, ...(re.request?.url ? { url: re.request.url } : {}) },
    nowMs,
  );
  let verdict: Verdict = classified?.verdict ?? { kind: 'badResponse', retry: false };
  if (verdict.kind === 'rateLimited' && verdict.retryAfterMs === undefined) {
    verdict = { ...verdict, retryAfterMs: SECONDARY_LIMIT_FALLBACK_MS };
  }
  const path = safePath(url);
  // The App's own calls: the token exchange and GET /app (not a repository named "app").
  const appCall =
    /\/app\/installations\/[^/]+\/access_tokens$/.test(path) ||
    (/\/app$/.test(path) && !/\/repos\/[^/]+\/app$/.test(path));

  let hint: string;
  switch (verdict.kind) {
    case 'rateLimited':
      hint = `rate limited by GitHub; will retry after ${Math.ceil((verdict.retryAfterMs ?? 0) / 1000)}s`;
      break;
    case 'auth':
      hint =
        status === 403
          ? 'the token is not authorised for this organisation (SAML single sign-on): authorise it in GitHub, or use another token'
          : appCall
            ? "GitHub refused the App's credentials: check githubAppID, githubAppInstallationID and githubAppPrivateKey in the Provider's Secret"
            : "GitHub refused the credentials: check key 'token' of the Provider's Secret (expired or revoked?)";
      break;
    case 'permission':
      hint =
        'the credentials lack permission: a token needs commit statuses write (classic: repo:status) and, for comments, pull requests write; a GitHub App needs the same permissions on this repository';
      break;
    case 'locked':
      hint =
        'the conversation is locked or the repository archived or read-only: not retried for this event (the credentials are fine)';
      break;
    case 'notFound':
      hint = appCall
        ? 'the GitHub App or its installation was not found: check githubAppID, githubAppInstallationID and githubAppBaseURL'
        : 'the repository does not exist or the credentials cannot see it: check the Provider address and the token’s repository access';
      break;
    case 'validation':
      hint = 'GitHub rejected the request (final)';
      break;
    case 'server':
      hint = 'GitHub failed; will retry';
      break;
    case 'conflict':
      hint = 'conflict; will retry';
      break;
    default:
      hint = 'GitHub rejected the request';
  }
  return new ProviderError(`${method} ${url} answered ${status}: ${hint}. GitHub said: ${said}`, {
    code: `HTTP_${status}`,
    status,
    retryable: verdict.retry,
    retryAfterMs: verdict.retryAfterMs,
    secretValues,
    verdict,
  });
}

function safePath(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}
