#!/usr/bin/env bash
# The action's one script: maps the inputs (environment variables set from `env:`, never `${{ }}`
# in a script) to an `imm` command line. Inputs are only ever expanded as quoted words.
set -euo pipefail

imm="${IMM_BIN:?the install step did not run}"
export GIT_TERMINAL_PROMPT=0  # act gives steps a TTY: a missing credential must fail, not ask
command="${IMM_COMMAND:?}"

# scheme://host/ of a URL: what an `http.<url>.*` setting is scoped to.
url_base() {
  printf '%s\n' "$1" | sed -E 's|^([a-z+]+://[^/]+/).*|\1|'
}

# The token reaches imm in a file only the runner's user can read, which imm reads once at its
# start and removes (ADR 0033): never in an environment, which /proc shows to every process of
# the user for as long as the process lives, checks included. imm gives git the token as an
# HTTP header, from a 0600 file for its network commands only, scoped to the server's
# URL as git will reach it (after any url.<base>.insteadOf rule of the runner, e.g. a mirror or
# a test host). The workflows check out with persist-credentials: false.
with_token() {
  local token="${IMM_TOKEN:-}"
  if [ -z "$token" ]; then
    echo "::error::imm $command needs a token (input github-token)"
    exit 2
  fi
  local basic
  basic="$(printf 'x-access-token:%s' "$token" | base64 -w0)"
  echo "::add-mask::$token"
  echo "::add-mask::$basic"
  local server="${GITHUB_SERVER_URL:-https://github.com}" url file
  url="$(git ls-remote --get-url "${server%/}/${GITHUB_REPOSITORY:-x/y}")"
  file="$(umask 077 && mktemp "${RUNNER_TEMP:-/tmp}/imm-token.XXXXXXXX")"
  printf '%s' "$token" >"$file"
  export IMM_TOKEN_FILE="$file"
  IMM_GIT_SERVER="$(url_base "$url")"
  export IMM_GIT_SERVER
  unset IMM_TOKEN GITHUB_TOKEN INPUT_GITHUB_TOKEN GIT_CONFIG_COUNT GIT_CONFIG_KEY_0 GIT_CONFIG_VALUE_0
}

# IMM_CONFIG (the `config` input) is read by imm itself: a path relative to the repository root.
export IMM_CONFIG="${IMM_CONFIG:-.github/imm.yml}"

lane_args=(--batch-id "${IMM_BATCH_ID:-}" --task "${IMM_TASK_ID:-}" --remote origin)

case "$command" in
  admit | reconcile | stack | bisect)
    with_token
    args=(reconcile "${IMM_INITIATIVE:?input initiative is required}" --remote origin --report)
    if [ "$command" = admit ]; then args+=(--admit); fi
    # The stack and bisect jobs run no check: they fan what the stack owes out to verify jobs.
    if [ "$command" = stack ] || [ "$command" = bisect ]; then args+=(--fan-out); fi
    # A dispatch without a batch id is a person's `/imm run` (the integrate job's continuation
    # names its batch): a batch that stopped is continued with what was fixed (SPEC §5.7).
    if [ "$command" = admit ] && [ -z "${IMM_BATCH_ID:-}" ]; then args+=(--continue-stopped); fi
    if [ -n "${IMM_BATCH_ID:-}" ]; then args+=(--batch-id "$IMM_BATCH_ID"); fi
    if [ -n "${IMM_MAX_PARALLEL:-}" ]; then args+=(--max-parallel "$IMM_MAX_PARALLEL"); fi
    # The stack and integrate jobs import this run's lane bundles first (lane jobs push
    # nothing); the bisect and integrate jobs take this run's verdicts.
    if { [ "$command" = reconcile ] || [ "$command" = stack ]; } && [ -n "${IMM_LANE_BUNDLES:-}" ]; then
      args+=(--lane-bundles "$IMM_LANE_BUNDLES")
    fi
    if { [ "$command" = reconcile ] || [ "$command" = bisect ]; } && [ -n "${IMM_VERDICTS:-}" ]; then
      args+=(--verdicts "$IMM_VERDICTS")
    fi
    # The integrate job: its run's stack job dispatched the next round already.
    if [ "$command" = reconcile ] && [ "${IMM_NEXT_ROUND_ASKED:-}" = true ]; then
      args+=(--next-round-asked)
    fi
    exec "$imm" "${args[@]}"
    ;;
  lane-fetch)
    with_token
    exec "$imm" lane "${lane_args[@]}" --phase fetch
    ;;
  lane-work)
    # No token exists in this step; drop anything that might still look like one.
    unset GITHUB_TOKEN IMM_TOKEN ACTIONS_RUNTIME_TOKEN ACTIONS_ID_TOKEN_REQUEST_TOKEN
    args=(lane "${lane_args[@]}" --phase work)
    if [ -n "${IMM_EXECUTOR:-}" ]; then args+=(--executor "$IMM_EXECUTOR"); fi
    if [ -n "${IMM_LANE_SETUP:-}" ]; then args+=(--lane-setup "$IMM_LANE_SETUP"); fi
    echo "::group::imm lane ${IMM_TASK_ID:-}: executor and checks"
    status=0
    "$imm" "${args[@]}" || status=$?
    echo "::endgroup::"
    exit "$status"
    ;;
  lane-bundle)
    # No token here either: the bundle goes up as an artifact; the integrate job imports it.
    unset GITHUB_TOKEN IMM_TOKEN ACTIONS_RUNTIME_TOKEN ACTIONS_ID_TOKEN_REQUEST_TOKEN
    exec "$imm" lane "${lane_args[@]}" --phase bundle \
      --bundle "${RUNNER_TEMP:?}/imm-lane-bundle/${IMM_TASK_ID:-lane}.bundle"
    ;;
  lane-publish)
    # Not used by the shipped workflow any more (ADR 0026); kept for workflows that call it.
    with_token
    exec "$imm" lane "${lane_args[@]}" --phase publish
    ;;
  setup-ready)
    # The cache save step's condition: check_setup passed in this job and its folder is whole.
    if [ -f "${IMM_SETUP_PATH:?}/ready" ]; then
      echo "ready=true" >>"${GITHUB_OUTPUT:?}"
    else
      echo "check_setup prepared nothing whole in this job: nothing to save"
    fi
    ;;
  verify-fetch)
    with_token
    exec "$imm" verify --batch-id "${IMM_BATCH_ID:-}" --shard "${IMM_SHARD:-}" --remote origin \
      --phase fetch
    ;;
  verify-run)
    # No token exists in this step: the shard's checks are lane code.
    unset GITHUB_TOKEN IMM_TOKEN ACTIONS_RUNTIME_TOKEN ACTIONS_ID_TOKEN_REQUEST_TOKEN
    echo "::group::imm verify ${IMM_SHARD:-}: checks"
    status=0
    "$imm" verify --batch-id "${IMM_BATCH_ID:-}" --shard "${IMM_SHARD:-}" --remote origin \
      --phase run --verdicts "${RUNNER_TEMP:?}/imm-verdict" || status=$?
    echo "::endgroup::"
    exit "$status"
    ;;
  command)
    with_token
    exec "$imm" command --event "${GITHUB_EVENT_PATH:?}" --remote origin
    ;;
  check)
    with_token
    exec "$imm" check --base "${IMM_BASE_SHA:?set IMM_BASE_SHA to the base commit of the pull request}" --report
    ;;
  *)
    echo "::error::unknown command '$command' (admit, lane, stack, verify, bisect, reconcile, command, check)"
    exit 2
    ;;
esac
