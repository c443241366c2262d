# shellcheck shell=bash
# Shared by the GitHub Action's step scripts (sourced, not run).
#
# Every script takes its inputs from INPUT_* variables that the step's
# `env:` sets, never from `${{ }}` text pasted into a script, so an input
# is always data, and the scripts run the same outside a runner (which is
# how crates/warden/tests/run/action/ tests them).

# The repository the action runs from: this file's parent folder. Not
# $GITHUB_ACTION_PATH, so the scripts also work when run by hand.
ACTION_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The agents warden runs, in the order its documentation lists them.
KNOWN_AGENTS=(claude codex opencode pi gemini exec)

# The cloud variables Claude Code reads for Bedrock and for Vertex AI: the
# action passes those that are set (`use_bedrock`, `use_vertex`); the
# first of each list must be, and ANTHROPIC_VERTEX_PROJECT_ID too.
# shellcheck disable=SC2034 # used by check-inputs.sh and run.sh
BEDROCK_VARS=(AWS_REGION AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE
  AWS_BEARER_TOKEN_BEDROCK AWS_ROLE_ARN AWS_WEB_IDENTITY_TOKEN_FILE ANTHROPIC_BEDROCK_BASE_URL)
# shellcheck disable=SC2034
VERTEX_VARS=(CLOUD_ML_REGION ANTHROPIC_VERTEX_PROJECT_ID GOOGLE_APPLICATION_CREDENTIALS
  GOOGLE_CLOUD_PROJECT ANTHROPIC_VERTEX_BASE_URL)

# A user's mistake: one line that names the input and how to fix it, as an
# error annotation under Actions (so it shows on the run's page), then
# exit 1. The message is escaped as the runner decodes it, so a value in it
# cannot end the annotation or start a command of its own.
fail() {
  local msg="$*"
  if [[ ${GITHUB_ACTIONS:-} == true ]]; then
    msg=${msg//'%'/'%25'}
    msg=${msg//$'\r'/'%0D'}
    msg=${msg//$'\n'/'%0A'}
    echo "::error title=warden action::$msg" >&2
  else
    echo "warden action: error: $msg" >&2
  fi
  exit 1
}

note() {
  echo "warden action: $*" >&2
}

# Appends a step output. A value with a line break takes the heredoc form
# with a random delimiter not found in it, as warden itself writes them, so
# no value can set another output.
set_output() {
  local name=$1 value=$2
  [[ -n ${GITHUB_OUTPUT:-} ]] || return 0
  if [[ $value == *[$'\n\r']* ]]; then
    local delim
    while :; do
      delim="ghadelimiter_$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')"
      [[ $value != *"$delim"* ]] && break
    done
    printf '%s<<%s\n%s\n%s\n' "$name" "$delim" "$value" "$delim" >>"$GITHUB_OUTPUT"
  else
    printf '%s=%s\n' "$name" "$value" >>"$GITHUB_OUTPUT"
  fi
}

# Reads a file of step outputs (`name=value` lines and `name<<DELIM`
# blocks) into the associative array named by $2.
# shellcheck disable=SC2034 # `into` is a nameref: the caller's array is filled
read_outputs() {
  local file=$1
  local -n into=$2
  local line name delim value
  [[ -f $file ]] || return 0
  while IFS= read -r line || [[ -n $line ]]; do
    [[ -z $line ]] && continue
    if [[ $line =~ ^([A-Za-z0-9_-]+)\<\<(.+)$ ]]; then
      name=${BASH_REMATCH[1]}
      delim=${BASH_REMATCH[2]}
      value=
      local first=1
      while IFS= read -r line; do
        [[ $line == "$delim" ]] && break
        if ((first)); then value=$line; first=0; else value+=$'\n'$line; fi
      done
      into["$name"]=$value
    elif [[ $line == *=* ]]; then
      into["${line%%=*}"]=${line#*=}
    fi
  done <"$file"
}

# Splits a multi-line input into the array named by $2: one element per
# non-blank line, with the whitespace around it removed (YAML block
# scalars leave some) and a CR before the line end dropped. No word
# splitting, no globbing, no quotes to balance: a line is one argument.
split_lines() {
  local text=$1
  local -n lines_out=$2
  lines_out=()
  local line
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%$'\r'}
    line=${line#"${line%%[![:space:]]*}"}
    line=${line%"${line##*[![:space:]]}"}
    if [[ -n $line ]]; then lines_out+=("$line"); fi
  done <<<"$text"
}

# Splits a list of words (spaces, commas or line breaks between them) into
# the array named by $2. No globbing: a `*` stays a `*`.
# shellcheck disable=SC2034 # `words_out` is a nameref: the caller's array is filled
split_words() {
  local -n words_out=$2
  local all=() w
  IFS=$' \t\r\n,' read -r -d '' -a all <<<"$1" || :
  words_out=()
  for w in "${all[@]}"; do
    if [[ -n $w ]]; then words_out+=("$w"); fi
  done
}

is_known_agent() {
  local a
  for a in "${KNOWN_AGENTS[@]}"; do
    [[ $a == "$1" ]] && return 0
  done
  return 1
}

# "PACKAGE VERSION" of an agent's CLI, from the pinned list that the tests
# use too (.ci/agents.txt); nothing for an agent not listed (exec).
agent_pin() {
  local name package version
  while read -r name package version; do
    [[ $name == "$1" ]] && { echo "$package $version"; return 0; }
  done <"$ACTION_ROOT/.ci/agents.txt"
  return 1
}

# The version of warden the action's sources build: the CLI crate's own
# `version`, or the workspace's when the crate inherits it.
warden_source_version() {
  local v
  v=$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$ACTION_ROOT/crates/warden/Cargo.toml" | head -n 1)
  if [[ -z $v ]]; then
    v=$(awk '
      /^\[/ { in_pkg = ($0 == "[workspace.package]") }
      in_pkg && /^version *=/ { gsub(/.*= *"|".*/, ""); print; exit }
    ' "$ACTION_ROOT/Cargo.toml")
  fi
  [[ -n $v ]] || fail "cannot tell warden's version from $ACTION_ROOT/Cargo.toml"
  echo "$v"
}

# The version a `warden` executable says it is ("warden 0.1.0" -> 0.1.0);
# nothing when it does not run.
warden_version_of() {
  local out
  out=$("$1" --version 2>/dev/null) || return 0
  out=${out%%$'\n'*}
  echo "${out##* }"
}

# The oldest Rust that builds warden: the workspace's `rust-version`, the
# one place it is written down.
rust_version() {
  awk '
    /^\[/ { in_pkg = ($0 == "[workspace.package]") }
    in_pkg && /^rust-version *=/ { gsub(/.*= *"|".*/, ""); print; exit }
  ' "$ACTION_ROOT/Cargo.toml"
}

# Whether version $1 (like 1.2 or 1.2.3) is at least version $2.
version_at_least() {
  local IFS=.
  local -a a b
  read -r -a a <<<"$1"
  read -r -a b <<<"$2"
  local i
  for i in 0 1 2; do
    ((${a[i]:-0} > ${b[i]:-0})) && return 0
    ((${a[i]:-0} < ${b[i]:-0})) && return 1
  done
  return 0
}

# Writes each line of a secret as `::add-mask::` so the runner hides it in
# every later line of the log (the command itself is never shown).
mask() {
  local line
  [[ ${GITHUB_ACTIONS:-} == true && -n $1 ]] || return 0
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%$'\r'}
    [[ -n $line ]] && printf '::add-mask::%s\n' "$line"
  done <<<"$1"
  return 0
}
