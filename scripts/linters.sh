#!/usr/bin/env bash
# Build the Kubernetes manifest linters from Go modules (the Go module proxy is the only
# network this needs): kube-score (github.com/zegl/kube-score, best-practice checks) and
# kubeconform (github.com/yannh/kubeconform, validation against the API's schemas), plus
# offline strict JSON schemas for kubeconform. tests/test_manifest_lint.py runs both on
# the rendered stacks. And tools/netpol-check, cyclonus's NetworkPolicy matcher
# (github.com/mattfenwick/cyclonus) behind a JSON door, with which
# tests/test_network_matrix.py checks the program's NetworkPolicies offline.
#
# Versions come from versions.env at the repository root (KNS_VERSIONS_FILE overrides the
# path): KUBE_SCORE_VERSION, KUBECONFORM_VERSION and KUBERNETES_VERSION (the schemas');
# KNS_KUBE_SCORE_VERSION, KNS_KUBECONFORM_VERSION and KNS_KUBERNETES_VERSION override them.
# Cached under ${KNS_TOOLS_DIR:-$HOME/.cache/kns-platform/tools}, only what is missing is made:
#   kube-score-<ver>-kubeconform-<ver>/bin/{kube-score,kubeconform}
#   kubeconform-schemas-<k8s ver>/<kind>[-<group>]-<version>.json
#   netpol-check-cyclonus-<ver>-<digest of tools/netpol-check>/bin/netpol-check
#
# The schemas are derived from the OpenAPI document of the Kubernetes we run, shipped in
# its own module (k8s.io/kubernetes@v<KUBERNETES_VERSION>, api/openapi-spec/swagger.json,
# which scripts/cluster-build.sh downloads too): offline, and exactly that version. The
# usual sources are not: kubeconform's default registry is a download from GitHub, and the
# PyPI kubernetes-validate package carries only the versions released before it (it may
# not have 1.36). scripts/openapi2jsonschema.py converts them into kubeconform's
# standalone-strict layout (inlined $refs, additionalProperties: false, kind/apiVersion
# enums); the directory is remade when that script changes (its sha256 is in .converter).
#
# Progress goes to stderr; stdout is three lines, the absolute bin directory, the absolute
# schema directory, then netpol-check's bin directory:
#   { read -r bin; read -r schemas; } < <(bash scripts/linters.sh)
#   "$bin/kubeconform" -strict -summary \
#     -schema-location "$schemas/{{.ResourceKind}}{{.KindSuffix}}.json" build/manifests/dev
#   "$bin/kube-score" score --output-format ci --kubernetes-version v1.36 build/manifests/dev/*/*.yaml
# KNS_BUILD_NICE (default 10) is the niceness of the go builds and the conversion.
set -euo pipefail

KNS_SCRIPT=linters
export KNS_BUILD_NICE=${KNS_BUILD_NICE:-10}
# shellcheck source=lib/gomod.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/gomod.sh"

