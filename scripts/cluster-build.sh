#!/usr/bin/env bash
# Build the binaries of a local Kubernetes control plane from Go modules (the Go module
# proxy is the only network this needs): kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3) and
# kwok (sigs.k8s.io/kwok), plus the kwok stage documents the cluster scripts use, and
# Karpenter's kwok cloud provider (sigs.k8s.io/karpenter, main package ./kwok) with the
# CRDs of the same module (NodePool, NodeClaim, KWOKNodeClass), and Kueue's manager
# (sigs.k8s.io/kueue, main package ./cmd/kueue) with its CRDs and webhook manifests (only
# with KNS_BUILD_KUEUE=1, for scripts/kueue-process.sh):
# docs/testing.md.
#
# Versions come from versions.env at the repository root (KNS_VERSIONS_FILE overrides the
# path); KNS_KUBERNETES_VERSION, KNS_ETCD_VERSION, KNS_KWOK_VERSION, KNS_KARPENTER_VERSION
# and KNS_KUEUE_VERSION override single versions (for a module proxy that refuses a pinned
# one). Binaries are cached under
#   ${KNS_TOOLS_DIR:-$HOME/.cache/kns-platform/tools}/k8s-<ver>-etcd-<ver>-kwok-<ver>/bin
# (kwok stages in ../share/kwok-stages.yaml; karpenter-kwok beside the others, its CRDs and
# version stamp in ../share/karpenter/; kueue likewise, its CRDs, version stamp,
# webhook-manifests.yaml (the module's config/components/webhook/manifests.yaml) and
# crd-patches/ (the conversion-webhook patches of config/components/crd) in
# ../share/kueue/) and only what is missing is rebuilt.
#
# Progress goes to stderr; the only thing printed on stdout is the absolute bin directory:
#   PATH="$(scripts/cluster-build.sh):$PATH"
# KNS_BUILD_NICE (default 10) is the niceness of the go builds.
set -euo pipefail

KNS_SCRIPT=cluster-build
export KNS_BUILD_NICE=${KNS_BUILD_NICE:-10}
# shellcheck source=lib/gomod.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/gomod.sh"

