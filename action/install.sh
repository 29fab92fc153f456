#!/usr/bin/env bash
# Installs imm from this action's own source into a virtual environment under the runner's tool
# cache, keyed by a digest of that source and the Python, and skips the install when that
# environment is complete. Never in the workspace: a lane would see it as a change out of scope.
set -euo pipefail

action_dir="${GITHUB_ACTION_PATH:?}"
python="${IMM_PYTHON:-}"
if [ -z "$python" ]; then python="$(command -v python3)"; fi
cache_root="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:?}}/imm-action"

digest="$(
  cd "$action_dir"
  {
    "$python" -c 'import sys; print(sys.version)'
    find pyproject.toml src -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z |
      xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)"
venv="$cache_root/$digest"
mkdir -p "$cache_root"

# Jobs on one self-hosted runner (or act's parallel matrix jobs) may install at the same time.
exec 9>"$cache_root/$digest.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$action_dir"
  touch "$venv/.complete"
fi
flock -u 9

echo "imm=$venv/bin/imm" >>"$GITHUB_OUTPUT"
"$venv/bin/imm" --version
