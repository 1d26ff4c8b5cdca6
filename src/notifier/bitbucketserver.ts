/**
 * `bitbucketserver` provider (Bitbucket Data Center / Server, REST under `https://HOST[/context]/rest`):
 * build statuses and the sticky pull-request comment, with plain `ProviderHttp` calls — every
 * call is verified against the Provider CA (`certSecretRef`, F08: private CAs are the norm here)
 * and goes through its proxy (F09).
 *
 * Behaviour (facts/forges.md "Bitbucket Data Center"):
 * - Status: `POST /rest/api/latest/projects/{key}/repos/{slug}/commits/{sha}/builds` with `key`
 *   (the context, or a readable prefix + 16 hex digits of its SHA-256 when over 40 characters:
 *   `boundedKey`), `name` = the full context, `state` INPROGRESS|SUCCESSFUL|FAILED, `description`
 *   and `url` (required: the rendered link, else the commit's page
 *   `…/projects/{key}/repos/{slug}/commits/{sha}`).
 * - Deduplication (F05/F06): on a cache miss, every page of the build statuses of the commit
 *   (`GET /rest/build-status/1.0/commits/{sha}`, `start`/`limit`/`isLastPage`, available on every
 *   Data Center version) is read; the newest (`dateAdded`) one with our key decides. That listing
 *   is per commit, not per repository: a fork sharing the commit and our key would be taken as
 *   ours (contexts name the cluster, namespace and Stack, so this needs the same Stack posting
 *   to both).
 * - Pull requests: `metadata.pullRequest` when set; else
 *   `GET …/repos/{slug}/commits/{sha}/pull-requests` (all pages), OPEN ones whose
 *   `fromRef.latestCommit` is the commit.
 * - Sticky comment: general comments are read from the pull request's activities
 *   (`GET …/pull-requests/{id}/activities`, all pages, `COMMENTED`/`ADDED`), ours = contains the
 *   marker AND authored by the credentials' own user (`GET /plugins/servlet/applinks/whoami`,
 *   compared with the author's `name`/`slug`): a human's comment quoting the marker is never
 *   edited (F16). Created with `POST …/comments {text}`, edited with
 *   `PUT …/comments/{id} {text, version}`; a 409 (stale version) re-reads the comment's version
 *   once and edits again. Comments ≤ 32,768 characters (bounded by the renderer).
 * - Auth: HTTP basic with the username (spec.username or key `username`) and `password` (or the
 *   token as password) (F10a); without a username, `Authorization: Bearer <token>` (HTTP access
 *   token).
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
  Lazy,
  pages,
  repositoryFor,
  str,
  type ForgeAdapter,
  type ForgeComment,
  type StatusSnapshot,
  badShape,
} from './forge-common.ts';
import type { ProviderHttp } from './http.ts';
import { limitsFor } from './limits.ts';
import type { CommitState, NotifierFactory } from './types.ts';

/** Longest build `key` sent (limits.ts: the Bitbucket Cloud bound, which Data Center also accepts). */
export const BITBUCKET_SERVER_KEY_MAX = limitsFor('bitbucketserver').statusContext?.max ?? 40;
/** Page size (`limit`) of every listing. */
export const BITBUCKET_SERVER_PAGE_SIZE = 100;

const STATE: Record<CommitState, string> = {
  pending: 'INPROGRESS',
  success: 'SUCCESSFUL',
  failure: 'FAILED',
};

interface PullRequest {
  id: string;
}

/**
 * Pages of a Bitbucket Data Center paged API (`{ values, isLastPage, nextPageStart }`):
 * `start`/`limit` query parameters, until `isLastPage`.
 * @throws ProviderError from the calls; `BAD_RESPONSE` for a page without `values`.
 */
export function pagedValues(
  http: ProviderHttp,
  url: string,
  headers: Record<string, string>,
  what: string,
): AsyncGenerator<unknown[], void, undefined> {
  const sep = url.includes('?') ? '&' : '?';
  return pages<unknown, number>(
    0,
    async (start) => {
      const u = `${url}${sep}start=${start}&limit=${BITBUCKET_SERVER_PAGE_SIZE}`;
      const { data } = await callJson(http, { method: 'GET', url: u, headers });
      const values = field(data, 'values');
      if (!Array.isArray(values)) {
        throw badShape(`GET ${describeURL(u)}`, http.secretValues);
      }
      const next = field(data, 'nextPageStart');
      const last = field(data, 'isLastPage') !== false || typeof next !== 'number' || next <= start;
      return { items: values as unknown[], next: last ? undefined : next };
    },
    what,
    http.secretValues,
  );
}

