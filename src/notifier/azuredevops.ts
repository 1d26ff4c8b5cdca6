/**
 * `azuredevops` provider (Azure DevOps Services and Server, Git REST API 7.1): commit statuses
 * and the sticky pull-request comment thread, with plain `ProviderHttp` calls (Provider CA and
 * proxy apply: F08/F09).
 *
 * Behaviour (facts/forges.md "Azure DevOps"):
 * - Status: `POST {org}/{project}/_apis/git/repositories/{repo}/commits/{sha}/statuses` with
 *   `context: { genre: 'pko-notification-controller', name: <context> }`, `state`
 *   pending|succeeded|failed, `description`, `targetUrl`. Deduplication (F05/F06): on a cache
 *   miss the commit's statuses are read (`latestOnly=true`, `top`/`skip` pages until a short
 *   page) and the newest (highest id) one of our genre and name decides.
 * - Pull requests: `metadata.pullRequest` when set; else the active pull requests
 *   (`searchCriteria.status=active`, `$top`/`$skip` pages) whose `lastMergeSourceCommit.commitId`
 *   is the commit.
 * - Sticky comment: a thread whose first comment carries the marker AND was written by the
 *   credentials' own identity (`GET {org}/_apis/connectionData` → `authenticatedUser.id`): a
 *   human's comment quoting the marker is never edited (F16). Threads are listed with
 *   `x-ms-continuationtoken` paging when the server uses it; deleted threads and comments are
 *   skipped. Created as a new thread without a status (so it never blocks a "comments must be
 *   resolved" policy); edited with `PATCH …/threads/{threadId}/comments/{commentId}`.
 * - Auth: HTTP basic with an empty user name and the PAT (key `token`); with a username
 *   (spec.username or key `username`), basic with it and `password` (or the token).
 *   Azure DevOps answers an unauthenticated or badly authenticated call with 203 and a sign-in
 *   page: that is reported as a final credentials error.
 */
import type { ResolvedProvider } from '../credential/provider.ts';
import type { ForgeRepo } from './address.ts';
import { ProviderError } from './errors.ts';
import {
  basicAuth,
  describeURL,
  field,
  forgeNotifier,
  idOf,
  isRecord,
  Lazy,
  pages,
  parseJson,
  repositoryFor,
  str,
  type ForgeAdapter,
  type ForgeComment,
  type StatusSnapshot,
  badShape,
} from './forge-common.ts';
import type { CommitState, NotifierFactory } from './types.ts';

/** REST API version sent with every call. */
export const AZURE_API_VERSION = '7.1';
/** `context.genre` of every status this controller posts. */
export const AZURE_STATUS_GENRE = 'pko-notification-controller';
/** Page size (`top` / `$top`). */
export const AZURE_PAGE_SIZE = 100;

const STATE: Record<CommitState, string> = { pending: 'pending', success: 'succeeded', failure: 'failed' };

interface PullRequest {
  id: string;
}

function azureAuth(p: ResolvedProvider): Record<string, string> {
  const secret = p.password ?? p.token;
  if (p.username !== undefined && secret !== undefined)
    return { Authorization: basicAuth(p.username, secret) };
  if (p.token !== undefined) return { Authorization: basicAuth('', p.token) };
  throw new Error(
    `Provider ${p.namespace}/${p.name}: type 'azuredevops' needs a personal access token: set key 'token' in the Provider's Secret`,
  );
}

/** `url` with `api-version` (and more query parameters) appended. */
function withQuery(url: string, params: Record<string, string | number>): string {
  const u = new URL(url);
  u.searchParams.set('api-version', AZURE_API_VERSION);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, String(v));
  return u.toString();
}