load_versions
KUBERNETES_VERSION=${KNS_KUBERNETES_VERSION:-${KUBERNETES_VERSION:-}}
ETCD_VERSION=${KNS_ETCD_VERSION:-${ETCD_VERSION:-}}
KWOK_VERSION=${KNS_KWOK_VERSION:-${KWOK_VERSION:-}}
KARPENTER_VERSION=${KNS_KARPENTER_VERSION:-${KARPENTER_VERSION:-}}
KUEUE_VERSION=${KNS_KUEUE_VERSION:-${KUEUE_VERSION:-}}
for var in KUBERNETES_VERSION ETCD_VERSION KWOK_VERSION KARPENTER_VERSION KUEUE_VERSION; do
  [[ ${!var} =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$var must be set (x.y.z) in $versions_file or KNS_$var (got '${!var}')"
done
k8s_major=${KUBERNETES_VERSION%%.*}
k8s_minor=${KUBERNETES_VERSION#*.}
k8s_minor=${k8s_minor%%.*}
staging_version=v0.${KUBERNETES_VERSION#*.} # k8s.io/<staging> modules: v0.<minor>.<patch>

key_dir=$tools_root/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION
bin_dir=$key_dir/bin
stages_file=$key_dir/share/kwok-stages.yaml
karpenter_share=$key_dir/share/karpenter
kueue_share=$key_dir/share/kueue

K8S_MOD=k8s.io/kubernetes
ETCD_MOD=go.etcd.io/etcd/server/v3
KWOK_MOD=sigs.k8s.io/kwok
KARPENTER_MOD=sigs.k8s.io/karpenter
KUEUE_MOD=sigs.k8s.io/kueue
# CRDs the kwok provider needs, from the module (charts/crds carries kwok's label rules).
karpenter_crds=(kwok/charts/crds/karpenter.sh_nodepools.yaml kwok/charts/crds/karpenter.sh_nodeclaims.yaml
  kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml)
k8s_components=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

# One build at a time per cache (as scripts/toolchain.sh): a second caller (another test
# lane) waits for the first, then finds what it built, instead of building it beside it.
mkdir -p "$tools_root"
exec 9>"$tools_root/.cluster-build.lock"
if ! flock -n 9; then
  log "waiting for another scripts/cluster-build.sh to finish (lock $tools_root/.cluster-build.lock) ..."
  flock 9
fi

missing=()
for c in "${k8s_components[@]}" etcd kwok; do
  [[ -x $bin_dir/$c ]] || missing+=("$c")
done
[[ -s $stages_file ]] || missing+=(kwok-stages)
# kwok's own stage code as a command (scripts/kwok/stage-delay), keyed by its source's hash.
stage_delay_src=$repo_root/scripts/kwok/stage-delay/main.go
stage_delay_stamp=$key_dir/share/kns-stage-delay.sha256
[[ -x $bin_dir/kns-stage-delay && $(cat "$stage_delay_stamp" 2>/dev/null) == "$(sha256sum <"$stage_delay_src")" ]] ||
  missing+=(kns-stage-delay)
# The binary's name carries no version: a stamp says which one was built.
[[ -x $bin_dir/karpenter-kwok && $(cat "$karpenter_share/version" 2>/dev/null) == "$KARPENTER_VERSION" ]] ||
  missing+=(karpenter-kwok)
# The stamp is written last: it vouches for the CRDs and webhook manifests beside it too.
# Kueue is built on request (KNS_BUILD_KUEUE=1: .ci/run, and kns_testing.kueue for the queueing
# e2e): ten cold minutes.
if [[ ${KNS_BUILD_KUEUE:-0} == 1 ]]; then
  [[ -x $bin_dir/kueue && $(cat "$kueue_share/version" 2>/dev/null) == "$KUEUE_VERSION" ]] ||
    missing+=(kueue)
fi

if ((${#missing[@]} == 0)); then
  log "cached k8s v$KUBERNETES_VERSION, etcd v$ETCD_VERSION, kwok v$KWOK_VERSION, karpenter v$KARPENTER_VERSION$([[ ${KNS_BUILD_KUEUE:-0} != 1 ]] || printf ', kueue v%s' "$KUEUE_VERSION") in $bin_dir"
  printf '%s\n' "$bin_dir"
  exit 0
fi

gomod_prepare "${missing[*]}" "$repo_root"
log "to build: ${missing[*]} (into $bin_dir)"
mkdir -p "$bin_dir" "$(dirname "$stages_file")"
nice_cmd=(nice -n "${KNS_BUILD_NICE:-10}")

need() { [[ " ${missing[*]} " == *" $1 "* ]]; }

# --- Fetch the modules first, so a version the proxy refuses fails before any build -----
need_k8s=0
if need kube-apiserver || need kube-controller-manager || need kube-scheduler || need kubectl; then
  need_k8s=1
  mod_download "$K8S_MOD" "v$KUBERNETES_VERSION" ||
    die "cannot download $K8S_MOD@v$KUBERNETES_VERSION from the Go module proxy (try KNS_KUBERNETES_VERSION=<another 1.x.y>)"
  k8s_gomod=$MOD_GOMOD
fi
if need etcd; then
  mod_download "$ETCD_MOD" "v$ETCD_VERSION" ||
    die "cannot download $ETCD_MOD@v$ETCD_VERSION from the Go module proxy (try KNS_ETCD_VERSION=<another 3.x.y>)"
  etcd_gomod=$MOD_GOMOD
fi
if need kwok || need kwok-stages || need kns-stage-delay; then
  mod_download "$KWOK_MOD" "v$KWOK_VERSION" ||
    die "cannot download $KWOK_MOD@v$KWOK_VERSION from the Go module proxy (try KNS_KWOK_VERSION=<another 0.x.y>)"
  kwok_dir=$MOD_DIR
fi
if need karpenter-kwok; then
  mod_download "$KARPENTER_MOD" "v$KARPENTER_VERSION" ||
    die "cannot download $KARPENTER_MOD@v$KARPENTER_VERSION from the Go module proxy (try KNS_KARPENTER_VERSION=<another 1.x.y>)"
  karpenter_dir=$MOD_DIR
fi
if need kueue; then
  mod_download "$KUEUE_MOD" "v$KUEUE_VERSION" ||
    die "cannot download $KUEUE_MOD@v$KUEUE_VERSION from the Go module proxy (try KNS_KUEUE_VERSION=<another 0.x.y>)"
  kueue_dir=$MOD_DIR kueue_commit=$MOD_HASH
fi

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl ------
if ((need_k8s)); then
  # Every k8s.io/<staging> module the go.mod replaces with ./staging/... is published as
  # v0.<minor>.<patch>: pin them all.
  pins=()
  while read -r staged; do
    pins+=("$staged=$staging_version")
  done < <((cd "$work" && go mod edit -json "$k8s_gomod") | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    if not r["New"].get("Version") and r["New"]["Path"].startswith("./staging/"):
        print(r["Old"]["Path"])')
  write_wrapper "$work/kubernetes" "$K8S_MOD" "v$KUBERNETES_VERSION" "$k8s_gomod" "${pins[@]}"
  build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  k8s_ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ldflags+=" -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=$k8s_major -X $pkg.gitMinor=$k8s_minor"
    k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  # One `go build` of every missing component: the packages they share are compiled once and
  # the links run side by side.
  build_k8s() {
    local c pkgs=() start=$SECONDS
    for c in "${k8s_components[@]}"; do
      need "$c" && pkgs+=("$K8S_MOD/cmd/$c")
    done
    log "building ${pkgs[*]##*/} ($K8S_MOD@v$KUBERNETES_VERSION) ..."
    rm -rf "$bin_dir/.k8s.tmp"
    (cd "$work/kubernetes" && GOFLAGS=-mod=mod "${nice_cmd[@]}" go build -trimpath -tags notest,grpcnotrace \
      -ldflags "$k8s_ldflags" -o "$bin_dir/.k8s.tmp/" "${pkgs[@]}") || die "go build of ${pkgs[*]} failed"
    for c in "${pkgs[@]##*/}"; do
      mv -f "$bin_dir/.k8s.tmp/$c" "$bin_dir/$c"
    done
    rm -rf "$bin_dir/.k8s.tmp"
    log "built ${pkgs[*]##*/} in $((SECONDS - start))s"
  }
  parallel kubernetes build_k8s
fi

# --- etcd ------------------------------------------------------------------------------
# Each of the following is independent of the others: side by side (scripts/lib/gomod.sh).
if need etcd; then
  # server/v3 replaces its sibling modules (api, client/pkg, client/v3, pkg) with ../...:
  # use the published ones of the same version.
  write_wrapper "$work/etcd" "$ETCD_MOD" "v$ETCD_VERSION" "$etcd_gomod" \
    "go.etcd.io/etcd/api/v3=v$ETCD_VERSION" "go.etcd.io/etcd/client/pkg/v3=v$ETCD_VERSION" \
    "go.etcd.io/etcd/client/v3=v$ETCD_VERSION" "go.etcd.io/etcd/pkg/v3=v$ETCD_VERSION"
  parallel etcd go_build "$work/etcd" "$bin_dir/etcd" "" "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION" "$ETCD_MOD"
fi

# --- kwok ------------------------------------------------------------------------------
build_kwok() {
  if need kwok; then
    start=$SECONDS
    log "building kwok ($KWOK_MOD/cmd/kwok@v$KWOK_VERSION) ..."
    mkdir -p "$work/gobin"
    (cd "$work" && GOBIN=$work/gobin "${nice_cmd[@]}" go install -trimpath -ldflags "-s -w" "$KWOK_MOD/cmd/kwok@v$KWOK_VERSION") ||
      die "go install $KWOK_MOD/cmd/kwok@v$KWOK_VERSION failed"
    mv -f "$work/gobin/kwok" "$bin_dir/kwok"
    log "built $bin_dir/kwok in $((SECONDS - start))s"
  fi
  # Standalone kwok has no stages: collect the ones the cluster needs from the module.
  stage_dir=$kwok_dir/kustomize/stage
  sources=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml)
  {
    printf '# kwok stages from %s@v%s kustomize/stage (written by scripts/cluster-build.sh)\n' "$KWOK_MOD" "$KWOK_VERSION"
    for s in "${sources[@]}"; do
      [[ -r $stage_dir/$s ]] || die "$KWOK_MOD@v$KWOK_VERSION has no kustomize/stage/$s"
      printf -- '---\n# %s\n' "$s"
      sed '/^---$/d' "$stage_dir/$s"
      echo
    done
  } >"$stages_file.tmp"
  mv -f "$stages_file.tmp" "$stages_file"
  log "wrote $stages_file"
}

# --- kns-stage-delay: kwok's stage code on given pods (tests/test_stage_vs_wait.py) ---------
build_stage_delay() {
  # Inside a copy of the kwok module: its go.mod and go.sum apply, so it is kwok's own code.
  cp -r "$kwok_dir" "$work/kwok-stage-delay"
  chmod -R u+w "$work/kwok-stage-delay"
  mkdir -p "$work/kwok-stage-delay/cmd/kns-stage-delay"
  cp "$stage_delay_src" "$work/kwok-stage-delay/cmd/kns-stage-delay/main.go"
  go_build "$work/kwok-stage-delay" "$bin_dir/kns-stage-delay" "" "-s -w" ./cmd/kns-stage-delay
  mkdir -p "$(dirname "$stage_delay_stamp")"
  sha256sum <"$stage_delay_src" >"$stage_delay_stamp"
}
# kns-stage-delay is built from kwok's module with kwok's requirements: after kwok, in the same
# job, it compiles little more than its main package; side by side both compiled every
# package they share (bench/cold_builds.py --only kwok,kns-stage-delay: 191 s and 361 CPU s
# in sequence against 267 s and 504 CPU s side by side; docs/benchmarks.md section 15).
build_kwok_and_stage_delay() {
  if need kwok || need kwok-stages; then
    build_kwok
  fi
  if need kns-stage-delay; then
    build_stage_delay
  fi
}
if need kwok || need kwok-stages || need kns-stage-delay; then
  parallel "kwok, kns-stage-delay" build_kwok_and_stage_delay
fi

# --- Karpenter's kwok cloud provider -------------------------------------------------------
build_karpenter() {
  # The module is its own main module (its replace directives apply): build inside a copy.
  cp -r "$karpenter_dir" "$work/karpenter"
  chmod -R u+w "$work/karpenter"
  go_build "$work/karpenter" "$bin_dir/karpenter-kwok" "" "-s -w" ./kwok
  rm -rf "$karpenter_share"
  mkdir -p "$karpenter_share/crds"
  for crd in "${karpenter_crds[@]}"; do
    [[ -r $karpenter_dir/$crd ]] || die "$KARPENTER_MOD@v$KARPENTER_VERSION has no $crd"
    cp "$karpenter_dir/$crd" "$karpenter_share/crds/"
  done
  chmod -R u+w "$karpenter_share"
  printf '%s\n' "$KARPENTER_VERSION" >"$karpenter_share/version"
  log "wrote the Karpenter CRDs to $karpenter_share/crds"
}
need karpenter-kwok && parallel karpenter-kwok build_karpenter

# --- Kueue's manager -----------------------------------------------------------------------
build_kueue() {
  # Built inside a copy of the module: its own go.mod and go.sum apply (from a wrapper
  # module the checksum of sigs.k8s.io/scheduler-library is missing). The version variables
  # are the ones upstream's Makefile stamps.
  kueue_webhooks=config/components/webhook/manifests.yaml
  [[ -r $kueue_dir/$kueue_webhooks ]] || die "$KUEUE_MOD@v$KUEUE_VERSION has no $kueue_webhooks"
  compgen -G "$kueue_dir/config/components/crd/bases/*.yaml" >/dev/null ||
    die "$KUEUE_MOD@v$KUEUE_VERSION has no config/components/crd/bases/*.yaml"
  cp -r "$kueue_dir" "$work/kueue"
  chmod -R u+w "$work/kueue"
  [[ $kueue_commit != - ]] || kueue_commit=
  kueue_ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=v$KUEUE_VERSION"
  kueue_ldflags+=" -X sigs.k8s.io/kueue/pkg/version.GitCommit=$kueue_commit"
  kueue_ldflags+=" -X sigs.k8s.io/kueue/pkg/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  go_build "$work/kueue" "$bin_dir/kueue" "" "$kueue_ldflags" ./cmd/kueue
  rm -rf "$kueue_share"
  mkdir -p "$kueue_share/crds"
  cp "$kueue_dir"/config/components/crd/bases/*.yaml "$kueue_share/crds/"
  cp "$kueue_dir/$kueue_webhooks" "$kueue_share/webhook-manifests.yaml"
  # Which CRDs upstream serves through the conversion webhook: crd/kustomization.yaml's
  # patches (scripts/kueue-process.sh reads them).
  mkdir -p "$kueue_share/crd-patches"
  cp "$kueue_dir/config/components/crd/kustomization.yaml" "$kueue_share/crd-patches/"
  cp "$kueue_dir"/config/components/crd/patches/webhook_in_*.yaml "$kueue_share/crd-patches/"
  chmod -R u+w "$kueue_share"
  printf '%s\n' "$KUEUE_VERSION" >"$kueue_share/version"
  log "wrote the Kueue CRDs and webhook manifests to $kueue_share"
}
need kueue && parallel kueue build_kueue
parallel_wait

printf '%s\n' "$bin_dir"
