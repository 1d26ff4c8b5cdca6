#!/usr/bin/env bash
# Builds Flux's notification-controller (the performance anchor of the benchmarks; not used by
# `npm test`) from its Go module into a cache folder outside the repository, once per version:
# `notification-controller` plus its CRDs (`crds/`: Alert/Provider v1beta3, Receiver v1, from
# the module's config/crd/bases/).
#
# Why this way: release downloads are unreachable here, the Go module proxy is not.
# `go install github.com/fluxcd/notification-controller@vX` is refused: its go.mod carries
# `replace …/api => ./api` and `api/` is not inside the module zip. So the module is copied out
# of GOMODCACHE, that one replace line deleted (the `api` module of the same version then comes
# from the proxy), and it is built inside the copy as its Dockerfile does.
#
# Usage: scripts/flux-nc-build.sh            (prints the folder; progress on stderr)
# Env:   FLUX_NC_VERSION     version to build; default: the newest the proxy lists if it can
#                            be downloaded, else 1.9.0 (newer versions answered 403 when tried)
#        PKO_NC_FLUX_CACHE   cache root (default ~/.cache/pko-notification-controller/flux-nc)
# Exit:  non-zero with the reason on stderr; never reports success without a complete folder.
set -euo pipefail

FALLBACK_VERSION="1.9.0"
MODULE="github.com/fluxcd/notification-controller"
CACHE_ROOT="${PKO_NC_FLUX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/flux-nc}"

log() { echo "flux-nc-build: $*" >&2; }
command -v go >/dev/null || { log "'go' is not on PATH; install Go >= 1.26 to build notification-controller"; exit 1; }
command -v flock >/dev/null || { log "'flock' is not on PATH (util-linux); it keeps concurrent builds apart"; exit 1; }
export GOTOOLCHAIN=local
# The checksum database (through the proxy) answers 404 for this module's own go.mod, so the
# download is refused unless the module is exempt from it. Only this module (and its `api`
# submodule) is exempt; every other dependency is still checked against go.sum and the sumdb.
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}$MODULE"

complete() { [[ -f "$CACHE_ROOT/$1/.complete" && -x "$CACHE_ROOT/$1/notification-controller" ]]; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/pko-nc-fluxnc.XXXXXX")"
STAGE=""
trap 'rm -rf "$WORK" ${STAGE:+"$STAGE"}' EXIT

# --- which version ---------------------------------------------------------------------------
download() { # $1 version → prints `go mod download -json` output; fails when refused
  (cd "$WORK" && go mod download -json "$MODULE@v$1")
}
if [[ -n "${FLUX_NC_VERSION:-}" ]]; then
  VERSION="$FLUX_NC_VERSION"
else
  # Reuse any version already built (newest first) without asking the proxy.
  VERSION=""
  if [[ -d "$CACHE_ROOT" ]]; then
    while read -r v; do
      if complete "$v"; then VERSION="$v"; break; fi
    done < <(ls -1 "$CACHE_ROOT" 2>/dev/null | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$' | sort -t. -k1,1nr -k2,2nr -k3,3nr)
  fi
  if [[ -z "$VERSION" ]]; then
    # Try the newest listed version once; fall back to the one known to be served. The proxy
    # refuses the module's version list (403); its `api` submodule is released in step, so its
    # list names the candidate then.
    newest=""
    for m in "$MODULE" "$MODULE/api"; do
      newest="$(cd "$WORK" && go list -m -versions "$m" 2>/dev/null | tr ' ' '\n' | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -1 || true)"
      [[ -n "$newest" ]] && break
    done
    newest="${newest#v}"
    VERSION="$FALLBACK_VERSION"
    if [[ -n "$newest" && "$newest" != "$FALLBACK_VERSION" ]]; then
      log "trying the newest listed version v$newest"
      if download "$newest" >"$WORK/info.json" 2>"$WORK/dl.err"; then
        VERSION="$newest"
      else
        why="$(sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' "$WORK/info.json" | sed 's/\\n.*//')"
        log "v$newest is not served (${why:-$(tail -1 "$WORK/dl.err")}); falling back to v$FALLBACK_VERSION"
        : >"$WORK/info.json"
      fi
    elif [[ -z "$newest" ]]; then
      log "the proxy did not list versions; using v$FALLBACK_VERSION"
    fi
  fi
fi
OUT="$CACHE_ROOT/$VERSION"

if complete "$VERSION"; then
  log "cached: $OUT"
  echo "$OUT"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.$VERSION.lock"
if ! flock -n 9; then
  log "another build of v$VERSION is running; waiting for its lock"
  flock 9
fi
if complete "$VERSION"; then
  log "cached (built by a concurrent run): $OUT"
  echo "$OUT"
  exit 0
fi

start=$(date +%s)
step() { log "[$(( $(date +%s) - start ))s] $*"; }
step "downloading module $MODULE@v$VERSION"
if [[ ! -s "$WORK/info.json" ]] || ! grep -q "\"Version\": \"v$VERSION\"" "$WORK/info.json"; then
  download "$VERSION" >"$WORK/info.json" || { log "go mod download $MODULE@v$VERSION failed: $(cat "$WORK/info.json")"; exit 1; }
fi
moddir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' "$WORK/info.json")"
[[ -n "$moddir" && -f "$moddir/go.mod" ]] || { log "no module folder in: $(cat "$WORK/info.json")"; exit 1; }

src="$WORK/src"
cp -R "$moddir" "$src"
chmod -R u+w "$src"
# The replace line points at ./api, which the module zip lacks; without it the api module of
# the version in `require` comes from the proxy.
sed -i -E '\#^[[:space:]]*replace[[:space:]]+github.com/fluxcd/notification-controller/api[[:space:]]+=>[[:space:]]+\./api[[:space:]]*$#d' "$src/go.mod"
if grep -qE '=>[[:space:]]+\./api' "$src/go.mod"; then
  log "go.mod still replaces the api module with ./api (a replace block?); cannot build"
  exit 1
fi

STAGE="$CACHE_ROOT/.$VERSION.staging"
rm -rf "$STAGE"
mkdir -p "$STAGE"
step "compiling notification-controller (cold: a few minutes on 2 cores)"
(cd "$src" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 go build -trimpath -o "$STAGE/notification-controller" .) \
  || { log "go build failed"; exit 1; }
[[ -d "$src/config/crd/bases" ]] || { log "module has no config/crd/bases/"; exit 1; }
cp -R "$src/config/crd/bases" "$STAGE/crds"
"$STAGE/notification-controller" --help >/dev/null 2>&1 || {
  log "the built binary does not start (--help failed)"; exit 1; }
touch "$STAGE/.complete"

rm -rf "$OUT"
mv "$STAGE" "$OUT"
STAGE=""
step "done: $OUT (CRDs in $OUT/crds)"
echo "$OUT"
