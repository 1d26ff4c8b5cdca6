/**
 * GitLab merge-request discovery: `metadata.pullRequest` (the MR iid) when set, else the open MRs
 * whose head (`sha`) is the commit — each read once more alone (`GET …/merge_requests/:iid`), the
 * only answer that carries its `head_pipeline`, which the commit status must join (case N09). The
 * base Stack's deployment of a merge asks the same listing for the merged MR (docs/previews.md).
 */
import { LRUCache } from 'lru-cache';
import type { AuthorAssociation } from '../../api/v1alpha1.ts';
import { ProviderError } from '../../notifier/errors.ts';
import type { ForgeRepo } from '../address.ts';
import { field, idOf, str } from '../json.ts';
import { MAX_PAGES } from '../paging.ts';
import type { OpenPullRequest, PullRequestDiscovery, PullRequestPart, PullRequestState } from '../types.ts';
import { PER_PAGE, type GitLabClient, type MergeRequest } from './client.ts';

function toMR(v: unknown): MergeRequest | undefined {
  const iid = idOf(field(v, 'iid'));
  if (iid === undefined) return undefined;
  const hp = field(v, 'head_pipeline');
  const id = Number(field(hp, 'id'));
  const sha = str(field(hp, 'sha'));
  const ref = str(field(hp, 'ref'));
  return {
    id: iid,
    sourceBranch: str(field(v, 'source_branch')),
    headPipeline:
      Number.isSafeInteger(id) && sha !== undefined && ref !== undefined ? { id, sha, ref } : undefined,
  };
}

export function gitlabPulls(c: GitLabClient): PullRequestPart<ForgeRepo, MergeRequest> {
  const show: PullRequestPart<ForgeRepo, MergeRequest>['pullRequest'] = async (ctx, iid) => {
    try {
      return toMR(
        await (
          await c.resources(ctx.repo, ctx.signal)
        ).mergeRequests.show(c.projectId(ctx.repo), Number(iid)),
      );
    } catch (err) {
      if (err instanceof ProviderError && err.status === 404) return undefined;
      throw err;
    }
  };
  /** The merge requests "related to" the commit (every page; any state), as GitLab lists them. */
  const ofCommit = async (ctx: { repo: ForgeRepo; sha: string; signal: AbortSignal | undefined }) => {
    const query = { perPage: PER_PAGE, maxPages: MAX_PAGES };
    const list: unknown = await (
      await c.resources(ctx.repo, ctx.signal)
    ).commits.allMergeRequests(c.projectId(ctx.repo), ctx.sha, query);
    return Array.isArray(list) ? (list as unknown[]) : [];
  };
  return {
    pullRequest: show,

    async pullRequestsForCommit(ctx) {
      const out: MergeRequest[] = [];
      for (const mr of await ofCommit(ctx)) {
        if (str(field(mr, 'state')) !== 'opened' || str(field(mr, 'sha')) !== ctx.sha) continue;
        const iid = idOf(field(mr, 'iid'));
        if (iid === undefined) continue;
        // The list does not show head pipelines: read the merge request itself.
        const full = await show(ctx, iid);
        if (full !== undefined) out.push(full);
      }
      return out;
    },

    // The same listing ("merge requests related to the commit") holds the merged MR whose merge
    // commit, squash commit or — after a fast-forward merge, `merge_commit_sha` null — head the
    // commit is.
    async mergedPullRequests(ctx) {
      const out: MergeRequest[] = [];
      for (const mr of await ofCommit(ctx)) {
        if (str(field(mr, 'state')) !== 'merged') continue;
        const merge = str(field(mr, 'merge_commit_sha'));
        const made =
          merge === ctx.sha ||
          str(field(mr, 'squash_commit_sha')) === ctx.sha ||
          (merge === undefined && str(field(mr, 'sha')) === ctx.sha);
        const iid = idOf(field(mr, 'iid'));
        if (made && iid !== undefined)
          out.push({ id: iid, sourceBranch: str(field(mr, 'source_branch')), headPipeline: undefined });
      }
      return out;
    },
  };
}

