/**
 * The git forges, one folder each (src/forge/<name>/): typed over every `GitProviderType`, so a
 * forge type added to the API without a module does not compile.
 */
import type { GitProviderType } from '../api/v1alpha1.ts';
import { azuredevops } from './azuredevops/index.ts';
import { bitbucket } from './bitbucket/index.ts';
import { bitbucketserver } from './bitbucketserver/index.ts';
import { gitea } from './gitea/index.ts';
import { github } from './github/index.ts';
import { gitlab } from './gitlab/index.ts';
import type { ForgeDefinition } from './types.ts';

export const FORGES: { readonly [T in GitProviderType]: ForgeDefinition<T> } = {
  github,
  gitlab,
  gitea,
  bitbucket,
  bitbucketserver,
  azuredevops,
};
