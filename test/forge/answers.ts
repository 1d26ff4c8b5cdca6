/**
 * Real answers of the forges and chat services, each with its source: the classification table
 * (test/notifier/classify.test.ts) reads them, and the contract servers answer with them.
 */

/** An HTTP answer as a server sends it. */
export interface RealAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): RealAnswer => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  body: JSON.stringify(body),
});

// ---------------------------------------------------------------------------------------------
// GitHub (docs.github.com REST; messages as GitHub sends them, quoted in public clients' tests)

const GH_DOCS = 'https://docs.github.com/rest';

export const github = {
  /** Case N02: a comment on a locked conversation (GitHub GraphQL `CommentCannotUpdateReason.LOCKED` carries the same text). */
  locked: json(403, {
    message: 'Unable to create comment because issue is locked.',
    documentation_url: 'https://docs.github.com/articles/locking-conversations/',
    status: '403',
  }),
  /** Any write to an archived repository. */
  archived: json(403, {
    message: 'Repository was archived so is read-only.',
    documentation_url: `${GH_DOCS}/issues/comments#create-an-issue-comment`,
    status: '403',
  }),
  /** "Rate limits for the REST API": the primary limit, `x-ratelimit-remaining: 0` and the reset time. */
  primaryRateLimit: (resetEpochSeconds: number): RealAnswer =>
    json(
      403,
      {
        message: 'API rate limit exceeded for user ID 1.',
        documentation_url: `${GH_DOCS}/overview/rate-limits-for-the-rest-api`,
        status: '403',
      },
      {
        'x-ratelimit-limit': '5000',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-used': '5000',
        'x-ratelimit-reset': String(resetEpochSeconds),
        'x-ratelimit-resource': 'core',
      },
    ),
  /** "Rate limits for the REST API": a secondary limit, with `retry-after`. */
  secondaryRateLimit: (retryAfterSeconds: number | undefined, status: 403 | 429 = 403): RealAnswer =>
    json(
      status,
      {
        message:
          'You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.',
        documentation_url: `${GH_DOCS}/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits`,
        status: String(status),
      },
      retryAfterSeconds === undefined ? {} : { 'retry-after': String(retryAfterSeconds) },
    ),
  /** A GitHub App or fine-grained token without the permission (github/docs#43937 quotes it). */
  notAccessible: json(403, {
    message: 'Resource not accessible by integration',
    documentation_url: `${GH_DOCS}/commits/statuses#create-a-commit-status`,
    status: '403',
  }),
  /** An organisation with SAML single sign-on, a token not authorised for it (`X-GitHub-SSO`). */
  sso: json(
    403,
    {
      message:
        'Resource protected by organization SAML enforcement. You must grant your Personal Access token access to this organization.',
      documentation_url:
        'https://docs.github.com/articles/authenticating-to-a-github-organization-with-saml-single-sign-on/',
      status: '403',
    },
    { 'x-github-sso': 'required; url=https://github.com/orgs/acme/sso?authorization_request=x' },
  ),
  badCredentials: json(401, { message: 'Bad credentials', documentation_url: GH_DOCS, status: '401' }),
  notFound: json(404, { message: 'Not Found', documentation_url: GH_DOCS, status: '404' }),
  descriptionTooLong: json(422, {
    message: 'Validation Failed',
    errors: [
      {
        resource: 'Status',
        code: 'custom',
        field: 'description',
        message: 'description is too long (maximum is 140 characters)',
      },
    ],
    documentation_url: `${GH_DOCS}/commits/statuses#create-a-commit-status`,
    status: '422',
  }),
  serverError: {
    status: 502,
    headers: { 'content-type': 'text/html' },
    body: '<html><body><h1>502 Bad Gateway</h1></body></html>',
  },
} as const;

// ---------------------------------------------------------------------------------------------
// Gitea: observed on a real Gitea 1.27.3 (test/support/gitea.ts), bodies verbatim but the host

const GITEA_SWAGGER = 'http://127.0.0.1:3000/api/swagger';

