#!/usr/bin/env bash
# Like actions/checkout@v5: clean workspace, `git init`, origin = $GITHUB_SERVER_URL/<repo>
# (the test's global git config maps it to its git host with url.<host>.insteadOf), fetch the
# ref with the token as an `http.<server>/.extraheader`, check it out, and keep the header in
# .git/config only with persist-credentials.
set -euo pipefail
# scheme://host/ of a URL: what an `http.<url>.*` setting is scoped to.
url_base() {
  printf '%s\n' "$1" | sed -E 's|^([a-z+]+://[^/]+/).*|\1|'
}

workspace="${GITHUB_WORKSPACE:?}"
server="${GITHUB_SERVER_URL:-https://github.com}"
url="$server/$STAND_IN_REPOSITORY"
basic="$(printf 'x-access-token:%s' "$STAND_IN_TOKEN" | base64 -w0)"
export GIT_TERMINAL_PROMPT=0
# actions/checkout scopes the header to $GITHUB_SERVER_URL; here the test host serves it
# through url.<host>.insteadOf, so scope it to the URL git really reaches.
expanded="$(git ls-remote --get-url "$url")"
key="http.$(url_base "$expanded").extraheader"
header="AUTHORIZATION: basic $basic"

find "$workspace" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
cd "$workspace"
git init -q .
git remote add origin "$url"
git config --local "$key" "$header"

ref="${STAND_IN_REF:-${GITHUB_REF:-}}"
if [ -z "$ref" ]; then ref="$GITHUB_SHA"; fi
depth=()
if [ "$STAND_IN_DEPTH" != "0" ]; then depth=(--depth "$STAND_IN_DEPTH"); fi
filter=()
if [ -n "$STAND_IN_FILTER" ]; then filter=(--filter "$STAND_IN_FILTER"); fi

if [[ "$ref" =~ ^[0-9a-f]{40}$ ]]; then
  git fetch -q --no-tags "${depth[@]}" "${filter[@]}" origin "$ref"
  git checkout -q --detach FETCH_HEAD
elif [[ "$ref" == refs/* && "$ref" != refs/heads/* ]]; then
  # e.g. refs/pull/<n>/merge on a pull_request event: checked out detached, like checkout does
  git fetch -q --no-tags "${depth[@]}" "${filter[@]}" origin "+$ref:refs/remotes/origin/${ref#refs/}"
  git checkout -q --detach "refs/remotes/origin/${ref#refs/}"
else
  branch="${ref#refs/heads/}"
  git fetch -q --no-tags "${depth[@]}" "${filter[@]}" origin \
    "+refs/heads/$branch:refs/remotes/origin/$branch"
  git checkout -q -B "$branch" "refs/remotes/origin/$branch"
fi
if [ "$STAND_IN_PERSIST" != "true" ]; then
  git config --local --unset-all "$key"
fi
