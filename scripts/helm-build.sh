#!/usr/bin/env bash
# Builds helm from the Go module proxy into a cache folder outside the repository, once per
# version (release downloads are unreachable here), as scripts/kubectl-build.sh does for kubectl.
# helm.sh/helm/v3's go.mod has no replace directives, so `go install MODULE/cmd/helm@VERSION`
# builds the helm command alone. Used by the chart tests (test/helm/).
#
# Usage: scripts/helm-build.sh             (prints the path of the helm binary)
#        scripts/helm-build.sh exec ARGS…   (builds if needed, then runs helm ARGS…)
# Env:   PKO_NC_HELM_CACHE  cache root     (default ~/.cache/pko-notification-controller/helm)
#        HELM_VERSION                      (default below)
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-3.22.0}"
CACHE_ROOT="${PKO_NC_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/helm}"
OUT="$CACHE_ROOT/$HELM_VERSION"
BIN="$OUT/helm"

done_() {
  if [[ "${1:-}" == "exec" ]]; then shift; exec "$BIN" "$@"; fi
  echo "$BIN"
  exit 0
}

[[ -x "$BIN" ]] && done_ "$@"
command -v go >/dev/null || { echo "helm-build: 'go' is not on PATH; install Go >= 1.26 to build helm" >&2; exit 1; }

mkdir -p "$OUT"
# Serialize concurrent builds; the waiting run reuses what the first one built.
if command -v flock >/dev/null; then
  exec 9>"$OUT/.build.lock"
  flock 9
  [[ -x "$BIN" ]] && done_ "$@"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pko-nc-helm.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod GOBIN="$WORK"

log() { echo "helm-build: $*" >&2; }
start=$(date +%s)
log "building helm v$HELM_VERSION (a few minutes cold; cached afterwards in $OUT)"
major="${HELM_VERSION%%.*}"
go install -trimpath -ldflags "-s -w -X helm.sh/helm/v$major/internal/version.version=v$HELM_VERSION" \
  "helm.sh/helm/v$major/cmd/helm@v$HELM_VERSION" >&2
mv "$WORK/helm" "$BIN"
log "done in $(( $(date +%s) - start ))s: $BIN"
done_ "$@"