load_versions
KUBE_SCORE_VERSION=${KNS_KUBE_SCORE_VERSION:-${KUBE_SCORE_VERSION:-}}
KUBECONFORM_VERSION=${KNS_KUBECONFORM_VERSION:-${KUBECONFORM_VERSION:-}}
KUBERNETES_VERSION=${KNS_KUBERNETES_VERSION:-${KUBERNETES_VERSION:-}}
CYCLONUS_VERSION=${KNS_CYCLONUS_VERSION:-${CYCLONUS_VERSION:-}}
for var in KUBE_SCORE_VERSION KUBECONFORM_VERSION KUBERNETES_VERSION CYCLONUS_VERSION; do
  [[ ${!var} =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$var must be set (x.y.z) in $versions_file or KNS_$var (got '${!var}')"
done

bin_dir=$tools_root/kube-score-$KUBE_SCORE_VERSION-kubeconform-$KUBECONFORM_VERSION/bin
schema_dir=$tools_root/kubeconform-schemas-$KUBERNETES_VERSION
converter=$repo_root/scripts/openapi2jsonschema.py
converter_sum=$(sha256sum "$converter" | cut -d' ' -f1)
netpol_src=$repo_root/tools/netpol-check
grep -q "github.com/mattfenwick/cyclonus v$CYCLONUS_VERSION\$" "$netpol_src/go.mod" ||
  die "tools/netpol-check/go.mod does not require github.com/mattfenwick/cyclonus v$CYCLONUS_VERSION (versions.env)"
netpol_sum=$(cat "$netpol_src/main.go" "$netpol_src/go.mod" "$netpol_src/go.sum" | sha256sum | cut -c1-12)
netpol_dir=$tools_root/netpol-check-cyclonus-$CYCLONUS_VERSION-$netpol_sum/bin

KUBE_SCORE_MOD=github.com/zegl/kube-score
KUBECONFORM_MOD=github.com/yannh/kubeconform
K8S_MOD=k8s.io/kubernetes

missing=()
[[ -x $bin_dir/kube-score ]] || missing+=(kube-score)
[[ -x $bin_dir/kubeconform ]] || missing+=(kubeconform)
[[ -r $schema_dir/.converter && $(<"$schema_dir/.converter") == "$converter_sum" ]] || missing+=(schemas)
[[ -x $netpol_dir/netpol-check ]] || missing+=(netpol-check)

if ((${#missing[@]} == 0)); then
  log "cached kube-score v$KUBE_SCORE_VERSION, kubeconform v$KUBECONFORM_VERSION in $bin_dir; schemas of k8s v$KUBERNETES_VERSION in $schema_dir; netpol-check in $netpol_dir"
  printf '%s\n' "$bin_dir" "$schema_dir" "$netpol_dir"
  exit 0
fi

gomod_prepare "${missing[*]}" "$repo_root"
log "to make: ${missing[*]}"
mkdir -p "$bin_dir"
need() { [[ " ${missing[*]} " == *" $1 "* ]]; }

# Built inside a wrapper module, the binaries would say "development": stamp the version
# (and for kube-score commit and date) into the main packages' variables, as the upstream
# release builds (goreleaser) do.
if need kube-score; then
  mod_download "$KUBE_SCORE_MOD" "v$KUBE_SCORE_VERSION" ||
    die "cannot download $KUBE_SCORE_MOD@v$KUBE_SCORE_VERSION from the Go module proxy (try KNS_KUBE_SCORE_VERSION=<another 1.x.y>)"
  write_wrapper "$work/kube-score" "$KUBE_SCORE_MOD" "v$KUBE_SCORE_VERSION" "$MOD_GOMOD"
  commit=$MOD_HASH date=$MOD_TIME # "-" when the proxy does not say
  [[ $commit != - ]] || commit=N/A
  [[ $date != - ]] || date=N/A
  go_build "$work/kube-score" "$bin_dir/kube-score" "" \
    "-s -w -X main.version=$KUBE_SCORE_VERSION -X main.commit=$commit -X main.date=$date" \
    "$KUBE_SCORE_MOD/cmd/kube-score"
fi

if need kubeconform; then
  mod_download "$KUBECONFORM_MOD" "v$KUBECONFORM_VERSION" ||
    die "cannot download $KUBECONFORM_MOD@v$KUBECONFORM_VERSION from the Go module proxy (try KNS_KUBECONFORM_VERSION=<another 0.x.y>)"
  write_wrapper "$work/kubeconform" "$KUBECONFORM_MOD" "v$KUBECONFORM_VERSION" "$MOD_GOMOD"
  go_build "$work/kubeconform" "$bin_dir/kubeconform" "" \
    "-s -w -X main.version=v$KUBECONFORM_VERSION" "$KUBECONFORM_MOD/cmd/kubeconform"
fi

if need schemas; then
  mod_download "$K8S_MOD" "v$KUBERNETES_VERSION" ||
    die "cannot download $K8S_MOD@v$KUBERNETES_VERSION from the Go module proxy (try KNS_KUBERNETES_VERSION=<another 1.x.y>)"
  swagger=$MOD_DIR/api/openapi-spec/swagger.json
  [[ -r $swagger ]] || die "$K8S_MOD@v$KUBERNETES_VERSION has no api/openapi-spec/swagger.json"
  # Written beside the cache entry, then swapped in whole: a reader never sees half of it.
  mkdir -p "$tools_root"
  fresh=$(mktemp -d "$schema_dir.new.XXXXXX")
  ${KNS_BUILD_NICE:+nice -n "$KNS_BUILD_NICE"} python3 "$converter" "$swagger" "$fresh" ||
    { rm -rf "$fresh"; die "converting $swagger failed"; }
  printf '%s\n' "$converter_sum" >"$fresh/.converter"
  chmod 755 "$fresh"
  old=$schema_dir.old.$$
  [[ ! -e $schema_dir ]] || mv -T "$schema_dir" "$old"
  mv -T "$fresh" "$schema_dir"
  rm -rf "$old"
  log "schemas of k8s v$KUBERNETES_VERSION in $schema_dir"
fi

if need netpol-check; then
  # The module as committed (its go.sum pins every dependency), built outside the repository.
  mkdir -p "$netpol_dir" "$work/netpol-check"
  cp "$netpol_src/main.go" "$netpol_src/go.mod" "$netpol_src/go.sum" "$work/netpol-check/"
  go_build "$work/netpol-check" "$netpol_dir/netpol-check" "" "-s -w" .
fi

printf '%s\n' "$bin_dir" "$schema_dir" "$netpol_dir"
