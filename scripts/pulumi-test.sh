#!/usr/bin/env bash
# Runs the Pulumi program's tests (deploy/pulumi, its own package: the root package does not
# depend on Pulumi). Installs its dependencies with `npm ci` first when they are missing or its
# package-lock.json changed since the last install (deploy/pulumi/.npmrc skips the provider
# plugin download of @pulumi/kubernetes' install script).
set -euo pipefail
cd "$(dirname "$0")/../deploy/pulumi"
stamp=node_modules/.pkonc-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "pulumi-test: installing deploy/pulumi dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
fi
npm test
