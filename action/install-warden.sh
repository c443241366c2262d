#!/usr/bin/env bash
# Makes `warden` (and `warden-shim` beside it) of the action's own version
# available to the later steps: the release archive for that version,
# downloaded and checked against its SHA-256 (seconds), or, only when no
# release has one for this machine, a build of the action's sources with
# cargo (minutes). Either is cached (actions/cache).
#
#   install-warden.sh lookup    before the cache is restored: the version,
#                               a warden of that version already on PATH,
#                               else whether a release has an archive for
#                               this machine (its URL and checksum), and
#                               the cache's folder and key
#   install-warden.sh install   after it: that warden, or the one restored
#                               into the cache's folder, or the download,
#                               or a new build
#
# Inputs: INPUT_WARDEN_INSTALL (auto, build, path); INPUT_RELEASE_URL, else
# WARDEN_INSTALL_BASE (the variable install.sh reads too), else the
# action's repository's releases: where the releases are, laid out as
# GitHub's https://github.com/OWNER/REPO/releases, with
# `download/v<version>/warden-<version>-<target>.tar.gz` and its `.sha256`;
# ACTION_REF and ACTION_REPOSITORY (github.action_ref,
# github.action_repository). For install: WARDEN_FOUND, WARDEN_ROOT,
# WARDEN_URL and WARDEN_SHA256 (lookup's `path`, `root`, `url`, `sha256`).
# WARDEN_ACTION_DRY_RUN=1 prints the build command instead of running it.
set -euo pipefail
# shellcheck source=action/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mode=${INPUT_WARDEN_INSTALL:-auto}

# github.action_ref and github.action_repository are empty in a composite
# action's steps on some runners (actions/runner#2473); the runner checks
# an action out as _actions/OWNER/REPO/REF, which says both.
if [[ -z ${ACTION_REF:-} || -z ${ACTION_REPOSITORY:-} ]] &&
  [[ $ACTION_ROOT =~ /_actions/([^/]+)/([^/]+)/([^/]+)$ ]]; then
  ACTION_REPOSITORY=${ACTION_REPOSITORY:-${BASH_REMATCH[1]}/${BASH_REMATCH[2]}}
  ACTION_REF=${ACTION_REF:-${BASH_REMATCH[3]}}
fi

