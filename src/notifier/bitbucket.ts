/**
 * `bitbucket` provider (Bitbucket Cloud, API `https://api.bitbucket.org/2.0`): build statuses and
 * the sticky pull-request comment, with plain `ProviderHttp` calls (Provider CA and proxy apply:
 * F08/F09).
 *
 * Behaviour (facts/forges.md "Bitbucket"):
 * - Status: `POST /repositories/{ws}/{repo}/commit/{sha}/statuses/build` with `key` = the context
 *   when ≤ 40 characters, else a readable prefix + `-` + 16 hex digits of its SHA-256
 *   (`boundedKey`, so long contexts never collide), `name` = the full context, `state`
 *   INPROGRESS|SUCCESSFUL|FAILED, `description`, and `url`. Bitbucket requires `url`: the
 *   rendered link (permalink) when there is one, else the commit's page on Bitbucket
 *   (`https://bitbucket.org/{ws}/{repo}/commits/{sha}`).
 * - The same key overwrites, so deduplication (F05) reads that one status on a cache miss:
 *   `GET …/statuses/build/{key}` (404 = none) — no listing to page through.
 * - Pull requests: `metadata.pullRequest` when set; else `GET …/commit/{sha}/pullrequests` (all
 *   pages), keeping OPEN ones whose source commit is the commit (Bitbucket gives a 12-digit
 *   prefix). When that endpoint is unavailable (404: pull-request commit links not enabled, or
 *   202: still indexing) the OPEN pull requests are listed and matched the same way.
 * - Sticky comment: `GET …/pullrequests/{id}/comments` (all pages via `next`), ours = contains the
 *   marker, not deleted, AND written by the credentials' own account (`GET /user`, compared by
 *   `uuid`): a human's comment quoting the marker is never edited (F16). Created with `POST`,
 *   edited with `PUT …/comments/{comment_id}`, `content.raw` = the markdown body.
 * - Auth: with a username (spec.username or key `username`) HTTP basic with `password` (an app
 *   password or Atlassian API token; or `token` when there is no password); without one,
 *   `Authorization: Bearer <token>` (repository/workspace access token). Identifying our own
 *   comments needs `GET /2.0/user`; credentials that cannot read it fail the comment step with
 *   that call's error (the status is already set by then).
 */
import type { ForgeRepo } from './address.ts';
import { ProviderError } from './errors.ts';
import {
  authHeaders,
  boundedKey,
  callJson,
  describeURL,
  field,
  forgeNotifier,
  idOf,
  isRecord,
  Lazy,
  pages,
  repositoryFor,
  sameOriginNext,
  str,
  type ForgeAdapter,
  type ForgeComment,
  badShape,
} from './forge-common.ts';
import type { ProviderHttp } from './http.ts';
import { limitsFor } from './limits.ts';
import type { CommitState, NotifierFactory } from './types.ts';

/** Longest build status `key` Bitbucket Cloud accepts (400 above it). */
export const BITBUCKET_KEY_MAX = limitsFor('bitbucket').statusContext?.max ?? 40;
/** Page size for listings (`pagelen`; Bitbucket's maximum for these endpoints is 50–100). */
export const BITBUCKET_PAGE_LEN = 50;

const STATE: Record<CommitState, string> = {
  pending: 'INPROGRESS',
  success: 'SUCCESSFUL',
  failure: 'FAILED',
};

interface PullRequest {
  id: string;
}

/**
 * Pages of a Bitbucket Cloud listing (`{ values: [...], next?: url }`), following `next` on the
 * same origin. With `first`, the first page was already fetched from `url` (its JSON).
 * @throws ProviderError from the calls; `BAD_RESPONSE` for a page without `values`.
 */
export function valuesPages(
  http: ProviderHttp,
  url: string,
  headers: Record<string, string>,
  what: string,
  first?: unknown,
): AsyncGenerator<unknown[], void, undefined> {
  let prefetched = first;
  return pages<unknown, string>(
    url,
    async (u) => {
      const data = prefetched ?? (await callJson(http, { method: 'GET', url: u, headers })).data;
      prefetched = undefined;
      const values = field(data, 'values');
      if (!Array.isArray(values)) {
        throw badShape(`GET ${describeURL(u)}`, http.secretValues);
      }
      const next = str(field(data, 'next'));
      return {
        items: values as unknown[],
        next:
          next === undefined || values.length === 0 ? undefined : sameOriginNext(next, u, http.secretValues),
      };
    },
    what,
    http.secretValues,
  );
}

/** Whether a pull request (Bitbucket JSON) is OPEN with `sha` as its source commit (full or abbreviated hash). */
function openWithHead(pr: unknown, sha: string): boolean {
  if (str(field(pr, 'state')) !== 'OPEN') return false;
  const hash = str(field(field(field(pr, 'source'), 'commit'), 'hash'))?.toLowerCase();
  return hash !== undefined && hash.length >= 7 && sha.startsWith(hash);
}

