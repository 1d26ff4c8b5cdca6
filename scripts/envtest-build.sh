#!/usr/bin/env bash
# Builds the test control plane (etcd + kube-apiserver) from their Go modules into a cache
# folder outside the repository, once per version. Release downloads are unreachable here;
# the Go module proxy is not. `go install mod@ver` refuses both programs because their go.mod
# files carry local `replace` lines, so each is built inside a tiny wrapper module of our own.
#
# Usage: scripts/envtest-build.sh            (prints the folder holding etcd and kube-apiserver)
# Env:   PKO_NC_ENVTEST_CACHE  cache root    (default ~/.cache/pko-notification-controller/envtest)
#        KUBE_VERSION / ETCD_VERSION          (defaults below; keep in sync with test/envtest)
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.35.4}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
GO_LINE="1.25.0"
GODEBUG_LINE="go1.25"
CACHE_ROOT="${PKO_NC_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/envtest}"
OUT="$CACHE_ROOT/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION"

if [[ -x "$OUT/etcd" && -x "$OUT/kube-apiserver" ]]; then
  echo "$OUT"
  exit 0
fi
command -v go >/dev/null || { echo "envtest-build: 'go' is not on PATH; install Go >= 1.25 to build the control plane" >&2; exit 1; }

mkdir -p "$OUT"
# Concurrent runs (e.g. two test sessions on a cold machine) would write the same files:
# serialize them, and let the waiting run reuse what the first one built.
if command -v flock >/dev/null; then
  exec 9>"$OUT/.build.lock"
  flock 9
  if [[ -x "$OUT/etcd" && -x "$OUT/kube-apiserver" ]]; then
    echo "$OUT"
    exit 0
  fi
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/pko-nc-envtest.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { echo "envtest-build: $*" >&2; }
start=$(date +%s)

# --- etcd ---------------------------------------------------------------------------------
if [[ ! -x "$OUT/etcd" ]]; then
  log "building etcd v$ETCD_VERSION"
  mkdir -p "$WORK/etcd"
  cat >"$WORK/etcd/go.mod" <<GOMOD
module pkonc.local/envtest/etcd

go $GO_LINE

godebug default=$GODEBUG_LINE

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION

tool go.etcd.io/etcd/server/v3
GOMOD
  (cd "$WORK/etcd" && go mod tidy >&2 && go build -trimpath -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3 >&2)
  mv "$OUT/etcd.tmp" "$OUT/etcd"
fi

# --- kube-apiserver -----------------------------------------------------------------------
if [[ ! -x "$OUT/kube-apiserver" ]]; then
  log "building kube-apiserver v$KUBE_VERSION (several minutes cold)"
  minor="${KUBE_VERSION#*.}"; minor="${minor%%.*}"
  staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
    cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
    cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms
    kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
    mount-utils pod-security-admission sample-apiserver)
  if (( minor >= 36 )); then staging+=(cri-streaming streaming); fi
  mkdir -p "$WORK/kas"
  {
    echo "module pkonc.local/envtest/kubeapiserver"
    echo
    echo "go $GO_LINE"
    echo
    echo "godebug default=$GODEBUG_LINE"
    echo
    echo "require k8s.io/kubernetes v$KUBE_VERSION"
    echo
    for m in "${staging[@]}"; do echo "replace k8s.io/$m => k8s.io/$m v0.$minor.${KUBE_VERSION##*.}"; done
    echo
    echo "tool k8s.io/kubernetes/cmd/kube-apiserver"
  } >"$WORK/kas/go.mod"
  ldv="-X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
  ldv="$ldv -X k8s.io/client-go/pkg/version.gitVersion=v$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitTreeState=clean"
  (cd "$WORK/kas" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w $ldv" -o "$OUT/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2)
  mv "$OUT/kube-apiserver.tmp" "$OUT/kube-apiserver"
fi

log "done in $(( $(date +%s) - start ))s: $OUT"
echo "$OUT"