# The version to download: the action's ref when it is a version tag
# (`uses: OWNER/warden@v0.2.0`), else the version its sources build (a
# branch or a commit in `uses:`, or a checkout: `uses: ./`).
release_version() {
  local ref=${ACTION_REF:-} source=$1
  if [[ $ref =~ ^v([0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?)$ ]]; then
    [[ ${BASH_REMATCH[1]} == "$source" ]] ||
      note "the action's ref is $ref but its sources are warden $source: downloading ${BASH_REMATCH[1]}"
    echo "${BASH_REMATCH[1]}"
  else
    echo "$source"
  fi
}

# Where the releases are: the input, the variable, the repository the
# action was taken from, or the GitHub origin of its checkout; nothing
# when none says.
release_base() {
  local base=${INPUT_RELEASE_URL:-${WARDEN_INSTALL_BASE:-}} repo=${ACTION_REPOSITORY:-} origin
  if [[ -z $base && -z $repo ]] && command -v git >/dev/null &&
    origin=$(git -C "$ACTION_ROOT" remote get-url origin 2>/dev/null) &&
    [[ $origin =~ github\.com[:/]([^/]+/[^/]+)$ ]]; then
    repo=${BASH_REMATCH[1]%.git}
  fi
  if [[ -z $base && -n $repo ]]; then
    base=${GITHUB_SERVER_URL:-https://github.com}/$repo/releases
  fi
  echo "${base%/}"
}

# The targets a release may have an archive for on this machine, the
# static one first.
machine_targets() {
  local arch
  arch=$(uname -m)
  case $arch in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) return 0 ;;
  esac
  echo "$arch-unknown-linux-musl $arch-unknown-linux-gnu"
}

# GETs $1 into file $2; prints the HTTP status (000 when there was no
# answer, curl saying why on stderr). From an https:// URL, redirects
# (GitHub's, to its storage) keep to https.
http_get() {
  local code proto=()
  [[ $1 == https://* ]] && proto=(--proto "=https" --proto-redir "=https")
  code=$(curl -sSL "${proto[@]}" --retry 2 --connect-timeout 10 --max-time 300 \
    -o "$2" -w '%{http_code}' -- "$1") || code=000
  echo "${code:-000}"
}

lookup() {
  local version release found='' cached
  version=$(warden_source_version)
  if [[ $mode != build ]] && cached=$(command -v warden); then
    if [[ $mode == path || $(warden_version_of "$cached") == "$version" ]]; then
      found=$cached
    else
      note "$cached is warden $(warden_version_of "$cached"), not $version: not used"
    fi
  fi
  release=$(release_version "$version")
  local url='' sha='' target='' source=build
  if [[ -n $found ]]; then
    source=path
  elif [[ $mode == auto ]]; then
    local base targets t tmp code
    base=$(release_base)
    targets=$(machine_targets)
    if [[ -z $base ]]; then
      note "no release location (the action is not used as OWNER/REPO@REF, and neither the input \`release-url\` nor WARDEN_INSTALL_BASE is set): warden $version will be built from source"
    elif [[ -z $targets ]]; then
      note "releases have no archive for a $(uname -m) machine: warden $version will be built from source"
    else
      command -v curl >/dev/null ||
        fail "downloading warden needs curl, and there is none on PATH: install curl, or set \`warden-install: build\`"
      tmp=$(mktemp)
      for t in $targets; do
        url=$base/download/v$release/warden-$release-$t.tar.gz
        code=$(http_get "$url.sha256" "$tmp")
        case $code in
          200)
            sha=$(tr -d '\r' <"$tmp" | awk 'NR == 1 { print tolower($1) }')
            rm -f "$tmp"
            [[ $sha =~ ^[0-9a-f]{64}$ ]] ||
              fail "$url.sha256 does not hold a SHA-256 (64 hex digits first): refused"
            target=$t
            source=release
            note "release v$release has $(basename "$url") ($base)"
            break
            ;;
          404) url='' ;;
          *)
            rm -f "$tmp"
            fail "cannot tell whether release v$release has an archive for this machine: $url.sha256 answered HTTP $code (set \`release-url\` to a mirror, or \`warden-install: build\` to build from source)"
            ;;
        esac
      done
      rm -f "$tmp"
      if [[ -z $url ]]; then
        note "no release of warden $release for this machine under $base (looked for ${targets// / and }): warden $version will be built from source with cargo"
      fi
    fi
  fi
  set_output version "$version"
  set_output path "$found"
  set_output source "$source"
  set_output url "$url"
  set_output sha256 "$sha"
  # Not under the workspace: nothing there is the action's to keep.
  set_output root "${RUNNER_TEMP:?RUNNER_TEMP is not set}/warden"
  if [[ $source == release ]]; then
    # The archive's checksum in the key: a cache saved for another
    # archive of the same name is never restored for this one (and what
    # is restored is checked again before it is used).
    set_output cache-key "warden-$release-$target-${sha:0:16}"
  else
    set_output cache-key "$(build_cache_key "$version")"
  fi
}

# A build depends on the machine's kind and on every source file, so a
# cached build is used only for exactly these sources (a branch or a
# commit in `uses:` has no version bump of its own).
build_cache_key() {
  local sources
  sources=$(
    cd "$ACTION_ROOT" &&
      find Cargo.toml Cargo.lock crates -name target -prune -o -type f -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum
  )
  echo "warden-$1-$(uname -m)-linux-source-${sources:0:16}"
}

