#!/usr/bin/env bash
# Provide the pinned Pulumi toolchain without any download site: the Pulumi CLI, the
# Python language host (with its exec script) and the Kubernetes resource provider, all
# built from Go modules (the Go module proxy is the only network this needs).
#
# Versions come from versions.env at the repository root (KNS_VERSIONS_FILE overrides the
# path). Built binaries are cached under
#   ${KNS_TOOLS_DIR:-$HOME/.cache/kns-platform/tools}/pulumi-<ver>-k8s-<ver>/bin
# and only what is missing is rebuilt. The provider is installed into the Pulumi plugin
# cache (${PULUMI_HOME:-$HOME/.pulumi}/plugins) unless that exact version is there.
#
# Progress goes to stderr; the only thing printed on stdout is the absolute bin directory:
#   PATH="$(scripts/toolchain.sh):$PATH"
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

# Nothing this script runs may reach for pulumi.com or a plugin download site.
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true

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
provider_patch=$repo_root/scripts/patches/pulumi-kubernetes-provider.patch
[[ -r $provider_patch ]] || die "cannot read the provider patch $provider_patch"
PROVIDER_PATCH_REV=$(sha256sum "$provider_patch" | cut -c1-16)

key_dir=$tools_root/pulumi-$PULUMI_VERSION-k8s-$PULUMI_KUBERNETES_VERSION
bin_dir=$key_dir/bin
provider_cache=$key_dir/provider-$PROVIDER_PATCH_REV/pulumi-resource-kubernetes
host_kind_file=$bin_dir/.pulumi-language-python.kind

pulumi_home=${PULUMI_HOME:-$HOME/.pulumi}
plugin_dir=$pulumi_home/plugins/resource-kubernetes-v$PULUMI_KUBERNETES_VERSION

provider_stamp=$plugin_dir/.kns-provider-patch

provider_installed() {
  [[ -x $plugin_dir/pulumi-resource-kubernetes && ! -e $plugin_dir.partial &&
    $(cat "$provider_stamp" 2>/dev/null) == "$PROVIDER_PATCH_REV" ]]
}

# --- 1. An installation that is already there -----------------------------------------
# A pulumi on PATH at the pinned version with the language host and exec script next to
# it, and the provider in the plugin cache at the exact version: use it as it is.
if existing=$(command -v pulumi 2>/dev/null); then
  existing_dir=$(cd "$(dirname "$(readlink -f "$existing")")" && pwd)
  if [[ -x $existing_dir/pulumi-language-python && -f $existing_dir/pulumi-language-python-exec ]] &&
    provider_installed &&
    [[ $("$existing" version 2>/dev/null || true) == "v$PULUMI_VERSION" ]]; then
    log "using pulumi v$PULUMI_VERSION already on PATH in $existing_dir (kubernetes v$PULUMI_KUBERNETES_VERSION installed)"
    printf '%s\n' "$existing_dir"
    exit 0
  fi
fi

# --- 2. What is missing from the cache ------------------------------------------------
need_cli=0 need_host=0 need_exec=0 need_provider_build=0
[[ -x $bin_dir/pulumi && $("$bin_dir/pulumi" version 2>/dev/null || true) == "v$PULUMI_VERSION" ]] || need_cli=1
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
if ! provider_installed && [[ ! -x $provider_cache ]]; then need_provider_build=1; fi

