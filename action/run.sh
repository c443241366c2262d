#!/usr/bin/env bash
# The action's main step: runs `warden run` (a prompt, or a command for
# `exec`) or `warden batch`, then decides whether the run directory is
# uploaded, and exits with warden's exit code, so the step fails exactly
# when warden says the run did not succeed.
#
# Inputs (all INPUT_*): AGENT, PROMPT, PROMPT_FILE, COMMAND, BATCH, ARGS
# (one argument per line), WORKING_DIRECTORY, UPLOAD_ARTIFACT, ARTIFACT_NAME,
# the credentials (ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN,
# OPENAI_API_KEY, GEMINI_API_KEY, USE_BEDROCK, USE_VERTEX);
# and WARDEN_EXECUTABLE, the warden to run (default: the one on PATH).
# Outputs: every output warden writes (it writes them itself under
# GITHUB_ACTIONS=true), `exit_code` even when warden stopped before
# writing any, `junit_file`, and for the upload step `upload`,
# `artifact_path` and `artifact_name`.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=action/lib.sh
. "$here/lib.sh"
# shellcheck source=action/check-inputs.sh
. "$here/check-inputs.sh"
check_inputs

agent=${INPUT_AGENT:-}
batch=${INPUT_BATCH:-}
prompt=${INPUT_PROMPT:-}
prompt_file=${INPUT_PROMPT_FILE:-}
command=${INPUT_COMMAND:-}
upload_policy=${INPUT_UPLOAD_ARTIFACT:-on-failure}
artifact_name=${INPUT_ARTIFACT_NAME:-}
args=()
split_lines "${INPUT_ARGS:-}" args
cd -- "${INPUT_WORKING_DIRECTORY:-.}"

# The credential inputs: each becomes the variable its agent CLI reads,
# in this step's environment only, hidden in the log (::add-mask::), and
# is given to the agent by name (`--env NAME`), which warden passes into a
# sandbox and masks in every report. Never an argument, never printed.
cred_args=()
pass_credential() {
  local name=$1 value=$2
  [[ -n $value ]] || return 0
  mask "$value"
  export "$name=$value"
  cred_args+=(--env "$name")
}
pass_credential ANTHROPIC_API_KEY "${INPUT_ANTHROPIC_API_KEY:-}"
pass_credential CLAUDE_CODE_OAUTH_TOKEN "${INPUT_CLAUDE_CODE_OAUTH_TOKEN:-}"
pass_credential OPENAI_API_KEY "${INPUT_OPENAI_API_KEY:-}"
pass_credential GEMINI_API_KEY "${INPUT_GEMINI_API_KEY:-}"
# Bedrock and Vertex take the cloud's own variables, set on the job or by
# an earlier step (aws-actions/configure-aws-credentials,
# google-github-actions/auth); the action passes those that are set.
if [[ ${INPUT_USE_BEDROCK:-false} == true ]]; then
  export CLAUDE_CODE_USE_BEDROCK=1 # a switch, not a secret: not masked
  cred_args+=(--env CLAUDE_CODE_USE_BEDROCK)
  for v in "${BEDROCK_VARS[@]}"; do
    if [[ -n ${!v:-} ]]; then cred_args+=(--env "$v"); fi
  done
fi
if [[ ${INPUT_USE_VERTEX:-false} == true ]]; then
  export CLAUDE_CODE_USE_VERTEX=1 # a switch, not a secret: not masked
  cred_args+=(--env CLAUDE_CODE_USE_VERTEX)
  for v in "${VERTEX_VARS[@]}"; do
    if [[ -n ${!v:-} ]]; then cred_args+=(--env "$v"); fi
  done
fi
if [[ -n $batch ]]; then
  # `warden batch` has no --env: its runs inherit the variables (on the
  # host; a sandboxed run needs them in the batch file's settings).
  cred_args=()
fi
# The inputs are the action's, not the agent's: none of them (the prompt
# above all) is left in the environment warden and the agent get.
unset INPUT_AGENT INPUT_PROMPT INPUT_PROMPT_FILE INPUT_COMMAND INPUT_BATCH INPUT_ARGS \
  INPUT_WORKING_DIRECTORY INPUT_AGENT_VERSION INPUT_INSTALL_AGENT INPUT_WARDEN_INSTALL \
  INPUT_CACHE INPUT_UPLOAD_ARTIFACT INPUT_ARTIFACT_NAME INPUT_ARTIFACT_RETENTION_DAYS \
  INPUT_ANTHROPIC_API_KEY INPUT_CLAUDE_CODE_OAUTH_TOKEN INPUT_OPENAI_API_KEY INPUT_GEMINI_API_KEY \
  INPUT_USE_BEDROCK INPUT_USE_VERTEX
