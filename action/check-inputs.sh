#!/usr/bin/env bash
# The action's first step: checks every input before anything is installed,
# so a mistake costs seconds, not a build. Each error names the input and
# how to fix it. run.sh checks again (it can be run on its own).
set -euo pipefail
# shellcheck source=action/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

check_inputs() {
  local agent=${INPUT_AGENT:-} prompt=${INPUT_PROMPT:-} prompt_file=${INPUT_PROMPT_FILE:-}
  local command=${INPUT_COMMAND:-} batch=${INPUT_BATCH:-}

  if [[ -n ${RUNNER_OS:-} && $RUNNER_OS != Linux ]]; then
    fail "warden runs on Linux only, and this runner is $RUNNER_OS: use a Linux runner (runs-on: ubuntu-latest)"
  fi

  local wd=${INPUT_WORKING_DIRECTORY:-.}
  [[ -d $wd ]] || fail "input \`working-directory\`: \`$wd\` is not a directory (it is relative to the workspace, $PWD)"

  local agents=() a
  split_words "$agent" agents
  for a in "${agents[@]}"; do
    is_known_agent "$a" || fail "input \`agent\`: unknown agent \`$a\`; use one of: ${KNOWN_AGENTS[*]}"
  done

  if [[ -n $batch ]]; then
    local other
    for other in prompt prompt-file command; do
      local var="INPUT_${other//-/_}"
      var=${var^^}
      [[ -z ${!var:-} ]] || fail "inputs \`batch\` and \`$other\` exclude each other: a batch file gives each run its own prompt or command; remove \`$other\`, or remove \`batch\` for a single run"
    done
    [[ -f $wd/$batch || ($batch == /* && -f $batch) ]] || fail "input \`batch\`: no file \`$batch\` (from the working directory, $(cd "$wd" && pwd))"
  else
    ((${#agents[@]})) || fail "input \`agent\` is empty: name the agent to run (${KNOWN_AGENTS[*]}), or give a \`batch\` file"
    ((${#agents[@]} == 1)) || fail "input \`agent\`: one agent for a single run, got \`$agent\`; several are for \`batch\` (the agent CLIs to install)"
    if [[ $agent == exec ]]; then
      [[ -z $prompt && -z $prompt_file ]] || fail "agent \`exec\` runs a command, not a prompt: give it as input \`command\` and remove \`prompt\`/\`prompt-file\`"
      [[ -n ${command//[[:space:]]/} ]] || fail "input \`command\` is empty: agent \`exec\` needs the command to run (a bash script, as in a step's \`run:\`)"
    else
      [[ -z $command ]] || fail "input \`command\` is for agent \`exec\`; agent \`$agent\` takes a \`prompt\` or a \`prompt-file\`"
      if [[ -n $prompt && -n $prompt_file ]]; then fail "inputs \`prompt\` and \`prompt-file\` exclude each other: give one"; fi
      [[ -n $prompt || -n $prompt_file ]] || fail "no prompt for $agent: give input \`prompt\` (the text) or \`prompt-file\` (a file), or \`batch\` for a batch file"
      if [[ -n $prompt_file ]]; then
        [[ -f $wd/$prompt_file || ($prompt_file == /* && -f $prompt_file) ]] || fail "input \`prompt-file\`: no file \`$prompt_file\` (from the working directory, $(cd "$wd" && pwd))"
      fi
    fi
  fi

  local args=()
  split_lines "${INPUT_ARGS:-}" args
  for a in "${args[@]}"; do
    case $a in
      --junit | --junit=*)
        fail "input \`args\`: remove \`$a\`: the action writes the JUnit file itself (output \`junit_file\`)" ;;
      --)
        if [[ -n $batch ]]; then
          fail "input \`args\`: \`--\` has no meaning for \`warden batch\`; give each run's extra arguments in the batch file (extra_args)"
        elif [[ $agent == exec ]]; then
          fail "input \`args\`: \`--\` is for an agent CLI's own arguments; with agent \`exec\`, give the whole command in \`command\`"
        fi ;;
    esac
  done

  local v=${INPUT_AGENT_VERSION:-}
  if [[ -n $v ]]; then
    [[ $v =~ ^[A-Za-z0-9][A-Za-z0-9.+_-]*$ ]] || fail "input \`agent-version\`: \`$v\` is not a version or an npm tag (like 2.1.197 or latest)"
    if ((${#agents[@]} != 1)) || [[ ${agents[0]} == exec ]]; then
      fail "input \`agent-version\` needs exactly one agent CLI to install (\`agent\` is \`$agent\`)"
    fi
  fi

  case ${INPUT_INSTALL_AGENT:-true} in true | false) ;;
    *) fail "input \`install-agent\`: \`$INPUT_INSTALL_AGENT\`; use true or false" ;; esac
  case ${INPUT_CACHE:-true} in true | false) ;;
    *) fail "input \`cache\`: \`$INPUT_CACHE\`; use true or false" ;; esac
  case ${INPUT_WARDEN_INSTALL:-auto} in auto | build | path) ;;
    *) fail "input \`warden-install\`: \`$INPUT_WARDEN_INSTALL\`; use auto (a warden of this version on PATH or in the cache, else the release archive, else build it), build (always build from source), or path (the warden on PATH, whatever its version)" ;; esac
  case ${INPUT_UPLOAD_ARTIFACT:-on-failure} in on-failure | always | never) ;;
    *) fail "input \`upload-artifact\`: \`$INPUT_UPLOAD_ARTIFACT\`; use on-failure (when a run did not succeed), always, or never" ;; esac

  local bedrock=${INPUT_USE_BEDROCK:-false} vertex=${INPUT_USE_VERTEX:-false}
  case $bedrock in true | false) ;;
    *) fail "input \`use_bedrock\`: \`$bedrock\`; use true or false" ;; esac
  case $vertex in true | false) ;;
    *) fail "input \`use_vertex\`: \`$vertex\`; use true or false" ;; esac
  if [[ $bedrock == true && $vertex == true ]]; then fail "inputs \`use_bedrock\` and \`use_vertex\` exclude each other: choose one"; fi
  if [[ $bedrock == true && -z ${AWS_REGION:-} ]]; then
    fail "input \`use_bedrock\` needs AWS_REGION (and AWS credentials) in the environment: set it in the step's \`env:\`, or with aws-actions/configure-aws-credentials before this action"
  fi
  if [[ $vertex == true ]]; then
    for v in ANTHROPIC_VERTEX_PROJECT_ID CLOUD_ML_REGION; do
      [[ -n ${!v:-} ]] || fail "input \`use_vertex\` needs $v in the environment: set it in the step's \`env:\` (with google-github-actions/auth before this action for the credentials)"
    done
  fi

  local name=${INPUT_ARTIFACT_NAME:-}
  if [[ $name == *[\":\<\>\|\*\?\\/$'\r\n']* ]]; then
    fail "input \`artifact-name\`: \`$name\` has a character artifact names cannot have (one of \" : < > | * ? \\ / or a line break)"
  fi
  local days=${INPUT_ARTIFACT_RETENTION_DAYS:-}
  [[ -z $days || $days =~ ^[1-9][0-9]*$ ]] || fail "input \`artifact-retention-days\`: \`$days\` is not a number of days (1 to 90; empty for the repository's default)"
}

# Run as a step, not when sourced by run.sh.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  check_inputs
fi
