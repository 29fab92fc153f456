#!/usr/bin/env bash
# Installs imm from this action's own source into a virtual environment under the runner's tool
# cache, keyed by a digest of that source and the Python, and skips the install when that
# environment is complete. Never in the workspace: a lane would see it as a change out of scope.
#
# `install.sh --key` only says where the environment goes and its key (the step before
# actions/cache restores it, so the jobs of a run after the first install nothing).
# The install itself is uv's (ADR 0043): a few seconds cold where pip takes 13-25 s.
# IMM_INSTALLER=pip installs with pip instead: the baseline benchmarks/job_overhead.py measures.
set -euo pipefail

UV_VERSION=0.13.9
action_dir="${GITHUB_ACTION_PATH:?}"
python="${IMM_PYTHON:-}"
if [ -z "$python" ]; then python="$(command -v python3)"; fi
cache_root="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:?}}/imm-action"

digest="$(
  cd "$action_dir"
  {
    "$python" -c 'import sys; print(sys.version, sys.executable)'
    echo "${IMM_INSTALLER:-uv} $UV_VERSION"
    find pyproject.toml src -type f ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z |
      xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)"
venv="$cache_root/$digest"

if [ "${1:-}" = --key ]; then
  {
    echo "path=$venv"
    echo "key=imm-action-$digest"
  } >>"$GITHUB_OUTPUT"
  exit 0
fi
mkdir -p "$cache_root"

# uv from the runner if it has this version, else from PyPI into the tool cache (once).
find_uv() {
  if command -v uv >/dev/null && [ "$(uv --version | cut -d' ' -f2)" = "$UV_VERSION" ]; then
    command -v uv
    return
  fi
  local home="$cache_root/uv-$UV_VERSION"
  if [ ! -x "$home/bin/uv" ]; then
    "$python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
      --root-user-action=ignore \
      --target "$home" "uv==$UV_VERSION"
  fi
  echo "$home/bin/uv"
}

# Jobs on one self-hosted runner (or act's parallel matrix jobs) may install at the same time.
exec 9>"$cache_root/$digest.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  if [ "${IMM_INSTALLER:-uv}" = pip ]; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$action_dir"
  else
    uv="$(find_uv)"
    export UV_CACHE_DIR="$cache_root/uv-cache" UV_NO_PROGRESS=1
    "$uv" venv --quiet --python "$python" "$venv"
    # Python writes the bytecode of what a step imports, and actions/cache keeps it for the
    # run's other jobs. Where PYTHONDONTWRITEBYTECODE is set it never would: every step would
    # compile again, so compile here, once (about 1.5 s more).
    compile=()
    if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then compile=(--compile-bytecode); fi
    "$uv" pip install --quiet "${compile[@]}" --python "$venv/bin/python" "$action_dir"
  fi
  touch "$venv/.complete"
fi
flock -u 9

echo "imm=$venv/bin/imm" >>"$GITHUB_OUTPUT"
"$venv/bin/imm" --version