warden=${WARDEN_EXECUTABLE:-warden}
unset WARDEN_EXECUTABLE

command -v "$warden" >/dev/null ||
  fail "there is no \`$warden\`: the action's install step makes one; when running this script by hand, install warden first"

work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/warden-XXXXXX")
junit=$work/junit.xml
# warden's outputs go to a file of their own first, to be read here; they
# are then appended to the step's file as warden wrote them.
own_outputs=$work/outputs

stdin=/dev/null
if [[ -n $batch ]]; then
  cmd=("$warden" batch "$batch" --junit "$junit" "${args[@]}")
elif [[ $agent == exec ]]; then
  # The command is a bash script, run as GitHub runs a `run:` step.
  cmd=("$warden" run exec --junit "$junit" "${cred_args[@]}" "${args[@]}" -- bash --noprofile --norc -eo pipefail -c "$command")
elif [[ -n $prompt_file ]]; then
  cmd=("$warden" run "$agent" --junit "$junit" -f "$prompt_file" "${cred_args[@]}" "${args[@]}")
else
  # On stdin, as warden passes it on: never an argument, so no size limit
  # and nothing in `ps`.
  printf '%s' "$prompt" >"$work/prompt"
  stdin=$work/prompt
  cmd=("$warden" run "$agent" --junit "$junit" -f - "${cred_args[@]}" "${args[@]}")
fi
printf 'warden action: running' >&2
printf ' %q' "${cmd[@]}" >&2
printf '\n' >&2

# warden runs in the background so that this shell can pass on the signals
# the runner sends when the job is cancelled (SIGINT, then SIGTERM after
# 7.5 s): it sends them to the step's shell only, and warden, given the
# chance, ends the agent and still writes its report. (warden catches
# SIGINT also as a background job, where it starts ignored.)
GITHUB_OUTPUT=$own_outputs "${cmd[@]}" <"$stdin" &
pid=$!
forwarded=0
for sig in INT TERM HUP; do
  # shellcheck disable=SC2064 # the signal's name is meant to be fixed now
  trap "forwarded=1; kill -$sig $pid 2>/dev/null || :" "$sig"
done
while :; do
  forwarded=0
  code=0
  wait "$pid" || code=$?
  # A wait cut short by a signal returns early: wait again while warden
  # runs. (Its own exit_code output, below, settles the code in the
  # instant where it ended right after the signal.)
  if ! ((forwarded)) || ! kill -0 "$pid" 2>/dev/null; then break; fi
done
trap - INT TERM HUP
rm -f "$work/prompt"

declare -A out=()
read_outputs "$own_outputs" out
if [[ -f $own_outputs && -n ${GITHUB_OUTPUT:-} ]]; then
  cat "$own_outputs" >>"$GITHUB_OUTPUT"
fi
if [[ -n ${out[exit_code]:-} ]]; then
  code=${out[exit_code]}
else
  # warden writes no outputs when it stops before a run (a bad flag: 2).
  set_output exit_code "$code"
fi
set_output junit_file "$([[ -f $junit ]] && echo "$junit")"

# What did not succeed is uploaded, for a person to read its logs.
if [[ -n $batch ]]; then
  dir=${out[batch_dir]:-}
  ok=$((code == 0))
  for v in agent_failed stalled startup_timeout timed_out cancelled spawn_failed internal_error budget_exceeded never_ran; do
    [[ ${out[$v]:-0} == 0 ]] || ok=0
  done
else
  dir=${out[run_dir]:-}
  ok=$([[ ${out[verdict]:-} == succeeded ]] && echo 1 || echo 0)
fi
[[ -z $dir || $dir == /* ]] || dir=$PWD/$dir
upload=false
case $upload_policy in
  always) upload=true ;;
  on-failure) ((ok)) || upload=true ;;
esac
if [[ $upload == true && ! -d $dir ]]; then
  note "no directory to upload: warden made none (exit code $code)"
  upload=false
fi
if [[ $upload == true ]]; then
  if [[ -z $artifact_name ]]; then
    # The directory's name is the run's (or batch's) id: unique, as
    # artifact names in a workflow run must be.
    artifact_name=warden-$([[ -n $batch ]] && echo batch-)$(basename "$dir")
    artifact_name=${artifact_name//[\"\:\<\>\|\*\?\\$'\r\n']/-}
  fi
  set_output artifact_path "$dir"
  set_output artifact_name "$artifact_name"
fi
set_output upload "$upload"
exit "$code"