install() {
  local version root=${WARDEN_ROOT:?} found=${WARDEN_FOUND:-} url=${WARDEN_URL:-}
  version=$(warden_source_version)
  if [[ $mode == path ]]; then
    [[ -n $found ]] || fail "input \`warden-install\` is \`path\` but there is no \`warden\` on PATH: install it in an earlier step, or use auto"
  fi
  if [[ -n $found ]]; then
    note "using $found (warden $(warden_version_of "$found"))"
    set_output warden "$found"
    set_output built false
    set_output downloaded false
    return
  fi
  local built=false downloaded=false want=$version
  if [[ -n $url ]]; then
    want=$(release_version "$version")
  fi
  if [[ -n $url ]]; then
    # A release: its archive, cached or downloaded, is checked against the
    # release's checksum every time, and unpacked again.
    download "$root" "$url" "${WARDEN_SHA256:?}" "$want"
    [[ $fetched == true ]] && downloaded=true
  elif [[ $mode == auto && -x $root/bin/warden &&
    $(warden_version_of "$root/bin/warden") == "$want" ]]; then
    note "using $root/bin/warden (warden $want, built earlier, from the cache)"
  else
    build "$root" "$version"
    [[ ${WARDEN_ACTION_DRY_RUN:-} == 1 ]] || built=true
  fi
  # GITHUB_PATH takes effect from the next step on; the outputs say where.
  echo "$root/bin" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
  set_output warden "$root/bin/warden"
  set_output built "$built"
  set_output downloaded "$downloaded"
}

# Whether the last `download` fetched its archive (else the cache had it).
fetched=false

download() {
  local root=$1 url=$2 want=$3 version=$4
  local name archive got code tmp dir
  name=$(basename "$url")
  archive=$root/archive/$name
  mkdir -p "$root/archive"
  fetched=false
  if [[ -f $archive ]] && [[ $(sha256sum "$archive" | awk '{ print $1 }') == "$want" ]]; then
    note "$name: from the cache, SHA-256 $want, as $name.sha256 says"
  else
    rm -f "$archive"
    note "downloading $url"
    code=$(http_get "$url" "$archive.part")
    if [[ $code != 200 ]]; then
      rm -f "$archive.part"
      fail "cannot download $url (HTTP $code)"
    fi
    got=$(sha256sum "$archive.part" | awk '{ print $1 }')
    if [[ $got != "$want" ]]; then
      rm -f "$archive.part"
      fail "checksum mismatch: $name has SHA-256 $got, but $name.sha256 says $want: refused (a damaged download, or not the release's archive)"
    fi
    mv "$archive.part" "$archive"
    fetched=true
    note "$name: SHA-256 $got, as $name.sha256 says"
  fi
  tmp=$(mktemp -d)
  dir=$tmp/${name%.tar.gz}
  # Unpacked, and run, apart: nothing replaces the programs in place
  # until the pair is known to be this version's.
  if ! tar -xzf "$archive" -C "$tmp" || ! [[ -f $dir/warden && -f $dir/warden-shim ]]; then
    rm -rf "$tmp"
    fail "$name does not hold ${name%.tar.gz}/warden and ${name%.tar.gz}/warden-shim"
  fi
  chmod 755 "$dir/warden" "$dir/warden-shim"
  if [[ $(warden_version_of "$dir/warden") != "$version" ]]; then
    rm -rf "$tmp"
    fail "$name's warden does not run as warden $version on this machine ($(uname -m))"
  fi
  mkdir -p "$root/bin"
  command install -m 755 "$dir/warden" "$dir/warden-shim" "$root/bin/"
  rm -rf "$tmp"
  note "installed warden $version from the release into $root/bin"
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
  local need have
  need=$(rust_version)
  command -v cargo >/dev/null ||
    fail "building warden needs cargo, and there is none on PATH: add a Rust toolchain step ($need or later) before this action, or put a warden on PATH and set \`warden-install: path\`"
  have=$(cargo --version 2>/dev/null | awk '{ print $2 }')
  have=${have%%-*}
  version_at_least "$have" "$need" ||
    fail "building warden needs Rust $need or later, and cargo on PATH is $have: add a Rust toolchain step ($need or later) before this action"
  note "building warden $version from $ACTION_ROOT with cargo $have (a few minutes; cached afterwards with \`cache: true\`)"
  "${cmd[@]}"
  [[ $(warden_version_of "$root/bin/warden") == "$version" ]] ||
    fail "the build did not leave a warden $version in $root/bin"
}

case ${1:-} in
  lookup) lookup ;;
  install) install ;;
  *) echo "usage: install-warden.sh lookup|install" >&2; exit 2 ;;
esac
