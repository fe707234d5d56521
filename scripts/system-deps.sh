#!/usr/bin/env bash
# Debian packages the tests need beyond Python: busybox (the wait script is tested under
# the same shell as its default image) and shellcheck (actionlint checks the `run:`
# scripts of .github/workflows with it). Installs only what is missing.
set -euo pipefail
missing=()
command -v busybox >/dev/null 2>&1 || missing+=(busybox)
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
  echo "system-deps: please install: ${missing[*]}" >&2
  exit 1
fi
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
echo "system-deps: installing ${missing[*]}" >&2
$sudo_cmd apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
