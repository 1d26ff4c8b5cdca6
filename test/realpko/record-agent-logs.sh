#!/usr/bin/env bash
# Records test/fixtures/agent-logs/*.log: what the real PKO v2.9.0 agent writes to its stderr
# (= the workspace pod's `pulumi` container log) while it runs real `pulumi preview --diff` and
# `pulumi up` of Pulumi YAML programs using the cloud-free provider pulumi-resource-pkotest.
#
# The agent is the one scripts/realpko-build.sh builds, started as the workspace pod's main
# container would be (`agent serve --workspace … --skip-install`), but with `--auth-mode none`
# and driven by test/realpko/agent-driver (PKO's operator would call the same gRPC methods).
# State goes to a file backend; files of pkotest:index:File go under $WORK/files.
#
# Usage: test/realpko/record-agent-logs.sh [NN …]
#        Without arguments it rewrites every test/fixtures/agent-logs/*.log; with numbers only
#        those recordings' groups: 01–09 share one state and are always recorded together, 10
#        has a state of its own (`record-agent-logs.sh 10` leaves 01–09 as they are).
# Env:   PKO_NC_UPSTREAM_SRC  folder holding pulumi-kubernetes-operator-v2.9.0.tar.gz
#                             (default ../shared/upstream-src beside the repository)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FIXTURES="$ROOT/test/fixtures/agent-logs"
SRC_DIR="${PKO_NC_UPSTREAM_SRC:-$ROOT/../shared/upstream-src}"
# A fixed folder, so that the paths printed in the recordings do not change between recordings.
WORK=/tmp/pkonc-agent-logs
PASSPHRASE=pkonc-recording-passphrase

