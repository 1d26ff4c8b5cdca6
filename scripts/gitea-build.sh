#!/usr/bin/env bash
# Builds Gitea (a real git forge, used by the end-to-end forge tests) from its Go module into a
# cache folder outside the repository, once per version: the `gitea` binary plus the
# `templates/`, `options/` and `public/` folders it reads from disk (no frontend build is
# needed for the API and git over HTTP; the harness points `[server] STATIC_ROOT_PATH` here).
#
# Why from source: release downloads are unreachable here, the Go module proxy is not.
# `go install code.gitea.io/gitea@vX` is refused (its go.mod carries `replace` lines), so the
# module is downloaded, copied out of GOMODCACHE and built inside the copy.
#
# Usage: scripts/gitea-build.sh              (prints the folder holding `gitea`; progress on stderr)
# Env:   GITEA_VERSION        (default below; keep in sync with test/support/gitea.ts)
#        PKO_NC_GITEA_CACHE   cache root (default ~/.cache/pko-notification-controller/gitea)
# Exit:  non-zero with the reason on stderr when Go is missing or the build fails; it never
#        reports success without a complete folder.
set -euo pipefail

GITEA_VERSION="${GITEA_VERSION:-1.27.3}"
CACHE_ROOT="${PKO_NC_GITEA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/gitea}"
OUT="$CACHE_ROOT/$GITEA_VERSION"
# Written last: a folder without it is an interrupted build and is rebuilt.
MARKER="$OUT/.complete"

log() { echo "gitea-build: $*" >&2; }

if [[ -f "$MARKER" && -x "$OUT/gitea" ]]; then
  log "cached: $OUT"
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { log "'go' is not on PATH; install Go >= 1.26 to build Gitea v$GITEA_VERSION"; exit 1; }
command -v flock >/dev/null || { log "'flock' is not on PATH (util-linux); it keeps concurrent builds apart"; exit 1; }

mkdir -p "$CACHE_ROOT"
# Concurrent runs (two test sessions, CI + a developer) would write the same folder: serialize
# them, and let the waiting run reuse what the first one built.
exec 9>"$CACHE_ROOT/.$GITEA_VERSION.lock"
if ! flock -n 9; then
  log "another build of v$GITEA_VERSION is running; waiting for its lock"
  flock 9
fi
if [[ -f "$MARKER" && -x "$OUT/gitea" ]]; then
  log "cached (built by a concurrent run): $OUT"
  echo "$OUT"
  exit 0
fi

export GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false"
# The module is built at the same path every time (under the lock): Go's build cache keys the
# main module's packages by their folder, so a rebuild from a fresh temp folder would compile
# all of Gitea's own packages again instead of only linking.
WORK="$CACHE_ROOT/.$GITEA_VERSION.work"
STAGE="$CACHE_ROOT/.$GITEA_VERSION.staging"
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK" "$STAGE"' EXIT
start=$(date +%s)
step() { log "[$(( $(date +%s) - start ))s] $*"; }

step "downloading module code.gitea.io/gitea@v$GITEA_VERSION (cold: ~1.4 GB of modules in total)"
info="$(cd "$WORK" && go mod download -json "code.gitea.io/gitea@v$GITEA_VERSION")" || {
  log "go mod download failed:"; echo "$info" >&2; exit 1; }
moddir="$(printf '%s' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -n "$moddir" && -f "$moddir/go.mod" ]] || { log "no module folder in: $info"; exit 1; }

src="$WORK/src"
cp -R "$moddir" "$src"
chmod -R u+w "$src"

step "downloading dependencies"
if ! (cd "$src" && go mod download 2>"$WORK/dl.err"); then
  # Two dependencies are refused (403) by the proxy under their gitea.dev/… names but served
  # under code.gitea.io/…; only then point the copy at those.
  if grep -qE 'gitea\.dev/(actions-proto-go|sdk)' "$WORK/dl.err"; then
    step "proxy refused gitea.dev/* dependencies; using their code.gitea.io/* names"
    {
      echo
      echo "replace gitea.dev/actions-proto-go => code.gitea.io/actions-proto-go v0.6.0"
      echo "replace gitea.dev/sdk => code.gitea.io/sdk v1.2.0"
    } >>"$src/go.mod"
    (cd "$src" && go mod download) || { log "dependency download failed after the replace lines"; exit 1; }
  else
    cat "$WORK/dl.err" >&2
    log "dependency download failed"
    exit 1
  fi
fi

step "compiling gitea (cold: ~4 min on 2 cores; warm: <1 min)"
rm -rf "$STAGE"
mkdir -p "$STAGE"
(cd "$src" && go build -tags 'sqlite sqlite_unlock_notify' \
  -ldflags "-X main.Version=$GITEA_VERSION" -o "$STAGE/gitea" .) || { log "go build failed"; exit 1; }

step "copying templates/, options/, public/"
for d in templates options public; do
  [[ -d "$src/$d" ]] || { log "module has no $d/ folder"; exit 1; }
  cp -R "$src/$d" "$STAGE/$d"
done
"$STAGE/gitea" --version >&2 || { log "the built binary does not run"; exit 1; }
touch "$STAGE/.complete"

rm -rf "$OUT"
mv "$STAGE" "$OUT"
step "done: $OUT"
echo "$OUT"