/** Factory of the `azuredevops` provider type. @throws Error when the Provider has no PAT. */
export const azuredevops: NotifierFactory = (p, { http }) => {
  const headers = azureAuth(p);
  const secretValues = http.secretValues;

  /** One call; 203 (sign-in page) is a credentials error; JSON parsed for 2xx. */
  const call = async (
    method: string,
    url: string,
    body?: unknown,
    acceptStatus?: readonly number[],
  ): Promise<{ status: number; data: unknown; continuation: string | null }> => {
    const res = await http.request(url, {
      method,
      headers: {
        ...headers,
        Accept: 'application/json',
        ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(acceptStatus !== undefined ? { acceptStatus } : {}),
    });
    if (res.status === 203) {
      throw new ProviderError(
        `${method} ${describeURL(url)} answered 203 with a sign-in page: Azure DevOps did not accept the credentials; check key 'token' (a PAT with Code read & write and Code status scopes) in the Provider's Secret`,
        { code: 'HTTP_203', status: 203, retryable: false, secretValues },
      );
    }
    const ok = res.status >= 200 && res.status <= 299;
    return {
      status: res.status,
      data: ok ? parseJson(res, `${method} ${describeURL(url)}`, secretValues) : null,
      continuation: res.headers.get('x-ms-continuationtoken'),
    };
  };
  const values = (data: unknown, url: string): unknown[] => {
    const v = field(data, 'value');
    if (!Array.isArray(v)) {
      throw badShape(`GET ${describeURL(url)}`, secretValues);
    }
    return v as unknown[];
  };
  /** `top`/`skip` listing (`$top`/`$skip` when `dollar`), until a page shorter than `top`. */
  const skipPages = (
    url: string,
    dollar: boolean,
    what: string,
  ): AsyncGenerator<unknown[], void, undefined> =>
    pages<unknown, number>(
      0,
      async (skip) => {
        const u = withQuery(url, {
          [dollar ? '$top' : 'top']: AZURE_PAGE_SIZE,
          [dollar ? '$skip' : 'skip']: skip,
        });
        const items = values((await call('GET', u)).data, u);
        return { items, next: items.length < AZURE_PAGE_SIZE ? undefined : skip + items.length };
      },
      what,
      secretValues,
    );
  /** Listing paged by the `x-ms-continuationtoken` header (one page when the server sends none). */
  const continuationPages = (url: string, what: string): AsyncGenerator<unknown[], void, undefined> =>
    pages<unknown, { token: string | undefined }>(
      { token: undefined },
      async ({ token }) => {
        const u = withQuery(url, token === undefined ? {} : { continuationToken: token });
        const res = await call('GET', u);
        const next =
          res.continuation !== null && res.continuation !== '' && res.continuation !== token
            ? res.continuation
            : undefined;
        return { items: values(res.data, u), next: next === undefined ? undefined : { token: next } };
      },
      what,
      secretValues,
    );

  const repoURL = (r: ForgeRepo): string =>
    `${r.apiBase}/git/repositories/${encodeURIComponent(r.path[2] ?? '')}`;
  /** Organisation/collection-level API base: the project segment removed from `apiBase`. */
  const orgApi = (r: ForgeRepo): string => {
    const project = r.path[1];
    const suffix = project === undefined ? '' : `/${encodeURIComponent(project)}/_apis`;
    return suffix !== '' && r.apiBase.endsWith(suffix)
      ? `${r.apiBase.slice(0, -suffix.length)}/_apis`
      : r.apiBase;
  };
  const identities = new Map<string, Lazy<string>>();
  const me = (r: ForgeRepo): Promise<string> => {
    const base = orgApi(r);
    let l = identities.get(base);
    if (l === undefined) {
      l = new Lazy(async () => {
        const url = `${base}/connectionData`;
        const { data } = await call('GET', url);
        const id = str(field(field(data, 'authenticatedUser'), 'id'));
        if (id === undefined || id === '') {
          throw new ProviderError(
            `GET ${url} answered without the authenticated user: check the credentials`,
            {
              code: 'BAD_RESPONSE',
              retryable: false,
              secretValues,
            },
          );
        }
        return id.toLowerCase();
      });
      identities.set(base, l);
    }
    return l.get();
  };

  const adapter: ForgeAdapter<ForgeRepo, PullRequest> = {
    repository: (ev) => repositoryFor('azuredevops', p, ev, secretValues),
    repoKey: (r) => repoURL(r).toLowerCase(),
    nativeState: (s) => STATE[s],

    async readStatus(ctx, context) {
      let newest: { id: number; snap: StatusSnapshot } | undefined;
      const url = withQuery(`${repoURL(ctx.repo)}/commits/${ctx.sha}/statuses`, { latestOnly: 'true' });
      for await (const page of skipPages(url, false, 'Azure DevOps commit statuses')) {
        for (const s of page) {
          const c = field(s, 'context');
          if (str(field(c, 'name')) !== context || str(field(c, 'genre')) !== AZURE_STATUS_GENRE) continue;
          const id = Number(field(s, 'id'));
          const state = str(field(s, 'state'));
          if (state === undefined || !Number.isFinite(id)) continue;
          if (newest === undefined || id > newest.id) {
            newest = { id, snap: { state, description: str(field(s, 'description')) ?? '' } };
          }
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      await call('POST', withQuery(`${repoURL(ctx.repo)}/commits/${ctx.sha}/statuses`, {}), {
        state: status.state,
        description: status.description,
        context: { genre: AZURE_STATUS_GENRE, name: status.context },
        ...(status.targetURL !== undefined && status.targetURL !== '' ? { targetUrl: status.targetURL } : {}),
      });
    },

    async pullRequest(ctx, id) {
      const { status } = await call(
        'GET',
        withQuery(`${repoURL(ctx.repo)}/pullrequests/${id}`, {}),
        undefined,
        [404],
      );
      return status === 404 ? undefined : { id };
    },

    async pullRequestsForCommit(ctx) {
      const out: PullRequest[] = [];
      const url = withQuery(`${repoURL(ctx.repo)}/pullrequests`, { 'searchCriteria.status': 'active' });
      for await (const page of skipPages(url, true, 'Azure DevOps pull requests')) {
        for (const pr of page) {
          const id = idOf(field(pr, 'pullRequestId'));
          const head = str(field(field(pr, 'lastMergeSourceCommit'), 'commitId'))?.toLowerCase();
          if (id !== undefined && head === ctx.sha && str(field(pr, 'status')) !== 'completed')
            out.push({ id });
        }
      }
      return out;
    },

    async *comments(ctx, pr) {
      const mine = await me(ctx.repo);
      const url = `${repoURL(ctx.repo)}/pullRequests/${pr.id}/threads`;
      for await (const page of continuationPages(url, 'Azure DevOps pull request threads')) {
        const out: ForgeComment[] = [];
        for (const t of page) {
          const threadId = idOf(field(t, 'id'));
          const comments = field(t, 'comments');
          if (threadId === undefined || field(t, 'isDeleted') === true || !Array.isArray(comments)) continue;
          const first = (comments as unknown[]).find(
            (c) => isRecord(c) && (c.parentCommentId === 0 || c.parentCommentId === undefined),
          );
          const commentId = idOf(field(first, 'id'));
          const content = str(field(first, 'content'));
          if (commentId === undefined || content === undefined || field(first, 'isDeleted') === true)
            continue;
          const author = str(field(field(first, 'author'), 'id'))?.toLowerCase();
          out.push({ ref: `${threadId}/${commentId}`, body: content, mine: author === mine });
        }
        yield out;
      }
    },

    async createComment(ctx, pr, body) {
      const { data } = await call(
        'POST',
        withQuery(`${repoURL(ctx.repo)}/pullRequests/${pr.id}/threads`, {}),
        {
          comments: [{ parentCommentId: 0, content: body, commentType: 1 }],
        },
      );
      const threadId = idOf(field(data, 'id'));
      const comments = field(data, 'comments');
      const commentId = Array.isArray(comments) ? idOf(field(comments[0], 'id')) : undefined;
      if (threadId === undefined) {
        throw new ProviderError('Azure DevOps answered a thread creation without a thread id', {
          code: 'BAD_RESPONSE',
          retryable: false,
          secretValues,
        });
      }
      return `${threadId}/${commentId ?? '1'}`;
    },

    async editComment(ctx, pr, ref, body) {
      const [threadId = '', commentId = '1'] = ref.split('/');
      await call(
        'PATCH',
        withQuery(`${repoURL(ctx.repo)}/pullRequests/${pr.id}/threads/${threadId}/comments/${commentId}`, {}),
        { content: body },
      );
      return ref;
    },
  };
  return forgeNotifier(http, { pullRequestComment: p.pullRequestComment, label: 'azuredevops' }, adapter);
};
