#!/usr/bin/env bash
# Installs the agent CLI(s) a run needs from npm, at the version warden is
# tested with (.ci/agents.txt) unless INPUT_AGENT_VERSION names another.
# Nothing to do for `exec`, with INPUT_INSTALL_AGENT=false, or when that
# version is already on PATH.
#
# Inputs: INPUT_AGENT (one agent; for a batch, any number), INPUT_AGENT_VERSION,
# INPUT_INSTALL_AGENT. WARDEN_ACTION_DRY_RUN=1 prints the npm command
# instead of running it.
set -euo pipefail
# shellcheck source=action/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ ${INPUT_INSTALL_AGENT:-true} == false ]]; then
  note "install-agent is false: using the agent CLI already on PATH"
  set_output installed ""
  exit 0
fi

agents=()
split_words "${INPUT_AGENT:-}" agents
specs=()
for agent in "${agents[@]}"; do
  pin=$(agent_pin "$agent") || continue # exec: nothing to install
  package=${pin% *}
  version=${INPUT_AGENT_VERSION:-${pin#* }}
  # The CLIs print their version in --version (`2.1.197 (Claude Code)`,
  # `codex-cli 0.171.0`; pi on stderr); a tag such as `latest` is never
  # taken as there.
  if [[ $version =~ ^[0-9] ]] && have=$(command -v "$agent") &&
    said=$(timeout 60 "$have" --version 2>&1 </dev/null) &&
    grep -qwF -- "$version" <<<"$said"; then
    note "$agent $version is already installed ($have)"
    continue
  fi
  specs+=("$package@$version")
done

if ((${#specs[@]} == 0)); then
  note "no agent CLI to install"
  set_output installed ""
  exit 0
fi

cmd=(npm install --global --no-audit --no-fund --loglevel=error "${specs[@]}")
if [[ ${WARDEN_ACTION_DRY_RUN:-} == 1 ]]; then
  printf 'would run:'
  printf ' %q' "${cmd[@]}"
  printf '\n'
else
  command -v npm >/dev/null ||
    fail "installing ${specs[*]} needs npm, and there is none on PATH: add actions/setup-node before this action, or install the CLI yourself and set \`install-agent: false\`"
  note "installing ${specs[*]}"
  "${cmd[@]}"
fi
set_output installed "${specs[*]}"
