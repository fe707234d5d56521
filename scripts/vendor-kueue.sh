#!/usr/bin/env bash
# Vendor Kueue's install manifests, for the program's `install: true` (it installs Kueue
# from them; nothing is downloaded when it runs):
#   scripts/vendor-kueue.sh            write vendor/kueue/v<KUEUE_VERSION>/{manifests.yaml,README.md}
#   scripts/vendor-kueue.sh --check    make them again elsewhere and compare (exit 1 if they differ)
#
# manifests.yaml is exactly upstream's install, made as its release does (Makefile targets
# prepare-manifests and artifacts): in the module sigs.k8s.io/kueue@v<KUEUE_VERSION> (Go
# module proxy), `kustomize edit set image controller=registry.k8s.io/kueue/kueue:v<ver>` in
# config/components/manager, then `kustomize build config/default`: the CRDs, namespace
# kueue-system, RBAC, the controller Deployment, services, the webhook configurations, the
# visibility APIServices, and Kueue's internal certificate management (the manager makes
# its own webhook certificate and injects the CA; no cert-manager). README.md says how it
# was made and its sha256.
#
# kustomize is built from its Go module (sigs.k8s.io/kustomize/kustomize/v5 at
# KUSTOMIZE_VERSION, versions.env) and cached under
#   ${KNS_TOOLS_DIR:-$HOME/.cache/kns-platform/tools}/kustomize-<ver>/bin/kustomize
# KNS_KUEUE_VERSION and KNS_KUSTOMIZE_VERSION override the versions; KNS_BUILD_NICE
# (default 10) is the niceness of the go build. Progress goes to stderr; stdout is the
# output directory (--check: nothing).
set -euo pipefail

KNS_SCRIPT=vendor-kueue
export KNS_BUILD_NICE=${KNS_BUILD_NICE:-10}
# shellcheck source=lib/gomod.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/gomod.sh"

check=0
case ${1:-} in
  "") ;;
  --check) check=1 ;;
  *) die "usage: scripts/vendor-kueue.sh [--check]" ;;
esac
load_versions
KUEUE_VERSION=${KNS_KUEUE_VERSION:-${KUEUE_VERSION:-}}
KUSTOMIZE_VERSION=${KNS_KUSTOMIZE_VERSION:-${KUSTOMIZE_VERSION:-}}
for var in KUEUE_VERSION KUSTOMIZE_VERSION; do
  [[ ${!var} =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$var must be set (x.y.z) in $versions_file or KNS_$var (got '${!var}')"
done
KUEUE_MOD=sigs.k8s.io/kueue
KUSTOMIZE_MOD=sigs.k8s.io/kustomize/kustomize/v5
image=registry.k8s.io/kueue/kueue:v$KUEUE_VERSION
out_dir=$repo_root/vendor/kueue/v$KUEUE_VERSION
kustomize_bin=$tools_root/kustomize-$KUSTOMIZE_VERSION/bin/kustomize

gomod_prepare "kustomize and the Kueue manifests" "$repo_root"

# --- kustomize -----------------------------------------------------------------------------------
if [[ ! -x $kustomize_bin ]]; then
  start=$SECONDS
  log "building kustomize ($KUSTOMIZE_MOD@v$KUSTOMIZE_VERSION) ..."
  mkdir -p "$work/gobin" "$(dirname "$kustomize_bin")"
  (cd "$work" && GOBIN=$work/gobin nice -n "$KNS_BUILD_NICE" go install -trimpath -ldflags "-s -w" "$KUSTOMIZE_MOD@v$KUSTOMIZE_VERSION") ||
    die "go install $KUSTOMIZE_MOD@v$KUSTOMIZE_VERSION failed (try KNS_KUSTOMIZE_VERSION=<another 5.x.y>)"
  mv -f "$work/gobin/kustomize" "$kustomize_bin"
  log "built $kustomize_bin in $((SECONDS - start))s"
fi

# --- The manifests ---------------------------------------------------------------------------------
mod_download "$KUEUE_MOD" "v$KUEUE_VERSION" ||
  die "cannot download $KUEUE_MOD@v$KUEUE_VERSION from the Go module proxy (try KNS_KUEUE_VERSION=<another 0.x.y>)"
kueue_commit=$MOD_HASH
[[ -d $MOD_DIR/config/default ]] || die "$KUEUE_MOD@v$KUEUE_VERSION has no config/default"
mkdir -p "$work/kueue"
cp -r "$MOD_DIR/config" "$work/kueue/config"
chmod -R u+w "$work/kueue"
(cd "$work/kueue/config/components/manager" && "$kustomize_bin" edit set image "controller=$image") ||
  die "kustomize edit set image failed"
"$kustomize_bin" build "$work/kueue/config/default" -o "$work/manifests.yaml" ||
  die "kustomize build config/default failed"
grep -q "image: $image\$" "$work/manifests.yaml" || die "the built manifests do not use $image"
sum=$(sha256sum "$work/manifests.yaml" | cut -d' ' -f1)
kinds=$(awk '/^kind: / { n[$2]++ } END { for (k in n) printf "%s %d\n", k, n[k] }' "$work/manifests.yaml" | sort |
  awk '{ printf "%s%s %s", sep, $2, $1; sep = ", " }')

cat >"$work/README.md" <<EOF
# Kueue v$KUEUE_VERSION install manifests (vendored)

\`manifests.yaml\` is upstream's install of Kueue v$KUEUE_VERSION, which the program applies
for \`install: true\` (nothing is downloaded when it runs). Made by \`scripts/vendor-kueue.sh\`
(versions in \`versions.env\`), the way upstream's release makes its \`manifests.yaml\`
(Makefile targets \`prepare-manifests\` and \`artifacts\`), inside the Go module
\`$KUEUE_MOD@v$KUEUE_VERSION\` (commit ${kueue_commit/#-/unknown}) from the Go module proxy:

    cd config/components/manager && kustomize edit set image controller=$image
    kustomize build config/default -o manifests.yaml

with kustomize v$KUSTOMIZE_VERSION (\`$KUSTOMIZE_MOD\`, built from its Go module).

sha256 of manifests.yaml: \`$sum\`

$(fold -s -w 90 <<<"Contents: $kinds." | sed 's/ *$//')

The controller image is \`$image\`.

Certificates: upstream's default, Kueue's internal certificate management (the manager
writes its webhook certificate to the Secret \`kueue-webhook-server-cert\` and injects the
CA into its webhook configurations and the conversion webhooks of its CRDs; the visibility
APIServices are \`insecureSkipTLSVerify\`, as upstream ships them); no cert-manager, no
network beyond the module proxy.

\`scripts/vendor-kueue.sh --check\` makes it again and compares.
EOF

if ((check)); then
  for f in manifests.yaml README.md; do
    cmp -s "$work/$f" "$out_dir/$f" || die "$out_dir/$f differs from what scripts/vendor-kueue.sh makes now"
  done
  log "$out_dir is what scripts/vendor-kueue.sh makes (sha256 $sum)"
  exit 0
fi
mkdir -p "$out_dir"
cp "$work/manifests.yaml" "$work/README.md" "$out_dir/"
log "wrote $out_dir/manifests.yaml (sha256 $sum) and README.md"
printf '%s\n' "$out_dir"
