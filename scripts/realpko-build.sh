#!/usr/bin/env bash
# Builds a real Pulumi Kubernetes Operator for the `real-pko` test project, from source, into a
# cache folder outside the repository, once per set of versions:
#   bin/pulumi                 Pulumi CLI            (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
#   bin/pulumi-language-yaml   YAML language host    (github.com/pulumi/pulumi-yaml)
#   pko-v1/manager             PKO v1 manager        (github.com/pulumi/pulumi-kubernetes-operator, Go module)
#   pko-v2/manager, agent      PKO v2 operator+agent (source archive in ../shared/upstream-src: the
#                              Go module proxy refuses the /v2 module)
#   bin/pulumi-resource-pkotest the tests' cloud-free resource provider (test/realpko/provider, its
#                              own Go module); rebuilt when its source changes (a stamp holds the
#                              source's hash)
# Release downloads are unreachable here; the Go module proxy is not. Parts that already exist
# are reused; a missing part is always built (nothing is skipped) and any failure ends the
# script with a non-zero status and the reason on stderr.
#
# Usage: scripts/realpko-build.sh            (prints the cache folder holding the parts above)
# Env:   PKO_NC_REALPKO_CACHE  cache root    (default ~/.cache/pko-notification-controller/realpko)
#        PKO_NC_UPSTREAM_SRC   folder holding pulumi-kubernetes-operator-v<PKO_V2_VERSION>.tar.gz
#                              (default ../shared/upstream-src beside the repository)
#        PULUMI_VERSION / PULUMI_YAML_VERSION / PKO_V1_VERSION / PKO_V2_VERSION (defaults below;
#                              keep in sync with test/support/realpko.ts)
set -euo pipefail

PULUMI_VERSION="${PULUMI_VERSION:-3.276.0}"
PULUMI_YAML_VERSION="${PULUMI_YAML_VERSION:-1.25.0}"
PKO_V1_VERSION="${PKO_V1_VERSION:-1.16.0}"
PKO_V2_VERSION="${PKO_V2_VERSION:-2.9.0}"
GO_LINE="1.25.0"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC_DIR="${PKO_NC_UPSTREAM_SRC:-$ROOT/../shared/upstream-src}"
V2_TARBALL="$SRC_DIR/pulumi-kubernetes-operator-v$PKO_V2_VERSION.tar.gz"
CACHE_ROOT="${PKO_NC_REALPKO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/realpko}"
OUT="$CACHE_ROOT/pulumi-$PULUMI_VERSION-yaml-$PULUMI_YAML_VERSION-pko-$PKO_V1_VERSION-$PKO_V2_VERSION"