log() { echo "record-agent-logs: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }

ONLY=("$@")
wanted() { # $@: recording numbers of one group; true if any was asked for (or none was)
  [[ ${#ONLY[@]} -eq 0 ]] && return 0
  local n o
  for n in "$@"; do
    for o in "${ONLY[@]}"; do [[ "$o" == "$n" ]] && return 0; done
  done
  return 1
}
for o in "${ONLY[@]}"; do [[ "$o" =~ ^(0[1-9]|10)$ ]] || die "no recording $o (01 … 10)"; done

PARTS="$(bash "$ROOT/scripts/realpko-build.sh")" || die "scripts/realpko-build.sh failed"
AGENT="$PARTS/pko-v2/agent"

rm -rf "$WORK"
mkdir -p "$WORK/state" "$WORK/home" "$WORK/files" "$WORK/project" "$WORK/pko"

# The driver is built inside PKO's source tree: it uses the agent's gRPC package.
tar -xzf "$SRC_DIR/pulumi-kubernetes-operator-v2.9.0.tar.gz" -C "$WORK/pko"
mkdir -p "$WORK/pko/pkonc-driver"
cp "$ROOT/test/realpko/agent-driver/main.go" "$WORK/pko/pkonc-driver/main.go"
(cd "$WORK/pko" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local go build -p 2 -o "$WORK/driver" ./pkonc-driver) \
  || die "the agent driver did not build"

export PATH="$PARTS/bin:$PATH" HOME="$WORK/home" PULUMI_HOME="$WORK/home/.pulumi"
export PULUMI_BACKEND_URL="file://$WORK/state" PULUMI_CONFIG_PASSPHRASE="$PASSPHRASE"
export PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
AGENT_PID=""

start_agent() { # $1: recording file
  "$AGENT" serve --workspace "$WORK/project" --stack dev --skip-install \
    --host 127.0.0.1 --port "$PORT" --auth-mode none 2>"$1" >/dev/null &
  AGENT_PID=$!
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return 0; fi
    kill -0 "$AGENT_PID" 2>/dev/null || die "the agent exited; see $1"
    sleep 0.2
  done
  die "the agent did not listen on $PORT within 60 s"
}
stop_agent() {
  kill "$AGENT_PID" 2>/dev/null || true
  wait "$AGENT_PID" 2>/dev/null || true
  AGENT_PID=""
}
trap 'if [[ -n "$AGENT_PID" ]]; then kill "$AGENT_PID" 2>/dev/null || true; fi' EXIT
run() { # $@: driver flags; a failing operation is expected in some recordings
  "$WORK/driver" -addr "127.0.0.1:$PORT" "$@" >&2 || log "operation $* failed (as recorded)"
}
record() { # $1: name; then the driver operations, one per argument (e.g. "-op preview")
  local name="$1"
  shift
  record_to "$FIXTURES/$name.log" "$@"
}
record_to() { # $1: log file; then the driver operations, as for record
  local file="$1"
  shift
  log "recording $(basename "$file" .log)"
  start_agent "$file"
  local op
  for op in "$@"; do
    # shellcheck disable=SC2086 # each argument is a list of flags
    run $op
  done
  stop_agent
}

OUT_A='  aValue: ${a.value}'
# program <resources YAML> [outputs YAML]
program() {
  cat >"$WORK/project/Pulumi.yaml" <<YAML
name: pkonc-changes
runtime: yaml
resources:
$1
outputs:
${2:-$OUT_A}
YAML
}

A_ONE='  a:
    type: pkotest:index:Value
    properties:
      value: one'
A_TWO='  a:
    type: pkotest:index:Value
    properties:
      value: two'
B_K1='  b:
    type: pkotest:index:Value
    properties:
      value: bee
      key: k1'
B_K2='  b:
    type: pkotest:index:Value
    properties:
      value: bee
      key: k2'
file_res() { # $1 file name, $2 content, $3 secret
  printf '  f:\n    type: pkotest:index:File\n    properties:\n      path: %s\n      content: %s\n      secret: %s' \
    "$WORK/files/$1" "$2" "$3"
}

# 01–09 share one state (each starts from the one before); the body is not indented, so the
# programs' YAML keeps its indentation.
if wanted 01 02 03 04 05 06 07 08 09; then
# 01: an empty stack; the program creates three resources (one with a secret input).
program "$A_ONE
$B_K1
$(file_res f.txt hello s3cr3t-one)"
record 01-create "-op preview" "-op up"

# 02: a property of a and the content and secret of f change (updates), an output changes.
program "$A_TWO
$B_K1
$(file_res f.txt hello-again s3cr3t-two)"
record 02-update "-op preview" "-op up"

# 03: b's key and f's path change: both are replaced.
program "$A_TWO
$B_K2
$(file_res f2.txt hello-again s3cr3t-two)"
record 03-replace "-op preview" "-op up"

# 04: b is removed from the program: deleted.
program "$A_TWO
$(file_res f2.txt hello-again s3cr3t-two)"
record 04-delete "-op preview" "-op up"

# 05: drift: f's file is changed out of band; a preview with --refresh sees it.
echo "changed out of band" >"$WORK/files/f2.txt"
record 05-drift "-op preview -refresh"

# 06: errors: a program that references an undefined variable fails its preview; a resource whose
# provider fails on create passes its preview and fails its up.
program "$A_TWO
$(file_res f2.txt hello-again s3cr3t-two)" '  aValue: ${doesNotExist}'
record 06-error-program "-op preview"
program "$A_TWO
$(file_res f2.txt hello-again s3cr3t-two)
  c:
    type: pkotest:index:Value
    properties:
      value: see
      failOn: create"
record 07-error-up "-op preview" "-op up"

# 08: a large diff: a has 150 tags added, 30 resources are created.
tags="$(for i in $(seq -w 1 150); do printf '        tag%s: value-%s\n' "$i" "$i"; done)"
many="$(for i in $(seq -w 1 30); do printf '  n%s:\n    type: pkotest:index:Value\n    properties:\n      value: v%s\n' "$i" "$i"; done)"
program "  a:
    type: pkotest:index:Value
    properties:
      value: two
      tags:
$tags
$(file_res f2.txt hello-again s3cr3t-two)
$many"
record 08-large "-op preview"

# 09: two previews at once on the same agent: their lines interleave in the log.
program "$A_ONE
$(file_res f2.txt hello-again s3cr3t-two)"
log "recording 09-interleaved"
start_agent "$FIXTURES/09-interleaved.log"
run -op preview &
p1=$!
run -op preview
wait "$p1"
stop_agent
fi

# 10: B16, a program forging Pulumi's summary. Its own state: the up (not kept) deploys Values `a`
# and `prod-db` and a pkotest:index:Forger that forges in every Check; the recorded preview
# deletes `prod-db` while the unchanged Forger writes a forged banner, summary and duration, then
# a partial line without a newline, through the engine's Log RPC (as a program's console.log),
# into the CLI's stdout through /proc/<pid>/fd/1 and to its own stderr (which the CLI hides).
if wanted 10; then
export PULUMI_BACKEND_URL="file://$WORK/state-10"
mkdir -p "$WORK/state-10"
FORGER='  forger:
    type: pkotest:index:Forger
    properties:
      during: check
      lines:
        - "Previewing update (dev):"
        - ""
        - "Resources:"
        - "    1 unchanged"
        - ""
        - "Duration: 1s"
      partial: "<forged partial line> "'
PROD_DB='  prod-db:
    type: pkotest:index:Value
    properties:
      value: the production database'
program "$A_ONE
$PROD_DB
$FORGER"
record_to "$WORK/10-setup.log" "-op up"
grep -q 'up completed.*"result": "succeeded"' "$WORK/10-setup.log" || die "the up of 10's setup failed: $WORK/10-setup.log"
program "$A_ONE
$FORGER"
record 10-forged-summary "-op preview"
fi

log "done: $(ls "$FIXTURES"/*.log | wc -l) recordings in $FIXTURES"
