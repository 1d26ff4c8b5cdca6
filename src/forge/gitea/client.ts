/**
 * The Gitea client of one Provider: auth headers, repository URLs and the credentials' own user
 * (for recognising our comments), over the Provider's `ProviderHttp` (CA, proxy, timeout: cases
 * F08/F09). Auth: `Authorization: token <token>`; with a username (spec.username or key
 * `username`) and `password` (or the token as password) HTTP basic auth (F10a). Values arrive
 * trimmed (F10c).
 *
 * Case ids (F08, …) are described in docs/cases.md.
 */
import type { ResolvedProvider } from '../../credential/provider.ts';
import type { ProviderHttp } from '../../notifier/http.ts';
import type { ForgeRepo } from '../address.ts';
import { authHeaders, identityOf, LazyPerKey } from '../auth.ts';
import { callJson, field, idOf } from '../json.ts';

/** Page size of Gitea listings (Gitea's default maximum `MAX_RESPONSE_ITEMS` is 50). */
export const GITEA_PAGE_SIZE = 50;

export interface GiteaPullRequest {
  id: string;
}

export interface GiteaClient {
  http: ProviderHttp;
  headers: Record<string, string>;
  secretValues: readonly string[];
  /**
   * `<api>/repos/<owner>/<repo>` as configured; stable key of the repository. A renamed or
   * transferred repository is followed by the shared HTTP client: Gitea 1.27.3 answers an old
   * path with `301` for every method, writes included (observed; `RedirectToRepo` in Gitea's
   * services/context/repo.go), and ProviderHttp repeats the call on the new path with the same
   * method and body, and remembers the move (src/notifier/redirect.ts, case N07).
   */
  repoPath(r: ForgeRepo): string;
  /** The credentials' own user id (`GET /user`), once per API base. */
  myId(r: ForgeRepo, signal: AbortSignal | undefined): Promise<string>;
}

/** @throws Error when the Provider has no credentials. */
export function giteaClient(p: ResolvedProvider, http: ProviderHttp): GiteaClient {
  const headers = authHeaders(p, 'token', 'gitea');
  const secretValues = http.secretValues;
  const identities = new LazyPerKey<string>();
  const originalPath = (r: ForgeRepo): string =>
    `${r.apiBase}/repos/${r.path.map((s) => encodeURIComponent(s)).join('/')}`;
  return {
    http,
    headers,
    secretValues,
    repoPath: originalPath,
    myId: (r, signal) =>
      identities.get(r.apiBase, async () => {
        const { data } = await callJson(http, { method: 'GET', url: `${r.apiBase}/user`, headers, signal });
        const message = 'Gitea GET /user answered without a user id: check the Provider address and token';
        return identityOf(idOf(field(data, 'id')), message, secretValues);
      }),
  };
}
