#!/usr/bin/env bash
# Builds Pulumi's Kubernetes resource plugin (pulumi-resource-kubernetes) from the Go module proxy
# into a cache folder, for a real `pulumi up` of deploy/pulumi here (deploy/pulumi/local-up.ts).
# Not part of `npm test`: measured 45 min wall on 2 busy cores (nice 10).
#
# The proxy refuses every tagged version of github.com/pulumi/pulumi-kubernetes/provider/v4
# ("403 This module version is not available"); `@latest` resolves to the pseudo-version below
# (master of 2026-01-15, provider code between the v4.2x tags). The module also lacks the
# generated `schema-embed.json` its main package embeds, so the module is copied out of the
# module cache, its own `go generate` step (generate.go) is run, and its `replace` of the SDK
# (`=> ../sdk`, absent from the module) is pointed at the published SDK version it requires.
#
# Usage: scripts/pulumi-kubernetes-build.sh   (prints the folder holding the plugin)
set -euo pipefail

MODULE=github.com/pulumi/pulumi-kubernetes/provider/v4
VERSION="${PULUMI_K8S_PSEUDO_VERSION:-v4.0.0-20260115033456-f47bc2d6f199}"
SDK_VERSION="${PULUMI_K8S_SDK_VERSION:-v4.24.0}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/pulumi-plugins"
OUT="$CACHE_ROOT/kubernetes-${VERSION#v}"
BIN="$OUT/pulumi-resource-kubernetes"

if [[ -x "$BIN" ]]; then echo "$OUT"; exit 0; fi
command -v go >/dev/null || { echo "pulumi-kubernetes-build: 'go' is not on PATH" >&2; exit 1; }
mkdir -p "$OUT"
exec 9>"$OUT/.build.lock"
if command -v flock >/dev/null; then flock 9; fi
if [[ -x "$BIN" ]]; then echo "$OUT"; exit 0; fi

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
log() { echo "pulumi-kubernetes-build: $*" >&2; }
start=$(date +%s)
log "building pulumi-resource-kubernetes $VERSION (tens of minutes cold)"
src="$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
[[ -d "$src" ]] || { log "module $MODULE@$VERSION not in the module cache after download"; exit 1; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pko-nc-pulumi-k8s.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cp -r "$src/." "$WORK"
chmod -R u+w "$WORK"
cd "$WORK"
go mod edit -replace "github.com/pulumi/pulumi-kubernetes/sdk/v4=github.com/pulumi/pulumi-kubernetes/sdk/v4@$SDK_VERSION"
(cd cmd/pulumi-resource-kubernetes && VERSION="${VERSION#v}" go run generate.go >&2)
go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${VERSION#v}" \
  -o "$BIN.tmp" ./cmd/pulumi-resource-kubernetes >&2
mv "$BIN.tmp" "$BIN"
log "done in $(( $(date +%s) - start ))s: $BIN"
echo "$OUT"