/** Factory of the `bitbucket` provider type. @throws Error when the Provider has no credentials. */
export const bitbucket: NotifierFactory = (p, { http }) => {
  const headers = authHeaders(p, 'Bearer', 'bitbucket');
  const secretValues = http.secretValues;
  const repoURL = (r: ForgeRepo): string =>
    `${r.apiBase}/repositories/${r.path.map((s) => encodeURIComponent(s)).join('/')}`;
  const identities = new Map<string, Lazy<string>>();
  const myUUID = (r: ForgeRepo): Promise<string> => {
    let l = identities.get(r.apiBase);
    if (l === undefined) {
      l = new Lazy(async () => {
        const { data } = await callJson(http, { method: 'GET', url: `${r.apiBase}/user`, headers });
        const uuid = str(field(data, 'uuid'));
        if (uuid === undefined) {
          throw new ProviderError('Bitbucket GET /user answered without a uuid: check the Provider address', {
            code: 'BAD_RESPONSE',
            retryable: false,
            secretValues,
          });
        }
        return uuid;
      });
      identities.set(r.apiBase, l);
    }
    return l.get();
  };
  const keyOf = (context: string): string => boundedKey(context, BITBUCKET_KEY_MAX);

  const adapter: ForgeAdapter<ForgeRepo, PullRequest> = {
    repository: (ev) => repositoryFor('bitbucket', p, ev, secretValues),
    repoKey: (r) => repoURL(r).toLowerCase(),
    nativeState: (s) => STATE[s],

    async readStatus(ctx, context) {
      const { status, data } = await callJson(http, {
        method: 'GET',
        url: `${repoURL(ctx.repo)}/commit/${ctx.sha}/statuses/build/${encodeURIComponent(keyOf(context))}`,
        headers,
        acceptStatus: [404],
      });
      if (status === 404 || !isRecord(data)) return undefined;
      const state = str(data.state);
      return state === undefined ? undefined : { state, description: str(data.description) ?? '' };
    },

    async writeStatus(ctx, status) {
      const [ws, slug] = ctx.repo.path;
      const fallback = `${ctx.repo.webBase}/${encodeURIComponent(ws ?? '')}/${encodeURIComponent(slug ?? '')}/commits/${ctx.sha}`;
      await callJson(http, {
        method: 'POST',
        url: `${repoURL(ctx.repo)}/commit/${ctx.sha}/statuses/build`,
        headers,
        body: {
          key: keyOf(status.context),
          state: status.state,
          name: status.context,
          description: status.description,
          url: status.targetURL !== undefined && status.targetURL !== '' ? status.targetURL : fallback,
        },
      });
    },

    async pullRequest(ctx, id) {
      const { status } = await callJson(http, {
        method: 'GET',
        url: `${repoURL(ctx.repo)}/pullrequests/${id}`,
        headers,
        acceptStatus: [404],
      });
      return status === 404 ? undefined : { id };
    },

    async pullRequestsForCommit(ctx) {
      const out: PullRequest[] = [];
      const byCommit = `${repoURL(ctx.repo)}/commit/${ctx.sha}/pullrequests?pagelen=${BITBUCKET_PAGE_LEN}`;
      const probe = await callJson(http, { method: 'GET', url: byCommit, headers, acceptStatus: [202, 404] });
      const source =
        probe.status === 200
          ? valuesPages(http, byCommit, headers, 'Bitbucket pull requests of a commit', probe.data)
          : valuesPages(
              http,
              `${repoURL(ctx.repo)}/pullrequests?state=OPEN&pagelen=${BITBUCKET_PAGE_LEN}`,
              headers,
              'Bitbucket open pull requests',
            );
      for await (const page of source) {
        for (const pr of page) {
          const id = idOf(field(pr, 'id'));
          if (id !== undefined && openWithHead(pr, ctx.sha)) out.push({ id });
        }
      }
      return out;
    },

    async *comments(ctx, pr) {
      const me = await myUUID(ctx.repo);
      const url = `${repoURL(ctx.repo)}/pullrequests/${pr.id}/comments?pagelen=100`;
      for await (const page of valuesPages(http, url, headers, 'Bitbucket pull request comments')) {
        const out: ForgeComment[] = [];
        for (const c of page) {
          const id = idOf(field(c, 'id'));
          const body = str(field(field(c, 'content'), 'raw'));
          if (id === undefined || body === undefined || field(c, 'deleted') === true) continue;
          out.push({ ref: id, body, mine: str(field(field(c, 'user'), 'uuid')) === me });
        }
        yield out;
      }
    },

    async createComment(ctx, pr, body) {
      const { data } = await callJson(http, {
        method: 'POST',
        url: `${repoURL(ctx.repo)}/pullrequests/${pr.id}/comments`,
        headers,
        body: { content: { raw: body } },
      });
      const id = idOf(field(data, 'id'));
      if (id === undefined) {
        throw new ProviderError('Bitbucket answered a comment creation without a comment id', {
          code: 'BAD_RESPONSE',
          retryable: false,
          secretValues,
        });
      }
      return id;
    },

    async editComment(ctx, pr, ref, body) {
      await callJson(http, {
        method: 'PUT',
        url: `${repoURL(ctx.repo)}/pullrequests/${pr.id}/comments/${ref}`,
        headers,
        body: { content: { raw: body } },
      });
      return ref;
    },
  };
  return forgeNotifier(http, { pullRequestComment: p.pullRequestComment, label: 'bitbucket' }, adapter);
};