PROVIDER_SRC="$ROOT/test/realpko/provider"
PROVIDER_STAMP="$OUT/bin/pulumi-resource-pkotest.src-sha256"
# The provider's source changes with the repository, not with the versions above: its binary is
# current only while the stamp beside it holds the hash of its go.mod, go.sum and *.go files.
provider_hash() { (cd "$PROVIDER_SRC" && cat go.mod go.sum ./*.go | sha256sum | cut -d' ' -f1); }
provider_current() {
  [[ -x "$OUT/bin/pulumi-resource-pkotest" && -f "$PROVIDER_STAMP" ]] \
    && [[ "$(cat "$PROVIDER_STAMP")" == "$(provider_hash)" ]]
}

PARTS=(bin/pulumi bin/pulumi-language-yaml pko-v1/manager pko-v2/manager pko-v2/agent bin/pulumi-resource-pkotest)
all_built() {
  local p
  for p in "${PARTS[@]}"; do [[ -x "$OUT/$p" ]] || return 1; done
  provider_current
}

if all_built; then
  echo "$OUT"
  exit 0
fi

log() { echo "realpko-build: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }

command -v go >/dev/null || die "'go' is not on PATH; install Go >= 1.25 to build the real PKO"
# The v2 source archive is only needed while pko-v2 is not built yet; check it first anyway so a
# missing archive fails in seconds, not after 20 minutes of other builds.
if [[ ! -x "$OUT/pko-v2/manager" || ! -x "$OUT/pko-v2/agent" ]]; then
  [[ -f "$V2_TARBALL" ]] || die "PKO v$PKO_V2_VERSION source archive not found at $V2_TARBALL (set PKO_NC_UPSTREAM_SRC to the folder holding it)"
fi

mkdir -p "$OUT/bin" "$OUT/pko-v1" "$OUT/pko-v2"
# Two test sessions on a cold machine would write the same files: serialize them, and let the
# waiting one reuse what the first one built.
command -v flock >/dev/null || die "'flock' (util-linux) is needed to serialize concurrent builds"
exec 9>"$OUT/.build.lock"
if ! flock -n 9; then
  log "another build of $OUT is running; waiting for it"
  flock 9
fi
if all_built; then
  echo "$OUT"
  exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pko-nc-realpko.XXXXXX")"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
# PKO's v1 module is not in the checksum database (sum.golang.org answers 404 for it).
export GONOSUMDB="github.com/pulumi/pulumi-kubernetes-operator${GONOSUMDB:+,$GONOSUMDB}"
start=$(date +%s)
part_start=0
begin() {
  part_start=$(date +%s)
  log "building $1 (cold: about $2 on 2 cores; seconds with a warm Go cache)"
}
finish() { log "built $1 in $(( $(date +%s) - part_start ))s"; }

# --- Pulumi CLI -------------------------------------------------------------------------------
# `go install …/pkg/v3/cmd/pulumi@v…` is refused: pkg/v3's go.mod replaces sdk/v3 with ../sdk.
# A wrapper module requires pkg and sdk at the same version and copies pkg's one external
# replace. Without the -X version the CLI prints no version and the Automation API refuses it.
if [[ ! -x "$OUT/bin/pulumi" ]]; then
  begin "Pulumi CLI v$PULUMI_VERSION" "13 min"
  mkdir -p "$WORK/pulumi"
  cat >"$WORK/pulumi/go.mod" <<GOMOD
module pkonc.local/realpko/pulumi

go $GO_LINE

require (
	github.com/pulumi/pulumi/pkg/v3 v$PULUMI_VERSION
	github.com/pulumi/pulumi/sdk/v3 v$PULUMI_VERSION
)

replace github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e

tool github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
GOMOD
  (cd "$WORK/pulumi" && go mod tidy -e >&2 \
    && go build -p 2 -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      -o "$OUT/bin/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi >&2) \
    || die "Pulumi CLI v$PULUMI_VERSION did not build (output above)"
  mv "$OUT/bin/pulumi.tmp" "$OUT/bin/pulumi"
  finish "Pulumi CLI"
fi

# --- YAML language host -----------------------------------------------------------------------
if [[ ! -x "$OUT/bin/pulumi-language-yaml" ]]; then
  begin "pulumi-language-yaml v$PULUMI_YAML_VERSION" "3 min"
  mkdir -p "$WORK/gobin"
  GOBIN="$WORK/gobin" go install -p 2 -trimpath -ldflags "-s -w" \
    "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml@v$PULUMI_YAML_VERSION" >&2 \
    || die "pulumi-language-yaml v$PULUMI_YAML_VERSION did not build (output above)"
  mv "$WORK/gobin/pulumi-language-yaml" "$OUT/bin/pulumi-language-yaml"
  finish "pulumi-language-yaml"
fi

# --- PKO v1 manager ---------------------------------------------------------------------------
# Its go.mod carries replace lines, so `go install` is refused: build inside a copy of the module
# (the module cache is read-only). Only the packages of ./cmd/manager are fetched: a full
# `go mod download` there fails on an unrelated module that no longer exists.
if [[ ! -x "$OUT/pko-v1/manager" ]]; then
  begin "PKO v$PKO_V1_VERSION manager" "7 min"
  dir="$(cd "$WORK" && go mod download -json "github.com/pulumi/pulumi-kubernetes-operator@v$PKO_V1_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')" \
    || die "could not download github.com/pulumi/pulumi-kubernetes-operator@v$PKO_V1_VERSION"
  [[ -n "$dir" && -d "$dir" ]] || die "go mod download gave no module folder for PKO v$PKO_V1_VERSION"
  cp -R "$dir" "$WORK/pko-v1"
  chmod -R u+w "$WORK/pko-v1"
  (cd "$WORK/pko-v1" && go build -p 2 -trimpath -ldflags "-s -w" -o "$OUT/pko-v1/manager.tmp" ./cmd/manager >&2) \
    || die "PKO v$PKO_V1_VERSION manager did not build (output above)"
  mv "$OUT/pko-v1/manager.tmp" "$OUT/pko-v1/manager"
  finish "PKO v$PKO_V1_VERSION manager"
fi

# --- PKO v2 operator and agent ----------------------------------------------------------------
if [[ ! -x "$OUT/pko-v2/manager" || ! -x "$OUT/pko-v2/agent" ]]; then
  begin "PKO v$PKO_V2_VERSION operator and agent from $V2_TARBALL" "5 min"
  mkdir -p "$WORK/pko-v2"
  tar -xzf "$V2_TARBALL" -C "$WORK/pko-v2" || die "could not unpack $V2_TARBALL"
  mod="github.com/pulumi/pulumi-kubernetes-operator/v2"
  (cd "$WORK/pko-v2" \
    && go build -p 2 -trimpath -ldflags "-s -w -X $mod/agent/version.Version=v$PKO_V2_VERSION" \
      -o "$OUT/pko-v2/agent.tmp" ./agent/main.go >&2 \
    && go build -p 2 -trimpath -ldflags "-s -w -X $mod/operator/version.Version=v$PKO_V2_VERSION" \
      -o "$OUT/pko-v2/manager.tmp" ./operator/cmd/main.go >&2) \
    || die "PKO v$PKO_V2_VERSION did not build (output above)"
  mv "$OUT/pko-v2/agent.tmp" "$OUT/pko-v2/agent"
  mv "$OUT/pko-v2/manager.tmp" "$OUT/pko-v2/manager"
  finish "PKO v$PKO_V2_VERSION operator and agent"
fi

# --- Test resource provider -------------------------------------------------------------------
# pulumi-resource-pkotest (test/realpko/provider): built from its own go.mod/go.sum (read-only:
# the build never rewrites them) with github.com/pulumi/pulumi-go-provider, on the same
# pulumi/pkg and sdk versions as the CLI above, so it reuses most of the CLI's Go build cache.
if ! provider_current; then
  begin "pulumi-resource-pkotest (test/realpko/provider)" "4 min alone, 30 s after the CLI build"
  [[ -f "$PROVIDER_SRC/go.mod" ]] || die "provider source not found at $PROVIDER_SRC"
  hash="$(provider_hash)"
  (cd "$PROVIDER_SRC" && GOFLAGS=-mod=readonly go build -p 2 -trimpath -buildvcs=false -ldflags "-s -w" \
    -o "$OUT/bin/pulumi-resource-pkotest.tmp" . >&2) \
    || die "pulumi-resource-pkotest did not build (output above)"
  mv "$OUT/bin/pulumi-resource-pkotest.tmp" "$OUT/bin/pulumi-resource-pkotest"
  echo "$hash" >"$PROVIDER_STAMP"
  finish "pulumi-resource-pkotest"
fi

all_built || die "some parts are missing after the build: ${PARTS[*]}"
log "done in $(( $(date +%s) - start ))s: $OUT"
echo "$OUT"