export const gitea = {
  badToken: json(401, { message: 'invalid username, password or token', url: GITEA_SWAGGER }),
  noToken: json(401, { message: 'token is required', url: GITEA_SWAGGER }),
  noWrite: json(403, { message: 'user should have a permission to write to a repo', url: GITEA_SWAGGER }),
  /** A comment on a locked issue by a user without write access. */
  locked: json(403, { message: 'You cannot comment on a locked issue.', url: GITEA_SWAGGER }),
  /** Comments (create and edit) in an archived repository. */
  archived: json(423, { message: 'repo is archived', url: GITEA_SWAGGER }),
  notFound: json(404, { message: 'not found', url: GITEA_SWAGGER }),
  /** An API path Gitea does not route. */
  noRoute: {
    status: 404,
    headers: { 'content-type': 'text/plain; charset=utf-8' },
    body: '404 page not found\n',
  },
  /** The web UI (the address points at a page, not the API): HTML with 200. */
  webPage: {
    status: 200,
    headers: { 'content-type': 'text/html; charset=utf-8' },
    body: '<!DOCTYPE html>\n<html lang="en-US" data-theme="gitea-auto">\n<head>\n\t<title>acme/app - Gitea</title>\n</head><body></body></html>',
  },
} as const;

// ---------------------------------------------------------------------------------------------
// GitLab (docs.gitlab.com: REST API "Status codes", "Rate limits"; bodies as GitLab's Grape API sends them)

export const gitlab = {
  unauthorized: json(401, { message: '401 Unauthorized' }),
  forbidden: json(403, { message: '403 Forbidden' }),
  projectNotFound: json(404, { message: '404 Project Not Found' }),
  /** User and IP rate limits: plain text "Retry later", `Retry-After` and `RateLimit-*` headers. */
  rateLimited: (resetEpochSeconds: number): RealAnswer => ({
    status: 429,
    headers: {
      'content-type': 'text/plain',
      'retry-after': '60',
      'ratelimit-limit': '600',
      'ratelimit-observed': '600',
      'ratelimit-remaining': '0',
      'ratelimit-reset': String(resetEpochSeconds),
      'ratelimit-name': 'throttle_authenticated_api',
    },
    body: 'Retry later\n',
  }),
  /** Same state twice (case F15). */
  sameState: json(400, { message: 'Cannot transition status via :run from :running' }),
  validation: json(400, { message: { name: ['has already been taken'] } }),
  serverError: json(500, { message: '500 Internal Server Error' }),
} as const;

// ---------------------------------------------------------------------------------------------
// Bitbucket Cloud (developer.atlassian.com/cloud/bitbucket/rest/intro "Errors": {type: "error", error: {message}})

export const bitbucket = {
  unauthorized: json(401, { type: 'error', error: { message: 'Unauthorized' } }),
  /** An app password or token without the scope. */
  scopes: json(403, {
    type: 'error',
    error: {
      message: 'Your credentials lack one or more required privilege scopes.',
      detail: { granted: ['repository'], required: ['repository:write'] },
    },
  }),
  notFound: json(404, { type: 'error', error: { message: 'Repository acme/nope not found' } }),
  rateLimited: json(429, {
    type: 'error',
    error: { message: 'Rate limit for this resource has been exceeded' },
  }),
  keyTooLong: json(400, {
    type: 'error',
    error: {
      message: 'key: Ensure this value has at most 40 characters (it has 41).',
      fields: { key: ['Ensure this value has at most 40 characters (it has 41).'] },
    },
  }),
} as const;

// ---------------------------------------------------------------------------------------------
// Bitbucket Data Center (REST "Errors": {errors: [{context, message, exceptionName}]})