/** GitLab access levels (GitLab docs, "Roles and permissions"). */
const DEVELOPER = 30;
const MAINTAINER = 40;
const OWNER = 50;

/**
 * GitLab open merge requests for the preview controller: `GET /projects/:id/merge_requests?
 * state=opened&target_branch=<branch>`, every page (offset pagination; GitLab sends no ETag a
 * conditional request could use on this list). A fork: `source_project_id` ≠
 * `target_project_id`. Association from the author's access level on the project, inherited
 * memberships included (`GET /projects/:id/members/all/:user_id`): Owner → OWNER, Maintainer →
 * MEMBER, Developer → COLLABORATOR (may push), lower or not a member (404) → NONE. Remembered
 * per (project, user) for 5 minutes.
 */
export function gitlabDiscovery(c: GitLabClient): PullRequestDiscovery<ForgeRepo> {
  const associations = new LRUCache<string, AuthorAssociation>({ max: 1_000, ttl: 5 * 60_000 });
  return {
    async listOpen(repo, base, _etag, signal) {
      const list: unknown = await (
        await c.resources(repo, signal)
      ).mergeRequests.all({
        projectId: c.projectId(repo),
        state: 'opened',
        targetBranch: base,
        perPage: PER_PAGE,
        maxPages: MAX_PAGES,
      });
      const pulls: OpenPullRequest[] = [];
      for (const mr of Array.isArray(list) ? list : []) {
        const iid = Number(field(mr, 'iid'));
        const sha = str(field(mr, 'sha'))?.toLowerCase();
        if (!Number.isSafeInteger(iid) || sha === undefined || str(field(mr, 'target_branch')) !== base)
          continue;
        const labels = field(mr, 'labels');
        const author = field(mr, 'author');
        const authorId = idOf(field(author, 'id'));
        pulls.push({
          number: iid,
          headSHA: sha,
          headRef: str(field(mr, 'source_branch')) ?? '',
          baseRef: base,
          fork: idOf(field(mr, 'source_project_id')) !== idOf(field(mr, 'target_project_id')),
          author: str(field(author, 'username')) ?? '',
          ...(authorId !== undefined ? { authorId } : {}),
          association: undefined,
          labels: Array.isArray(labels) ? labels.filter((l): l is string => typeof l === 'string') : [],
          webURL: str(field(mr, 'web_url')) ?? '',
        });
      }
      return { changed: true, pulls, etag: undefined };
    },

    async association(repo, pull, signal) {
      if (pull.authorId === undefined) return 'NONE';
      const key = `${repo.apiBase}\u0000${c.projectId(repo)}\u0000${pull.authorId}`;
      const known = associations.get(key);
      if (known !== undefined) return known;
      let level = 0;
      try {
        const m: unknown = await (
          await c.resources(repo, signal)
        ).members.show(c.projectId(repo), Number(pull.authorId), { includeInherited: true });
        level = Number(field(m, 'access_level')) || 0;
      } catch (err) {
        if (!(err instanceof ProviderError) || err.status !== 404) throw err;
      }
      const found: AuthorAssociation =
        level >= OWNER
          ? 'OWNER'
          : level >= MAINTAINER
            ? 'MEMBER'
            : level >= DEVELOPER
              ? 'COLLABORATOR'
              : 'NONE';
      associations.set(key, found);
      return found;
    },

    // `GET /projects/:id/merge_requests/:iid`: `state` opened/closed/locked/merged,
    // `target_branch`; 404 → none.
    async pullRequestState(repo, number, signal): Promise<PullRequestState | undefined> {
      let mr: unknown;
      try {
        mr = await (await c.resources(repo, signal)).mergeRequests.show(c.projectId(repo), number);
      } catch (err) {
        if (err instanceof ProviderError && err.status === 404) return undefined;
        throw err;
      }
      const s = str(field(mr, 'state'));
      const state = s === 'merged' ? 'merged' : s === 'opened' || s === 'locked' ? 'open' : 'closed';
      return { state, baseRef: str(field(mr, 'target_branch')) ?? '' };
    },

    commentURL: (pullURL, ref) => `${pullURL}#note_${ref}`,
  };
}