# --- 3. Build what is missing ---------------------------------------------------------
if ((need_cli + need_host + need_exec + need_provider_build > 0)); then
  gomod_prepare "the Pulumi toolchain" "$repo_root"
  mkdir -p "$bin_dir" "$(dirname "$provider_cache")"

  if ((need_cli + need_host + need_exec > 0)); then
    mod_download "$PKG_MOD" "v$PULUMI_VERSION" || die "cannot download $PKG_MOD@v$PULUMI_VERSION from the Go module proxy"
    pkg_gomod=$MOD_GOMOD pkg_time=$MOD_TIME
    if [[ $MOD_HASH != - && $MOD_HASH != "$PULUMI_COMMIT" ]]; then
      die "$PKG_MOD@v$PULUMI_VERSION is commit $MOD_HASH, but $versions_file says PULUMI_COMMIT=$PULUMI_COMMIT"
    fi
  fi

  build_cli() {
    log "building pulumi CLI v$PULUMI_VERSION ..."
    write_wrapper "$work/pulumi-cli" "$PKG_MOD" "v$PULUMI_VERSION" "$pkg_gomod"
    go_build "$work/pulumi-cli" "$bin_dir/pulumi" "$GO_TAGS" "$CLI_LDFLAGS" "$PKG_MOD/cmd/pulumi"
  }
  # The CLI, the language host and the provider are independent builds: side by side.
  if ((need_cli)); then
    parallel "pulumi CLI" build_cli
  else
    log "cached pulumi CLI v$PULUMI_VERSION in $bin_dir"
  fi

  if ((need_exec)); then
    mod_download "$SDK_MOD" "v$PULUMI_VERSION" || die "cannot download $SDK_MOD@v$PULUMI_VERSION from the Go module proxy"
    install -m 0755 "$MOD_DIR/python/cmd/pulumi-language-python-exec" "$bin_dir/pulumi-language-python-exec.tmp"
    mv -f "$bin_dir/pulumi-language-python-exec.tmp" "$bin_dir/pulumi-language-python-exec"
    log "copied pulumi-language-python-exec from $SDK_MOD@v$PULUMI_VERSION"
  else
    log "cached pulumi-language-python-exec in $bin_dir"
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
    log "cached pulumi-language-python ($(cat "$host_kind_file" 2>/dev/null || echo upstream)) in $bin_dir"
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
    (cd "$src" && git apply --check -p1 "$provider_patch" 2>&1 && git apply -p1 "$provider_patch") >&2 ||
      die "$provider_patch does not apply to $K8S_MOD@$PULUMI_KUBERNETES_PROVIDER_PSEUDO: rebase it on that source"
    log "applied $(basename "$provider_patch") ($PROVIDER_PATCH_REV); testing it ..."
    (cd "$src" && GOFLAGS=-mod=mod go test -count=1 -run 'Kns' ./pkg/watcher/) >&2 ||
      die "the test of $provider_patch failed"
    (cd "$src/cmd/pulumi-resource-kubernetes" && VERSION=$PULUMI_KUBERNETES_VERSION GOFLAGS=-mod=mod go run generate.go)
    (cd "$src" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$provider_cache.tmp" ./cmd/pulumi-resource-kubernetes)
    mv -f "$provider_cache.tmp" "$provider_cache"
    log "built $provider_cache in $((SECONDS - start))s"
  }
  ((need_provider_build == 0)) || parallel "pulumi-resource-kubernetes" build_provider
  parallel_wait
fi

[[ -n ${work:-} ]] || log "cached pulumi CLI v$PULUMI_VERSION, pulumi-language-python and exec script in $bin_dir"

# --- 4. Provider into the plugin cache ------------------------------------------------
if provider_installed; then
  log "cached kubernetes provider v$PULUMI_KUBERNETES_VERSION in $plugin_dir"
else
  log "installing kubernetes provider v$PULUMI_KUBERNETES_VERSION into $pulumi_home/plugins ..."
  # An unpatched or differently patched install of the same version goes first.
  rm -rf "$plugin_dir" "$plugin_dir.lock" "$plugin_dir.partial"
  # The CLI finds its home from the account database, not $HOME: name the one checked here.
  PULUMI_HOME=$pulumi_home "$bin_dir/pulumi" plugin install resource kubernetes "v$PULUMI_KUBERNETES_VERSION" \
    --file "$provider_cache" >&2
  [[ -x $plugin_dir/pulumi-resource-kubernetes ]] ||
    die "pulumi plugin install did not produce $plugin_dir/pulumi-resource-kubernetes"
  printf '%s\n' "$PROVIDER_PATCH_REV" >"$provider_stamp"
fi

printf '%s\n' "$bin_dir"
