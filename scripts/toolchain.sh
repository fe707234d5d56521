#!/usr/bin/env bash
# Provide the Pulumi toolchain of versions.env: the Pulumi CLI, the Python language host
# (with its exec script) and the Kubernetes resource provider, whatever can be reached.
#
# CLI and host: a `pulumi` on PATH of the pinned major version and at least the pinned
#   version (a newer CLI runs an older SDK's programs), with pulumi-language-python and
#   pulumi-language-python-exec beside it, is used as it is (with its own host). Otherwise
#   all three are built from Go modules (the Go module proxy is the only network this
#   needs) and cached under
#     ${KNS_TOOLS_DIR:-$HOME/.cache/kns-platform/tools}/pulumi-<ver>-k8s-<ver>/bin
#   where only what is missing is rebuilt.
#   The CLI built here carries scripts/patches/pulumi-cli.patch (PULUMI_AUTOMATIC_LOGGING=false
#   turns off the automatic debug log, docs/operations.md "The CLI patch"); a stamp beside
#   it names the patch, so a changed patch rebuilds it. A CLI on PATH is taken unpatched.
# Provider: exactly PULUMI_KUBERNETES_VERSION, from the Pulumi plugin cache
#   (${PULUMI_HOME:-$HOME/.pulumi}/plugins) when it is there (with the patch it needs);
#   else, when the pinned provider needs no patch, `pulumi plugin install` (from its
#   download site, if that answers); else built from Go modules, patched, and installed
#   into the plugin cache.
#
# One line on stderr says which way was taken, e.g.
#   toolchain: pulumi CLI v3.260.1 on PATH (/usr/local/bin); kubernetes provider v4.25.0 from the plugin cache (patched)
# (builds add their progress lines above it). The only thing printed on stdout is the
# absolute bin directory:
#   PATH="$(scripts/toolchain.sh):$PATH"
# `scripts/toolchain.sh --plan` prints that line for what it would do ("toolchain: plan:
# ..."), and builds, installs and prints on stdout nothing.
#
# Versions come from versions.env at the repository root (KNS_VERSIONS_FILE overrides the
# path).
#
# KNS_PROVIDER_PATCH=<file>|none (default scripts/patches/pulumi-kubernetes-provider.patch)
# is the patch the pinned provider needs (docs/operations.md, "The provider patch"); `none`
# when it needs none, which is what allows `pulumi plugin install` (given
# KNS_PLUGIN_INSTALL_TIMEOUT seconds, default 120, before the build is taken instead;
# KNS_PLUGIN_INSTALL=off builds it without trying, as scripts/soak-faults.sh does for the
# stock provider of its control).
#
# KNS_PYTHON_HOST=auto|upstream|minimal (default auto) picks the Python language host:
#   upstream - github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3 at the
#              pseudo-version of the pulumi commit in versions.env;
#   minimal  - a small host (scripts/minimal-host/), built against the pinned sdk/v3, for
#              module proxies that do not serve the upstream host module;
#   auto     - upstream, falling back to minimal (with a warning) if the proxy refuses it.
set -euo pipefail

KNS_SCRIPT=toolchain
# shellcheck source=lib/gomod.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/gomod.sh"

plan=0
for arg in "$@"; do
  case $arg in
  --plan) plan=1 ;;
  -h | --help)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  *) die "unknown argument '$arg' (usage: scripts/toolchain.sh [--plan])" ;;
  esac
done

# The minimal Python language host (KNS_PYTHON_HOST=minimal, or the fallback of auto), a
# Go module in scripts/minimal-host/ (gofmt- and vet-checked by tests/test_minimal_host.py).
# It does what `pulumi preview/up/destroy/refresh` need from a language host: runs the
# program through pulumi-language-python-exec (found next to the host) with the project's
# Python toolchain and virtualenv (runtime.options: virtualenv, toolchain), passes config
# and secret keys, and answers About/GetProgramDependencies. It reports no required
# plugins: with automatic plugin acquisition off, providers are loaded from the plugin
# cache when the program registers them, and runs Python policy packs (`pulumi preview
# --policy-pack`) through RunPlugin. `pulumi install`, `pulumi new` and codegen are not
# supported by it. A cached host is rebuilt when the hash of that directory changes.
minimal_host_rev() {
  (cd "$repo_root/scripts/minimal-host" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

load_versions
MINIMAL_HOST_REV=$(minimal_host_rev)
for var in PULUMI_VERSION PULUMI_COMMIT PULUMI_KUBERNETES_VERSION PULUMI_KUBERNETES_PROVIDER_PSEUDO; do
  [[ -n ${!var:-} ]] || die "$var is not set in $versions_file"
done

host_mode=${KNS_PYTHON_HOST:-auto}
case $host_mode in auto | upstream | minimal) ;; *) die "KNS_PYTHON_HOST must be auto, upstream or minimal (got '$host_mode')" ;; esac

