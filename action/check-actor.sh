#!/usr/bin/env bash
# Who may trigger the action: an agent given secrets and a prompt runs as
# whoever started the workflow asked. Refused, before anything is
# installed:
# - a pull request from a fork, unless `allow_forks` is true (its code
#   and its text are anyone's): a pull request event (or a workflow_run
#   one) whose head is another repository than this one, or none (a
#   deleted fork); a comment on a pull request (issue_comment) names no
#   head, so there the actor check below is what holds: a workflow that
#   checks out a fork's head for a comment runs an outsider's code;
# - an actor who is not in `allowed_actors` (`*`: anyone), not the
#   repository's owner, and has neither write nor admin permission on the
#   repository (asked of the GitHub API with the job's token).
#
# Inputs: INPUT_ALLOWED_ACTORS, INPUT_ALLOW_FORKS; ACTOR, REPOSITORY,
# REPOSITORY_OWNER, EVENT_NAME, PR_HEAD_REPO, RUN_HEAD_REPO, API_URL and
# GITHUB_TOKEN (from the `github` context).
set -euo pipefail
# shellcheck source=action/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

actor=${ACTOR:-}
repo=${REPOSITORY:-}
allow_forks=${INPUT_ALLOW_FORKS:-false}
case $allow_forks in true | false) ;;
  *) fail "input \`allow_forks\`: \`$allow_forks\`; use true or false" ;; esac

# Where the change comes from: a pull request's head, or the head of the
# run a workflow_run follows; empty for every other event.
head=
case ${EVENT_NAME:-} in
  pull_request | pull_request_target | pull_request_review | pull_request_review_comment)
    head=${PR_HEAD_REPO:-(a deleted repository)}
    ;;
  workflow_run) head=${RUN_HEAD_REPO:-(a deleted repository)} ;;
esac
# Not the fork flag: in a repository that is itself a fork, its own
# branches' pull requests have it too.
if [[ -n $head && ${head,,} != "${repo,,}" ]]; then
  if [[ $allow_forks != true ]]; then
    fail "refused: this ${EVENT_NAME} comes from a fork ($head), and an agent run on it would act on an outsider's code and text with this workflow's secrets; set \`allow_forks: true\` to allow pull requests from forks"
  fi
  note "a ${EVENT_NAME} from the fork $head: allowed (allow_forks is true)"
fi

[[ -n $actor ]] || fail "refused: the workflow run names no actor (github.actor is empty)"

allowed=()
split_words "${INPUT_ALLOWED_ACTORS:-}" allowed
for a in "${allowed[@]}"; do
  if [[ $a == '*' ]]; then
    note "actor $actor: allowed (allowed_actors is *)"
    exit 0
  fi
  # GitHub logins are case-insensitive.
  if [[ ${a,,} == "${actor,,}" ]]; then
    note "actor $actor: allowed (in allowed_actors)"
    exit 0
  fi
done

# A repository a user owns is theirs to administer (an organisation's
# name is never a user's).
owner=${REPOSITORY_OWNER:-${repo%%/*}}
if [[ -n $owner && ${actor,,} == "${owner,,}" ]]; then
  note "actor $actor: allowed (the owner of ${repo:-the repository})"
  exit 0
fi

how="add them to \`allowed_actors\` (\`*\` allows anyone)"
[[ -n $repo ]] || fail "refused: cannot tell the repository to check $actor's permission on; $how"
[[ -n ${GITHUB_TOKEN:-} ]] || fail "refused: no token to ask GitHub for $actor's permission on $repo; $how"
command -v curl >/dev/null || fail "refused: checking $actor's permission on $repo needs curl; install it, or $how"

url=${API_URL:-https://api.github.com}/repos/$repo/collaborators/$actor/permission
body=$(mktemp)
# The token goes to curl in a file, not its arguments (which any process
# of the job can read); -g: a bot's login has brackets (`name[bot]`).
auth=$(mktemp)
chmod 600 "$auth"
printf 'header = "Authorization: Bearer %s"\n' "$GITHUB_TOKEN" >"$auth"
code=$(curl -g -sS --retry 2 --connect-timeout 10 --max-time 60 -o "$body" -w '%{http_code}' \
  -K "$auth" -H 'Accept: application/vnd.github+json' \
  -H 'X-GitHub-Api-Version: 2022-11-28' -- "$url") || code=000
rm -f "$auth"
permission=$(sed -n 's/.*"permission"[[:space:]]*:[[:space:]]*"\([a-z]*\)".*/\1/p' "$body" | head -n 1)
rm -f "$body"
case $code in
  200) ;;
  404) permission=none ;;
  *) fail "refused: cannot ask GitHub for $actor's permission on $repo ($url answered HTTP $code; the job's token needs \`permissions: contents: read\` or more); $how" ;;
esac
case $permission in
  admin | maintain | write)
    note "actor $actor: allowed ($permission permission on $repo)"
    ;;
  none | '')
    fail "refused: actor $actor has no permission on $repo, and only actors with write or admin permission trigger this action; $how"
    ;;
  *)
    fail "refused: actor $actor has $permission permission on $repo, and only actors with write or admin permission trigger this action; $how"
    ;;
esac
