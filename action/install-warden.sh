#!/usr/bin/env bash
# Makes `warden`, built from the action's own sources (so pinned by the ref
# in `uses:`), available to the later steps.
#
#   install-warden.sh lookup    before the cache is restored: the version
#                               the sources build, a warden of that version
#                               already on PATH, the cache's folder and key
#   install-warden.sh install   after it: that warden, or the one restored
#                               into the cache's folder, or a new build
#
# Inputs: INPUT_WARDEN_INSTALL (auto, build, path); WARDEN_FOUND (lookup's
# `path`) and WARDEN_ROOT (lookup's `root`) for install.
# WARDEN_ACTION_DRY_RUN=1 prints the build command instead of running it.
set -euo pipefail
# shellcheck source=action/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mode=${INPUT_WARDEN_INSTALL:-auto}

lookup() {
  local version found='' cached
  version=$(warden_source_version)
  if [[ $mode != build ]] && cached=$(command -v warden); then
    if [[ $mode == path || $(warden_version_of "$cached") == "$version" ]]; then
      found=$cached
    else
      note "$cached is warden $(warden_version_of "$cached"), not $version: not used"
    fi
  fi
  set_output version "$version"
  set_output path "$found"
  # Not under the workspace: nothing there is the action's to keep.
  set_output root "${RUNNER_TEMP:?RUNNER_TEMP is not set}/warden"
  set_output cache-key "$(cache_key "$version")"
}

# What the build depends on: the machine's kind, and every source file, so
# a cached build is used only for exactly these sources (a branch or a
# commit in `uses:` has no version bump of its own).
cache_key() {
  local sources
  sources=$(
    cd "$ACTION_ROOT" &&
      find Cargo.toml Cargo.lock crates -name target -prune -o -type f -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum
  )
  echo "warden-$(uname -s)-$(uname -m)-$1-${sources:0:16}"
}

install() {
  local version root=${WARDEN_ROOT:?} found=${WARDEN_FOUND:-}
  version=$(warden_source_version)
  if [[ $mode == path ]]; then
    [[ -n $found ]] || fail "input \`warden-install\` is \`path\` but there is no \`warden\` on PATH: install it in an earlier step, or use auto"
  fi
  if [[ -n $found ]]; then
    note "using $found (warden $(warden_version_of "$found"))"
    set_output warden "$found"
    set_output built false
    return
  fi
  local built=false
  if [[ $mode == auto && -x $root/bin/warden && $(warden_version_of "$root/bin/warden") == "$version" ]]; then
    note "using $root/bin/warden (warden $version, from the cache)"
  else
    build "$root" "$version"
    [[ ${WARDEN_ACTION_DRY_RUN:-} == 1 ]] || built=true
  fi
  # GITHUB_PATH takes effect from the next step on; the outputs say where.
  echo "$root/bin" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
  set_output warden "$root/bin/warden"
  set_output built "$built"
}

build() {
  local root=$1 version=$2
  local cmd=(cargo install --locked --force --path "$ACTION_ROOT/crates/warden" --root "$root")
  if [[ ${WARDEN_ACTION_DRY_RUN:-} == 1 ]]; then
    printf 'would run:'
    printf ' %q' "${cmd[@]}"
    printf '\n'
    return
  fi
  command -v cargo >/dev/null ||
    fail "building warden needs cargo, and there is none on PATH: add a Rust toolchain step (1.88 or later) before this action, or put a warden on PATH and set \`warden-install: path\`"
  note "building warden $version from $ACTION_ROOT (a few minutes; cached afterwards with \`cache: true\`)"
  "${cmd[@]}"
  [[ $(warden_version_of "$root/bin/warden") == "$version" ]] ||
    fail "the build did not leave a warden $version in $root/bin"
}

case ${1:-} in
  lookup) lookup ;;
  install) install ;;
  *) echo "usage: install-warden.sh lookup|install" >&2; exit 2 ;;
esac
