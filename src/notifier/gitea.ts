/**
 * `gitea` provider (Gitea and Forgejo, API `/api/v1`): commit statuses and the sticky
 * pull-request comment, with plain `ProviderHttp` calls (so the Provider CA, proxy and timeout
 * apply: F08/F09).
 *
 * Behaviour (facts/forges.md "Gitea / Forgejo"):
 * - Status: `POST /repos/{o}/{r}/statuses/{sha}` with `state` (pending|success|failure), `context`,
 *   `description`, `target_url`. Deduplication (F05/F06): on a cache miss, every page of
 *   `GET /repos/{o}/{r}/commits/{sha}/statuses` (`page`/`limit`, `Link` rel="next") is read and the
 *   newest (highest id) status of our context decides; Gitea keeps every posted status, so an
 *   identical one is not posted again.
 * - Pull requests: `metadata.pullRequest` (the PR index) when set; else the open pull requests
 *   (`GET /repos/{o}/{r}/pulls?state=open`, all pages) whose `head.sha` is the commit — Gitea's
 *   "pull request of a commit" endpoint only returns merged ones.
 * - Sticky comment: issue comments (`GET /repos/{o}/{r}/issues/{index}/comments`, following any
 *   `Link` rel="next"), ours = contains the marker AND `user.id` is the token's own user
 *   (`GET /user`): a human's comment quoting the marker is never edited (F16). Created with
 *   `POST …/issues/{index}/comments`, edited with `PATCH /repos/{o}/{r}/issues/comments/{id}`.
 * - Auth: `Authorization: token <token>`; with a username (spec.username or key `username`) and
 *   `password` (or the token as password) HTTP basic auth (F10a). Values arrive trimmed (F10c).
 */
import type { ForgeRepo } from './address.ts';
import {
  authHeaders,
  callJson,
  field,
  forgeNotifier,
  idOf,
  Lazy,
  linkPages,
  repositoryFor,
  str,
  type ForgeAdapter,
  type ForgeComment,
  type StatusSnapshot,
} from './forge-common.ts';
import { ProviderError } from './errors.ts';
import type { NotifierFactory } from './types.ts';

/** Page size of Gitea listings (Gitea's default maximum `MAX_RESPONSE_ITEMS` is 50). */
export const GITEA_PAGE_SIZE = 50;

interface PullRequest {
  id: string;
}

/** Factory of the `gitea` provider type. @throws Error when the Provider has no credentials. */
export const gitea: NotifierFactory = (p, { http }) => {
  const headers = authHeaders(p, 'token', 'gitea');
  const secretValues = http.secretValues;
  const repoPath = (r: ForgeRepo): string =>
    `${r.apiBase}/repos/${r.path.map((s) => encodeURIComponent(s)).join('/')}`;
  const identities = new Map<string, Lazy<string>>();
  const myId = (r: ForgeRepo): Promise<string> => {
    let l = identities.get(r.apiBase);
    if (l === undefined) {
      l = new Lazy(async () => {
        const { data } = await callJson(http, { method: 'GET', url: `${r.apiBase}/user`, headers });
        const id = idOf(field(data, 'id'));
        if (id === undefined) {
          throw new ProviderError(
            'Gitea GET /user answered without a user id: check the Provider address and token',
            {
              code: 'BAD_RESPONSE',
              retryable: false,
              secretValues,
            },
          );
        }
        return id;
      });
      identities.set(r.apiBase, l);
    }
    return l.get();
  };

  const adapter: ForgeAdapter<ForgeRepo, PullRequest> = {
    repository: (ev) => repositoryFor('gitea', p, ev, secretValues),
    repoKey: (r) => repoPath(r).toLowerCase(),
    nativeState: (s) => s,

    async readStatus(ctx, context) {
      let newest: { id: number; snap: StatusSnapshot } | undefined;
      const url = `${repoPath(ctx.repo)}/commits/${ctx.sha}/statuses?limit=${GITEA_PAGE_SIZE}&page=1`;
      for await (const page of linkPages(http, url, headers, 'Gitea commit statuses')) {
        for (const s of page) {
          if (str(field(s, 'context')) !== context) continue;
          const id = Number(field(s, 'id'));
          // Gitea answers `status`; older versions also `state`.
          const state = str(field(s, 'status')) ?? str(field(s, 'state'));
          if (state === undefined || !Number.isFinite(id)) continue;
          if (newest === undefined || id > newest.id) {
            newest = { id, snap: { state, description: str(field(s, 'description')) ?? '' } };
          }
        }
      }
      return newest?.snap;
    },

    async writeStatus(ctx, status) {
      await callJson(http, {
        method: 'POST',
        url: `${repoPath(ctx.repo)}/statuses/${ctx.sha}`,
        headers,
        body: {
          state: status.state,
          context: status.context,
          description: status.description,
          ...(status.targetURL !== undefined ? { target_url: status.targetURL } : {}),
        },
      });
    },

    async pullRequest(ctx, index) {
      const { status } = await callJson(http, {
        method: 'GET',
        url: `${repoPath(ctx.repo)}/pulls/${index}`,
        headers,
        acceptStatus: [404],
      });
      return status === 404 ? undefined : { id: index };
    },

    async pullRequestsForCommit(ctx) {
      const out: PullRequest[] = [];
      const url = `${repoPath(ctx.repo)}/pulls?state=open&limit=${GITEA_PAGE_SIZE}&page=1`;
      for await (const page of linkPages(http, url, headers, 'Gitea pull requests')) {
        for (const pr of page) {
          const n = idOf(field(pr, 'number'));
          if (n !== undefined && str(field(field(pr, 'head'), 'sha')) === ctx.sha) out.push({ id: n });
        }
      }
      return out;
    },

    async *comments(ctx, pr) {
      const me = await myId(ctx.repo);
      const url = `${repoPath(ctx.repo)}/issues/${pr.id}/comments`;
      for await (const page of linkPages(http, url, headers, 'Gitea issue comments')) {
        const out: ForgeComment[] = [];
        for (const c of page) {
          const id = idOf(field(c, 'id'));
          const body = str(field(c, 'body'));
          if (id === undefined || body === undefined) continue;
          out.push({ ref: id, body, mine: idOf(field(field(c, 'user'), 'id')) === me });
        }
        yield out;
      }
    },

    async createComment(ctx, pr, body) {
      const { data } = await callJson(http, {
        method: 'POST',
        url: `${repoPath(ctx.repo)}/issues/${pr.id}/comments`,
        headers,
        body: { body },
      });
      const id = idOf(field(data, 'id'));
      if (id === undefined) {
        throw new ProviderError('Gitea answered a comment creation without a comment id', {
          code: 'BAD_RESPONSE',
          retryable: false,
          secretValues,
        });
      }
      return id;
    },

    async editComment(ctx, _pr, ref, body) {
      await callJson(http, {
        method: 'PATCH',
        url: `${repoPath(ctx.repo)}/issues/comments/${ref}`,
        headers,
        body: { body },
      });
      return ref;
    },
  };
  return forgeNotifier(http, { pullRequestComment: p.pullRequestComment, label: 'gitea' }, adapter);
};