# Nothing this script runs may reach for pulumi.com or a plugin download site, but for the
# one `pulumi plugin install` of a provider that needs no patch.
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
# Nor leave an automatic debug log per `pulumi version` it asks (the CLI patch, above).
export PULUMI_AUTOMATIC_LOGGING=false

PULUMI_MODULE=github.com/pulumi/pulumi
PKG_MOD=$PULUMI_MODULE/pkg/v3
SDK_MOD=$PULUMI_MODULE/sdk/v3
HOST_MOD=$PULUMI_MODULE/sdk/python/cmd/pulumi-language-python/v3
K8S_MOD=github.com/pulumi/pulumi-kubernetes/provider/v4
CLI_LDFLAGS="-X $SDK_MOD/go/common/version.Version=v$PULUMI_VERSION"
K8S_LDFLAGS="-X $K8S_MOD/pkg/version.Version=$PULUMI_KUBERNETES_VERSION"
GO_TAGS=osusergo,grpcnotrace

# The provider is built with scripts/patches/pulumi-kubernetes-provider.patch applied
# (docs/operations.md, "The provider patch"): the patch's hash keys the cached binary, and a
# stamp beside the installed plugin says which patch it carries, so a changed patch rebuilds.
# A stock provider (`pulumi plugin install`) carries no patch, so it is only taken when the
# pinned provider needs none (KNS_PROVIDER_PATCH=none; PROVIDER_PATCH_REV is then `none`).
provider_patch=${KNS_PROVIDER_PATCH:-$repo_root/scripts/patches/pulumi-kubernetes-provider.patch}
if [[ $provider_patch == none ]]; then
  PROVIDER_PATCH_REV=none
else
  [[ -r $provider_patch ]] ||
    die "cannot read the provider patch $provider_patch (KNS_PROVIDER_PATCH=none if the pinned provider needs none)"
  PROVIDER_PATCH_REV=$(sha256sum "$provider_patch" | cut -c1-16)
fi
# The CLI built here carries scripts/patches/pulumi-cli.patch, whose hash its stamp names.
cli_patch=$repo_root/scripts/patches/pulumi-cli.patch
[[ -r $cli_patch ]] || die "cannot read the CLI patch $cli_patch"
CLI_PATCH_REV=$(sha256sum "$cli_patch" | cut -c1-16)
plugin_install_timeout=${KNS_PLUGIN_INSTALL_TIMEOUT:-120}
[[ $plugin_install_timeout =~ ^[1-9][0-9]*$ ]] ||
  die "KNS_PLUGIN_INSTALL_TIMEOUT must be a number of seconds (got '$plugin_install_timeout')"

key_dir=$tools_root/pulumi-$PULUMI_VERSION-k8s-$PULUMI_KUBERNETES_VERSION
bin_dir=$key_dir/bin
provider_cache=$key_dir/provider-$PROVIDER_PATCH_REV/pulumi-resource-kubernetes
host_kind_file=$bin_dir/.pulumi-language-python.kind
cli_stamp=$bin_dir/.pulumi-cli-patch

pulumi_home=${PULUMI_HOME:-$HOME/.pulumi}
plugin_dir=$pulumi_home/plugins/resource-kubernetes-v$PULUMI_KUBERNETES_VERSION

provider_stamp=$plugin_dir/.kns-provider-patch

# The pinned provider is in the plugin cache: installed completely and, when it needs the
# patch, stamped with this patch's hash (any install of that version does when it needs none).
provider_installed() {
  [[ -x $plugin_dir/pulumi-resource-kubernetes && ! -e $plugin_dir.partial ]] || return 1
  [[ $PROVIDER_PATCH_REV == none || $(cat "$provider_stamp" 2>/dev/null) == "$PROVIDER_PATCH_REV" ]]
}

