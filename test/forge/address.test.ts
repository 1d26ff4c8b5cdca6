import { describe, expect, it } from 'vitest';
import type { GitProviderType } from '../../src/api/v1alpha1.ts';
import { parseForgeAddress, resolveRepository, type ForgeRepo } from '../../src/forge/address.ts';

type Want = Pick<ForgeRepo, 'host' | 'apiBase' | 'webBase' | 'path' | 'id'>;

interface RepoCase {
  name: string;
  type: GitProviderType;
  address: string;
  apiURL?: string;
  stack?: string;
  want: Want;
}

/** Repository addresses (and scopes resolved through a Stack repository). */
const repoCases: RepoCase[] = [
  // --- GitHub
  {
    name: 'github.com https',
    type: 'github',
    address: 'https://github.com/acme/app',
    want: {
      host: 'github.com',
      apiBase: 'https://api.github.com',
      webBase: 'https://github.com',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'github.com with .git, trailing slash, upper-case host, userinfo, query',
    type: 'github',
    address: 'https://x-access-token:ghp_secret@GitHub.com/acme/app.git/?ref=main#frag',
    want: {
      host: 'github.com',
      apiBase: 'https://api.github.com',
      webBase: 'https://github.com',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'github.com scp-like ssh',
    type: 'github',
    address: 'git@github.com:acme/app.git',
    want: {
      host: 'github.com',
      apiBase: 'https://api.github.com',
      webBase: 'https://github.com',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'github.com ssh:// over port 443 (ssh.github.com)',
    type: 'github',
    address: 'ssh://git@ssh.github.com:443/acme/app.git',
    want: {
      host: 'github.com',
      apiBase: 'https://api.github.com',
      webBase: 'https://github.com',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'F02: self-hosted GitHub Enterprise Server → https://HOST/api/v3',
    type: 'github',
    address: 'https://git.corp.example/acme/app',
    want: {
      host: 'git.corp.example',
      apiBase: 'https://git.corp.example/api/v3',
      webBase: 'https://git.corp.example',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'F02: an explicit apiURL overrides the guess',
    type: 'github',
    address: 'https://git.corp.example/acme/app',
    apiURL: 'https://ghe-api.corp.example/api/v3/',
    want: {
      host: 'git.corp.example',
      apiBase: 'https://ghe-api.corp.example/api/v3',
      webBase: 'https://git.corp.example',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'GHES on a non-default port keeps the port',
    type: 'github',
    address: 'https://git.corp.example:8443/acme/app',
    want: {
      host: 'git.corp.example:8443',
      apiBase: 'https://git.corp.example:8443/api/v3',
      webBase: 'https://git.corp.example:8443',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'GHES over plain http (test servers) keeps http',
    type: 'github',
    address: 'http://127.0.0.1:3000/acme/app',
    want: {
      host: '127.0.0.1:3000',
      apiBase: 'http://127.0.0.1:3000/api/v3',
      webBase: 'http://127.0.0.1:3000',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'GHES over ssh: https web/API, no ssh port',
    type: 'github',
    address: 'ssh://git@git.corp.example:2222/acme/app.git',
    want: {
      host: 'git.corp.example',
      apiBase: 'https://git.corp.example/api/v3',
      webBase: 'https://git.corp.example',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'GitHub Enterprise Cloud with data residency (*.ghe.com)',
    type: 'github',
    address: 'https://octocorp.ghe.com/acme/app',
    want: {
      host: 'octocorp.ghe.com',
      apiBase: 'https://api.octocorp.ghe.com',
      webBase: 'https://octocorp.ghe.com',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'github owner scope + Stack repository (Stack spelling kept)',
    type: 'github',
    address: 'https://github.com/ACME',
    stack: 'git@github.com:acme/App.git',
    want: {
      host: 'github.com',
      apiBase: 'https://api.github.com',
      webBase: 'https://github.com',
      path: ['acme', 'App'],
      id: 'acme/App',
    },
  },
  // --- GitLab
  {
    name: 'F01: GitLab subgroups',
    type: 'gitlab',
    address: 'https://gitlab.example.net/platform/infra/stacks/app',
    want: {
      host: 'gitlab.example.net',
      apiBase: 'https://gitlab.example.net/api/v4',
      webBase: 'https://gitlab.example.net',
      path: ['platform', 'infra', 'stacks', 'app'],
      id: 'platform%2Finfra%2Fstacks%2Fapp',
    },
  },
  {
    name: 'F01: same address with a Stack repository elsewhere still goes to the address',
    type: 'gitlab',
    address: 'https://gitlab.example.net/platform/infra/stacks/app',
    stack: 'https://github.com/mirror/app.git',
    want: {
      host: 'gitlab.example.net',
      apiBase: 'https://gitlab.example.net/api/v4',
      webBase: 'https://gitlab.example.net',
      path: ['platform', 'infra', 'stacks', 'app'],
      id: 'platform%2Finfra%2Fstacks%2Fapp',
    },
  },
  {
    name: 'GitLab ssh with port and .git',
    type: 'gitlab',
    address: 'ssh://git@gitlab.example.net:2222/platform/infra/app.git',
    want: {
      host: 'gitlab.example.net',
      apiBase: 'https://gitlab.example.net/api/v4',
      webBase: 'https://gitlab.example.net',
      path: ['platform', 'infra', 'app'],
      id: 'platform%2Finfra%2Fapp',
    },
  },
  {
    name: 'GitLab browse URL (/-/tree/main) is reduced to the project',
    type: 'gitlab',
    address: 'https://gitlab.com/acme/app/-/tree/main',
    want: {
      host: 'gitlab.com',
      apiBase: 'https://gitlab.com/api/v4',
      webBase: 'https://gitlab.com',
      path: ['acme', 'app'],
      id: 'acme%2Fapp',
    },
  },
  {
    name: 'GitLab under a relative root: apiURL wins and the root is stripped',
    type: 'gitlab',
    address: 'https://host.example/gitlab/group/proj',
    apiURL: 'https://host.example/gitlab/api/v4',
    want: {
      host: 'host.example',
      apiBase: 'https://host.example/gitlab/api/v4',
      webBase: 'https://host.example/gitlab',
      path: ['group', 'proj'],
      id: 'group%2Fproj',
    },
  },
  {
    name: 'GitLab numeric project id via /projects/ID',
    type: 'gitlab',
    address: 'https://gitlab.example.net/projects/4242',
    want: {
      host: 'gitlab.example.net',
      apiBase: 'https://gitlab.example.net/api/v4',
      webBase: 'https://gitlab.example.net',
      path: ['4242'],
      id: '4242',
    },
  },
  {
    name: 'GitLab 2-segment address acts as a group when the Stack project lies below it',
    type: 'gitlab',
    address: 'https://gitlab.example.net/platform/infra',
    stack: 'git@gitlab.example.net:platform/infra/stacks/app.git',
    want: {
      host: 'gitlab.example.net',
      apiBase: 'https://gitlab.example.net/api/v4',
      webBase: 'https://gitlab.example.net',
      path: ['platform', 'infra', 'stacks', 'app'],
      id: 'platform%2Finfra%2Fstacks%2Fapp',
    },
  },
  {
    name: 'GitLab explicit group URL /groups/… + Stack repository, case-insensitive prefix',
    type: 'gitlab',
    address: 'https://gitlab.example.net/groups/Platform',
    stack: 'https://gitlab.example.net/platform/infra/app.git',
    want: {
      host: 'gitlab.example.net',
      apiBase: 'https://gitlab.example.net/api/v4',
      webBase: 'https://gitlab.example.net',
      path: ['platform', 'infra', 'app'],
      id: 'platform%2Finfra%2Fapp',
    },
  },
  {
    name: 'GitLab relative root: the Stack repository carries the root too',
    type: 'gitlab',
    address: 'https://host.example/gitlab/groups/team',
    apiURL: 'https://host.example/gitlab/api/v4',
    stack: 'https://host.example/gitlab/team/app.git',
    want: {
      host: 'host.example',
      apiBase: 'https://host.example/gitlab/api/v4',
      webBase: 'https://host.example/gitlab',
      path: ['team', 'app'],
      id: 'team%2Fapp',
    },
  },
  // --- Gitea
  {
    name: 'Gitea',
    type: 'gitea',
    address: 'https://gitea.example.org/acme/app.git',
    want: {
      host: 'gitea.example.org',
      apiBase: 'https://gitea.example.org/api/v1',
      webBase: 'https://gitea.example.org',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'Gitea under a sub-path with apiURL',
    type: 'gitea',
    address: 'https://host.example/git/acme/app',
    apiURL: 'https://host.example/git/api/v1',
    want: {
      host: 'host.example',
      apiBase: 'https://host.example/git/api/v1',
      webBase: 'https://host.example/git',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  // --- Bitbucket Cloud
  {
    name: 'Bitbucket Cloud https',
    type: 'bitbucket',
    address: 'https://someone@bitbucket.org/acme/app.git',
    want: {
      host: 'bitbucket.org',
      apiBase: 'https://api.bitbucket.org/2.0',
      webBase: 'https://bitbucket.org',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  {
    name: 'Bitbucket Cloud ssh',
    type: 'bitbucket',
    address: 'git@bitbucket.org:acme/app.git',
    want: {
      host: 'bitbucket.org',
      apiBase: 'https://api.bitbucket.org/2.0',
      webBase: 'https://bitbucket.org',
      path: ['acme', 'app'],
      id: 'acme/app',
    },
  },
  // --- Bitbucket Data Center
  {
    name: 'Bitbucket DC clone URL with context path',
    type: 'bitbucketserver',
    address: 'https://bitbucket.corp.example/bitbucket/scm/PLAT/app.git',
    want: {
      host: 'bitbucket.corp.example',
      apiBase: 'https://bitbucket.corp.example/bitbucket/rest',
      webBase: 'https://bitbucket.corp.example/bitbucket',
      path: ['PLAT', 'app'],
      id: 'PLAT/app',
    },
  },
  {
    name: 'Bitbucket DC ssh on 7999 (project key upper-cased)',
    type: 'bitbucketserver',
    address: 'ssh://git@bitbucket.corp.example:7999/plat/app.git',
    want: {
      host: 'bitbucket.corp.example',
      apiBase: 'https://bitbucket.corp.example/rest',
      webBase: 'https://bitbucket.corp.example',
      path: ['PLAT', 'app'],
      id: 'PLAT/app',
    },
  },
  {
    name: 'Bitbucket DC browse URL',
    type: 'bitbucketserver',
    address: 'https://bitbucket.corp.example/projects/PLAT/repos/app/browse',
    want: {
      host: 'bitbucket.corp.example',
      apiBase: 'https://bitbucket.corp.example/rest',
      webBase: 'https://bitbucket.corp.example',
      path: ['PLAT', 'app'],
      id: 'PLAT/app',
    },
  },
  {
    name: 'Bitbucket DC personal repository',
    type: 'bitbucketserver',
    address: 'https://bitbucket.corp.example/users/JDoe/repos/app',
    want: {
      host: 'bitbucket.corp.example',
      apiBase: 'https://bitbucket.corp.example/rest',
      webBase: 'https://bitbucket.corp.example',
      path: ['~jdoe', 'app'],
      id: '~jdoe/app',
    },
  },
  {
    name: 'Bitbucket DC project scope + ssh Stack repository',
    type: 'bitbucketserver',
    address: 'https://bitbucket.corp.example/bitbucket/projects/PLAT',
    stack: 'ssh://git@bitbucket.corp.example:7999/plat/app.git',
    want: {
      host: 'bitbucket.corp.example',
      apiBase: 'https://bitbucket.corp.example/bitbucket/rest',
      webBase: 'https://bitbucket.corp.example/bitbucket',
      path: ['PLAT', 'app'],
      id: 'PLAT/app',
    },
  },
  {
    name: 'Bitbucket DC apiURL with /rest/api/1.0 is cut back to /rest',
    type: 'bitbucketserver',
    address: 'https://bitbucket.corp.example/scm/PLAT/app.git',
    apiURL: 'https://bb-api.corp.example/rest/api/1.0',
    want: {
      host: 'bitbucket.corp.example',
      apiBase: 'https://bb-api.corp.example/rest',
      webBase: 'https://bitbucket.corp.example',
      path: ['PLAT', 'app'],
      id: 'PLAT/app',
    },
  },
  // --- Azure DevOps
  {
    name: 'Azure DevOps https',
    type: 'azuredevops',
    address: 'https://acme@dev.azure.com/acme/Platform/_git/app',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://dev.azure.com/acme/Platform/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'Platform', 'app'],
      id: 'acme/Platform/app',
    },
  },
  {
    name: 'Azure DevOps project with a space',
    type: 'azuredevops',
    address: 'https://dev.azure.com/acme/My%20Project/_git/app',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://dev.azure.com/acme/My%20Project/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'My Project', 'app'],
      id: 'acme/My Project/app',
    },
  },
  {
    name: 'Azure DevOps ssh (ssh.dev.azure.com:v3)',
    type: 'azuredevops',
    address: 'git@ssh.dev.azure.com:v3/acme/Platform/app',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://dev.azure.com/acme/Platform/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'Platform', 'app'],
      id: 'acme/Platform/app',
    },
  },
  {
    name: 'Azure DevOps legacy ssh (vs-ssh.visualstudio.com)',
    type: 'azuredevops',
    address: 'acme@vs-ssh.visualstudio.com:v3/acme/Platform/app',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://dev.azure.com/acme/Platform/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'Platform', 'app'],
      id: 'acme/Platform/app',
    },
  },
  {
    name: 'Azure DevOps legacy https (ORG.visualstudio.com/DefaultCollection)',
    type: 'azuredevops',
    address: 'https://acme.visualstudio.com/DefaultCollection/Platform/_git/app',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://dev.azure.com/acme/Platform/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'Platform', 'app'],
      id: 'acme/Platform/app',
    },
  },
  {
    name: 'Azure DevOps repository named like its project (ORG/_git/REPO)',
    type: 'azuredevops',
    address: 'https://dev.azure.com/acme/_git/app',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://dev.azure.com/acme/app/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'app', 'app'],
      id: 'acme/app/app',
    },
  },
  {
    name: 'Azure DevOps organization scope + Stack repository',
    type: 'azuredevops',
    address: 'https://dev.azure.com/acme',
    stack: 'git@ssh.dev.azure.com:v3/acme/Platform/app',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://dev.azure.com/acme/Platform/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'Platform', 'app'],
      id: 'acme/Platform/app',
    },
  },
  {
    name: 'Azure DevOps Server collection',
    type: 'azuredevops',
    address: 'https://tfs.corp.example/tfs/DefaultCollection/Platform/_git/app',
    want: {
      host: 'tfs.corp.example',
      apiBase: 'https://tfs.corp.example/tfs/DefaultCollection/Platform/_apis',
      webBase: 'https://tfs.corp.example',
      path: ['tfs/DefaultCollection', 'Platform', 'app'],
      id: 'tfs/DefaultCollection/Platform/app',
    },
  },
  {
    name: 'Azure DevOps apiURL as the organization URL',
    type: 'azuredevops',
    address: 'https://dev.azure.com/acme/Platform/_git/app',
    apiURL: 'https://proxy.corp.example/azure/acme',
    want: {
      host: 'dev.azure.com',
      apiBase: 'https://proxy.corp.example/azure/acme/Platform/_apis',
      webBase: 'https://dev.azure.com',
      path: ['acme', 'Platform', 'app'],
      id: 'acme/Platform/app',
    },
  },
];

describe('resolveRepository — repositories', () => {
  it.each(repoCases)('$name', ({ type, address, apiURL, stack, want }) => {
    const r = resolveRepository(type, address, apiURL, stack);
    expect(r).toEqual({ ok: true, repo: { type, ...want } });
  });

  it('a repository address ignores the Stack repository entirely', () => {
    const r = resolveRepository(
      'github',
      'https://github.com/acme/app',
      undefined,
      'https://github.com/other/thing.git',
    );
    expect(r.ok && r.repo.id).toBe('acme/app');
  });

  it('a repository address works without a Stack repository', () => {
    const r = resolveRepository('gitea', 'https://gitea.example.org/acme/app', undefined, undefined);
    expect(r.ok && r.repo.id).toBe('acme/app');
  });
});

describe('parseForgeAddress — scopes', () => {
  it.each([
    {
      type: 'github',
      address: 'https://github.com/acme',
      prefix: ['acme'],
      apiBase: 'https://api.github.com',
    },
    {
      type: 'github',
      address: 'https://git.corp.example/',
      prefix: [],
      apiBase: 'https://git.corp.example/api/v3',
    },
    {
      type: 'gitlab',
      address: 'https://gitlab.com/acme',
      prefix: ['acme'],
      apiBase: 'https://gitlab.com/api/v4',
    },
    {
      type: 'gitlab',
      address: 'https://gitlab.com/groups/acme/infra',
      prefix: ['acme', 'infra'],
      apiBase: 'https://gitlab.com/api/v4',
    },
    {
      type: 'gitea',
      address: 'https://gitea.example.org/acme',
      prefix: ['acme'],
      apiBase: 'https://gitea.example.org/api/v1',
    },
    {
      type: 'bitbucket',
      address: 'https://bitbucket.org/acme',
      prefix: ['acme'],
      apiBase: 'https://api.bitbucket.org/2.0',
    },
    {
      type: 'bitbucketserver',
      address: 'https://bb.example/ctx',
      prefix: [],
      apiBase: 'https://bb.example/ctx/rest',
    },
    {
      type: 'bitbucketserver',
      address: 'https://bb.example/projects/plat',
      prefix: ['PLAT'],
      apiBase: 'https://bb.example/rest',
    },
    {
      type: 'azuredevops',
      address: 'https://dev.azure.com/acme/Platform',
      prefix: ['acme', 'Platform'],
      apiBase: 'https://dev.azure.com/acme/Platform/_apis',
    },
  ] as const)('$type $address', ({ type, address, prefix, apiBase }) => {
    const r = parseForgeAddress(type, address);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.scope.isRepository).toBe(false);
    expect(r.scope.prefix).toEqual(prefix);
    expect(r.scope.apiBase).toBe(apiBase);
  });

  it('F01: the GitLab subgroup project is a repository (ambiguous: may be a subgroup)', () => {
    const r = parseForgeAddress('gitlab', 'https://gitlab.example.net/platform/infra/stacks/app');
    expect(r).toEqual({
      ok: true,
      scope: {
        host: 'gitlab.example.net',
        apiBase: 'https://gitlab.example.net/api/v4',
        webBase: 'https://gitlab.example.net',
        prefix: ['platform', 'infra', 'stacks', 'app'],
        isRepository: true,
        ambiguous: true,
      },
    });
  });

  it('a GitLab address ending in .git is unambiguously a project', () => {
    const r = parseForgeAddress('gitlab', 'https://gitlab.example.net/platform/app.git');
    expect(r.ok && r.scope.ambiguous).toBe(false);
  });

  it('F02: a non-github.com host never uses api.github.com', () => {
    const r = parseForgeAddress('github', 'https://git.corp.example/acme/app');
    expect(r.ok && r.scope.apiBase).toBe('https://git.corp.example/api/v3');
    expect(JSON.stringify(r)).not.toContain('api.github.com');
  });
});

describe('resolveRepository — scope failures', () => {
  it('OutsideAddress: another owner; message names both without credentials', () => {
    const r = resolveRepository(
      'github',
      'https://user:s3cr3t-token@github.com/acme',
      undefined,
      'https://oauth2:glpat-abcdef@github.com/other/app.git?x=1',
    );
    expect(r).toMatchObject({ ok: false, reason: 'OutsideAddress' });
    if (r.ok) return;
    expect(r.message).toContain('https://github.com/acme');
    expect(r.message).toContain('https://github.com/other/app.git');
    expect(r.message).not.toMatch(/s3cr3t|glpat|oauth2|user:/);
  });

  it('OutsideAddress: another host', () => {
    const r = resolveRepository(
      'github',
      'https://github.com/acme',
      undefined,
      'https://git.corp.example/acme/app',
    );
    expect(r).toMatchObject({ ok: false, reason: 'OutsideAddress' });
    if (!r.ok) expect(r.message).toContain('another host');
  });

  it('OutsideAddress: prefix matching is per segment, not per character', () => {
    const r = resolveRepository(
      'gitlab',
      'https://gitlab.com/groups/acme',
      undefined,
      'https://gitlab.com/acme-other/app.git',
    );
    expect(r).toMatchObject({ ok: false, reason: 'OutsideAddress' });
  });

  it('NoRepository: scope address and no Stack repository', () => {
    const r = resolveRepository('github', 'https://github.com/acme', undefined, undefined);
    expect(r).toMatchObject({ ok: false, reason: 'NoRepository' });
  });

  it('NoRepository: the Stack repository is not a repository of this forge', () => {
    const r = resolveRepository('github', 'https://github.com/acme', undefined, 'https://github.com/acme');
    expect(r).toMatchObject({ ok: false, reason: 'NoRepository' });
  });

  it.each([
    { type: 'github', address: '' },
    { type: 'github', address: 'ftp://github.com/acme/app' },
    { type: 'github', address: 'https://github.com/acme/app/tree/main' },
    { type: 'gitea', address: 'https://host.example/sub/acme/app' },
    { type: 'bitbucketserver', address: 'https://bb.example/scm/PLAT/app/extra' },
    { type: 'azuredevops', address: 'https://dev.azure.com/acme/Platform/other' },
    { type: 'github', address: 'https://github.com/acme/app', apiURL: 'not a url' },
    { type: 'github', address: 'https://github.com/acme/app', apiURL: 'ftp://x.example/api' },
  ] as const)('InvalidAddress: $type $address $apiURL', (c) => {
    const apiURL = 'apiURL' in c ? c.apiURL : undefined;
    const r = resolveRepository(c.type, c.address, apiURL, 'https://github.com/acme/app');
    expect(r).toMatchObject({ ok: false, reason: 'InvalidAddress' });
    const p = parseForgeAddress(c.type, c.address, apiURL);
    expect(p.ok).toBe(false);
  });

  it('InvalidAddress messages never echo userinfo', () => {
    const r = parseForgeAddress('github', 'https://me:hunter2hunter2@github.com/acme/app/pulls/1');
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.message).toContain('https://github.com/acme/app/pulls/1');
      expect(r.message).not.toContain('hunter2');
    }
  });
});
