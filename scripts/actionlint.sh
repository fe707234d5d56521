#!/usr/bin/env bash
# Build actionlint (the GitHub Actions workflow linter, github.com/rhysd/actionlint) from
# Go modules: the Go module proxy is the only network this needs. tests/test_workflows.py
# runs it on .github/workflows/*.yml; with shellcheck on PATH (scripts/system-deps.sh
# installs it) it also checks the `run:` scripts.
#
# The version comes from ACTIONLINT_VERSION in versions.env at the repository root
# (KNS_VERSIONS_FILE overrides the path; KNS_ACTIONLINT_VERSION overrides the version).
# The binary is cached under
#   ${KNS_TOOLS_DIR:-$HOME/.cache/kns-platform/tools}/actionlint-<ver>/bin
# and only built when missing.
#
# Progress goes to stderr; the only thing printed on stdout is the absolute bin directory:
#   PATH="$(scripts/actionlint.sh):$PATH"
# KNS_BUILD_NICE (default 10) is the niceness of the go build.
set -euo pipefail

KNS_SCRIPT=actionlint
export KNS_BUILD_NICE=${KNS_BUILD_NICE:-10}
# shellcheck source=lib/gomod.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/gomod.sh"

load_versions
ACTIONLINT_VERSION=${KNS_ACTIONLINT_VERSION:-${ACTIONLINT_VERSION:-}}
[[ $ACTIONLINT_VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  die "ACTIONLINT_VERSION must be set (x.y.z) in $versions_file or KNS_ACTIONLINT_VERSION (got '$ACTIONLINT_VERSION')"

bin_dir=$tools_root/actionlint-$ACTIONLINT_VERSION/bin

ACTIONLINT_MOD=github.com/rhysd/actionlint

if [[ -x $bin_dir/actionlint ]]; then
  log "cached actionlint v$ACTIONLINT_VERSION in $bin_dir"
  printf '%s\n' "$bin_dir"
  exit 0
fi

gomod_prepare actionlint "$repo_root"
mkdir -p "$bin_dir"
mod_download "$ACTIONLINT_MOD" "v$ACTIONLINT_VERSION" ||
  die "cannot download $ACTIONLINT_MOD@v$ACTIONLINT_VERSION from the Go module proxy (try KNS_ACTIONLINT_VERSION=<another 1.x.y>)"
write_wrapper "$work/actionlint" "$ACTIONLINT_MOD" "v$ACTIONLINT_VERSION" "$MOD_GOMOD"
# Built inside a wrapper module, the binary's build info would report "(devel)": stamp the
# version the way upstream release builds do.
go_build "$work/actionlint" "$bin_dir/actionlint" "" \
  "-s -w -X $ACTIONLINT_MOD.version=v$ACTIONLINT_VERSION -X '$ACTIONLINT_MOD.installedFrom=built from Go modules by scripts/actionlint.sh'" \
  "$ACTIONLINT_MOD/cmd/actionlint"

printf '%s\n' "$bin_dir"