# Whether a `pulumi version` answer ($1: v3.260.1, v3.260.1-alpha.2+g1234) may stand in for
# the pinned version ($2: 3.259.0), compared as semantic versions: 0 when it is the same
# major version and not older; 1 when older (a pre-release of the pin is older); 2 when
# another major version; 3 when it is not a version.
cli_version_fits() {
  local re='^v?([0-9]+)\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$' i
  local -a have want
  local have_pre want_pre
  [[ $1 =~ $re ]] || return 3
  have=("${BASH_REMATCH[@]:1:3}") have_pre=${BASH_REMATCH[4]}
  [[ $2 =~ $re ]] || die "PULUMI_VERSION=$2 in $versions_file is not a version"
  want=("${BASH_REMATCH[@]:1:3}") want_pre=${BASH_REMATCH[4]}
  ((10#${have[0]} == 10#${want[0]})) || return 2
  for i in 1 2; do
    if ((10#${have[i]} != 10#${want[i]})); then
      ((10#${have[i]} > 10#${want[i]})) && return 0
      return 1
    fi
  done
  [[ -z $have_pre || $have_pre == "$want_pre" ]] || return 1
}

# A command with a time limit, where `timeout` is there to set one.
limited() { # seconds command...
  if command -v timeout >/dev/null 2>&1; then
    timeout "$@"
  else
    "${@:2}"
  fi
}

# `pulumi plugin install` of the pinned provider with the CLI $1, from its download site;
# fails (saying why) when that site does not answer in time or the plugin is not installed.
plugin_install() { # pulumi-binary
  local out rc=0
  rm -rf "$plugin_dir" "$plugin_dir.lock" "$plugin_dir.partial"
  out=$(limited "$plugin_install_timeout" env -u PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION PULUMI_HOME="$pulumi_home" \
    "$1" plugin install resource kubernetes "v$PULUMI_KUBERNETES_VERSION" 2>&1) || rc=$?
  if ((rc == 0)) && provider_installed; then
    return 0
  fi
  if ((rc == 124)); then
    warn "pulumi plugin install of kubernetes v$PULUMI_KUBERNETES_VERSION had no answer in ${plugin_install_timeout}s;" \
      "building the provider from Go modules"
  elif ((rc != 0)); then
    warn "pulumi plugin install of kubernetes v$PULUMI_KUBERNETES_VERSION failed (exit $rc); building the provider from Go modules"
  else
    warn "pulumi plugin install did not produce $plugin_dir/pulumi-resource-kubernetes; building the provider from Go modules"
  fi
  [[ -z $out ]] || tail -n 20 <<<"$out" | sed "s/^/$KNS_SCRIPT:   /" >&2
  rm -rf "$plugin_dir" "$plugin_dir.lock" "$plugin_dir.partial"
  return 1
}

# --- 1. An installation that is already there -----------------------------------------
# A pulumi on PATH of the pinned major version and at least the pinned version, with the
# language host and exec script next to it, is used as it is (cli, out_dir). Otherwise the
# report says why not (cli_note) and the CLI comes from the build cache (sections 2 and 3),
# as it does when the pulumi on PATH is that cache's.
cli='' out_dir=$bin_dir cli_note=''
if existing=$(command -v pulumi 2>/dev/null) &&
  existing=$(readlink -f "$existing") && existing_dir=$(cd "$(dirname "$existing")" && pwd) &&
  [[ $existing_dir != "$(cd "$bin_dir" 2>/dev/null && pwd)" ]]; then
  existing_ver=$(limited 60 "$existing" version 2>/dev/null || true)
  existing_ver=${existing_ver%%$'\n'*}
  existing_ver=${existing_ver//[[:space:]]/}
  fit=0
  cli_version_fits "$existing_ver" "$PULUMI_VERSION" || fit=$?
  case $fit in
  0)
    if [[ ! -x $existing_dir/pulumi-language-python ]]; then
      cli_note="pulumi $existing_ver in $existing_dir has no pulumi-language-python beside it"
    elif [[ ! -f $existing_dir/pulumi-language-python-exec ]]; then
      cli_note="pulumi $existing_ver in $existing_dir has no pulumi-language-python-exec beside it"
    else
      cli=$existing out_dir=$existing_dir
    fi
    ;;
  1) cli_note="pulumi $existing_ver in $existing_dir is older than v$PULUMI_VERSION" ;;
  2) cli_note="pulumi $existing_ver in $existing_dir is not major version ${PULUMI_VERSION%%.*}" ;;
  *) cli_note="pulumi in $existing_dir answers no version to \`pulumi version\`" ;;
  esac
fi

# --- 2. What is missing from the cache ------------------------------------------------
# One build at a time per cache: a second caller (a test lane, `make up` beside `make test`)
# waits for the first, then finds what it built, instead of building it again beside it.
if ((!plan)); then
  mkdir -p "$tools_root"
  exec 9>"$tools_root/.toolchain.lock"
  if ! flock -n 9; then
    log "waiting for another scripts/toolchain.sh to finish (lock $tools_root/.toolchain.lock) ..."
    flock 9
  fi
fi
need_cli=0 need_host=0 need_exec=0 need_provider_build=0
if [[ -z $cli ]]; then
  cli=$bin_dir/pulumi
  [[ -x $cli && $("$cli" version 2>/dev/null || true) == "v$PULUMI_VERSION" &&
    $(cat "$cli_stamp" 2>/dev/null) == "$CLI_PATCH_REV" ]] || need_cli=1
  if [[ ! -x $bin_dir/pulumi-language-python ]]; then
    need_host=1
  else
    host_kind=$(cat "$host_kind_file" 2>/dev/null || echo upstream)
    if [[ $host_mode != auto && ${host_kind%% *} != "$host_mode" ]]; then
      need_host=1
    elif [[ ${host_kind%% *} == minimal && $host_kind != "minimal $MINIMAL_HOST_REV" ]]; then
      need_host=1 # an older revision of the minimal host
    fi
  fi
  [[ -f $bin_dir/pulumi-language-python-exec ]] || need_exec=1
fi

# Where the provider comes from: the plugin cache; a build of ours not yet installed there;
# `pulumi plugin install` (only when it needs no patch); a build now.
patched=
[[ $PROVIDER_PATCH_REV == none ]] || patched=" (patched)"
if provider_installed; then
  provider_from=cache
elif [[ -x $provider_cache ]]; then
  provider_from=built
elif [[ $PROVIDER_PATCH_REV == none && ${KNS_PLUGIN_INSTALL:-on} != off ]]; then
  provider_from=install
else
  provider_from=build
fi

# The one line that says which way was taken.
report() { # prefix provider-text
  local how=
  if [[ $out_dir != "$bin_dir" ]]; then
    how="pulumi CLI $existing_ver on PATH ($out_dir)"
  else
    how="pulumi CLI v$PULUMI_VERSION built from Go modules (patched) in $bin_dir"
    local notes=
    ((need_cli + need_host + need_exec > 0)) || notes=cached
    [[ -z $cli_note ]] || notes+="${notes:+, }$cli_note"
    [[ -z $notes ]] || how+=" ($notes)"
  fi
  log "$1$how; kubernetes provider v$PULUMI_KUBERNETES_VERSION $2"
}

if ((plan)); then
  case $provider_from in
  cache) report "plan: " "from the plugin cache$patched" ;;
  built) report "plan: " "built from Go modules$patched, cached in $(dirname "$provider_cache")" ;;
  install) report "plan: " "installed with pulumi plugin install (built from Go modules if that fails)" ;;
  build) report "plan: " "built from Go modules$patched" ;;
  esac
  exit 0
