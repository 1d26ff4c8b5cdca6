#!/usr/bin/env bash
# Builds kubectl from the Go module proxy into a cache folder outside the repository, once per
# version (release downloads are unreachable here). Like scripts/envtest-build.sh does for
# kube-apiserver, kubectl's main package is built inside a small wrapper module that requires
# k8s.io/kubernetes and pins every staging module to its published v0.Y.Z (k8s.io/kubernetes'
# own go.mod points them at ./staging, so `go install` refuses it). The same module versions
# as the kube-apiserver build, so a warm Go module cache needs no downloads.
#
# Usage: scripts/kubectl-build.sh             (prints the path of the kubectl binary)
#        scripts/kubectl-build.sh exec ARGS…   (builds if needed, then runs kubectl ARGS…)
# Env:   PKO_NC_KUBECTL_CACHE  cache root     (default ~/.cache/pko-notification-controller/kubectl)
#        KUBECTL_VERSION                        (default below; the test control plane's version)
set -euo pipefail

KUBECTL_VERSION="${KUBECTL_VERSION:-1.35.4}"
GO_LINE="1.25.0"
GODEBUG_LINE="go1.25"
CACHE_ROOT="${PKO_NC_KUBECTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/kubectl}"
OUT="$CACHE_ROOT/$KUBECTL_VERSION"
BIN="$OUT/kubectl"

done_() {
  if [[ "${1:-}" == "exec" ]]; then shift; exec "$BIN" "$@"; fi
  echo "$BIN"
  exit 0
}

[[ -x "$BIN" ]] && done_ "$@"
command -v go >/dev/null || { echo "kubectl-build: 'go' is not on PATH; install Go >= 1.25 to build kubectl" >&2; exit 1; }

mkdir -p "$OUT"
# Serialize concurrent builds; the waiting run reuses what the first one built.
if command -v flock >/dev/null; then
  exec 9>"$OUT/.build.lock"
  flock 9
  [[ -x "$BIN" ]] && done_ "$@"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pko-nc-kubectl.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { echo "kubectl-build: $*" >&2; }
start=$(date +%s)
log "building kubectl v$KUBECTL_VERSION (a few minutes cold; cached afterwards in $OUT)"
minor="${KUBECTL_VERSION#*.}"; minor="${minor%%.*}"
# Staging modules of k8s.io/kubernetes (keep in sync with scripts/envtest-build.sh).
staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
  cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms
  kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
  mount-utils pod-security-admission sample-apiserver)
if (( minor >= 36 )); then staging+=(cri-streaming streaming); fi
{
  echo "module pkonc.local/tools/kubectl"
  echo
  echo "go $GO_LINE"
  echo
  echo "godebug default=$GODEBUG_LINE"
  echo
  echo "require k8s.io/kubernetes v$KUBECTL_VERSION"
  echo
  for m in "${staging[@]}"; do echo "replace k8s.io/$m => k8s.io/$m v0.$minor.${KUBECTL_VERSION##*.}"; done
  echo
  echo "tool k8s.io/kubernetes/cmd/kubectl"
} >"$WORK/go.mod"
ldv=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldv="$ldv -X $pkg.gitVersion=v$KUBECTL_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
ldv="$ldv -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
(cd "$WORK" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w $ldv" -o "$BIN.tmp" k8s.io/kubernetes/cmd/kubectl >&2)
mv "$BIN.tmp" "$BIN"
log "done in $(( $(date +%s) - start ))s: $BIN"
done_ "$@"