export const bitbucketserver = {
  unauthorized: json(401, {
    errors: [
      {
        context: null,
        message: 'Authentication failed. Please check your credentials and try again.',
        exceptionName: 'com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException',
      },
    ],
  }),
  forbidden: json(403, {
    errors: [
      {
        context: null,
        message: 'You are not permitted to access this resource',
        exceptionName: 'com.atlassian.bitbucket.AuthorisationException',
      },
    ],
  }),
  /** Rate limiting (Bitbucket Data Center "Improving instance stability with rate limiting"). */
  rateLimited: {
    status: 429,
    headers: {
      'content-type': 'application/json',
      'retry-after': '5',
      'x-ratelimit-limit': '60',
      'x-ratelimit-interval-seconds': '1',
      'x-ratelimit-fillrate': '5',
    },
    body: JSON.stringify({
      errors: [{ context: null, message: 'You have been rate limited.', exceptionName: null }],
    }),
  },
} as const;

// ---------------------------------------------------------------------------------------------
// Azure DevOps

/** Its error shape (`message`, `typeKey`), e.g. TF401019 for a repository that does not exist. */
export const azuredevops = {
  /**
   * Case N11: expired or revoked credentials answered with 203 Non-Authoritative Information and
   * the sign-in page (the shape of Azure DevOps Services' page: its title and sign-in form).
   */
  signIn: {
    status: 203,
    headers: { 'content-type': 'text/html; charset=utf-8' },
    body: '<!DOCTYPE html>\n<html>\n<head>\n<title>Azure DevOps Services | Sign In</title>\n</head>\n<body>\n<form method="post" action="https://app.vssps.visualstudio.com/_signin?realm=dev.azure.com">\n<input type="hidden" name="reply_to" value="https://dev.azure.com/acme">\n</form>\n</body>\n</html>\n',
  },
  unauthorized: { status: 401, headers: {}, body: '' },
  repoNotFound: json(404, {
    $id: '1',
    innerException: null,
    message:
      'TF401019: The Git repository with name or identifier nope does not exist or you do not have permissions for the operation you are attempting.',
    typeName:
      'Microsoft.TeamFoundation.Git.Server.GitRepositoryNotFoundException, Microsoft.TeamFoundation.Git.Server',
    typeKey: 'GitRepositoryNotFoundException',
    errorCode: 0,
    eventId: 3000,
  }),
  noContribute: json(403, {
    $id: '1',
    innerException: null,
    message:
      "TF401027: You need the Git 'GenericContribute' permission to perform this action. Details: identity 'pko-bot', scope 'repository'.",
    typeName:
      'Microsoft.TeamFoundation.Git.Server.GitNeedsPermissionException, Microsoft.TeamFoundation.Git.Server',
    typeKey: 'GitNeedsPermissionException',
    errorCode: 0,
    eventId: 3000,
  }),
  /** "Rate and usage limits": 429 with `Retry-After` and `X-RateLimit-*`. */
  rateLimited: json(
    429,
    { message: 'Request was blocked due to exceeding usage of resource in namespace.' },
    {
      'retry-after': '10',
      'x-ratelimit-resource': 'ATCPU',
      'x-ratelimit-delay': '2',
      'x-ratelimit-limit': '200',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '1800000000',
    },
  ),
  /** A browser-style redirect to the sign-in service (without `X-TFS-FedAuthRedirect: Suppress`). */
  signInRedirect: {
    status: 302,
    headers: { location: 'https://spsprodweu5.vssps.visualstudio.com/_signin?realm=dev.azure.com' },
    body: '',
  },
} as const;

// ---------------------------------------------------------------------------------------------
// Slack (api.slack.com: incoming webhooks "Handling errors"; chat.postMessage "Errors")

export const slack = {
  webhookNoService: { status: 404, headers: { 'content-type': 'text/html' }, body: 'no_service' },
  webhookArchived: { status: 410, headers: { 'content-type': 'text/html' }, body: 'channel_is_archived' },
  webhookProhibited: { status: 403, headers: { 'content-type': 'text/html' }, body: 'action_prohibited' },
  webhookInvalidPayload: { status: 400, headers: { 'content-type': 'text/html' }, body: 'invalid_payload' },
  webhookRateLimited: { status: 429, headers: { 'retry-after': '30' }, body: 'rate_limited' },
} as const;
