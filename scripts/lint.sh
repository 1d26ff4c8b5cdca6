#!/usr/bin/env bash
# ESLint over the sources git tracks (committed or staged), so an untracked scratch file never
# fails `npm test`. Outside a git checkout (e.g. an unpacked tarball) it lints the whole tree.
# Extra arguments go to eslint (`npm run lint -- --fix`).
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=()
  while IFS= read -r -d '' f; do
    [[ -f "$f" ]] && files+=("$f") # skip tracked files deleted in the work tree
  done < <(git ls-files -z --cached -- '*.ts' '*.mts' '*.cts' '*.js' '*.mjs' '*.cjs')
  exec eslint --no-warn-ignored "$@" -- "${files[@]}"
fi
exec eslint "$@" .
