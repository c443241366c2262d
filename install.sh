#!/bin/sh
# Installs warden's release build (warden and warden-shim, side by side)
# for this machine:
#
#   curl -fsSL https://github.com/OWNER/REPO/releases/latest/download/install.sh | sh
#
# It picks the archive for this machine (x86_64 or aarch64 Linux),
# downloads it and its .sha256 from the release, checks the checksum with
# sha256sum (a mismatch installs nothing) and puts both programs in the
# install directory. Nothing else is touched; it needs no root unless the
# directory does.
#
# Settings, all optional (environment variables):
#   WARDEN_VERSION       the version to install, as 0.1.0 (default: the
#                        latest release)
#   WARDEN_INSTALL_DIR   where the programs go (default: ~/.local/bin)
#   WARDEN_INSTALL_BASE  where the releases are, laid out as GitHub's
#                        https://github.com/OWNER/REPO/releases:
#                          BASE/download/vVERSION/warden-VERSION-TARGET.tar.gz
#                          BASE/download/vVERSION/warden-VERSION-TARGET.tar.gz.sha256
#                          BASE/latest/download/warden-version.txt (the latest version)
#                        for a mirror, an air-gapped host or a test; file://
#                        works too. Default: the releases of `repository`
#                        below.
#   WARDEN_INSTALL_MACHINE  the machine to install for instead of `uname -m`
#                        (for tests and for filling a mirror)
set -eu

# The GitHub repository (OWNER/REPO) whose releases are the default
# WARDEN_INSTALL_BASE. The release workflow writes it into the copy of
# this script it attaches to each release; this copy has none until the
# project has its public home, so here WARDEN_INSTALL_BASE is needed.
repository=

say() { printf 'install.sh: %s\n' "$*"; }
fail() {
  printf 'install.sh: %s\n' "$*" >&2
  exit 1
}

# Fetches URL into FILE with curl or wget, whichever this machine has.
# curl reads only `protocols` and follows a redirect only to `redirects`:
# https alone, unless WARDEN_INSTALL_BASE is an http:// or file:// one
# (then http too, and never a redirect to a local file). wget cannot be
# kept from following a redirect from https to plain http, which would
# let anyone on the way swap the archive and its checksum together: it is
# used only for a base that is not https.
protocols='=https'
redirects='=https'
download() { # URL FILE
  if command -v curl >/dev/null 2>&1; then
    curl --proto "$protocols" --proto-redir "$redirects" -fsSL -o "$2" "$1"
  elif [ "$protocols" = '=https' ]; then
    fail "curl is not installed: it is needed to download warden over https (wget would follow a redirect to plain http); install curl"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -O "$2" "$1"
  else
    fail "neither curl nor wget is installed: one of them is needed to download warden"
  fi
}

os=$(uname -s)
[ "$os" = Linux ] || fail "warden runs on Linux only; this is $os"

machine=${WARDEN_INSTALL_MACHINE:-$(uname -m)}
case "$machine" in
x86_64 | amd64) target=x86_64-unknown-linux-musl ;;
aarch64 | arm64) target=aarch64-unknown-linux-musl ;;
*) fail "no warden release archive for machine '$machine': the releases have x86_64 and aarch64 (Linux, static musl); elsewhere build it from source (cargo install --locked --path crates/warden in a copy of the source)" ;;
esac

command -v sha256sum >/dev/null 2>&1 || fail "sha256sum is not installed: it is needed to verify the download"
command -v tar >/dev/null 2>&1 || fail "tar is not installed: it is needed to unpack the download"

if [ -n "${WARDEN_INSTALL_BASE:-}" ]; then
  base=${WARDEN_INSTALL_BASE%/}
  case "$base" in
  https://*) ;;
  http://* | file://*)
    protocols='=https,http,file'
    redirects='=https,http'
    ;;
  *) fail "WARDEN_INSTALL_BASE must be an https://, http:// or file:// URL, not '$base'" ;;
  esac
elif [ -n "$repository" ]; then
  base=https://github.com/$repository/releases
else
  fail "this copy of install.sh knows no release location (warden has no published release yet): set WARDEN_INSTALL_BASE, or install from source (cargo install --locked --path crates/warden)"
fi
dir=${WARDEN_INSTALL_DIR:-$HOME/.local/bin}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

version=${WARDEN_VERSION:-}
version=${version#v}
case "$version" in
*[!0-9A-Za-z.+-]* | *..*) fail "WARDEN_VERSION '$version' is not a version (as 0.1.0)" ;;
esac
if [ -z "$version" ]; then
  download "$base/latest/download/warden-version.txt" "$tmp/version" ||
    fail "could not find the latest version at $base/latest/download/warden-version.txt (set WARDEN_VERSION to pick one)"
  version=$(tr -d ' \t\r\n' <"$tmp/version")
  case "$version" in
  '' | *[!0-9A-Za-z.+-]* | *..*) fail "$base/latest/download/warden-version.txt does not hold a version" ;;
  esac
fi

name=warden-$version-$target
archive=$name.tar.gz
url=$base/download/v$version/$archive
say "downloading $url"
download "$url" "$tmp/$archive" ||
  fail "could not download $url (is there a release $version with an archive for $target?)"
download "$url.sha256" "$tmp/$archive.sha256" ||
  fail "could not download $url.sha256"

expected=$(cut -d ' ' -f 1 <"$tmp/$archive.sha256")
actual=$(sha256sum "$tmp/$archive" | cut -d ' ' -f 1)
case "$expected" in
'' | *[!0-9a-f]*) fail "$archive.sha256 does not hold a SHA-256 checksum; nothing installed" ;;
esac
[ "$expected" = "$actual" ] ||
  fail "checksum mismatch for $archive: $archive.sha256 says $expected, the download is $actual; nothing installed"

mkdir "$tmp/x"
tar -xzf "$tmp/$archive" -C "$tmp/x" || fail "could not unpack $archive; nothing installed"
for program in warden warden-shim; do
  [ -f "$tmp/x/$name/$program" ] || fail "$archive has no $name/$program; nothing installed"
done

mkdir -p "$dir" || fail "could not create $dir"
# Both programs are copied beside their final names first, then renamed
# over them, so a running warden is never overwritten in place and a copy
# that fails (a full disk) leaves the old pair as it was: warden uses only
# a shim of its own build.
for program in warden-shim warden; do
  if ! { cp "$tmp/x/$name/$program" "$dir/.$program.new.$$" &&
    chmod 0755 "$dir/.$program.new.$$"; }; then
    rm -f "$dir/.warden-shim.new.$$" "$dir/.warden.new.$$"
    fail "could not write $dir/.$program.new.$$; nothing installed"
  fi
done
for program in warden-shim warden; do
  mv -f "$dir/.$program.new.$$" "$dir/$program" || {
    rm -f "$dir/.warden-shim.new.$$" "$dir/.warden.new.$$"
    fail "could not rename $dir/.$program.new.$$ to $dir/$program"
  }
done

say "installed warden $version ($target): $dir/warden and $dir/warden-shim"
case ":${PATH:-}:" in
*":$dir:"*) ;;
*) say "$dir is not on your PATH: add it (export PATH=\"$dir:\$PATH\") or run $dir/warden" ;;
esac