/** Factory of the `bitbucketserver` provider type. @throws Error when the Provider has no credentials. */
export const bitbucketserver: NotifierFactory = (p, { http }) => {
  const headers = authHeaders(p, 'Bearer', 'bitbucketserver');
  const secretValues = http.secretValues;
  const repoURL = (r: ForgeRepo): string => {
    const [key, slug] = r.path;
    return `${r.apiBase}/api/latest/projects/${encodeURIComponent(key ?? '')}/repos/${encodeURIComponent(slug ?? '')}`;
  };
  /** `https://HOST[/context]`: the API base without its `/rest`. */
  const webRoot = (r: ForgeRepo): string => r.apiBase.replace(/\/rest$/, '');
  const identities = new Map<string, Lazy<string>>();
  const me = (r: ForgeRepo): Promise<string> => {
    let l = identities.get(r.apiBase);
    if (l === undefined) {
      l = new Lazy(async () => {
        const res = await http.request(`${webRoot(r)}/plugins/servlet/applinks/whoami`, {
          method: 'GET',
          headers: { ...headers, Accept: 'text/plain' },
          acceptStatus: [404],
        });
        const name = res.status === 404 ? p.username : res.text.trim();
        if (name === undefined || name === '') {
          throw new ProviderError(
            'Bitbucket Data Center did not say who the credentials belong to (GET /plugins/servlet/applinks/whoami answered no user): check the credentials',
            { code: 'BAD_RESPONSE', retryable: false, secretValues },
          );
        }
        return name.toLowerCase();
      });
      identities.set(r.apiBase, l);
    }
    return l.get();
  };
  const keyOf = (context: string): string => boundedKey(context, BITBUCKET_SERVER_KEY_MAX);
  const commentURL = (r: ForgeRepo, pr: PullRequest): string =>
    `${repoURL(r)}/pull-requests/${pr.id}/comments`;
  const refOf = (id: string, version: unknown): string =>
    `${id}:${typeof version === 'number' ? version : 0}`;

  const adapter: ForgeAdapter<ForgeRepo, PullRequest> = {
    repository: (ev) => repositoryFor('bitbucketserver', p, ev, secretValues),
    repoKey: (r) => repoURL(r).toLowerCase(),
    nativeState: (s) => STATE[s],

    async readStatus(ctx, context) {
      const key = keyOf(context);
      let newest: { at: number; snap: StatusSnapshot } | undefined;
      const url = `${ctx.repo.apiBase}/build-status/1.0/commits/${ctx.sha}`;
      for await (const page of pagedValues(http, url, headers, 'Bitbucket build statuses')) {
        for (const s of page) {
          if (str(field(s, 'key')) !== key) continue;
          const state = str(field(s, 'state'));
          if (state === undefined) continue;
          const added = field(s, 'dateAdded');
          const at = typeof added === 'number' ? added : 0;
          if (newest === undefined || at >= newest.at) {
            newest = { at, snap: { state, description: str(field(s, 'description')) ?? '' } };
          }
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      const [key, slug] = ctx.repo.path;
      const fallback = `${webRoot(ctx.repo)}/projects/${encodeURIComponent(key ?? '')}/repos/${encodeURIComponent(slug ?? '')}/commits/${ctx.sha}`;
      await callJson(http, {
        method: 'POST',
        url: `${repoURL(ctx.repo)}/commits/${ctx.sha}/builds`,
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
        url: `${repoURL(ctx.repo)}/pull-requests/${id}`,
        headers,
        acceptStatus: [404],
      });
      return status === 404 ? undefined : { id };
    },

    async pullRequestsForCommit(ctx) {
      const out: PullRequest[] = [];
      const url = `${repoURL(ctx.repo)}/commits/${ctx.sha}/pull-requests`;
      for await (const page of pagedValues(http, url, headers, 'Bitbucket pull requests of a commit')) {
        for (const pr of page) {
          const id = idOf(field(pr, 'id'));
          if (
            id !== undefined &&
            str(field(pr, 'state')) === 'OPEN' &&
            str(field(field(pr, 'fromRef'), 'latestCommit')) === ctx.sha
          ) {
            out.push({ id });
          }
        }
      }
      return out;
    },

    async *comments(ctx, pr) {
      const mine = await me(ctx.repo);
      const url = `${repoURL(ctx.repo)}/pull-requests/${pr.id}/activities`;
      for await (const page of pagedValues(http, url, headers, 'Bitbucket pull request activities')) {
        const out: ForgeComment[] = [];
        for (const a of page) {
          if (str(field(a, 'action')) !== 'COMMENTED' || str(field(a, 'commentAction')) !== 'ADDED') continue;
          const c = field(a, 'comment');
          const id = idOf(field(c, 'id'));
          const text = str(field(c, 'text'));
          if (id === undefined || text === undefined) continue;
          const author = field(c, 'author');
          const names = [str(field(author, 'name')), str(field(author, 'slug'))].map((n) => n?.toLowerCase());
          out.push({ ref: refOf(id, field(c, 'version')), body: text, mine: names.includes(mine) });
        }
        yield out;
      }
    },

    async createComment(ctx, pr, body) {
      const { data } = await callJson(http, {
        method: 'POST',
        url: commentURL(ctx.repo, pr),
        headers,
        body: { text: body },
      });
      const id = idOf(field(data, 'id'));
      if (id === undefined) {
        throw new ProviderError('Bitbucket Data Center answered a comment creation without a comment id', {
          code: 'BAD_RESPONSE',
          retryable: false,
          secretValues,
        });
      }
      return refOf(id, field(data, 'version'));
    },

    async editComment(ctx, pr, ref, body) {
      const [id = '', v = '0'] = ref.split(':');
      const url = `${commentURL(ctx.repo, pr)}/${id}`;
      const put = (version: number): Promise<{ status: number; data: unknown }> =>
        callJson(http, { method: 'PUT', url, headers, body: { text: body, version }, acceptStatus: [409] });
      let res = await put(Number(v));
      if (res.status === 409) {
        // Someone (or an earlier attempt of ours) edited it since we read it: take the current version.
        const current = await callJson(http, { method: 'GET', url, headers });
        const version = field(current.data, 'version');
        res = await put(typeof version === 'number' ? version : 0);
        if (res.status === 409) {
          throw new ProviderError(`PUT ${url} answered 409 twice: the comment keeps changing; will retry`, {
            code: 'HTTP_409',
            status: 409,
            retryable: true,
            secretValues,
          });
        }
      }
      return refOf(id, field(res.data, 'version'));
    },
  };
  return forgeNotifier(http, { pullRequestComment: p.pullRequestComment, label: 'bitbucketserver' }, adapter);
};