fi

# With a CLI at hand, `pulumi plugin install` goes first; a CLI still to be built tries it
# after its build (section 3).
install_note=
if [[ $provider_from == install ]] && ((need_cli == 0)); then
  if plugin_install "$cli"; then
    provider_from=installed
  else
    provider_from=build install_note=" (pulumi plugin install failed)"
  fi
fi
[[ $provider_from != build ]] || need_provider_build=1

# --- 3. Build what is missing ---------------------------------------------------------
if ((need_cli + need_host + need_exec + need_provider_build > 0)); then
  gomod_prepare "the Pulumi toolchain" "$repo_root"
  mkdir -p "$bin_dir" "$(dirname "$provider_cache")"

  if ((need_cli + need_host + need_exec > 0)); then
    mod_download "$PKG_MOD" "v$PULUMI_VERSION" || die "cannot download $PKG_MOD@v$PULUMI_VERSION from the Go module proxy"
    pkg_gomod=$MOD_GOMOD pkg_time=$MOD_TIME pkg_dir=$MOD_DIR
    if [[ $MOD_HASH != - && $MOD_HASH != "$PULUMI_COMMIT" ]]; then
      die "$PKG_MOD@v$PULUMI_VERSION is commit $MOD_HASH, but $versions_file says PULUMI_COMMIT=$PULUMI_COMMIT"
    fi
  fi

  build_cli() {
    log "building pulumi CLI v$PULUMI_VERSION ..."
    # From a writable copy of the pkg module with the CLI patch applied (it must apply
    # cleanly to this exact source), which the wrapper module replaces the published one with.
    local src=$work/pulumi-pkg
    cp -R "$pkg_dir" "$src"
    chmod -R u+w "$src"
    (cd "$src" && git apply --check -p1 "$cli_patch" 2>&1 && git apply -p1 "$cli_patch") >&2 ||
      die "$cli_patch does not apply to $PKG_MOD@v$PULUMI_VERSION: rebase it on that source"
    log "applied $(basename "$cli_patch") ($CLI_PATCH_REV)"
    write_wrapper "$work/pulumi-cli" "$PKG_MOD" "v$PULUMI_VERSION" "$pkg_gomod"
    (cd "$work/pulumi-cli" && go mod edit -replace="$PKG_MOD=$src")
    rm -f "$cli_stamp"
    go_build "$work/pulumi-cli" "$bin_dir/pulumi" "$GO_TAGS" "$CLI_LDFLAGS" "$PKG_MOD/cmd/pulumi"
    printf '%s\n' "$CLI_PATCH_REV" >"$cli_stamp"
  }
  # The CLI, the language host and the provider are independent builds: side by side.
  if ((need_cli)); then
    parallel "pulumi CLI" build_cli
  else
    [[ $out_dir != "$bin_dir" ]] || log "cached pulumi CLI v$PULUMI_VERSION in $bin_dir"
  fi

  if ((need_exec)); then
    mod_download "$SDK_MOD" "v$PULUMI_VERSION" || die "cannot download $SDK_MOD@v$PULUMI_VERSION from the Go module proxy"
    install -m 0755 "$MOD_DIR/python/cmd/pulumi-language-python-exec" "$bin_dir/pulumi-language-python-exec.tmp"
    mv -f "$bin_dir/pulumi-language-python-exec.tmp" "$bin_dir/pulumi-language-python-exec"
    log "copied pulumi-language-python-exec from $SDK_MOD@v$PULUMI_VERSION"
  else
    [[ $out_dir != "$bin_dir" ]] || log "cached pulumi-language-python-exec in $bin_dir"
  fi

  build_host() {
    built_host=
    if [[ $host_mode != minimal ]]; then
      # The host module is untagged: use the pseudo-version of the pulumi commit. Ask the
      # proxy to resolve the commit; if it will not, derive it from the pkg tag's commit time.
      host_ver=
      if out=$(cd "$work" && go list -m -json "$HOST_MOD@$PULUMI_COMMIT" 2>/dev/null); then
        host_ver=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Version"])' <<<"$out")
      elif [[ ${pkg_time:--} != - ]]; then
        host_ver=v3.0.0-$(date -u -d "$pkg_time" +%Y%m%d%H%M%S)-${PULUMI_COMMIT:0:12}
      fi
      log "building pulumi-language-python ($HOST_MOD@$host_ver) ..."
      if [[ -n $host_ver ]] && mod_download "$HOST_MOD" "$host_ver"; then
        write_wrapper "$work/pulumi-language-python" "$HOST_MOD" "$host_ver" "$MOD_GOMOD" \
          "$PKG_MOD=v$PULUMI_VERSION" "$SDK_MOD=v$PULUMI_VERSION"
        go_build "$work/pulumi-language-python" "$bin_dir/pulumi-language-python" "$GO_TAGS" "$CLI_LDFLAGS" "$HOST_MOD"
        echo upstream >"$host_kind_file"
        built_host=upstream
      elif [[ $host_mode == upstream ]]; then
        die "the Go module proxy does not serve $HOST_MOD@${host_ver:-?} (KNS_PYTHON_HOST=upstream)"
      else
        warn "the Go module proxy does not serve $HOST_MOD@${host_ver:-?}; falling back to the minimal Python language host"
      fi
    fi
    if [[ -z $built_host ]]; then
      log "building minimal pulumi-language-python against $SDK_MOD@v$PULUMI_VERSION ..."
      mod_download "$SDK_MOD" "v$PULUMI_VERSION" || die "cannot download $SDK_MOD@v$PULUMI_VERSION from the Go module proxy"
      cp -R "$repo_root/scripts/minimal-host" "$work/kns-python-host"
      (cd "$work/kns-python-host" && go mod edit -require="$SDK_MOD@v$PULUMI_VERSION")
      go_build "$work/kns-python-host" "$bin_dir/pulumi-language-python" "$GO_TAGS" "$CLI_LDFLAGS" .
      echo "minimal $MINIMAL_HOST_REV" >"$host_kind_file"
    fi
    log "built $bin_dir/pulumi-language-python ($(cat "$host_kind_file"))"
  }
  if ((need_host)); then
    parallel "pulumi-language-python" build_host
  else
    [[ $out_dir != "$bin_dir" ]] || log "cached pulumi-language-python ($(cat "$host_kind_file" 2>/dev/null || echo upstream)) in $bin_dir"
  fi

  build_provider() {
    local start=$SECONDS
    log "building pulumi-resource-kubernetes v$PULUMI_KUBERNETES_VERSION ($K8S_MOD@$PULUMI_KUBERNETES_PROVIDER_PSEUDO) ..."
    mod_download "$K8S_MOD" "$PULUMI_KUBERNETES_PROVIDER_PSEUDO" ||
      die "cannot download $K8S_MOD@$PULUMI_KUBERNETES_PROVIDER_PSEUDO from the Go module proxy" \
        "(PULUMI_KUBERNETES_PROVIDER_PSEUDO in $versions_file must be a version the proxy serves)"
    k8s_dir=$MOD_DIR
    # The provider embeds schema-embed.json and terraform-mapping-embed.json, which its own
    # generate.go makes: build from a writable copy of the module. Its replace directives
    # that point into the pulumi-kubernetes repo (../sdk) are dropped, so the published
    # version it requires is used instead.
    src=$work/pulumi-kubernetes-provider
    cp -R "$k8s_dir" "$src"
    chmod -R u+w "$src"
    (cd "$src" && go mod edit -json) | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    if not r["New"].get("Version"):
        print(r["Old"]["Path"])
' | while read -r local_mod; do
      (cd "$src" && go mod edit -dropreplace="$local_mod")
    done
    # The patch must apply cleanly to this exact source, and its own test must pass.
    if [[ $PROVIDER_PATCH_REV != none ]]; then
      (cd "$src" && git apply --check -p1 "$provider_patch" 2>&1 && git apply -p1 "$provider_patch") >&2 ||
        die "$provider_patch does not apply to $K8S_MOD@$PULUMI_KUBERNETES_PROVIDER_PSEUDO: rebase it on that source"
      log "applied $(basename "$provider_patch") ($PROVIDER_PATCH_REV); testing it ..."
      (cd "$src" && GOFLAGS=-mod=mod go test -count=1 -run 'Kns' ./pkg/watcher/) >&2 ||
        die "the test of $provider_patch failed"
    fi
    (cd "$src/cmd/pulumi-resource-kubernetes" && VERSION=$PULUMI_KUBERNETES_VERSION GOFLAGS=-mod=mod go run generate.go)
    (cd "$src" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$provider_cache.tmp" ./cmd/pulumi-resource-kubernetes)
    mv -f "$provider_cache.tmp" "$provider_cache"
    log "built $provider_cache in $((SECONDS - start))s"
  }
  ((need_provider_build == 0)) || parallel "pulumi-resource-kubernetes" build_provider
  parallel_wait

  # The CLI just built tries `pulumi plugin install`; the provider is built if that fails.
  if [[ $provider_from == install ]]; then
    if plugin_install "$cli"; then
      provider_from=installed
    else
      provider_from=build install_note=" (pulumi plugin install failed)"
      parallel "pulumi-resource-kubernetes" build_provider
      parallel_wait
    fi
  fi
fi

# --- 4. Provider into the plugin cache ------------------------------------------------
case $provider_from in
cache) report "" "from the plugin cache$patched" ;;
installed) report "" "installed with pulumi plugin install" ;;
*)
  # An unpatched or differently patched install of the same version goes first.
  rm -rf "$plugin_dir" "$plugin_dir.lock" "$plugin_dir.partial"
  # The CLI finds its home from the account database, not $HOME: name the one checked here.
  PULUMI_HOME=$pulumi_home "$cli" plugin install resource kubernetes "v$PULUMI_KUBERNETES_VERSION" \
    --file "$provider_cache" >&2
  [[ -x $plugin_dir/pulumi-resource-kubernetes ]] ||
    die "pulumi plugin install did not produce $plugin_dir/pulumi-resource-kubernetes"
  printf '%s\n' "$PROVIDER_PATCH_REV" >"$provider_stamp"
  if [[ $provider_from == built ]]; then
    report "" "built from Go modules$patched, cached in $(dirname "$provider_cache")"
  else
    report "" "built from Go modules$patched$install_note"
  fi
  ;;
esac

printf '%s\n' "$out_dir"
